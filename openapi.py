"""The OpenAPI 3.1 description of the API, served at /api/v2/openapi.json.

`DOCUMENT` describes the spec's shapes; `document(compat)` the shapes of the mode served.
"""

import copy


def _error(description, *codes, cache_control="CacheControlNoStore", headers=None):
    """An error response: the Error schema narrowed to the codes this response may carry."""
    code = {"const": codes[0]} if len(codes) == 1 else {"enum": list(codes)}
    return {
        "description": description,
        "headers": {
            **(headers or {}),
            "Cache-Control": {"$ref": f"#/components/headers/{cache_control}"},
        },
        "content": {
            "application/json": {
                "schema": {
                    "$ref": "#/components/schemas/Error",
                    "properties": {"code": code},
                }
            }
        },
    }


def _cacheable(description, schema, media_type="application/json"):
    """A success (JSON unless said otherwise) with its validators and caching headers."""
    return {
        "description": description,
        "headers": {
            name: {"$ref": f"#/components/headers/{header}"}
            for name, header in [
                ("ETag", "ETag"),
                ("Last-Modified", "LastModified"),
                ("Cache-Control", "CacheControlPublic"),
                ("Vary", "Vary"),
                ("Content-Encoding", "ContentEncoding"),
            ]
        },
        "content": {media_type: {"schema": {"$ref": f"#/components/schemas/{schema}"}}},
    }


# /builds and /builds/all are one operation under two names.
BUILD_LIST_PARAMETERS = [
    {"$ref": f"#/components/parameters/{name}"}
    for name in ("Project", "Channel", "Experimental", "IfNoneMatch", "IfModifiedSince")
]
BUILD_LIST_RESPONSES = {
    status: {"$ref": f"#/components/responses/{name}"}
    for status, name in [
        ("200", "Builds"),
        ("304", "NotModified"),
        ("400", "BadQuery"),
        ("404", "UnknownProject"),
        ("500", "InternalError"),
    ]
}


DOCUMENT = {
    "openapi": "3.1.0",
    "info": {
        "title": "Buildshelf",
        "version": "2",
        "summary": "Projects and their builds, read-only JSON over HTTP.",
        "description": (
            "A self-hosted build-distribution API: it lists projects, lists and selects their "
            "builds, and redirects to the javadoc of a channel. Every operation is a read.\n\n"
            "Bodies are compact UTF-8 JSON (`application/json`), except the redirects of `/jd` "
            "and `/downloads/latest`, which have none, and the feed, which is Atom XML. `HEAD` "
            "answers like `GET` without a body. `OPTIONS` on these "
            "paths is a CORS preflight answered with `204`. Every response carries "
            "`Access-Control-Allow-Origin: *` and `X-Content-Type-Options: nosniff`.\n\n"
            "JSON successes carry a strong `ETag` and may be cached (`Cache-Control: public, "
            "max-age=60` by default); `If-None-Match` and `If-Modified-Since` are answered "
            "with `304`. Bodies of 1 KiB or more are gzipped for clients that accept it.\n\n"
            'Every error is JSON, `{"error": "...", "code": "..."}` (the `Error` '
            "schema): `error` says what went wrong and what to do, `code` is a stable "
            "snake_case name. Errors are `Cache-Control: no-store`, except `410`. Two errors "
            "can come from anywhere and are described once, under `components/responses`: "
            "`NotFound` (`404 not_found`) for a path not listed here, and `MethodNotAllowed` "
            "(`405 method_not_allowed`, with `Allow: GET, HEAD, OPTIONS`) for any other "
            "method on a listed path outside `/api/v1`.\n\n"
            "In query values `+` is a plus sign, not a space: `channel=1.0.0+71` and "
            "`channel=1.0.0%2B71` are the same.\n\n"
            "API version 1 was removed on 2025-11-05: everything under `/api/v1` is `410`."
        ),
        "license": {"name": "MIT", "identifier": "MIT"},
    },
    "servers": [{"url": "/", "description": "The server that serves this document."}],
    "tags": [
        {"name": "projects", "description": "The projects served."},
        {
            "name": "builds",
            "description": "A project's builds, filtered by channel and experimental flag.",
        },
        {"name": "javadoc", "description": "Redirects to a channel's javadoc."},
        {"name": "downloads", "description": "Redirects to a build's artifact."},
        {"name": "service", "description": "This document and the health check."},
        {"name": "removed", "description": "API version 1, removed on 2025-11-05."},
    ],
    "paths": {
        "/api/v2/projects": {
            "get": {
                "tags": ["projects"],
                "operationId": "listProjects",
                "summary": "Every project served",
                "description": "Projects come in slug order.",
                "parameters": [
                    {"$ref": "#/components/parameters/IfNoneMatch"},
                    {"$ref": "#/components/parameters/IfModifiedSince"},
                ],
                "responses": {
                    "200": _cacheable(
                        "The projects. `Last-Modified` is when this server loaded the data shown.",
                        "ProjectList",
                    ),
                    "304": {"$ref": "#/components/responses/NotModified"},
                    "400": {"$ref": "#/components/responses/InvalidQuery"},
                    "500": {"$ref": "#/components/responses/InternalError"},
                },
            },
        },
        "/api/v2/builds": {
            "get": {
                "tags": ["builds"],
                "operationId": "listBuilds",
                "summary": "A project's builds passing the filters",
                "description": "Sorted by ascending `buildNumber`. The same operation as "
                "`/api/v2/builds/all`, with byte-identical bodies.",
                "parameters": BUILD_LIST_PARAMETERS,
                "responses": BUILD_LIST_RESPONSES,
            },
        },
        "/api/v2/builds/all": {
            "get": {
                "tags": ["builds"],
                "operationId": "listAllBuilds",
                "summary": "A project's builds passing the filters (same as /builds)",
                "description": "Another name of `/api/v2/builds`: same parameters, "
                "byte-identical bodies.",
                "parameters": BUILD_LIST_PARAMETERS,
                "responses": BUILD_LIST_RESPONSES,
            },
        },
        "/api/v2/builds/latest": {
            "get": {
                "tags": ["builds"],
                "operationId": "getLatestBuild",
                "summary": "The latest build passing the filters",
                "description": "The build with the highest `buildNumber` among those that "
                "pass the filters: one object, not an array.",
                "parameters": [
                    {"$ref": "#/components/parameters/Project"},
                    {"$ref": "#/components/parameters/Channel"},
                    {"$ref": "#/components/parameters/Experimental"},
                    {"$ref": "#/components/parameters/IfNoneMatch"},
                    {"$ref": "#/components/parameters/IfModifiedSince"},
                ],
                "responses": {
                    "200": _cacheable(
                        "The latest build. `Last-Modified` is when this server "
                        "loaded the project's file.",
                        "Build",
                    ),
                    "304": {"$ref": "#/components/responses/NotModified"},
                    "400": {"$ref": "#/components/responses/BadQuery"},
                    "404": {"$ref": "#/components/responses/UnknownProjectOrNoBuild"},
                    "500": {"$ref": "#/components/responses/InternalError"},
                },
            },
        },
        "/api/v2/jd": {
            "get": {
                "tags": ["javadoc"],
                "operationId": "redirectToJavadoc",
                "summary": "Redirect to the javadoc of a channel",
                "description": (
                    "Without `channel`: the channel of the latest build (stable unless "
                    "`experimental=true`). With `channel`: that channel, which must have a "
                    "build passing the `experimental` filter. The target is made from the "
                    "data's validated values and, with `redirect`, a page path of plain "
                    "segments, so it never leaves the channel's javadoc."
                ),
                "parameters": [
                    {"$ref": "#/components/parameters/Project"},
                    {"$ref": "#/components/parameters/Channel"},
                    {"$ref": "#/components/parameters/Experimental"},
                    {"$ref": "#/components/parameters/Redirect"},
                ],
                "responses": {
                    "302": {
                        "description": "The javadoc of the channel: the project's "
                        "`javadocBaseUrl` without its trailing `/`, one `/`, "
                        "then `<channelVersion>-R0.1-SNAPSHOT`; with "
                        "`redirect`, then `/`, the project's page prefix and "
                        "`/` if it has one, and the page. No body.",
                        "headers": {
                            "Location": {"$ref": "#/components/headers/Location"},
                            "Cache-Control": {
                                "$ref": "#/components/headers/CacheControlRedirect",
                            },
                        },
                    },
                    "400": {"$ref": "#/components/responses/BadJavadocQuery"},
                    "404": {"$ref": "#/components/responses/UnknownProjectOrNoBuild"},
                    "500": {"$ref": "#/components/responses/InternalError"},
                },
            },
        },
        "/downloads/latest": {
            "get": {
                "tags": ["downloads"],
                "operationId": "redirectToLatestDownload",
                "summary": "Redirect to the artifact of the latest build",
                "description": (
                    "The upstream's download link, outside `/api/v2`: the `downloadUrl` of the "
                    "build `/api/v2/builds/latest` answers with, by the same rules and with "
                    "the same errors. `curl -fL -o server.jar` follows it; clients that name "
                    "the file after the URL name it `latest`."
                ),
                "parameters": [
                    {"$ref": "#/components/parameters/Project"},
                    {"$ref": "#/components/parameters/Channel"},
                    {"$ref": "#/components/parameters/Experimental"},
                ],
                "responses": {
                    "302": {
                        "description": "The build's `downloadUrl`. No body.",
                        "headers": {
                            "Location": {"$ref": "#/components/headers/Location"},
                            "Cache-Control": {
                                "$ref": "#/components/headers/CacheControlRedirect",
                            },
                        },
                    },
                    "400": {"$ref": "#/components/responses/BadQuery"},
                    "404": {"$ref": "#/components/responses/UnknownProjectOrNoBuild"},
                    "500": {"$ref": "#/components/responses/InternalError"},
                },
            },
        },
        "/api/v2/feed": {
            "get": {
                "tags": ["builds"],
                "operationId": "getBuildFeed",
                "summary": "An Atom feed of a project's newest builds passing the filters",
                "description": "The newest 50 builds passing the filters, newest first, as an "
                "Atom (RFC 4287) document. Same parameters, validation and "
                "errors as `/api/v2/builds`.",
                "parameters": BUILD_LIST_PARAMETERS,
                "responses": {
                    "200": _cacheable(
                        "The feed. `Last-Modified` is when this server loaded the project's file.",
                        "AtomFeed",
                        "application/atom+xml",
                    ),
                    **{
                        status: response
                        for status, response in BUILD_LIST_RESPONSES.items()
                        if status != "200"
                    },
                },
            },
        },
        "/api/v2/openapi.json": {
            "get": {
                "tags": ["service"],
                "operationId": "getOpenApiDocument",
                "summary": "This document",
                "parameters": [
                    {"$ref": "#/components/parameters/IfNoneMatch"},
                    {"$ref": "#/components/parameters/IfModifiedSince"},
                ],
                "responses": {
                    "200": _cacheable(
                        "The OpenAPI 3.1 description of this API, errors included.",
                        "OpenApiDocument",
                    ),
                    "304": {"$ref": "#/components/responses/NotModified"},
                    "400": {"$ref": "#/components/responses/InvalidQuery"},
                    "500": {"$ref": "#/components/responses/InternalError"},
                },
            },
        },
        "/healthz": {
            "get": {
                "tags": ["service"],
                "operationId": "getHealth",
                "summary": "Whether data is served, and which files are rejected",
                "description": "For load balancers and monitoring; never cached.",
                "responses": {
                    "400": {"$ref": "#/components/responses/InvalidQuery"},
                    "200": {
                        "description": "At least one project is served.",
                        "headers": {
                            "Cache-Control": {"$ref": "#/components/headers/CacheControlNoStore"},
                        },
                        "content": {
                            "application/json": {
                                "schema": {
                                    "$ref": "#/components/schemas/Health",
                                    "properties": {
                                        "status": {"const": "ok"},
                                        "projects": {"minimum": 1},
                                    },
                                }
                            }
                        },
                    },
                    "503": {
                        "description": "No project at all is served.",
                        "headers": {
                            "Cache-Control": {"$ref": "#/components/headers/CacheControlNoStore"},
                        },
                        "content": {
                            "application/json": {
                                "schema": {
                                    "$ref": "#/components/schemas/Health",
                                    "properties": {
                                        "status": {"const": "no_data"},
                                        "projects": {"const": 0},
                                    },
                                }
                            }
                        },
                    },
                    "500": {"$ref": "#/components/responses/InternalError"},
                },
            },
        },
        "/api/v1": {
            "get": {
                "tags": ["removed"],
                "operationId": "removedVersion1",
                "summary": "API version 1: removed",
                "description": "Answers `410` to any method.",
                "deprecated": True,
                "responses": {"410": {"$ref": "#/components/responses/Gone"}},
            },
        },
        "/api/v1/{rest}": {
            "get": {
                "tags": ["removed"],
                "operationId": "removedVersion1Path",
                "summary": "Anything under API version 1: removed",
                "description": "Answers `410` to any method.",
                "deprecated": True,
                "parameters": [
                    {
                        "name": "rest",
                        "in": "path",
                        "required": True,
                        "description": "Any path under `/api/v1/`, slashes included.",
                        "schema": {"type": "string"},
                    }
                ],
                "responses": {"410": {"$ref": "#/components/responses/Gone"}},
            },
        },
    },
    "components": {
        "parameters": {
            "Project": {
                "name": "project",
                "in": "query",
                "required": True,
                "description": "The project's slug, in any letter case. Missing or empty: "
                "`400 missing_parameter`; no such project: "
                "`404 unknown_project`.",
                "schema": {"type": "string", "minLength": 1},
                "example": "tinplate",
            },
            "Channel": {
                "name": "channel",
                "in": "query",
                "required": False,
                "description": (
                    "Only builds whose `channelVersion` is exactly this; empty means no "
                    "filter. It replaces `game_version`, `version` and `minecraft_version`, "
                    "which are refused with `400 superseded_parameter`."
                ),
                "schema": {"type": "string"},
                "example": "1.21.3",
            },
            "Experimental": {
                "name": "experimental",
                "in": "query",
                "required": False,
                "description": "`true`, in any letter case, includes experimental builds; "
                "any other value, or none, means stable builds only.",
                "schema": {"type": "string", "default": "false"},
                "example": "true",
            },
            "Redirect": {
                "name": "redirect",
                "in": "query",
                "required": False,
                "description": (
                    "A javadoc page to open under the channel's root, e.g. "
                    "`org/example/Foo.html#bar()`, percent-decoded once: segments of letters, "
                    "digits and `._$-` joined by single `/`, then an optional `#fragment`; at "
                    "most 512 characters. `..`, empty segments, a scheme, backslashes, control "
                    "characters or a second round of percent-encoding: `400 invalid_redirect`. "
                    "Empty means the channel's root."
                ),
                "schema": {"type": "string", "maxLength": 512},
                "example": "org/example/Foo.html",
            },
            "IfNoneMatch": {
                "name": "If-None-Match",
                "in": "header",
                "required": False,
                "description": "ETags the client holds (`*` for any): `304` if one is "
                "current. Wins over `If-Modified-Since`.",
                "schema": {"type": "string"},
            },
            "IfModifiedSince": {
                "name": "If-Modified-Since",
                "in": "header",
                "required": False,
                "description": "An HTTP date: `304` if the data has not changed since. "
                "Ignored when `If-None-Match` is given or the date is invalid.",
                "schema": {"type": "string"},
            },
        },
        "headers": {
            "ETag": {
                "description": "A strong validator, a hash of the body, the same on every "
                "server serving the same files. The gzipped body has its own.",
                "required": True,
                "schema": {"type": "string", "pattern": '^"[0-9a-f]+(-gzip)?"$'},
            },
            "LastModified": {
                "description": "When this server loaded the data shown, sent once that "
                "data is a second old (HTTP dates have whole seconds).",
                "required": False,
                "schema": {
                    "type": "string",
                    "pattern": "^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-9]{2} "
                    "(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
                    "[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT$",
                },
            },
            "CacheControlPublic": {
                "description": "`public, max-age=60` unless the server is run with another "
                "`--max-age`.",
                "required": True,
                "schema": {"type": "string", "pattern": "^public, max-age=[0-9]+$"},
            },
            "CacheControlRedirect": {
                "description": "The redirect moves when a build lands: cacheable 10 seconds "
                "(less if the server's `--max-age` is lower).",
                "required": True,
                "schema": {"type": "string", "pattern": "^public, max-age=([0-9]|10)$"},
            },
            "CacheControlNoStore": {
                "description": "Never cached.",
                "required": True,
                "schema": {"const": "no-store"},
            },
            "CacheControlGone": {
                "description": "Cacheable for a day.",
                "required": True,
                "schema": {"const": "public, max-age=86400"},
            },
            "Vary": {
                "description": "Sent with bodies of 1 KiB or more, which are gzipped for "
                "clients that accept gzip.",
                "required": False,
                "schema": {"const": "Accept-Encoding"},
            },
            "ContentEncoding": {
                "description": "`gzip` when the body is gzipped.",
                "required": False,
                "schema": {"const": "gzip"},
            },
            "Location": {
                "description": "The target, made from the data's validated values.",
                "required": True,
                "schema": {"$ref": "#/components/schemas/HttpUrl"},
            },
            "Allow": {
                "description": "The methods this API answers.",
                "required": True,
                "schema": {"const": "GET, HEAD, OPTIONS"},
            },
        },
        "responses": {
            "Builds": _cacheable(
                "The builds, ascending by `buildNumber`; `[]` when none "
                "passes the filters. `Last-Modified` is when this server loaded "
                "the project's file.",
                "BuildList",
            ),
            "NotModified": {
                "description": "The client's copy, named by `If-None-Match` or dated by "
                "`If-Modified-Since`, is current. No body.",
                "headers": {
                    "ETag": {"$ref": "#/components/headers/ETag"},
                    "Cache-Control": {"$ref": "#/components/headers/CacheControlPublic"},
                    "Vary": {"$ref": "#/components/headers/Vary"},
                },
            },
            "BadQuery": _error(
                "The query is refused: `project` missing or empty (`missing_parameter`); "
                "`game_version`, `version` or `minecraft_version` given "
                "(`superseded_parameter`: use `channel`); `project`, `channel` or "
                "`experimental` given twice (`repeated_parameter`); not UTF-8 once "
                "percent-decoded, a control or invisible character, or more than 50 "
                "parameters (`invalid_query`).",
                "missing_parameter",
                "superseded_parameter",
                "repeated_parameter",
                "invalid_query",
            ),
            "BadJavadocQuery": _error(
                "The query is refused: as for the builds endpoints (`missing_parameter`, "
                "`superseded_parameter`, `repeated_parameter`, `invalid_query`; `redirect` "
                "too may be given only once), or `redirect` is not a page path "
                "(`invalid_redirect`).",
                "missing_parameter",
                "superseded_parameter",
                "repeated_parameter",
                "invalid_query",
                "invalid_redirect",
            ),
            "InvalidQuery": _error(
                "The query is not UTF-8 once percent-decoded, holds a control or invisible "
                "character, or has more than 50 parameters (`invalid_query`). Every route "
                "checks this, even those that take no parameters.",
                "invalid_query",
            ),
            "UnknownProject": _error(
                "No project has that slug (`unknown_project`).", "unknown_project"
            ),
            "UnknownProjectOrNoBuild": _error(
                "No project has that slug (`unknown_project`), or none of its builds passes "
                "the filters (`no_matching_build`).",
                "unknown_project",
                "no_matching_build",
            ),
            "NotFound": _error("Any path not listed in this document (`not_found`).", "not_found"),
            "MethodNotAllowed": _error(
                "A method other than GET, HEAD or OPTIONS on any path listed here outside "
                "`/api/v1` (`method_not_allowed`).",
                "method_not_allowed",
                headers={"Allow": {"$ref": "#/components/headers/Allow"}},
            ),
            "Gone": _error(
                "API version 1 was removed on 2025-11-05: use `/api/v2` (`api_version_removed`).",
                "api_version_removed",
                cache_control="CacheControlGone",
            ),
            "InternalError": _error(
                "A bug (`internal_error`): the trace is in the server's log, never in the body.",
                "internal_error",
            ),
        },
        "schemas": {
            "AtomFeed": {
                "description": "An Atom feed document (RFC 4287): one entry per build, its id "
                "a `tag:` URI that does not depend on the host name, its title "
                "`<ciJob> #<buildNumber> (<channelVersion>)`, its `updated` the "
                "build's timestamp, its content the commits, its `alternate` "
                "link the download.",
                "type": "string",
                "contentMediaType": "application/atom+xml",
                "pattern": "^<\\?xml ",
            },
            "HttpUrl": {
                "description": "An absolute `http://` or `https://` URL of ASCII letters, digits "
                "and URL punctuation.",
                "type": "string",
                "format": "uri",
                "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://([A-Za-z0-9.-]+|\\[[0-9A-Fa-f:.]+\\])"
                "(:[0-9]{1,5})?([/?#][A-Za-z0-9\\-._~%!$&'()*+,;=:@/?#]*)?$",
            },
            "Project": {
                "description": "A project, one data file.",
                "type": "object",
                "properties": {
                    "slug": {
                        "description": "The identifier, the value of the `project` parameter.",
                        "type": "string",
                        "pattern": "^[a-z0-9][a-z0-9._-]*$",
                    },
                    "ciJob": {
                        "description": "The name of the project's CI job.",
                        "type": "string",
                        "minLength": 1,
                    },
                    "ciJobUrl": {
                        "description": "The address of that job.",
                        "$ref": "#/components/schemas/HttpUrl",
                    },
                    "javadocBaseUrl": {
                        "description": "The base address of the project's javadoc.",
                        "$ref": "#/components/schemas/HttpUrl",
                    },
                },
                "required": ["slug", "ciJob", "ciJobUrl", "javadocBaseUrl"],
                "additionalProperties": False,
                "examples": [
                    {
                        "slug": "tinplate",
                        "ciJob": "Tinplate",
                        "ciJobUrl": "https://ci.buildshelf.example/job/Tinplate/",
                        "javadocBaseUrl": "https://jd.buildshelf.example/tinplate/",
                    }
                ],
            },
            "ProjectList": {
                "description": "Every project served, in slug order.",
                "type": "object",
                "properties": {
                    "projects": {
                        "type": "array",
                        "items": {"$ref": "#/components/schemas/Project"},
                    },
                },
                "required": ["projects"],
                "additionalProperties": False,
            },
            "Commit": {
                "description": "A commit contained in a build.",
                "type": "object",
                "properties": {
                    "message": {"description": "The commit message.", "type": "string"},
                    "hash": {
                        "description": "The commit hash, hexadecimal.",
                        "type": "string",
                        "pattern": "^[0-9a-fA-F]+$",
                    },
                },
                "required": ["message", "hash"],
                "additionalProperties": False,
            },
            "Build": {
                "description": "A build, with exactly these fields in this order. The "
                "deprecated `commit` field is never served: use `commits`.",
                "type": "object",
                "properties": {
                    "buildNumber": {
                        "description": "The build's number, unique in its project.",
                        "type": "integer",
                        "minimum": 0,
                    },
                    "url": {
                        "description": "The address of the CI run of this build.",
                        "$ref": "#/components/schemas/HttpUrl",
                    },
                    "downloadUrl": {
                        "description": "The address of the build's artifact.",
                        "$ref": "#/components/schemas/HttpUrl",
                    },
                    "channelVersion": {
                        "description": "The channel the build belongs to: what `channel` "
                        "selects, and part of the javadoc address.",
                        "type": "string",
                        "pattern": "^[A-Za-z0-9._+-]+$",
                    },
                    "timestamp": {
                        "description": "The time of the build, exactly as the data file gives "
                        "it (the sample data uses epoch milliseconds).",
                        "type": "integer",
                    },
                    "isExperimental": {
                        "description": "Whether the build is experimental (else stable).",
                        "type": "boolean",
                    },
                    "commits": {
                        "description": "The commits in the build; may be empty.",
                        "type": "array",
                        "items": {"$ref": "#/components/schemas/Commit"},
                    },
                },
                "required": [
                    "buildNumber",
                    "url",
                    "downloadUrl",
                    "channelVersion",
                    "timestamp",
                    "isExperimental",
                    "commits",
                ],
                "additionalProperties": False,
                "examples": [
                    {
                        "buildNumber": 146,
                        "url": "https://ci.buildshelf.example/job/Tinplate/146/",
                        "downloadUrl": "https://ci.buildshelf.example/job/Tinplate/146/artifact/"
                        "tinplate-1.21.3-146.jar",
                        "channelVersion": "1.21.3",
                        "timestamp": 1712494188349,
                        "isExperimental": False,
                        "commits": [
                            {
                                "message": "Update upstream (bb441a3)",
                                "hash": "4c7b68ce5c0be31b0767eb687d1cbee97723d7b7",
                            }
                        ],
                    }
                ],
            },
            "BuildList": {
                "description": "Builds, ascending by `buildNumber`.",
                "type": "array",
                "items": {"$ref": "#/components/schemas/Build"},
            },
            "Error": {
                "description": "What every error response holds.",
                "type": "object",
                "properties": {
                    "error": {
                        "description": "What went wrong and what to do, for people.",
                        "type": "string",
                        "minLength": 1,
                    },
                    "code": {
                        "description": "The problem's stable name, for programs.",
                        "type": "string",
                        "enum": [
                            "missing_parameter",
                            "superseded_parameter",
                            "repeated_parameter",
                            "invalid_query",
                            "invalid_redirect",
                            "unknown_project",
                            "no_matching_build",
                            "not_found",
                            "method_not_allowed",
                            "api_version_removed",
                            "internal_error",
                        ],
                    },
                },
                "required": ["error", "code"],
                "additionalProperties": False,
                "examples": [
                    {
                        "error": "the query parameter 'project' is required, e.g. ?project=... "
                        "(see /api/v2/projects for the projects)",
                        "code": "missing_parameter",
                    }
                ],
            },
            "RejectedFile": {
                "description": "A data file not served as it is on disk. A project whose file "
                "broke keeps serving its last good version.",
                "type": "object",
                "properties": {
                    "file": {
                        "description": "The file's name in the data directory; `.` for the "
                        "directory itself.",
                        "type": "string",
                        "minLength": 1,
                    },
                    "error": {
                        "description": "The problem and where in the file it is.",
                        "type": "string",
                        "minLength": 1,
                    },
                },
                "required": ["file", "error"],
                "additionalProperties": False,
            },
            "Health": {
                "description": "What the server serves.",
                "type": "object",
                "properties": {
                    "status": {
                        "description": "`no_data` when no project at all is served (status "
                        "503); `stalled` when a file has been read for longer "
                        "than a check waits, or a check takes too long: the "
                        "data served may be out of date.",
                        "type": "string",
                        "enum": ["ok", "stalled", "no_data"],
                    },
                    "projects": {
                        "description": "How many projects are served.",
                        "type": "integer",
                        "minimum": 0,
                    },
                    "lastReload": {
                        "description": "When the served data last changed, UTC.",
                        "type": "string",
                        "format": "date-time",
                        "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$",
                    },
                    "lastCheck": {
                        "description": "When the data files were last checked for changes, "
                        "UTC (about every second).",
                        "type": "string",
                        "format": "date-time",
                        "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$",
                    },
                    "checkRunningFor": {
                        "description": "Seconds the check under way has taken, or null.",
                        "type": ["number", "null"],
                        "minimum": 0,
                    },
                    "rejectedFiles": {
                        "description": "Every data file not served as it is on disk.",
                        "type": "array",
                        "items": {"$ref": "#/components/schemas/RejectedFile"},
                    },
                    "stalledReads": {
                        "description": "Files (or `.`, the directory listing) whose read has "
                        "lasted longer than a check waits, with how long; each "
                        "keeps its last good version meanwhile.",
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "file": {"type": "string"},
                                "seconds": {"type": "number", "minimum": 0},
                            },
                            "required": ["file", "seconds"],
                            "additionalProperties": False,
                        },
                    },
                },
                "required": [
                    "status",
                    "projects",
                    "lastReload",
                    "lastCheck",
                    "checkRunningFor",
                    "rejectedFiles",
                    "stalledReads",
                ],
                "additionalProperties": False,
                "examples": [
                    {
                        "status": "ok",
                        "projects": 3,
                        "lastReload": "2026-11-22T17:20:00Z",
                        "lastCheck": "2026-11-22T17:31:05Z",
                        "checkRunningFor": None,
                        "rejectedFiles": [
                            {
                                "file": "waystone.json",
                                "error": "line 14, column 7: Expecting ',' delimiter",
                            }
                        ],
                        "stalledReads": [],
                    }
                ],
            },
            "OpenApiDocument": {
                "description": "An OpenAPI 3.1 document (this one); its full schema is the "
                "OpenAPI specification's.",
                "type": "object",
                "properties": {
                    "openapi": {"type": "string", "pattern": "^3\\.1\\.[0-9]+$"},
                    "info": {"type": "object"},
                    "paths": {"type": "object"},
                    "components": {"type": "object"},
                },
                "required": ["openapi", "info", "paths"],
                "externalDocs": {"url": "https://spec.openapis.org/oas/v3.1.0"},
            },
        },
    },
}


def document(compat=None):
    """The document describing the shapes of the mode served (None: the spec's)."""
    if compat is None:
        return DOCUMENT
    doc = copy.deepcopy(DOCUMENT)
    doc["info"]["description"] += (
        "\n\nThis server runs in the upstream Canvas API's compatibility mode (`--compat "
        'upstream`): `/api/v2/builds` answers `{"project": ..., "builds": [...]}`, '
        '`/api/v2/builds/all` answers `{"builds": [...]}`, every build has `"result": '
        '"SUCCESS"` and every commit an `author`.'
    )
    schemas, responses = doc["components"]["schemas"], doc["components"]["responses"]
    build = schemas["Build"]
    build["description"] = (
        "A build, in the upstream's shape: the spec's fields and "
        "`result`. The deprecated `commit` field is never served."
    )
    build["properties"] = {
        "result": {
            "description": "Always `SUCCESS`: every build served is a finished, downloadable one.",
            "const": "SUCCESS",
        },
        **build["properties"],
    }
    build["required"] = list(build["properties"])
    build["examples"] = [
        {
            "result": "SUCCESS",
            **example,
            "commits": [{**commit, "author": "Jane Doe"} for commit in example["commits"]],
        }
        for example in build["examples"]
    ]
    commit = schemas["Commit"]
    commit["properties"]["author"] = {
        "description": 'The commit\'s author as the data file gives it; `""` when it gives none.',
        "type": "string",
    }
    commit["required"] = list(commit["properties"])
    for name, with_project in (("BuildsEnvelope", True), ("AllBuildsEnvelope", False)):
        properties = {"builds": {"$ref": "#/components/schemas/BuildList"}}
        if with_project:
            properties = {
                "project": {"description": "The project's slug.", "type": "string"},
                **properties,
            }
        schemas[name] = {
            "description": "Builds passing the filters, in the upstream's envelope.",
            "type": "object",
            "properties": properties,
            "required": list(properties),
            "additionalProperties": False,
        }
        responses[name] = _cacheable(
            "The builds, ascending by `buildNumber`; `builds` is `[]` when none passes the "
            "filters. `Last-Modified` is when this server loaded the project's file.",
            name,
        )
    for path, name in (
        ("/api/v2/builds", "BuildsEnvelope"),
        ("/api/v2/builds/all", "AllBuildsEnvelope"),
    ):
        operation = doc["paths"][path]["get"]
        operation["description"] = "Sorted by ascending `buildNumber`, in the upstream's envelope."
        operation["responses"] = {
            **operation["responses"],
            "200": {"$ref": f"#/components/responses/{name}"},
        }
    return doc
