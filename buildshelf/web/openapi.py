"""The OpenAPI 3.1 description of the API, served at /api/v2/openapi.json, assembled.

What only a person can write is written by hand: the parameters and headers
(openapi_parameters.py), the responses (openapi_responses.py), the operations
(openapi_operations.py), and here the prose, the other schemas (the lists, the update check,
the feed, the error, a build to publish) and the examples. The schemas of what is served
(projects, builds, commits, health) come from their declarations through shapes.py, and the
error codes from the responses that carry them. `document(compat)` is the document of the
mode served.
"""

import calendar
import copy
import json

import msgspec

from buildshelf.counts import Tally
from buildshelf.datafiles.dataformat import CONTROL_CHARACTERS, MAX_BUILD_NUMBER
from buildshelf.model import (
    DOWNLOAD_KEY_PATTERN,
    MAX_PUBLISHED_EXTRAS,
    PRIMARY_KEY,
    URL_PATTERN,
    Build,
    Commit,
    Project,
    json_pattern,
)
from buildshelf.web import health_shapes, openapi_fill, shapes
from buildshelf.web.openapi_operations import PATHS
from buildshelf.web.openapi_parameters import HEADERS, PARAMETERS, ref
from buildshelf.web.openapi_responses import LOADED, RESPONSES, cacheable
from buildshelf.web.query import API
from buildshelf.web.yank_requests import FATES


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
            "status": {"enum": ["up_to_date", "outdated", "yanked", "ahead"], "type": "string",
                       "description": "`up_to_date`: the build is served and none passing the "
                                      "filters is newer; `outdated`: some are; `yanked`: the "
                                      "build was yanked, move to `latest`; `ahead`: a number "
                                      "above the latest that no build has (a local or "
                                      "unpublished build). A build never there is `404` with "
                                      "the status `unknown`."},
            "reason": {"type": "string",
                       "description": "With `yanked` only: why the build was yanked (`\"\"` "
                                      "when no reason was given; for a hash several yanked "
                                      "builds share, the newest's)."},
            "behind": {"type": "integer", "minimum": 0,
                       "description": "How many builds passing the filters are numbered above "
                                      "the highest build served with the same bytes as the one "
                                      "asked about; yanked builds never count."},
            "latest": ref("schemas", "Build"),
        },
        "required": ["status", "behind", "latest"], "additionalProperties": False,
    },
    "BuildList": {"description": "Builds, ascending by `buildNumber`.", "type": "array",
                  "items": ref("schemas", "Build")},
    "PublishedBuild": {
        "description": "A build to publish (its number is the path's). For a part `file`, "
                       "`sha256` and `size` are optional and checked against the bytes "
                       "received, and `downloadUrl` is refused; for a file kept elsewhere, "
                       "`downloadUrl` is required, with `sha256` and `size` both or neither.",
        "type": "object",
        "properties": {
            "channelVersion": {"$ref": "#/components/schemas/Build/properties/channelVersion"},
            "url": {**ref("schemas", "HttpUrl"),
                    "description": "Its job run (default: the project's `ciJobUrl`, then the "
                                   "number and `/`)."},
            "timestamp": {"type": "integer", "minimum": 100000000000,
                          "description": "Epoch milliseconds (default: now); one that looks "
                                         "like seconds is refused."},
            "isExperimental": {"type": "boolean", "default": False},
            "commits": {"type": "array", "default": [], "description": "Newest first.",
                        "items": {"type": "object", "required": ["message", "hash"],
                                  "properties": {"message": {"type": "string"},
                                                 "hash": {"$ref": "#/components/schemas/"
                                                                  "Commit/properties/hash"},
                                                 "author": {"type": "string"}},
                                  "additionalProperties": False}},
            "downloadUrl": ref("schemas", "HttpUrl"),
            "sha256": {"type": "string", "pattern": "^[0-9a-fA-F]{64}$"},
            "size": {"type": "integer", "minimum": 0},
            "downloads": {
                "type": "object", "minProperties": 1, "maxProperties": MAX_PUBLISHED_EXTRAS,
                "description": "The build's extra files kept elsewhere, by key, with "
                               "`sha256` and `size` both or neither; under the key of a part "
                               "`download:KEY`, only that file's `sha256` and `size`, each "
                               "optional, checked against the bytes received. The parts and "
                               f"these together are {MAX_PUBLISHED_EXTRAS} at most.",
                "propertyNames": {"pattern": json_pattern(DOWNLOAD_KEY_PATTERN),
                                  "not": {"const": PRIMARY_KEY}},
                "additionalProperties": {
                    "type": "object",
                    "properties": {"downloadUrl": ref("schemas", "HttpUrl"),
                                   "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                                   "size": {"type": "integer", "minimum": 0}},
                    "additionalProperties": False}},
            "buildNumber": {"type": "integer", "minimum": 0, "maximum": MAX_BUILD_NUMBER,
                            "description": "The path's number, if given."},
        },
        "required": ["channelVersion"], "additionalProperties": False,
        "examples": [{"channelVersion": "1.21.3", "timestamp": 1712494188349,
                      "commits": [{"message": "Update upstream (bb441a3)",
                                   "hash": "4c7b68ce5c0be31b0767eb687d1cbee97723d7b7"}]}],
    },
    "YankReason": {
        "description": "Why a build is yanked: kept in its mark (`yankReason`), said by the "
                       "`410` of its URLs, the update check and the `build.yanked` webhooks.",
        "type": "object",
        "properties": {"reason": {"type": "string", "pattern": f"^[^{CONTROL_CHARACTERS}]*$",
                                  "description": "Text: tabs and line breaks its only control "
                                                 "characters; "
                                                 "`\"\"` or none: no reason."}},
        "additionalProperties": False, "examples": [{"reason": "crashes on start: see #12"}],
    },
    "PurgedFiles": {
        "description": "Each kept file of the yanked build, by key, and what became of it.",
        "type": "object",
        "properties": {"files": {"type": "array", "items": {
            "type": "object", "required": ["key", "file", "sha256", "status"],
            "additionalProperties": False,
            "properties": {
                "key": {"type": "string", "description": "`server:default` for the primary."},
                "file": {"type": "string", "description": "The kept file's name."},
                "sha256": {"$ref": "#/components/schemas/Build/properties/sha256"},
                "status": {"enum": list(FATES), "type": "string",
                           "description": "`deleted` by this purge; `kept`: another build "
                                          "uses the same bytes, which stay; `gone`: deleted "
                                          "before (a retry); `refused`: the store would not "
                                          "delete it."}}}}},
        "required": ["files"], "additionalProperties": False,
    },
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
redirects to the javadoc of a channel. Four operations write, with a bearer credential (the \
`bearer` security scheme): `PUT` publishes a build, `DELETE` yanks one, and a `POST` to its \
`/unyank` or `/purge` serves a yanked build again or deletes its files. Every other \
operation is a read, and needs no credential.

Bodies are compact UTF-8 JSON (`application/json`), except the redirects of `/jd` and \
`/downloads/latest`, which have none, and the feed, which is Atom XML. `HEAD` answers like \
`GET` without a body. `OPTIONS` on the read paths is a CORS preflight answered with `204`. Every \
response carries `Access-Control-Allow-Origin: *` and `X-Content-Type-Options: nosniff`.

JSON successes carry a strong `ETag` and may be cached (`Cache-Control: public, max-age=60` by \
default); `If-None-Match` and `If-Modified-Since` are answered with `304`. Bodies of 1 KiB or \
more are gzipped for clients that accept it.

Every error is JSON, `{"error": "...", "code": "..."}` (the `Error` schema): `error` says what \
went wrong and what to do, `code` is a stable snake_case name. Errors are `Cache-Control: \
no-store`, except `410`. Two errors can come from anywhere and are described once, under \
`components/responses`: `NotFound` (`404 not_found`) for a path not listed here, and \
`MethodNotAllowed` (`405 method_not_allowed`, with `Allow: GET, HEAD, OPTIONS`, or `PUT, \
DELETE` on a build's path, `POST` on its `/unyank` and `/purge`) for any other method on a \
listed path outside `/api/v1`. A body of \
more than 1 KiB on any route but the writes is `413 too_large`.

`OPTIONS` is a CORS preflight that allows `GET` and `HEAD` from any origin, never `PUT`, \
`DELETE` or the `Authorization` header: browsers on other origins can read, never write.

Under `/v3` is the Fill v3 read API (PaperMC's downloads service; the `fill` tag), made of the \
same data, in Fill's shapes: its errors are `{"ok": false, "error": "...", "message": "..."}` \
(the `FillError` schema), `error` the stable name, Fill's own where Fill has one; `NotFound` and \
`MethodNotAllowed` take that shape there too.

In query values `+` is a plus sign, not a space: `channel=1.0.0+71` and `channel=1.0.0%2B71` \
are the same.

API version 1 was removed on 2025-11-05: everything under `/api/v1` is `410`."""

UPSTREAM_DESCRIPTION = """

This server runs in the upstream Canvas API's compatibility mode (`--compat upstream`): \
`/api/v2/builds` answers `{"project": ..., "builds": [...]}`, `/api/v2/builds/all` answers \
`{"builds": [...]}`, every build has `"result": "SUCCESS"` and every commit an `author`."""

SECURITY_SCHEMES = {
    "bearer": {
        "type": "http", "scheme": "bearer",
        "description": "`Authorization: Bearer TOKEN`: a token, `bs_<id>_<secret>` (`buildshelf "
                       "token create SLUG`), or the OIDC token a GitHub Actions job requests "
                       "with the server's public URL (no trailing `/`) as its audience, from a "
                       "repository trusted for the project (`buildshelf trust SLUG --github "
                       "OWNER/REPO`). The latter is accepted once.",
    },
}  # fmt: skip

TAGS = {
    "projects": "The projects served.",
    "builds": "A project's builds, filtered by channel and experimental flag.",
    "javadoc": "Redirects to a channel's javadoc.",
    "downloads": "Redirects to a build's artifact.",
    "counts": "The downloads counted: one per client network (IPv4 /24, IPv6 /64) and build in "
    "24 hours; `404 downloads_not_counted` when the server runs with `--count-downloads off`.",
    "service": "This document and the health check.",
    "publishing": "Publishing and yanking builds: a token (`buildshelf token create`) or a "
    "GitHub Actions OIDC token of a trusted publisher (`buildshelf trust`).",
    "removed": "API version 1, removed on 2025-11-05.",
    openapi_fill.TAG[0]: openapi_fill.TAG[1],
}

# The examples are made by the encoders from these, so they show what is served.
# fmt: off
EXAMPLE_PROJECT = Project(slug="tinplate", ci_job="Tinplate",
                          ci_job_url="https://ci.buildshelf.example/job/Tinplate/",
                          javadoc_base_url="https://jd.buildshelf.example/tinplate/")
EXAMPLE_BUILD = Build(
    number=146, url="https://ci.buildshelf.example/job/Tinplate/146/",
    download_url="https://ci.buildshelf.example/job/Tinplate/146/artifact/tinplate-1.21.3-146.jar",
    channel="1.21.3", timestamp=1712494188349, is_experimental=False,
    commits=(Commit("Update upstream (bb441a3)", "4c7b68ce5c0be31b0767eb687d1cbee97723d7b7",
                    "Jane Doe"),))
EXAMPLE_COUNTED_PROJECT = Project.of((EXAMPLE_BUILD,), **{
    field: getattr(EXAMPLE_PROJECT, field) for field in ("slug", "ci_job", "ci_job_url",
                                                         "javadoc_base_url")})
EXAMPLE_NOW = calendar.timegm((2026, 11, 22, 17, 31, 5)) + 0.125
EXAMPLE_TALLY = Tally({("tinplate", 146, EXAMPLE_BUILD.download_url, day): downloads
                       for day, downloads in (("2026-11-18", 40), ("2026-11-19", 3),
                                              ("2026-11-22", 12))}, "2026-04-06")
EXAMPLE_HEALTH = health_shapes.Health(
    "degraded", 3, "2026-11-22T17:20:00Z", "2026-11-22T17:31:05Z", None,
    [health_shapes.RejectedFile("waystone.json", "line 14, column 7: Expecting ',' delimiter",
                         ["line 14, column 7: Expecting ',' delimiter"])],
    [health_shapes.UnavailableFile("tinplate", 146, "tinplate-1.21.3-146.jar",
                            "/srv/buildshelf/data/artifacts/5f/5f70...e1 is missing")], [])
# fmt: on


def document(compat: str | None = None) -> dict:
    """The document describing the shapes of the mode served (None: the spec's)."""
    schemas = {**SCHEMAS, **shapes.schemas(compat), **openapi_fill.schemas()}
    schemas["Project"]["examples"] = [shapes.project_json(EXAMPLE_PROJECT)]
    schemas["Build"]["examples"] = [
        shapes.Shapes(compat).build_json(EXAMPLE_PROJECT, EXAMPLE_BUILD)
    ]
    schemas["Health"]["examples"] = [msgspec.to_builtins(EXAMPLE_HEALTH)]
    counted = shapes.Shapes(compat)
    schemas["Downloads"]["examples"] = [
        json.loads(
            counted.downloads([EXAMPLE_COUNTED_PROJECT], EXAMPLE_TALLY, None, False, None, None)
        )
    ]
    sums = counted.selection_counts(
        EXAMPLE_COUNTED_PROJECT, EXAMPLE_TALLY, EXAMPLE_COUNTED_PROJECT.select()
    )
    schemas["DownloadStats"]["examples"] = [json.loads(counted.download_stats(
        EXAMPLE_COUNTED_PROJECT, sums, EXAMPLE_TALLY.started, None, False, 7, EXAMPLE_NOW))]  # fmt: skip
    info = {"title": "Buildshelf", "version": "2",
             "summary": "Projects and their builds as JSON over HTTP, published by CI.",
             "description": DESCRIPTION + (UPSTREAM_DESCRIPTION if compat else ""),
             "license": {"name": "MIT", "identifier": "MIT"}}  # fmt: skip
    doc = {
        "openapi": "3.1.0",
        "info": info,
        "servers": [{"url": "/", "description": "The server that serves this document."}],
        "tags": [{"name": name, "description": text} for name, text in TAGS.items()],
        "paths": copy.deepcopy({**PATHS, **openapi_fill.PATHS}),
        "components": {"parameters": PARAMETERS, "headers": HEADERS,
                       "responses": {**RESPONSES, **openapi_fill.RESPONSES},
                       "schemas": schemas, "securitySchemes": SECURITY_SCHEMES},
    }  # fmt: skip
    responses = doc["components"]["responses"]
    for name, fill_response in (("NotFound", openapi_fill.UNKNOWN_PATH),
                                ("MethodNotAllowed", openapi_fill.OTHER_METHOD)):  # fmt: skip
        responses[name] = openapi_fill.either(responses[name], fill_response)
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
