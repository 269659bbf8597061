"""The OpenAPI document: valid in itself, and true of what every endpoint really answers."""

import json
import re
import time
from datetime import datetime
from typing import NamedTuple
from urllib.parse import parse_qsl, quote, urlsplit

import jsonschema
import pytest
import referencing.exceptions
import referencing.jsonschema
import webtest

from buildshelf import server
from buildshelf import store as store_module
from buildshelf.counts import Tally
from buildshelf.publishing import expiry, tokens
from buildshelf.web import answers, openapi, pages, reads, service
from buildshelf.writing import rewrite
from helpers import (
    ALPHA_TOKEN,
    FakeCounter,
    FakeCredentials,
    make_build,
    make_project,
    write_file,
)

DOCUMENT = openapi.document()  # the spec's shapes
# The document is registered under a URI of its own so that "#/components/..." in any of its
# schemas resolves against the whole document wherever validation starts.
DOCUMENT_URI = "urn:buildshelf:openapi"
REGISTRY = referencing.Registry().with_resource(
    DOCUMENT_URI, referencing.jsonschema.DRAFT202012.create_resource(DOCUMENT)
)
RESOLVER = REGISTRY.resolver(base_uri=DOCUMENT_URI)
SCHEMAS = DOCUMENT["components"]["schemas"]
ERROR_CODES = SCHEMAS["Error"]["properties"]["code"]["enum"]
FILL_ERROR_CODES = SCHEMAS["FillError"]["properties"]["error"]["enum"]

# jsonschema checks "uri" and "date-time" only with optional packages this project does not
# install; without a checker, `format` would be ignored.
FORMATS = jsonschema.FormatChecker()
URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]*\Z")


@FORMATS.checks("uri")
def is_uri(value):
    """RFC 3986: a scheme, then only the characters a URI may hold."""
    return not isinstance(value, str) or URI.match(value) is not None


@FORMATS.checks("date-time", raises=ValueError)
def is_date_time(value):
    """RFC 3339: a date, a time and an offset."""
    if not isinstance(value, str):
        return True
    return "T" in value and datetime.fromisoformat(value).tzinfo is not None


def escaped(token):
    """A JSON pointer reference token (RFC 6901)."""
    return str(token).replace("~", "~0").replace("/", "~1")


def lookup(where):
    """The part of DOCUMENT at the JSON pointer `where` ("#/...")."""
    return RESOLVER.lookup(where).contents


def followed(where):
    """The object at `where` once every `$ref` is followed, and the pointer it is at."""
    node = lookup(where)
    while "$ref" in node:
        where = node["$ref"]
        node = lookup(where)
    return node, where


def validate(instance, where):
    """Validate `instance` against the schema at the pointer `where` in DOCUMENT."""
    validator = jsonschema.Draft202012Validator(
        {"$ref": DOCUMENT_URI + where}, registry=REGISTRY, format_checker=FORMATS
    )
    validator.validate(instance)


def walk(node, where="#"):
    """Every (pointer, key, value) in `node`, depth first."""
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in items:
        yield where, key, value
        if isinstance(value, (dict, list)):
            yield from walk(value, f"{where}/{escaped(key)}")


def schema_pointers():
    """Where every schema of DOCUMENT starts: components/schemas and each `schema` field."""
    pointers = [f"#/components/schemas/{name}" for name in DOCUMENT["components"]["schemas"]]
    pointers += [
        f"{where}/schema"
        for where, key, _ in walk(DOCUMENT)
        if key == "schema" and not where.startswith("#/components/schemas/")
    ]
    return pointers


HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


def operations():
    """(path template, method, operation) of every operation."""
    return [
        (path, method, operation)
        for path, item in DOCUMENT["paths"].items()
        for method, operation in item.items()
        if method in HTTP_METHODS
    ]


# --- the document itself -----------------------------------------------------------------------


def test_the_document_is_openapi_3_1_json():
    assert DOCUMENT["openapi"].startswith("3.1")
    assert DOCUMENT["info"]["title"] == "Buildshelf" and DOCUMENT["info"]["version"] == "2"
    assert DOCUMENT["info"]["description"].strip()
    # Lists, not tuples; str keys; no NaN: what json.dumps writes reads back the same.
    assert json.loads(json.dumps(DOCUMENT, allow_nan=False)) == DOCUMENT


def test_every_ref_is_local_and_resolves():
    refs = [(where, value) for where, key, value in walk(DOCUMENT) if key == "$ref"]
    assert len(refs) > 50
    for where, ref in refs:
        assert ref.startswith("#/components/"), f"{where}: {ref}"
        try:
            lookup(ref)
        except referencing.exceptions.Unresolvable:
            pytest.fail(f"{where}: {ref} does not resolve")


def test_every_schema_is_used():
    """No schema of what is never served (a data file's `versions` block) is described."""
    used = {
        value.split("/")[3]
        for _, key, value in walk(DOCUMENT)
        if key == "$ref" and value.startswith("#/components/schemas/")
    }
    assert set(DOCUMENT["components"]["schemas"]) <= used


@pytest.mark.parametrize("where", schema_pointers())
def test_every_schema_is_valid_json_schema_2020_12(where):
    jsonschema.Draft202012Validator.check_schema(lookup(where))


@pytest.mark.parametrize(
    "name, example",
    [
        (name, example)
        for name, schema in DOCUMENT["components"]["schemas"].items()
        for example in schema.get("examples", [])
    ],
)
def test_schema_examples_are_valid(name, example):
    validate(example, f"#/components/schemas/{name}")


@pytest.mark.parametrize(
    "name",
    ["Project", "ProjectList", "Commit", "Build", "Error", "RejectedFile", "Health", "Downloads",
     "ProjectDownloads", "DownloadStats", "DayDownloads", "VersionDownloads", "BuildDownloads",
     "FillProjects", "FillProjectResponse", "FillProject", "FillVersions", "FillVersionResponse",
     "FillVersion", "FillSupport", "FillJava", "FillJavaVersion", "FillJavaFlags", "FillBuild",
     "FillCommit", "FillDownload", "FillChecksums", "FillError"],
)  # fmt: skip
def test_object_schemas_are_strict(name):
    schema = DOCUMENT["components"]["schemas"][name]
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    # Integrity data is on the builds that have it, both fields or neither, and their files
    # by key on those with extra files; a problem of a part of the service is in the health
    # report while it lasts.
    optional = {
        "Build": {"sha256", "size", "downloads"},
        "Health": {"downloadCounting", "webhooks", "tokens"},
        "FillSupport": {"end"},  # as Fill, absent when there is none
    }.get(name, set())
    assert schema["required"] == [key for key in schema["properties"] if key not in optional]
    if name == "Build":
        assert schema["dependentRequired"] == {"sha256": ["size"], "size": ["sha256"]}
    else:
        assert "dependentRequired" not in schema


@pytest.mark.parametrize(
    "build, problem",
    [
        ({"commit": {"message": "old", "hash": "abc"}}, "('commit' was unexpected)"),
        ({"buildNumber": -1}, "less than the minimum"),
        ({"buildNumber": True}, "is not of type 'integer'"),
        ({"timestamp": 1.5}, "is not of type 'integer'"),
        ({"isExperimental": "false"}, "is not of type 'boolean'"),
        ({"channelVersion": "1.21/x"}, "does not match"),
        ({"url": "ftp://ci.example.org/1/"}, "does not match"),
        ({"downloadUrl": "https://ci.example.org/<a>"}, "is not a 'uri'"),
        ({"commits": [{"message": "m", "hash": "xyz"}]}, "does not match"),
    ],
)
def test_the_build_schema_refuses_what_is_never_served(build, problem):
    valid = DOCUMENT["components"]["schemas"]["Build"]["examples"][0]
    validate(valid, "#/components/schemas/Build")
    with pytest.raises(jsonschema.ValidationError) as refused:
        validate({**valid, **build}, "#/components/schemas/Build")
    assert problem in refused.value.message


def test_operations_are_named_once_and_described():
    ids = [operation["operationId"] for _, _, operation in operations()]
    assert (
        len(ids)
        == len(set(ids))
        == sum(len(item.keys() & HTTP_METHODS) for item in DOCUMENT["paths"].values())
    )
    for path, method, operation in operations():
        assert operation["summary"] and operation["responses"], (path, method)
        for status in operation["responses"]:
            response, _ = followed(f"#/paths/{escaped(path)}/{method}/responses/{status}")
            assert response["description"], (path, method, status)


@pytest.mark.parametrize("path, method", [(path, method) for path, method, _ in operations()])
def test_path_parameters_match_the_template(path, method):
    parameters = [
        followed(f"#/paths/{escaped(path)}/{method}/parameters/{i}")[0]
        for i in range(len(DOCUMENT["paths"][path][method].get("parameters", [])))
    ]
    assert {p["name"] for p in parameters if p["in"] == "path"} == set(
        re.findall(r"\{(\w+)\}", path)
    )
    assert all(p["required"] for p in parameters if p["in"] == "path")
    assert all(p["in"] in ("query", "header", "path") and "schema" in p for p in parameters)


def test_every_route_of_the_app_is_documented_and_nothing_else(app):
    v1_rule = "/api/v1<rest:re:(/.*)?>"
    documented = set()
    for route in app.router.routes:
        if route.rule in (
            "/",
            "/api-document",
            "/projects/<slug>",
            "/projects/<slug>/",
            "/static/<name>",
        ):
            continue  # HTML for people, not the API (docs/pages.md)
        template = re.sub(r"<(\w+)>", r"{\1}", route.rule)  # bottle's wildcards, OpenAPI's
        documented |= {"/api/v1", "/api/v1/{rest}"} if route.rule == v1_rule else {template}
    assert set(DOCUMENT["paths"]) == documented


def test_the_document_is_served_exactly(client):
    resp = client.get("/api/v2/openapi.json")
    assert resp.content_type == "application/json"
    assert resp.json == DOCUMENT
    assert json.loads(resp.body) == json.loads(json.dumps(DOCUMENT))


# --- real responses against the document -------------------------------------------------------


class Case(NamedTuple):
    """One request, what it must be answered with, and by which server."""

    method: str
    target: str
    status: int
    code: str = None  # the error code the body must hold
    headers: tuple = ()  # request headers, as (name, value) pairs
    server: str = "sample"  # see answering()
    body: bytes = b""


KEPT_BYTES = b"a kept file's bytes\n"
KEPT_SHA = "2a52a118133c66a9de49c5aeb693d723b3b495e181f97df57a6747d3a4d8fdee"
KEPT_URL = f"/downloads/alpha/3/{KEPT_SHA}/alpha-3.jar"
ALPHA_1_URL = "https://ci.example.org/job/Alpha/1/artifact/alpha-1.jar"
MISSING_URL = f"/downloads/alpha/4/{'1' * 64}/alpha-4.jar"
YANKED_URL = f"/downloads/alpha/5/{'5' * 64}/alpha-5.jar"
MANY_PARAMETERS = "&".join(f"p{i}=1" for i in range(60))
ANY_ETAG = (("If-None-Match", "*"),)
LONG_AGO = (("If-Modified-Since", "Fri, 01 Jan 2100 00:00:00 GMT"),)
WRITE = "/api/v2/projects/alpha/builds/9"
BOUNDARY = "b0undary"
AUTHORIZED = (("Authorization", f"Bearer {ALPHA_TOKEN}"),)
UNYANK, PURGE = "/api/v2/projects/alpha/builds/1/unyank", "/api/v2/projects/alpha/builds/1/purge"
AS_FORM = AUTHORIZED + (("Content-Type", f"multipart/form-data; boundary={BOUNDARY}"),)
AS_JSON = AUTHORIZED + (("Content-Type", "application/json"),)


def form_body(build, file=b"a jar", name="alpha-9.jar"):
    """A multipart/form-data body: the part 'build', then the part 'file'."""
    parts = [("build", json.dumps(build).encode(), ""), ("file", file, f'; filename="{name}"')]
    return (
        b"".join(
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{part}"{more}\r\n\r\n'.encode()
            + value
            + b"\r\n"
            for part, value, more in parts
        )
        + f"--{BOUNDARY}--\r\n".encode()
    )


KEPT_BUILD = form_body({"channelVersion": "1.21", "timestamp": 1700000009000})
ELSEWHERE = json.dumps({"channelVersion": "1.21", "downloadUrl": "https://x.example/a.jar"})

CASES = [
    # successes
    Case("GET", "/api/v2/projects", 200),
    Case("GET", "/api/v2/projects", 200, server="aged"),  # with Last-Modified
    Case("GET", "/api/v2/builds?project=alpha", 200),
    Case("GET", "/api/v2/builds?project=ALPHA&channel=1.21&experimental=true", 200),
    Case("GET", "/api/v2/builds?project=alpha&channel=9.9", 200),
    Case("GET", "/api/v2/builds?project=alpha&channel=&experimental=yes", 200),
    Case("GET", "/api/v2/builds/all?project=alpha&experimental=TRUE", 200),
    Case(
        "GET",
        "/api/v2/builds/all?project=big",
        200,
        headers=(("Accept-Encoding", "gzip"),),
        server="large",
    ),
    Case("GET", "/api/v2/builds/latest?project=alpha", 200),
    Case("GET", "/api/v2/builds/latest?project=alpha&experimental=true", 200, server="aged"),
    Case("GET", "/api/v2/builds/latest?project=beta&channel=2.0", 200),
    Case("GET", "/api/v2/jd?project=alpha", 302),
    Case("GET", "/api/v2/jd?project=beta&channel=2.0&experimental=true", 302),
    Case("GET", "/api/v2/jd?project=alpha&redirect=org/example/Foo.Bar.html%23baz(int%5B%5D)", 302),
    Case("GET", "/downloads/latest?project=alpha", 302),
    Case("GET", "/downloads/latest?project=alpha&channel=1.21.1-pre1&experimental=true", 302),
    Case("HEAD", "/downloads/latest?project=alpha", 302),
    Case("GET", "/api/v2/download?url=" + quote(ALPHA_1_URL, safe=""), 302),
    Case("GET", "/api/v2/download?url=http://127.0.0.1:8080" + quote(KEPT_URL), 302, server="kept"),
    Case("GET", "/api/v2/download", 400, "missing_parameter"),
    Case("GET", "/api/v2/download?url=" + quote(ALPHA_1_URL, safe=""), 500, "internal_error",
         server="failing"),
    Case("GET", "/api/v2/download?url=https://evil.example/x.jar", 400, "invalid_download_url"),
    Case("GET", "/api/v2/openapi.json", 200),
    Case("GET", "/api/v2/feed?project=alpha&channel=1.21&experimental=true", 200),
    Case("GET", "/api/v2/feed?project=alpha&channel=9.9", 200),
    Case("GET", "/healthz", 200),
    Case("GET", "/healthz", 200, server="with_a_broken_file"),
    Case("GET", "/healthz", 503, server="no_data"),
    Case("GET", "/metrics", 200),
    Case("GET", "/metrics", 200, headers=(("Accept", "application/openmetrics-text"),)),
    Case("HEAD", "/metrics", 200),
    Case("HEAD", "/api/v2/builds?project=alpha", 200),
    Case("HEAD", "/api/v2/jd?project=alpha", 302),
    # 304
    Case("GET", "/api/v2/projects", 304, headers=ANY_ETAG),
    Case("GET", "/api/v2/builds?project=alpha", 304, headers=ANY_ETAG),
    Case(
        "GET",
        "/api/v2/builds/all?project=big",
        304,
        headers=ANY_ETAG + (("Accept-Encoding", "gzip"),),
        server="large",
    ),
    Case("GET", "/api/v2/builds/latest?project=alpha", 304, headers=ANY_ETAG),
    Case("GET", "/api/v2/openapi.json", 304, headers=ANY_ETAG),
    Case("GET", "/api/v2/feed?project=beta", 304, headers=ANY_ETAG),
    Case("GET", "/api/v2/builds/latest?project=alpha", 304, headers=LONG_AGO, server="aged"),
    # 400
    Case("GET", "/api/v2/builds", 400, "missing_parameter"),
    Case("GET", "/api/v2/builds/all?project=", 400, "missing_parameter"),
    Case("GET", "/api/v2/jd?channel=1.21", 400, "missing_parameter"),
    Case("GET", "/api/v2/feed?channel=1.21", 400, "missing_parameter"),
    Case(
        "GET", "/api/v2/builds/latest?project=alpha&game_version=1.21", 400, "superseded_parameter"
    ),
    Case("GET", "/api/v2/jd?project=alpha&version=1.21", 400, "superseded_parameter"),
    Case("GET", "/api/v2/builds?project=alpha&minecraft_version=1.21", 400, "superseded_parameter"),
    Case("GET", "/api/v2/builds?project=alpha&project=beta", 400, "repeated_parameter"),
    Case(
        "GET",
        "/api/v2/jd?project=alpha&experimental=true&experimental=false",
        400,
        "repeated_parameter",
    ),
    Case(
        "GET", "/api/v2/jd?project=alpha&redirect=a.html&redirect=b.html", 400, "repeated_parameter"
    ),
    Case("GET", "/api/v2/jd?project=alpha&redirect=..%2F..%2Fevil.html", 400, "invalid_redirect"),
    Case("GET", "/api/v2/jd?project=alpha&redirect=%252Fevil.html", 400, "invalid_redirect"),
    Case("GET", "/downloads/latest", 400, "missing_parameter"),
    Case("GET", "/downloads/latest?project=alpha&version=1.21", 400, "superseded_parameter"),
    Case("GET", "/downloads/latest?project=alpha&project=beta", 400, "repeated_parameter"),
    Case("GET", "/downloads/latest?project=alpha%00", 400, "invalid_query"),
    Case("GET", "/api/v2/builds/all?project=alpha&channel=%FF", 400, "invalid_query"),
    Case("GET", "/api/v2/builds/latest?project=alpha%00", 400, "invalid_query"),
    Case("GET", "/api/v2/jd?project=alpha&channel=1.21%E2%80%8B", 400, "invalid_query"),
    Case("GET", f"/api/v2/builds?project=alpha&{MANY_PARAMETERS}", 400, "invalid_query"),
    Case("GET", "/api/v2/projects?x=%FF", 400, "invalid_query"),
    Case("GET", "/api/v2/openapi.json?x=%00", 400, "invalid_query"),
    Case("GET", "/healthz?x=%0A", 400, "invalid_query"),
    Case("GET", "/metrics?x=%0A", 400, "invalid_query"),
    # 404
    Case("GET", "/api/v2/builds?project=nope", 404, "unknown_project"),
    Case("GET", "/api/v2/builds/all?project=nope", 404, "unknown_project"),
    Case("GET", "/api/v2/builds/latest?project=nope", 404, "unknown_project"),
    Case("GET", "/api/v2/jd?project=nope", 404, "unknown_project"),
    Case("GET", "/api/v2/jd?project=gamma", 404, "no_javadoc", server="no_javadoc"),
    Case("GET", "/api/v2/projects", 200, server="no_javadoc"),  # its javadocBaseUrl is ""
    Case("GET", "/api/v2/feed?project=nope", 404, "unknown_project"),
    Case(
        "GET", "/api/v2/builds/latest?project=alpha&channel=1.21.1-pre1", 404, "no_matching_build"
    ),
    Case("GET", "/api/v2/jd?project=alpha&channel=9.9&experimental=true", 404, "no_matching_build"),
    Case("GET", "/downloads/latest?project=nope", 404, "unknown_project"),
    Case("GET", "/downloads/latest?project=alpha&channel=1.21.1-pre1", 404, "no_matching_build"),
    Case("GET", "/downloads/latest?project=alpha&download=dev:bundle", 404, "unknown_download"),
    Case("GET", "/downloads", 404, "not_found"),
    Case("GET", "/nope", 404, "not_found"),
    Case("GET", "/api/v2", 404, "not_found"),
    Case("GET", "/api/v2/projects/", 404, "not_found"),
    Case("GET", "/api/v3/projects", 404, "not_found"),
    # 405
    Case("POST", "/api/v2/projects", 405, "method_not_allowed"),
    Case("DELETE", "/api/v2/builds?project=alpha", 405, "method_not_allowed"),
    Case("PUT", "/api/v2/jd?project=alpha", 405, "method_not_allowed"),
    Case("POST", "/downloads/latest?project=alpha", 405, "method_not_allowed"),
    Case("PATCH", "/api/v2/openapi.json", 405, "method_not_allowed"),
    Case("POST", "/healthz", 405, "method_not_allowed"),
    # 410
    Case("GET", "/api/v1", 410, "api_version_removed"),
    Case("GET", "/api/v1/projects", 410, "api_version_removed"),
    Case("GET", "/api/v1/builds?project=alpha", 410, "api_version_removed"),
    # 500
    Case("GET", "/api/v2/projects", 500, "internal_error", server="failing"),
    Case("GET", "/api/v2/builds?project=alpha", 500, "internal_error", server="failing"),
    Case("GET", "/api/v2/builds/all?project=alpha", 500, "internal_error", server="failing"),
    Case("GET", "/api/v2/builds/latest?project=alpha", 500, "internal_error", server="failing"),
    Case("GET", "/api/v2/jd?project=alpha", 500, "internal_error", server="failing"),
    Case("GET", "/downloads/latest?project=alpha", 500, "internal_error", server="failing"),
    Case("GET", "/api/v2/openapi.json", 500, "internal_error", server="failing"),
    Case("GET", "/api/v2/feed?project=alpha", 500, "internal_error", server="failing"),
    Case("GET", "/healthz", 500, "internal_error", server="failing"),
    Case("GET", "/metrics", 500, "internal_error", server="failing"),
    Case(
        "GET", "/api/v2/builds/check?project=alpha&build=1", 500, "internal_error", server="failing"
    ),
    Case("GET", KEPT_URL, 500, "internal_error", server="failing"),
    # kept files and the update check
    Case("GET", KEPT_URL, 200, server="kept"),
    Case("HEAD", KEPT_URL, 200, server="kept"),
    Case("GET", KEPT_URL + ".sha256", 200, server="kept"),
    Case("GET", YANKED_URL, 410, "build_yanked", server="kept"),
    Case("HEAD", YANKED_URL, 410, server="kept"),
    Case("GET", YANKED_URL, 410, headers=(("Accept", "text/html,*/*;q=0.8"),), server="kept"),
    Case("GET", YANKED_URL, 410, "build_yanked", headers=(("Accept", "*/*"),), server="kept"),
    Case("GET", KEPT_URL, 206, headers=(("Range", "bytes=0-4"),), server="kept"),
    Case("GET", KEPT_URL, 416, headers=(("Range", "bytes=999-"),), server="kept"),
    Case("GET", KEPT_URL, 304, headers=ANY_ETAG, server="kept"),
    Case("GET", KEPT_URL + ".sha256", 304, headers=ANY_ETAG, server="kept"),
    Case("GET", KEPT_URL, 412, headers=(("If-Match", '"other"'),), server="kept"),
    Case("HEAD", KEPT_URL, 412, headers=(("If-Match", '"other"'),), server="kept"),
    Case(
        "GET",
        KEPT_URL + ".sha256",
        412,
        headers=(("If-Unmodified-Since", "Thu, 01 Jan 1970 00:00:00 GMT"),),
        server="kept",
    ),
    Case("GET", KEPT_URL + "?x=%00", 400, "invalid_query", server="kept"),
    Case("GET", KEPT_URL.replace("alpha-3.jar", "other.jar"), 404, "not_found", server="kept"),
    Case("GET", KEPT_URL.replace("/3/", "/" + "9" * 5000 + "/"), 404, "not_found", server="kept"),
    Case("GET", KEPT_URL.replace("/3/", "/%2e%2e/"), 404, "not_found", server="kept"),
    Case("GET", MISSING_URL, 503, "artifact_unavailable", server="kept"),
    Case("GET", "/healthz", 200, server="kept"),  # degraded: it names build 4's file
    Case("GET", "/healthz", 200, server="tokens"),  # degraded: a token expired while in use
    Case("GET", "/api/v2/builds/check?project=alpha&build=1", 200),
    Case("GET", f"/api/v2/builds/check?project=alpha&sha256={KEPT_SHA}", 200, server="kept"),
    Case("GET", "/api/v2/builds/check?project=alpha&build=1", 304, headers=ANY_ETAG),
    Case("GET", "/api/v2/builds/check?project=alpha", 400, "invalid_check"),
    Case("GET", "/api/v2/builds/check?project=alpha&build=x", 400, "invalid_check"),
    Case("GET", "/api/v2/builds/check?project=alpha&sha256=" + "0" * 64, 404, "unknown_artifact"),
    Case("GET", "/api/v2/builds/check?project=alpha&build=99", 200),  # ahead
    Case("GET", "/api/v2/builds/check?project=alpha&build=5", 200, server="kept"),  # yanked
    Case("GET", "/api/v2/builds/check?project=alpha&build=0", 404, "unknown_build"),
    # the downloads counted
    Case("GET", "/api/v2/downloads", 200, server="counted"),
    Case("GET", "/api/v2/downloads?project=alpha&channel=1.21&experimental=true&date=221126",
         200, server="counted"),
    Case("GET", "/api/v2/downloads?project=&channel=9.9&date=", 200, server="counted"),
    Case("GET", "/api/v2/downloads/stats?project=alpha", 200, server="counted"),
    Case("GET", "/api/v2/downloads/stats?project=ALPHA&channel=1.21&experimental=true&days=7",
         200, server="counted"),
    Case("GET", "/api/v2/downloads/stats?project=beta&days=", 200, server="counted"),
    Case("HEAD", "/api/v2/downloads/stats?project=alpha", 200, server="counted"),
    Case("GET", "/api/v2/downloads", 304, headers=ANY_ETAG, server="counted"),
    Case("GET", "/api/v2/downloads/stats?project=alpha", 304, headers=ANY_ETAG, server="counted"),
    Case("GET", "/api/v2/downloads?date=310226", 400, "invalid_date", server="counted"),
    Case("GET", "/api/v2/downloads?date=1&date=2", 400, "repeated_parameter", server="counted"),
    Case("GET", "/api/v2/downloads?version=1.21", 400, "superseded_parameter", server="counted"),
    Case("GET", "/api/v2/downloads?x=%FF", 400, "invalid_query", server="counted"),
    Case("GET", "/api/v2/downloads/stats?project=alpha&days=x", 400, "invalid_days",
         server="counted"),
    Case("GET", "/api/v2/downloads/stats", 400, "missing_parameter", server="counted"),
    Case("GET", "/api/v2/downloads?project=nope", 404, "unknown_project", server="counted"),
    Case("GET", "/api/v2/downloads/stats?project=nope", 404, "unknown_project",
         server="counted"),
    Case("GET", "/api/v2/downloads", 404, "downloads_not_counted"),
    Case("GET", "/api/v2/downloads/stats?project=alpha", 404, "downloads_not_counted"),
    Case("GET", "/api/v2/downloads", 500, "internal_error", server="failing"),
    Case("GET", "/api/v2/downloads/stats?project=alpha", 500, "internal_error",
         server="failing"),
    # the writes
    Case("PUT", WRITE, 201, headers=AS_FORM, body=KEPT_BUILD),
    Case("PUT", WRITE, 201, headers=AS_JSON, body=ELSEWHERE.encode()),
    Case("PUT", "/api/v2/projects/alpha/builds/1", 200, headers=AS_JSON,
         body=json.dumps({**make_build(1, "1.20"), "buildNumber": 1}).encode()),
    Case("PUT", "/api/v2/projects/alpha/builds/1?replace=true", 200, headers=AS_JSON,
         body=ELSEWHERE.encode()),
    Case("PUT", "/api/v2/projects/alpha/builds/1", 409, "build_exists", headers=AS_JSON,
         body=ELSEWHERE.encode()),
    Case("PUT", WRITE, 409, "project_file_invalid", headers=AS_JSON, body=ELSEWHERE.encode(),
         server="hand_broken"),
    Case("DELETE", "/api/v2/projects/alpha/builds/1", 409, "project_file_invalid",
         headers=AUTHORIZED, server="hand_broken"),
    Case("PUT", WRITE, 400, "invalid_build", headers=AS_FORM,
         body=form_body({"channelVersion": "1.21"}, name="../a.jar")),
    Case("PUT", WRITE + "?x=%00", 400, "invalid_query", headers=AS_JSON, body=ELSEWHERE.encode()),
    Case("PUT", WRITE, 401, "unauthorized", headers=AS_JSON[1:], body=ELSEWHERE.encode()),
    Case("PUT", WRITE, 401, "unauthorized", headers=(("Authorization", "Bearer bs_x_y"),)
         + AS_JSON[1:], body=ELSEWHERE.encode()),
    Case("PUT", "/api/v2/projects/beta/builds/9", 403, "forbidden", headers=AS_JSON,
         body=ELSEWHERE.encode()),
    Case("PUT", "/api/v2/projects/gamma/builds/9", 404, "unknown_project", headers=AS_JSON,
         body=ELSEWHERE.encode()),
    Case("PUT", WRITE, 413, "too_large", headers=AS_JSON, body=b" " * (2 << 20)),
    Case("PUT", WRITE, 415, "unsupported_media_type",
         headers=AUTHORIZED + (("Content-Type", "text/plain"),), body=b"{}"),
    Case("PUT", WRITE, 429, "too_many_requests", headers=AS_JSON, body=ELSEWHERE.encode(),
         server="limited"),
    Case("PUT", WRITE, 500, "internal_error", headers=AS_JSON, body=ELSEWHERE.encode(),
         server="failing"),
    Case("PUT", WRITE, 503, "credentials_unavailable",
         headers=(("Authorization", "Bearer down"),) + AS_JSON[1:], body=ELSEWHERE.encode()),
    Case("PUT", WRITE, 507, "insufficient_storage", headers=AS_FORM, body=KEPT_BUILD,
         server="full"),
    Case("DELETE", "/api/v2/projects/alpha/builds/1", 204, headers=AUTHORIZED),
    Case("DELETE", "/api/v2/projects/alpha/builds/1?x=%FF", 400, "invalid_query",
         headers=AUTHORIZED),
    Case("DELETE", WRITE, 404, "unknown_build", headers=AUTHORIZED),
    Case("DELETE", "/api/v2/projects/gamma/builds/1", 404, "unknown_project", headers=AUTHORIZED),
    Case("DELETE", "/api/v2/projects/alpha/builds/1", 401, "unauthorized"),
    Case("DELETE", "/api/v2/projects/beta/builds/10", 403, "forbidden", headers=AUTHORIZED),
    Case("DELETE", "/api/v2/projects/alpha/builds/1", 413, "too_large", headers=AUTHORIZED,
         body=b"x" * 2000),
    Case("DELETE", "/api/v2/projects/alpha/builds/1", 429, "too_many_requests",
         headers=AUTHORIZED, server="limited"),
    Case("DELETE", "/api/v2/projects/alpha/builds/1", 500, "internal_error", headers=AUTHORIZED,
         server="failing"),
    Case("DELETE", "/api/v2/projects/alpha/builds/1", 503, "credentials_unavailable",
         headers=(("Authorization", "Bearer down"),)),
    Case("DELETE", "/api/v2/projects/alpha/builds/1", 507, "insufficient_storage",
         headers=AUTHORIZED, server="full"),
    Case("GET", WRITE, 405, "method_not_allowed"),
    # a yank's reason, an unyank and a purge (issue 38)
    Case("DELETE", "/api/v2/projects/alpha/builds/1", 204, headers=AS_JSON,
         body=b'{"reason": "crashes on start"}'),
    Case("DELETE", "/api/v2/projects/alpha/builds/1", 400, "invalid_reason", headers=AS_JSON,
         body=b'{"reason": "an escape \\u001b[2J"}'),
    Case("DELETE", "/api/v2/projects/alpha/builds/1", 415, "unsupported_media_type",
         headers=AUTHORIZED + (("Content-Type", "text/plain"),), body=b"crashes"),
    Case("POST", UNYANK, 204, headers=AUTHORIZED),
    Case("POST", UNYANK + "?x=%FF", 400, "invalid_query", headers=AUTHORIZED),
    Case("POST", "/api/v2/projects/alpha/builds/99/unyank", 404, "unknown_build",
         headers=AUTHORIZED),
    Case("POST", "/api/v2/projects/gamma/builds/1/unyank", 404, "unknown_project",
         headers=AUTHORIZED),
    Case("POST", "/api/v2/projects/alpha/builds/5/unyank", 409, "build_purged",
         headers=AUTHORIZED, server="kept_writable"),
    Case("POST", UNYANK, 409, "project_file_invalid", headers=AUTHORIZED, server="hand_broken"),
    Case("POST", UNYANK, 401, "unauthorized"),
    Case("POST", "/api/v2/projects/beta/builds/10/unyank", 403, "forbidden", headers=AUTHORIZED),
    Case("POST", UNYANK, 413, "too_large", headers=AUTHORIZED, body=b"x" * 2000),
    Case("POST", UNYANK, 429, "too_many_requests", headers=AUTHORIZED, server="limited"),
    Case("POST", UNYANK, 500, "internal_error", headers=AUTHORIZED, server="failing"),
    Case("POST", UNYANK, 503, "credentials_unavailable", headers=(("Authorization", "Bearer down"),)),
    Case("POST", "/api/v2/projects/alpha/builds/5/unyank", 507, "insufficient_storage",
         headers=AUTHORIZED, server="full_with_a_yank"),
    Case("GET", UNYANK, 405, "method_not_allowed"),
    Case("POST", PURGE.replace("/1/", "/5/"), 200, headers=AUTHORIZED, server="kept_writable"),
    Case("POST", PURGE + "?x=%FF", 400, "invalid_query", headers=AUTHORIZED),
    Case("POST", "/api/v2/projects/alpha/builds/99/purge", 404, "unknown_build",
         headers=AUTHORIZED),
    Case("POST", "/api/v2/projects/gamma/builds/1/purge", 404, "unknown_project",
         headers=AUTHORIZED),
    Case("POST", PURGE, 409, "build_not_yanked", headers=AUTHORIZED),
    Case("POST", PURGE, 409, "project_file_invalid", headers=AUTHORIZED, server="hand_broken"),
    Case("POST", PURGE, 401, "unauthorized"),
    Case("POST", "/api/v2/projects/beta/builds/10/purge", 403, "forbidden", headers=AUTHORIZED),
    Case("POST", PURGE, 413, "too_large", headers=AUTHORIZED, body=b"x" * 2000),
    Case("POST", PURGE, 429, "too_many_requests", headers=AUTHORIZED, server="limited"),
    Case("POST", PURGE, 500, "internal_error", headers=AUTHORIZED, server="failing"),
    Case("POST", PURGE, 503, "credentials_unavailable", headers=(("Authorization", "Bearer down"),)),
    Case("DELETE", PURGE, 405, "method_not_allowed"),
]  # fmt: skip

V3 = "/v3/projects/alpha/versions"
V3_TARGETS = ("/v3/projects", "/v3/projects/alpha", V3, V3 + "/1.21", V3 + "/1.21/builds",
              V3 + "/1.21/builds/latest", V3 + "/1.21/builds/5")  # fmt: skip
# The Fill v3 API: its errors are in Fill's shape (`error` holds the code).
CASES += [
    Case("GET", "/v3/projects", 200),
    Case("GET", "/v3/projects", 200, server="aged"),
    Case("GET", "/v3/projects/alpha", 200),
    Case("GET", "/v3/projects/ALPHA/versions", 200),
    Case("GET", V3 + "/1.21", 200),
    Case("GET", V3 + "/1.21/builds", 200),
    Case("GET", V3 + "/1.21/builds?channel=STABLE,ALPHA&channel=BETA", 200),
    Case("GET", V3 + "/1.21/builds?channel=RECOMMENDED", 200),
    Case("GET", V3 + "/1.21/builds/latest", 200),
    Case("GET", V3 + "/1.21/builds/5", 200),
    Case("GET", V3 + "/1.21/builds/3", 200, server="kept"),  # with its download
    Case("GET", V3 + "/1.21/builds", 200, headers=(("Accept-Encoding", "gzip"),), server="kept"),
    Case("HEAD", V3 + "/1.21/builds/latest", 200),
    *[Case("GET", target, 304, headers=ANY_ETAG) for target in V3_TARGETS],
    *[Case("GET", target + "?x=%00", 400, "invalid_query") for target in V3_TARGETS],
    Case("GET", V3 + "/1.21/builds?channel=stable", 400, "invalid_channel"),
    Case("GET", V3 + "/1.21/builds/x", 400, "invalid_build"),
    *[Case("GET", target.replace("alpha", "nope"), 404, "project_not_found")
      for target in V3_TARGETS[1:]],
    *[Case("GET", target.replace("1.21", "9.9"), 404, "version_not_found")
      for target in V3_TARGETS[3:]],
    Case("GET", V3 + "/1.21/builds/1", 404, "build_not_found"),  # a build of 1.20
    Case("GET", "/v3", 404, "unknown_method"),
    Case("GET", "/v3/projects/", 404, "unknown_method"),
    Case("POST", "/v3/projects", 405, "method_not_allowed"),
    Case("DELETE", V3 + "/1.21/builds/5", 405, "method_not_allowed"),
    *[Case("GET", target, 500, "internal_error", server="failing") for target in V3_TARGETS],
]  # fmt: skip


def fail(*args, **kwargs):
    raise RuntimeError("a bug")


class FailingStore:
    """A store with a bug in it."""

    snapshot = staticmethod(fail)


def full_disk(*args):
    raise OSError(28, "No space left on device")


@pytest.fixture
def answering(client, store, data_dir, tmp_path, monkeypatch):
    """The client of the server a case names: the sample data, or a variation of it."""

    def make(kind):
        publishing = server.make_app(store, credentials=FakeCredentials(), max_file_mb=1)
        if kind == "sample":
            return webtest.TestApp(publishing)
        if kind == "counted":  # downloads counted today and on 22 November 2026
            rows = {
                ("alpha", 5, "x", time.strftime("%Y-%m-%d", time.gmtime())): 3,
                ("alpha", 7, "x", "2026-11-22"): 2,
                ("beta", 10, "y", "2026-11-22"): 1,
            }
            return webtest.TestApp(server.make_app(store, counter=FakeCounter(Tally.of(rows))))
        if kind == "limited":  # ten failed authentications from the client's address
            for _ in range(10):
                publishing.screen({"REQUEST_METHOD": "DELETE", "PATH_INFO": WRITE})
            return webtest.TestApp(publishing)
        if kind == "hand_broken":  # alpha's file has a hand-edit error
            write_file(data_dir / "alpha.json", '{"ciJob": ')
            return webtest.TestApp(publishing)
        if kind in ("full", "full_with_a_yank"):
            if kind == "full_with_a_yank":  # build 5 yanked: its unyank writes the file
                write_file(data_dir / "alpha.json",
                           make_project([make_build(5, yankedAt=1700000500000)]))  # fmt: skip
            monkeypatch.setattr(rewrite, "replace_file", full_disk)
            return webtest.TestApp(publishing)
        if kind == "aged":  # the data loaded an hour ago, so Last-Modified is sent
            real_time = answers.time.time
            monkeypatch.setattr(answers.time, "time", lambda: real_time() + 3600)
        elif kind == "large":  # bodies over 1 KiB, so gzip and Vary
            write_file(
                data_dir / "big.json",
                make_project([make_build(n, commit_count=3) for n in range(40)]),
            )
        elif kind in ("kept", "kept_writable"):  # build 3's file is in the artifact store,
            # build 4's is missing, build 5 is yanked and its file purged
            kept = [make_build(3, sha256=KEPT_SHA, size=len(KEPT_BYTES), file="alpha-3.jar"),
                    make_build(4, sha256="1" * 64, size=9, file="alpha-4.jar"),
                    make_build(5, sha256="5" * 64, size=9, file="alpha-5.jar",
                               yankedAt=1700000500000, yankReason="broken")]  # fmt: skip
            for build in kept:
                del build["downloadUrl"]
            write_file(data_dir / "alpha.json", make_project(kept))
            (data_dir / "artifacts" / KEPT_SHA[:2]).mkdir(parents=True)
            (data_dir / "artifacts" / KEPT_SHA[:2] / KEPT_SHA).write_bytes(KEPT_BYTES)
            if kind == "kept_writable":  # and writes take a credential
                return webtest.TestApp(publishing)
        elif kind == "no_javadoc":  # gamma publishes no javadoc
            doc = make_project([make_build(1)])
            del doc["javadocBaseUrl"]
            write_file(data_dir / "gamma.json", doc)
        elif kind == "tokens":  # one token expiring in a day, one expired while in use
            where = str(tmp_path / "state")
            tokens.create(where, "alpha", 10, "", now=tokens.now_ms() - 9 * tokens.DAY_MS)
            _, used = tokens.create(where, "*", 1, "", now=tokens.now_ms() - 2 * tokens.DAY_MS)
            tokens.verdict(where, used)  # refused as expired
            watch = expiry.TokenWatch(where)
            watch.refresh()
            return webtest.TestApp(server.make_app(store, token_watch=watch))
        elif kind == "with_a_broken_file":
            write_file(data_dir / "broken.json", '{"ciJob": ')
        elif kind == "no_data":
            only_broken = tmp_path / "only-broken"
            only_broken.mkdir()
            write_file(only_broken / "broken.json", "[]")
            return webtest.TestApp(
                server.make_app(store_module.Store(only_broken, check_interval=0))
            )
        elif kind == "failing":
            # /openapi.json reads no store: a bug in sending reaches it too.
            for module in (reads, service, pages):
                monkeypatch.setattr(module, "send", fail)
            return webtest.TestApp(
                server.make_app(
                    FailingStore(),
                    credentials=FakeCredentials(),
                    counter=FakeCounter(Tally.of({})),
                )
            )
        return client

    return make


def path_template(path):
    """The DOCUMENT path that `path` falls under, or None; literal paths win (OpenAPI)."""
    if path in DOCUMENT["paths"]:
        return path
    for template in DOCUMENT["paths"]:
        pattern = re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(template))
        if re.fullmatch(pattern, path):
            return template
    return None


def documented_response(method, target, status):
    """The pointer of the response DOCUMENT gives for this request and status."""
    template = path_template(urlsplit(target).path)
    if template is None:
        assert status == 404, "a path missing from the document must be 404"
        return "#/components/responses/NotFound"
    operation = "get" if method in ("GET", "HEAD") else method.lower()
    if operation not in DOCUMENT["paths"][template]:
        assert status == 405, f"{method} is not documented on {template}: it must be 405"
        return "#/components/responses/MethodNotAllowed"
    responses = DOCUMENT["paths"][template][operation]["responses"]
    assert str(status) in responses, f"{status} is not documented for {method} {template}"
    return f"#/paths/{escaped(template)}/{operation}/responses/{status}"


def documented_parameters(method, target):
    """The parameters DOCUMENT gives for `method` on `target`'s path."""
    operation = "get" if method in ("GET", "HEAD") else method.lower()
    operation_at = f"#/paths/{escaped(path_template(urlsplit(target).path))}/{operation}"
    count = len(lookup(operation_at).get("parameters", []))
    return [followed(f"{operation_at}/parameters/{i}")[0] for i in range(count)]


@pytest.mark.parametrize(
    "case",
    CASES,
    ids=[f"{case.status}-{case.method}-{case.target[:60]}-{case.server}" for case in CASES],
)
def test_real_responses_are_documented(answering, case):
    resp = answering(case.server).request(
        case.target,
        method=case.method,
        headers=dict(case.headers),
        body=case.body,
        expect_errors=True,
    )
    assert resp.status_int == case.status
    response, response_at = followed(documented_response(case.method, case.target, case.status))

    for name in response.get("headers", {}):
        header, header_at = followed(f"{response_at}/headers/{escaped(name)}")
        if header.get("required"):
            assert name in resp.headers, f"documented header {name} is missing"
        if name in resp.headers:
            validate(resp.headers[name], f"{header_at}/schema")

    if "content" not in response:
        assert resp.body == b"" and "Content-Encoding" not in resp.headers
    else:
        assert resp.content_type in response["content"]
        if case.method != "HEAD":
            schema_at = f"{response_at}/content/{escaped(resp.content_type)}/schema"
            validate(resp.json if resp.content_type == "application/json" else resp.text, schema_at)
    if case.code is not None:  # an error of /v3 is in Fill's shape, its code in `error`
        fill = resp.json.get("ok") is False
        assert resp.json["error" if fill else "code"] == case.code

    if case.status < 400:  # a request that worked used only documented parameters
        query = {name for name, _ in parse_qsl(urlsplit(case.target).query, keep_blank_values=True)}
        parameters = [
            p for p in documented_parameters(case.method, case.target) if p["in"] == "query"
        ]
        assert query <= {p["name"] for p in parameters}
        assert {p["name"] for p in parameters if p["required"]} <= query


def test_every_error_code_is_exercised_and_no_other():
    fill = {case.code for case in CASES if case.code and case.target.startswith("/v3")}
    assert fill == set(FILL_ERROR_CODES)
    others = {case.code for case in CASES if case.code and not case.target.startswith("/v3")}
    assert others == set(ERROR_CODES)


def test_every_documented_status_is_exercised():
    documented = {
        (path, method, int(status))
        for path, method, operation in operations()
        for status in operation["responses"]
    }
    exercised = {
        (
            path_template(urlsplit(case.target).path),
            "get" if case.method in ("GET", "HEAD") else case.method.lower(),
            case.status,
        )
        for case in CASES
    }
    assert documented <= exercised
