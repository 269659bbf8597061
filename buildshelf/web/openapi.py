"""The OpenAPI 3.1 description of the API, served at /api/v2/openapi.json.

What only a person can write lives here: the operations, the parameters, headers and
responses they name, and the prose. The schemas of what is served (projects, builds, commits, health) come from their
declarations through shapes.py, and the error codes from the responses that carry them.
`document(compat)` is the document of the mode served.
"""

import calendar
import copy
import json

import msgspec

from buildshelf.counts import Tally
from buildshelf.model import URL_PATTERN, Build, Commit, Project, json_pattern
from buildshelf.web import downloads, query, shapes
from buildshelf.web.query import API
from buildshelf.web.shapes import DOWNLOADS

# The reusable parts, written by hand: the parameters, headers and responses that operations
# name (the document's components).
LOADED = "`Last-Modified` is when this server loaded the project's file."


def ref(kind: str, name: str) -> dict:
    return {"$ref": f"#/components/{kind}/{name}"}


def _error(description, *codes, cache_control="CacheControlNoStore", headers=None):
    """An error response: the Error schema narrowed to the codes this response may carry."""
    code = {"const": codes[0]} if len(codes) == 1 else {"enum": list(codes)}
    return {
        "description": description,
        "headers": {**(headers or {}), "Cache-Control": ref("headers", cache_control)},
        "content": {
            "application/json": {
                "schema": {**ref("schemas", "Error"), "properties": {"code": code}}
            }
        },
    }


def _unknown_to_check():
    """The 404 of an update check: the Error, and for a build never there its status."""
    unknown = _error(
        "No project has that slug (`unknown_project`), or none of its builds passes the filters "
        "(`no_matching_build`); or the number (`unknown_build`) or the hash "
        '(`unknown_artifact`) was never a build of it: then with `"status": "unknown"` and '
        "`latest`, the build `/api/v2/builds/latest` answers with.",
        "unknown_project",
        "unknown_build",
        "unknown_artifact",
        "no_matching_build",
    )
    unknown["content"]["application/json"]["schema"] = {
        "type": "object",
        "required": ["error", "code"],
        "additionalProperties": False,
        "properties": {
            "error": {"type": "string", "minLength": 1},
            "code": {
                "enum": [
                    "unknown_project",
                    "unknown_build",
                    "unknown_artifact",
                    "no_matching_build",
                ]
            },
            "status": {"const": "unknown"},
            "latest": ref("schemas", "Build"),
        },
    }
    return unknown


def _yanked():
    """The 410 of a yanked build's download URL: the error, its reason and what to take."""
    gone = _error(
        "The build was yanked (`buildshelf yank`), its file kept or purged (`build_yanked`): "
        '`reason` says why (`""` when no reason was given), `latest` is the project\'s '
        "latest build (null when it has none). Never cached: an unyank shows at once.",
        "build_yanked",
    )
    # The Error schema allows no other key: this body is the error and two more.
    gone["content"]["application/json"]["schema"] = {
        "type": "object",
        "required": ["error", "code", "reason", "latest"],
        "additionalProperties": False,
        "properties": {
            "error": {"type": "string", "minLength": 1},
            "code": {"const": "build_yanked"},
            "reason": {"type": "string"},
            "latest": {"anyOf": [ref("schemas", "Build"), {"type": "null"}]},
        },
    }
    return gone


CACHEABLE_HEADERS = {"ETag": "ETag", "Last-Modified": "LastModified",
                     "Cache-Control": "CacheControlPublic", "Vary": "Vary",
                     "Content-Encoding": "ContentEncoding"}  # fmt: skip


def cacheable(description, schema, media_type="application/json"):
    """A success (JSON unless said otherwise) with its validators and caching headers."""
    return {
        "description": description,
        "headers": {name: ref("headers", header) for name, header in CACHEABLE_HEADERS.items()},
        "content": {media_type: {"schema": ref("schemas", schema)}},
    }


def _counts(description, schema):
    """A success of the count routes: cacheable as briefly as counts change."""
    response = cacheable(description, schema)
    response["headers"]["Cache-Control"] = ref("headers", "CacheControlCounts")
    return response


def _parameter(name, where, description, schema, required=False, example=None):
    parameter = {"name": name, "in": where, "required": required, "description": description}
    parameter["schema"] = schema
    if example is not None:
        parameter["example"] = example
    return parameter


def _header(description, schema, required=True):
    return {"description": description, "required": required, "schema": schema}


HTTP_DATE = (
    "^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-9]{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
    "[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT$"
)
QUERY_REFUSED = (
    "not UTF-8 once percent-decoded, a control or invisible character, or more than 50 "
    "parameters (`invalid_query`)"
)
BUILDS_REFUSED = (
    "missing_parameter",
    "superseded_parameter",
    "repeated_parameter",
    "invalid_query",
)

# fmt: off
PARAMETERS = {
    "Project": _parameter(
        "project", "query", "The project's slug, in any letter case. Missing or empty: "
        "`400 missing_parameter`; no such project: `404 unknown_project`.",
        {"type": "string", "minLength": 1}, True, "tinplate"),
    "Channel": _parameter(
        "channel", "query", "Only builds whose `channelVersion` is exactly this; empty means no "
        "filter. It replaces `game_version`, `version` and `minecraft_version`, which are "
        "refused with `400 superseded_parameter`.", {"type": "string"}, example="1.21.3"),
    "Experimental": _parameter(
        "experimental", "query", "`true`, in any letter case, includes experimental builds; any "
        "other value, or none, means stable builds only.",
        {"type": "string", "default": "false"}, example="true"),
    "Redirect": _parameter(
        "redirect", "query", "A javadoc page to open under the channel's root, e.g. "
        "`org/example/Foo.html#bar()`, percent-decoded once: segments of letters, digits and "
        "`._$-` joined by single `/`, then an optional `#fragment`; at most 512 characters. "
        "`..`, empty segments, a scheme, backslashes, control characters or a second round of "
        "percent-encoding: `400 invalid_redirect`. Empty means the channel's root.",
        {"type": "string", "maxLength": 512}, example="org/example/Foo.html"),
    "CountedProject": _parameter(
        "project", "query", "One project's slug, in any letter case; missing or empty: every "
        "project. No such project: `404 unknown_project`.", {"type": "string"},
        example="tinplate"),
    "Date": _parameter(
        "date", "query", "Only the downloads of this UTC day, written `DDMMYY` (the upstream's "
        "form; years 2000 to 2099), e.g. `221126` for 22 November 2026; empty means every day. "
        "Anything else: `400 invalid_date`.", {"type": "string", "pattern": "^([0-9]{6})?$"},
        example="221126"),
    "Days": _parameter(
        "days", "query", "How many days `dailyDownloads` covers, ending today (UTC): a whole "
        f"number, brought into {query.STATS_DAYS.start}..{query.STATS_DAYS.stop - 1}; empty "
        f"or missing: {query.DEFAULT_STATS_DAYS}. Anything else: `400 invalid_days`.",
        {"type": "string", "pattern": "^[0-9]*$"}, example="30"),
    "Build": _parameter(
        "build", "query", "The build number to check; give it or `sha256`, once: else "
        "`400 invalid_check`.", {"type": "string", "pattern": "^[0-9]+$"}, example="146"),
    "Sha256": _parameter(
        "sha256", "query", "The SHA-256 of the file to check (64 hexadecimal digits); no build "
        "has it: `404 unknown_artifact`.", {"type": "string", "pattern": "^[0-9a-fA-F]{64}$"}),
    "Range": _parameter(
        "Range", "header", "One byte range (`bytes=a-b`, `bytes=a-`, `bytes=-n`): `206`; "
        "several, or another unit: the whole file.", {"type": "string"}),
    "IfRange": _parameter(
        "If-Range", "header", "The file's ETag or Last-Modified: the range only if it is "
        "current, else the whole file.", {"type": "string"}),
    "IfNoneMatch": _parameter(
        "If-None-Match", "header", "ETags the client holds (`*` for any): `304` if one is "
        "current. Wins over `If-Modified-Since`.", {"type": "string"}),
    "IfMatch": _parameter(
        "If-Match", "header", "ETags of the file the client wants (`*` for any), compared "
        "strongly (a `W/` tag never matches): `412` if none is current.", {"type": "string"}),
    "IfUnmodifiedSince": _parameter(
        "If-Unmodified-Since", "header", "An HTTP date: `412` if the file is newer. Ignored "
        "when `If-Match` is given or the date is invalid.", {"type": "string"}),
    "IfModifiedSince": _parameter(
        "If-Modified-Since", "header", "An HTTP date: `304` if the data has not changed since. "
        "Ignored when `If-None-Match` is given or the date is invalid.", {"type": "string"}),
}
HEADERS = {
    "ETag": _header("A strong validator, a hash of the body, the same on every server serving "
                    "the same files. The gzipped body has its own.",
                    {"type": "string", "pattern": '^"[0-9a-f]+(-gzip)?"$'}),
    "LastModified": _header("When this server loaded the data shown, sent once that data is a "
                            "second old (HTTP dates have whole seconds).",
                            {"type": "string", "pattern": HTTP_DATE}, required=False),
    "CacheControlPublic": _header("`public, max-age=60` unless the server is run with another "
                                  "`--max-age`.",
                                  {"type": "string", "pattern": "^public, max-age=[0-9]+$"}),
    "CacheControlRedirect": _header("The redirect moves when a build lands: cacheable 10 "
                                    "seconds (less if the server's `--max-age` is lower); "
                                    "`private` where the redirect is a download counted, so "
                                    "that no shared cache answers it.",
                                    {"type": "string",
                                     "pattern": "^(public|private), max-age=([0-9]|10)$"}),
    "CacheControlCounts": _header("Counts change every 10 seconds at most: cacheable 10 "
                                  "seconds (less if the server's `--max-age` is lower).",
                                  {"type": "string", "pattern": "^public, max-age=([0-9]|10)$"}),
    "CacheControlNoStore": _header("Never cached.", {"const": "no-store"}),
    "CacheControlGone": _header("Cacheable for a day.", {"const": "public, max-age=86400"}),
    "Vary": _header("Sent with bodies of 1 KiB or more, which are gzipped for clients that "
                    "accept gzip.", {"const": "Accept-Encoding"}, required=False),
    "ContentEncoding": _header("`gzip` when the body is gzipped.", {"const": "gzip"},
                               required=False),
    "Location": _header("The target, made from the data's validated values.",
                        ref("schemas", "HttpUrl")),
    "Allow": _header("The methods the path answers: `PUT, DELETE` for a build's path "
                     "(`/api/v2/projects/{slug}/builds/{number}`), else `GET, HEAD, OPTIONS`.",
                     {"enum": ["GET, HEAD, OPTIONS", "PUT, DELETE"]}),
    "WWWAuthenticate": _header("The scheme a write takes.", {"const": "Bearer"}),
    "RetryAfter": _header("Seconds until this address may try again.",
                          {"type": "string", "pattern": "^[0-9]+$"}),
    "FileETag": _header("The quoted SHA-256 of the file, or of the checksum line for a "
                        "`.sha256`: a strong validator.",
                        {"type": "string", "pattern": '^"[0-9a-f]{64}"$'}),
    "FileCacheControl": _header("The bytes at a URL never change.",
                                {"const": "public, max-age=31536000, immutable"}),
    "ContentDisposition": _header("`attachment` with the file's name.",
                                  {"type": "string", "pattern": '^attachment; filename="'},
                                  required=False),
    "ReprDigest": _header("`sha-256=:BASE64:` of the whole file (RFC 9530).",
                          {"type": "string", "pattern": "^sha-256=:[A-Za-z0-9+/]{43}=:$"},
                          required=False),
    "AcceptRanges": _header("Byte ranges are answered.", {"const": "bytes"}, required=False),
    "ContentRange": _header("The range sent, or `bytes */LENGTH` for an unsatisfiable one.",
                            {"type": "string", "pattern": "^bytes ([0-9]+-[0-9]+|\\*)/[0-9]+$"}),
}
# A kept file's answers: what each carries.
FILE_HEADERS = {"ETag": "FileETag", "Cache-Control": "FileCacheControl",
                "Content-Disposition": "ContentDisposition", "Repr-Digest": "ReprDigest",
                "Accept-Ranges": "AcceptRanges"}
# The types a kept file's URL is answered with: the file's (by downloads.py's table), and its
# checksum line's.
FILE_TYPES = (
    *dict.fromkeys([*downloads.CONTENT_TYPES.values(), downloads.DEFAULT_CONTENT_TYPE]),
    downloads.CHECKSUM_CONTENT_TYPE.partition(";")[0],
)
RESPONSES = {
    "Builds": cacheable("The builds, ascending by `buildNumber`; `[]` when none passes the "
                         f"filters. {LOADED}", "BuildList"),
    "NotModified": {
        "description": "The client's copy, named by `If-None-Match` or dated by "
                       "`If-Modified-Since`, is current. No body.",
        "headers": {"ETag": ref("headers", "ETag"),
                    "Cache-Control": ref("headers", "CacheControlPublic"),
                    "Vary": ref("headers", "Vary")},
    },
    "NotModifiedFile": {
        "description": "The client's copy of the file (or of its checksum line) is current. "
                       "No body.",
        "headers": {"ETag": ref("headers", "FileETag"),
                    "Cache-Control": ref("headers", "FileCacheControl")},
    },
    "PreconditionFailed": {
        "description": "`If-Match` names no current ETag, or (without `If-Match`) the file is "
                       "newer than `If-Unmodified-Since`. Decided before `If-None-Match`, "
                       "`If-Modified-Since` and any range. No body.",
    },
    "RangeNotSatisfiable": {
        "description": "The range lies past the end of the file. No body.",
        "headers": {"Content-Range": ref("headers", "ContentRange")},
    },
    "ArtifactUnavailable": _error(
        "The file is missing from this server's artifact store, or is not the size recorded "
        "(`artifact_unavailable`): the rest of the API serves on; `/healthz` and "
        "`buildshelf check` say more.", "artifact_unavailable"),
    "BadCheckQuery": _error(
        "As for the builds endpoints, or `build` and `sha256` both or neither given, `build` "
        "not a whole number, `sha256` not 64 hexadecimal digits (`invalid_check`).",
        *BUILDS_REFUSED, "invalid_check"),
    "UnknownProjectArtifactOrNoBuild": _unknown_to_check(),
    "BadQuery": _error(
        "The query is refused: `project` missing or empty (`missing_parameter`); "
        "`game_version`, `version` or `minecraft_version` given (`superseded_parameter`: use "
        "`channel`); `project`, `channel` or `experimental` given twice (`repeated_parameter`); "
        f"{QUERY_REFUSED}.", *BUILDS_REFUSED),
    "BadDownloadUrl": _error(
        "The query is refused: as for the builds endpoints (`url` missing or empty: "
        "`missing_parameter`; given twice: `repeated_parameter`), or `url` is not the "
        "`downloadUrl` of a build served now (`invalid_download_url`): never followed.",
        *BUILDS_REFUSED, "invalid_download_url"),
    "BadJavadocQuery": _error(
        "The query is refused: as for the builds endpoints (`missing_parameter`, "
        "`superseded_parameter`, `repeated_parameter`, `invalid_query`; `redirect` too may be "
        "given only once), or `redirect` is not a page path (`invalid_redirect`).",
        *BUILDS_REFUSED, "invalid_redirect"),
    "InvalidQuery": _error(
        "The query is not UTF-8 once percent-decoded, holds a control or invisible character, "
        "or has more than 50 parameters (`invalid_query`). Every route checks this, even those "
        "that take no parameters.", "invalid_query"),
    "UnknownProject": _error("No project has that slug (`unknown_project`).", "unknown_project"),
    "DownloadCounts": _counts("The downloads counted. `Last-Modified` is when this server "
                              "first answered with these counts and data.", "Downloads"),
    "DownloadStats": _counts("The downloads counted. `Last-Modified` is when this server first "
                             "answered with these counts and data; `generatedAt` says the same "
                             "to the millisecond.", "DownloadStats"),
    "BadDownloadsQuery": _error(
        "The query is refused: `date` not a day written `DDMMYY` (`invalid_date`); "
        "`game_version`, `version` or `minecraft_version` given (`superseded_parameter`); "
        "`project`, `channel`, `experimental` or `date` given twice (`repeated_parameter`); "
        f"{QUERY_REFUSED}.", "invalid_date", "superseded_parameter", "repeated_parameter",
        "invalid_query"),
    "BadStatsQuery": _error(
        "The query is refused: as for the builds endpoints (`missing_parameter`, "
        "`superseded_parameter`, `repeated_parameter`, `invalid_query`; `days` too may be given "
        "only once), or `days` is not a whole number (`invalid_days`).",
        *BUILDS_REFUSED, "invalid_days"),
    "NotCountedOrUnknownProject": _error(
        "This server does not count downloads: it runs with `--count-downloads off` "
        "(`downloads_not_counted`, whatever the project); or no project has that slug "
        "(`unknown_project`).", "downloads_not_counted", "unknown_project"),
    "UnknownProjectNoBuildOrNoJavadoc": _error(
        "No project has that slug (`unknown_project`), the project has no javadoc: its "
        "`javadocBaseUrl` is `\"\"` (`no_javadoc`), or none of its builds passes the filters "
        "(`no_matching_build`).", "unknown_project", "no_javadoc", "no_matching_build"),
    "UnknownProjectOrNoBuild": _error(
        "No project has that slug (`unknown_project`), or none of its builds passes the filters "
        "(`no_matching_build`).", "unknown_project", "no_matching_build"),
    "NotFound": _error("Any path not listed in this document (`not_found`).", "not_found"),
    "MethodNotAllowed": _error(
        "A method other than GET, HEAD or OPTIONS on any path listed here outside `/api/v1` "
        "(`method_not_allowed`).", "method_not_allowed",
        headers={"Allow": ref("headers", "Allow")}),
    "Gone": _error("API version 1 was removed on 2025-11-05: use `/api/v2` "
                   "(`api_version_removed`).", "api_version_removed",
                   cache_control="CacheControlGone"),
    "BuildYanked": _yanked(),
    "InternalError": _error("A bug (`internal_error`): the trace is in the server's log, never "
                            "in the body.", "internal_error"),
    "Published": {
        "description": "A build published as it is now served (made from the data read back "
                       "after the write, so a `GET` that follows shows it): `201` added; `200` "
                       "an identical retry, which changed nothing, or a replace.",
        "headers": {"Cache-Control": ref("headers", "CacheControlNoStore")},
        "content": {"application/json": {"schema": ref("schemas", "Build")}},
    },
    "Yanked": {"description": "The build is yanked (or was already): it stays in its project "
                              "file, marked, and its kept file stays until `buildshelf purge`. "
                              "A `GET` that follows no longer shows it. No body."},
    "InvalidBuild": _error(
        "The build or the body is refused, the message naming the problem by the data files' "
        "and `buildshelf publish`'s rules (`invalid_build`): a key missing or of the wrong type, "
        "a bad file name or one with a path in it, a `sha256` or `size` that the bytes received "
        "do not match, `downloadUrl` beside a part `file`; a part unknown or given twice, a JSON "
        "part that is not an object, a multipart body with no end; or the query refused "
        f"({QUERY_REFUSED}).", "invalid_build", "invalid_query"),
    "Unauthorized": _error(
        "No credential, or one that is not valid: unknown, expired or revoked token, or a bad "
        "OIDC token (`unauthorized`).", "unauthorized",
        headers={"WWW-Authenticate": ref("headers", "WWWAuthenticate")}),
    "Forbidden": _error(
        "A valid credential of another project, or a valid OIDC token of a repository that "
        "is not a trusted publisher of this one (`forbidden`).", "forbidden"),
    "UnknownProjectToWrite": _error(
        "No project has that slug, in any letter case (`unknown_project`), for any valid "
        "credential.", "unknown_project"),
    "UnknownProjectOrBuild": _error(
        "No project has that slug (`unknown_project`), or it has no such build "
        "(`unknown_build`).", "unknown_project", "unknown_build"),
    "BuildExists": _error(
        "A different build of that number is there (`build_exists`): the message names the "
        "fields that differ. Nothing was written; `?replace=true` replaces it.", "build_exists"),
    "TooLarge": _error(
        "The request's `Content-Length` is over what the server takes, answered before the body "
        "is read: a file of `--max-file-mb` MiB plus 1,114,112 bytes for the part `build` and "
        "the framing; 1 MiB for a JSON build; 1 KiB for any other request. Or the part `file` "
        "itself is over `--max-file-mb` (`too_large`).", "too_large"),
    "UnsupportedMediaType": _error(
        "A body that is neither `multipart/form-data` nor `application/json` "
        "(`unsupported_media_type`).", "unsupported_media_type"),
    "TooManyRequests": _error(
        "Ten failed authentications (`401`) came from this address in a minute: every write "
        "from it is refused until the minute has passed, even with a valid credential "
        "(`too_many_requests`). Reads are never limited.", "too_many_requests",
        headers={"Retry-After": ref("headers", "RetryAfter")}),
    "CredentialsUnavailable": _error(
        "An OIDC token cannot be checked now: the issuer's keys cannot be fetched "
        "(`credentials_unavailable`). Tokens and reads are not affected.",
        "credentials_unavailable"),
    "InsufficientStorage": _error(
        "The server's disk (or quota) is full (`insufficient_storage`): nothing was written.",
        "insufficient_storage"),
}
# fmt: on


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


def _file(description, status):
    headers = {name: ref("headers", header) for name, header in FILE_HEADERS.items()}
    if status == "206":
        headers["Content-Range"] = ref("headers", "ContentRange")
    schema = {"schema": {"type": "string"}}
    return {"description": description, "headers": headers,
            "content": dict.fromkeys(FILE_TYPES, schema)}  # fmt: skip


def _operation(
    tag, operation_id, summary, parameters, responses, description=None, method="get", **more
):
    """One operation (GET unless told); a parameter or response given by name is one of the
    components."""
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
    return {method: operation}


CONDITIONAL = ("IfNoneMatch", "IfModifiedSince")
FILTERS = ("Project", "Channel", "Experimental")
# /builds and /builds/all are one operation under two names.
BUILD_LIST = {"200": "Builds", "304": "NotModified", "400": "BadQuery", "404": "UnknownProject", "500": "InternalError"}  # fmt: skip
NO_PARAMETERS = {"304": "NotModified", "400": "InvalidQuery", "500": "InternalError"}
ONE_BUILD = {"400": "BadQuery", "404": "UnknownProjectOrNoBuild", "500": "InternalError"}
REMOVED = "Answers `410` to any method."
WRITE_PARAMETERS = (
    {"name": "slug", "in": "path", "required": True, "description": "The project's slug, in any letter case.",
     "schema": {"type": "string"}},
    {"name": "number", "in": "path", "required": True, "description": "The build's number.",
     "schema": {"type": "string", "pattern": "^[0-9]+$"}},
)  # fmt: skip
WRITE_REFUSED = {
    "401": "Unauthorized", "403": "Forbidden", "413": "TooLarge", "429": "TooManyRequests",
    "500": "InternalError", "503": "CredentialsUnavailable", "507": "InsufficientStorage",
}  # fmt: skip
BEARER = [{"bearer": []}]
PUBLISH_TYPES = (
    "The body is `multipart/form-data` with a part `build`, the build's JSON, and a part "
    "`file` whose filename is the artifact's name, for a file Buildshelf keeps (it is served "
    "at `/downloads/...`; give the part `build` first); or `application/json`, the build, for "
    "a file kept elsewhere, at its `downloadUrl`."
)

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
         **ONE_BUILD, "400": "BadJavadocQuery", "404": "UnknownProjectNoBuildOrNoJavadoc"},
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
    f"{API}/download": _operation(
        "downloads", "redirectToDownload", "Redirect to a build's download, counted",
        (_parameter("url", "query", "The `downloadUrl` of a build served now, as the API "
                    "answers it (a kept file's too).", {"type": "string", "minLength": 1},
                    required=True,
                    example="https://ci.buildshelf.example/job/Tinplate/146/artifact/"
                            "tinplate-1.21.3-146.jar"),
         _parameter("project", "query", "The project whose build `url` is, in any letter case: "
                    "builds of two projects may share a URL, and the download counts for this "
                    "one (the pages' buttons give it). Without it, the first project by slug "
                    "that serves `url`.", {"type": "string"}, example="tinplate")),
        {"302": {"description": "`url` itself. No body. Never cached, so that each download "
                                "reaches the server to be counted.",
                 "headers": {"Location": ref("headers", "Location"),
                             "Cache-Control": ref("headers", "CacheControlNoStore")}},
         "400": "BadDownloadUrl", "500": "InternalError"},
        "The upstream's counting redirect, which its download buttons go through: the "
        "download counts once per client network and build a day (see docs/downloads.md), "
        "then the client is sent to `url`. Only the `downloadUrl` of a build served now is "
        "answered (not a yanked build's): this is never an open redirect."),
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
    f"{API}/downloads": _operation(
        "counts", "getDownloadCounts", "The downloads counted, per project",
        ("CountedProject", "Channel", "Experimental", "Date") + CONDITIONAL,
        {"200": ref("responses", "DownloadCounts"), "304": "NotModified",
         "400": "BadDownloadsQuery", "404": "NotCountedOrUnknownProject",
         "500": "InternalError"},
        "The upstream's totals: for one project or every project served (in slug order), the "
        "downloads of the builds passing the filters (without `experimental=true`, experimental "
        "builds are left out), ever or on one UTC day (`date`). A download is counted once per "
        "client network and build in 24 hours; yanked builds no longer count. The same shape "
        "with `--compat upstream`."),
    f"{API}/downloads/stats": _operation(
        "counts", "getDownloadStats", "A project's downloads counted: by day, game version "
        "and build", FILTERS + ("Days",) + CONDITIONAL,
        {"200": ref("responses", "DownloadStats"), "304": "NotModified",
         "400": "BadStatsQuery", "404": "NotCountedOrUnknownProject", "500": "InternalError"},
        "The upstream's statistics of one project's builds passing the filters: the total, a "
        "daily series of the last `days` days (UTC, zeros included), the downloads per game "
        "version (the first `N.N[.N]` of `channelVersion`) and, beyond the upstream, per build "
        "(not served with `--compat upstream`)."),
    "/metrics": _operation(
        "service", "getMetrics", "What the server did and serves, for Prometheus", (),
        {"400": "InvalidQuery",
         "200": {"description": "The metrics, listed in docs/metrics.md.",
                 "headers": {"Cache-Control": ref("headers", "CacheControlNoStore")},
                 "content": {media_type: {"schema": {"type": "string"}} for media_type in
                             ("text/plain", "application/openmetrics-text")}},
         "500": "InternalError"},
        "The Prometheus text format (`text/plain; version=0.0.4`), or OpenMetrics when `Accept` "
        "asks for it. For a scraper on the server's own machine: `deploy/nginx.conf` answers "
        "`404` for it on the public site; with `--metrics off`, so does Buildshelf."),
    f"{API}/builds/check": _operation(
        "builds", "checkForUpdate", "Whether a build is the latest passing the filters",
        FILTERS + ("Build", "Sha256") + CONDITIONAL,
        {"200": cacheable(f"The answer. {LOADED}", "UpdateCheck"), "304": "NotModified",
         "400": "BadCheckQuery", "404": "UnknownProjectArtifactOrNoBuild",
         "500": "InternalError"},
        "Give `build` (the number a server runs) or `sha256` (its file's hash; any build's hash "
        "counts, kept or not, yanked or not): `status` is `up_to_date`, `outdated`, `yanked` "
        "or `ahead` (`200`), or `unknown` (`404`); `behind` counts the builds passing the "
        "filters numbered above the highest build served with the same bytes; `latest` is "
        "the build `/api/v2/builds/latest` answers with."),
    DOWNLOADS + "/{project}/{build}/{sha256}/{file}": _operation(
        "downloads", "downloadFile", "A file Buildshelf keeps, or its checksum line",
        tuple(_path(name, text) for name, text in (
            ("project", "The project's slug."), ("build", "The build's number."),
            ("sha256", "The file's SHA-256: the bytes at a URL never change."),
            ("file", "The file's name, or the name and `.sha256` for its checksum line.")))
        + ("Range", "IfRange", "IfMatch", "IfUnmodifiedSince") + CONDITIONAL,
        {"200": _file("The file (or its `sha256sum -c` line).", "200"),
         "206": _file("One range of the file.", "206"), "304": "NotModifiedFile",
         "400": "InvalidQuery", "404": "NotFound", "410": "BuildYanked",
         "412": "PreconditionFailed", "416": "RangeNotSatisfiable",
         "500": "InternalError", "503": "ArtifactUnavailable"},
        "The bytes go out with a strong `ETag` (the quoted sha256), `Repr-Digest` (RFC 9530), "
        "`Content-Disposition: attachment` and a year's immutable caching; one byte range is "
        "answered `206`, several with the whole file; `If-Range` with another validator gives "
        "the whole file. The conditions are taken in RFC 9110's order: `If-Match` (else "
        "`If-Unmodified-Since`), then `If-None-Match` (else `If-Modified-Since`), then "
        "`If-Range` and `Range`. The checksum line has an `ETag` of its own and takes the "
        "same conditions, but no range."),
    f"{API}/projects/{{slug}}/builds/{{number}}": {
        **_operation(
            "publishing", "publishBuild", "Publish a build", WRITE_PARAMETERS + (
                {"name": "replace", "in": "query", "required": False,
                 "description": "`true`, in any letter case, replaces a different build of "
                                "the same number.", "schema": {"type": "string"}},),
            {"201": "Published", "200": "Published", "400": "InvalidBuild",
             "404": "UnknownProjectToWrite", "409": "BuildExists",
             "415": "UnsupportedMediaType", **WRITE_REFUSED},
            f"{PUBLISH_TYPES} The build goes through the same code as `buildshelf publish`: "
            "the same lock, rules and messages; the file is stored before the project file "
            "names it. An identical retry changes nothing; without `timestamp` it matches the "
            "build there whatever its time.",
            method="put", security=BEARER,
            requestBody={"required": True, "content": {
                "multipart/form-data": {
                    "schema": {"type": "object", "required": ["build"],
                               "properties": {"build": ref("schemas", "PublishedBuild"),
                                              "file": {"type": "string",
                                                       "contentMediaType":
                                                           "application/octet-stream"}}},
                    "encoding": {"build": {"contentType": "application/json"}}},
                "application/json": {"schema": ref("schemas", "PublishedBuild")}}}),
        **_operation(
            "publishing", "yankBuild", "Yank a build", WRITE_PARAMETERS,
            {"204": "Yanked", "400": "InvalidQuery", "404": "UnknownProjectOrBuild",
             **WRITE_REFUSED},
            "As `buildshelf yank`: the build is served no more, but stays in its file, marked "
            "yanked, and its kept file stays (`buildshelf unyank` restores it); its number may be "
            "published again.", method="delete", security=BEARER),
    },
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
            "status": {"enum": ["up_to_date", "outdated", "yanked", "ahead"], "type": "string",
                       "description": "`up_to_date`: the build is served and none passing the "
                                      "filters is newer; `outdated`: some are; `yanked`: the "
                                      "build was yanked, move to `latest`; `ahead`: a number "
                                      "above the latest that no build has (a local or "
                                      "unpublished build). A build never there is `404` with "
                                      "the status `unknown`."},
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
            "buildNumber": {"type": "integer", "minimum": 0,
                            "description": "The path's number, if given."},
        },
        "required": ["channelVersion"], "additionalProperties": False,
        "examples": [{"channelVersion": "1.21.3", "timestamp": 1712494188349,
                      "commits": [{"message": "Update upstream (bb441a3)",
                                   "hash": "4c7b68ce5c0be31b0767eb687d1cbee97723d7b7"}]}],
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
redirects to the javadoc of a channel. Two operations write, with a bearer credential (the \
`bearer` security scheme): `PUT` publishes a build and `DELETE` yanks one. Every other \
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
DELETE` on a build's path) for any other method on a listed path outside `/api/v1`. A body of \
more than 1 KiB on any route but the writes is `413 too_large`.

`OPTIONS` is a CORS preflight that allows `GET` and `HEAD` from any origin, never `PUT`, \
`DELETE` or the `Authorization` header: browsers on other origins can read, never write.

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
        "paths": copy.deepcopy(PATHS),
        "components": {"parameters": PARAMETERS, "headers": HEADERS, "responses": dict(RESPONSES),
                       "schemas": schemas, "securitySchemes": SECURITY_SCHEMES},
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
