"""Downloads of objects that the data on disk no longer names: a yank or a `publish --replace`
deletes the old object as soon as it has rewritten the project file, before the server's
watcher reads the file. Such a download answers 404, never 503, and logs no error; the object
missing although the data names it stays a 503."""

import hashlib
import http.client
import json
import logging
import threading
import urllib.parse

import pytest
import webtest

from buildshelf import cli, server
from buildshelf import store as store_module
from helpers import hang_reads_of, real_server

API = "/api/v2"
LATEST = API + "/builds/latest?project=alpha&channel=1.21"
NOT_FOUND = {"error": "no such file: see /api/v2/builds", "code": "not_found"}


def jar_of(tmp_path, number, version=0):
    path = tmp_path / f"alpha-{number}.jar"
    path.write_bytes(f"PK\x03\x04 build {number}, version {version} ".encode() * 100)
    return path


def publish(data_dir, number, jar, *flags):
    argv = ["publish", "alpha", "--data", str(data_dir), "--build", str(number), "--channel",
            "1.21", "--timestamp", "1700000000000", "--file", str(jar), *flags]  # fmt: skip
    assert cli.main(argv) == 0


def yank(data_dir, number):
    # --purge: the object goes at once, as a takedown deletes it
    assert cli.main(["yank", "alpha", str(number), "--purge", "--data", str(data_dir)]) == 0


def url_of(data_dir, number, jar):
    sha = hashlib.sha256(jar.read_bytes()).hexdigest()
    return f"/downloads/alpha/{number}/{sha}/alpha-{number}.jar"


def client_of(data_dir):
    """A webtest client of an app whose store reloads only when a request asks it to: as a
    real server's does in the second before its watcher looks."""
    return webtest.TestApp(server.make_app(store_module.Store(data_dir, check_interval=0)))


@pytest.mark.parametrize("change", ["yank", "replace"])
def test_an_object_the_data_no_longer_names_is_404_at_once(data_dir, tmp_path, change, caplog):
    jar = jar_of(tmp_path, 9)
    publish(data_dir, 9, jar)
    old = url_of(data_dir, 9, jar)
    client = client_of(data_dir)
    assert client.get(old).status_int == 200
    assert client.get(LATEST).json["downloadUrl"].endswith(old)
    if change == "yank":
        yank(data_dir, 9)
    else:
        jar = jar_of(tmp_path, 9, version=1)
        publish(data_dir, 9, jar, "--replace")
    caplog.clear()
    with caplog.at_level(logging.INFO):
        if change == "yank":  # a yanked build's URL is gone (410), purged or not
            assert client.get(old, status=410).json["code"] == "build_yanked"
            client.head(old, status=410)
        else:
            assert client.get(old, status=404).json == NOT_FOUND
            client.head(old, status=404)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    # The answers after it come from the same newer data: latest no longer names the old URL.
    latest = client.get(LATEST).json
    assert not latest["downloadUrl"].endswith(old)
    if change == "replace":
        assert latest["downloadUrl"].endswith(url_of(data_dir, 9, jar))
        assert client.get(url_of(data_dir, 9, jar)).body == jar.read_bytes()
    else:
        assert latest["buildNumber"] != 9
    assert client.get("/downloads/latest?project=alpha&channel=1.21").location != (
        "http://127.0.0.1:8080" + old
    )


def test_an_object_missing_although_the_data_names_it_stays_503(data_dir, tmp_path, caplog):
    jar = jar_of(tmp_path, 9)
    publish(data_dir, 9, jar)
    url = url_of(data_dir, 9, jar)
    client = client_of(data_dir)
    sha = hashlib.sha256(jar.read_bytes()).hexdigest()
    object_path = data_dir / "artifacts" / sha[:2] / sha
    object_path.unlink()
    assert client.get(url, status=503).json == {
        "error": "the file of build 9 of 'alpha' is unavailable on this server; try again later",
        "code": "artifact_unavailable",
    }
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert f"{object_path} (build 9 of alpha): missing" in errors
    assert client.get("/healthz").json["status"] == "degraded"


def get(port, path):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


class Fetcher(threading.Thread):
    """GETs one URL over and over until stopped: `served` is set once it answers 200, and
    `refused` once it answers 404 or 410 after that (a 404 before it is the server not having read
    the new build yet)."""

    def __init__(self, port, path):
        super().__init__(daemon=True)
        self.port, self.path = port, path
        self.statuses = []
        self.served, self.refused, self.stop = (
            threading.Event(),
            threading.Event(),
            threading.Event(),
        )

    def run(self):
        while not self.stop.is_set():
            status, _ = get(self.port, self.path)
            self.statuses.append(status)
            if status == 200:
                self.served.set()
            elif status in (404, 410) and self.served.is_set():  # 410: yanked
                self.refused.set()


@pytest.mark.system
def test_a_real_server_never_answers_503_for_a_yanked_or_replaced_file(data_dir, tmp_path):
    """The server's watcher reads the files once a second: a download of the old URL in that
    second found the object deleted and answered 503 with an ERROR line (385 over 8 yanks)."""
    with real_server(data_dir, "--quiet") as (port, proc):
        logged = []
        drain = threading.Thread(target=lambda: logged.extend(proc.stderr), daemon=True)
        drain.start()
        statuses = []
        for number in range(20, 28):
            jar = jar_of(tmp_path, number)
            publish(data_dir, number, jar)
            old = url_of(data_dir, number, jar)
            fetcher = Fetcher(port, old)
            fetcher.start()
            try:
                assert fetcher.served.wait(30), "the new build was never served"
                if number % 2:
                    yank(data_dir, number)
                else:
                    publish(data_dir, number, jar_of(tmp_path, number, version=1), "--replace")
                assert fetcher.refused.wait(30), "the old URL was never refused"
                # Whatever answered 404 to the old URL no longer advertises it.
                latest = json.loads(get(port, LATEST)[1])["downloadUrl"]
                assert urllib.parse.urlsplit(latest).path != old
            finally:
                fetcher.stop.set()
                fetcher.join(60)
            statuses += fetcher.statuses
    drain.join(30)
    assert set(statuses) == {200, 404, 410}  # 404: replaced, 410: yanked
    assert [line for line in logged if " ERROR " in line] == []


def test_a_check_that_read_the_file_before_a_yank_reports_no_missing_object(data_dir, tmp_path):
    """The watcher's check reads the project file, then stats the objects: a yank between the
    two made it log the yanked build's object as unavailable, at ERROR level."""
    jar = jar_of(tmp_path, 9)
    publish(data_dir, 9, jar)
    store = store_module.Store(data_dir, check_interval=0)
    [build] = store.snapshot().project("alpha").hosted_builds
    path = str(data_dir / "alpha.json")
    stamps = {"alpha": (path, store_module.stamp(path))}
    yank(data_dir, 9)  # rewrites alpha.json, then deletes the object
    kept = [("alpha", build, build)]  # its primary file
    assert store_module._unavailable(store.artifacts, kept, stamps) == ()
    stamps = {"alpha": (path, store_module.stamp(path))}  # the data read names the object
    [(slug, _, _, problem)] = store_module._unavailable(store.artifacts, kept, stamps)
    assert (slug, problem.endswith(" is missing")) == ("alpha", True)


def test_a_download_waits_for_no_hung_data_file(data_dir, tmp_path, monkeypatch):
    """A download that finds its object missing reads the data again, with the watcher's
    deadlines: a project file whose read hangs leaves it the 503 of the data it has."""
    jar = jar_of(tmp_path, 9)
    publish(data_dir, 9, jar)
    url = url_of(data_dir, 9, jar)
    store = store_module.Store(data_dir, check_interval=0, read_wait=0.1)
    client = webtest.TestApp(server.make_app(store))
    yank(data_dir, 9)
    release = hang_reads_of("alpha.json", monkeypatch)
    try:
        assert client.get(url, status=503).json["code"] == "artifact_unavailable"
    finally:
        release.set()
