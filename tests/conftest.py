"""Fixtures: a temporary data directory, the store over it, the app and a webtest client; a
fake Jenkins. The hypothesis profiles. And the `system` marker's check: a test that starts a
process (a server, nginx, Chromium, javac, a shell) must carry it, so that `pytest -m "not
system"` (the fast lane) starts none."""

import atexit
import http.server
import shutil
import subprocess
import tempfile
import threading
from typing import NamedTuple

import pytest
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

from buildshelf import server
from buildshelf import store as store_module
from helpers import ALPHA_BUILDS, FREESTYLE, make_build, make_project, refreshing_client, write_file

# The same examples on every run, so CI never fails one run in ten: a property test found a
# crash on its own that way, and a test that fails at random is no test. To look for new
# failures, run `pytest --hypothesis-profile explore` (fresh random examples each run).
# How many examples each property test runs is the profile's, never a test's: "ci" for the
# whole suite, "quick" for the fast lane (`pytest -m "not system"`), which loads it unless
# --hypothesis-profile names another. No deadline: this machine is noisy, and a write fsyncs.
settings.register_profile("ci", derandomize=True, database=None, max_examples=250, deadline=None)
settings.register_profile("quick", settings.get_profile("ci"), max_examples=25)
settings.register_profile("explore", settings.get_profile("ci"), derandomize=False)
settings.load_profile("ci")
# Hypothesis keeps files of its own even without a database: not in the checkout.
HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="buildshelf-hypothesis-")
set_hypothesis_home_dir(HYPOTHESIS_HOME)
atexit.register(shutil.rmtree, HYPOTHESIS_HOME, ignore_errors=True)


def pytest_configure(config):
    if "not system" in (config.option.markexpr or "") and not config.getoption(
        "hypothesis_profile"
    ):
        settings.load_profile("quick")


@pytest.fixture
def data_dir(tmp_path):
    directory = tmp_path / "data"
    directory.mkdir()
    write_file(directory / "alpha.json", make_project(ALPHA_BUILDS))
    write_file(
        directory / "beta.json",
        make_project(
            [make_build(10, "2.0")],
            ciJob="Beta",
            ciJobUrl="https://ci.example.org/job/Beta/",
            javadocBaseUrl="https://jd.example.org/beta",
        ),
    )
    return directory


@pytest.fixture
def store(data_dir):
    return store_module.Store(data_dir, check_interval=0)


@pytest.fixture
def app(store):
    return server.make_app(store)


@pytest.fixture
def client(app, store):
    return refreshing_client(app, store)


class FakeJenkins(NamedTuple):
    base: str  # http://127.0.0.1:PORT
    paths: list  # the paths asked for, in order
    routes: dict  # path -> bytes to answer 200 with, or a function of the request handler
    release: threading.Event  # set at the end: a handler that stalls waits for it


@pytest.fixture
def fake_jenkins():
    """A Jenkins on 127.0.0.1 serving the freestyle fixture at /job/Alpha/api/json, and what a
    test puts in `routes`."""
    paths, routes, release = [], {}, threading.Event()
    with open(FREESTYLE, "rb") as f:
        freestyle = f.read()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            paths.append(self.path)
            route = routes.get(self.path)
            if callable(route):
                return route(self)
            if route is not None or self.path.startswith("/job/Alpha/api/json"):
                body = freestyle if route is None else route
                self.send_response(200)
            else:
                body = b"<html>Not found</html>"
                self.send_response(404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.fake = FakeJenkins(f"http://127.0.0.1:{httpd.server_address[1]}", paths, routes, release)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield httpd.fake
    release.set()
    httpd.shutdown()
    httpd.server_close()
    thread.join()


@pytest.fixture(autouse=True)
def processes_only_in_system_tests(request):
    """A test not marked `system` that starts a process fails, naming it: the fast lane
    stays fast, and the marker true. Not through `monkeypatch`: an autouse fixture taking it
    would set it up first, so undo its patches last, after the test's own fixtures, which
    then met the patches in their teardown (one that restored os.umask)."""
    if request.node.get_closest_marker("system") is not None:
        yield
        return

    def refused(self, args, *rest, **kwargs):
        raise AssertionError(f"this test starts a process ({args!r}): mark it @pytest.mark.system")

    start = subprocess.Popen._execute_child
    subprocess.Popen._execute_child = refused
    try:
        yield
    finally:
        subprocess.Popen._execute_child = start
