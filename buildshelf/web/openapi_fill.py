"""The Fill v3 API in the OpenAPI document (docs/fill-v3.md): its operations under `/v3`
(`PATHS`), their responses and errors in Fill's shape (`RESPONSES`), its schemas from
fill_shapes.py's structs with examples made by fill_mapping.py (`schemas`), and its tag.
"""

import msgspec

from buildshelf.model import Build, Commit, Project, VersionInfo
from buildshelf.web.fill_mapping import fill_build, version_response
from buildshelf.web.fill_shapes import (
    FILL_CHANNELS,
    FillBuild,
    FillError,
    FillProjectResponse,
    FillProjects,
    FillVersionResponse,
    FillVersions,
)
from buildshelf.web.openapi_parameters import parameter, ref
from buildshelf.web.openapi_responses import LOADED, cacheable
from buildshelf.web.query import FILL_API

TAG = (
    "fill",
    "The Fill v3 read API of PaperMC's downloads service, from the same data: what "
    "run-task, mc-image-helper and scripts that speak Fill read (docs/fill-v3.md). Its errors "
    "are in Fill's shape, `FillError`, whatever the path under `/v3`.",
)
SCHEMA_REF = "#/components/schemas/{name}"


def _fill_error(description, *codes):
    """An error under /v3: FillError narrowed to the codes this response may carry."""
    code = {"const": codes[0]} if len(codes) == 1 else {"enum": list(codes)}
    return {
        "description": description,
        "headers": {"Cache-Control": ref("headers", "CacheControlNoStore")},
        "content": {
            "application/json": {
                "schema": {**ref("schemas", "FillError"), "properties": {"error": code}}
            }
        },
    }


QUERY_REFUSED = (
    "The query is not UTF-8 once percent-decoded, holds a control or invisible character, or "
    "has more than 50 parameters (`invalid_query`). Other parameters are ignored, as Fill "
    "ignores them."
)
_PROJECT = "No project has that slug (`project_not_found`)"
_VERSION = "no build of the project served has that `channelVersion` (`version_not_found`)"

# fmt: off
RESPONSES = {
    "FillProjects": cacheable("Every project, in slug order.", "FillProjects"),
    "FillProject": cacheable(f"The project. {LOADED}", "FillProjectResponse"),
    "FillVersions": cacheable(f"The versions, the newest first. {LOADED}", "FillVersions"),
    "FillVersion": cacheable(f"The version. {LOADED}", "FillVersionResponse"),
    "FillBuilds": cacheable(f"The builds, the newest first; `[]` when none is in the channels "
                            f"asked for. {LOADED}", "FillBuildList"),
    "FillBuild": cacheable(f"The build. {LOADED}", "FillBuild"),
    "FillInvalidQuery": _fill_error(QUERY_REFUSED, "invalid_query"),
    "FillBadChannel": _fill_error(
        f"A `channel` that is not `ALPHA`, `BETA`, `STABLE` or `RECOMMENDED`, in capitals "
        f"(`invalid_channel`). {QUERY_REFUSED}", "invalid_channel", "invalid_query"),
    "FillBadBuild": _fill_error(
        "The build is not a whole number nor `latest` (`invalid_build`). " + QUERY_REFUSED,
        "invalid_build", "invalid_query"),
    "FillUnknownProject": _fill_error(f"{_PROJECT}.", "project_not_found"),
    "FillUnknownVersion": _fill_error(f"{_PROJECT}, or {_VERSION}.", "project_not_found",
                                      "version_not_found"),
    "FillUnknownBuild": _fill_error(
        f"{_PROJECT}, {_VERSION}, or the version has no build of that number served "
        "(`build_not_found`): none, one of another version, or a yanked one.",
        "project_not_found", "version_not_found", "build_not_found"),
    "FillInternalError": _fill_error("A bug (`internal_error`): the trace is in the server's "
                                     "log, never in the body.", "internal_error"),
}
# Any path under /v3 that is not listed, and another method on one that is: Fill's codes.
UNKNOWN_PATH = _fill_error("Any path under `/v3` not listed here (`unknown_method`, Fill's "
                           "code).", "unknown_method")
OTHER_METHOD = _fill_error("A method other than GET, HEAD or OPTIONS on a path under `/v3` "
                           "(`method_not_allowed`).", "method_not_allowed")
# fmt: on

CONDITIONAL = ("IfNoneMatch", "IfModifiedSince")
PROJECT = parameter("project", "path", "The project's slug, in any letter case.",
                    {"type": "string"}, True, "tinplate")  # fmt: skip
VERSION = parameter("version", "path", "A `channelVersion` of the project's builds, exactly.",
                    {"type": "string"}, True, "1.21.3")  # fmt: skip
BUILD = parameter("build", "path", "The build's number.", {"type": "string"}, True, "146")
_CHANNEL = "(" + "|".join(FILL_CHANNELS) + ")"
CHANNEL = parameter(
    "channel", "query", "Only the builds of these channels: one, given again for each other "
    "or several separated by commas (`STABLE,BETA`); none means every channel.",
    {"type": "string", "pattern": f"^{_CHANNEL}(,{_CHANNEL})*$"}, example="STABLE",
)  # fmt: skip
_ANSWERED = {"304": "NotModified", "500": "FillInternalError"}


def _get(operation_id, summary, parameters, responses, description):
    operation = {"tags": [TAG[0]], "operationId": operation_id, "summary": summary,
                 "description": description, "parameters": [
                     ref("parameters", p) if isinstance(p, str) else p
                     for p in (*parameters, *CONDITIONAL)]}  # fmt: skip
    operation["responses"] = {
        status: ref("responses", name) for status, name in {**responses, **_ANSWERED}.items()
    }
    return {"get": operation}


BUILDS = FILL_API + "/projects/{project}/versions/{version}/builds"
# fmt: off
PATHS = {
    FILL_API + "/projects": _get(
        "fillListProjects", "Every project, with its versions by family", (),
        {"200": "FillProjects", "400": "FillInvalidQuery"},
        "Fill's `ProjectsResponse`: each project's id (its slug), name (its `ciJob`) and "
        "versions by family."),
    FILL_API + "/projects/{project}": _get(
        "fillGetProject", "A project, with its versions by family", (PROJECT,),
        {"200": "FillProject", "400": "FillInvalidQuery", "404": "FillUnknownProject"},
        "Families and their versions, the newest first: a version is as new as its first build "
        "served, a family as its first version."),
    FILL_API + "/projects/{project}/versions": _get(
        "fillListVersions", "A project's versions, with their builds", (PROJECT,),
        {"200": "FillVersions", "400": "FillInvalidQuery", "404": "FillUnknownProject"},
        "Each `channelVersion` with a build served, the newest first (by its first build), with "
        "its support and Java from the project file's `versions` block (or the defaults) and "
        "its builds' numbers, the newest first. An object, as Fill answers."),
    FILL_API + "/projects/{project}/versions/{version}": _get(
        "fillGetVersion", "A version, with its builds", (PROJECT, VERSION),
        {"200": "FillVersion", "400": "FillInvalidQuery", "404": "FillUnknownVersion"},
        "One entry of `/versions`."),
    BUILDS: _get(
        "fillListBuilds", "A version's builds", (PROJECT, VERSION, CHANNEL),
        {"200": "FillBuilds", "400": "FillBadChannel", "404": "FillUnknownVersion"},
        "Its builds served, the newest first, in the channels asked for; a bare array, as Fill "
        "answers."),
    BUILDS + "/latest": _get(
        "fillGetLatestBuild", "A version's newest build", (PROJECT, VERSION),
        {"200": "FillBuild", "400": "FillInvalidQuery", "404": "FillUnknownVersion"},
        "The highest-numbered build served of the version, whatever its channel (as Fill): "
        "the same body as `/builds/{build}` for it."),
    BUILDS + "/{build}": _get(
        "fillGetBuild", "A build of a version", (PROJECT, VERSION, BUILD),
        {"200": "FillBuild", "400": "FillBadBuild", "404": "FillUnknownBuild"},
        "Its `downloads` has its file as `server:default` when the data give its SHA-256 and "
        "size, then its extra files that have both, by key; else it is `{}`: a checksum is "
        "never made up."),
}
# fmt: on

# The examples are made by the mapping, so they show what is served.
EXAMPLE_PROJECT = Project.of(
    (
        Build(number=146, url="https://ci.buildshelf.example/job/Tinplate/146/",
              download_url="https://ci.buildshelf.example/job/Tinplate/146/artifact/"
                           "tinplate-1.21.3-146.jar",
              channel="1.21.3", timestamp=1712494188349, is_experimental=False,
              commits=(Commit("Update upstream (bb441a3)",
                              "4c7b68ce5c0be31b0767eb687d1cbee97723d7b7"),),
              sha256="5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef",
              size=52636397),
    ),
    slug="tinplate", ci_job="Tinplate", ci_job_url="https://ci.buildshelf.example/job/Tinplate/",
    versions={"1.21.3": VersionInfo(java_flags=("-XX:+UseG1GC",))},
)  # fmt: skip


def schemas() -> dict:
    """The schemas of what /v3 serves, each object strict, with the error codes RESPONSES
    name; examples of a build and a version."""
    _, components = msgspec.json.schema_components(
        (FillProjects, FillProjectResponse, FillVersions, FillVersionResponse, FillBuild,
         FillError), ref_template=SCHEMA_REF)  # fmt: skip
    for schema in components.values():
        schema.pop("title", None)
        schema["description"] = " ".join(schema["description"].split())
        schema["additionalProperties"] = False
    codes = {}
    for response in (*RESPONSES.values(), UNKNOWN_PATH, OTHER_METHOD):
        schema = response.get("content", {}).get("application/json", {}).get("schema", {})
        error = schema.get("properties", {}).get("error", {})
        codes.update(dict.fromkeys(error.get("enum", [error["const"]] if "const" in error else [])))
    components["FillError"]["properties"]["error"]["enum"] = list(codes)
    components["FillBuildList"] = {
        "description": "Builds, the newest first.",
        "type": "array",
        "items": ref("schemas", "FillBuild"),
    }
    build = EXAMPLE_PROJECT.builds[0]
    url = "https://builds.example.org/downloads/tinplate/146/{sha256}/tinplate-1.21.3-146.jar"
    example = fill_build(EXAMPLE_PROJECT, build, lambda *_: url.format(sha256=build.sha256))
    components["FillBuild"]["examples"] = [msgspec.to_builtins(example)]
    components["FillVersionResponse"]["examples"] = [
        msgspec.to_builtins(version_response(EXAMPLE_PROJECT, "1.21.3"))
    ]
    return components


def either(response: dict, fill_response: dict) -> dict:
    """A response of any path (NotFound, MethodNotAllowed): its JSON is `response`'s, or in
    Fill's shape under /v3."""
    merged = {**response, "description": f"{response['description']} Under `/v3`: "
              + fill_response["description"][0].lower() + fill_response["description"][1:]}  # fmt: skip
    media = response["content"]["application/json"]
    merged["content"] = {"application/json": {"schema": {"anyOf": [
        media["schema"], fill_response["content"]["application/json"]["schema"]]}}}  # fmt: skip
    return merged
