"""Property-based tests: random data files and random queries against a simple model."""

import json
import tempfile
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote, urljoin, urlsplit

import webtest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from buildshelf import javadoc, model, server
from buildshelf import store as store_module
from buildshelf.datafiles import datafile, dataformat
from buildshelf.web import answers, shapes
from helpers import assert_same_values, both_paths, write_file

API = "/api/v2"
CHANNELS = ["1.20", "1.21", "1.21.1-pre1", "2.0+b", "x_y"]

commits = st.lists(
    st.fixed_dictionaries(
        {
            "message": st.text(max_size=30),
            "hash": st.text("0123456789abcdefABCDEF", min_size=1, max_size=40),
        }
    ),
    max_size=3,
)


# Every timestamp of the format: from 1970 to the end of year 9999, in seconds or milliseconds.
timestamps = st.integers(0, 253402300799999)


@st.composite
def projects(draw):
    numbers = draw(st.lists(st.integers(0, 10**12), unique=True, max_size=25))
    builds = [
        {
            "buildNumber": n,
            "url": f"https://ci.example.org/{n}/",
            "downloadUrl": f"http://dl.example.org/{n}.jar",
            "channelVersion": draw(st.sampled_from(CHANNELS)),
            "timestamp": draw(timestamps),
            "isExperimental": draw(st.booleans()),
            "commits": draw(commits),
        }
        for n in numbers
    ]
    base = draw(
        st.sampled_from(
            ["https://jd.example.org/p/", "https://jd.example.org/p", "http://jd.example.org/a/b//"]
        )
    )
    return {
        "ciJob": draw(st.text(min_size=1, max_size=20)),
        "ciJobUrl": "https://ci.example.org/job/p/",
        "javadocBaseUrl": base,
        "builds": builds,
    }


queries = st.fixed_dictionaries(
    {},
    optional={
        "channel": st.sampled_from(CHANNELS) | st.text(max_size=8),
        "experimental": st.sampled_from(["true", "TRUE", "True", "false", "yes", "1", ""]),
        "unknown": st.text(max_size=5),
    },
)


def model_select(doc, query):
    """What /builds must return: written from the README's rules, not from store.py."""
    channel = query.get("channel") or None
    experimental = query.get("experimental", "").lower() == "true"
    chosen = [
        b
        for b in doc["builds"]
        if (channel is None or b["channelVersion"] == channel)
        and (experimental or not b["isExperimental"])
    ]
    return sorted(chosen, key=lambda b: b["buildNumber"])


@contextmanager
def serving(doc):
    with tempfile.TemporaryDirectory() as directory:
        write_file(Path(directory) / "p.json", doc)
        yield webtest.TestApp(server.make_app(store_module.Store(directory, check_interval=0)))


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(doc=projects(), query=queries, slug=st.sampled_from(["p", "P"]))
def test_builds_latest_and_jd_follow_the_model(doc, query, slug):
    with serving(doc) as client:
        check_against_the_model(client, doc, query, slug)


def check_against_the_model(client, doc, query, slug):
    params = dict(query, project=slug)
    if not all(value.isprintable() for value in query.values()):
        for endpoint in ("/builds", "/builds/all", "/builds/latest", "/jd"):
            resp = client.get(API + endpoint, params, status=400)
            assert resp.json["code"] == "invalid_query"
        return
    expected = model_select(doc, query)

    listed = client.get(API + "/builds", params)
    assert listed.json == expected
    assert client.get(API + "/builds/all", params).body == listed.body

    latest = client.get(API + "/builds/latest", params, expect_errors=True)
    jd = client.get(API + "/jd", params, expect_errors=True)
    if expected:
        assert latest.status_int == 200 and latest.json == expected[-1]
        assert jd.status_int == 302
        assert jd.location == (
            doc["javadocBaseUrl"].rstrip("/")
            + "/"
            + expected[-1]["channelVersion"]
            + "-R0.1-SNAPSHOT"
        )
    else:
        assert latest.status_int == 404 and latest.json["code"] == "no_matching_build"
        assert jd.status_int == 404 and "Location" not in jd.headers


@given(doc=projects())
def test_every_build_in_the_file_is_served_once_in_order(doc):
    with serving(doc) as client:
        served = client.get(API + "/builds", {"project": "p", "experimental": "true"}).json
    assert served == sorted(doc["builds"], key=lambda b: b["buildNumber"])


# Placeholders that json_text() replaces with what json.dumps cannot write: an integer over
# Python's 4,300-digit limit, and nesting deeper than the parser goes.
HUGE, HUGE_NEGATIVE, DEEP = "\x00huge\x00", "\x00-huge\x00", "\x00deep\x00"
UNWRITABLE = {
    json.dumps(HUGE): "9" * 4301,
    json.dumps(HUGE_NEGATIVE): "-" + "1" * 6000,
    json.dumps(DEEP): "[" * 1200 + "]" * 1200,
}

# Any text, lone surrogates included (hypothesis draws them rarely unless asked).
any_text = st.text(
    st.characters(exclude_categories=()) | st.sampled_from("\ud800\udbff\udc00\udfff"), max_size=12
)
# Values close to valid ones, so that validation gets past the first field more often.
near_valid = st.sampled_from(
    [
        "https://ci.example.org/1/",
        "https://jd.\u212aelvin.example/",
        "http://a.example/?q#f",
        "https://a.example/ä",
        "https:/a.example/",
        "1.21",
        "1.21/x",
        "0a1b",
        "0x1b",
        "",
        "p",
        "Way\ud800stone",
        0,
        7,
        12,
        -1,
        2**64,
        253402300799999,  # the last timestamp of year 9999, and the first past it
        253402300800000,
        1.0,
        True,
        False,
        None,
        [],
        {},
        1e400,
        [[]],
        {"message": "m", "hash": "ab"},
        {"message": "m"},
        {"message": "m", "hash": "ab", "x": 1},
        [{"message": "m", "hash": "ab"}],
        [{"message": "m", "hash": ""}],
        [{"message": 1, "hash": "ab"}],
    ]
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | any_text
    | st.sampled_from([HUGE, HUGE_NEGATIVE, DEEP])
    | near_valid,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=20,
)


def json_text(value, indent=None):
    """`value` as the bytes of a JSON file, with the placeholders written out."""
    text = json.dumps(value, indent=indent)
    for placeholder, written in UNWRITABLE.items():
        text = text.replace(placeholder, written)
    return text.encode()


def assert_servable(path, data):
    """parse_project gives a Project whose every served value encodes, or a DataError whose
    message does: nothing else, so that neither a load nor a response can fail."""
    try:
        project = datafile.parse_project(path, "p", data)
    except datafile.DataError as error:
        assert all(line.startswith(path) for line in error.lines())
        assert 1 + len(error.also) <= datafile.MAX_PROBLEMS
        # what /healthz sends
        answers.encode({"file": error.name, "errors": error.lines(located=True)})
        return None
    assert isinstance(project, model.Project)
    answers.encode(shapes.project_json(project))
    for channel in {None} | {b.channel for b in project.builds}:
        for experimental in (False, True):
            answers.encode(
                [
                    shapes.Shapes().build_json(project, b)
                    for b in project.select(channel, experimental)
                ]
            )
            if project.latest(channel, experimental):
                assert javadoc.javadoc_url(
                    project.javadoc_base_url,
                    project.latest(channel, experimental).channel,
                    None,
                    project.javadoc_page_prefix,
                ).isascii()
    return project


@given(data=st.binary(max_size=200) | json_values.map(json_text))
def test_any_file_content_is_a_project_or_a_data_error(data):
    assert_servable("p.json", data)


@given(
    doc=projects(),
    path=st.lists(
        st.sampled_from(
            ["builds", 0, "commits", "channelVersion", "buildNumber", "timestamp", "hash"]
        ),
        min_size=1,
        max_size=4,
    ),
    value=json_values,
)
def test_a_damaged_file_is_refused_or_still_valid_never_a_crash(doc, path, value):
    target = doc
    for step in path[:-1]:  # walk as far as the path goes in this document
        if isinstance(target, dict) and step in target:
            target = target[step]
        elif isinstance(target, list) and isinstance(step, int) and step < len(target):
            target = target[step]
    if isinstance(target, dict):
        target[path[-1]] = value
    project = assert_servable("p.json", json_text(doc))
    if project is None:  # refused
        return
    # Accepted: then it must obey every rule of the format.
    for build in project.builds:
        assert type(build.number) is int and build.number >= 0
        assert model.CHANNEL_PATTERN.match(build.channel)
        assert type(build.timestamp) is int and type(build.is_experimental) is bool
        assert 0 <= build.timestamp <= 253402300799999
        assert all(type(c.message) is str and c.hash for c in build.commits)


# --- /jd?redirect= never leaves the channel's javadoc ------------------------------------------

# Pieces that have sent redirects elsewhere in other services, mixed with plain page paths.
REDIRECT_PIECES = [
    "..",
    ".",
    "/",
    "//",
    "\\",
    ":",
    "@",
    "?",
    "#",
    "%",
    "%2e",
    "%2E",
    "%2f",
    "%2F",
    "%5c",
    "%25",
    "%252e",
    "%252F",
    "%23",
    "%3A",
    "%40",
    "%00",
    "%0d%0a",
    "http:",
    "https://evil.example",
    "evil.example",
    "javascript:",
    "\uff0e",
    "\u2215",
    " ",
    "+",
    "&redirect=x",
    "Foo.html",
    "org",
    "a$B",
    "-",
    "_",
    "#m(int[])",
    "<init>",
    "[",
    "]",
]
page_paths = st.tuples(
    st.lists(st.from_regex(r"[A-Za-z0-9._$-]{1,6}", fullmatch=True), min_size=1, max_size=4),
    st.sampled_from(["", "#", "#m(int)", "#<init>()", "#a/b?c", "#x y", "#%41"]),
).map(lambda parts: "/".join(parts[0]) + parts[1])
redirects = page_paths | st.lists(
    st.sampled_from(REDIRECT_PIECES) | st.text(max_size=4), max_size=12
).map("".join)
# How the value goes into the query: encoded once (safe=""), left partly raw as careless clients
# send it, or sent raw.
ENCODINGS = [
    lambda v: quote(v, safe=""),
    lambda v: quote(v, safe="/:@$"),
    lambda v: quote(v, safe="/%:@$+"),
    lambda v: v,
]


def remove_dot_segments(path):
    """RFC 3986 5.2.4, which browsers apply to a Location's path."""
    output = []
    for segment in path.split("/"):
        if segment == "..":
            if len(output) > 1:
                output.pop()
        elif segment != ".":
            output.append(segment)
    return "/".join(output)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(
    redirect=redirects,
    encoding=st.sampled_from(ENCODINGS),
    base=st.sampled_from(
        [
            "https://jd.example.org/p/",
            "https://jd.example.org/p",
            "http://jd.example.org:8080/a/b//",
        ]
    ),
    prefix=st.sampled_from(["", ".cache/unpack"]),
    channel=st.sampled_from(CHANNELS),
)
def test_no_redirect_leaves_the_channels_javadoc(redirect, encoding, base, prefix, channel):
    doc = {
        "ciJob": "P",
        "ciJobUrl": "https://ci.example.org/job/p/",
        "javadocBaseUrl": base,
        "builds": [
            {
                "buildNumber": 1,
                "url": "https://ci.example.org/1/",
                "downloadUrl": "https://ci.example.org/1.jar",
                "channelVersion": channel,
                "timestamp": 1,
                "isExperimental": False,
                "commits": [],
            }
        ],
    }
    if prefix:
        doc["javadocPagePrefix"] = prefix
    target = f"{API}/jd?project=p&redirect={encoding(redirect)}"
    try:
        target.encode("latin-1")
    except UnicodeEncodeError:  # not sendable on the wire as it is: send it encoded
        target = f"{API}/jd?project=p&redirect={quote(redirect, safe='')}"
    with serving(doc) as client:
        resp = client.get(target, expect_errors=True)
    if resp.status_int != 302:
        assert resp.status_int == 400 and "Location" not in resp.headers
        assert resp.json["code"] in ("invalid_redirect", "invalid_query", "repeated_parameter")
        return
    root = base.rstrip("/") + "/" + channel + "-R0.1-SNAPSHOT"
    location = resp.headers["Location"]
    assert location == root or location.startswith(root + "/")
    parts, root_parts = urlsplit(location), urlsplit(root)
    assert (parts.scheme, parts.netloc) == (root_parts.scheme, root_parts.netloc)
    assert urljoin("https://elsewhere.example/x", location) == location  # absolute as it is
    assert remove_dot_segments(parts.path).startswith(root_parts.path)
    assert parts.path == remove_dot_segments(parts.path)  # nothing for a browser to resolve
    assert "\\" not in location and location.isascii() and location.isprintable()
    assert " " not in location and "%25" not in location


PROJECT_FIELDS = sorted(dataformat.PROJECT_KEYS) + ["other"]
BUILD_FIELDS = sorted(dataformat.WRITTEN_BUILD_KEYS) + [
    "gameVersion",
    "other",
]
COMMIT_FIELDS = sorted(dataformat.AUTHORED_COMMIT_KEYS) + ["other"]
EXTRA_FIELDS = sorted(dataformat.DOWNLOAD_KEYS) + ["other"]
DELETE = object()

places = st.one_of(
    st.tuples(st.just("project"), st.sampled_from(PROJECT_FIELDS)),
    st.tuples(st.just("build"), st.sampled_from(BUILD_FIELDS)),
    st.tuples(st.just("commit"), st.sampled_from(COMMIT_FIELDS)),
    st.tuples(st.just("extra file"), st.sampled_from(EXTRA_FIELDS)),
)
mutations = st.lists(st.tuples(places, json_values | st.just(DELETE)), min_size=1, max_size=3)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(doc=projects(), changes=mutations, which=st.integers(0, 30))
def test_any_value_at_any_field_is_a_project_or_a_data_error(doc, changes, which):
    assert_servable("data/p.json", json_text(damaged(doc, changes, which)))


PATHS = {
    "project": (),
    "build": ("builds",),
    "commit": ("builds", "commits"),
    "extra file": ("builds", "downloads"),
}


def damaged(doc, changes, which):
    """`doc` with each change made at its level: the project, or the `which`-th build or
    commit or extra file (counting round); a change whose place an earlier change removed, or
    that is not there, is skipped."""
    for (level, key), value in changes:
        target = doc
        for step in PATHS[level]:
            inner = target.get(step) if isinstance(target, dict) else None
            if isinstance(inner, dict):  # the extra files, by key
                inner = list(inner.values())
            target = inner[which % len(inner)] if isinstance(inner, list) and inner else None
        if not isinstance(target, dict):  # an earlier change replaced or removed it
            continue
        if value is DELETE:
            target.pop(key, None)
        else:
            target[key] = value
    return doc


# --- the fast path and the build-by-build checks read every file alike -------------------------

# Values that make the counting of ':' and keys work hard: ':' and '"' inside strings, escapes.
tricky_text = st.text(max_size=12) | st.sampled_from(
    ["a: b", '"q": "r"', "back\\slash:", "\u00e9t\u00e9: \u2713", '{"x": 1}']
)


@st.composite
def every_key_commits(draw):
    commit = {
        "message": draw(tricky_text),
        "hash": draw(st.text("0123456789abcdefABCDEF", min_size=1, max_size=40)),
    }
    if draw(st.booleans()):
        commit["author"] = draw(tricky_text.filter(bool))  # "" is the same as none
    return commit


download_keys = st.from_regex(r"[a-z0-9-]{1,8}:[a-z0-9-]{1,8}", fullmatch=True).filter(
    lambda key: key != model.PRIMARY_KEY
)


@st.composite
def every_key_downloads(draw, primary):
    """A build's extra files, any of the keys of each: kept, elsewhere with integrity data or
    without; their names unlike each other's and the primary file's, `primary`."""
    downloads = {}
    for index, key in enumerate(draw(st.lists(download_keys, min_size=1, max_size=3, unique=True))):
        kind = draw(st.sampled_from(["elsewhere", "integrity", "kept", "nameless"]))
        extra = {"downloadUrl": f"https://cdn.example.org/a:b/extra-{index}.jar?c:d"}
        if kind == "nameless":  # a URL that gives no name: it shares none
            extra["downloadUrl"] = f"http://cdn.example.org:8080/{index}:/"
        if kind in ("integrity", "kept"):
            extra["sha256"] = draw(st.text("0123456789abcdef", min_size=64, max_size=64))
            extra["size"] = draw(st.integers(0, 2**64))
        if kind == "kept":
            del extra["downloadUrl"]
            suffix = draw(st.from_regex(r"[A-Za-z0-9._+-]{0,20}", fullmatch=True))
            extra["file"] = f"extra-{index}-{suffix}"
        if model.file_name_in_url(extra.get("downloadUrl", "")) != primary:
            downloads[key] = extra
    return downloads


@st.composite
def every_key_projects(draw):
    """Valid project files in which any key of the format may appear (the legacy 'commit'
    aside): the project's optional keys, integrity data, kept files, extra files and commit
    authors."""
    builds = []
    for n in draw(st.lists(st.integers(0, dataformat.MAX_BUILD_NUMBER), unique=True, max_size=12)):
        build = {
            "buildNumber": n,
            "url": draw(st.sampled_from(["https://ci.example.org/1/", "http://ci.example:8080/a"])),
            "downloadUrl": f"https://dl.example.org:443/{n}.jar",
            "channelVersion": draw(st.sampled_from(CHANNELS)),
            "timestamp": draw(timestamps),
            "isExperimental": draw(st.booleans()),
            "commits": draw(st.lists(every_key_commits(), max_size=3)),
        }
        kind = draw(st.sampled_from(["plain", "integrity", "kept"]))
        if kind != "plain":
            build["sha256"] = draw(st.text("0123456789abcdef", min_size=64, max_size=64))
            build["size"] = draw(st.integers(0, 2**64))
        if kind == "kept":
            del build["downloadUrl"]
            build["file"] = draw(st.from_regex(model.FILE_NAME_PATTERN, fullmatch=True))
        if draw(st.booleans()):
            primary = build.get("file") or model.file_name_in_url(build["downloadUrl"])
            build["downloads"] = draw(every_key_downloads(primary))
        if draw(st.booleans()):  # yanked, maybe with a reason
            build["yankedAt"] = draw(timestamps)
            if draw(st.booleans()):
                # Text by the rule: a valid file (the rule's own tests are test_yank.py's).
                reasons = tricky_text.filter(lambda t: t and not dataformat.yank_reason_problem(t))
                build["yankReason"] = draw(reasons)
        builds.append(build)
    doc = {
        "ciJob": draw(tricky_text.filter(bool)),
        "ciJobUrl": "https://ci.example.org:8443/job/p/",
        "javadocBaseUrl": draw(
            st.sampled_from(["https://jd.example.org/p/", "http://jd:1/a//", "", None])
        ),
        "builds": builds,
    }
    if doc["javadocBaseUrl"] is None:  # a project without javadoc
        del doc["javadocBaseUrl"]
    if draw(st.booleans()):
        doc["slug"] = "p"
    if draw(st.booleans()):
        doc["javadocPagePrefix"] = draw(st.sampled_from(["", ".cache/unpack", "a/b_c/$d-e.f"]))
    if draw(st.booleans()):
        doc["versions"] = draw(st.dictionaries(st.sampled_from(CHANNELS), version_entries()))
    return doc


@st.composite
def version_entries(draw):
    """An entry of a project's `versions` block: any of its keys, JVM flags with ':' in them."""
    values = {
        "family": st.sampled_from(["1.21", "snapshots", "x_y+z"]),
        "support": st.sampled_from(model.SUPPORT_STATUSES),
        "supportEnd": st.dates().map(lambda day: day.isoformat()),
        "java": st.integers(1, 2**31 - 1),
        "javaFlags": st.lists(
            tricky_text.filter(lambda flag: flag and flag.isprintable()), max_size=3
        ),
        "experimentalChannel": st.sampled_from(model.EXPERIMENTAL_CHANNELS),
    }
    keys = draw(st.lists(st.sampled_from(sorted(values)), unique=True))
    return {key: draw(values[key]) for key in keys}


def keys_of(doc):
    """The keys `doc` gives: the project's, its builds', its commits', its extra files'."""
    builds = doc["builds"]
    commits = [commit for build in builds for commit in build["commits"]]
    extras = [extra for build in builds for extra in build.get("downloads", {}).values()]
    return (set(doc), set().union(*builds), set().union(*commits), set().union(*extras))


def test_the_generated_files_can_hold_every_key_of_the_format_at_once():
    every_key = (
        set(dataformat.PROJECT_KEYS),
        set(dataformat.BUILD_KEYS),
        set(dataformat.AUTHORED_COMMIT_KEYS),
        set(dataformat.DOWNLOAD_KEYS),
    )
    # Found, not shrunk: any file with every key will do.
    found = find(
        every_key_projects(),
        lambda doc: keys_of(doc) == every_key,
        settings=settings(phases=[Phase.generate], database=None, max_examples=2000),
    )
    assert keys_of(found) == every_key


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(
    doc=every_key_projects(),
    indent=st.sampled_from([None, 0, 2]),
    ensure_ascii=st.booleans(),
    sort_keys=st.booleans(),
)
def test_the_fast_path_reads_every_valid_file_as_the_checks_do(
    doc, indent, ensure_ascii, sort_keys
):
    text = json.dumps(doc, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys)
    fast, checked = both_paths(text, slug="p")
    assert fast is not None
    assert_same_values(fast, checked)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(doc=every_key_projects(), changes=mutations, which=st.integers(0, 30))
def test_the_fast_path_refuses_what_the_checks_refuse(doc, changes, which):
    """A damaged file: the fast path leaves it to the checks or reads it as they do."""
    data = json_text(damaged(doc, changes, which))
    fast = datafile._fast_project("p", data.decode())
    try:
        checked = datafile.parse_project("p.json", "p", data, quick=False)
    except datafile.DataError:
        assert fast is None
        return
    if fast is not None:
        assert_same_values(fast, checked)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(st.characters(exclude_categories=["Cs"])),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(st.characters(exclude_categories=["Cs"])), children, max_size=4)
    ),
    max_leaves=12,
)


@given(JSON_VALUES)
def test_answers_are_encoded_byte_for_byte_as_json_dumps_would(value):
    # answers.encode is msgspec's, which writes packed commits as they are; what a client
    # reads must not change with it (issue 34).
    assert (
        answers.encode(value)
        == json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    )
