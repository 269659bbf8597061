"""The artifact store in S3 (kept/s3.py) against a real S3 server, SeaweedFS (seaweedfs.py):
the bytes checked by the store itself, nothing overwritten, large files in parts, damage
found and repaired, the incomplete uploads of writers killed mid-upload aborted; the
commands that write (publish, yank, purge, check) with --artifacts s3://...; a store out of
reach or refusing the credentials; downloads in the three ways; and without boto3, one line
saying how to install it."""

import hashlib
import os
import signal
import subprocess
import sys
import time
import tracemalloc
import types
import urllib.error
import urllib.request

import pytest
import webtest

import seaweedfs
from buildshelf import cli, server
from buildshelf import store as store_module
from buildshelf.kept import objects, s3, s3_parts, stores
from helpers import build_in_file, eventually

pytestmark = pytest.mark.system
s3_server, s3_env = seaweedfs.s3_server, seaweedfs.s3_env  # the fixtures
API = "/api/v2"


@pytest.fixture
def bucket(s3_env):
    return f"s3://{s3_env.bucket()}/kept"


@pytest.fixture
def jar(tmp_path):
    path = tmp_path / "alpha-9.jar"
    path.write_bytes(b"PK\x03\x04 a jar's bytes " * 100)
    return path


def sha(data):
    return hashlib.sha256(data).hexdigest()


def publish(data_dir, bucket, number, *flags):
    return cli.main(["publish", "alpha", "--data", str(data_dir), "--artifacts", bucket,
                     "--build", str(number), "--channel", "1.21",
                     "--timestamp", "1700000000000", *flags])  # fmt: skip


def test_a_file_goes_up_checked_and_a_retry_is_a_no_op(bucket, jar):
    store = stores.opened(bucket)
    stored = store.store_file(str(jar))
    digest = sha(jar.read_bytes())
    assert (stored.sha256, stored.size, stored.created) == (digest, jar.stat().st_size, True)
    assert stored.path == f"{bucket}/{digest[:2]}/{digest}"
    head = store.head(digest)
    assert head["ChecksumSHA256"] == s3_parts.b64(bytes.fromhex(digest))  # the store's own
    assert store.objects() == {digest: jar.stat().st_size}
    assert store.verify(digest, stored.size) is None and store.rehash(digest) is None
    again = store.store_file(str(jar))
    assert (again.created, again.repaired) == (False, None)


def test_a_large_file_goes_up_in_parts_and_is_verified_by_reading(bucket, tmp_path):
    big = tmp_path / "big.jar"
    big.write_bytes(os.urandom(s3_parts.PART_BYTES * 2 + 12345))
    store = stores.opened(bucket)
    stored = store.store_file(str(big))
    head = store.head(stored.sha256)
    assert head["ChecksumSHA256"].endswith("-3")  # three parts, each checked by the store
    with open(big, "rb") as f:
        assert head["ChecksumSHA256"] == s3_parts.parts_checksum(f, stored.size)
    assert store.rehash(stored.sha256) is None
    assert store.store_file(str(big)).created is False


class Parts:
    """A client that takes a multipart upload's parts and keeps none: the most memory
    Python held while each was sent, in `peaks`."""

    def __init__(self):
        self.peaks = []

    def create_multipart_upload(self, **params):
        return {"UploadId": "u"}

    def upload_part(self, Body, PartNumber, **params):
        self.peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.reset_peak()
        return {"ETag": f'"{PartNumber}"'}

    def complete_multipart_upload(self, MultipartUpload, **params):
        self.completed = [part["PartNumber"] for part in MultipartUpload["Parts"]]


def test_a_large_file_is_sent_holding_at_most_the_parts_in_flight(tmp_path):
    path = tmp_path / "big.jar"
    path.write_bytes(os.urandom(s3_parts.PART_BYTES * 3 + 1))
    data = path.read_bytes()
    client = Parts()
    tracemalloc.start()
    try:
        with open(path, "rb") as f:
            assert s3_parts.send(client, "b", "k", f, sha(data), len(data)) is True
    finally:
        tracemalloc.stop()
    del data
    # Each part read (into one buffer), then sent; the next read once fewer are in flight.
    assert len(client.peaks) == 4 and client.completed == [1, 2, 3, 4]
    assert max(client.peaks) < s3_parts.PART_BYTES * (s3_parts.IN_FLIGHT + 0.25), client.peaks


class Damaging:
    """A client that changes one byte of every body after its checksum was made: what a
    faulty network or proxy would do."""

    def __init__(self, client):
        self.client = client

    def __getattr__(self, name):
        call = getattr(self.client, name)
        if name not in ("put_object", "upload_part"):
            return call

        def damaged(**params):
            body = bytearray(params["Body"])
            body[0] ^= 1
            return call(**dict(params, Body=bytes(body)))

        return damaged


@pytest.mark.parametrize("size", [1000, s3_parts.PART_BYTES + 1], ids=["one put", "parts"])
def test_the_store_itself_refuses_bytes_changed_on_the_way(s3_env, size, tmp_path):
    where = f"s3://{s3_env.bucket()}"
    store = s3.S3Store(where, client=Damaging(s3_env.client()))
    path = tmp_path / "a.jar"
    path.write_bytes(os.urandom(size))
    with pytest.raises(objects.Refused) as refused:
        store.store_file(str(path))
    assert "do not hash to" in str(refused.value) and "nothing was stored" in str(refused.value)
    assert stores.opened(where).objects() == {}
    assert s3_env.client().list_multipart_uploads(Bucket=where[5:]).get("Uploads") is None


# A publish that sends the first part of its file, then waits to be killed.
KILLED_MID_UPLOAD = """
import signal, sys
from buildshelf import cli
from buildshelf.kept import s3_parts
every_part = s3_parts._parts
def first_part_then_stop(file, size, whole):
    yield next(every_part(file, size, whole))
    signal.pause()
s3_parts._parts = first_part_then_stop
sys.exit(cli.main(sys.argv[1:]))
"""


def killed_mid_upload(data_dir, bucket, path):
    """A publish of `path` into `bucket` killed once the store has its first part: its
    incomplete upload's (key, upload id)."""
    store = stores.opened(bucket)
    argv = [sys.executable, "-c", KILLED_MID_UPLOAD, "publish", "alpha", "--data", str(data_dir),
            "--artifacts", bucket, "--build", "9", "--channel", "1.21", "--file", str(path)]  # fmt: skip
    proc = subprocess.Popen(argv)

    def a_part_sent():
        assert proc.poll() is None, "the publish ended before it was killed"
        for upload in uploads(store):
            parts = store.client.list_parts(Bucket=store.bucket, **dict(upload))
            if parts.get("Parts"):
                return upload
        return None

    try:
        return eventually(a_part_sent, seconds=60)
    finally:
        proc.kill()
        assert proc.wait(timeout=60) == -signal.SIGKILL


def uploads(store, prefix=""):
    """(("Key", key), ("UploadId", id)) of each incomplete multipart upload of `store`'s bucket."""
    listed = store.client.list_multipart_uploads(Bucket=store.bucket, Prefix=prefix)
    return [(("Key", u["Key"]), ("UploadId", u["UploadId"])) for u in listed.get("Uploads", ())]


def an_hour_later(monkeypatch):
    """s3.py's clock an hour ahead (and only its: botocore signs with the real one)."""
    later = types.SimpleNamespace(time=lambda: time.time() + 3601, monotonic=time.monotonic)
    monkeypatch.setattr(s3, "time", later)


def test_an_upload_a_killed_publish_left_is_aborted_an_hour_later(
    data_dir, bucket, tmp_path, monkeypatch
):
    big = tmp_path / "big.jar"
    big.write_bytes(os.urandom(s3_parts.PART_BYTES * 2 + 1))
    digest = sha(big.read_bytes())
    left = killed_mid_upload(data_dir, bucket, big)
    store = stores.opened(bucket)
    assert dict(left)["Key"] == store.key(digest) and store.objects() == {}
    # Not its writer's for an hour yet: it may be alive, sending slowly.
    assert store.remove_stale() == [] and uploads(store) == [left]
    # Not ours: another prefix's, and a key under ours that is no object's.
    others = [store.client.create_multipart_upload(Bucket=store.bucket, Key=key)["Key"]
              for key in ("elsewhere/ab/" + digest, "kept/notes.txt")]  # fmt: skip
    # An hour later, the next large publish aborts it before it begins its own.
    an_hour_later(monkeypatch)
    stored = store.store_file(str(big))
    assert stored.created and store.objects() == {digest: big.stat().st_size}
    assert sorted(dict(u)["Key"] for u in uploads(store)) == sorted(others)


def test_check_prune_aborts_the_uploads_of_writers_gone(
    data_dir, bucket, tmp_path, monkeypatch, capsys
):
    big = tmp_path / "big.jar"
    big.write_bytes(os.urandom(s3_parts.PART_BYTES + 1))
    left = killed_mid_upload(data_dir, bucket, big)
    store = stores.opened(bucket)
    name = f"{bucket}/{dict(left)['Key'].removeprefix('kept/')}"
    data = ["--data", str(data_dir), "--artifacts", bucket]
    capsys.readouterr()
    assert cli.main(["check", *data, "--prune"]) == 0
    assert name not in capsys.readouterr().out and uploads(store) == [left]
    an_hour_later(monkeypatch)
    assert cli.main(["check", *data, "--prune", "--dry-run"]) == 0
    said = f"the incomplete upload {name}, left by a writer that is gone\n"
    assert capsys.readouterr().out == "would delete " + said and uploads(store) == [left]
    assert cli.main(["check", *data, "--prune"]) == 0
    assert capsys.readouterr().out == "deleted " + said and uploads(store) == []


def test_if_none_match_keeps_an_object_from_being_overwritten(bucket, jar):
    store = stores.opened(bucket)
    digest = sha(jar.read_bytes())
    store.store_file(str(jar))
    with open(jar, "rb") as f:
        made = s3_parts.send(
            store.client, store.bucket, store.key(digest), f, digest, jar.stat().st_size
        )
    assert made is False  # the store said 412: another writer made it first


def test_a_damaged_object_is_found_and_a_retry_repairs_it(data_dir, bucket, jar, capsys):
    assert publish(data_dir, bucket, 9, "--file", str(jar)) == 0
    store = stores.opened(bucket)
    digest = sha(jar.read_bytes())
    other = bytes(b ^ 1 for b in jar.read_bytes())  # same size, other bytes
    store.client.put_object(Bucket=store.bucket, Key=store.key(digest), Body=other,
                            ChecksumSHA256=s3_parts.b64(hashlib.sha256(other).digest()))  # fmt: skip
    capsys.readouterr()
    assert cli.main(["check", "--data", str(data_dir), "--artifacts", bucket, "--verify"]) == 1
    assert f"its object holds other bytes: the store's sha256 of them is {sha(other)}" in (
        capsys.readouterr().out
    )
    assert publish(data_dir, bucket, 9, "--file", str(jar)) == 0
    assert "repaired s3://" in capsys.readouterr().out
    assert store.rehash(digest) is None


def test_the_writing_commands_keep_and_delete_in_the_bucket(data_dir, bucket, jar, capsys):
    assert publish(data_dir, bucket, 9, "--file", str(jar)) == 0
    digest = sha(jar.read_bytes())
    assert build_in_file(data_dir, 9)["sha256"] == digest
    data = ["--data", str(data_dir), "--artifacts", bucket]
    assert cli.main(["check", *data, "--verify"]) == 0
    store = stores.opened(bucket)
    store.store_stream(iter([b"unused", b""]).__next__, "unused")
    capsys.readouterr()
    assert cli.main(["check", *data, "--prune", "--dry-run"]) == 0
    assert "would delete s3://" in capsys.readouterr().out and len(store.objects()) == 2
    assert cli.main(["check", *data, "--prune"]) == 0
    assert store.objects() == {digest: jar.stat().st_size}
    assert cli.main(["yank", "alpha", "9", *data]) == 0
    assert cli.main(["purge", "--older-than", "0", "--dry-run", *data]) == 0
    assert f"would delete {bucket}/{digest[:2]}/{digest}" in capsys.readouterr().out
    assert cli.main(["purge", "--older-than", "0", *data]) == 0
    assert store.objects() == {}


@pytest.mark.parametrize("trouble", ["down", "wrong secret"])
def test_a_store_out_of_reach_fails_a_publish_in_one_line_naming_no_secret(
    data_dir, s3_env, jar, capsys, monkeypatch, trouble
):
    where = f"s3://{s3_env.bucket()}"
    before = (data_dir / "alpha.json").read_bytes()
    if trouble == "down":
        monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    else:
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    assert publish(data_dir, where, 9, "--file", str(jar)) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("buildshelf publish: cannot ")
    assert s3_env.secret_key not in err and "not-the-secret" not in err
    assert (data_dir / "alpha.json").read_bytes() == before


def test_without_boto3_s3_says_how_to_install_it(data_dir, monkeypatch, capsys):
    real = stores.importlib.util.find_spec
    monkeypatch.setattr(
        stores.importlib.util, "find_spec", lambda name: None if name == "boto3" else real(name)
    )
    with pytest.raises(SystemExit) as exit:
        cli.main(["check", "--data", str(data_dir), "--artifacts", "s3://bucket"])
    assert exit.value.code == 1
    assert capsys.readouterr().err == (
        "buildshelf: --artifacts s3://bucket needs boto3, which is not installed: "
        "pip install 'buildshelf[s3]'\n"
    )


def app_of(data_dir, bucket, mode=None, public=None):
    data = store_module.Store(data_dir, check_interval=0, artifacts_dir=bucket)
    return data, webtest.TestApp(
        server.make_app(data, artifacts_downloads=mode, artifacts_public_url=public)
    )


def download_path(client, number=9):
    build = client.get(API + "/builds/latest?project=alpha&channel=1.21").json
    return build["downloadUrl"].removeprefix("http://127.0.0.1:8080")


def test_redirect_answers_a_presigned_get_that_expires(data_dir, bucket, jar, monkeypatch):
    assert publish(data_dir, bucket, 9, "--file", str(jar)) == 0
    _, client = app_of(data_dir, bucket)
    path = download_path(client)
    monkeypatch.setattr(s3, "PRESIGNED_SECONDS", 1)
    got = client.get(path, status=302)
    assert got.headers["Cache-Control"] == "no-store"
    with urllib.request.urlopen(got.location) as answer:
        assert answer.read() == jar.read_bytes()
        assert answer.headers["Content-Disposition"] == 'attachment; filename="alpha-9.jar"'
    time.sleep(2.1)
    with pytest.raises(urllib.error.HTTPError) as expired:
        urllib.request.urlopen(got.location)
    assert expired.value.code == 403
    assert client.get(path + ".sha256").text == f"{sha(jar.read_bytes())}  alpha-9.jar\n"
    assert cli.main(["yank", "alpha", "9", "--data", str(data_dir), "--artifacts", bucket]) == 0
    _, client = app_of(data_dir, bucket)
    assert client.get(path, status=410).json["code"] == "build_yanked"


def test_public_names_the_public_copy(data_dir, bucket, jar):
    assert publish(data_dir, bucket, 9, "--file", str(jar)) == 0
    digest = sha(jar.read_bytes())
    _, client = app_of(data_dir, bucket, "public", "https://cdn.example.org")
    build = client.get(API + "/builds/latest?project=alpha&channel=1.21").json
    assert build["downloadUrl"] == f"https://cdn.example.org/kept/{digest[:2]}/{digest}"
    path = f"/downloads/alpha/9/{digest}/alpha-9.jar"
    assert client.get(path, status=302).location == build["downloadUrl"]


def test_proxy_streams_with_ranges_and_validators(data_dir, bucket, jar):
    assert publish(data_dir, bucket, 9, "--file", str(jar)) == 0
    digest, body = sha(jar.read_bytes()), jar.read_bytes()
    _, client = app_of(data_dir, bucket, "proxy")
    path = download_path(client)
    whole = client.get(path)
    assert whole.body == body and whole.headers["ETag"] == f'"{digest}"'
    part = client.get(path, headers={"Range": "bytes=10-19"}, status=206)
    assert part.body == body[10:20] and part.headers["Content-Range"] == f"bytes 10-19/{len(body)}"
    stale = client.get(path, headers={"Range": "bytes=10-19", "If-Range": '"other"'})
    assert stale.status_int == 200 and stale.body == body
    client.get(path, headers={"If-None-Match": f'"{digest}"'}, status=304)


def test_a_store_down_answers_downloads_503_and_healthz_degraded(
    data_dir, bucket, jar, monkeypatch
):
    assert publish(data_dir, bucket, 9, "--file", str(jar)) == 0
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    for mode in ("proxy", "redirect"):
        data, client = app_of(data_dir, bucket, mode)
        data.refresh()
        path = download_path(client)  # the JSON reads go on
        got = client.get(path, status=503).json
        assert got["code"] == "artifact_unavailable"
        health = client.get("/healthz").json
        assert health["status"] == "degraded"
        assert "cannot be looked at" in health["unavailableFiles"][0]["problem"]
        assert os.environ["AWS_SECRET_ACCESS_KEY"] not in str(health)


def test_a_move_to_a_bucket_and_back_copies_verifies_and_resumes(
    data_dir, bucket, jar, tmp_path, capsys
):
    assert publish(data_dir, str(data_dir / "artifacts"), 9, "--file", str(jar)) == 0
    second = tmp_path / "b.jar"
    second.write_bytes(b"another file")
    assert publish(data_dir, str(data_dir / "artifacts"), 10, "--file", str(second)) == 0
    local = stores.opened(str(data_dir / "artifacts"))
    [first, _] = sorted(local.objects())
    # An interrupted copy: one object there already.
    stores.opened(bucket).store_file(local.name(first))
    capsys.readouterr()
    move = ["artifacts", "copy", "--data", str(data_dir)]
    assert cli.main([*move, "--from", str(data_dir / "artifacts"), "--to", bucket]) == 0
    assert capsys.readouterr().out.endswith("copied 1 object from " + str(data_dir / "artifacts")
                                            + f" to {bucket}; 1 object already there\n")  # fmt: skip
    assert stores.opened(bucket).objects() == local.objects()
    assert cli.main(["check", "--data", str(data_dir), "--artifacts", bucket, "--verify"]) == 0
    back = tmp_path / "back"
    assert cli.main([*move, "--from", bucket, "--to", str(back)]) == 0
    assert stores.opened(str(back)).objects() == local.objects()
    assert cli.main(["check", "--data", str(data_dir), "--artifacts", str(back), "--verify"]) == 0
    # A source object that does not hash to its name is not copied, and said.
    store = stores.opened(bucket)
    damaged = b"x" * local.objects()[first]
    store.client.delete_object(Bucket=store.bucket, Key=store.key(first))
    store.client.put_object(Bucket=store.bucket, Key=store.key(first), Body=damaged)
    elsewhere = tmp_path / "elsewhere"
    capsys.readouterr()
    assert cli.main([*move, "--from", bucket, "--to", str(elsewhere)]) == 1
    assert "not copied: sha256 mismatch" in capsys.readouterr().out
    assert first not in stores.opened(str(elsewhere)).objects()


def test_a_build_s_extra_files_are_kept_checked_served_and_purged_in_s3(
    data_dir, bucket, jar, tmp_path, capsys
):
    extra = tmp_path / "alpha-9-mojmap.jar"
    extra.write_bytes(b"the mojmap jar's bytes")
    flags = ("--file", str(jar), "--extra-file", f"server:mojmap={extra}")
    assert publish(data_dir, bucket, 9, *flags) == 0
    store = stores.opened(bucket)
    assert set(store.objects()) == {sha(jar.read_bytes()), sha(extra.read_bytes())}
    data, client = app_of(data_dir, bucket, "proxy")
    data.refresh()
    build = client.get(API + "/builds/latest?project=alpha&channel=1.21").json
    url = build["downloads"]["server:mojmap"]["url"]
    got = client.get(url.removeprefix("http://127.0.0.1:8080"), status=200)
    assert got.body == extra.read_bytes()
    # check --verify looks at every kept file: the extra's object gone is said, by its name.
    store.remove([sha(extra.read_bytes())])
    capsys.readouterr()
    assert cli.main(["check", "--data", str(data_dir), "--artifacts", bucket, "--verify"]) == 1
    assert "build 9, file alpha-9-mojmap.jar: its object is missing" in capsys.readouterr().out
    assert publish(data_dir, bucket, 9, *flags) == 0  # the retry puts it back
    assert cli.main(["yank", "alpha", "9", "--data", str(data_dir), "--artifacts", bucket,
                     "--purge"]) == 0  # fmt: skip
    assert store.objects() == {}
