"""The command line: serving flags and their variables, the named commands, start-up."""

import gc
import importlib.metadata
import json
import logging
import os
import shutil
import socket
import subprocess
import sys

import pytest
import webtest

from buildshelf import cli, settings
from buildshelf.serving import accesslog
from buildshelf.serving import server as serving
from buildshelf.web import contract
from helpers import make_build, make_project, server_argv, write_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_check_passes_valid_data(data_dir, capsys):
    assert cli.main(["--check", "--data", str(data_dir)]) == 0
    assert capsys.readouterr().out == ""


def test_check_prints_each_problem_and_fails(data_dir, capsys):
    write_file(data_dir / "broken.json", '{\n  "ciJob": "x",,\n}')
    write_file(data_dir / "gamma.json", make_project([make_build(7, isExperimental="no")]))
    assert cli.main(["--check", "--data", str(data_dir)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{data_dir / 'broken.json'}:2:16: Expecting property name enclosed in double quotes",
        f"{data_dir / 'gamma.json'}: build 7 (builds[0]): 'isExperimental' must be true or false",
    ]


def test_the_sample_data_is_valid():
    assert cli.main(["--check", "--data", os.path.join(ROOT, "data")]) == 0


def serve_args(monkeypatch, argv, environ=None):
    """main(argv) with waitress.serve replaced: what it would have served, and how."""
    calls = []
    monkeypatch.setattr(
        serving,
        "serve",
        lambda app, host, port, threads, on_listening, **options: calls.append(
            (app, {"host": host, "port": port, "threads": threads, **options})
        ),
    )
    for name, value in (environ or {}).items():
        monkeypatch.setenv(name, value)
    assert cli.main(argv) == 0
    [(app, kwargs)] = calls
    return app, kwargs


def test_defaults_serve_the_data_beside_server_py_on_localhost_8080(monkeypatch):
    for name in ("BUILDSHELF_DATA", "BUILDSHELF_HOST", "BUILDSHELF_PORT", "BUILDSHELF_THREADS"):
        monkeypatch.delenv(name, raising=False)
    app, kwargs = serve_args(monkeypatch, [])
    assert (kwargs["host"], kwargs["port"], kwargs["threads"]) == ("127.0.0.1", 8080, 8)
    assert settings.default_data_dir() == os.path.join(ROOT, "data")


def test_flags_win_over_the_environment(monkeypatch, data_dir, tmp_path):
    environ = {
        "BUILDSHELF_DATA": str(tmp_path),
        "BUILDSHELF_HOST": "0.0.0.0",
        "BUILDSHELF_PORT": "9000",
        "BUILDSHELF_THREADS": "2",
    }
    _, kwargs = serve_args(monkeypatch, [], environ)
    assert (kwargs["host"], kwargs["port"], kwargs["threads"]) == ("0.0.0.0", 9000, 2)
    app, kwargs = serve_args(
        monkeypatch,
        ["--data", str(data_dir), "--host", "::1", "--port", "8081", "--threads", "8"],
        environ,
    )
    assert (kwargs["host"], kwargs["port"], kwargs["threads"]) == ("::1", 8081, 8)
    import webtest

    assert len(webtest.TestApp(app).get("/api/v2/projects").json["projects"]) == 2


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--port", "http"], "argument --port: 'http' is not a whole number from 1 to 65535"),
        (["--port", "70000"], "argument --port: '70000' is not a whole number from 1 to 65535"),
        (["--threads", "0"], "argument --threads: '0' is not a whole number from 1 to 256"),
        (["--data", "/no/such/dir"], "argument --data: '/no/such/dir' is not a directory"),
    ],
)
def test_bad_flags_fail_fast_naming_the_value(argv, message, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_a_bad_environment_value_is_named_too(monkeypatch, capsys):
    monkeypatch.setenv("BUILDSHELF_PORT", "eighty")
    with pytest.raises(SystemExit):
        cli.main(["--check"])
    assert "'eighty' is not a whole number from 1 to 65535" in capsys.readouterr().err


# waitress leaves its socket and wake-up pipe open when it cannot bind: its leak, not ours.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_taken_port_is_a_clear_error(data_dir, caplog):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert cli.main(["--data", str(data_dir), "--port", str(port)]) == 1
    gc.collect()  # so the leak is reported here, where it is expected
    assert f"cannot listen on 127.0.0.1 port {port}: Address already in use" in caplog.text


def test_help_explains_every_flag(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for word in ("--data", "--host", "--port", "--threads", "--check", "BUILDSHELF_PORT"):
        assert word in out


def test_quiet_serves_without_the_access_log(monkeypatch, data_dir):
    argv = ["--data", str(data_dir), "--quiet", "--metrics", "off"]
    app, kwargs = serve_args(monkeypatch, argv)
    assert isinstance(app, contract.App) and kwargs["access_log"] is None
    app, kwargs = serve_args(monkeypatch, ["--data", str(data_dir)])
    assert isinstance(kwargs["access_log"], accesslog.LineWriter)
    assert kwargs["access_log"].to_line == accesslog.access_line
    assert kwargs["access_log"].observe == app.observe_requests
    assert app.recall is not None  # repeats are answered from memory either way


def test_quiet_with_metrics_hands_the_records_over_and_writes_no_line(monkeypatch, data_dir):
    app, kwargs = serve_args(monkeypatch, ["--data", str(data_dir), "--quiet"])
    assert kwargs["access_log"].to_line is None
    assert kwargs["access_log"].observe == app.observe_requests
    environ = {"BUILDSHELF_METRICS": "off"}
    app, kwargs = serve_args(monkeypatch, ["--data", str(data_dir), "--quiet"], environ)
    assert kwargs["access_log"] is None and app.observe_requests is None


def test_max_age_flag(monkeypatch, data_dir):
    import webtest

    app, _ = serve_args(monkeypatch, ["--data", str(data_dir), "--max-age", "300", "--quiet"])
    assert webtest.TestApp(app).get("/api/v2/projects").headers["Cache-Control"] == (
        "public, max-age=300"
    )


# --- named commands -----------------------------------------------------------------------------


def test_serve_and_check_are_the_flags_named(monkeypatch, data_dir, capsys):
    _, kwargs = serve_args(monkeypatch, ["serve", "--data", str(data_dir), "--port", "8099"])
    assert (kwargs["host"], kwargs["port"], kwargs["threads"]) == ("127.0.0.1", 8099, 8)
    assert cli.main(["check", "--data", str(data_dir)]) == 0
    write_file(data_dir / "broken.json", "{")
    assert cli.main(["check", "--data", str(data_dir)]) == 1
    assert capsys.readouterr().out == (
        f"{data_dir / 'broken.json'}:1:2: Expecting property name enclosed in double quotes\n"
    )


def test_serve_flags_do_not_go_with_other_commands(data_dir, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["--port", "9000", "yank", "alpha", "3", "--data", str(data_dir)])
    assert exited.value.code == 2
    assert "--port is a serve flag: it does not go with 'yank'" in capsys.readouterr().err


# --- rough edges of the start-up ----------------------------------------------------------------


@pytest.mark.parametrize(
    "host, url",
    [
        ("127.0.0.1", "http://127.0.0.1:8080"),
        ("::1", "http://[::1]:8080"),
        ("::", "http://[::]:8080"),
        ("localhost", "http://localhost:8080"),
    ],
)
def test_the_base_url_brackets_ipv6(host, url):
    assert serving.base_url(host, 8080) == url


@pytest.fixture
def started(monkeypatch, caplog):
    """Start-ups that return as soon as they would listen, their log in caplog."""

    class Listening:
        effective_host, effective_port = "::1", 8123

    monkeypatch.setattr(
        serving,
        "serve",
        lambda app, host, port, threads, on_listening, **options: on_listening(Listening()),
    )
    caplog.set_level(logging.INFO)
    return caplog


def test_the_start_up_line_names_a_url_that_answers(started, data_dir, caplog):
    assert cli.main(["--data", str(data_dir), "--host", "::1"]) == 0
    assert (
        f"serving 2 projects from {data_dir} on http://[::1]:8123/api/v2/projects"
        in caplog.messages
    )


def test_one_project_is_one_project(started, data_dir, caplog):
    os.unlink(data_dir / "beta.json")
    assert cli.main(["--data", str(data_dir)]) == 0
    assert any(m.startswith("serving 1 project from ") for m in caplog.messages)
    assert "WARNING" not in caplog.text


@pytest.mark.parametrize(
    "content, holds",
    [(None, "no SLUG.json file"), ("{", "files that are refused (above)")],
)
def test_starting_with_nothing_to_serve_warns(started, tmp_path, caplog, content, holds):
    if content is not None:
        (tmp_path / "broken.json").write_text(content)
    assert cli.main(["--data", str(tmp_path)]) == 0
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith(f"nothing to serve: {tmp_path} holds {holds}; is --data right?")


@pytest.mark.parametrize("argv", [["--version"], ["serve", "--version"]])
def test_the_version_is_the_installed_one(argv, capsys):
    with pytest.raises(SystemExit) as raised:
        cli.main(argv)
    assert raised.value.code == 0
    assert capsys.readouterr().out == f"buildshelf {importlib.metadata.version('buildshelf')}\n"


@pytest.mark.system
@pytest.mark.parametrize(
    "command",
    [
        [os.path.join(os.path.dirname(sys.executable), "buildshelf")],  # the console script
        [sys.executable, "-m", "buildshelf"],
        [sys.executable, os.path.join(ROOT, "server.py")],  # the checkout's launcher
    ],
    ids=["buildshelf", "python -m buildshelf", "python server.py"],
)
def test_each_way_to_run_it_is_the_same_command(command, tmp_path):
    done = subprocess.run(
        [*command, "--version"], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"buildshelf {importlib.metadata.version('buildshelf')}\n"


def test_a_checkout_not_installed_has_the_version_of_its_setup_cfg(tmp_path, monkeypatch):
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    (tmp_path / "setup.cfg").write_text("[metadata]\nname = buildshelf\nversion = 9.8.7\n")
    assert settings.version(str(tmp_path)) == "9.8.7"


@pytest.mark.parametrize(
    "variable, value, message",
    [
        ("BUILDSHELF_PORT", "abc", "'abc' is not a whole number from 1 to 65535"),
        ("BUILDSHELF_THREADS", "0", "'0' is not a whole number from 1 to 256"),
        ("BUILDSHELF_MAX_AGE", "-1", "'-1' is not a whole number from 0 to 31536000"),
        ("BUILDSHELF_DATA", "/no/such/dir", "'/no/such/dir' is not a directory"),
    ],
)
def test_a_bad_variable_is_named_as_the_variable(monkeypatch, capsys, variable, value, message):
    monkeypatch.setenv(variable, value)
    with pytest.raises(SystemExit) as exited:
        cli.main([])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"buildshelf: error: environment variable {variable}: {message}\n" in err
    assert "argument --" not in err


def test_a_flag_replaces_a_bad_variable(monkeypatch, data_dir):
    _, kwargs = serve_args(
        monkeypatch, ["--data", str(data_dir), "--port", "8090"], {"BUILDSHELF_PORT": "abc"}
    )
    assert kwargs["port"] == 8090


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_an_unresolvable_host_is_one_line_and_exit_1(monkeypatch, data_dir, caplog, how):
    host = "no-such-host.invalid"
    argv = ["--data", str(data_dir)] + (["--host", host] if how == "flag" else [])
    if how == "variable":
        monkeypatch.setenv("BUILDSHELF_HOST", host)
    assert cli.main(argv) == 1
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert record.getMessage().startswith(
        f"cannot listen on {host}: it is not an address or a known host name ("
    )
    assert record.exc_info is None and "\n" not in record.getMessage()


@pytest.mark.system
def test_an_unresolvable_host_from_server_py_is_no_traceback(data_dir):
    done = subprocess.run(
        server_argv(data_dir, "--host", "no-such-host.invalid"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert (
        "ERROR buildshelf.serving.server: cannot listen on no-such-host.invalid: it is not an address"
        in line
    )


# --- the default data directory ---------------------------------------------------------------


def test_the_default_data_is_beside_the_code_only_when_there(tmp_path):
    assert settings.default_data_dir(tmp_path) is None
    (tmp_path / "data").mkdir()
    assert settings.default_data_dir(tmp_path) == str(tmp_path / "data")
    assert settings.default_data_dir() == os.path.join(ROOT, "data")


@pytest.fixture
def installed_copy(tmp_path):
    """The package alone, as a non-editable `pip install .` puts it in site-packages: no data/
    comes with it. tests/test_pages.py installs for real."""
    site = tmp_path / "site-packages"
    shutil.copytree(
        os.path.join(ROOT, "buildshelf"),
        site / "buildshelf",
        ignore=shutil.ignore_patterns("__pycache__"),
    )

    def run(argv, **environ):
        env = {k: v for k, v in os.environ.items() if not k.startswith("BUILDSHELF_")}
        env.update(environ, PYTHONPATH=str(site))
        return subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from buildshelf import cli; sys.exit(cli.main())",
                *argv,
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=60,
        )

    return run


@pytest.mark.system
def test_an_installed_copy_says_where_to_point_it(installed_copy, tmp_path, data_dir):
    done = installed_copy(["check"])
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        f"buildshelf: error: no data directory: none given and no data/ beside "
        f"{tmp_path / 'site-packages'} (an installed copy has none): pass --data DIR or set "
        "BUILDSHELF_DATA"
    )
    assert installed_copy(["check"], BUILDSHELF_DATA=str(data_dir)).returncode == 0
    assert installed_copy(["check", "--data", str(data_dir)]).returncode == 0


@pytest.mark.parametrize(
    "argv, environ, shape",
    [
        ([], {}, list),
        (["--compat", "upstream"], {}, dict),
        ([], {"BUILDSHELF_COMPAT": "upstream"}, dict),
        ([], {"BUILDSHELF_COMPAT": ""}, list),
    ],
)
def test_compat_upstream_is_opt_in_by_flag_or_environment(
    monkeypatch, data_dir, argv, environ, shape
):
    monkeypatch.delenv("BUILDSHELF_COMPAT", raising=False)
    app, _ = serve_args(monkeypatch, ["--data", str(data_dir), "--quiet", *argv], environ)
    body = webtest.TestApp(app).get("/api/v2/builds/all?project=alpha").json
    assert type(body) is shape


@pytest.mark.parametrize(
    "argv, environ, message",
    [
        (
            ["--compat", "paper"],
            {},
            "argument --compat: 'paper' is not a compat mode (the one mode is 'upstream')",
        ),
        (
            [],
            {"BUILDSHELF_COMPAT": "paper"},
            "environment variable BUILDSHELF_COMPAT: 'paper' is "
            "not a compat mode (the one mode is 'upstream')",
        ),
        (
            ["--cache-mb", "0"],
            {},
            "argument --cache-mb: '0' is not a whole number from 1 to 1048576",
        ),
    ],
)
def test_an_unknown_compat_mode_or_cache_size_is_named(
    monkeypatch, capsys, data_dir, argv, environ, message
):
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exited:
        cli.main(["--data", str(data_dir), *argv])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def refused_timestamp(data_dir, capsys, value):
    """The error `publish --timestamp value` exits 2 with, the project file untouched."""
    before = (data_dir / "alpha.json").read_bytes()
    with pytest.raises(SystemExit) as raised:
        cli.main(["publish", "alpha", "--data", str(data_dir), "--build", "50",
                  "--channel", "1.21", "--download-url", "https://x.example/a.jar",
                  "--timestamp", value])  # fmt: skip
    assert raised.value.code == 2
    assert (data_dir / "alpha.json").read_bytes() == before
    return capsys.readouterr().err


@pytest.mark.parametrize("value", ["1700000000", "0", "-5", "99999999999"])
def test_publish_refuses_a_timestamp_in_seconds_with_a_hint(data_dir, capsys, value):
    assert f"{value!r} looks like seconds, not milliseconds: give {value}000" in (
        refused_timestamp(data_dir, capsys, value)
    )


@pytest.mark.parametrize(
    "value, problem",
    [
        (
            "1795683836975446626",  # date +%s%N
            "is after year 9999: give epoch milliseconds (date +%s%3N); this looks like "
            "microseconds or nanoseconds",
        ),
        ("253402300800000", "is after year 9999"),
        ("-1700000000000", "is before 1970: give epoch milliseconds (date +%s%3N)"),
    ],
)
def test_publish_refuses_a_timestamp_out_of_range_with_a_hint(data_dir, capsys, value, problem):
    err = refused_timestamp(data_dir, capsys, value)
    [line] = [line for line in err.splitlines() if "error:" in line]
    assert f"error: argument --timestamp: {value!r} {problem}" in line


def test_publish_takes_the_last_millisecond_of_year_9999(data_dir):
    assert cli.main(["publish", "alpha", "--data", str(data_dir), "--build", "50",
                     "--channel", "1.21", "--download-url", "https://x.example/a.jar",
                     "--timestamp", "253402300799999"]) == 0  # fmt: skip
    doc = json.loads((data_dir / "alpha.json").read_text())
    assert [b["timestamp"] for b in doc["builds"] if b["buildNumber"] == 50] == [253402300799999]
