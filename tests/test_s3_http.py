"""The S3 store (kept/s3.py) behind the server and the commands that feed it, against a real
S3 server, SeaweedFS (seaweedfs.py): an HTTP publish lands in the bucket, checked, and is
downloaded in each of the three ways; a store that is down or refuses the credentials
answers an HTTP publish and a download with a JSON 503 while the JSON reads go on;
`import-jenkins --mirror` keeps its downloads in the bucket; no credential shows in
anything the commands or the server say; and with public downloads, every place that names a
kept file names the same public URL."""

import hashlib
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from contextlib import contextmanager
from urllib.parse import urlsplit

import pytest
import webtest

import seaweedfs
from buildshelf import cli, server
from buildshelf import store as store_module
from buildshelf.kept import s3_parts, stores
from buildshelf.publishing import tokens
from buildshelf.publishing.credentials import Credentials
from buildshelf.writing import writer
from helpers import FREESTYLE, build_in_file, eventually, free_port, server_argv, wait_for_port
from webhook_receiver import Receiver

pytestmark = pytest.mark.system
s3_server, s3_env = seaweedfs.s3_server, seaweedfs.s3_env  # the fixtures
API = "/api/v2"
JAR = b"PK\x03\x04 a jar sent over HTTP " * 200
JAR_SHA = hashlib.sha256(JAR).hexdigest()
BOUNDARY = "s3-test-boundary"
DOWN = "http://127.0.0.1:9"  # nothing listens there: a store that is down


def sha(data):
    return hashlib.sha256(data).hexdigest()


def publish_form(timestamp=1700000009000, data=JAR, name="alpha-9.jar"):
    """(content type, body) of an HTTP publish: the build's JSON and its file."""
    build = json.dumps({"channelVersion": "1.21", "timestamp": timestamp}).encode()
    body = b""
    for disposition, value in (('name="build"', build), (f'name="file"; filename="{name}"', data)):
        body += f"--{BOUNDARY}\r\nContent-Disposition: form-data; {disposition}\r\n\r\n".encode()
        body += value + b"\r\n"
    return f"multipart/form-data; boundary={BOUNDARY}", body + f"--{BOUNDARY}--\r\n".encode()


def request(port, method, path, body=None, headers=None):
    """(status, headers, body) of one request to 127.0.0.1:`port`, no redirect followed."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        answer = connection.getresponse()
        return answer.status, answer.headers, answer.read()
    finally:
        connection.close()


def put_build(port, token, number=9):
    content_type, body = publish_form()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": content_type}
    return request(port, "PUT", f"{API}/projects/alpha/builds/{number}", body, headers)


@contextmanager
def serving(data_dir, log_path, *flags):
    """`python server.py` over `data_dir` with `flags`, its log (stderr) in `log_path`: its
    port, once it accepts connections. Stopped with SIGINT at the end."""
    port = free_port()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(server_argv(data_dir, "--port", str(port), *flags), stderr=log)
        try:
            if not wait_for_port(port, proc):
                pytest.fail(f"the server did not start: {log_path.read_text()}")
            yield port
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def state(tmp_path):
    return str(tmp_path / "state")


@pytest.mark.parametrize("mode", ["redirect", "public", "proxy"])
def test_an_http_publish_lands_in_the_bucket_and_is_downloaded(
    data_dir, s3_env, state, tmp_path, mode
):
    if mode == "public":
        where = s3_env.public_prefix()
        flags = ("--artifacts-public-url", f"{s3_env.endpoint}/{seaweedfs.PUBLIC_BUCKET}")
    else:
        where, flags = f"s3://{s3_env.bucket()}/kept", ()
    bucket, prefix = where.removeprefix("s3://").split("/", 1)
    _, token = tokens.create(state, "alpha", 90, "ci")
    argv = ("--state", state, "--artifacts", where, "--artifacts-downloads", mode, *flags)
    with serving(data_dir, tmp_path / "server.log", *argv) as port:
        status, _, body = put_build(port, token)
        assert status == 201, body
        assert json.loads(body)["sha256"] == JAR_SHA
        # In the bucket under its sha256, which the store itself checked.
        key = f"{prefix}/{JAR_SHA[:2]}/{JAR_SHA}"
        head = s3_env.client().head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
        assert head["ChecksumSHA256"] == s3_parts.b64(bytes.fromhex(JAR_SHA))
        assert s3_env.client().get_object(Bucket=bucket, Key=key)["Body"].read() == JAR
        assert build_in_file(data_dir, 9)["sha256"] == JAR_SHA
        status, _, body = request(port, "GET", f"{API}/builds/latest?project=alpha")
        served = json.loads(body)
        assert (status, served["buildNumber"], served["sha256"]) == (200, 9, JAR_SHA)
        url = served["downloadUrl"]
        ours = f"/downloads/alpha/9/{JAR_SHA}/alpha-9.jar"
        if mode == "redirect":
            assert urlsplit(url).path == ours
            status, headers, _ = request(port, "GET", ours)
            assert status == 302
            assert urlsplit(headers["Location"]).netloc == urlsplit(s3_env.endpoint).netloc
            with urllib.request.urlopen(headers["Location"]) as got:
                assert got.read() == JAR
        elif mode == "public":
            assert url == f"{s3_env.endpoint}/{seaweedfs.PUBLIC_BUCKET}/{key}"
            with urllib.request.urlopen(url) as got:  # no credential: a public bucket
                assert got.read() == JAR
            status, headers, _ = request(port, "GET", ours)
            assert (status, headers["Location"]) == (302, url)
        else:
            status, headers, body = request(port, "GET", urlsplit(url).path)
            assert (status, body, headers["ETag"]) == (200, JAR, f'"{JAR_SHA}"')
            status, _, body = request(port, "GET", ours, headers={"Range": "bytes=5-9"})
            assert (status, body) == (206, JAR[5:10])


@pytest.mark.parametrize("trouble", ["down", "wrong secret"])
def test_a_store_out_of_reach_answers_503s_and_the_reads_go_on(
    data_dir, s3_env, state, monkeypatch, trouble
):
    where = f"s3://{s3_env.bucket()}/kept"
    jar = data_dir.parent / "alpha-9.jar"
    jar.write_bytes(JAR)
    assert cli.main(["publish", "alpha", "--data", str(data_dir), "--artifacts", where,
                     "--build", "9", "--channel", "1.21", "--file", str(jar)]) == 0  # fmt: skip
    if trouble == "down":
        monkeypatch.setenv("AWS_ENDPOINT_URL", DOWN)
    else:
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    _, token = tokens.create(state, "alpha", 90, "ci")
    data = store_module.Store(data_dir, check_interval=0, artifacts_dir=where)
    data.refresh()
    credentials = Credentials(state, "https://issuer.invalid", "http://127.0.0.1:8080")
    client = webtest.TestApp(server.make_app(data, credentials=credentials))
    before = (data_dir / "alpha.json").read_bytes()

    content_type, body = publish_form(1700000010000, JAR + b"10", "alpha-10.jar")
    headers = {"Authorization": f"Bearer {token}", "Content-Type": content_type}
    refused = client.put(f"{API}/projects/alpha/builds/10", body, headers=headers, status=503)
    assert refused.content_type == "application/json"
    assert refused.json == {
        "error": "the artifact store is unavailable: nothing was written; try again later",
        "code": "artifact_store_unavailable",
    }
    assert (data_dir / "alpha.json").read_bytes() == before
    # The JSON reads go on; the file's download and /healthz say what is wrong.
    latest = client.get(f"{API}/builds/latest?project=alpha&channel=1.21").json
    assert latest["buildNumber"] == 9
    got = client.get(latest["downloadUrl"].removeprefix("http://127.0.0.1:8080"), status=503)
    assert got.content_type == "application/json" and got.json["code"] == "artifact_unavailable"
    health = client.get("/healthz").json
    assert health["status"] == "degraded"
    [unavailable] = health["unavailableFiles"]
    assert unavailable["build"] == 9 and "cannot be looked at" in unavailable["problem"]
    if trouble == "wrong secret":
        assert "are the bucket and the credentials right?" in unavailable["problem"]


# The freestyle job's artifacts of builds 21 and 25 (the only ones --mirror keeps).
A21 = "/job/Alpha/21/artifact/build/libs/alpha-1.21.4-21.jar"
A25 = "/job/Alpha/25/artifact/build/libs/alpha-1.21.5-25.jar"
JAR21, JAR25 = b"PK\x03\x04 twenty-one " * 3000, b"PK\x03\x04 twenty-five " * 5000


def test_import_jenkins_mirror_keeps_its_downloads_in_the_bucket(
    data_dir, s3_env, fake_jenkins, tmp_path, capsys
):
    where = f"s3://{s3_env.bucket()}/kept"
    job = "https://ci.example.org/job/Alpha/"
    writer.add_project(str(data_dir), "canvas", "Alpha", job, "https://jd.example.org/canvas/")
    fake_jenkins.routes.update({A21: JAR21, A25: JAR25})
    with open(FREESTYLE, "rb") as f:
        saved = f.read().replace(b"https://ci.example.org", fake_jenkins.base.encode())
    (tmp_path / "job.json").write_bytes(saved)
    data = ["--data", str(data_dir), "--artifacts", where]
    assert cli.main(["import-jenkins", "canvas", "--job-json", str(tmp_path / "job.json"),
                     "--mirror", "--timeout", "5", *data]) == 0  # fmt: skip
    assert capsys.readouterr().out.splitlines() == [
        f"added build 25: channel 1.21.5, experimental, kept as alpha-1.21.5-25.jar "
        f"({len(JAR25):,} bytes)",
        f"added build 21: channel 1.21.4, kept as alpha-1.21.4-21.jar ({len(JAR21):,} bytes)",
    ]
    store = stores.opened(where)
    assert store.objects() == {sha(JAR21): len(JAR21), sha(JAR25): len(JAR25)}
    for body in (JAR21, JAR25):
        head = store.head(sha(body))  # the store's own sha256 of the bytes it was sent
        assert head["ChecksumSHA256"] == s3_parts.b64(bytes.fromhex(sha(body)))
        got = store.client.get_object(Bucket=store.bucket, Key=store.key(sha(body)))
        assert got["Body"].read() == body
    builds = json.loads((data_dir / "canvas.json").read_text())["builds"]
    assert {b["buildNumber"]: b["sha256"] for b in builds} == {21: sha(JAR21), 25: sha(JAR25)}
    assert cli.main(["check", *data, "--verify"]) == 0
    assert "unused" not in capsys.readouterr().out


ACCESS_KEY_SEEN = "AKIDWRONGEXAMPLE7Q3Z"  # distinctive, to be looked for in every output
SECRET_SEEN = "wrongSecret/K7MDENG+bPxRfiCYzz9Q3"


def command(*argv):
    """The `buildshelf` command's (exit status, stdout + stderr), run in a process."""
    done = subprocess.run([sys.executable, "-m", "buildshelf", *argv], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("trouble", ["none", "wrong credentials", "down"])
def test_no_credential_shows_in_what_the_commands_and_the_server_say(
    data_dir, s3_env, state, tmp_path, monkeypatch, trouble
):
    where = f"s3://{s3_env.bucket()}/kept"
    jar = tmp_path / "alpha-9.jar"
    jar.write_bytes(JAR)
    # The good credentials are as distinctive: the session's AKTEST<hex> and a random secret.
    said = []
    code, out = command("publish", "alpha", "--data", str(data_dir), "--artifacts", where,
                        "--build", "9", "--channel", "1.21", "--file", str(jar))  # fmt: skip
    assert code == 0, out
    if trouble == "wrong credentials":
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY_SEEN)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_SEEN)
    elif trouble == "down":
        monkeypatch.setenv("AWS_ENDPOINT_URL", DOWN)
    failing = trouble != "none"
    data = ("--data", str(data_dir), "--artifacts", where)
    code, out = command("publish", "alpha", *data, "--build", "10", "--channel", "1.21",
                        "--file", str(jar))  # fmt: skip
    assert code == (1 if failing else 0), out
    said.append(out)
    code, out = command("check", *data, "--verify", "--verbose")
    assert code == (1 if failing else 0), out
    said.append(out)
    _, token = tokens.create(state, "alpha", 90, "ci")
    log = tmp_path / "server.log"
    with serving(data_dir, log, "--state", state, "--artifacts", where) as port:
        status, _, body = put_build(port, token, 11)
        assert status == (503 if failing else 201), body
        said.append(body.decode())
        status, _, body = request(port, "GET", f"/downloads/alpha/9/{JAR_SHA}/alpha-9.jar")
        said.append(body.decode())

        def health():
            status, _, body = request(port, "GET", "/healthz")
            report = json.loads(body)
            return body if (report["status"] == "degraded") == failing else None

        said.append(eventually(health).decode())
        said.append(request(port, "GET", "/metrics")[2].decode())
    said.append(log.read_text())
    everything = "\n".join(said)
    for credential in (s3_env.access_key, s3_env.secret_key, ACCESS_KEY_SEEN, SECRET_SEEN):
        assert credential not in everything
    assert os.environ["AWS_SECRET_ACCESS_KEY"] not in everything


def test_public_downloads_are_named_alike_wherever_a_build_is_shown(
    data_dir, s3_env, state, tmp_path
):
    """With --artifacts-downloads public, the webhooks (json, Discord, Slack), Fill's v3 API,
    the pages and the feed name a kept file by the URL the API's build JSON names; and the
    pages' checksum links lead to the checksum lines Buildshelf serves."""
    where, public = s3_env.public_prefix(), f"{s3_env.endpoint}/{seaweedfs.PUBLIC_BUCKET}"
    jar, extra = tmp_path / "alpha-9.jar", tmp_path / "alpha-9-mojmap.jar"
    jar.write_bytes(JAR)
    extra.write_bytes(b"the mojmap jar")
    receiver = Receiver()
    os.makedirs(state, mode=0o700)
    targets = os.path.join(state, "webhooks.json")
    with open(targets, "w") as f:
        json.dump({"targets": [
            {"url": receiver.url("/json"), "format": "json", "secret": "whsec_" + "A" * 32},
            {"url": receiver.url("/discord"), "format": "discord"},
            {"url": receiver.url("/slack"), "format": "slack"},
        ]}, f)  # fmt: skip
    os.chmod(targets, 0o600)
    flags = ("--artifacts-downloads", "public", "--artifacts-public-url", public)
    try:
        with serving(data_dir, tmp_path / "server.log", "--state", state, "--artifacts", where,
                     *flags) as port:  # fmt: skip
            assert cli.main(["publish", "alpha", "--data", str(data_dir), "--artifacts", where,
                             "--build", "9", "--channel", "1.21", "--file", str(jar),
                             "--extra-file", f"server:mojmap={extra}"]) == 0  # fmt: skip
            sent = {got.path: got.json for got in receiver.wait_for(3)}

            def get(path):
                status, _, body = request(port, "GET", path)
                assert status == 200, (path, body)
                return body

            api = json.loads(get(f"{API}/builds/latest?project=alpha&channel=1.21"))
            url = api["downloadUrl"]
            assert url == f"{public}/{where.split('/', 3)[3]}/{JAR_SHA[:2]}/{JAR_SHA}"
            urls = {key: file["url"] for key, file in api["downloads"].items()}
            assert urls["server:default"] == url
            payload = sent["/json"]["data"]["build"]
            assert payload["downloadUrl"] == url
            assert {k: f["url"] for k, f in payload["downloads"].items()} == urls
            [embed] = sent["/discord"]["embeds"]
            [link] = [f["value"] for f in embed["fields"] if f["name"] == "Download"]
            assert link.endswith(f"({url})")
            slack = json.dumps(sent["/slack"]["blocks"])
            assert f"<{url}|" in slack
            fill = json.loads(get("/v3/projects/alpha/versions/1.21/builds/9"))
            assert {k: f["url"] for k, f in fill["downloads"].items()} == urls
            page = get("/projects/alpha").decode()
            assert all(f'href="{u}"' in page for u in urls.values())
            feed = get(f"{API}/feed?project=alpha").decode()
            assert f'href="{url}"' in feed
            # The checksum lines are Buildshelf's own: a bucket keeps no FILE.sha256.
            checksums = sorted(set(re.findall(r'href="([^"]+\.sha256)"', page)))
            assert [urlsplit(c).path for c in checksums] == [
                f"/downloads/alpha/9/{sha(extra.read_bytes())}/alpha-9-mojmap.jar.sha256",
                f"/downloads/alpha/9/{JAR_SHA}/alpha-9.jar.sha256",
            ]
            assert get(urlsplit(checksums[1]).path) == f"{JAR_SHA}  alpha-9.jar\n".encode()
    finally:
        receiver.close()
