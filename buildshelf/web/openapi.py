"""The OpenAPI 3.1 description of the API, served at /api/v2/openapi.json.

What only a person can write lives here: the operations, their parameters and responses, and
the prose. The schemas of what is served (projects, builds, commits, health) come from their
declarations through shapes.py, and the error codes from the responses that carry them.
`document(compat)` is the document of the mode served.
"""

import copy

import msgspec

from buildshelf.model import URL_PATTERN, Build, Commit, Project, json_pattern
from buildshelf.web import downloads, shapes
from buildshelf.web.openapi_parts import (
    FILE_HEADERS,
    HEADERS,
    LOADED,
    PARAMETERS,
    RESPONSES,
    cacheable,
    ref,
)
from buildshelf.web.query import API
from buildshelf.web.shapes import DOWNLOADS


def _redirect(description):
    return {
        "description": description,
        "headers": {
            "Location": ref("headers", "Location"),
            "Cache-Control": ref("headers", "CacheControlRedirect"),
        },
    }


def _health(description, status, projects):
    return {
        "description": description,
        "headers": {"Cache-Control": ref("headers", "CacheControlNoStore")},
        "content": {
            "application/json": {
                "schema": {
                    **ref("schemas", "Health"),
                    "properties": {"status": status, "projects": projects},
                }
            }
        },
    }


def _path(name, description):
    return {"name": name, "in": "path", "required": True, "description": description,
            "schema": {"type": "string"}}  # fmt: skip


# The types a kept file's URL is answered with: the file's (by downloads.py's table), and its
# checksum line's.
FILE_TYPES = (
    *dict.fromkeys([*downloads.CONTENT_TYPES.values(), downloads.DEFAULT_CONTENT_TYPE]),
    downloads.CHECKSUM_CONTENT_TYPE.partition(";")[0],
)


def _file(description, status):
    headers = {name: ref("headers", header) for name, header in FILE_HEADERS.items()}
    if status == "206":
        headers["Content-Range"] = ref("headers", "ContentRange")
    schema = {"schema": {"type": "string"}}
    return {"description": description, "headers": headers,
            "content": dict.fromkeys(FILE_TYPES, schema)}  # fmt: skip


def _operation(tag, operation_id, summary, parameters, responses, description=None, **more):
    """One GET operation; a parameter or response given by name is one of the components."""
    operation = {"tags": [tag], "operationId": operation_id, "summary": summary}
    if description:
        operation["description"] = description
    operation.update(more)
    if parameters:
        operation["parameters"] = [
            ref("parameters", p) if isinstance(p, str) else p for p in parameters
        ]
    operation["responses"] = {
        status: ref("responses", r) if isinstance(r, str) else r for status, r in responses.items()
    }
    return {"get": operation}


CONDITIONAL = ("IfNoneMatch", "IfModifiedSince")
FILTERS = ("Project", "Channel", "Experimental")
# /builds and /builds/all are one operation under two names.
BUILD_LIST = {"200": "Builds", "304": "NotModified", "400": "BadQuery", "404": "UnknownProject", "500": "InternalError"}  # fmt: skip
NO_PARAMETERS = {"304": "NotModified", "400": "InvalidQuery", "500": "InternalError"}
ONE_BUILD = {"400": "BadQuery", "404": "UnknownProjectOrNoBuild", "500": "InternalError"}
REMOVED = "Answers `410` to any method."

# fmt: off
PATHS = {
    f"{API}/projects": _operation(
        "projects", "listProjects", "Every project served", CONDITIONAL,
        {"200": cacheable("The projects. `Last-Modified` is when this server loaded the data "
                           "shown.", "ProjectList"), **NO_PARAMETERS},
        "Projects come in slug order."),
    f"{API}/builds": _operation(
        "builds", "listBuilds", "A project's builds passing the filters", FILTERS + CONDITIONAL,
        BUILD_LIST, "Sorted by ascending `buildNumber`. The same operation as "
        "`/api/v2/builds/all`, with byte-identical bodies."),
    f"{API}/builds/all": _operation(
        "builds", "listAllBuilds", "A project's builds passing the filters (same as /builds)",
        FILTERS + CONDITIONAL, BUILD_LIST,
        "Another name of `/api/v2/builds`: same parameters, byte-identical bodies."),
    f"{API}/builds/latest": _operation(
        "builds", "getLatestBuild", "The latest build passing the filters", FILTERS + CONDITIONAL,
        {"200": cacheable(f"The latest build. {LOADED}", "Build"), "304": "NotModified",
         **ONE_BUILD},
        "The build with the highest `buildNumber` among those that pass the filters: one "
        "object, not an array."),
    f"{API}/jd": _operation(
        "javadoc", "redirectToJavadoc", "Redirect to the javadoc of a channel",
        FILTERS + ("Redirect",),
        {"302": _redirect("The javadoc of the channel: the project's `javadocBaseUrl` without its "
                          "trailing `/`, one `/`, then `<channelVersion>-R0.1-SNAPSHOT`; with "
                          "`redirect`, then `/`, the project's page prefix and `/` if it has "
                          "one, and the page. No body."),
         **ONE_BUILD, "400": "BadJavadocQuery"},
        "Without `channel`: the channel of the latest build (stable unless `experimental=true`). "
        "With `channel`: that channel, which must have a build passing the `experimental` "
        "filter. The target is made from the data's validated values and, with `redirect`, a "
        "page path of plain segments, so it never leaves the channel's javadoc."),
    "/downloads/latest": _operation(
        "downloads", "redirectToLatestDownload", "Redirect to the artifact of the latest build",
        FILTERS, {"302": _redirect("The build's `downloadUrl`. No body."), **ONE_BUILD},
        "The upstream's download link, outside `/api/v2`: the `downloadUrl` of the build "
        "`/api/v2/builds/latest` answers with, by the same rules and with the same errors. "
        "`curl -fL -o server.jar` follows it; clients that name the file after the URL name it "
        "`latest`."),
    f"{API}/feed": _operation(
        "builds", "getBuildFeed", "An Atom feed of a project's newest builds passing the filters",
        FILTERS + CONDITIONAL,
        {**BUILD_LIST, "200": cacheable(f"The feed. {LOADED}", "AtomFeed",
                                         "application/atom+xml")},
        "The newest 50 builds passing the filters, newest first, as an Atom (RFC 4287) "
        "document. Same parameters, validation and errors as `/api/v2/builds`."),
    f"{API}/openapi.json": _operation(
        "service", "getOpenApiDocument", "This document", CONDITIONAL,
        {"200": cacheable("The OpenAPI 3.1 description of this API, errors included.",
                           "OpenApiDocument"), **NO_PARAMETERS}),
    "/healthz": _operation(
        "service", "getHealth", "Whether data is served, and what is not served as it is on disk", (),
        {"400": "InvalidQuery",
         "200": _health("At least one project is served.",
                        {"enum": ["ok", "degraded", "stalled"]}, {"minimum": 1}),
         "503": _health("No project at all is served.", {"const": "no_data"}, {"const": 0}),
         "500": "InternalError"},
        "For load balancers and monitoring; never cached."),
    f"{API}/builds/check": _operation(
        "builds", "checkForUpdate", "Whether a build is the latest passing the filters",
        FILTERS + ("Build", "Sha256") + CONDITIONAL,
        {"200": cacheable(f"The answer. {LOADED}", "UpdateCheck"), "304": "NotModified",
         "400": "BadCheckQuery", "404": "UnknownProjectArtifactOrNoBuild",
         "500": "InternalError"},
        "Give `build` (the number a server runs) or `sha256` (its file's hash; any build's hash "
        "counts, kept or not): `behind` counts the builds passing the filters numbered above "
        "it, and `latest` is the build `/api/v2/builds/latest` answers with."),
    DOWNLOADS + "/{project}/{build}/{sha256}/{file}": _operation(
        "downloads", "downloadFile", "A file Buildshelf keeps, or its checksum line",
        tuple(_path(name, text) for name, text in (
            ("project", "The project's slug."), ("build", "The build's number."),
            ("sha256", "The file's SHA-256: the bytes at a URL never change."),
            ("file", "The file's name, or the name and `.sha256` for its checksum line.")))
        + ("Range", "IfRange") + CONDITIONAL,
        {"200": _file("The file (or its `sha256sum -c` line).", "200"),
         "206": _file("One range of the file.", "206"), "304": "NotModifiedFile",
         "400": "InvalidQuery", "404": "NotFound", "416": "RangeNotSatisfiable",
         "500": "InternalError", "503": "ArtifactUnavailable"},
        "The bytes go out with a strong `ETag` (the quoted sha256), `Repr-Digest` (RFC 9530), "
        "`Content-Disposition: attachment` and a year's immutable caching; one byte range is "
        "answered `206`, several with the whole file; `If-Range` with another validator gives "
        "the whole file."),
    "/api/v1": _operation(
        "removed", "removedVersion1", "API version 1: removed", (), {"410": "Gone"}, REMOVED,
        deprecated=True),
    "/api/v1/{rest}": _operation(
        "removed", "removedVersion1Path", "Anything under API version 1: removed",
        ({"name": "rest", "in": "path", "required": True, "schema": {"type": "string"},
          "description": "Any path under `/api/v1/`, slashes included."},),
        {"410": "Gone"}, REMOVED, deprecated=True),
}
# fmt: on


def _error_codes(responses):
    """Every error code the responses name, in the order they first do."""
    codes = {}
    for response in responses.values():
        schema = response.get("content", {}).get("application/json", {}).get("schema", {})
        code = schema.get("properties", {}).get("code", {})
        codes.update(dict.fromkeys(code.get("enum", [code["const"]] if "const" in code else [])))
    return list(codes)


# fmt: off
SCHEMAS = {
    "AtomFeed": {
        "description": "An Atom feed document (RFC 4287): one entry per build, its id a `tag:` "
                       "URI that does not depend on the host name, its title `<ciJob> "
                       "#<buildNumber> (<channelVersion>)`, its `updated` the build's timestamp, "
                       "its content the commits, its `alternate` link the download.",
        "type": "string", "contentMediaType": "application/atom+xml", "pattern": "^<\\?xml ",
    },
    "HttpUrl": {
        "description": "An absolute `http://` or `https://` URL of ASCII letters, digits and URL "
                       "punctuation.",
        "type": "string", "format": "uri", "pattern": json_pattern(URL_PATTERN),
    },
    "ProjectList": {
        "description": "Every project served, in slug order.", "type": "object",
        "properties": {"projects": {"type": "array", "items": ref("schemas", "Project")}},
        "required": ["projects"], "additionalProperties": False,
    },
    "UpdateCheck": {
        "description": "Whether the build asked about is the latest passing the filters.",
        "type": "object",
        "properties": {
            "status": {"enum": ["up_to_date", "outdated"], "type": "string",
                       "description": "`up_to_date` when no build passing the filters is newer."},
            "behind": {"type": "integer", "minimum": 0,
                       "description": "How many builds passing the filters are numbered above."},
            "latest": ref("schemas", "Build"),
        },
        "required": ["status", "behind", "latest"], "additionalProperties": False,
    },
    "BuildList": {"description": "Builds, ascending by `buildNumber`.", "type": "array",
                  "items": ref("schemas", "Build")},
    "Error": {
        "description": "What every error response holds.", "type": "object",
        "properties": {
            "error": {"description": "What went wrong and what to do, for people.",
                      "type": "string", "minLength": 1},
            "code": {"description": "The problem's stable name, for programs.", "type": "string",
                     "enum": _error_codes(RESPONSES)},
        },
        "required": ["error", "code"], "additionalProperties": False,
        "examples": [{"error": "the query parameter 'project' is required, e.g. ?project=... "
                               "(see /api/v2/projects for the projects)",
                      "code": "missing_parameter"}],
    },
    "OpenApiDocument": {
        "description": "An OpenAPI 3.1 document (this one); its full schema is the OpenAPI "
                       "specification's.",
        "type": "object",
        "properties": {"openapi": {"type": "string", "pattern": "^3\\.1\\.[0-9]+$"},
                       "info": {"type": "object"}, "paths": {"type": "object"},
                       "components": {"type": "object"}},
        "required": ["openapi", "info", "paths"],
        "externalDocs": {"url": "https://spec.openapis.org/oas/v3.1.0"},
    },
}
# fmt: on

DESCRIPTION = """\
A self-hosted build-distribution API: it lists projects, lists and selects their builds, and \
redirects to the javadoc of a channel. Every operation is a read.

Bodies are compact UTF-8 JSON (`application/json`), except the redirects of `/jd` and \
`/downloads/latest`, which have none, and the feed, which is Atom XML. `HEAD` answers like \
`GET` without a body. `OPTIONS` on these paths is a CORS preflight answered with `204`. Every \
response carries `Access-Control-Allow-Origin: *` and `X-Content-Type-Options: nosniff`.

JSON successes carry a strong `ETag` and may be cached (`Cache-Control: public, max-age=60` by \
default); `If-None-Match` and `If-Modified-Since` are answered with `304`. Bodies of 1 KiB or \
more are gzipped for clients that accept it.

Every error is JSON, `{"error": "...", "code": "..."}` (the `Error` schema): `error` says what \
went wrong and what to do, `code` is a stable snake_case name. Errors are `Cache-Control: \
no-store`, except `410`. Two errors can come from anywhere and are described once, under \
`components/responses`: `NotFound` (`404 not_found`) for a path not listed here, and \
`MethodNotAllowed` (`405 method_not_allowed`, with `Allow: GET, HEAD, OPTIONS`) for any other \
method on a listed path outside `/api/v1`.

In query values `+` is a plus sign, not a space: `channel=1.0.0+71` and `channel=1.0.0%2B71` \
are the same.

API version 1 was removed on 2025-11-05: everything under `/api/v1` is `410`."""

UPSTREAM_DESCRIPTION = """

This server runs in the upstream Canvas API's compatibility mode (`--compat upstream`): \
`/api/v2/builds` answers `{"project": ..., "builds": [...]}`, `/api/v2/builds/all` answers \
`{"builds": [...]}`, every build has `"result": "SUCCESS"` and every commit an `author`."""

TAGS = {
    "projects": "The projects served.",
    "builds": "A project's builds, filtered by channel and experimental flag.",
    "javadoc": "Redirects to a channel's javadoc.",
    "downloads": "Redirects to a build's artifact.",
    "service": "This document and the health check.",
    "removed": "API version 1, removed on 2025-11-05.",
}

# The examples are made by the encoders from these, so they show what is served.
# fmt: off
EXAMPLE_PROJECT = Project(slug="tinplate", ci_job="Tinplate",
                          ci_job_url="https://ci.buildshelf.example/job/Tinplate/",
                          javadoc_base_url="https://jd.buildshelf.example/tinplate/")
EXAMPLE_BUILD = Build(
    146, "https://ci.buildshelf.example/job/Tinplate/146/",
    "https://ci.buildshelf.example/job/Tinplate/146/artifact/tinplate-1.21.3-146.jar", "1.21.3",
    1712494188349, False,
    (Commit("Update upstream (bb441a3)", "4c7b68ce5c0be31b0767eb687d1cbee97723d7b7", "Jane Doe"),))
EXAMPLE_HEALTH = shapes.Health(
    "degraded", 3, "2026-11-22T17:20:00Z", "2026-11-22T17:31:05Z", None,
    [shapes.RejectedFile("waystone.json", "line 14, column 7: Expecting ',' delimiter",
                         ["line 14, column 7: Expecting ',' delimiter"])],
    [shapes.UnavailableFile("tinplate", 146, "tinplate-1.21.3-146.jar",
                            "/srv/buildshelf/data/artifacts/5f/5f70...e1 is missing")], [])
# fmt: on


def document(compat: str | None = None) -> dict:
    """The document describing the shapes of the mode served (None: the spec's)."""
    schemas = {**SCHEMAS, **shapes.schemas(compat)}
    schemas["Project"]["examples"] = [shapes.project_json(EXAMPLE_PROJECT)]
    schemas["Build"]["examples"] = [
        shapes.Shapes(compat).build_json(EXAMPLE_PROJECT, EXAMPLE_BUILD)
    ]
    schemas["Health"]["examples"] = [msgspec.to_builtins(EXAMPLE_HEALTH)]
    info = {"title": "Buildshelf", "version": "2",
             "summary": "Projects and their builds, read-only JSON over HTTP.",
             "description": DESCRIPTION + (UPSTREAM_DESCRIPTION if compat else ""),
             "license": {"name": "MIT", "identifier": "MIT"}}  # fmt: skip
    doc = {
        "openapi": "3.1.0",
        "info": info,
        "servers": [{"url": "/", "description": "The server that serves this document."}],
        "tags": [{"name": name, "description": text} for name, text in TAGS.items()],
        "paths": copy.deepcopy(PATHS),
        "components": {"parameters": PARAMETERS, "headers": HEADERS, "responses": dict(RESPONSES),
                       "schemas": schemas},
    }  # fmt: skip
    if compat:
        _upstream_envelopes(doc)
    return copy.deepcopy(doc)


# fmt: off
def _upstream_envelopes(doc):
    """/builds and /builds/all in the upstream's envelopes."""
    schemas, responses = doc["components"]["schemas"], doc["components"]["responses"]
    schemas["Build"]["description"] = ("A build, in the upstream's shape: the spec's fields and "
                                       "`result`. The deprecated `commit` field is never served.")
    slug = {"project": {"description": "The project's slug.", "type": "string"}}
    for path, name, fields in (("/builds", "BuildsEnvelope", slug),
                               ("/builds/all", "AllBuildsEnvelope", {})):
        properties = {**fields, "builds": ref("schemas", "BuildList")}
        schemas[name] = {"description": "Builds passing the filters, in the upstream's envelope.",
                         "type": "object", "properties": properties,
                         "required": list(properties), "additionalProperties": False}
        responses[name] = cacheable("The builds, ascending by `buildNumber`; `builds` is `[]` "
                                     f"when none passes the filters. {LOADED}", name)
        operation = doc["paths"][API + path]["get"]
        operation["description"] = "Sorted by ascending `buildNumber`, in the upstream's envelope."
        operation["responses"] = {**operation["responses"], "200": ref("responses", name)}
# fmt: on
