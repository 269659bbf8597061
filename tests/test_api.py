"""The HTTP API, through webtest: every rule of the spec and every decision of the README."""

import json

import pytest
import webtest

from buildshelf import server
from helpers import make_build, make_project, write_file

API = "/api/v2"


def numbers(resp):
    return [b["buildNumber"] for b in resp.json]


def build_body(number, channel, experimental, commits):
    """What the API must serve for helpers.make_build(number, ...): written out by hand."""
    return {
        "buildNumber": number,
        "url": f"https://ci.example.org/job/Alpha/{number}/",
        "downloadUrl": f"https://ci.example.org/job/Alpha/{number}/artifact/alpha-{number}.jar",
        "channelVersion": channel,
        "timestamp": 1700000000000 + number,
        "isExperimental": experimental,
        "commits": [
            {"message": f"Change {number}.{i}", "hash": f"{number:04x}{i:036x}"}
            for i in range(commits)
        ],
    }


def assert_error(resp, status, code):
    assert resp.status_int == status
    assert resp.content_type == "application/json"
    assert set(resp.json) == {"error", "code"}
    assert resp.json["code"] == code
    return resp.json["error"]


# --- /projects -------------------------------------------------------------------------------


def test_projects_lists_every_project_in_slug_order(client):
    resp = client.get(API + "/projects")
    assert resp.content_type == "application/json"
    assert resp.json == {
        "projects": [
            {
                "slug": "alpha",
                "ciJob": "Alpha",
                "ciJobUrl": "https://ci.example.org/job/Alpha/",
                "javadocBaseUrl": "https://jd.example.org/alpha/",
            },
            {
                "slug": "beta",
                "ciJob": "Beta",
                "ciJobUrl": "https://ci.example.org/job/Beta/",
                "javadocBaseUrl": "https://jd.example.org/beta",
            },
        ]
    }


def test_bodies_are_compact_utf8_json(client):
    body = client.get(API + "/projects").body
    assert body.startswith(b'{"projects":[{"slug":"alpha","ciJob":"Alpha",')
    assert b" " not in body and b"\n" not in body


def test_projects_with_no_data_is_an_empty_list(tmp_path):
    from buildshelf import store

    client = webtest.TestApp(server.make_app(store.Store(tmp_path, check_interval=0)))
    assert client.get(API + "/projects").json == {"projects": []}


# --- /builds and /builds/all -----------------------------------------------------------------


def test_builds_serves_stable_builds_in_ascending_order_with_every_field(client):
    resp = client.get(API + "/builds", {"project": "alpha"})
    assert resp.content_type == "application/json"
    assert resp.json == [
        build_body(1, "1.20", False, 1),
        build_body(3, "1.20", False, 0),
        build_body(5, "1.21", False, 3),
    ]


def test_build_fields_come_in_the_spec_order_with_commits_last(client):
    body = client.get(API + "/builds/latest", {"project": "alpha"}).body
    keys = list(json.loads(body, object_pairs_hook=lambda pairs: [k for k, _ in pairs]))
    assert keys == [
        "buildNumber",
        "url",
        "downloadUrl",
        "channelVersion",
        "timestamp",
        "isExperimental",
        "commits",
    ]


@pytest.mark.parametrize("value", ["true", "TRUE", "True", "tRuE"])
def test_experimental_true_in_any_case_includes_experimental_builds(client, value):
    resp = client.get(API + "/builds", {"project": "alpha", "experimental": value})
    assert numbers(resp) == [1, 2, 3, 5, 7, 8]
    assert [b["isExperimental"] for b in resp.json] == [False, True, False, False, True, True]


@pytest.mark.parametrize(
    "query",
    [
        "",
        "&experimental=false",
        "&experimental=yes",
        "&experimental=1",
        "&experimental=",
        "&experimental=on",
    ],
)
def test_anything_but_true_means_stable_only(client, query):
    assert numbers(client.get(API + "/builds?project=alpha" + query)) == [1, 3, 5]


@pytest.mark.parametrize(
    "channel, experimental, expected",
    [
        ("1.20", "false", [1, 3]),
        ("1.20", "true", [1, 2, 3]),
        ("1.21", "false", [5]),
        ("1.21", "true", [5, 7]),
        ("1.21.1-pre1", "false", []),
        ("1.21.1-pre1", "true", [8]),
        ("9.9", "true", []),
        ("1.2", "true", []),  # exact match, not a prefix
        ("1.21 ", "true", []),
    ],
)
def test_channel_is_an_exact_match(client, channel, experimental, expected):
    resp = client.get(
        API + "/builds", {"project": "alpha", "channel": channel, "experimental": experimental}
    )
    assert numbers(resp) == expected


def test_an_empty_channel_is_no_filter(client):
    assert numbers(client.get(API + "/builds?project=alpha&channel=")) == [1, 3, 5]


@pytest.mark.parametrize(
    "query",
    [
        "project=alpha",
        "project=alpha&experimental=true",
        "project=alpha&channel=1.21",
        "project=alpha&channel=none",
        "project=ALPHA&channel=1.20&experimental=TRUE",
    ],
)
def test_builds_and_builds_all_are_byte_identical(client, query):
    builds = client.get(f"{API}/builds?{query}")
    assert builds.body == client.get(f"{API}/builds/all?{query}").body
    assert builds.headers["Content-Type"] == "application/json"


@pytest.mark.parametrize("slug", ["ALPHA", "Alpha", "aLpHa"])
def test_project_is_matched_in_any_letter_case(client, slug):
    assert numbers(client.get(API + "/builds", {"project": slug})) == [1, 3, 5]


def test_project_lookalike_letters_do_not_match(data_dir, client):
    # KELVIN SIGN lowercases to 'k': no slug may be reached through such letters.
    write_file(data_dir / "kappa.json", make_project([make_build(1)]))
    assert numbers(client.get(API + "/builds", {"project": "KAPPA"})) == [1]
    resp = client.get(API + "/builds", {"project": "\u212aappa"}, status=404)
    assert_error(resp, 404, "unknown_project")


def test_commit_messages_keep_unicode_and_json_special_characters(data_dir, client):
    message = 'Fix "null" world \\ names\n\tÜbersetzung 更新 🚀 \u2028 </script>'
    build = make_build(4, commit_count=0)
    build["commits"] = [{"message": message, "hash": "ABCdef0123"}]
    write_file(data_dir / "gamma.json", make_project([build]))
    resp = client.get(API + "/builds", {"project": "gamma"})
    assert resp.json[0]["commits"] == [{"message": message, "hash": "ABCdef0123"}]
    assert "Übersetzung 更新 🚀".encode() in resp.body  # UTF-8, not \u escapes


def test_legacy_commit_key_is_never_served(data_dir, client):
    build = make_build(4, commit={"message": "old", "hash": "abc"})
    write_file(data_dir / "gamma.json", make_project([build]))
    resp = client.get(API + "/builds", {"project": "gamma"})
    assert "commit" not in resp.json[0]
    assert "commit" not in client.get(API + "/builds/latest", {"project": "gamma"}).json


def test_builds_with_zero_one_and_many_commits(client):
    by_number = {
        b["buildNumber"]: b for b in client.get(API + "/builds", {"project": "alpha"}).json
    }
    assert [len(by_number[n]["commits"]) for n in (3, 1, 5)] == [0, 1, 3]


# --- /builds/latest --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query, expected",
    [
        ("", build_body(5, "1.21", False, 3)),
        ("&experimental=true", build_body(8, "1.21.1-pre1", True, 1)),
        ("&channel=1.20", build_body(3, "1.20", False, 0)),
        ("&channel=1.20&experimental=true", build_body(3, "1.20", False, 0)),
        ("&channel=1.21&experimental=true", build_body(7, "1.21", True, 1)),
    ],
)
def test_latest_is_the_highest_number_passing_the_filters(client, query, expected):
    assert client.get(API + "/builds/latest?project=alpha" + query).json == expected


@pytest.mark.parametrize(
    "query, message",
    [
        (
            "&channel=1.21.1-pre1",
            "project 'alpha' has no stable build in channel '1.21.1-pre1' "
            "(add experimental=true to include experimental builds)",
        ),
        ("&channel=9.9&experimental=true", "project 'alpha' has no build in channel '9.9'"),
    ],
)
def test_latest_with_no_matching_build_is_404(client, query, message):
    resp = client.get(API + "/builds/latest?project=alpha" + query, status=404)
    assert assert_error(resp, 404, "no_matching_build") == message


def test_latest_of_a_project_with_no_builds_is_404(data_dir, client):
    write_file(data_dir / "empty.json", make_project([]))
    assert client.get(API + "/builds", {"project": "empty"}).json == []
    resp = client.get(API + "/builds/latest", {"project": "empty"}, status=404)
    assert_error(resp, 404, "no_matching_build")


# --- project parameter errors, on every endpoint that takes it ---------------------------------

PROJECT_ENDPOINTS = ["/builds", "/builds/all", "/builds/latest", "/jd"]


@pytest.mark.parametrize("endpoint", PROJECT_ENDPOINTS)
@pytest.mark.parametrize("query", ["", "?project=", "?channel=1.21", "?Project=alpha"])
def test_missing_or_empty_project_is_400(client, endpoint, query):
    resp = client.get(API + endpoint + query, status=400)
    assert assert_error(resp, 400, "missing_parameter") == (
        "the query parameter 'project' is required, e.g. ?project=... "
        "(see /api/v2/projects for the projects)"
    )


@pytest.mark.parametrize("endpoint", PROJECT_ENDPOINTS)
def test_unknown_project_is_404(client, endpoint):
    resp = client.get(API + endpoint, {"project": "nope"}, status=404)
    assert assert_error(resp, 404, "unknown_project") == (
        "no project 'nope': see /api/v2/projects for the projects served"
    )


@pytest.mark.parametrize("endpoint", PROJECT_ENDPOINTS)
@pytest.mark.parametrize("name", ["game_version", "version", "minecraft_version"])
def test_superseded_parameters_are_refused_naming_channel(client, endpoint, name):
    resp = client.get(f"{API}{endpoint}?project=alpha&{name}=1.21", status=400)
    assert assert_error(resp, 400, "superseded_parameter") == (
        f"parameter '{name}' was replaced: use 'channel' instead"
    )


@pytest.mark.parametrize("endpoint", PROJECT_ENDPOINTS)
@pytest.mark.parametrize(
    "query",
    [
        "project=alpha&project=beta",
        "project=alpha&project=alpha",
        "project=alpha&channel=1.20&channel=1.21",
        "project=alpha&experimental=true&experimental=false",
    ],
)
def test_repeated_parameters_are_refused(client, endpoint, query):
    resp = client.get(f"{API}{endpoint}?{query}", status=400)
    assert_error(resp, 400, "repeated_parameter")


def test_unknown_parameters_are_ignored(client):
    resp = client.get(API + "/builds?project=alpha&page=2&foo=bar&foo=baz")
    assert numbers(resp) == [1, 3, 5]


@pytest.mark.parametrize(
    "query",
    [
        "project=%FF",
        "project=alpha&channel=%C3%28",
        "project=alpha&x%FE=1",
        "project=alpha&channel=\xe9",
    ],
)
def test_a_query_that_is_not_utf8_is_400(client, query):
    resp = client.get(f"{API}/builds?{query}", status=400)
    assert assert_error(resp, 400, "invalid_query") == (
        "the query string is not valid UTF-8 once percent-decoded"
    )


@pytest.mark.parametrize(
    "query",
    [
        "project=alpha%00",
        "project=alpha&channel=1.21%0D%0AX:1",
        "project=alpha&channel=%0A",
        "project=alpha&x=%07",
    ],
)
def test_control_characters_are_400(client, query):
    resp = client.get(f"{API}/builds?{query}", status=400)
    assert_error(resp, 400, "invalid_query")


def test_a_flood_of_parameters_is_400(client):
    query = "&".join(f"p{i}=1" for i in range(60))
    resp = client.get(f"{API}/builds?project=alpha&{query}", status=400)
    assert_error(resp, 400, "invalid_query")


def test_utf8_parameter_values_are_decoded(client):
    resp = client.get(API + "/builds?project=alpha&channel=%C3%A9t%C3%A9", status=200)
    assert resp.json == []


# --- /jd -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query, location",
    [
        ("project=alpha", "https://jd.example.org/alpha/1.21-R0.1-SNAPSHOT"),
        ("project=alpha&experimental=false", "https://jd.example.org/alpha/1.21-R0.1-SNAPSHOT"),
        (
            "project=alpha&experimental=true",
            "https://jd.example.org/alpha/1.21.1-pre1-R0.1-SNAPSHOT",
        ),
        ("project=alpha&channel=1.20", "https://jd.example.org/alpha/1.20-R0.1-SNAPSHOT"),
        (
            "project=alpha&channel=1.21.1-pre1&experimental=TRUE",
            "https://jd.example.org/alpha/1.21.1-pre1-R0.1-SNAPSHOT",
        ),
        ("project=BETA", "https://jd.example.org/beta/2.0-R0.1-SNAPSHOT"),  # base without '/'
    ],
)
def test_jd_redirects_to_the_channel_javadoc(client, query, location):
    resp = client.get(f"{API}/jd?{query}", status=302)
    assert resp.location == location
    assert resp.body == b""


def test_jd_joins_with_exactly_one_slash(data_dir, client):
    write_file(
        data_dir / "gamma.json",
        make_project([make_build(1, "3.1")], javadocBaseUrl="https://jd.example.org/docs/gamma//"),
    )
    resp = client.get(API + "/jd", {"project": "gamma"}, status=302)
    assert resp.location == "https://jd.example.org/docs/gamma/3.1-R0.1-SNAPSHOT"


@pytest.mark.parametrize(
    "query, code",
    [
        ("channel=1.21.1-pre1", "no_matching_build"),  # only experimental builds in it
        ("channel=9.9&experimental=true", "no_matching_build"),
    ],
)
def test_jd_channel_must_have_a_build_passing_the_filter(client, query, code):
    resp = client.get(f"{API}/jd?project=alpha&{query}", status=404)
    assert_error(resp, 404, code)


@pytest.mark.parametrize(
    "channel",
    [
        "//evil.example",
        "https://evil.example/",
        "../../evil",
        "..",
        "1.21/../../x",
        "\\\\evil.example",
        "/\\evil.example",
        "%2F%2Fevil.example",
        "1.21%0D%0ALocation:x",
        "1.21\r\nSet-Cookie: a=b",
        "1.21?x=1",
        "1.21#x",
        "\uff0e\uff0e\uff0fevil",
        "@evil.example",
        "1.21\u2215..",
        " 1.21",
    ],
)
def test_jd_never_redirects_where_the_client_says(client, channel):
    resp = client.get(
        API + "/jd",
        {"project": "alpha", "channel": channel, "experimental": "true"},
        expect_errors=True,
    )
    assert resp.status_int in (400, 404)
    assert "Location" not in resp.headers
    assert resp.content_type == "application/json"


def without_javadoc(builds, **fields):
    """A project file with no javadocBaseUrl: a project that publishes no javadoc."""
    doc = make_project(builds, **fields)
    del doc["javadocBaseUrl"]
    return doc


def test_a_project_without_javadoc_serves_an_empty_base_and_no_redirect(data_dir, client):
    write_file(data_dir / "gamma.json", without_javadoc([make_build(1, "3.1")], ciJob="Gamma"))
    listed = client.get(API + "/projects").json["projects"]
    assert listed[-1] == {
        "slug": "gamma",
        "ciJob": "Gamma",
        "ciJobUrl": "https://ci.example.org/job/Alpha/",
        "javadocBaseUrl": "",  # as the upstream serves a project without javadoc
    }
    for query in ({}, {"channel": "3.1"}, {"redirect": "org/example/Foo.html"}):
        resp = client.get(API + "/jd", {"project": "gamma", **query}, status=404)
        message = assert_error(resp, 404, "no_javadoc")
        assert message == "project 'gamma' has no javadoc (its data file gives no javadocBaseUrl)"
        assert "Location" not in resp.headers
    # Unknown projects and bad queries are refused as before.
    assert_error(client.get(API + "/jd?project=nope", status=404), 404, "unknown_project")
    assert_error(client.get(API + "/jd", status=400), 400, "missing_parameter")


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["/api/v1", "/api/v1/", "/api/v1/builds", "/api/v1/jd?x=1", "/api/v1/projects/paper/versions"],
)
def test_v1_is_gone(client, path):
    resp = client.get(path, status=410)
    assert assert_error(resp, 410, "api_version_removed") == (
        "API v1 was removed on 2025-11-05: use /api/v2 (e.g. /api/v2/projects)"
    )


@pytest.mark.parametrize(
    "path",
    [
        "/projects",
        "/static/x.css",
        "/api",
        "/api/v2",
        "/api/v2/",
        "/api/v2/project",
        "/api/v2/projects/",
        "/api/v3/projects",
        "/favicon.ico",
        "/api/v2/builds/latest/x",
        "/api/v2/%FF",
    ],
)
def test_unknown_paths_are_404(client, path):
    resp = client.get(path, status=404)
    assert assert_error(resp, 404, "not_found") == "no such path: see /api/v2/projects"


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
@pytest.mark.parametrize(
    "path", ["/api/v2/projects", "/api/v2/builds?project=alpha", "/api/v2/jd?project=alpha"]
)
def test_other_methods_are_405_with_allow(client, method, path):
    resp = client.request(path, method=method, status=405)
    assert assert_error(resp, 405, "method_not_allowed") == (
        "this API only answers GET and HEAD (and OPTIONS for CORS)"
    )
    assert resp.headers["Allow"] == "GET, HEAD, OPTIONS"


@pytest.mark.parametrize(
    "path",
    [
        "/api/v2/projects",
        "/api/v2/builds?project=alpha",
        "/api/v2/builds/all?project=alpha",
        "/api/v2/builds/latest?project=alpha",
    ],
)
def test_head_answers_like_get_without_a_body(client, path):
    get = client.get(path)
    head = client.head(path)
    assert head.status_int == 200 and head.body == b""
    assert head.headers["Content-Type"] == "application/json"
    assert head.headers["Content-Length"] == str(len(get.body))


def test_head_on_jd_and_errors(client):
    assert client.head(API + "/jd?project=alpha", status=302).location == (
        "https://jd.example.org/alpha/1.21-R0.1-SNAPSHOT"
    )
    assert client.head(API + "/builds", status=400).body == b""
    assert client.head(API + "/builds?project=nope", status=404).body == b""


class BrokenStore:
    def snapshot(self):
        raise RuntimeError("secret detail")


def test_an_unexpected_exception_is_a_json_500_with_the_trace_in_the_log(caplog):
    client = webtest.TestApp(server.make_app(BrokenStore()))
    resp = client.get(API + "/projects", status=500, expect_errors=True)
    assert resp.json == {
        "error": "internal error: the cause is in the server's log",
        "code": "internal_error",
    }
    assert b"secret" not in resp.body and b"Traceback" not in resp.body
    assert "RuntimeError: secret detail" in caplog.text


# --- '+' in query values -----------------------------------------------------------------------


@pytest.fixture
def plus_client(data_dir, client):
    write_file(
        data_dir / "horizon.json",
        make_project(
            [make_build(70, "1.0.0"), make_build(71, "1.0.0+71")],
            javadocBaseUrl="https://jd.example.org/horizon/",
        ),
    )
    return client


@pytest.mark.parametrize("channel", ["1.0.0+71", "1.0.0%2B71", "1.0.0%2b71"])
def test_a_plus_sign_is_a_plus_sign_raw_or_encoded(plus_client, channel):
    assert numbers(plus_client.get(f"{API}/builds?project=horizon&channel={channel}")) == [71]
    assert (
        plus_client.get(f"{API}/builds/latest?project=horizon&channel={channel}").json[
            "buildNumber"
        ]
        == 71
    )
    resp = plus_client.get(f"{API}/jd?project=horizon&channel={channel}", status=302)
    assert resp.location == "https://jd.example.org/horizon/1.0.0+71-R0.1-SNAPSHOT"


def test_a_space_is_percent_20_never_plus(plus_client):
    # No channel holds a space (the data format allows none): nothing matches.
    assert numbers(plus_client.get(f"{API}/builds?project=horizon&channel=1.0.0%2071")) == []


def test_a_plus_in_a_project_name_is_not_a_space(plus_client):
    resp = plus_client.get(f"{API}/builds?project=+horizon", status=404)
    assert assert_error(resp, 404, "unknown_project") == (
        "no project '+horizon': see /api/v2/projects for the projects served"
    )


# --- /jd deep links ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "redirect, location",
    [
        (
            "org/example/Foo.html",
            "https://jd.example.org/alpha/1.21-R0.1-SNAPSHOT/org/example/Foo.html",
        ),
        (
            "org%2Fexample%2FFoo.html",
            "https://jd.example.org/alpha/1.21-R0.1-SNAPSHOT/org/example/Foo.html",
        ),
        (
            "io/canvasmc/canvas/ClientV2.Build.html",
            "https://jd.example.org/alpha/1.21-R0.1-SNAPSHOT/io/canvasmc/canvas/ClientV2.Build.html",
        ),
        (
            "a/Outer$Inner.html",
            "https://jd.example.org/alpha/1.21-R0.1-SNAPSHOT/a/Outer$Inner.html",
        ),
        ("index.html", "https://jd.example.org/alpha/1.21-R0.1-SNAPSHOT/index.html"),
        (
            "org/Foo.html%23bar(java.lang.String,int)",
            "https://jd.example.org/alpha/1.21-R0.1-SNAPSHOT/org/Foo.html#bar(java.lang.String,int)",
        ),
        (
            "org/Foo.html%23%3Cinit%3E(int%5B%5D)",
            "https://jd.example.org/alpha/1.21-R0.1-SNAPSHOT/org/Foo.html#%3Cinit%3E(int%5B%5D)",
        ),
        (
            "org/Foo.html%23field-summary",
            "https://jd.example.org/alpha/1.21-R0.1-SNAPSHOT/org/Foo.html#field-summary",
        ),
        ("...html", "https://jd.example.org/alpha/1.21-R0.1-SNAPSHOT/...html"),
        ("", "https://jd.example.org/alpha/1.21-R0.1-SNAPSHOT"),  # empty: the root, as without
    ],
)
def test_jd_redirect_opens_a_page_under_the_channel_root(client, redirect, location):
    resp = client.get(f"{API}/jd?project=alpha&redirect={redirect}", status=302)
    assert resp.location == location
    assert resp.body == b""
    assert resp.headers["Cache-Control"] == "public, max-age=10"


def test_jd_redirect_follows_channel_and_experimental(client):
    resp = client.get(f"{API}/jd?project=alpha&channel=1.20&redirect=a/B.html", status=302)
    assert resp.location == "https://jd.example.org/alpha/1.20-R0.1-SNAPSHOT/a/B.html"
    resp = client.get(f"{API}/jd?project=beta&redirect=a/B.html&experimental=true", status=302)
    assert resp.location == "https://jd.example.org/beta/2.0-R0.1-SNAPSHOT/a/B.html"


def test_jd_redirect_goes_under_the_page_prefix(data_dir, client):
    write_file(
        data_dir / "canvas.json",
        make_project(
            [make_build(9, "1.21.4")],
            javadocBaseUrl="https://maven.example.org/javadoc/snapshots/io/canvasmc/canvas-api/",
            javadocPagePrefix=".cache/unpack",
        ),
    )
    resp = client.get(f"{API}/jd?project=canvas&redirect=io/canvasmc/A.html", status=302)
    assert resp.location == (
        "https://maven.example.org/javadoc/snapshots/io/canvasmc/"
        "canvas-api/1.21.4-R0.1-SNAPSHOT/.cache/unpack/io/canvasmc/A.html"
    )
    # Without a page, the root as before: the prefix is for pages only.
    assert client.get(f"{API}/jd?project=canvas", status=302).location == (
        "https://maven.example.org/javadoc/snapshots/io/canvasmc/canvas-api/1.21.4-R0.1-SNAPSHOT"
    )


REDIRECT_PROBLEMS = {
    "..": "has a '.' or '..' segment",
    "empty": "has an empty segment (a leading, trailing or doubled '/')",
    "scheme": "holds ':' (a scheme?): give a path relative to the javadoc root",
    "backslash": "holds a backslash: separate segments with '/'",
    "twice": "is percent-encoded twice: encode it once",
    "chars": "may hold only letters, digits, '.', '_', '$', '-' and '/'",
    "fragment": "has a #fragment holding a character other than letters, digits and URL "
    "punctuation",
    "long": "is longer than 512 characters",
    "no fragment": "has an empty #fragment: leave out the '#'",
}


@pytest.mark.parametrize(
    "redirect, problem",
    [
        ("..", ".."),
        ("../../evil.html", ".."),
        ("a/../../b.html", ".."),
        ("./a.html", ".."),
        ("%2E%2E/x.html", ".."),
        ("a/..", ".."),
        ("/evil.example/x.html", "empty"),
        ("//evil.example/x.html", "empty"),
        ("%2F%2Fevil.example", "empty"),
        ("a//b.html", "empty"),
        ("a/", "empty"),
        ("%23top", "empty"),
        ("https://evil.example/", "scheme"),
        ("javascript:alert(1)", "scheme"),
        ("https:%2F%2Fevil.example", "scheme"),
        ("a/b:c.html", "scheme"),
        ("%5C%5Cevil.example", "backslash"),
        ("a%5Cb.html", "backslash"),
        ("/%5Cevil", "backslash"),
        ("%252e%252e/x.html", "twice"),
        ("%252F%252Fevil.example", "twice"),
        ("a%2525.html", "twice"),
        ("a.html%23x%2541", "twice"),
        ("a.html?x=1", "chars"),
        ("a%3Fx=1.html", "chars"),
        ("@evil.example", "chars"),
        ("a%20b.html", "chars"),
        ("%C3%A9.html", "chars"),
        ("%EF%BC%8E%EF%BC%8E%EF%BC%8Fx", "chars"),
        ("a.html%23%22onload", "fragment"),
        ("a.html%23x%20y", "fragment"),
        ("a.html%23%7B%7D", "fragment"),
        ("a.html%23%C3%A9", "fragment"),
        ("a" * 508 + ".html", "long"),
        ("a.html%23", "no fragment"),
    ],
)
def test_jd_refuses_a_redirect_that_is_not_a_page_path(client, redirect, problem):
    resp = client.get(f"{API}/jd?project=alpha&redirect={redirect}", status=400)
    assert assert_error(resp, 400, "invalid_redirect") == (
        f"parameter 'redirect' {REDIRECT_PROBLEMS[problem]}: give a page path relative to the "
        "javadoc root, e.g. org/example/Foo.html or org/example/Foo.html#bar()"
    )
    assert "Location" not in resp.headers
    assert resp.headers["Cache-Control"] == "no-store"


def test_jd_redirect_of_exactly_512_characters_is_fine(client):
    page = "a" * 507 + ".html"
    resp = client.get(f"{API}/jd?project=alpha&redirect={page}", status=302)
    assert resp.location.endswith("-R0.1-SNAPSHOT/" + page)


@pytest.mark.parametrize("redirect", ["%0D%0ALocation:%20x", "a%00.html", "a.html%23%0A"])
def test_jd_redirect_with_a_control_character_is_refused(client, redirect):
    resp = client.get(f"{API}/jd?project=alpha&redirect={redirect}", status=400)
    assert_error(resp, 400, "invalid_query")
    assert "Location" not in resp.headers


def test_jd_redirect_given_twice_is_refused(client):
    resp = client.get(f"{API}/jd?project=alpha&redirect=a.html&redirect=b.html", status=400)
    assert assert_error(resp, 400, "repeated_parameter") == (
        "parameter 'redirect' is given more than once: give it once"
    )


def test_a_bad_redirect_is_reported_before_an_unknown_project(client):
    resp = client.get(f"{API}/jd?project=nope&redirect=../x", status=400)
    assert_error(resp, 400, "invalid_redirect")


def test_redirect_is_ignored_by_the_builds_endpoints(client):
    assert numbers(client.get(f"{API}/builds?project=alpha&redirect=../x&redirect=y")) == [1, 3, 5]


# --- the Host header never reaches a Location ----------------------------------------------------


@pytest.mark.parametrize("host", ["[", "evil.example", "a b", "[::1", ""])
@pytest.mark.parametrize(
    "target, location",
    [
        ("/api/v2/jd?project=alpha", "https://jd.example.org/alpha/1.21-R0.1-SNAPSHOT"),
        (
            "/downloads/latest?project=alpha",
            "https://ci.example.org/job/Alpha/5/artifact/alpha-5.jar",
        ),
    ],
)
def test_redirects_are_absolute_from_the_data_whatever_the_host(client, host, target, location):
    resp = client.get(target, extra_environ={"HTTP_HOST": host}, status=302)
    assert resp.headers["Location"] == location


# --- /downloads/latest ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query, number",
    [
        ("project=alpha", 5),
        ("project=ALPHA&experimental=true", 8),
        ("project=alpha&channel=1.20", 3),
        ("project=alpha&channel=1.21&experimental=TRUE", 7),
        ("project=beta", 10),
    ],
)
def test_downloads_latest_redirects_to_the_latest_builds_artifact(client, query, number):
    resp = client.get(f"/downloads/latest?{query}", status=302)
    latest = client.get(f"{API}/builds/latest?{query}").json
    assert latest["buildNumber"] == number
    assert resp.location == latest["downloadUrl"]
    assert resp.body == b""
    assert resp.headers["Cache-Control"] == "public, max-age=10"
    head = client.head(f"/downloads/latest?{query}", status=302)
    assert head.location == latest["downloadUrl"] and head.body == b""


def test_downloads_latest_cache_is_never_longer_than_max_age(store):
    client = webtest.TestApp(server.make_app(store, max_age=3))
    resp = client.get("/downloads/latest?project=alpha", status=302)
    assert resp.headers["Cache-Control"] == "public, max-age=3"


@pytest.mark.parametrize(
    "query, status, code",
    [
        ("", 400, "missing_parameter"),
        ("?channel=1.21", 400, "missing_parameter"),
        ("?project=alpha&version=1.21", 400, "superseded_parameter"),
        ("?project=alpha&channel=1.20&channel=1.21", 400, "repeated_parameter"),
        ("?project=alpha%00", 400, "invalid_query"),
        ("?project=nope", 404, "unknown_project"),
        ("?project=alpha&channel=1.21.1-pre1", 404, "no_matching_build"),
    ],
)
def test_downloads_latest_errors_are_those_of_builds_latest(client, query, status, code):
    resp = client.get(f"/downloads/latest{query}", status=status)
    latest = client.get(f"{API}/builds/latest{query}", status=status)
    assert assert_error(resp, status, code) == latest.json["error"]
    assert "Location" not in resp.headers


def test_downloads_latest_follows_a_new_build(data_dir, client):
    assert client.get("/downloads/latest?project=beta", status=302).location.endswith(
        "/10/artifact/alpha-10.jar"
    )
    write_file(data_dir / "beta.json", make_project([make_build(10, "2.0"), make_build(11, "2.0")]))
    assert client.get("/downloads/latest?project=beta", status=302).location.endswith(
        "/11/artifact/alpha-11.jar"
    )


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
def test_downloads_latest_answers_only_get_and_head(client, method):
    resp = client.request("/downloads/latest?project=alpha", method=method, status=405)
    assert_error(resp, 405, "method_not_allowed")


@pytest.mark.parametrize(
    "path",
    [
        "/api/v2/projects",
        "/api/v2/builds?project=alpha",
        "/api/v2/builds/latest?project=alpha",
        "/api/v2/openapi.json",
        "/api/v2/jd?project=alpha&redirect=a/B.html",
        "/healthz",
        "/nope",
        "/api/v1/x",
        "/downloads/latest?project=nope",
    ],
)
@pytest.mark.parametrize("method", ["GET", "HEAD", "OPTIONS", "POST"])
def test_a_host_header_that_does_not_parse_is_no_500(store, path, method):
    client = webtest.TestApp(server.make_app(store), extra_environ={"HTTP_HOST": "["})
    assert client.request(path, method=method, expect_errors=True).status_int < 500


# --- /builds/check: every status (issue 25) ------------------------------------------------

SHA_A, SHA_B = "a" * 64, "b" * 64


def write_checked(data_dir):
    """Builds 10..14 of channel 1.21 (13 experimental): 10 and 11 share a file, 12 is
    yanked with the same file as 14."""
    builds = [
        make_build(10, "1.21", sha256=SHA_A, size=1),
        make_build(11, "1.21", sha256=SHA_A, size=1),
        make_build(12, "1.21", sha256=SHA_B, size=2, yankedAt=1700000500000, yankReason="bad"),
        make_build(13, "1.21", experimental=True),
        make_build(14, "1.21", sha256=SHA_B, size=2),
        make_build(15, "1.21", sha256="c" * 64, size=3, yankedAt=1700000500000),
    ]
    write_file(data_dir / "alpha.json", make_project(builds))


def check(client, query, status=200):
    return client.get(f"{API}/builds/check?project=alpha&{query}", status=status).json


@pytest.mark.parametrize(
    ("query", "status", "behind"),
    [
        ("build=14", "up_to_date", 0),
        ("build=11", "outdated", 1),  # 12 is yanked, 13 experimental: 14 counts
        ("build=10", "outdated", 1),  # the same bytes as 11: counted from 11
        (f"sha256={SHA_A}", "outdated", 1),
        ("build=10&experimental=true", "outdated", 2),
        ("build=12", "yanked", 0),  # the same bytes as 14, served
        (f"sha256={SHA_B}", "up_to_date", 0),  # 14 has them: served
        ("build=15", "yanked", 0),
        ("sha256=" + "c" * 64, "yanked", 0),
        ("build=16", "ahead", 0),
        ("build=99", "ahead", 0),
    ],
)
def test_check_answers_every_status(client, data_dir, query, status, behind):
    write_checked(data_dir)
    got = check(client, query)
    assert (got["status"], got["behind"], got["latest"]["buildNumber"]) == (status, behind, 14)


@pytest.mark.parametrize(
    ("query", "reason"),
    [("build=12", "bad"), ("build=15", ""), ("sha256=" + "c" * 64, "")],
)
def test_check_of_a_yanked_build_says_why(client, data_dir, query, reason):
    """The reason of the yank goes with `yanked` (issue 38); a build served has none."""
    write_checked(data_dir)
    got = check(client, query)
    assert (got["status"], got["reason"]) == ("yanked", reason)
    assert list(got) == ["status", "reason", "behind", "latest"]
    assert "reason" not in check(client, "build=14") and "reason" not in check(client, "build=99")


def test_check_by_a_hash_several_yanked_builds_share_gives_the_newest_s_reason(client, data_dir):
    builds = [
        make_build(n, sha256="d" * 64, size=1, yankedAt=1700000500000, yankReason=why)
        for n, why in ((20, "old"), (22, "newest"), (21, "middle"))
    ] + [make_build(23)]
    write_file(data_dir / "alpha.json", make_project(builds))
    got = check(client, "sha256=" + "d" * 64)
    assert (got["status"], got["reason"]) == ("yanked", "newest")


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("build=9", "unknown_build"),
        ("build=0", "unknown_build"),
        ("sha256=" + "d" * 64, "unknown_artifact"),
    ],  # fmt: skip
)
def test_check_of_a_build_never_there_is_404_unknown(client, data_dir, query, code):
    write_checked(data_dir)
    got = check(client, query, 404)
    assert set(got) == {"error", "code", "status", "latest"}
    assert (got["code"], got["status"], got["latest"]["buildNumber"]) == (code, "unknown", 14)
