"""Downloads counted as users make them: which answers count (a kept file's, /downloads/latest,
/api/v2/download), by whom (the peer, or a trusted proxy's X-Forwarded-For hop), over a real
server that is stopped, restarted and killed, behind real nginx, and with a database that is
locked or read-only. counts.py's own rules are in test_counts.py.
"""

import contextlib
import ctypes
import hashlib
import http.client
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from urllib.parse import quote

import pytest
import webtest

from buildshelf import cli, counts, server
from buildshelf import store as store_module
from helpers import ROOT, free_port, real_server, server_argv, write_file
from test_nginx import FROM_NGINX, nginx_available  # noqa: F401  (a fixture)

sys.path.insert(0, os.path.join(ROOT, "bench"))

import harness  # noqa: E402  (bench/harness.py)
import nginx as nginx_bench  # noqa: E402

CONTENT = random.Random(26).randbytes(200_000)
SHA = hashlib.sha256(CONTENT).hexdigest()
KEPT = f"/downloads/alpha/9/{SHA}/alpha-9.jar"
ELSEWHERE = "https://ci.example.org/job/Alpha/5/artifact/alpha-5.jar"  # build 5's downloadUrl
PUBLIC = "http://127.0.0.1:8080"  # make_app's default public URL


def publish_kept(data):
    """Build 9 of alpha, its file kept: CONTENT."""
    jar = os.path.join(os.path.dirname(str(data)), "alpha-9.jar")
    with open(jar, "wb") as f:
        f.write(CONTENT)
    assert cli.main(["publish", "alpha", "--data", str(data), "--build", "9", "--channel",
                     "1.21", "--timestamp", "1700000000000", "--file", jar]) == 0  # fmt: skip


@pytest.fixture
def kept(data_dir):
    publish_kept(data_dir)
    return data_dir


class Counting:
    """An app over `data` counting into a Counter of its own; requests from `address`."""

    def __init__(self, data, tmp_path, **app_settings):
        self.counter = counts.Counter(str(tmp_path / "state"))
        self.store = store_module.Store(data, check_interval=0)
        self.app = server.make_app(self.store, counter=self.counter, **app_settings)
        self.nets = iter(range(1, 250))

    def client(self, address=None, **environ):
        address = address or f"198.51.{next(self.nets)}.7"
        return webtest.TestApp(self.app, extra_environ={"REMOTE_ADDR": address, **environ})

    def rows(self):
        self.counter.flush()
        return {(slug, n, key): c for (slug, n, key, _), c in self.counter.tally().rows.items()}


@pytest.fixture
def counting(kept, tmp_path):
    return Counting(kept, tmp_path)


# --- which answers count -----------------------------------------------------------------------

ETAG = f'"{SHA}"'
CASES = [
    # (method, suffix, headers, status, counted)
    ("GET", "", {}, 200, True),
    ("GET", "", {"Range": "bytes=0-99"}, 206, True),
    ("GET", "", {"Range": "bytes=0-"}, 206, True),
    ("GET", "", {"Range": "bytes=1000-"}, 206, False),  # a resume
    ("GET", "", {"Range": "bytes=-100"}, 206, False),  # the end only
    ("GET", "", {"Range": "bytes=1000-", "If-Range": '"other"'}, 200, True),  # whole again
    ("HEAD", "", {}, 200, False),
    ("GET", "", {"If-None-Match": ETAG}, 304, False),
    ("GET", "", {"If-Modified-Since": "Tue, 14 Nov 2100 22:13:20 GMT"}, 304, False),
    ("GET", "", {"Range": "bytes=999999-"}, 416, False),
    ("GET", "", {"If-Match": '"other"'}, 412, False),
    ("GET", ".sha256", {}, 200, False),
]


@pytest.mark.parametrize("through_nginx", [False, True], ids=["itself", "handed-over"])
@pytest.mark.parametrize("method, suffix, headers, status, counted", CASES)
def test_what_counts_as_a_download(
    kept, tmp_path, through_nginx, method, suffix, headers, status, counted
):
    """A download handed to nginx (--accel-redirect) counts as nginx will answer it."""
    if through_nginx:
        counting = Counting(kept, tmp_path, accel_redirect="/_o")
        client = counting.client(**FROM_NGINX)
    else:
        counting = Counting(kept, tmp_path)
        client = counting.client()
    resp = client.request(KEPT + suffix, method=method, headers=headers, expect_errors=True)
    handed_over = "X-Accel-Redirect" in resp.headers
    assert (resp.status_int, handed_over) == (
        200 if handed_over else status,
        through_nginx and status in (200, 206) and suffix == "",
    )
    assert counting.rows() == ({("alpha", 9, SHA): 1} if counted else {})
    assert (counting.counter.counted, counting.counter.deduplicated) == (int(counted), 0)


def test_one_network_counts_once_a_day_whatever_the_route(counting):
    for address in ("192.0.2.1", "192.0.2.200", "::ffff:192.0.2.3"):
        client = counting.client(address)
        client.get(KEPT)
        client.get("/downloads/latest?project=alpha", status=302)
        client.get("/api/v2/download?url=" + quote(PUBLIC + KEPT), status=302)
    counting.client("192.0.3.1").get(KEPT)
    counting.client("2001:db8:0:1::1").get(KEPT)
    counting.client("2001:db8:0:1::2").get(KEPT, headers={"Range": "bytes=0-"})
    assert counting.rows() == {("alpha", 9, SHA): 3}
    assert counting.counter.deduplicated == 9


def test_downloads_latest_counts_its_302(counting):
    client = counting.client("192.0.2.1")
    resp = client.get("/downloads/latest?project=alpha", status=302)
    assert resp.location == PUBLIC + KEPT
    # A shared cache (nginx's) must pass each to Buildshelf to be counted.
    assert resp.headers["Cache-Control"] == "private, max-age=10"
    counting.client("192.0.2.1").head("/downloads/latest?project=alpha", status=302)
    counting.client().head("/downloads/latest?project=alpha", status=302)  # HEAD: not counted
    counting.client().get("/downloads/latest?project=beta", status=302)
    assert counting.rows() == {
        ("alpha", 9, SHA): 1,
        ("beta", 10, "https://ci.example.org/job/Alpha/10/artifact/alpha-10.jar"): 1,  # its data
    }


def test_without_a_counter_downloads_latest_is_publicly_cacheable(kept):
    client = webtest.TestApp(server.make_app(store_module.Store(kept, check_interval=0)))
    resp = client.get("/downloads/latest?project=alpha", status=302)
    assert resp.headers["Cache-Control"] == "public, max-age=10"


def test_the_counting_redirect_sends_to_a_served_download_and_counts_it(counting):
    resp = counting.client().get("/api/v2/download?url=" + quote(ELSEWHERE, safe=""), status=302)
    assert (resp.location, resp.headers["Cache-Control"], resp.body) == (ELSEWHERE, "no-store", b"")
    resp = counting.client().get("/api/v2/download?url=" + quote(PUBLIC + KEPT), status=302)
    assert resp.location == PUBLIC + KEPT
    counting.client().head("/api/v2/download?url=" + quote(ELSEWHERE), status=302)
    assert counting.rows() == {("alpha", 5, ELSEWHERE): 1, ("alpha", 9, SHA): 1}


def test_a_url_two_projects_share_counts_for_the_project_named(kept, tmp_path):
    # beta's build 10 names alpha's build 5's file: the data format allows it.
    beta = json.loads((kept / "beta.json").read_bytes())
    beta["builds"][0]["downloadUrl"] = ELSEWHERE
    write_file(kept / "beta.json", json.dumps(beta))
    counting = Counting(kept, tmp_path)
    url = "/api/v2/download?url=" + quote(ELSEWHERE, safe="")
    for project in ("alpha", "BETA"):  # any letter case, as the other routes take it
        counting.client().get(f"{url}&project={project}", status=302)
    counting.client().get(url, status=302)  # unnamed: the first project by slug
    assert counting.rows() == {("alpha", 5, ELSEWHERE): 2, ("beta", 10, ELSEWHERE): 1}
    for project in ("gamma", "alph"):  # none, a prefix of one
        resp = counting.client().get(f"{url}&project={quote(project)}", status=400)
        assert resp.json["code"] == "invalid_download_url"
    assert counting.rows() == {("alpha", 5, ELSEWHERE): 2, ("beta", 10, ELSEWHERE): 1}


@pytest.mark.parametrize(
    "query, code",
    [
        ("", "missing_parameter"),
        ("?url=", "missing_parameter"),
        ("?url=" + quote(ELSEWHERE) + "&url=" + quote(ELSEWHERE), "repeated_parameter"),
        ("?url=https://evil.example/alpha-5.jar", "invalid_download_url"),
        ("?url=" + quote(ELSEWHERE.upper()), "invalid_download_url"),
        ("?url=" + quote(ELSEWHERE + "?x"), "invalid_download_url"),
        ("?url=" + quote(ELSEWHERE.replace("https:", "")), "invalid_download_url"),  # //host
        ("?url=javascript:alert(1)", "invalid_download_url"),
        ("?url=" + quote(KEPT), "invalid_download_url"),  # a path is no downloadUrl
        ("?url=" + quote("http://other.example" + KEPT), "invalid_download_url"),
        ("?url=%0D%0ALocation:%20x", "invalid_query"),
    ],
)
def test_the_counting_redirect_is_never_an_open_redirect(counting, query, code):
    resp = counting.client().get("/api/v2/download" + query, status=400)
    assert resp.json["code"] == code and "Location" not in resp.headers
    assert resp.headers["Cache-Control"] == "no-store"
    assert counting.rows() == {}


def test_a_yanked_build_s_url_is_not_redirected_to(counting, kept):
    assert cli.main(["yank", "alpha", "5", "--data", str(kept), "--reason", "broken"]) == 0
    counting.store.refresh()  # as the watcher reads it
    resp = counting.client().get("/api/v2/download?url=" + quote(ELSEWHERE), status=400)
    assert resp.json["code"] == "invalid_download_url"
    assert counting.rows() == {}


def test_health_says_degraded_while_counts_cannot_be_written(counting):
    client = counting.client()
    assert client.get("/healthz").json["status"] == "ok"
    assert "downloadCounting" not in client.get("/healthz").json
    counting.counter.problem = "the database downloads.sqlite3 in /x cannot be written: locked"
    health = client.get("/healthz").json
    assert health["status"] == "degraded"
    assert health["downloadCounting"] == counting.counter.problem
    counting.counter.problem = None
    assert client.get("/healthz").json["status"] == "ok"


# --- a real server -----------------------------------------------------------------------------


def get(port, path, forwarded_for=None, headers=None, method="GET", source=None):
    """(status, headers, body) of one request to 127.0.0.1:`port`, from `source` (another
    loopback address: another client network), naming `forwarded_for` as the client."""
    headers = dict(headers or {})
    if forwarded_for:
        headers["X-Forwarded-For"] = forwarded_for
    connection = http.client.HTTPConnection(
        "127.0.0.1", port, timeout=30, source_address=(source, 0) if source else None
    )
    try:
        connection.request(method, path, headers=headers)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def stored(state_dir):
    """{(project, build, file): downloads} as the state's database holds them."""
    path = os.path.join(state_dir, "downloads.sqlite3")
    with contextlib.closing(sqlite3.connect(path)) as db:
        rows = db.execute(
            "SELECT project, build, file, SUM(downloads) FROM downloads GROUP BY 1, 2, 3"
        )
        return {(p, b, f): n for p, b, f, n in rows}


def stop(process, how=signal.SIGTERM):
    process.send_signal(how)
    return process.communicate(timeout=30)[1]


@pytest.fixture
def served(kept, tmp_path):
    """A data directory with a kept file, and the state directory to count into."""
    return kept, str(tmp_path / "state")


@pytest.mark.system
def test_sigterm_writes_every_count_and_a_restart_keeps_them(served):
    data, state_dir = served
    flags = ("--state", state_dir, "--trusted-proxy", "127.0.0.1")
    with real_server(data, *flags) as (port, process):
        for n in range(40):  # 40 networks, within the 10 s before the first batch
            assert get(port, KEPT, f"203.0.{n}.9")[::2] == (200, CONTENT)
            assert get(port, KEPT, f"203.0.{n}.10")[0] == 200  # the same network
        log = stop(process)
    assert stored(state_dir) == {("alpha", 9, SHA): 40}, log
    with real_server(data, *flags) as (port, process):
        assert get(port, "/downloads/latest?project=alpha", "203.0.200.1")[0] == 302
        stop(process)
    assert stored(state_dir) == {("alpha", 9, SHA): 41}
    for name in os.listdir(state_dir):  # no client address on disk, in any form
        with open(os.path.join(state_dir, name), "rb") as f:
            written = f.read()
        assert b"203.0." not in written and bytes([203, 0]) not in written, name


@pytest.mark.system
def test_a_trusted_proxy_s_clients_are_counted_by_their_whole_address(served):
    """A dual-stack nginx writes an IPv4 client as ::ffff:203.0.113.7, which waitress read as
    the address ::ffff (and the port 203.0.113.7): every such client was one network."""
    data, state_dir = served
    with real_server(data, "--state", state_dir, "--trusted-proxy", "127.0.0.1") as (port, proc):
        for client in ("::ffff:203.0.113.7", "::ffff:203.0.114.7", "203.0.115.7"):
            assert get(port, KEPT, client)[0] == 200
        for client in ("2001:db8:1::7", "[2001:db8:2::7]"):  # IPv6, bracketed or not
            assert get(port, KEPT, client)[0] == 200
        for client in ("203.0.113.8", "203.0.114.8"):  # the networks of the first two
            assert get(port, KEPT, client)[0] == 200
        stop(proc)
    assert stored(state_dir) == {("alpha", 9, SHA): 5}


@pytest.mark.system
def test_sigkill_loses_at_most_the_last_batch(served):
    data, state_dir = served
    with real_server(data, "--state", state_dir, "--trusted-proxy", "127.0.0.1") as (port, proc):
        assert get(port, KEPT, "203.0.113.1")[0] == 200
        deadline = time.monotonic() + 60
        while not _stored_or_none(state_dir) and time.monotonic() < deadline:
            time.sleep(0.2)  # the first batch, within FLUSH_SECONDS
        assert get(port, KEPT, "203.0.114.1")[0] == 200  # in the next batch
        proc.kill()
        proc.wait()
    assert stored(state_dir) in ({("alpha", 9, SHA): 1}, {("alpha", 9, SHA): 2})


def _stored_or_none(state_dir):
    try:
        return stored(state_dir)
    except sqlite3.Error:
        return None


@pytest.mark.system
@pytest.mark.parametrize("trusted", [None, "192.0.2.1"], ids=["no-proxy", "another-proxy"])
def test_a_forged_forwarded_for_from_an_untrusted_peer_is_ignored(served, trusted):
    data, state_dir = served
    flags = ("--state", state_dir) + (("--trusted-proxy", trusted) if trusted else ())
    with real_server(data, *flags) as (port, process):
        for n in range(10):
            assert get(port, KEPT, f"203.0.{n}.9")[0] == 200
        stop(process)
    assert stored(state_dir) == {("alpha", 9, SHA): 1}  # the peer, 127.0.0.1, once


@pytest.mark.system
@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_curl_resuming_a_download_does_not_count_it_again(served, tmp_path):
    data, state_dir = served
    out = tmp_path / "alpha-9.jar"
    with real_server(data, "--state", state_dir, "--trusted-proxy", "127.0.0.1") as (port, proc):
        url = f"http://127.0.0.1:{port}{KEPT}"

        def curl(*argv, client, fails=False):
            done = subprocess.run(
                ["curl", "-sS", "--noproxy", "*", "-f", "-H", f"X-Forwarded-For: {client}",
                 *argv, "-o", str(out), url],
                capture_output=True, timeout=60,
            )  # fmt: skip
            assert done.returncode == (22 if fails else 0), done.stderr

        curl("-r", "0-49999", client="203.0.113.1")  # cut after 50,000 bytes: counted
        # The resume, from another network (its own would be deduplicated anyway): not counted.
        curl("-C", "-", client="203.0.114.1")
        assert out.read_bytes() == CONTENT
        curl("-C", "-", client="203.0.115.1", fails=True)  # nothing left: a 416, not counted
        stop(proc)
    assert stored(state_dir) == {("alpha", 9, SHA): 1}


@pytest.mark.system
def test_with_counting_off_no_counts_database_is_made(served):
    data, state_dir = served
    for flags, environ in (
        (("--count-downloads", "off"), {}),
        ((), {"BUILDSHELF_COUNT_DOWNLOADS": "OFF"}),
    ):
        os.environ.update(environ)
        try:
            with real_server(data, "--state", state_dir, *flags) as (port, process):
                assert get(port, KEPT)[0] == 200
                assert get(port, "/downloads/latest?project=alpha")[0] == 302
                status, headers, _ = get(port, "/api/v2/download?url=" + quote(ELSEWHERE))
                assert (status, headers["Location"]) == (302, ELSEWHERE)
                stop(process)
        finally:
            for name in environ:
                del os.environ[name]
        assert not os.path.exists(os.path.join(state_dir, "downloads.sqlite3"))


@pytest.mark.system
@pytest.mark.parametrize("value", ["no", "", "1"])
def test_another_value_of_the_setting_is_bad_usage(served, value):
    data, _ = served
    for argv, environ in (
        (["--count-downloads", value], {}),
        ([], {"BUILDSHELF_COUNT_DOWNLOADS": value}),
    ):
        done = subprocess.run(
            server_argv(data, *argv), capture_output=True, text=True, timeout=30,
            env={**os.environ, **environ},
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "neither 'on' nor 'off'" in done.stderr


def wait_for(condition, seconds=60):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"still not so after {seconds} s")
        time.sleep(0.2)


def health(port):
    return __import__("json").loads(get(port, "/healthz")[2])


@pytest.mark.system
def test_a_locked_database_slows_no_download_and_the_counts_wait(served):
    data, state_dir = served
    with real_server(data, "--state", state_dir, "--trusted-proxy", "127.0.0.1") as (port, proc):
        assert get(port, KEPT, "203.0.1.1")[0] == 200
        wait_for(lambda: _stored_or_none(state_dir) == {("alpha", 9, SHA): 1})
        locker = sqlite3.connect(os.path.join(state_dir, "downloads.sqlite3"), isolation_level=None)
        locker.execute("BEGIN EXCLUSIVE")
        try:
            for n in range(2, 12):
                assert get(port, KEPT, f"203.0.{n}.1")[::2] == (200, CONTENT)
            wait_for(lambda: health(port)["status"] == "degraded")
            assert "locked" in health(port)["downloadCounting"]
            for n in range(12, 20):  # served as ever while the counts wait
                assert get(port, KEPT, f"203.0.{n}.1")[::2] == (200, CONTENT)
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        wait_for(lambda: health(port)["status"] == "ok")
        log = stop(proc)
    assert stored(state_dir) == {("alpha", 9, SHA): 19}
    assert log.count("cannot be written") == 1, log  # said once
    assert log.count("written again") == 1, log


libc = ctypes.CDLL(None, use_errno=True)
MS_RDONLY, MS_REMOUNT = 1, 32


def mount(target, flags=0, kind=b"tmpfs"):
    if libc.mount(kind, os.fsencode(target), kind, flags, b"size=4m") != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), target)


@pytest.fixture
def tmpfs(tmp_path):
    """A directory on a tmpfs of its own, which a test may turn read-only."""
    path = tmp_path / "mnt"
    path.mkdir()
    try:
        mount(path)
    except PermissionError:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail("CI must run the read-only database test: it needs CAP_SYS_ADMIN")
        pytest.skip("mounting a tmpfs was refused (EPERM): needs root with CAP_SYS_ADMIN")
    try:
        yield path
    finally:
        libc.umount2(os.fsencode(path), 0)


@pytest.mark.system
def test_a_read_only_database_slows_no_download_and_the_counts_wait(kept, tmpfs):
    state_dir = str(tmpfs / "state")
    before = counts.Counter(state_dir)
    before.count("alpha", 9, SHA, "203.0.1.1")
    before.stop()  # the database made, one download in it
    # A file system cannot turn read-only under a file open for writing: before the start.
    mount(tmpfs, MS_REMOUNT | MS_RDONLY)
    with real_server(kept, "--state", state_dir, "--trusted-proxy", "127.0.0.1") as (port, proc):
        for n in range(2, 7):
            assert get(port, KEPT, f"203.0.{n}.1")[::2] == (200, CONTENT)
        wait_for(lambda: health(port)["status"] == "degraded")
        assert "Read-only file system" in health(port)["downloadCounting"]
        mount(tmpfs, MS_REMOUNT)  # writable again: the counts that waited are written
        wait_for(lambda: health(port)["status"] == "ok")
        log = stop(proc)
    assert stored(state_dir) == {("alpha", 9, SHA): 6}, log
    assert log.count("cannot be written") == 1, log


# --- behind real nginx -------------------------------------------------------------------------


@contextlib.contextmanager
def nginx_in_front(data, state_dir, port):
    """deploy/nginx.conf as bench/nginx.py runs it, on `port`, before a Buildshelf run as
    deploy/buildshelf.env says (--accel-redirect, --trusted-proxy 127.0.0.1)."""
    work = os.path.join(os.path.dirname(data), "nginx")
    env = nginx_bench.unit_environment()
    flags = ("--state", state_dir, "--accel-redirect", env["BUILDSHELF_ACCEL_REDIRECT"],
             "--trusted-proxy", env["BUILDSHELF_TRUSTED_PROXY"],
             "--public-url", f"http://127.0.0.1:{port}")  # fmt: skip
    with real_server(data, *flags) as (upstream, process):
        with open(nginx_bench.SITE) as f:
            site = nginx_bench.render_site(
                f.read(), work, upstream, port, store=os.path.join(data, "artifacts")
            )
        nginx = harness.Server.nginx(nginx_bench.write_config(work, site), port)
        try:
            yield process
        finally:
            nginx.stop()


def scenario(port, prefix):
    """Clients on four networks (loopback addresses 127.0.N.1; through nginx their
    X-Forwarded-For is set by nginx, straight to Buildshelf they are the peers) download as
    users do: repeats, resumes, HEADs, revalidations, checksums, the latest, the redirect."""
    latest, counting = "/downloads/latest?project=alpha", "/api/v2/download?url="
    kept_url = quote(f"{prefix}{KEPT}")
    answers = []
    for net in (11, 12, 13):
        source = f"127.0.{net}.1"
        answers.append(get(port, KEPT, source=source)[0])
        answers.append(get(port, KEPT, source=source)[0])  # a repeat
        answers.append(get(port, KEPT, headers={"Range": "bytes=100-"}, source=source)[0])
        # A forged X-Forwarded-For: nginx replaces it, and Buildshelf trusts none but nginx's.
        answers.append(get(port, KEPT, f"203.0.113.{net}", source=source)[0])
    source = "127.0.14.1"  # a client that never downloads the file whole
    for headers, method in (
        ({}, "HEAD"),
        ({"If-None-Match": f'"{SHA}"'}, "GET"),
        ({"Range": "bytes=5000-"}, "GET"),
        ({"Range": "bytes=999999-"}, "GET"),
    ):
        answers.append(get(port, KEPT, headers=headers, method=method, source=source)[0])
    answers.append(get(port, KEPT + ".sha256", source=source)[0])
    for net in (15, 16):  # the latest, twice each: cached by no one between them
        for _ in range(2):
            answers.append(get(port, latest, source=f"127.0.{net}.1")[0])
    answers.append(get(port, counting + quote(ELSEWHERE), source="127.0.17.1")[0])
    answers.append(get(port, counting + kept_url, source="127.0.18.1")[0])
    answers.append(get(port, KEPT, source="127.0.18.1")[0])  # its redirect, followed
    return answers


@pytest.mark.system
def test_through_nginx_the_counts_are_those_without_it(nginx_available, kept):  # noqa: F811
    expected = {("alpha", 9, SHA): 6, ("alpha", 5, ELSEWHERE): 1}
    with tempfile.TemporaryDirectory() as work:
        os.chmod(work, 0o755)  # nginx's workers (nobody) read the store below it
        data = os.path.join(work, "data")
        shutil.copytree(kept, data)
        port = free_port()
        with nginx_in_front(data, os.path.join(work, "via-nginx"), port) as process:
            via_nginx = scenario(port, f"http://127.0.0.1:{port}")
            stop(process)
        direct_state = os.path.join(work, "direct")
        with real_server(data, "--state", direct_state, "--public-url", "http://x.example") as (
            direct,
            process,
        ):
            without = scenario(direct, "http://x.example")
            stop(process)
        assert via_nginx == without
        assert stored(os.path.join(work, "via-nginx")) == stored(direct_state) == expected
