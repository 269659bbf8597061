"""Data files as a careless editor or an attacker writes them: each is refused with its place,
reported by /healthz and --check, and never stops the other projects or the server."""

import json
import logging
import os

import pytest
import webtest

from buildshelf import cli, server, text
from buildshelf import store as store_module
from buildshelf.datafiles import datafile, dataformat
from helpers import bump_mtime, make_build, make_project

API = "/api/v2"
URL_RULE = dataformat.URL_RULE
JAVADOC_RULE = URL_RULE + ', or "" for a project without javadoc'
CHANNEL_RULE = "'channelVersion' must be a non-empty string of letters, digits and . _ + -"
UNICODE_RULE = "strings must be valid Unicode"
SLUG_RULE = (
    "is not a project slug: name the file <slug>.json, the slug made of a-z, 0-9, '.', "
    "'_' and '-', starting with a-z or 0-9"
)
DEEP = (
    "arrays and objects nested more than 100 levels deep (a project file needs 5): too deep to read"
)


def project_with(**fields):
    return json.dumps(dict(make_project([make_build(1)]), **fields)).encode()


def build_with(**fields):
    return json.dumps(make_project([make_build(1, **fields)])).encode()


def commit_with(**fields):
    return build_with(commits=[dict({"message": "m", "hash": "ab"}, **fields)])


VALID = project_with()

# (content, what /healthz says): every field at every level, with the wrong type or value
CONTENTS = {
    # wrong types: unhashable ones once crashed the channel index
    "channel-list": (build_with(channelVersion=[]), f"build 1 (builds[0]): {CHANNEL_RULE}"),
    "channel-object": (build_with(channelVersion={}), f"build 1 (builds[0]): {CHANNEL_RULE}"),
    "channel-null": (build_with(channelVersion=None), f"build 1 (builds[0]): {CHANNEL_RULE}"),
    "number-list": (build_with(buildNumber=[]), "builds[0]: 'buildNumber' must be an integer >= 0"),
    "number-object": (
        build_with(buildNumber={}),
        "builds[0]: 'buildNumber' must be an integer >= 0",
    ),
    "url-object": (build_with(url={}), f"build 1 (builds[0]): 'url' {URL_RULE}"),
    "download-list": (build_with(downloadUrl=[]), f"build 1 (builds[0]): 'downloadUrl' {URL_RULE}"),
    "timestamp-list": (
        build_with(timestamp=[1]),
        "build 1 (builds[0]): 'timestamp' must be an integer",
    ),
    "timestamp-float": (
        build_with(timestamp="T").replace(b'"T"', b"1e400"),  # infinity
        "build 1 (builds[0]): 'timestamp' must be an integer",
    ),
    "experimental-object": (
        build_with(isExperimental={}),
        "build 1 (builds[0]): 'isExperimental' must be true or false",
    ),
    "commits-string": (build_with(commits="ab"), "build 1 (builds[0]): 'commits' must be an array"),
    "commit-list": (
        build_with(commits=[[]]),
        "build 1 (builds[0]): commits[0]: must be an object with 'message' and 'hash'",
    ),
    "message-list": (
        commit_with(message=[]),
        "build 1 (builds[0]): commits[0]: 'message' must be a string",
    ),
    "hash-object": (
        commit_with(hash={}),
        "build 1 (builds[0]): commits[0]: 'hash' must be a string of hexadecimal digits",
    ),
    "build-list": (project_with(builds=[[]]), "builds[0]: must be an object"),
    "ci-job-object": (project_with(ciJob={}), "'ciJob' must be a non-empty string"),
    "ci-job-url-list": (project_with(ciJobUrl=[]), f"'ciJobUrl' {URL_RULE}"),
    "javadoc-object": (project_with(javadocBaseUrl={"a": 1}), f"'javadocBaseUrl' {JAVADOC_RULE}"),
    "builds-object": (project_with(builds={}), "'builds' must be an array"),
    "top-level-list": (b"[[]]", "the file must hold a JSON object"),
    # nesting too deep for the parser; brackets inside strings do not count
    "deep-array": (b'{"ciJob": ' + b"[" * 5000 + b"]" * 5000 + b"}", f"line 1, column 110: {DEEP}"),
    "deep-legacy-commit": (
        b'{"ciJob": "[[{{",\n"builds": [{"commit": ' + b"[" * 3000 + b"]" * 3000 + b"}]}",
        f"line 2, column 120: {DEEP}",
    ),
    "deep-object": (b'{"a": ' * 100_000 + b"1" + b"}" * 100_000, f"line 1, column 601: {DEEP}"),
    # lone surrogates, which no UTF-8 response can hold
    "surrogate-ci-job": (
        project_with(ciJob="Way\ud800stone"),
        f"'ciJob' holds a lone surrogate (\\ud800 at character 4): {UNICODE_RULE}",
    ),
    "surrogate-message": (
        commit_with(message="\udc00 fix"),
        "build 1 (builds[0]): commits[0]: "
        f"'message' holds a lone surrogate (\\udc00 at character 1): "
        f"{UNICODE_RULE}",
    ),
    "surrogate-second-commit": (
        build_with(commits=[{"message": "ok", "hash": "ab"}, {"message": "é\udbff", "hash": "ab"}]),
        "build 1 (builds[0]): commits[1]: 'message' holds a lone "
        f"surrogate (\\udbff at character 2): {UNICODE_RULE}",
    ),
    "surrogate-channel": (
        build_with(channelVersion="1.\ud800"),
        f"build 1 (builds[0]): {CHANNEL_RULE}",
    ),
    "surrogate-hash": (
        commit_with(hash="ab\udfff"),
        "build 1 (builds[0]): commits[0]: 'hash' must be a string of hexadecimal digits",
    ),
    "surrogate-url": (
        build_with(url="https://ci.example.org/\ud800"),
        f"build 1 (builds[0]): 'url' {URL_RULE}",
    ),
    "surrogate-key": (build_with(**{"\ud800": 1}), "build 1 (builds[0]): unknown key '\\ud800'"),
    "surrogate-slug": (
        project_with(slug="gam\udc80ma"),
        "'slug' is 'gam\\udc80ma' but the file name says 'gamma'",
    ),
    # integers over Python's 4,300-digit limit, found past a long float and a long string
    "huge-timestamp": (
        b'{"builds": [{"timestamp": ' + b"9" * 5000 + b"}]}",
        "line 1, column 27: an integer of 5000 digits: at most 4300 are allowed",
    ),
    "huge-negative": (
        b'{"ciJob": "'
        + b"1" * 5000
        + b'", "x": 1.'
        + b"2" * 5000
        + b"e"
        + b"3" * 5000
        + b',\n "y": -'
        + b"4" * 4301
        + b"}",
        "line 2, column 7: an integer of 4301 digits: at most 4300 are allowed",
    ),
    # URLs must be ASCII: case folding once let these through
    "kelvin-sign": (
        project_with(javadocBaseUrl="https://jd.\u212aelvin.example/"),
        f"'javadocBaseUrl' {JAVADOC_RULE}",
    ),
    "long-s": (
        build_with(url="https://ci.example.org/job/\u017f/1/"),
        f"build 1 (builds[0]): 'url' {URL_RULE}",
    ),
    "dotless-i": (
        build_with(downloadUrl="https://c\u0131.example.org/a.jar"),
        f"build 1 (builds[0]): 'downloadUrl' {URL_RULE}",
    ),
    "kelvin-ci-job-url": (
        project_with(ciJobUrl="HTTPS://\u212a.example/"),
        f"'ciJobUrl' {URL_RULE}",
    ),
}

# (file name as bytes, as /healthz shows it): names no slug can have, printed escaped
NAMES = {
    "not-utf8": (b"\xff\xfe.json", "\\xff\\xfe.json"),
    "newline": (b"bad\nname.json", "bad\\nname.json"),
    "escape-sequence": (b"\x1b[31mred.json", "\\x1b[31mred.json"),
    "carriage-return": (b"x\r2026-01-01 INFO forged.json", "x\\r2026-01-01 INFO forged.json"),
    "backslash": (b"a\\nb.json", "a\\\\nb.json"),
    "invisible": ("zero\u200bwidth.json".encode(), "zero\\u200bwidth.json"),
}

CASES = [
    pytest.param(b"gamma.json", content, "gamma.json", problem, id=case)
    for case, (content, problem) in CONTENTS.items()
]
CASES += [
    pytest.param(name, VALID, shown, f"'{shown[: -len('.json')]}' {SLUG_RULE}", id=case)
    for case, (name, shown) in NAMES.items()
]


def write_raw(directory, name, content):
    path = os.path.join(os.fsencode(directory), name)
    with open(path, "wb") as f:
        f.write(content)
    return path


def check_line(directory, shown, problem):
    """What --check prints for a problem as /healthz shows it."""
    if problem.startswith("line "):
        place, _, message = problem.partition(": ")
        line, column = place[len("line ") :].split(", column ")
        return f"{directory}/{shown}:{line}:{column}: {message}"
    return f"{directory}/{shown}: {problem}"


def assert_still_serving(client):
    projects = client.get(API + "/projects").json["projects"]
    assert [p["slug"] for p in projects] == ["alpha", "beta"]
    builds = client.get(API + "/builds", {"project": "alpha", "experimental": "true"}).json
    assert [b["buildNumber"] for b in builds] == [1, 2, 3, 5, 7, 8]
    assert client.get(API + "/builds/latest", {"project": "beta"}).json["buildNumber"] == 10
    assert client.get(API + "/jd", {"project": "alpha"}, status=302).location == (
        "https://jd.example.org/alpha/1.21-R0.1-SNAPSHOT"
    )


@pytest.mark.parametrize("name, content, shown, problem", CASES)
def test_a_hostile_file_is_refused_and_reported(
    data_dir, caplog, capsys, name, content, shown, problem
):
    write_raw(data_dir, name, content)
    client = webtest.TestApp(server.make_app(store_module.Store(data_dir, check_interval=0)))
    health = client.get("/healthz")
    assert health.json == dict(
        health.json,
        status="degraded",
        projects=2,
        rejectedFiles=[{"file": shown, "error": problem, "errors": [problem]}],
    )
    assert_still_serving(client)
    expected = check_line(data_dir, shown, problem)
    assert f"{expected} (not served)" in caplog.text  # the start-up log line
    assert all("\n" not in record.getMessage() for record in caplog.records)

    assert cli.main(["--check", "--data", str(data_dir)]) == 1
    assert capsys.readouterr().out == expected + "\n"


@pytest.mark.parametrize(
    "content, problem",
    [pytest.param(content, problem, id=case) for case, (content, problem) in CONTENTS.items()],
)
def test_a_hostile_edit_keeps_the_last_good_version(data_dir, caplog, content, problem):
    store = store_module.Store(data_dir, check_interval=0)
    client = webtest.TestApp(server.make_app(store))
    path = write_raw(data_dir, b"alpha.json", content.replace(b'"gamma"', b'"alpha"'))
    bump_mtime(path)
    store.refresh()
    health = client.get("/healthz")
    problem = problem.replace("'gamma'", "'alpha'")  # the slug case names the file's slug
    assert health.json["rejectedFiles"] == [
        {"file": "alpha.json", "error": problem, "errors": [problem]}
    ]
    assert health.json["projects"] == 2
    assert_still_serving(client)
    assert "(still serving its last good version)" in caplog.text


def test_nesting_within_the_limit_is_fine_where_any_value_is_allowed():
    doc = make_project([make_build(1, commit=json.loads("[" * 90 + "]" * 90))])
    project = datafile.parse_project("p.json", "p", json.dumps(doc).encode())
    assert [b.number for b in project.builds] == [1]


def test_strings_of_valid_unicode_are_served_as_they_are(client, data_dir):
    message = "Emoji \U0001f600, accents é, CJK 漢字, escaped pair"
    path = write_raw(
        data_dir, b"alpha.json", build_with(commits=[{"message": message, "hash": "ab"}])
    )
    bump_mtime(path)
    build = client.get(API + "/builds/latest", {"project": "alpha"}).json
    assert build["commits"] == [{"message": message, "hash": "ab"}]


def test_a_name_that_is_not_utf8_is_dropped_from_health_once_the_file_is_gone(data_dir, client):
    path = write_raw(data_dir, b"\xff.json", VALID)
    assert client.get("/healthz").json["rejectedFiles"] == [
        {"file": "\\xff.json", "error": f"'\\xff' {SLUG_RULE}", "errors": [f"'\\xff' {SLUG_RULE}"]}
    ]
    os.remove(path)
    assert client.get("/healthz").json["rejectedFiles"] == []


def test_a_vanished_directory_with_a_newline_in_its_name_is_logged_on_one_line(tmp_path, caplog):
    directory = tmp_path / "da\nta"
    directory.mkdir()
    (directory / "alpha.json").write_bytes(VALID)
    store = store_module.Store(directory, check_interval=0)
    directory.rename(tmp_path / "gone")
    store.refresh()
    assert f"cannot read data directory {tmp_path}/da\\nta:" in caplog.text
    assert all("\n" not in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize(
    "name, shown",
    [
        ("plain.json", "plain.json"),
        ("é ü.json", "é ü.json"),
        ("tab\t.json", "tab\\t.json"),
        ("del\x7f.json", "del\\x7f.json"),
        ("nbsp\u00a0.json", "nbsp\\xa0.json"),
        ("rtl\u202e.json", "rtl\\u202e.json"),
        ("\udcc3\udca9.json", "\\xc3\\xa9.json"),
    ],
)
def test_printable_names(name, shown):
    assert text.printable(name) == shown


def test_many_distinct_channels_each_get_their_builds():
    # Indexing was quadratic in the number of channels (40 s for 30,000): this would time out.
    builds = [
        make_build(n, f"c{n}", experimental=n % 2 == 1, commit_count=0) for n in range(20_000)
    ]
    project = datafile.parse_project("p.json", "p", json.dumps(make_project(builds)).encode())
    for n in (0, 1, 9_998, 19_999):
        assert [b.number for b in project.select(f"c{n}", True)] == [n]
        assert [b.number for b in project.select(f"c{n}", False)] == ([] if n % 2 else [n])
    assert len(project.select(None, False)) == 10_000


def test_logging_a_hostile_name_gives_one_line(data_dir, caplog):
    caplog.set_level(logging.INFO, logger="buildshelf.store")
    path = write_raw(data_dir, b"x\nERROR forged.json", VALID)
    store = store_module.Store(data_dir, check_interval=0)
    os.remove(path)
    store.refresh()
    assert "project x\\nERROR forged removed: its file is gone" in caplog.text
    assert all("\n" not in record.getMessage() for record in caplog.records)
