"""The responses the OpenAPI document's operations name (its components), written by hand:
a success with its validators and caching headers, an error narrowed to the codes it may
carry, and the prose that says when each is answered."""

from buildshelf.web.openapi_parameters import ref

LOADED = "`Last-Modified` is when this server loaded the project's file."


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
        "latest build (null when it has none). Never cached: an unyank shows at once. A "
        "browser following the link (an `Accept` that ranks `text/html` above "
        "`application/json`) gets an HTML page instead, which says the same and links the "
        "latest build; curl, wget and launchers (`*/*`, or no `Accept`) get the JSON.",
        "build_yanked",
        headers={"Vary": ref("headers", "VaryAccept")},
    )
    gone["content"]["text/html"] = {"schema": {"type": "string"}}
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
    "UnknownProjectNoBuildOrNoFile": _error(
        "No project has that slug (`unknown_project`), none of its builds passes the filters "
        "(`no_matching_build`), or the build has no file of the key `download` names "
        "(`unknown_download`, naming the keys it has).", "unknown_project", "no_matching_build",
        "unknown_download"),
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
    "Yanked": {"description": "The build is yanked (or was already, and keeps its mark and "
                              "reason): it stays in its project file, marked with the body's "
                              "`reason`, and its kept file stays until purged. A `GET` that "
                              "follows no longer shows it. No body."},
    "Unyanked": {"description": "The build is served again as it was before its yank (or was "
                                "served already: a retry changes nothing); a `GET` that follows "
                                "shows it. No body."},
    "Purged": {
        "description": "What became of each kept file of the yanked build: deleted, or kept "
                       "for another build; the build stays yanked, its URLs `410`.",
        "headers": {"Cache-Control": ref("headers", "CacheControlNoStore")},
        "content": {"application/json": {"schema": ref("schemas", "PurgedFiles")}},
    },
    "InvalidReason": _error(
        "The body is not a JSON object with at most `reason`, a string of text: the "
        "message names the problem (`invalid_reason`), by the data files' rule of a "
        "`yankReason`; or a `reason` given in the query; or the query refused "
        f"({QUERY_REFUSED}).", "invalid_reason", "invalid_query"),
    "UnyankConflict": _error(
        "A file of the yanked build was purged (`build_purged`): only a `PUT` (with "
        "`?replace=true`) serves it again; or the project's file has a hand-edit error "
        "(`project_file_invalid`), which no retry fixes.", "build_purged",
        "project_file_invalid"),
    "PurgeConflict": _error(
        "The build is served, not yanked (`build_not_yanked`): yank it first; or a data file "
        "has a hand-edit error (`project_file_invalid`): it may use any file, so none is "
        "deleted until it is fixed.", "build_not_yanked", "project_file_invalid"),
    "InvalidBuild": _error(
        "The build or the body is refused, the message naming the problem by the data files' "
        "and `buildshelf publish`'s rules (`invalid_build`): a key missing or of the wrong type, "
        "a bad file name or one with a path in it, a `sha256` or `size` that the bytes received "
        "do not match, `downloadUrl` beside a part `file`; an extra file's key that is not "
        "`kind:variant` or is `server:default`, a file name another file of the build has, "
        "more than 16 extra files; a part unknown or given twice, a JSON "
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
    "BuildConflict": _error(
        "A different build of that number is there (`build_exists`): the message names the "
        "fields that differ. Nothing was written; `?replace=true` replaces it. Or the "
        "project's file has a hand-edit error (`project_file_invalid`), which the message "
        "places as `buildshelf publish` does: nothing is written until it is fixed by hand, "
        "and no retry helps.", "build_exists", "project_file_invalid"),
    "ProjectFileInvalid": _error(
        "The project's file has a hand-edit error (`project_file_invalid`), which the message "
        "places as `buildshelf yank` does: nothing is written until it is fixed by hand, and "
        "no retry helps.", "project_file_invalid"),
    "TooLarge": _error(
        "The request's `Content-Length` is over what the server takes, answered before the body "
        "is read: a file of `--max-file-mb` MiB plus 1,114,112 bytes for the part `build` and "
        "the framing (the extra files of a publish count with the part `file`); 1 MiB for a "
        "JSON build; 1 KiB for any other request. Or the part `file` or a part `download:KEY` "
        "itself is over `--max-file-mb` (`too_large`).", "too_large"),
    "UnsupportedMediaType": _error(
        "A body of a type the operation does not take (`unsupported_media_type`): a publish's "
        "is `multipart/form-data` or `application/json`, a yank's `application/json`.",
        "unsupported_media_type"),
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
