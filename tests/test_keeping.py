"""Keeping build files: publish --file, retries and replacement, yank, and check, through the
real command line; the files then downloaded through the app."""

import hashlib
import io
import json
import os
import threading
import time

import pytest
import webtest

from buildshelf import cli, server, text
from buildshelf import store as store_module
from buildshelf.kept import artifacts
from helpers import build_in_file, bump_mtime, objects, write_file

API = "/api/v2"


@pytest.fixture
def jar(tmp_path):
    path = tmp_path / "alpha-9.jar"
    path.write_bytes(b"PK\x03\x04 a jar's bytes " * 100)
    return path


def publish(data_dir, number, *flags):
    return cli.main(["publish", "alpha", "--data", str(data_dir), "--build", str(number),
                     "--channel", "1.21", "--timestamp", "1700000000000", *flags])  # fmt: skip


def test_a_kept_file_is_stored_named_and_downloaded(data_dir, jar):
    sha = hashlib.sha256(jar.read_bytes()).hexdigest()
    assert publish(data_dir, 9, "--file", str(jar), "--sha256", sha.upper()) == 0
    assert objects(data_dir) == [sha]
    kept = build_in_file(data_dir, 9)
    assert (kept["file"], kept["sha256"], kept["size"]) == ("alpha-9.jar", sha, jar.stat().st_size)
    assert "downloadUrl" not in kept
    client = webtest.TestApp(server.make_app(store_module.Store(data_dir, check_interval=0)))
    latest = client.get(API + "/builds/latest?project=alpha&channel=1.21").json
    url = latest["downloadUrl"]
    assert url == f"http://127.0.0.1:8080/downloads/alpha/9/{sha}/alpha-9.jar"
    got = client.get(url.removeprefix("http://127.0.0.1:8080"))
    assert got.body == jar.read_bytes() and got.headers["ETag"] == f'"{sha}"'


def test_a_retry_changes_nothing_but_puts_back_a_missing_object(data_dir, jar, capsys):
    assert publish(data_dir, 9, "--file", str(jar)) == 0
    before = (data_dir / "alpha.json").read_bytes()
    [sha] = objects(data_dir)
    path = data_dir / "artifacts" / sha[:2] / sha
    os.unlink(path)
    capsys.readouterr()
    assert publish(data_dir, 9, "--file", str(jar)) == 0
    assert (data_dir / "alpha.json").read_bytes() == before and objects(data_dir) == [sha]
    # Not "nothing changed": the store did.
    assert capsys.readouterr().out == (
        f"build 9 of alpha is already there as given: restored its missing file {path}\n"
    )
    assert publish(data_dir, 9, "--file", str(jar)) == 0
    assert capsys.readouterr().out == (
        "build 9 of alpha is already there as given: nothing changed\n"
    )


def test_another_file_is_refused_without_replace_and_replaces_with_it(data_dir, jar, capsys):
    assert publish(data_dir, 9, "--file", str(jar)) == 0
    [old] = objects(data_dir)
    jar.write_bytes(b"other bytes")
    assert publish(data_dir, 9, "--file", str(jar)) == 1
    assert "build 9 is already there with another sha256, size: give --replace" in (
        capsys.readouterr().err
    )
    assert objects(data_dir) == [old]  # the refused file's object is not left behind
    assert publish(data_dir, 9, "--file", str(jar), "--replace") == 0
    assert objects(data_dir) == [hashlib.sha256(b"other bytes").hexdigest()]


def test_yank_purge_deletes_an_object_no_build_uses(data_dir, jar):
    assert publish(data_dir, 9, "--file", str(jar)) == 0
    assert cli.main(["yank", "alpha", "9", "--purge", "--data", str(data_dir)]) == 0
    assert objects(data_dir) == []


def test_a_hash_mismatch_is_refused_and_stores_nothing(data_dir, jar, capsys):
    before = (data_dir / "alpha.json").read_bytes()
    assert publish(data_dir, 9, "--file", str(jar), "--sha256", "0" * 64) == 1
    assert "sha256 mismatch" in capsys.readouterr().err
    assert objects(data_dir) == [] and (data_dir / "alpha.json").read_bytes() == before


@pytest.mark.parametrize("name", ["with space.jar", ".hidden.jar", "café.jar", "a" * 201 + ".jar"])
def test_a_file_name_outside_the_rule_is_refused(data_dir, tmp_path, name, capsys):
    path = tmp_path / name
    path.write_bytes(b"x")
    assert publish(data_dir, 9, "--file", str(path)) == 1
    assert "a file name must be ASCII letters, digits and . _ + -" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--file", "x.jar", "--size", "3"], "--size goes with --download-url"),
        (["--download-url", "https://x.example/a.jar", "--size", "3"], "--sha256 and --size go together"),
        (["--download-url", "https://x.example/a.jar", "--sha256", "ab", "--size", "3"], "is not a SHA-256"),
        (["--download-url", "https://x.example/a.jar", "--sha256", "0" * 64, "--size", "3.5"], "is not a size in bytes"),
    ],
)  # fmt: skip
def test_bad_integrity_flags_are_bad_usage(data_dir, flags, message, capsys):
    with pytest.raises(SystemExit) as raised:
        publish(data_dir, 9, *flags)
    assert raised.value.code == 2 and message in capsys.readouterr().err


def test_integrity_data_of_a_file_kept_elsewhere_is_recorded(data_dir):
    flags = ["--download-url", "https://x.example/a.jar", "--sha256", "ab" * 32, "--size", "3"]
    assert publish(data_dir, 9, *flags) == 0
    kept = build_in_file(data_dir, 9)
    assert (kept["sha256"], kept["size"], "file" in kept) == ("ab" * 32, 3, False)


def test_check_reports_missing_changed_and_unused_objects(data_dir, jar, capsys):
    assert publish(data_dir, 9, "--file", str(jar)) == 0
    [sha] = objects(data_dir)
    object_path = data_dir / "artifacts" / sha[:2] / sha
    check = ["check", "--data", str(data_dir)]
    assert cli.main(check) == 0
    os.chmod(object_path, 0o644)
    object_path.write_bytes(object_path.read_bytes()[:-1] + b"!")  # same size, other bytes
    assert cli.main(check) == 0 and cli.main(check + ["--verify"]) == 1
    assert "its object" in capsys.readouterr().out
    object_path.unlink()
    assert cli.main(check) == 1
    assert f"{data_dir / 'alpha.json'}: build 9, file alpha-9.jar: its object is missing" in (
        capsys.readouterr().out
    )
    jar.write_bytes(b"again")
    assert publish(data_dir, 9, "--file", str(jar), "--replace") == 0
    stray = data_dir / "artifacts" / "ab" / ("ab" * 32)
    stray.parent.mkdir(exist_ok=True)
    stray.write_bytes(b"x")
    capsys.readouterr()
    assert cli.main(check) == 0  # unused objects cost space, nothing else: the weekly cron
    assert capsys.readouterr().out == ""  # job mails what it prints, so it prints nothing
    assert cli.main([*check, "--verbose"]) == 0
    assert (
        f"{stray}: unused (no build names it; 'check --prune' deletes it)"
        in capsys.readouterr().out
    )


def test_health_names_a_kept_file_whose_object_is_missing_or_cut_short(data_dir, jar, caplog):
    assert publish(data_dir, 9, "--file", str(jar)) == 0
    [sha] = objects(data_dir)
    object_path = data_dir / "artifacts" / sha[:2] / sha
    store = store_module.Store(data_dir, check_interval=0)
    client = webtest.TestApp(server.make_app(store))
    assert client.get("/healthz").json["status"] == "ok"

    os.chmod(object_path, 0o644)
    object_path.write_bytes(jar.read_bytes()[:100])
    store.refresh()
    health = client.get("/healthz")
    assert health.status_int == 200 and health.json["status"] == "degraded"
    assert health.json["unavailableFiles"] == [
        {
            "project": "alpha",
            "build": 9,
            "file": "alpha-9.jar",
            "problem": f"{object_path} is 100 bytes, expected 1.9 KiB",
        }
    ]
    assert "the file of build 9 of alpha, alpha-9.jar, is unavailable" in caplog.text
    object_path.unlink()
    store.refresh()
    [unavailable] = client.get("/healthz").json["unavailableFiles"]
    assert unavailable["problem"] == f"{object_path} is missing"
    assert client.get(API + "/builds/latest?project=alpha").status_int == 200  # the rest serves

    assert publish(data_dir, 9, "--file", str(jar)) == 0  # a retry puts the object back
    store.refresh()
    health = client.get("/healthz").json
    assert health["status"] == "ok" and health["unavailableFiles"] == []


def test_the_watcher_finds_a_vanished_object_by_itself(data_dir, jar):
    store_dir = data_dir.parent / "elsewhere"
    assert publish(data_dir, 9, "--file", str(jar), "--artifacts", str(store_dir)) == 0
    store = store_module.Store(data_dir, check_interval=0.01, artifacts_dir=str(store_dir))
    assert store.unavailable() == ()
    [object_path] = store_dir.glob("??/*")
    object_path.unlink()
    store.start()
    try:
        for _ in range(500):  # at most 5 s: a check comes every 10 ms
            if store.unavailable():
                break
            threading.Event().wait(0.01)
    finally:
        store.stop()
    [(slug, build, file, problem)] = store.unavailable()
    assert (slug, build.number, problem) == ("alpha", 9, f"{object_path} is missing")
    assert file is build  # its primary


# --- what a write deletes, and --prune (issue 23) ---------------------------------------------


def object_file(data_dir, data):
    sha = hashlib.sha256(data).hexdigest()
    return data_dir / "artifacts" / sha[:2] / sha


def deleted(path, size):
    return f"deleted {path} ({size}), no build uses it"


def test_a_yank_keeps_the_objects_of_a_project_file_that_is_away(data_dir, jar, tmp_path, capsys):
    # alpha.json renamed to take the project offline, or mid `git stash`: a yank of another
    # project must not take alpha's kept files with it.
    assert publish(data_dir, 9, "--file", str(jar)) == 0
    beta_jar = tmp_path / "beta-11.jar"
    beta_jar.write_bytes(b"PK\x03\x04 beta")
    argv = ["publish", "beta", "--data", str(data_dir), "--build", "11", "--channel", "2.0"]
    assert cli.main([*argv, "--file", str(beta_jar)]) == 0
    (data_dir / "alpha.json").rename(data_dir / "alpha.json.off")
    capsys.readouterr()
    assert cli.main(["yank", "beta", "11", "--purge", "--data", str(data_dir)]) == 0
    assert object_file(data_dir, jar.read_bytes()).read_bytes() == jar.read_bytes()
    assert capsys.readouterr().out.splitlines() == [
        "yanked build 11 of beta",
        f"deleted {object_file(data_dir, beta_jar.read_bytes())} (9 bytes), its file",
    ]


def test_a_yank_purge_keeps_an_object_another_build_uses_and_says_so(data_dir, jar, capsys):
    assert publish(data_dir, 9, "--file", str(jar)) == 0
    assert publish(data_dir, 10, "--file", str(jar)) == 0
    capsys.readouterr()
    assert cli.main(["yank", "alpha", "9", "--purge", "--data", str(data_dir)]) == 0
    path = object_file(data_dir, jar.read_bytes())
    assert capsys.readouterr().out == (
        f"yanked build 9 of alpha: kept its file {path}, which a build served uses; "
        "'buildshelf unyank alpha 9' restores it\n"
    )
    assert object_file(data_dir, jar.read_bytes()).exists()


def test_a_yank_deletes_nothing_while_a_project_file_cannot_be_read(data_dir, jar, capsys):
    assert publish(data_dir, 9, "--file", str(jar)) == 0
    (data_dir / "beta.json").write_text("{")  # it may name the object too
    capsys.readouterr()
    assert cli.main(["yank", "alpha", "9", "--purge", "--data", str(data_dir)]) == 0
    assert capsys.readouterr().out.startswith("yanked build 9 of alpha: kept its file ")
    assert object_file(data_dir, jar.read_bytes()).exists()


@pytest.mark.parametrize(
    "size, said",
    [(0, "0 bytes"), (1, "1 byte"), (1023, "1,023 bytes"), (1024, "1.0 KiB"),
     ((1 << 20) - 1, "1.0 MiB"), (3 << 29, "1.5 GiB"), (5 << 40, "5,120.0 GiB")],
)  # fmt: skip
def test_sizes_are_said_as_people_read_them(size, said):
    assert text.size(size) == said


@pytest.mark.parametrize(
    "numbers, said",
    [((5, 6), ["5 bytes", "6 bytes"]), ((1 << 20, 3 << 20), ["1.0 MiB", "3.0 MiB"]),
     ((3_001_287, 3_001_288), ["3,001,287 bytes", "3,001,288 bytes"]),
     ((1023, 1 << 20), ["1,023 bytes", "1.0 MiB"]), ((7, 7), ["7 bytes", "7 bytes"])],
)  # fmt: skip
def test_sizes_side_by_side_are_said_alike_and_apart(numbers, said):
    assert text.sizes(*numbers) == said


def stray(data_dir, data):
    """An object no build names, put in the store as a copy would."""
    path = object_file(data_dir, data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_a_replace_deletes_only_the_replaced_object(data_dir, jar, capsys):
    other = stray(data_dir, b"a file no build names")
    assert publish(data_dir, 9, "--file", str(jar)) == 0
    old = object_file(data_dir, jar.read_bytes())
    jar.write_bytes(b"new bytes")
    capsys.readouterr()
    assert publish(data_dir, 9, "--file", str(jar), "--replace") == 0
    assert capsys.readouterr().out.splitlines() == [
        "replaced build 9 of alpha",
        deleted(old, "1.9 KiB"),
    ]
    assert other.exists() and object_file(data_dir, b"new bytes").exists()


def test_a_refused_publish_deletes_only_the_object_it_stored(data_dir, jar, tmp_path, capsys):
    assert publish(data_dir, 9, "--file", str(jar)) == 0
    other = stray(data_dir, b"a file no build names")
    # The same bytes as the stray object: stored before, so not this command's to delete.
    same = tmp_path / "same.jar"
    same.write_bytes(other.read_bytes())
    capsys.readouterr()
    assert publish(data_dir, 9, "--file", str(same)) == 1
    assert capsys.readouterr().out == ""
    assert other.exists()
    jar.write_bytes(b"new bytes")
    assert publish(data_dir, 9, "--file", str(jar)) == 1
    out, err = capsys.readouterr()
    assert out == deleted(object_file(data_dir, b"new bytes"), "9 bytes") + "\n"
    assert "give --replace to replace it" in err
    assert not object_file(data_dir, b"new bytes").exists() and other.exists()


def test_check_prune_deletes_each_object_no_build_names(data_dir, jar, capsys):
    assert publish(data_dir, 9, "--file", str(jar)) == 0
    strays = sorted([stray(data_dir, b"one"), stray(data_dir, b"two" * 1000)], key=lambda p: p.name)
    sizes = ["3 bytes" if p.read_bytes() == b"one" else "2.9 KiB" for p in strays]
    check = ["check", "--data", str(data_dir), "--prune"]
    capsys.readouterr()
    assert cli.main([*check, "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"would delete {path} ({size}), no build uses it" for path, size in zip(strays, sizes)
    ]
    assert all(path.exists() for path in strays)
    assert cli.main(check) == 0
    assert capsys.readouterr().out.splitlines() == [
        deleted(path, size) for path, size in zip(strays, sizes)
    ]
    assert objects(data_dir) == [hashlib.sha256(jar.read_bytes()).hexdigest()]
    assert cli.main(check) == 0 and capsys.readouterr().out == ""


def test_check_prune_deletes_the_temporary_files_of_writers_gone(data_dir, jar, capsys):
    assert publish(data_dir, 9, "--file", str(jar)) == 0
    store = data_dir / "artifacts"
    alive = artifacts.Staging(str(store), "alive.jar")  # its writer holds it locked
    killed = store / ".incoming-killed.tmp"  # no lock held: its writer was killed
    killed.write_bytes(b"half a jar")
    os.utime(killed, (time.time() - 10, time.time() - 10))
    check = ["check", "--data", str(data_dir), "--prune"]
    capsys.readouterr()
    said = f"the temporary file {killed}, left by a writer that is gone\n"
    assert cli.main([*check, "--dry-run"]) == 0
    assert capsys.readouterr().out == "would delete " + said and killed.exists()
    assert cli.main(check) == 0
    assert capsys.readouterr().out == "deleted " + said
    assert not killed.exists() and os.path.exists(alive.path)
    alive.discard()


def test_check_prune_deletes_nothing_while_a_project_file_cannot_be_read(data_dir, capsys):
    path = stray(data_dir, b"one")
    (data_dir / "beta.json").write_text("{")
    assert cli.main(["check", "--data", str(data_dir), "--prune"]) == 1
    out, err = capsys.readouterr()
    assert err.endswith(
        f"buildshelf check: {data_dir / 'beta.json'} cannot be read as a project file: it "
        "may use objects, so none was deleted\n"
    )
    assert path.exists()


def test_dry_run_goes_with_prune(data_dir, capsys):
    with pytest.raises(SystemExit) as raised:
        cli.main(["check", "--data", str(data_dir), "--dry-run"])
    assert raised.value.code == 2 and "--dry-run goes with --prune" in capsys.readouterr().err


# --- a retry repairs (issue 23) ------------------------------------------------------------


def test_a_retry_repairs_an_object_of_the_right_size_with_other_bytes(data_dir, jar, capsys):
    assert publish(data_dir, 9, "--file", str(jar)) == 0
    path = object_file(data_dir, jar.read_bytes())
    os.chmod(path, 0o644)
    path.write_bytes(jar.read_bytes()[:-1] + b"!")
    damaged = hashlib.sha256(path.read_bytes()).hexdigest()
    verify = ["check", "--data", str(data_dir), "--verify"]
    assert cli.main(verify) == 1
    capsys.readouterr()
    assert publish(data_dir, 9, "--file", str(jar)) == 0
    assert capsys.readouterr().out == (
        f"build 9 of alpha is already there as given: repaired {path}, found damaged (it "
        f"holds other bytes: they hash to {damaged})\n"
    )
    assert path.read_bytes() == jar.read_bytes() and oct(path.stat().st_mode & 0o222) == "0o0"
    assert cli.main(verify) == 0


# --- dates: every timestamp the data accepts is answered, any other is refused ----------------


def with_timestamp(data_dir, timestamp):
    """Edit build 9's timestamp by hand, as an editor writes the file."""
    doc = json.loads((data_dir / "alpha.json").read_text())
    for build in doc["builds"]:
        if build["buildNumber"] == 9:
            build["timestamp"] = timestamp
    write_file(data_dir / "alpha.json", doc)
    bump_mtime(data_dir / "alpha.json")


def test_a_hand_edited_timestamp_past_year_9999_is_refused_and_the_last_good_kept(
    data_dir, jar, capsys, caplog
):
    assert publish(data_dir, 9, "--file", str(jar)) == 0
    store = store_module.Store(data_dir, check_interval=0)
    client = webtest.TestApp(server.make_app(store))
    url = client.get(API + "/builds/latest?project=alpha").json["downloadUrl"]
    path = url.removeprefix("http://127.0.0.1:8080")
    assert client.get(path).headers["Last-Modified"] == "Tue, 14 Nov 2023 22:13:20 GMT"

    with_timestamp(data_dir, 253402300800000)  # 10000-01-01
    problem = (
        "build 9 (builds[6]): 'timestamp' 253402300800000 is after year 9999: give epoch "
        "milliseconds (date +%s%3N); this looks like microseconds or nanoseconds"
    )
    store.refresh()
    assert problem in caplog.text
    got = client.get(path)  # the last good state is served
    assert got.body == jar.read_bytes()
    assert got.headers["Last-Modified"] == "Tue, 14 Nov 2023 22:13:20 GMT"
    health = client.get("/healthz").json
    assert health["status"] == "degraded"
    assert [(f["file"], f["error"]) for f in health["rejectedFiles"]] == [("alpha.json", problem)]
    capsys.readouterr()
    assert cli.main(["check", "--data", str(data_dir)]) == 1
    assert f"{data_dir / 'alpha.json'}: {problem}" in capsys.readouterr().out

    # A server started on the file does not serve the project: not found, never a 500.
    fresh = webtest.TestApp(server.make_app(store_module.Store(data_dir, check_interval=0)))
    assert fresh.get(path, status=404).json["code"] == "not_found"


@pytest.mark.parametrize(
    "timestamp, http_date, iso",
    [
        (253402300799999, "Fri, 31 Dec 9999 23:59:59 GMT", "9999-12-31T23:59:59Z"),
        (99999999999, "Wed, 16 Nov 5138 09:46:39 GMT", "5138-11-16T09:46:39Z"),  # in seconds
        (0, "Thu, 01 Jan 1970 00:00:00 GMT", "1970-01-01T00:00:00Z"),
    ],
)
def test_every_route_answers_each_date_the_data_accepts(data_dir, jar, timestamp, http_date, iso):
    assert publish(data_dir, 9, "--file", str(jar)) == 0
    with_timestamp(data_dir, timestamp)
    client = webtest.TestApp(server.make_app(store_module.Store(data_dir, check_interval=0)))
    latest = client.get(API + "/builds/latest?project=alpha").json
    assert latest["timestamp"] == timestamp
    path = latest["downloadUrl"].removeprefix("http://127.0.0.1:8080")
    for method in (client.get, client.head):
        assert method(path).headers["Last-Modified"] == http_date
    assert client.get(path, headers={"If-Modified-Since": http_date}, status=304)
    ranged = client.get(path, headers={"Range": "bytes=0-1", "If-Range": http_date}, status=206)
    assert ranged.body == jar.read_bytes()[:2]
    assert client.get(path + ".sha256").text.endswith("  alpha-9.jar\n")
    for route in ("/builds?", "/builds/all?", "/builds/check?build=9&", "/projects?"):
        assert client.get(API + route + "project=alpha").status_int == 200
    assert client.get("/downloads/latest?project=alpha", status=302).location.endswith(path)
    feed = client.get(API + "/feed?project=alpha").text
    assert feed.count(f"<updated>{iso}</updated>") == 2  # the feed's and the entry's
    for page in ("/", "/projects/alpha"):
        assert f'<time datetime="{iso}">{iso[:10]} {iso[11:16]} UTC</time>' in client.get(page)
    assert client.get("/healthz").json["status"] == "ok"


# --- publish --file -: the artifact on standard input (what ssh passes on) ---


def on_stdin(monkeypatch, data):
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))


def test_a_file_on_stdin_is_kept_under_its_name(data_dir, jar, monkeypatch, capsys):
    data = jar.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    on_stdin(monkeypatch, data)
    assert publish(data_dir, 9, "--file", "-", "--name", "alpha-9.jar", "--sha256", sha) == 0
    assert objects(data_dir) == [sha]
    kept = build_in_file(data_dir, 9)
    assert (kept["file"], kept["sha256"], kept["size"]) == ("alpha-9.jar", sha, len(data))
    on_stdin(monkeypatch, data)  # a retry: the same bytes again
    assert publish(data_dir, 9, "--file", "-", "--name", "alpha-9.jar") == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("nothing changed")
    on_stdin(monkeypatch, data + b"more")  # not reproducible: --replace
    assert publish(data_dir, 9, "--file", "-", "--name", "alpha-9.jar") == 1
    assert objects(data_dir) == [sha]  # the object stored for the refused build deleted
    on_stdin(monkeypatch, data + b"more")
    assert publish(data_dir, 9, "--file", "-", "--name", "alpha-9.jar", "--replace") == 0
    assert objects(data_dir) == [hashlib.sha256(data + b"more").hexdigest()]


def test_a_file_on_stdin_that_does_not_hash_to_sha256_is_refused(data_dir, monkeypatch, capsys):
    before = (data_dir / "alpha.json").read_bytes()
    on_stdin(monkeypatch, b"PK\x03\x04")
    assert publish(data_dir, 9, "--file", "-", "--name", "a.jar", "--sha256", "0" * 64) == 1
    assert "sha256 mismatch" in capsys.readouterr().err
    assert objects(data_dir) == [] and (data_dir / "alpha.json").read_bytes() == before
    assert not [p for p in (data_dir / "artifacts").iterdir() if p.is_file()]  # no temp file


@pytest.mark.parametrize("name", ["../alpha.jar", "with space.jar", ".hidden.jar"])
def test_the_name_of_a_file_on_stdin_is_checked_as_any(data_dir, monkeypatch, name, capsys):
    on_stdin(monkeypatch, b"PK\x03\x04")
    assert publish(data_dir, 9, "--file", "-", "--name", name) == 1
    assert "is not a valid file name" in capsys.readouterr().err
    assert objects(data_dir) == []


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--file", "-"], "--file - needs --name"),
        (["--file", "x.jar", "--name", "y.jar"], "--name goes with --file -"),
        (["--download-url", "https://x.example/a.jar", "--name", "y.jar"], "--name goes with --file -"),
    ],
)  # fmt: skip
def test_name_goes_with_file_from_stdin_alone(data_dir, flags, message, capsys):
    with pytest.raises(SystemExit) as raised:
        publish(data_dir, 9, *flags)
    assert raised.value.code == 2 and message in capsys.readouterr().err
