"""The docs cannot drift from the code: every flag and environment variable is documented,
the settings table is the declaration's, the README's synopsis is the real --help usage, and
every `curl` example prints what it says against a real server on the sample data."""

import argparse
import os
import re
import shlex
import shutil
import subprocess

import pytest

from buildshelf import cli, server, settings
from helpers import ROOT, real_server

DOCS = [os.path.join(ROOT, "README.md")] + sorted(
    os.path.join(ROOT, "docs", name)
    for name in os.listdir(os.path.join(ROOT, "docs"))
    if name.endswith(".md")
)
COLUMNS = "100"  # argparse wraps usage to the terminal's width


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


ALL_DOCS = "\n".join(read(path) for path in DOCS)


def parsers():
    """The command line's parsers: buildshelf, each of its commands and theirs (token create),
    and server.py's."""
    return [*with_commands(cli.make_parser()), server.make_parser()]


def with_commands(parser):
    """`parser`, then each of its commands and theirs, depth first."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                found += with_commands(command)
    return found


def test_every_flag_of_every_command_is_documented():
    flags = {
        option
        for parser in parsers()
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }
    assert flags, "no flags found: the parsers changed shape"
    missing = sorted(flag for flag in flags if not re.search(rf"{flag}\b", ALL_DOCS))
    assert missing == [], f"flags missing from README.md and docs/: {missing}"


def test_every_environment_variable_is_documented():
    variables = [s.variable for s in settings.SETTINGS if s.variable]
    missing = [name for name in variables if name not in ALL_DOCS]
    assert variables and missing == [], f"variables missing from the docs: {missing}"


def test_the_settings_table_is_the_declarations():
    assert settings.docs_table() in read(os.path.join(ROOT, "docs", "running.md")), (
        "docs/running.md's settings table differs from settings.SETTINGS; it should read:\n"
        + settings.docs_table()
    )


def synopsis():
    """The usage lines of every command, as --help prints them."""
    os.environ["COLUMNS"] = COLUMNS
    return "".join(parser.format_usage() for parser in parsers())


def test_the_readme_synopsis_is_the_real_usage(monkeypatch):
    monkeypatch.setenv("COLUMNS", COLUMNS)
    readme = read(os.path.join(ROOT, "README.md"))
    block = re.search(r"<!-- synopsis[^>]*-->\n```text\n(.*?)```", readme, re.S)
    assert block, "README.md has no synopsis block"
    assert block[1] == synopsis(), "README.md's synopsis should read:\n" + synopsis()


def console_examples():
    """(file, command, expected output) of every `$ curl` line in a ```console block."""
    examples = []
    for path in DOCS:
        for block in re.findall(r"```console\n(.*?)```", read(path), re.S):
            for chunk in re.split(r"^(?=\$ )", block, flags=re.M):
                if chunk.startswith("$ curl "):
                    command, _, output = chunk.partition("\n")
                    examples.append((os.path.relpath(path, ROOT), command[2:], output))
    return examples


EXAMPLES = console_examples()


def test_the_docs_have_curl_examples():
    assert len(EXAMPLES) >= 10


def matches(expected, actual):
    """Whether `actual` is `expected`, where a line '...' stands for any number of lines."""
    pattern = "".join(
        r"(?:[^\n]*\n)*?" if line == "..." else re.escape(line) + r"\n"
        for line in expected.splitlines()
    )
    return re.fullmatch(pattern, actual) is not None


@pytest.fixture(scope="module")
def sample_server(tmp_path_factory):
    if shutil.which("curl") is None:
        message = "curl is not installed (apt-get install -y curl, as root)"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail("CI must run the docs' curl examples: " + message)
        pytest.skip(message)
    # The docs show the default listener, so the kept files' URLs are on it too. The
    # download counts go outside the checkout, which tests never write into.
    state = str(tmp_path_factory.mktemp("docs-state"))
    with real_server(
        os.path.join(ROOT, "data"),
        "--quiet",
        "--public-url",
        "http://127.0.0.1:8080",
        "--state",
        state,
    ) as (
        port,
        _,
    ):
        yield port


@pytest.mark.system
@pytest.mark.parametrize("where, command, expected", EXAMPLES, ids=[e[1] for e in EXAMPLES])
def test_each_curl_example_prints_what_the_docs_say(sample_server, where, command, expected):
    argv = [
        word.replace("127.0.0.1:8080", f"127.0.0.1:{sample_server}")
        for word in shlex.split(command)
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    actual = done.stdout.replace("\r\n", "\n")
    actual = actual if actual.endswith("\n") else actual + "\n"
    actual = re.sub(r"\n\n\Z", "\n", actual)  # the blank line that ends headers
    assert matches(expected, actual), f"{where}: {command}\nprints:\n{actual}"
