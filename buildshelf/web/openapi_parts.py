"""The reusable parts of the OpenAPI document, written by hand: the parameters, headers and
responses that operations name (openapi.py assembles the document from them).
"""

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
    "Allow": _header("The methods this API answers.", {"const": "GET, HEAD, OPTIONS"}),
    "FileETag": _header("The quoted SHA-256 of the file: a strong validator.",
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
        "description": "The client's copy of the file is current. No body.",
        "headers": {"ETag": ref("headers", "FileETag"),
                    "Cache-Control": ref("headers", "FileCacheControl")},
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
    "UnknownProjectArtifactOrNoBuild": _error(
        "No project has that slug (`unknown_project`), no build of it has that sha256 "
        "(`unknown_artifact`), or none passes the filters (`no_matching_build`).",
        "unknown_project", "unknown_artifact", "no_matching_build"),
    "BadQuery": _error(
        "The query is refused: `project` missing or empty (`missing_parameter`); "
        "`game_version`, `version` or `minecraft_version` given (`superseded_parameter`: use "
        "`channel`); `project`, `channel` or `experimental` given twice (`repeated_parameter`); "
        f"{QUERY_REFUSED}.", *BUILDS_REFUSED),
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
    "InternalError": _error("A bug (`internal_error`): the trace is in the server's log, never "
                            "in the body.", "internal_error"),
}
# fmt: on
