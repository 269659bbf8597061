"""The parameters and headers the OpenAPI document's operations name (its components),
written by hand: each query parameter and request header with its rules and the refusals it
earns, and each header an answer carries. `ref` names a component."""

from buildshelf.web import query


def ref(kind: str, name: str) -> dict:
    return {"$ref": f"#/components/{kind}/{name}"}


def parameter(name, where, description, schema, required=False, example=None):
    made = {"name": name, "in": where, "required": required, "description": description}
    made["schema"] = schema
    if example is not None:
        made["example"] = example
    return made


def _header(description, schema, required=True):
    return {"description": description, "required": required, "schema": schema}


HTTP_DATE = (
    "^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-9]{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
    "[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT$"
)

# fmt: off
PARAMETERS = {
    "Project": parameter(
        "project", "query", "The project's slug, in any letter case. Missing or empty: "
        "`400 missing_parameter`; no such project: `404 unknown_project`.",
        {"type": "string", "minLength": 1}, True, "tinplate"),
    "Channel": parameter(
        "channel", "query", "Only builds whose `channelVersion` is exactly this; empty means no "
        "filter. It replaces `game_version`, `version` and `minecraft_version`, which are "
        "refused with `400 superseded_parameter`.", {"type": "string"}, example="1.21.3"),
    "Experimental": parameter(
        "experimental", "query", "`true`, in any letter case, includes experimental builds; any "
        "other value, or none, means stable builds only.",
        {"type": "string", "default": "false"}, example="true"),
    "Download": parameter(
        "download", "query", "The key of the build's file to download (`kind:variant`): "
        "`server:default`, its primary file, when none or empty; or one of its extra files "
        "(`downloads`). A key the build has no file of: `404 unknown_download`, naming the "
        "keys it has.", {"type": "string"}, example="server:mojmap"),
    "Redirect": parameter(
        "redirect", "query", "A javadoc page to open under the channel's root, e.g. "
        "`org/example/Foo.html#bar()`, percent-decoded once: segments of letters, digits and "
        "`._$-` joined by single `/`, then an optional `#fragment`; at most 512 characters. "
        "`..`, empty segments, a scheme, backslashes, control characters or a second round of "
        "percent-encoding: `400 invalid_redirect`. Empty means the channel's root.",
        {"type": "string", "maxLength": 512}, example="org/example/Foo.html"),
    "CountedProject": parameter(
        "project", "query", "One project's slug, in any letter case; missing or empty: every "
        "project. No such project: `404 unknown_project`.", {"type": "string"},
        example="tinplate"),
    "Date": parameter(
        "date", "query", "Only the downloads of this UTC day, written `DDMMYY` (the upstream's "
        "form; years 2000 to 2099), e.g. `221126` for 22 November 2026; empty means every day. "
        "Anything else: `400 invalid_date`.", {"type": "string", "pattern": "^([0-9]{6})?$"},
        example="221126"),
    "Days": parameter(
        "days", "query", "How many days `dailyDownloads` covers, ending today (UTC): a whole "
        f"number, brought into {query.STATS_DAYS.start}..{query.STATS_DAYS.stop - 1}; empty "
        f"or missing: {query.DEFAULT_STATS_DAYS}. Anything else: `400 invalid_days`.",
        {"type": "string", "pattern": "^[0-9]*$"}, example="30"),
    "Build": parameter(
        "build", "query", "The build number to check; give it or `sha256`, once: else "
        "`400 invalid_check`.", {"type": "string", "pattern": "^[0-9]+$"}, example="146"),
    "Sha256": parameter(
        "sha256", "query", "The SHA-256 of the file to check (64 hexadecimal digits): any "
        "file of a build, its primary or an extra; no build has it: `404 unknown_artifact`.", {"type": "string", "pattern": "^[0-9a-fA-F]{64}$"}),
    "Range": parameter(
        "Range", "header", "One byte range (`bytes=a-b`, `bytes=a-`, `bytes=-n`): `206`; "
        "several, or another unit: the whole file.", {"type": "string"}),
    "IfRange": parameter(
        "If-Range", "header", "The file's ETag or Last-Modified: the range only if it is "
        "current, else the whole file.", {"type": "string"}),
    "IfNoneMatch": parameter(
        "If-None-Match", "header", "ETags the client holds (`*` for any): `304` if one is "
        "current. Wins over `If-Modified-Since`.", {"type": "string"}),
    "IfMatch": parameter(
        "If-Match", "header", "ETags of the file the client wants (`*` for any), compared "
        "strongly (a `W/` tag never matches): `412` if none is current.", {"type": "string"}),
    "IfUnmodifiedSince": parameter(
        "If-Unmodified-Since", "header", "An HTTP date: `412` if the file is newer. Ignored "
        "when `If-Match` is given or the date is invalid.", {"type": "string"}),
    "IfModifiedSince": parameter(
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
    "VaryAccept": _header("The answer is a page for a browser (an `Accept` that ranks "
                          "`text/html` above `application/json`) and JSON for any other "
                          "client: no cache may answer one with the other.",
                          {"const": "Accept"}),
    "ContentEncoding": _header("`gzip` when the body is gzipped.", {"const": "gzip"},
                               required=False),
    "Location": _header("The target, made from the data's validated values.",
                        ref("schemas", "HttpUrl")),
    "Allow": _header("The methods the path answers: `PUT, DELETE` for a build's path "
                     "(`/api/v2/projects/{slug}/builds/{number}`), `POST` for its `/unyank` "
                     "and `/purge`, else `GET, HEAD, OPTIONS`.",
                     {"enum": ["GET, HEAD, OPTIONS", "PUT, DELETE", "POST"]}),
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
# fmt: on
