"""Fixtures: a temporary data directory, the store over it, the app and a webtest client."""

import pytest
import webtest
from hypothesis import settings

import server
import store as store_module
from helpers import ALPHA_BUILDS, make_build, make_project, write_file

# The same examples on every run, so CI never fails one run in ten: a property test found a
# crash on its own that way, and a test that fails at random is no test. To look for new
# failures, run `pytest --hypothesis-profile explore` (fresh random examples each run).
settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False, database=None)
settings.load_profile("ci")


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
    def checked_first(environ, start_response):
        # Tests edit files between requests: check them first, as the server's watcher
        # thread would have by the time a real client asked again.
        store.refresh()
        return app(environ, start_response)

    return webtest.TestApp(checked_first)
