"""Helpers for the tests: data files written the way editors and deploy tools write them,
and the real server over a data directory."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import msgspec
import pytest
import webtest

from buildshelf import store as store_module
from buildshelf.datafiles import datafile
from buildshelf.publishing.credentials import Forbidden, Publisher, Unauthorized, Unavailable


def make_build(number, channel="1.21", experimental=False, commit_count=1, **fields):
    n = number if isinstance(number, int) else 0  # so invalid numbers can be tested too
    build = {
        "buildNumber": number,
        "url": f"https://ci.example.org/job/Alpha/{number}/",
        "downloadUrl": f"https://ci.example.org/job/Alpha/{number}/artifact/alpha-{number}.jar",
        "channelVersion": channel,
        "timestamp": 1700000000000 + n,
        "isExperimental": experimental,
        "commits": [
            {"message": f"Change {number}.{i}", "hash": f"{n:04x}{i:036x}"}
            for i in range(commit_count)
        ],
    }
    build.update(fields)
    return build


def make_project(builds, **fields):
    project = {
        "ciJob": "Alpha",
        "ciJobUrl": "https://ci.example.org/job/Alpha/",
        "javadocBaseUrl": "https://jd.example.org/alpha/",
        "builds": builds,
    }
    project.update(fields)
    return project


ALPHA_BUILDS = [
    make_build(3, "1.20", commit_count=0),
    make_build(1, "1.20"),  # out of order on purpose: hand-edited files are
    make_build(2, "1.20", experimental=True),
    make_build(5, "1.21", commit_count=3),
    make_build(7, "1.21", experimental=True),
    make_build(8, "1.21.1-pre1", experimental=True),
]


def both_paths(text, slug="alpha"):
    """(the fast path's Project or None, the build-by-build Project) of the same file text."""
    fast = datafile._fast_project(slug, text)
    return fast, datafile._checked_project(
        "a.json", slug, datafile.parse_json("a.json", text.encode())
    )


# When the file was read: the one field of a Project that two reads of a file do not share.
READ_TIME_FIELDS = ("loaded_at",)


def assert_same_values(got, expected, where="project"):
    """`got` is `expected`, of the same types, field by field: every field of every struct
    (its __struct_fields__, so a new field is compared too), down through tuples and dicts."""
    assert type(got) is type(expected), where
    if isinstance(expected, msgspec.Struct):
        for name in expected.__struct_fields__:
            if name not in READ_TIME_FIELDS:
                assert_same_values(getattr(got, name), getattr(expected, name), f"{where}.{name}")
    elif isinstance(expected, (tuple, list)):
        assert len(got) == len(expected), where
        for index, (item, expected_item) in enumerate(zip(got, expected)):
            assert_same_values(item, expected_item, f"{where}[{index}]")
    elif isinstance(expected, dict):
        assert list(got) == list(expected), where
        for key, value in expected.items():
            assert_same_values(got[key], value, f"{where}[{key!r}]")
    else:
        assert got == expected, where


def write_file(path, content):
    """Write atomically, as editors and deploy tools do; dicts and lists become JSON."""
    if not isinstance(content, (str, bytes)):
        content = json.dumps(content, indent=2)
    if isinstance(content, str):
        content = content.encode()
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(content)
    os.replace(tmp, path)
    return path


def bump_mtime(path, seconds=10):
    """Move the file's mtime, as a later edit would, without sleeping."""
    t = os.stat(path).st_mtime_ns + seconds * 1_000_000_000
    os.utime(path, ns=(t, t))


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Saved remote API JSON of Jenkins jobs: a freestyle job's, a pipeline's.
JENKINS_JOBS = os.path.join(ROOT, "tests", "jenkins_jobs")
FREESTYLE = os.path.join(JENKINS_JOBS, "freestyle.json")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_argv(data, *flags):
    """The command line of `python server.py` over `data`, with these flags."""
    return [sys.executable, os.path.join(ROOT, "server.py"), "--data", str(data), *flags]


def eventually(check, seconds=10):
    """Poll `check()` until it is true, and return what it returned: for what a server, a
    watcher or a thread does in its own time."""
    deadline = time.monotonic() + seconds
    while not (result := check()):
        assert time.monotonic() < deadline, "not seen within the deadline"
        time.sleep(0.02)
    return result


def wait_for_port(port, proc, seconds=15):
    """Whether a server accepts connections on 127.0.0.1:`port` within `seconds`, before its
    process `proc` ends."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                return False
            time.sleep(0.05)


@contextmanager
def real_server(data, *flags):
    """`python server.py` over `data` on a free port, once it accepts connections: (port,
    process, whose stderr is a text pipe). Stopped with SIGINT at the end."""
    port = free_port()
    proc = subprocess.Popen(
        server_argv(data, "--port", str(port), *flags),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        if not wait_for_port(port, proc):
            proc.kill()
            pytest.fail(f"server did not start: {proc.communicate()[1]}")
        yield port, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.stderr.close()


def refreshing_client(app, store):
    """A webtest client of `app` that checks `store`'s files before each request: tests edit
    files between requests, which the server's watcher thread would have read by the time a
    real client asked again."""

    def checked_first(environ, start_response):
        store.refresh()
        return app(environ, start_response)

    return webtest.TestApp(checked_first)


def hang_reads_of(name, monkeypatch):
    """Make reads of the data file `name` hang, as on a hung network mount, until the Event
    returned is set."""
    release = threading.Event()
    read = store_module.read_regular_file

    def hanging(path):
        if os.path.basename(path) == name:
            release.wait(30)
        return read(path)

    monkeypatch.setattr(store_module, "read_regular_file", hanging)
    return release


def recalled(app, target):
    """Whether the app answers a GET of `target` from memory (the server's `recall`): it does
    only for what its cache keeps."""
    path, _, query = target.partition("?")
    return app.recall({"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query})


ALPHA_TOKEN = "bs_alpha1_" + "s" * 43  # FakeCredentials' token for alpha
ANY_TOKEN = "bs_every1_" + "t" * 43  # ... and for every project ('*')


class FakeCounter:
    """A counts.Counter whose tally() is the Tally a test sets (`current`): what the count
    routes read. It counts nothing (a download served by an app given it is not counted)."""

    def __init__(self, tally):
        self.current = tally

    def tally(self):
        return self.current

    def count(self, slug, number, file_key, address):
        return False


class FakeCredentials:
    """Credentials' interface: ALPHA_TOKEN may write alpha, ANY_TOKEN any project, 'down'
    cannot be checked now; precheck() refuses only what authenticate() refuses for every
    project."""

    def precheck(self, authorization):
        try:
            self.authenticate(authorization, "alpha")
        except (Forbidden, Unavailable):
            pass

    def authenticate(self, authorization, slug):
        scheme, _, bearer = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not bearer.strip():
            raise Unauthorized("send Authorization: Bearer TOKEN")
        if bearer == "down":
            raise Unavailable("the OIDC issuer cannot be reached")
        if bearer == ANY_TOKEN:
            return Publisher("token every1")
        if bearer == ALPHA_TOKEN:
            if slug.lower() != "alpha":
                raise Forbidden("this token may publish to 'alpha' only")
            return Publisher("token alpha1")
        raise Unauthorized("unknown credential")


def objects(data_dir):
    """The names of the objects in `data_dir`'s artifact store."""
    store_dir = data_dir / "artifacts"
    return sorted(p.name for p in store_dir.glob("??/*")) if store_dir.exists() else []


def build_in_file(data_dir, number):
    """Build `number` as alpha.json holds it."""
    doc = json.loads((data_dir / "alpha.json").read_text())
    return next(b for b in doc["builds"] if b["buildNumber"] == number)
