"""The operations of the OpenAPI document, path by path (`PATHS`), written by hand: the
parameters each takes and the responses it gives, named by their components, and the prose
that says what it answers."""

from buildshelf.model import DOWNLOAD_KEY_PATTERN, MAX_PUBLISHED_EXTRAS, json_pattern
from buildshelf.web import downloads
from buildshelf.web.openapi_parameters import parameter, ref
from buildshelf.web.openapi_responses import LOADED, cacheable
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


# A kept file's answers: what each carries.
FILE_HEADERS = {"ETag": "FileETag", "Cache-Control": "FileCacheControl",
                "Content-Disposition": "ContentDisposition", "Repr-Digest": "ReprDigest",
                "Accept-Ranges": "AcceptRanges"}  # fmt: skip
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
    "at `/downloads/...`; give the part `build` first), and a part `download:KEY` for each "
    "extra file to keep, by the same rules (16 at most); or `application/json`, the build, "
    "for a file kept elsewhere, at its `downloadUrl`. The extra files kept elsewhere are the "
    "build's `downloads`."
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
        FILTERS + ("Download",),
        {"302": _redirect("The build's `downloadUrl`, or the `url` of the file `download` "
                          "names. No body."),
         **ONE_BUILD, "404": "UnknownProjectNoBuildOrNoFile"},
        "The upstream's download link, outside `/api/v2`: the `downloadUrl` of the build "
        "`/api/v2/builds/latest` answers with, by the same rules and with the same errors; "
        "with `download`, the file of that build of this key. "
        "`curl -fL -o server.jar` follows it; clients that name the file after the URL name it "
        "`latest`."),
    f"{API}/download": _operation(
        "downloads", "redirectToDownload", "Redirect to a build's download, counted",
        (parameter("url", "query", "The `downloadUrl` of a build served now, as the API "
                    "answers it (a kept file's too).", {"type": "string", "minLength": 1},
                    required=True,
                    example="https://ci.buildshelf.example/job/Tinplate/146/artifact/"
                            "tinplate-1.21.3-146.jar"),
         parameter("project", "query", "The project whose build `url` is, in any letter case: "
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
        "same conditions, but no range. A build's primary file and each of its extra files "
        "kept (`downloads`) are served so, each at its own URL; a download of an extra file "
        "counts for its build."),
    f"{API}/projects/{{slug}}/builds/{{number}}": {
        **_operation(
            "publishing", "publishBuild", "Publish a build", WRITE_PARAMETERS + (
                {"name": "replace", "in": "query", "required": False,
                 "description": "`true`, in any letter case, replaces a different build of "
                                "the same number.", "schema": {"type": "string"}},),
            {"201": "Published", "200": "Published", "400": "InvalidBuild",
             "404": "UnknownProjectToWrite", "409": "BuildConflict",
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
                                                           "application/octet-stream"}},
                               "patternProperties": {
                                   f"^download:{json_pattern(DOWNLOAD_KEY_PATTERN)[1:]}": {
                                       "type": "string",
                                       "contentMediaType": "application/octet-stream",
                                       "description": "An extra file to keep, under its key."}},
                               "additionalProperties": False,
                               "maxProperties": 2 + MAX_PUBLISHED_EXTRAS},
                    "encoding": {"build": {"contentType": "application/json"}}},
                "application/json": {"schema": ref("schemas", "PublishedBuild")}}}),
        **_operation(
            "publishing", "yankBuild", "Yank a build", WRITE_PARAMETERS,
            {"204": "Yanked", "400": "InvalidReason", "404": "UnknownProjectOrBuild",
             "409": "ProjectFileInvalid", "415": "UnsupportedMediaType", **WRITE_REFUSED},
            "As `buildshelf yank`: the build is served no more, but stays in its file, marked "
            "yanked, with the body's `reason`, and its kept file stays (`.../unyank` restores "
            "it); its number may be published again.", method="delete", security=BEARER,
            requestBody={"required": False, "content": {
                "application/json": {"schema": ref("schemas", "YankReason")}}}),
    },
    f"{API}/projects/{{slug}}/builds/{{number}}/unyank": _operation(
        "publishing", "unyankBuild", "Unyank a build", WRITE_PARAMETERS,
        {"204": "Unyanked", "400": "InvalidQuery", "404": "UnknownProjectOrBuild",
         "409": "UnyankConflict", **WRITE_REFUSED},
        "As `buildshelf unyank`: a yanked build is served again, as it was. No body.",
        method="post", security=BEARER),
    f"{API}/projects/{{slug}}/builds/{{number}}/purge": _operation(
        "publishing", "purgeBuild", "Purge a yanked build's files", WRITE_PARAMETERS,
        {"200": "Purged", "400": "InvalidQuery", "404": "UnknownProjectOrBuild",
         "409": "PurgeConflict",
         **{status: name for status, name in WRITE_REFUSED.items() if status != "507"}},
        "As `buildshelf purge` of this build alone, whenever it was yanked: each object of its "
        "kept files (primary and extra) is deleted unless another build uses the same bytes. "
        "Only a yanked build's: the build stays yanked. No body.", method="post",
        security=BEARER),
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
