"""Fixtures: a temporary data directory, the store over it, the app and a webtest client; a
fake Jenkins."""

import atexit
import http.server
import shutil
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
settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False, database=None)
settings.load_profile("ci")
# Hypothesis keeps files of its own even without a database: not in the checkout.
HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="buildshelf-hypothesis-")
set_hypothesis_home_dir(HYPOTHESIS_HOME)
atexit.register(shutil.rmtree, HYPOTHESIS_HOME, ignore_errors=True)


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
