"""Kept files sent by nginx in front: downloads.handed_over, --accel-redirect through the app,
and deploy/nginx.conf on real nginx (bench/nginx.py measures more; this runs in seconds).

The real-nginx tests need Debian's nginx; without it they are skipped (with CI=true they fail
instead).
"""

import contextlib
import hashlib
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from email.utils import formatdate
from types import SimpleNamespace

import pytest
import webtest

from buildshelf import cli, server, settings
from buildshelf import store as store_module
from buildshelf.web import downloads
from helpers import ROOT, real_server
from test_downloads import CONTENT, MODIFIED_DATE, body_bytes, request, stored, whole_headers

sys.path.insert(0, os.path.join(ROOT, "bench"))

import harness  # noqa: E402  (bench/harness.py)
import nginx as nginx_bench  # noqa: E402

# Each test here starts a process (tests/conftest.py): none is in the fast lane.
pytestmark = pytest.mark.system

URI = "/_objects/ab/abcdef"
FROM_NGINX = {"HTTP_X_BUILDSHELF_ACCEL": "1"}  # what deploy/nginx.conf sets


@pytest.fixture
def download(tmp_path):
    return stored(tmp_path)


def handed_over_headers(download, ranges_too=False):
    """What Buildshelf answers nginx: the 200's headers for no body, X-Accel-Redirect first;
    Accept-Ranges only for a range nginx is to answer (nginx adds one to a 200 itself)."""
    headers = [
        h for h in whole_headers(download, length=0) if h[0] != "Accept-Ranges" or ranges_too
    ]
    return [("X-Accel-Redirect", URI), *headers]


def answered_itself(download, environ):
    """Whether handed_over answered as answer() does, bytes and all."""
    status, headers, body = downloads.handed_over(download, environ, URI)
    expected = downloads.answer(download, environ)
    return (status, headers, body_bytes(body)) == (
        expected[0],
        expected[1],
        body_bytes(expected[2]),
    )


# --- downloads.handed_over ---


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_download_is_handed_over_with_every_header_and_no_body(download, method):
    status, headers, body = downloads.handed_over(download, request(method), URI)
    assert (status, headers, body) == ("200 OK", handed_over_headers(download), [])


@pytest.mark.parametrize(
    "headers",
    [
        {"range": "bytes=0-99"},
        {"range": "bytes=9000-"},
        {"range": "bytes=-100"},
        {"range": "bytes=5-9", "if_range": MODIFIED_DATE},
        {"range": "bytes=5-9", "if_range": '"{tag}"'},
    ],
)
def test_a_plain_range_is_left_to_nginx(download, headers):
    headers = {name: value.format(tag=download.sha256) for name, value in headers.items()}
    status, answered, body = downloads.handed_over(download, request(**headers), URI)
    assert (status, answered, body) == ("200 OK", handed_over_headers(download, True), [])


def test_a_range_whose_if_range_fails_is_handed_over_whole(download):
    environ = request(range="bytes=0-9", if_range='"another"')
    assert downloads.handed_over(download, environ, URI)[:2] == (
        "200 OK",
        handed_over_headers(download),
    )


@pytest.mark.parametrize(
    "headers, status",
    [
        ({"if_none_match": '"{tag}"'}, "304"),
        ({"range": "bytes=10000-"}, "416"),
        ({"if_match": '"0123"'}, "412"),
        ({"if_unmodified_since": "Tue, 14 Nov 2000 22:13:20 GMT"}, "412"),
    ],
)
def test_304_412_and_416_are_answered_without_nginx(download, headers, status):
    environ = request(
        **{name: value.format(tag=download.sha256) for name, value in headers.items()}
    )
    answered = downloads.handed_over(download, environ, URI)
    assert answered == downloads.answer(download, environ)
    assert answered[0][:3] == status and "X-Accel-Redirect" not in dict(answered[1])


@pytest.mark.parametrize(
    "headers",
    [
        # nginx compares If-Match with its own ETag, If-Unmodified-Since with the file's time
        {"if_match": '"{tag}"'},
        {"if_unmodified_since": "Tue, 14 Nov 2100 22:13:20 GMT"},
        {"range": "bytes=0-1,5-6"},  # ignored here
        {"range": "items=0-1"},
        {"range": "bytes=5-1"},  # nginx would answer 416 to these
        {"range": "bytes=abc"},
        {"range": "Bytes = 5-7 "},
        {"range": "bytes=0-1,"},
        {"range": "bytes=0-" + "9" * 19},  # past nginx's 63-bit offsets
    ],
)
def test_what_nginx_would_judge_otherwise_is_answered_here(download, headers):
    headers = {name: value.format(tag=download.sha256) for name, value in headers.items()}
    assert answered_itself(download, request(**headers))


def test_a_missing_file_is_unavailable_before_anything_is_handed_over(download):
    os.remove(download.path)
    for environ in (request(), request(if_none_match="*"), request(range="bytes=0-1")):
        with pytest.raises(downloads.Unavailable, match="^missing$"):
            downloads.handed_over(download, environ, URI)


def test_a_link_is_not_handed_over(tmp_path, download):
    os.rename(download.path, tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", download.path)
    with pytest.raises(downloads.Unavailable, match="^is a symbolic link, not a regular file$"):
        downloads.handed_over(download, request(), URI)


# --- --accel-redirect ---


@pytest.fixture
def kept(data_dir, tmp_path):
    """Build 9 of alpha, its file kept: (its download path, the file's bytes)."""
    jar = tmp_path / "alpha-9.jar"
    jar.write_bytes(CONTENT)
    assert cli.main(["publish", "alpha", "--data", str(data_dir), "--build", "9", "--channel",
                     "1.21", "--timestamp", "1700000000000", "--file", str(jar)]) == 0  # fmt: skip
    sha = hashlib.sha256(CONTENT).hexdigest()
    return f"/downloads/alpha/9/{sha}/alpha-9.jar", sha


def test_the_app_hands_kept_files_to_the_location_named(data_dir, kept):
    path, sha = kept
    app = server.make_app(store_module.Store(data_dir, check_interval=0), accel_redirect="/_o")
    client = webtest.TestApp(app, extra_environ=FROM_NGINX)
    resp = client.get(path)
    assert resp.headers["X-Accel-Redirect"] == f"/_o/{sha[:2]}/{sha}"
    assert (resp.headers["Content-Length"], resp.body) == ("0", b"")
    assert client.get(path + ".sha256").text == f"{sha}  alpha-9.jar\n"
    assert "X-Accel-Redirect" not in client.get(path + ".sha256").headers
    os.unlink(data_dir / "artifacts" / sha[:2] / sha)
    assert client.get(path, status=503).json["code"] == "artifact_unavailable"


def test_without_the_setting_buildshelf_sends_the_bytes(data_dir, kept):
    client = webtest.TestApp(server.make_app(store_module.Store(data_dir, check_interval=0)))
    resp = client.get(kept[0])
    assert "X-Accel-Redirect" not in resp.headers and resp.body == CONTENT


def test_with_the_setting_a_request_not_from_nginx_gets_the_bytes_and_a_warning(
    data_dir, kept, caplog
):
    """deploy/buildshelf.env sets the prefix; without nginx in front, no empty jar."""
    app = server.make_app(store_module.Store(data_dir, check_interval=0), accel_redirect="/_o")
    client = webtest.TestApp(app)
    for _ in range(3):
        resp = client.get(kept[0])
        assert "X-Accel-Redirect" not in resp.headers and resp.body == CONTENT
        assert resp.headers["Content-Length"] == str(len(CONTENT))
    warned = [r for r in caplog.records if "X-Buildshelf-Accel" in r.getMessage()]
    assert len(warned) == 1 and warned[0].levelname == "WARNING", caplog.text
    assert "/_o" in warned[0].getMessage()
    for other in ("0", "yes", ""):  # only nginx's own value hands a download over
        resp = client.get(kept[0], headers={"X-Buildshelf-Accel": other})
        assert resp.body == CONTENT


@pytest.mark.parametrize("value, taken", [("/_objects", "/_objects"), ("/a/b_c/", "/a/b_c")])
def test_the_prefix_is_a_plain_path(value, taken):
    assert settings.location_prefix(value) == taken


@pytest.mark.parametrize(
    "value", ["_objects", "/", "/a/../b", "/..", "/a/.", "//a", "/a b", "/%2e", "/a?b", ""]
)
def test_another_prefix_is_bad_usage_naming_the_flag_or_variable(data_dir, value, capsys):
    for argv, environ, named in (
        (["--accel-redirect", value], {}, "--accel-redirect"),
        ([], {"BUILDSHELF_ACCEL_REDIRECT": value}, "BUILDSHELF_ACCEL_REDIRECT"),
    ):
        with pytest.raises(SystemExit) as raised:
            cli.parse_args(["--data", str(data_dir), *argv], environ=environ)
        assert raised.value.code == 2
        assert named in capsys.readouterr().err


# --- deploy/nginx.conf on real nginx ---


@pytest.fixture
def nginx_available():
    missing = [tool for tool in ("nginx", "curl") if shutil.which(tool) is None]
    if missing:
        message = f"missing {', '.join(missing)}: as root, apt-get install -y nginx curl"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail("CI must run the real-nginx tests: " + message)
        pytest.skip(message)


@pytest.fixture
def behind_nginx(nginx_available, data_dir):
    """deploy/nginx.conf (without TLS and limits, as bench/nginx.py runs it) before a real
    Buildshelf started as deploy/buildshelf.service starts it: nginx's port, a kept file's
    path, content and object, and the same data's app sending files itself (plain)."""
    # Not in pytest's own directory, which nginx's workers (nobody, under root) cannot enter.
    with tempfile.TemporaryDirectory() as work:
        os.chmod(work, 0o755)
        data = os.path.join(work, "data")
        shutil.copytree(data_dir, data)
        content = random.Random(5).randbytes(3 << 20)
        jar = os.path.join(work, "alpha-9.jar")
        with open(jar, "wb") as f:
            f.write(content)
        assert cli.main(["publish", "alpha", "--data", data, "--build", "9", "--channel",
                         "1.21", "--timestamp", "1700000000000", "--file", jar]) == 0  # fmt: skip
        sha = hashlib.sha256(content).hexdigest()
        path = f"/downloads/alpha/9/{sha}/alpha-9.jar"
        port, http_port = harness.free_port(), harness.free_port()
        prefix = nginx_bench.unit_environment()["BUILDSHELF_ACCEL_REDIRECT"]
        flags = ("--accel-redirect", prefix, "--public-url", f"http://127.0.0.1:{port}")
        with real_server(data, *flags) as (upstream, process):
            with open(nginx_bench.SITE) as f:
                site = nginx_bench.render_site(
                    f.read(), os.path.join(work, "nginx"), upstream, port,
                    store=os.path.join(data, "artifacts"), http_port=http_port,
                )  # fmt: skip
            argv = nginx_bench.write_config(os.path.join(work, "nginx"), site)
            nginx = harness.Server.nginx(argv, port)
            try:
                plain = server.make_app(store_module.Store(data, check_interval=0))
                yield SimpleNamespace(
                    port=port,
                    http_port=http_port,
                    nginx_dir=os.path.join(work, "nginx"),
                    upstream=upstream,
                    process=process,
                    path=path,
                    content=content,
                    object=os.path.join(data, "artifacts", sha[:2], sha),
                    plain=webtest.TestApp(plain),
                )
            finally:
                nginx.stop()


def through(port, path, method="GET", headers=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(method, path, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.getheaders(), response.read()
    finally:
        connection.close()


def compared(headers):
    """Headers as both servers write them: names in lowercase, without the connection's and
    the software's own."""
    return {n.lower(): v for n, v in headers if n.lower() not in nginx_bench.NOT_COMPARED}


@pytest.mark.parametrize(
    "method, headers",
    [
        ("GET", {}),
        ("HEAD", {}),
        ("GET", {"Range": "bytes=1000-1999"}),
        ("GET", {"Range": "bytes=0-9", "If-Range": '"another"'}),
        ("GET", {"Range": "bytes=99999999-"}),
        ("GET", {"If-Match": '"another"'}),
        ("HEAD", {"If-Match": '"another"'}),
        ("GET", {"If-Match": '"another"', "If-None-Match": "*"}),
        ("GET", {"If-Unmodified-Since": "Tue, 14 Nov 2000 22:13:20 GMT"}),
        ("GET", {"If-Match": "*", "Range": "bytes=0-9"}),
        # docker-minecraft-server's check of its copy (docs/container.md): 304 from the
        # build's time on, as Buildshelf answers it.
        ("GET", {"If-Modified-Since": "Tue, 14 Nov 2023 22:13:20 GMT"}),
        ("HEAD", {"If-Modified-Since": "Tue, 14 Nov 2023 22:13:20 GMT"}),
        ("GET", {"If-Modified-Since": "Tue, 14 Nov 2023 22:13:19 GMT"}),
    ],
)
def test_nginx_sends_what_buildshelf_would(behind_nginx, method, headers):
    path = behind_nginx.path
    status, got, body = through(behind_nginx.port, path, method, headers)
    expected = behind_nginx.plain.request(path, method=method, headers=headers, expect_errors=True)
    assert (status, compared(got), body) == (
        expected.status_int,
        compared(expected.headerlist),
        expected.body,
    )
    if method == "GET" and not headers:
        assert body == behind_nginx.content
        assert {h.lower() for h in nginx_bench.DOWNLOAD_HEADERS} <= set(compared(got))


def test_through_nginx_a_validator_gets_304_and_curl_resumes(behind_nginx, tmp_path):
    port, path, content = behind_nginx.port, behind_nginx.path, behind_nginx.content
    etag = f'"{hashlib.sha256(content).hexdigest()}"'
    assert through(port, path, headers={"If-None-Match": etag})[::2] == (304, b"")
    out = tmp_path / "cut.jar"
    out.write_bytes(content[: 1 << 20])
    curl = subprocess.run(
        ["curl", "-sS", "--noproxy", "*", "-f", "-C", "-", "-o", str(out),
         f"http://127.0.0.1:{port}{path}"],
        capture_output=True, timeout=60,
    )  # fmt: skip
    assert (curl.returncode, out.read_bytes() == content) == (0, True)


def test_nginx_follows_no_link_in_the_store(behind_nginx):
    """Buildshelf refuses an object that is a link (503); nginx refuses any link below the
    store, such as a directory of objects moved elsewhere and linked back."""
    prefix_dir = os.path.dirname(behind_nginx.object)
    elsewhere = os.path.join(os.path.dirname(os.path.dirname(prefix_dir)), "elsewhere")
    shutil.move(prefix_dir, elsewhere)
    os.symlink(elsewhere, prefix_dir)
    assert through(behind_nginx.port, behind_nginx.path)[0] == 404


@pytest.mark.parametrize("validator", ["If-None-Match", "If-Modified-Since"])
def test_the_objects_own_validators_never_answer_through_nginx(behind_nginx, validator):
    """nginx's own ETag is the file's time and size, its Last-Modified the file's time: a
    client never sees them, and deploy/nginx.conf turns them off."""
    os.utime(behind_nginx.object, (1_600_000_000, 1_600_000_000))  # before the build's time
    size = len(behind_nginx.content)
    value = {
        "If-None-Match": f'"{1_600_000_000:x}-{size:x}"',
        "If-Modified-Since": formatdate(1_600_000_000, usegmt=True),
    }[validator]
    status, _, body = through(behind_nginx.port, behind_nginx.path, headers={validator: value})
    assert (status, body) == (200, behind_nginx.content)


def test_plain_http_is_redirected_to_https_but_certbot_s_challenges(behind_nginx):
    for target in ("/", "/downloads/latest?project=alpha", behind_nginx.path):
        status, headers, _ = through(behind_nginx.http_port, target)
        assert (status, dict(headers)["Location"]) == (301, "https://127.0.0.1" + target)
    challenges = os.path.join(behind_nginx.nginx_dir, "acme", ".well-known", "acme-challenge")
    os.makedirs(challenges)
    with open(os.path.join(challenges, "t0ken"), "w") as f:
        f.write("t0ken.thumbprint")
    answer = through(behind_nginx.http_port, "/.well-known/acme-challenge/t0ken")
    assert (answer[0], answer[2]) == (200, b"t0ken.thumbprint")


def upstream_log(behind_nginx):
    """What Buildshelf behind nginx logged, once stopped."""
    behind_nginx.process.send_signal(signal.SIGINT)
    return behind_nginx.process.communicate(timeout=10)[1].splitlines()


def test_through_nginx_buildshelf_hands_downloads_over_whatever_the_client_says(behind_nginx):
    """deploy/nginx.conf sets X-Buildshelf-Accel to its own value, replacing any sent."""
    for forged in (None, "0", "no"):
        headers = {} if forged is None else {"X-Buildshelf-Accel": forged}
        status, answered, body = through(behind_nginx.port, behind_nginx.path, headers=headers)
        assert (status, body == behind_nginx.content) == (200, True)
        assert "x-accel-redirect" not in {name.lower() for name, _ in answered}
    logged = upstream_log(behind_nginx)
    downloads = [line for line in logged if f"GET {behind_nginx.path} " in line]
    assert len(downloads) == 3 and all(" 200 handed-over " in line for line in downloads)
    assert not [line for line in logged if "X-Buildshelf-Accel" in line]


def test_the_server_as_the_unit_runs_it_sends_whole_files_to_a_client_not_behind_nginx(
    behind_nginx, tmp_path
):
    """The shipped settings (BUILDSHELF_ACCEL_REDIRECT) with nothing in front: curl -fsSO
    saves the whole jar, not 0 bytes; the server says once why nginx is not sending it."""
    url = f"http://127.0.0.1:{behind_nginx.upstream}{behind_nginx.path}"
    for _ in range(2):
        curl = subprocess.run(
            ["curl", "-fsSO", "--noproxy", "*", url], cwd=tmp_path, capture_output=True, timeout=60
        )
        assert curl.returncode == 0, curl.stderr
        assert (tmp_path / "alpha-9.jar").read_bytes() == behind_nginx.content
    assert through(behind_nginx.port, behind_nginx.path)[2] == behind_nginx.content
    warnings = [line for line in upstream_log(behind_nginx) if "X-Buildshelf-Accel" in line]
    assert len(warnings) == 1, warnings


def test_through_nginx_buildshelf_still_says_what_exists(behind_nginx):
    port, path = behind_nginx.port, behind_nginx.path
    sha = path.split("/")[4]
    inside = f"/_objects/{sha[:2]}/{sha}"
    for outside in (path.replace("/9/", "/8/"), inside, path + "/%2e%2e" * 5 + inside):
        assert through(port, outside)[0] == 404
    os.unlink(behind_nginx.object)
    status, headers, body = through(port, path)
    assert (status, json.loads(body)["code"]) == (503, "artifact_unavailable")


def test_nginx_keeps_the_metrics_off_the_public_site(behind_nginx):
    """However the path is spelt: Buildshelf decodes and routes only /metrics itself."""
    for method in ("GET", "HEAD"):
        for target in ("/metrics", "/metrics?x=1", "//metrics", "/%6detrics", "/%2Fmetrics",
                       "/api/../metrics", "/./metrics", "/metrics/", "/Metrics"):  # fmt: skip
            status, _, body = through(behind_nginx.port, target, method)
            assert (target, status) == (target, 404) and b"buildshelf_" not in body
    # Straight to Buildshelf, on 127.0.0.1, as the scraper asks for them.
    status, _, body = through(behind_nginx.upstream, "/metrics")
    assert status == 200 and b"buildshelf_http_requests_total" in body


def test_through_nginx_a_yanked_build_is_410_never_cached_until_unyanked(behind_nginx):
    """Yanked, unyanked, yanked and purged: nginx passes on each answer at once, caching none
    of the 410s (Cache-Control: no-store)."""
    port, path = behind_nginx.port, behind_nginx.path
    data = os.path.dirname(os.path.dirname(os.path.dirname(behind_nginx.object)))

    def answered(status, *methods):
        deadline = time.monotonic() + 10  # the server's watcher sees the edit
        while through(port, path, "HEAD")[0] != status and time.monotonic() < deadline:
            time.sleep(0.1)
        for method in methods:
            got, headers, body = through(port, path, method)
            assert got == status, body
            yield dict(headers), body

    # Its .sha256 line is answered like the file it describes: not from nginx's cache for a
    # year once the build is yanked (issue 38).
    assert through(port, path + ".sha256")[0] == 200
    assert through(port, path + ".sha256")[0] == 200
    yank = ["yank", "alpha", "9", "--data", data, "--reason", "a bad build"]
    assert cli.main(yank) == 0
    (got, _), (head, _) = answered(410, "GET", "HEAD")
    assert got["Cache-Control"] == head["Cache-Control"] == "no-store"
    assert json.loads(through(port, path)[2])["code"] == "build_yanked"
    status, _, body = through(port, path + ".sha256")
    assert (status, json.loads(body)["code"]) == (410, "build_yanked")
    assert cli.main(["unyank", "alpha", "9", "--data", data]) == 0
    [(_, body)] = answered(200, "GET")
    assert body == behind_nginx.content
    assert cli.main(yank) == 0
    assert cli.main(["purge", "alpha", "--older-than", "0", "--data", data]) == 0
    assert not os.path.exists(behind_nginx.object)
    [(headers, body)] = answered(410, "GET")
    assert json.loads(body)["reason"] == "a bad build"


# Chromium's Accept when it follows a link: text/html ranked above */* (JSON).
BROWSER_ACCEPT = (
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,"
    "*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"
)


def curl_headers_and_body(url):
    """curl's own request (Accept: */*), as a script downloads: (status, headers, body)."""
    done = subprocess.run(
        ["curl", "-sS", "--noproxy", "*", "-D", "-", url], capture_output=True, timeout=30
    )
    head, _, body = done.stdout.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines)
    return int(status_line.split()[1]), headers, body


def test_through_nginx_a_browser_gets_the_yanked_builds_page_and_curl_the_json(behind_nginx):
    """The same URL, asked in turns by a browser and by curl, twice: each gets its own answer
    every time, never the other's (no cache between, Vary: Accept for any there may be)."""
    port, path = behind_nginx.port, behind_nginx.path
    data = os.path.dirname(os.path.dirname(os.path.dirname(behind_nginx.object)))
    assert cli.main(["yank", "alpha", "9", "--data", data, "--reason", "<b>bad</b> jar"]) == 0
    deadline = time.monotonic() + 10  # the server's watcher sees the edit
    while through(port, path, "HEAD")[0] != 410 and time.monotonic() < deadline:
        time.sleep(0.1)
    for _ in range(2):
        for target in (path, path + ".sha256"):
            status, headers, body = through(port, target, headers={"Accept": BROWSER_ACCEPT})
            headers = dict(headers)
            assert (status, headers["Content-Type"]) == (410, "text/html; charset=utf-8"), body
            assert (headers["Vary"], headers["Cache-Control"]) == ("Accept", "no-store")
            assert b"Build #9 of Alpha was yanked" in body and b"&lt;b&gt;bad&lt;/b&gt;" in body
            assert b"/projects/alpha#build-" in body  # the latest build, on its page
            status, headers, body = curl_headers_and_body(f"http://127.0.0.1:{port}{target}")
            assert (status, headers["Content-Type"]) == (410, "application/json"), body
            assert (headers["Vary"], headers["Cache-Control"]) == ("Accept", "no-store")
            assert json.loads(body)["reason"] == "<b>bad</b> jar"


# --- publishing through deploy/nginx.conf on real nginx ---

UPLOAD_LIMIT_MB = 64  # --max-file-mb for these runs, nginx's limit moved with it


@contextlib.contextmanager
def nginx_with_tls(argv, port):
    """nginx in the foreground with the site's TLS on: harness.Server's readiness probe speaks
    plain HTTP, so here curl asks for /healthz over TLS."""
    process = subprocess.Popen(argv + ["-g", "daemon off;"], stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while subprocess.run(
            [
                "curl",
                "-skf",
                "--noproxy",
                "*",
                "-o",
                "/dev/null",
                f"https://127.0.0.1:{port}/healthz",
            ]
        ).returncode:
            assert process.poll() is None and time.monotonic() < deadline, "nginx did not start"
            time.sleep(0.05)
        yield process.pid
    finally:
        process.send_signal(signal.SIGQUIT)  # its workers finish, then it exits
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def publishing_through_nginx(request, nginx_available, data_dir):
    """deploy/nginx.conf before a real Buildshelf with --max-file-mb 64 and the site's limit
    moved to match: without TLS and limits (as bench/nginx.py runs it), or, given the
    parameter "https", with them and a self-signed certificate (curl then speaks HTTP/2, as
    it would to the real site). nginx's access log also in the default format (`combined`), and its error log at
    `warn`. Yields its URL, a token for alpha, the data directory, nginx's directory and pid,
    and the two limits."""
    with tempfile.TemporaryDirectory() as work:
        os.chmod(work, 0o755)  # nginx's workers run as nobody under root
        data = os.path.join(work, "data")
        shutil.copytree(data_dir, data)
        token = subprocess.run(
            [sys.executable, "-m", "buildshelf", "token", "create", "alpha", "--data", data],
            check=True, capture_output=True, text=True, timeout=60,
        ).stdout.strip()  # fmt: skip
        port = harness.free_port()
        scheme = getattr(request, "param", "http")
        url = f"{scheme}://127.0.0.1:{port}"
        flags = ("--max-file-mb", str(UPLOAD_LIMIT_MB), "--public-url", url)
        nginx_dir = os.path.join(work, "nginx")
        os.makedirs(nginx_dir)
        cert = nginx_bench.self_signed(nginx_dir) if scheme == "https" else None
        with real_server(data, *flags) as (upstream, process):
            with open(nginx_bench.SITE) as f:
                site = nginx_bench.render_site(
                    f.read(), nginx_dir, upstream, port, cert=cert, max_file_mb=UPLOAD_LIMIT_MB
                )
            argv = nginx_bench.write_config(nginx_dir, site)
            main_conf = os.path.join(nginx_dir, "nginx.conf")
            with open(main_conf) as f:
                text = f.read()
            text = text.replace(
                "    access_log ", f"    access_log {nginx_dir}/combined.log;\n    access_log ", 1
            ).replace("error.log;", "error.log warn;", 1)
            assert "combined.log;" in text and "error.log warn;" in text
            with open(main_conf, "w") as f:
                f.write(text)
            app = server.make_app(
                store_module.Store(data, check_interval=0), max_file_mb=UPLOAD_LIMIT_MB
            )
            [nginx_limit] = re.findall(r"client_max_body_size (\d+)m;", site)
            with contextlib.ExitStack() as stack:
                if cert:
                    pid = stack.enter_context(nginx_with_tls(argv, port))
                else:
                    pid = stack.enter_context(harness.Server.nginx(argv, port)).pid
                yield SimpleNamespace(
                    url=url, port=port, token=token, data=data, nginx_dir=nginx_dir,
                    nginx_pid=pid, max_body_bytes=app.max_body_bytes,
                    nginx_limit_mb=int(nginx_limit),
                )  # fmt: skip


def curl_put(url, path, token, *args):
    """curl's PUT through nginx with the token on stdin, as the docs' recipes send it:
    (exit status, Buildshelf's answer, the HTTP version spoken)."""
    done = subprocess.run(
        ["curl", "--fail-with-body", "-sS", "-k", "--noproxy", "*", "-H", "@-", "-X", "PUT",
         "-w", "\n%{http_version}", *args, url + path],
        input=f"Authorization: Bearer {token}\n", capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    answer, _, version = done.stdout.rpartition("\n")
    return done.returncode, json.loads(answer) if answer else done.stderr, version


def nginx_files_and_memory(pids):
    """The files nginx's processes `pids` hold open (a body nginx buffers is a temporary file,
    unlinked at once but held: '... (deleted)'), and their resident memory in KiB."""
    files, rss = set(), 0
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    files.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
            with open(f"/proc/{pid}/status") as f:
                rss += int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M)[1])
        except (OSError, TypeError):
            continue  # a process that went, or one with no memory of its own to report
    return files, rss


@pytest.mark.parametrize("publishing_through_nginx", ["http", "https"], indirect=True)
def test_a_large_upload_goes_through_nginx_whole_without_touching_its_disk(
    publishing_through_nginx, tmp_path
):
    site = publishing_through_nginx
    content = random.Random(50).randbytes(50 << 20)
    jar = tmp_path / "alpha-1.21-40.jar"
    jar.write_bytes(content)
    body_temp = os.path.join(site.nginx_dir, "body")  # client_body_temp_path
    pids = harness.process_tree(site.nginx_pid)
    held, rss_before, done = set(), nginx_files_and_memory(pids)[1], threading.Event()
    rss_peak = [rss_before]

    def watch():
        while not done.is_set():
            files, rss = nginx_files_and_memory(pids)
            held.update(path for path in files if path.startswith(body_temp))
            rss_peak[0] = max(rss_peak[0], rss)
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        # At 25 MB/s, two seconds of upload: a buffered body would be held that long.
        status, answer, version = curl_put(
            site.url, "/api/v2/projects/alpha/builds/40", site.token, "--limit-rate", "25M",
            "-F", 'build={"channelVersion": "1.21"};type=application/json',
            "-F", f"file=@{jar}",
        )  # fmt: skip
    finally:
        done.set()
        watcher.join()
    sha = hashlib.sha256(content).hexdigest()
    assert status == 0, answer
    assert version == ("2" if site.url.startswith("https:") else "1.1")
    assert (answer["buildNumber"], answer["sha256"], answer["size"]) == (40, sha, len(content))
    with open(os.path.join(site.data, "artifacts", sha[:2], sha), "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == sha
    assert held == set()
    assert not os.path.isdir(body_temp) or os.listdir(body_temp) == []
    assert rss_peak[0] - rss_before < 8 << 10, "KiB more in nginx's processes"
    with open(os.path.join(site.nginx_dir, "error.log")) as f:
        assert "buffered to a temporary file" not in f.read()  # nginx warns when it does
    with open(os.path.join(site.nginx_dir, "combined.log")) as f:
        logged = f.read()
    assert f'"PUT /api/v2/projects/alpha/builds/40 HTTP/{version}' in logged
    assert site.token.split("_", 2)[2] not in logged  # the default format logs no header


def over_the_limit(port, length, token):
    """The answer to a PUT whose Content-Length is `length`, its body never sent."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest("PUT", "/api/v2/projects/alpha/builds/41")
        for name, value in (
            ("Authorization", f"Bearer {token}"),
            ("Content-Type", "multipart/form-data; boundary=x"),
            ("Content-Length", str(length)),
        ):
            connection.putheader(name, value)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type"), response.read()
    finally:
        connection.close()


def test_an_upload_over_the_limit_is_a_413_at_once_through_nginx(publishing_through_nginx):
    site = publishing_through_nginx
    # Over Buildshelf's limit (the file and its framing), under nginx's: Buildshelf's own JSON
    # 413, at once.
    status, kind, body = over_the_limit(site.port, site.max_body_bytes + 1, site.token)
    assert (status, kind, json.loads(body)["code"]) == (413, "application/json", "too_large")
    # Over nginx's too: its own 413, the backstop.
    status, kind, body = over_the_limit(site.port, (site.nginx_limit_mb << 20) + 1, site.token)
    assert (status, kind) == (413, "text/html") and b"413" in body


# --- trying deploy/nginx.conf locally, as docs/running.md says ---


def test_the_recipe_that_tries_the_site_locally_runs_as_written(nginx_available):
    """The block of "Trying the site locally" run as one script, from a checkout of its own
    (links to this one's, a copy of data/: nothing is written here), with free ports."""
    with open(os.path.join(ROOT, "docs", "running.md"), encoding="utf-8") as f:
        running = f.read()
    section = running.split("### Trying the site locally", 1)[1]
    recipe = re.search(r"^```sh\n(.*?)^```", section, re.M | re.S)[1]
    *steps, stop = recipe.strip().splitlines()
    upstream, port = harness.free_port(), harness.free_port()
    with tempfile.TemporaryDirectory() as checkout:
        os.chmod(checkout, 0o755)  # nginx's workers run as nobody when root starts it
        for name in ("server.py", "bench", "deploy"):
            os.symlink(os.path.join(ROOT, name), os.path.join(checkout, name))
        shutil.copytree(os.path.join(ROOT, "data"), os.path.join(checkout, "data"))
        script = "\n".join([f"trap '{stop}' EXIT", *steps])
        for old, new in (("/tmp/nginx-try", f"{checkout}/nginx-try"), ("8080", str(upstream)),
                         ("8081", str(port)), ("python ", f"{sys.executable} ")):  # fmt: skip
            assert old in script
            script = script.replace(old, new)
        done = subprocess.run(["timeout", "60", "sh", "-euc", script], cwd=checkout,
                              capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert os.path.isdir(f"{checkout}/data/.buildshelf")  # the copy served, not ours
        assert done.stdout.splitlines()[-2:] == ["X-Cache-Status: MISS", "200 371"]
        deadline = time.monotonic() + 15  # its last line stops nginx and Buildshelf
        while any(listening(p) for p in (port, upstream)):
            assert time.monotonic() < deadline, "the recipe left a server running"
            time.sleep(0.05)


def listening(port):
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
        return True
    return False
