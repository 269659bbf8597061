"""The data files' format without HTTP: parsing, every rule and its message, both paths."""

import json
import sys

import msgspec
import pytest

from buildshelf import model
from buildshelf.datafiles import datafile, dataformat
from helpers import ALPHA_BUILDS, assert_same_values, both_paths, make_build, make_project


def parse(doc, slug="alpha", path="data/alpha.json"):
    data = doc if isinstance(doc, bytes) else json.dumps(doc, indent=2).encode()
    return datafile.parse_project(path, slug, data)


def parse_error(doc, **kwargs):
    with pytest.raises(datafile.DataError) as raised:
        parse(doc, **kwargs)
    return str(raised.value)


# --- parsing and queries ---------------------------------------------------------------------


def test_builds_are_sorted_whatever_the_file_order():
    project = parse(make_project(ALPHA_BUILDS))
    assert [b.number for b in project.builds] == [1, 2, 3, 5, 7, 8]


@pytest.mark.parametrize(
    "channel, experimental, expected, latest",
    [
        (None, False, [1, 3, 5], 5),
        (None, True, [1, 2, 3, 5, 7, 8], 8),
        ("1.20", False, [1, 3], 3),
        ("1.21", True, [5, 7], 7),
        ("1.21.1-pre1", False, [], None),
        ("nope", True, [], None),
    ],
)
def test_select_and_latest(channel, experimental, expected, latest):
    project = parse(make_project(ALPHA_BUILDS))
    assert [b.number for b in project.select(channel, experimental)] == expected
    found = project.latest(channel, experimental)
    assert (found and found.number) == latest


def test_a_build_keeps_every_value_of_its_file():
    project = parse(make_project([make_build(4, "1.21", True, commit_count=2, timestamp=5)]))
    assert project.builds[0] == model.Build(
        number=4,
        url="https://ci.example.org/job/Alpha/4/",
        download_url="https://ci.example.org/job/Alpha/4/artifact/alpha-4.jar",
        channel="1.21",
        timestamp=5,
        is_experimental=True,
        commits=(
            model.Commit("Change 4.0", "0004" + "0" * 36),
            model.Commit("Change 4.1", "0004" + "0" * 35 + "1"),
        ),
    )


def test_a_commit_author_is_kept_and_empty_when_absent():
    build = make_build(
        4,
        commit_count=0,
        commits=[
            {"message": "a", "hash": "ab", "author": "Jane Doe"},
            {"message": "b", "hash": "cd"},
            {"message": "c", "hash": "ef", "author": ""},
        ],
    )
    commits = parse(make_project([build])).builds[0].commits
    assert commits == (
        model.Commit("a", "ab", "Jane Doe"),
        model.Commit("b", "cd", ""),
        model.Commit("c", "ef", ""),
    )


@pytest.mark.parametrize("prefix", [".cache/unpack", "docs", "a/b.c/$d_e-f"])
def test_a_javadoc_page_prefix_is_kept(prefix):
    assert parse(make_project([], javadocPagePrefix=prefix)).javadoc_page_prefix == prefix


def test_without_a_page_prefix_there_is_none():
    assert parse(make_project([])).javadoc_page_prefix == ""
    assert parse(make_project([], javadocPagePrefix="")).javadoc_page_prefix == ""


@pytest.mark.parametrize(
    "prefix, problem",
    [
        (".cache/unpack/", "has an empty segment (a leading, trailing or doubled '/')"),
        ("/.cache/unpack", "has an empty segment (a leading, trailing or doubled '/')"),
        ("a//b", "has an empty segment (a leading, trailing or doubled '/')"),
        ("../other", "has a '.' or '..' segment"),
        ("a/./b", "has a '.' or '..' segment"),
        ("https://evil.example", "holds ':' (a scheme?): give a path relative to the javadoc root"),
        ("a\\b", "holds a backslash: separate segments with '/'"),
        ("a b", "may hold only letters, digits, '.', '_', '$', '-' and '/'"),
        ("a%2Fb", "may hold only letters, digits, '.', '_', '$', '-' and '/'"),
        ("a?b", "may hold only letters, digits, '.', '_', '$', '-' and '/'"),
        ("a#b", "may hold only letters, digits, '.', '_', '$', '-' and '/'"),
        ("a" * 513, "is too long"),
    ],
)
def test_a_bad_javadoc_page_prefix_is_refused(prefix, problem):
    assert parse_error(make_project([], javadocPagePrefix=prefix)) == (
        f"data/alpha.json: 'javadocPagePrefix' {problem}: give a relative path such as "
        '".cache/unpack"'
    )


@pytest.mark.parametrize("prefix", [None, 3, [".cache"]])
def test_a_javadoc_page_prefix_must_be_a_string(prefix):
    assert parse_error(make_project([], javadocPagePrefix=prefix)) == (
        "data/alpha.json: 'javadocPagePrefix' must be a string, e.g. \".cache/unpack\""
    )


# --- the versions block (the Fill v3 API's facts of a version) ----------------------------------

VERSIONS = {
    "1.21": {
        "family": "1.21",
        "support": "DEPRECATED",
        "supportEnd": "2026-02-28",
        "java": 21,
        "javaFlags": ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=200"],
        "experimentalChannel": "BETA",
    },
    "1.20": {},
    "24w14a": {"family": "snapshots", "support": "UNSUPPORTED"},
}


def test_a_versions_block_is_read_alike_by_both_paths():
    fast, checked = both_paths(json.dumps(make_project(ALPHA_BUILDS, versions=VERSIONS)))
    assert fast is not None
    assert_same_values(fast, checked)
    assert list(checked.versions) == ["1.21", "1.20", "24w14a"]
    assert checked.versions["1.21"] == model.VersionInfo(
        family="1.21",
        support="DEPRECATED",
        support_end="2026-02-28",
        java=21,
        java_flags=("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=200"),
        experimental_channel="BETA",
    )
    assert checked.versions["1.20"] == model.VersionInfo()  # every key optional


def test_without_a_versions_block_there_is_none():
    for project in both_paths(json.dumps(make_project(ALPHA_BUILDS))):
        assert project.versions == {}
    for project in both_paths(json.dumps(make_project(ALPHA_BUILDS, versions={}))):
        assert project.versions == {}


@pytest.mark.parametrize(
    "versions, message",
    [
        ([], "'versions' must be an object: {channelVersion: {family, support, ...}}"),
        ({"1.21": []}, "versions['1.21'] must be an object"),
        ({"1.21": None}, "versions['1.21'] must be an object"),
        (
            {"1.21 beta": {}},
            "versions: key '1.21 beta' must be a channelVersion: letters, digits and . _ + -",
        ),
        ({"": {}}, "versions: key '' must be a channelVersion: letters, digits and . _ + -"),
        (
            {"1.21": {"suport": "SUPPORTED"}},
            "versions['1.21']: unknown key 'suport': did you mean support?",
        ),
        (
            {"1.21": {"javaflags": []}},
            "versions['1.21']: unknown key 'javaflags': did you mean javaFlags?",
        ),
        (
            {"1.21": {"family": ""}},
            "versions['1.21']: 'family' must be a non-empty string of letters, digits and . _ + -",
        ),
        (
            {"1.21": {"family": "1.x/2"}},
            "versions['1.21']: 'family' must be a non-empty string of letters, digits and . _ + -",
        ),
        (
            {"1.21": {"family": 1}},
            "versions['1.21']: 'family' must be a non-empty string of letters, digits and . _ + -",
        ),
        *[
            (
                {"1.21": {"support": value}},
                "versions['1.21']: 'support' must be \"SUPPORTED\", "
                '"DEPRECATED" or "UNSUPPORTED"',
            )
            for value in ("supported", "LTS", "", None, 1)
        ],
        *[
            (
                {"1.21": {"supportEnd": value}},
                "versions['1.21']: 'supportEnd' must be a day "
                'written YYYY-MM-DD, e.g. "2026-02-28"',
            )
            for value in (
                "2026-02-30",
                "2026-2-28",
                "28/02/2026",
                "2026-02-28T00:00:00Z",
                20260228,
                None,
            )
        ],
        *[
            (
                {"1.21": {"java": value}},
                "versions['1.21']: 'java' must be the whole number of "
                "the oldest Java release it runs on, e.g. 21",
            )
            for value in (0, -1, 21.0, "21", True, 2**31, None)
        ],
        *[
            (
                {"1.21": {"javaFlags": value}},
                "versions['1.21']: 'javaFlags' must be an array of "
                'JVM flags, e.g. ["-XX:+UseG1GC"]',
            )
            for value in ("-XX:+UseG1GC", [""], [1], ["-Xmx1G\n"], ["a\ud800"], None)
        ],
        *[
            (
                {"1.21": {"experimentalChannel": value}},
                "versions['1.21']: 'experimentalChannel' must be \"ALPHA\" or \"BETA\"",
            )
            for value in ("STABLE", "alpha", "RECOMMENDED", None)
        ],
    ],
)
def test_a_bad_versions_block_is_refused_naming_the_version_and_key(versions, message):
    text = json.dumps(make_project([make_build(1)], versions=versions))
    assert datafile._fast_project("alpha", text) is None
    assert parse_error(text.encode()) == f"data/alpha.json: {message}"


def test_a_version_written_twice_in_the_versions_block_is_found():
    text = json.dumps(make_project([], versions={"1.21": {"java": 21}})).replace(
        '"versions": {', '"versions": {"1.21": {"java": 17}, '
    )
    assert datafile._fast_project("alpha", text) is None
    assert "key '1.21' appears twice in one object" in parse_error(text.encode())


def test_colons_in_jvm_flags_do_not_hide_a_key_written_twice():
    flags = '"javaFlags": ["-XX:+A", "-XX:B=1"]'
    text = json.dumps(make_project([], versions={"1.21": {"java": 21}})).replace(
        '"java": 21', f'"java": 21, {flags}'
    )
    fast, checked = both_paths(text)
    assert_same_values(fast, checked)
    doubled = text.replace('"java": 21', '"java": 21, "java": 17')
    assert datafile._fast_project("alpha", doubled) is None


def test_legacy_commit_key_is_dropped_and_explicit_matching_slug_allowed():
    project = parse(
        make_project([make_build(1, commit={"message": "m", "hash": "ab"})], slug="alpha")
    )
    assert not hasattr(project.builds[0], "commit")


@pytest.mark.parametrize(
    "url",
    [
        "https://ci.example.org:8443/job/a%20b/1/?x=1&y=2#frag",
        "http://[::1]:8080/x",
        "HTTPS://CI.EXAMPLE.ORG",
        "https://ci.example.org/~user/(1)/a+b;c=d@e!$'*,",
    ],
)
def test_urls_of_uri_characters_are_accepted(url):
    assert parse(make_project([make_build(1, url=url, downloadUrl=url)])).builds[0].url == url


def test_a_utf8_bom_is_accepted():
    assert parse(b"\xef\xbb\xbf" + json.dumps(make_project([])).encode()).builds == ()


# --- validation: every error names the file and where ------------------------------------------


def test_json_syntax_errors_give_line_and_column():
    assert parse_error(b'{\n  "ciJob": "A",\n  "builds": [,]\n}') == (
        "data/alpha.json:3:14: Expecting value"
    )


def test_invalid_utf8_gives_line_and_column():
    assert parse_error(b'{\n "ciJob": "\xff"}') == "data/alpha.json:2:12: not valid UTF-8"
    assert parse_error('{\n "ciJob": "ü€\n"ü€\xff'.encode()[:-2] + b"\xff") == (
        "data/alpha.json:3:4: not valid UTF-8"
    )  # columns count characters, not bytes


@pytest.mark.parametrize(
    "text, message",
    [
        (b'{"ciJob": NaN}', "1:11: NaN is not valid JSON"),
        (b'{"ciJob": [1, -Infinity]}', "1:15: -Infinity is not valid JSON"),
        (b'{"ciJob": "a",\n "ciJob": "b"}', "2:2: key 'ciJob' appears twice in one object"),
        (
            b'{"a": {"ciJob": 1}, "b": {"ciJob": 2, "x": {}, "ciJob": 3}}',
            "1:48: key 'ciJob' appears twice in one object",
        ),  # fmt: skip
    ],
)
def test_json_that_python_would_accept_but_json_does_not(text, message):
    """Placed, as every other refusal of the text is (the hooks that refuse them know no
    place)."""
    assert parse_error(text) == f"data/alpha.json:{message}"


def build_error(**fields):
    return parse_error(make_project([make_build(1), make_build(12, **fields)]))


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"url": "ftp://ci.example.org/1"}, "'url' " + dataformat.URL_RULE),
        ({"url": "/job/1/"}, "'url' " + dataformat.URL_RULE),
        ({"downloadUrl": "javascript:alert(1)"}, "'downloadUrl' " + dataformat.URL_RULE),
        ({"downloadUrl": "https://"}, "'downloadUrl' " + dataformat.URL_RULE),
        ({"downloadUrl": "https://a b/"}, "'downloadUrl' " + dataformat.URL_RULE),
        ({"downloadUrl": 'https://a.example/<x>"{y}'}, "'downloadUrl' " + dataformat.URL_RULE),
        ({"url": "https://a.example/\u00e9"}, "'url' " + dataformat.URL_RULE),
        (
            {"channelVersion": ""},
            "'channelVersion' must be a non-empty string of letters, digits and . _ + -",
        ),
        (
            {"channelVersion": "1.21/../x"},
            "'channelVersion' must be a non-empty string of letters, digits and . _ + -",
        ),
        (
            {"channelVersion": 1.21},
            "'channelVersion' must be a non-empty string of letters, digits and . _ + -",
        ),
        ({"timestamp": 1.5}, "'timestamp' must be an integer"),
        ({"timestamp": True}, "'timestamp' must be an integer"),
        ({"timestamp": "1700000000"}, "'timestamp' must be an integer"),
        ({"isExperimental": "false"}, "'isExperimental' must be true or false"),
        ({"isExperimental": 0}, "'isExperimental' must be true or false"),
        ({"commits": {}}, "'commits' must be an array"),
        ({"commits": None}, "'commits' must be an array"),
        ({"gameVersion": "1.21"}, "'gameVersion' is the old name: rename it to 'channelVersion'"),
        ({"isExperimentl": True}, "unknown key 'isExperimentl': did you mean isExperimental?"),
    ],
)
def test_build_field_errors_name_the_build_and_field(fields, message):
    assert build_error(**fields) == f"data/alpha.json: build 12 (builds[1]): {message}"


@pytest.mark.parametrize(
    "commits, message",
    [
        (["abc"], "commits[0]: must be an object with 'message' and 'hash'"),
        (
            [{"message": "m", "hash": "xyz"}],
            "commits[0]: 'hash' must be a string of hexadecimal digits",
        ),
        (
            [{"message": "m", "hash": ""}],
            "commits[0]: 'hash' must be a string of hexadecimal digits",
        ),
        (
            [{"message": "m", "hash": "ab"}, {"message": 3, "hash": "ab"}],
            "commits[1]: 'message' must be a string",
        ),
        ([{"message": "m"}], "commits[0]: missing key 'hash'"),
        (
            [{"message": "m", "hash": "ab", "author": "x", "email": "x@example.org"}],
            "commits[0]: unknown key 'email'",
        ),
        ([{"message": "m", "hash": "ab", "author": None}], "commits[0]: 'author' must be a string"),
        (
            [{"message": "m", "hash": "ab", "author": ["x"]}],
            "commits[0]: 'author' must be a string",
        ),
        ([{"author": "x", "hash": "ab"}], "commits[0]: missing key 'message'"),
    ],
)
def test_commit_errors_name_the_commit(commits, message):
    assert build_error(commits=commits) == f"data/alpha.json: build 12 (builds[1]): {message}"


def test_a_missing_build_field_is_named():
    build = make_build(12)
    del build["downloadUrl"]
    assert parse_error(make_project([build])) == (
        "data/alpha.json: build 12 (builds[0]): missing key 'downloadUrl' (or 'file', for a file "
        "Buildshelf keeps)"
    )


@pytest.mark.parametrize("number", [-1, True, 1.0, "12", None])
def test_build_number_must_be_a_whole_number(number):
    assert parse_error(make_project([make_build(1), make_build(number)])) == (
        "data/alpha.json: builds[1]: 'buildNumber' must be an integer >= 0"
    )


def test_a_build_number_is_one_that_every_json_reader_keeps_exactly():
    """At most 2**53 - 1: a launcher's JavaScript reads a larger one as another number, and
    SQLite (the download counts) keeps none past 2**63 - 1."""
    largest = 2**53 - 1
    now = {"timestamp": 1700000000000}
    assert parse(make_project([make_build(largest, **now)])).build(largest).number == largest
    assert parse_error(make_project([make_build(1), make_build(largest + 1, **now)])) == (
        "data/alpha.json: build 9007199254740992 (builds[1]): 'buildNumber' is over "
        "9007199254740991 (2**53 - 1), the largest that every JSON reader keeps exactly"
    )


MILLIS_HINT = "give epoch milliseconds (date +%s%3N)"
SMALLER_UNITS = "; this looks like microseconds or nanoseconds"


@pytest.mark.parametrize(
    "timestamp, problem",
    [
        (253402300800000, f"is after year 9999: {MILLIS_HINT}{SMALLER_UNITS}"),  # 10000-01-01
        (1795683836975446, f"is after year 9999: {MILLIS_HINT}{SMALLER_UNITS}"),  # date +%s%6N
        (1795683836975446626, f"is after year 9999: {MILLIS_HINT}{SMALLER_UNITS}"),  # +%s%N
        (2**64, f"is after year 9999: {MILLIS_HINT}{SMALLER_UNITS}"),  # past msgspec's integers
        (10**30, f"is after year 9999: {MILLIS_HINT}"),  # in no unit a date
        (-1, f"is before 1970: {MILLIS_HINT}"),
        (-1700000000000, f"is before 1970: {MILLIS_HINT}"),
        (-(10**30), f"is before 1970: {MILLIS_HINT}"),
    ],
)
def test_a_timestamp_before_1970_or_past_year_9999_is_refused_on_both_paths(timestamp, problem):
    assert build_error(timestamp=timestamp) == (
        f"data/alpha.json: build 12 (builds[1]): 'timestamp' {timestamp} {problem}"
    )
    text = json.dumps(make_project([make_build(1), make_build(12, timestamp=timestamp)]))
    assert datafile._fast_project("alpha", text) is None


@pytest.mark.parametrize(
    "timestamp",
    [
        253402300799999,  # the last millisecond of year 9999
        99999999999,  # the largest in seconds (in 5138)
        1700000000,
        0,
    ],
)
def test_a_timestamp_from_1970_to_year_9999_is_read_alike_by_both_paths(timestamp):
    fast, checked = both_paths(json.dumps(make_project([make_build(12, timestamp=timestamp)])))
    assert fast is not None and checked.builds[0].timestamp == timestamp
    assert_same_values(fast, checked)


def test_a_build_must_be_an_object():
    assert parse_error(make_project([make_build(1), 7])) == (
        "data/alpha.json: builds[1]: must be an object"
    )


def test_duplicate_build_numbers_are_refused():
    assert parse_error(make_project([make_build(3), make_build(1), make_build(3)])) == (
        "data/alpha.json: build 3: buildNumber appears more than once"
    )


@pytest.mark.parametrize(
    "where, key, message",
    [
        ("project", "javadocBaseURL", "unknown key 'javadocBaseURL': did you mean javadocBaseUrl?"),
        ("project", "ciJobURL", "unknown key 'ciJobURL': did you mean ciJobUrl?"),
        ("project", "name", "unknown key 'name'"),  # nothing close
        (
            "build",
            "downloadURL",
            "build 1 (builds[0]): unknown key 'downloadURL': did you mean downloadUrl?",
        ),
        ("build", "sha-256", "build 1 (builds[0]): unknown key 'sha-256': did you mean sha256?"),
        (
            "commit",
            "mesage",
            "build 1 (builds[0]): commits[0]: unknown key 'mesage': did you mean message?",
        ),
        ("commit", "email", "build 1 (builds[0]): commits[0]: unknown key 'email'"),
    ],
)
def test_an_unknown_key_suggests_the_closest_key(where, key, message):
    doc = make_project([make_build(1)])
    target = {"project": doc, "build": doc["builds"][0], "commit": doc["builds"][0]["commits"][0]}
    target[where][key] = "x"
    assert parse_error(doc) == f"data/alpha.json: {message}"


NO_JAVADOC_RULE = dataformat.URL_RULE + ', or "" for a project without javadoc'


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"ciJob": ""}, "'ciJob' must be a non-empty string"),
        ({"ciJob": None}, "'ciJob' must be a non-empty string"),
        ({"ciJobUrl": "ci.example.org/job"}, "'ciJobUrl' " + dataformat.URL_RULE),
        ({"javadocBaseUrl": "//jd.example.org/"}, "'javadocBaseUrl' " + NO_JAVADOC_RULE),
        ({"javadocBaseUrl": "https://jd.example.org/ä/"}, "'javadocBaseUrl' " + NO_JAVADOC_RULE),
        ({"javadocBaseUrl": None}, "'javadocBaseUrl' " + NO_JAVADOC_RULE),
        (
            {"javadocBaseUrl": "https://jd.example.org/a?v=1"},
            "'javadocBaseUrl' must have no query "
            "or fragment: the channel's page is "
            "added to its path",
        ),
        (
            {"javadocBaseUrl": "https://jd.example.org/a#top"},
            "'javadocBaseUrl' must have no query "
            "or fragment: the channel's page is "
            "added to its path",
        ),
        ({"builds": {}}, "'builds' must be an array"),
        ({"slug": "beta"}, "'slug' is 'beta' but the file name says 'alpha'"),
        ({"name": "Alpha"}, "unknown key 'name'"),
    ],
)
def test_project_field_errors(fields, message):
    doc = make_project([])
    doc.update(fields)
    assert parse_error(doc) == f"data/alpha.json: {message}"


def test_a_missing_project_field_is_named():
    doc = make_project([])
    del doc["ciJobUrl"]
    assert parse_error(doc) == "data/alpha.json: missing key 'ciJobUrl'"


@pytest.mark.parametrize("given", [{}, {"javadocBaseUrl": ""}])
def test_a_project_may_have_no_javadoc(given):
    """No javadocBaseUrl, or an empty one as the API serves it: the project has no javadoc."""
    doc = make_project([make_build(1)], **given)
    if not given:
        del doc["javadocBaseUrl"]
    fast, checked = both_paths(json.dumps(doc))
    assert checked.javadoc_base_url == ""
    assert_same_values(fast, checked)


@pytest.mark.parametrize("doc", [[], "alpha", 3, None])
def test_the_file_must_hold_an_object(doc):
    assert parse_error(doc) == "data/alpha.json: the file must hold a JSON object"


@pytest.mark.parametrize("slug", ["Alpha", "my project", "-x", "_x", "ünï"])
def test_the_file_name_must_be_a_slug(slug):
    assert f"{slug!r} is not a project slug" in parse_error(make_project([]), slug=slug)


# --- the fast path: plainly valid files are checked whole, anything else build by build -------


def test_the_fast_path_gives_what_the_checks_give():
    fast, checked = both_paths(json.dumps(make_project(ALPHA_BUILDS), indent=2))
    assert fast is not None
    assert_same_values(fast, checked)


def test_both_paths_keep_one_string_per_channel():
    builds = [make_build(n, "1.21" if n % 3 else "1.20") for n in range(1, 31)]
    for project in both_paths(json.dumps(make_project(builds))):
        assert len({id(b.channel) for b in project.builds}) == 2


@pytest.mark.parametrize(
    "text, message",
    [
        (
            '{"ciJob": "A", "ciJobUrl": "https://a.example/", "javadocBaseUrl": "https://a.example/", '
            '"builds": [{"buildNumber": 1, "url": "https://a.example/1", "url": "https://a.example/2", '
            '"downloadUrl": "https://a.example/1", "channelVersion": "1", "timestamp": 1, '
            '"isExperimental": false, "commits": []}]}',
            "1:150: key 'url' appears twice in one object",
        ),
        (
            '{"ciJob": "A", "ciJobUrl": "https://a.example/", "javadocBaseUrl": "https://a.example/", '
            '"builds": [{"buildNumber": 1, "url": "https://a.example/1", "downloadUrl": '
            '"https://a.example/1", "channelVersion": "1", "timestamp": 1, "isExperimental": false, '
            '"commits": [{"message": "m", "hash": "ab", "hash": "cd"}]}]}',
            "1:295: key 'hash' appears twice in one object",
        ),
        # an escaped ':' in a string would make up for the ':' of the key written twice
        (
            '{"ciJob": "A\\u003a", "ciJob": "B", "ciJobUrl": "https://a.example/", "javadocBaseUrl": '
            '"https://a.example/", "builds": []}',
            "1:22: key 'ciJob' appears twice in one object",
        ),
    ],
)
def test_a_key_written_twice_is_found_without_the_hook(text, message):
    assert datafile._fast_project("alpha", text) is None
    assert parse_error(text.encode()) == f"data/alpha.json:{message}"


def file_text(*builds, **fields):
    """The text of a project file with these builds and project keys."""
    return json.dumps(make_project(list(builds), **fields))


SHA = "4c7b68ce5c0be31b0767eb687d1cbee97723d7b74c7b68ce5c0be31b0767eb68"


def kept_build(number, **fields):
    """A build whose file Buildshelf keeps: 'file', 'sha256' and 'size', no 'downloadUrl'."""
    build = make_build(number, sha256=SHA, size=10, file=f"alpha-{number}.jar", **fields)
    del build["downloadUrl"]
    return build


@pytest.mark.parametrize(
    "text, fast_reads_it",
    [
        # whitespace before ':' and a ':' inside strings, escaped or not
        (
            '{"ciJob" : "A:b", "ciJobUrl":"https://a.example/", "javadocBaseUrl" :\n'
            '"https://a.example/", "builds" : [{"buildNumber" : 1, "url" : '
            '"https://a.example:8080/1", "downloadUrl": "https://a.example/1", "channelVersion": '
            '"1", "timestamp": 1, "isExperimental": false, "commits": [{"message": "x\\": y", '
            '"hash": "ab", "author": "J: D"}]}]}',
            True,
        ),
        # an escaped ':' would skew the count of keys: the slow path takes the file
        (
            '{"ciJob": "A\\u003ab", "ciJobUrl": "https://a.example/", "javadocBaseUrl": '
            '"https://a.example/", "builds": []}',
            False,
        ),
        # a backslash, then the letters u003a (or u003): no ':' at all, read fast (hypothesis
        # found a message of '\\u003' sent to the slow path, which the property test forbids)
        (file_text(make_build(1, commits=[{"message": "\\u003a \\u003", "hash": "ab"}])), True),
        # a backslash, then an escaped ':': the slow path
        (
            '{"ciJob": "A\\\\\\u003Ab", "ciJobUrl": "https://a.example/", "javadocBaseUrl": '
            '"https://a.example/", "builds": []}',
            False,
        ),
        # every optional key, ':' in the values
        (
            file_text(
                make_build(1, sha256=SHA, size=0),
                kept_build(2, commits=[{"message": "a:b", "hash": "ab", "author": "J: D"}]),
                make_build(3, commit_count=2),
                slug="alpha",
                javadocPagePrefix=".cache/unpack",
            ),
            True,
        ),
        (file_text(make_build(1), javadocPagePrefix=""), True),
        # a key given the value that means "absent": the count of keys cannot tell
        (file_text(make_build(1, commits=[{"message": "m", "hash": "ab", "author": ""}])), False),
    ],
)
def test_unusual_but_valid_files_are_read_the_same_either_way(text, fast_reads_it):
    fast, checked = both_paths(text)
    if fast_reads_it:
        assert_same_values(fast, checked)
    else:
        assert fast is None


def test_a_legacy_commit_key_and_builds_out_of_order_take_the_slow_path_and_are_served():
    text = json.dumps(make_project([make_build(2), make_build(1, commit={"a": ":"})]))
    fast, checked = both_paths(text)
    assert fast is None and [b.number for b in checked.builds] == [1, 2]
    fast, checked = both_paths(json.dumps(make_project([make_build(2), make_build(1)])))
    assert_same_values(fast, checked)
    assert [b.number for b in fast.builds] == [1, 2]


ONE_RULE_AWAY = [
    None,
    True,
    False,
    0,
    1,
    8,
    -1,
    -3,
    2**64,
    253402300799999,  # the last timestamp of year 9999, and the first past it
    253402300800000,
    1.5,
    1e400,
    "",
    "a",
    "ab",
    "AB",
    "xyz",
    "0x1",
    "1.21",
    "1.21/x",
    "Way\ud800stone",
    "https://ci.example.org/1/",
    "http://a.example/?q#f",
    "https://jd.\u212aelvin.example/",
    "https://a.example/ä",
    "https:/a.example/",
    [],
    [[]],
    {},
    {"message": "m", "hash": "ab"},
    {"message": "m"},
    [{"message": "m", "hash": "ab"}],
    [{"message": "m", "hash": ""}],
    [{"message": 1, "hash": "ab"}],
    [{"message": "m"}],
    [{"message": "m", "hash": "ab", "x": 1}],
    [{"message": "\udc00", "hash": "ab"}],
    SHA,
    SHA.upper(),
    SHA[:-1],
    "alpha-9.jar",
    ".alpha.jar",
    "a" * 201,
    {"dev:bundle": {"downloadUrl": "https://a.example/b.jar"}},
    {"dev:bundle": {"downloadUrl": "https://a.example/b.jar"}, "server:default": {}},
    {"x:y": {"file": "alpha-9.jar", "sha256": SHA, "size": 1}},
    "DELETE",
]
FIELDS = (
    [("project", key) for key in sorted(dataformat.PROJECT_KEYS) + ["other"]]
    + [
        (level, key)
        for level in ("build", "kept build")
        for key in sorted(dataformat.WRITTEN_BUILD_KEYS) + ["other"]
    ]
    + [("commit", key) for key in sorted(dataformat.AUTHORED_COMMIT_KEYS) + ["other"]]
    + [("version", key) for key in sorted(dataformat.VERSION_KEYS) + ["other"]]
    + [
        (level, key)
        for level in ("extra file", "kept extra file")
        for key in sorted(dataformat.DOWNLOAD_KEYS) + ["other"]
    ]
)


def every_key_project(in_order):
    """ALPHA_BUILDS with every key of the format: the project's optional keys (every key of a
    version in `versions`), integrity data on build 5, whose first commit has an author, and
    build 7's file kept, build 7 yanked; build 5 with an extra file elsewhere, with integrity
    data, build 7 with one kept."""
    builds = sorted(ALPHA_BUILDS, key=lambda b: b["buildNumber"]) if in_order else ALPHA_BUILDS
    project = make_project(builds, slug="alpha", javadocPagePrefix="docs", versions=VERSIONS)
    doc = json.loads(json.dumps(project))
    by_number = {build["buildNumber"]: build for build in doc["builds"]}
    by_number[5].update(sha256=SHA, size=10)
    by_number[5]["commits"][0]["author"] = "Jane Doe"
    by_number[7].update(sha256=SHA, size=10, file="alpha-7.jar")
    del by_number[7]["downloadUrl"]
    by_number[7].update(yankedAt=1700000500000, yankReason="wrong jar: see #12")
    by_number[5]["downloads"] = {
        "dev:bundle": {"downloadUrl": "https://a.example:1/5/b.jar", "sha256": SHA, "size": 1}
    }
    by_number[7]["downloads"] = {"server:mojmap": {"file": "a-7-m.jar", "sha256": SHA, "size": 2}}
    return doc, by_number


@pytest.mark.parametrize("in_order", [False, True])
def test_the_fast_path_and_the_checks_agree_on_every_single_change(in_order):
    accepted, read_slowly = 0, set()
    for level, key in FIELDS:
        for value in ONE_RULE_AWAY:
            doc, by_number = every_key_project(in_order)
            target = {
                "project": doc,
                "build": by_number[5],
                "kept build": by_number[7],
                "commit": by_number[5]["commits"][0],
                "version": doc["versions"]["1.21"],
                "extra file": by_number[5]["downloads"]["dev:bundle"],
                "kept extra file": by_number[7]["downloads"]["server:mojmap"],
            }[level]
            if value == "DELETE":
                target.pop(key, None)
            else:
                target[key] = value
            text = json.dumps(doc)
            fast = datafile._fast_project("alpha", text)
            try:
                checked = datafile.parse_project("a.json", "alpha", text.encode(), quick=False)
            except datafile.DataError:
                assert fast is None, (level, key, value)
                continue
            accepted += 1
            if fast is None:
                read_slowly.add(key if key == "commit" else (key, json.dumps(value)))
            else:
                assert_same_values(fast, checked)
    # Only what the fast path cannot see goes the slow way: the legacy key, and an author or
    # a yankReason written as "" (the count of keys cannot tell it from none).
    assert read_slowly == {"commit", ("author", '""'), ("yankReason", '""')}
    # The changes that keep the file valid: 43 to the project (javadocBaseUrl deleted or "",
    # versions deleted or {}, among them), 92 to build 5 and 118 to build 7 (47 of them each
    # the legacy key, 3 each its downloads, and 30 in all that the yank mark's two keys allow:
    # a string reason, a timestamp for yankedAt, or either deleted), 47 to the commit, 11 to
    # build 5's extra file and 19 to build 7's kept one; deleting a key the place lacks
    # counts; and 22 to a version: 13 families, 1 and 8 for java, [] for javaFlags, each key
    # deleted.
    assert accepted == 352  # a buildNumber of 2**64 is over the largest


# --- integrity data and kept files ------------------------------------------------------------


def test_integrity_data_and_a_kept_file_are_read():
    external = make_build(1, sha256=SHA, size=10)
    kept = make_build(2, sha256=SHA, size=10, file="alpha-2.jar")
    del kept["downloadUrl"]
    first, second = parse(make_project([external, kept])).builds
    assert (first.sha256, first.size, first.hosted) == (SHA, 10, False)
    assert (second.sha256, second.size, second.file, second.hosted) == (
        SHA,
        10,
        "alpha-2.jar",
        True,
    )
    assert second.download_url == ""


@pytest.mark.parametrize(
    "fields, drop_url, message",
    [
        ({"sha256": SHA}, False, "'sha256' and 'size' go together: give both or neither"),
        ({"size": 1}, False, "'sha256' and 'size' go together: give both or neither"),
        (
            {"sha256": SHA.upper(), "size": 1},
            False,
            "'sha256' must be 64 lowercase hexadecimal digits",
        ),
        (
            {"sha256": SHA[:63], "size": 1},
            False,
            "'sha256' must be 64 lowercase hexadecimal digits",
        ),
        ({"sha256": SHA, "size": -1}, False, "'size' must be a whole number of bytes, 0 or more"),
        ({"sha256": SHA, "size": True}, False, "'size' must be a whole number of bytes, 0 or more"),
        ({"sha256": SHA, "size": 1.5}, False, "'size' must be a whole number of bytes, 0 or more"),
        ({"file": "a.jar"}, True, "'file' needs 'sha256' and 'size': they name its stored object"),
        (
            {"file": "a.jar", "sha256": SHA, "size": 1},
            False,
            "give 'downloadUrl' or 'file', not both: the server makes a kept file's address",
        ),
        ({"file": ".a.jar", "sha256": SHA, "size": 1}, True, "'file' " + model.FILE_NAME_RULE),
        ({"file": "a b.jar", "sha256": SHA, "size": 1}, True, "'file' " + model.FILE_NAME_RULE),
        ({"file": "../a.jar", "sha256": SHA, "size": 1}, True, "'file' " + model.FILE_NAME_RULE),
        ({"file": "é.jar", "sha256": SHA, "size": 1}, True, "'file' " + model.FILE_NAME_RULE),
        ({"file": "a" * 201, "sha256": SHA, "size": 1}, True, "'file' " + model.FILE_NAME_RULE),
        ({}, True, "missing key 'downloadUrl' (or 'file', for a file Buildshelf keeps)"),
    ],
)
def test_integrity_rules_name_the_build_and_field(fields, drop_url, message):
    build = make_build(12, **fields)
    if drop_url:
        del build["downloadUrl"]
    assert parse_error(make_project([build])) == f"data/alpha.json: build 12 (builds[0]): {message}"


def test_a_file_name_of_200_characters_is_accepted():
    build = make_build(12, sha256=SHA, size=1, file="a" * 196 + ".jar")
    del build["downloadUrl"]
    assert parse(make_project([build])).builds[0].file == "a" * 196 + ".jar"


TRICKY_COMMITS = [
    {"message": 'Quote ","author":"Mallory" in a message', "hash": "ab"},
    {"message": "Plain", "hash": "cd"},
]


@pytest.mark.parametrize("quick", [True, False], ids=["fast path", "slow path"])
@pytest.mark.parametrize(
    "commits, authored",
    [
        (TRICKY_COMMITS, False),
        (TRICKY_COMMITS + [{"message": "x", "hash": "ef", "author": "Jo"}], True),
    ],
    ids=["no author", "an author"],
)
def test_a_snapshot_keeps_commits_packed_and_reads_them_back_whole(quick, commits, authored):
    # 300,000 commits took 82 MB as Commit objects, 37 MB packed (issue 34's memory goal).
    data = json.dumps(make_project([make_build(4, commit_count=0, commits=commits)])).encode()
    [build] = datafile.parse_project("alpha.json", "alpha", data, quick=quick).builds
    assert type(build.commits) is model.Commits
    expected = tuple(model.Commit(c["message"], c["hash"], c.get("author", "")) for c in commits)
    assert build.commits == expected and tuple(build.commits) == expected
    assert len(build.commits) == len(commits) and build.commits[-1] == expected[-1]
    assert build.commits.authored is authored
    assert json.loads(build.commits.json) == commits


# --- extra files: a build's downloads -----------------------------------------------------------

MOJMAP = {"file": "alpha-12-mojmap.jar", "sha256": SHA, "size": 7}
BUNDLE = {"downloadUrl": "https://cdn.example.org/alpha/12/alpha-12-bundle.jar"}


NOT_A_MAP = (
    "'downloads' must be an object of the build's extra files by key, such as "
    '{"server:mojmap": {...}}: leave it out for a build without extra files'
)


def with_extras(downloads, number=12, **fields):
    return make_build(number, downloads=downloads, **fields)


def test_extra_files_are_read_kept_or_elsewhere_in_the_file_s_order():
    elsewhere = dict(BUNDLE, sha256=SHA, size=9)
    build = with_extras(
        {
            "server:mojmap": MOJMAP,
            "dev:bundle": elsewhere,
            "x-1:y-2": BUNDLE | {"downloadUrl": "https://cdn.example.org/alpha/12/other.jar"},
        }
    )
    [read] = parse(make_project([build])).builds
    assert read.downloads == {
        "server:mojmap": model.Download(file="alpha-12-mojmap.jar", sha256=SHA, size=7),
        "dev:bundle": model.Download(download_url=BUNDLE["downloadUrl"], sha256=SHA, size=9),
        "x-1:y-2": model.Download(download_url="https://cdn.example.org/alpha/12/other.jar"),
    }
    assert list(read.downloads) == ["server:mojmap", "dev:bundle", "x-1:y-2"]
    assert [d.hosted for d in read.downloads.values()] == [True, False, False]
    assert read.kept_files == (read.downloads["server:mojmap"],)


@pytest.mark.parametrize("quick", [True, False], ids=["fast path", "slow path"])
def test_a_build_without_extra_files_has_no_room_for_them(quick):
    # A slot on every Build took 16 bytes a build, 1.6 MB at 100,000 (docs/performance.md).
    assert "downloads" not in model.Build.__struct_fields__
    assert sys.getsizeof(model.Build(number=1, url="", channel="", timestamp=0,
                                     is_experimental=False, commits=())) == 112  # fmt: skip
    builds = [make_build(1), with_extras({"dev:bundle": BUNDLE}, 2), make_build(3)]
    data = json.dumps(make_project(builds)).encode()
    read = datafile.parse_project("a.json", "alpha", data, quick=quick).builds
    assert [type(build) for build in read] == [model.Build, model.BuildWithExtras, model.Build]
    assert read[0].downloads is msgspec.UNSET and read[0].kept_files == ()


def test_the_kept_files_of_a_build_are_its_primary_then_its_extras_kept():
    primary = kept_build(12, downloads={"server:mojmap": MOJMAP, "dev:bundle": BUNDLE})
    project = parse(
        make_project([primary, make_build(13), with_extras({"dev:bundle": BUNDLE}, 14)])
    )
    [build] = project.hosted_builds
    assert build.kept_files == (build, build.downloads["server:mojmap"])
    only_extra = parse(make_project([with_extras({"server:mojmap": MOJMAP})]))
    assert only_extra.hosted_builds == only_extra.builds


@pytest.mark.parametrize("quick", [True, False], ids=["fast path", "slow path"])
def test_both_paths_read_extra_files_alike(quick):
    builds = [
        kept_build(1, downloads={"server:mojmap": dict(MOJMAP, file="a-1-m.jar")}),
        with_extras({"dev:bundle": BUNDLE, "server:mojmap": MOJMAP}, 12),
        make_build(13),
        with_extras({"a:b": {"downloadUrl": "http://h.example:8080/x/"}}, 14),
    ]
    text = json.dumps(make_project(builds))
    fast, checked = both_paths(text)
    assert fast is not None
    assert_same_values(fast, checked)


def test_a_key_written_twice_in_the_downloads_is_found():
    text = file_text(with_extras({"dev:bundle": BUNDLE})).replace(
        '"dev:bundle": {', '"dev:bundle": {"downloadUrl": "https://a.example/x.jar", '
    )
    assert datafile._fast_project("alpha", text) is None
    assert "key 'downloadUrl' appears twice in one object" in parse_error(text.encode())
    text = file_text(with_extras({"dev:bundle": BUNDLE})).replace(
        '"downloads": {', '"downloads": {"dev:bundle": {"downloadUrl": "https://a.example/y"}, '
    )
    assert datafile._fast_project("alpha", text) is None
    assert "key 'dev:bundle' appears twice in one object" in parse_error(text.encode())


@pytest.mark.parametrize(
    "downloads, message",
    [
        ({}, NOT_A_MAP),
        ([BUNDLE], NOT_A_MAP),
        (None, NOT_A_MAP),
        (
            {"Server:mojmap": BUNDLE},
            'downloads["Server:mojmap"]: the key ' + model.DOWNLOAD_KEY_RULE,
        ),
        ({"mojmap": BUNDLE}, 'downloads["mojmap"]: the key ' + model.DOWNLOAD_KEY_RULE),
        ({"a:b:c": BUNDLE}, 'downloads["a:b:c"]: the key ' + model.DOWNLOAD_KEY_RULE),
        ({"a:": BUNDLE}, 'downloads["a:"]: the key ' + model.DOWNLOAD_KEY_RULE),
        ({"a_b:c": BUNDLE}, 'downloads["a_b:c"]: the key ' + model.DOWNLOAD_KEY_RULE),
        ({"a:b\n": BUNDLE}, 'downloads["a:b\\n"]: the key ' + model.DOWNLOAD_KEY_RULE),
        (
            {"server:default": BUNDLE},
            "downloads[\"server:default\"]: the key is the primary file's: the build's own "
            "downloadUrl or file is that file",
        ),
        (
            {"dev:bundle": "https://a.example/x.jar"},
            "downloads[\"dev:bundle\"]: must be an object: 'file', 'sha256' and 'size' for a "
            "file Buildshelf keeps, 'downloadUrl' for one elsewhere",
        ),
        (
            {"dev:bundle": dict(BUNDLE, downloadURL="x")},
            "downloads[\"dev:bundle\"]: unknown key 'downloadURL': did you mean downloadUrl?",
        ),
        (
            {"dev:bundle": dict(BUNDLE, sha256=SHA)},
            "downloads[\"dev:bundle\"]: 'sha256' and 'size' go together: give both or neither",
        ),
        (
            {"dev:bundle": dict(MOJMAP, sha256=SHA.upper())},
            "downloads[\"dev:bundle\"]: 'sha256' must be 64 lowercase hexadecimal digits",
        ),
        (
            {"dev:bundle": dict(MOJMAP, size=-1)},
            "downloads[\"dev:bundle\"]: 'size' must be a whole number of bytes, 0 or more",
        ),
        (
            {"dev:bundle": {"file": "a.jar"}},
            "downloads[\"dev:bundle\"]: 'file' needs 'sha256' and 'size': they name its "
            "stored object",
        ),
        (
            {"dev:bundle": dict(MOJMAP, file="../a.jar")},
            "downloads[\"dev:bundle\"]: 'file' " + model.FILE_NAME_RULE,
        ),
        (
            {"dev:bundle": dict(MOJMAP, **BUNDLE)},
            "downloads[\"dev:bundle\"]: give 'downloadUrl' or 'file', not both: the server "
            "makes a kept file's address",
        ),
        (
            {"dev:bundle": {}},
            "downloads[\"dev:bundle\"]: missing key 'downloadUrl' (or 'file', for a file "
            "Buildshelf keeps)",
        ),
        (
            {"dev:bundle": {"downloadUrl": "ftp://a.example/x.jar"}},
            f"downloads[\"dev:bundle\"]: 'downloadUrl' {dataformat.URL_RULE}",
        ),
        (
            {"dev:bundle": {"downloadUrl": "https://a.example/x/alpha-12.jar"}},
            "downloads[\"dev:bundle\"]: its file name 'alpha-12.jar' is also the primary "
            "file's: each file of a build has a name of its own",
        ),
        (
            {"server:mojmap": MOJMAP, "dev:bundle": dict(MOJMAP, sha256="0" * 64)},
            "downloads[\"dev:bundle\"]: its file name 'alpha-12-mojmap.jar' is also "
            'downloads["server:mojmap"]\'s: each file of a build has a name of its own',
        ),
        (
            {"a:b": BUNDLE, "dev:bundle": dict(MOJMAP, file="alpha-12-bundle.jar")},
            "downloads[\"dev:bundle\"]: its file name 'alpha-12-bundle.jar' is also "
            'downloads["a:b"]\'s: each file of a build has a name of its own',
        ),
    ],
)
def test_extra_file_rules_name_the_build_and_the_key(downloads, message):
    text = file_text(make_build(3), with_extras(downloads))
    assert datafile._fast_project("alpha", text) is None
    assert parse_error(text.encode()) == f"data/alpha.json: build 12 (builds[1]): {message}"


def test_the_file_names_of_a_kept_primary_and_of_urls_that_give_none_are_compared_as_such():
    # a kept primary's name is its file's; URLs ending in '/' give no name, and share none
    primary = kept_build(12, downloads={"a:b": {"downloadUrl": "https://a.example/alpha-12.jar"}})
    assert "is also the primary file's" in parse_error(make_project([primary]))
    nameless = {"downloadUrl": "https://a.example/"}
    build = make_build(12, downloadUrl="https://b.example/", downloads={"a:b": nameless})
    build["downloads"]["c:d"] = {"downloadUrl": "https://c.example/x/"}
    fast, checked = both_paths(file_text(build))
    assert fast is not None and fast.builds[0].downloads["a:b"].file_name == ""
    assert_same_values(fast, checked)
