"""The Fill v3 read API (PaperMC's Fill, docs/fill-v3.md) over the same data: the projects, a
project, its versions, a version, its builds (by channel), a build and the latest, answered
like the v2 reads (service.send_json: made once per data version, ETag and 304, gzip, answered
from memory). Each route is a function of the Service, listed in ROUTES, which
server.make_app registers; errors are ApiErrors, which answers.error_response writes in
Fill's shape under FILL_API.
"""

from buildshelf.model import whole_number
from buildshelf.web import query
from buildshelf.web.answers import encode
from buildshelf.web.fill_mapping import (
    MAX_INT,
    builds_of,
    channel,
    fill_build,
    project_response,
    version_response,
    versions_newest_first,
)
from buildshelf.web.fill_shapes import FILL_CHANNELS, FillProjects, FillVersions
from buildshelf.web.query import FILL_API, ApiError
from buildshelf.web.service import Service

PROJECTS = FILL_API + "/projects"
VERSIONS = PROJECTS + "/<project>/versions"
BUILDS = VERSIONS + "/<version>/builds"
# Fill's not-found messages, then ours: what was not found, and where to look.
NOT_FOUND = "No {} was found with the given identifier"
CHANNEL_RULE = "ALPHA, BETA, STABLE or RECOMMENDED (in capitals)"


def _project(snapshot, slug):
    project = snapshot.project(slug)
    if project is None:
        raise ApiError(
            404,
            "project_not_found",
            f"{NOT_FOUND.format('project')}: {query.shown(slug)} (see {PROJECTS})",
        )
    return project


def _builds(project, version):
    """The builds of `version` served here (ascending), or a 404: a version is served while
    it has one."""
    builds = builds_of(project, version)
    if not builds:
        raise ApiError(
            404,
            "version_not_found",
            f"{NOT_FOUND.format('version')}: {query.shown(version)} "
            f"(see {PROJECTS}/{project.slug}/versions)",
        )
    return builds


def _channels(pairs) -> frozenset[str] | None:
    """The channels `?channel=` asks for (repeated, or separated by commas), None for all."""
    values = [value for name, value in pairs if name == "channel"]
    if not values:
        return None
    channels = frozenset(part for value in values for part in value.split(","))
    unknown = sorted(channels - set(FILL_CHANNELS))
    if unknown:
        raise ApiError(
            400,
            "invalid_channel",
            f"'channel' must be {CHANNEL_RULE}, or several of them separated by commas: "
            f"not {query.shown(unknown[0])}",
        )
    return channels


def projects(service: Service):
    """Every project, in slug order, with its versions by family."""
    query.parse()  # takes no parameter, but refuses a malformed query like every route
    snapshot = service.store.snapshot()

    def body():
        return encode(FillProjects([project_response(p) for p in snapshot.projects.values()]))

    return service.send_json(snapshot, "fill projects", body, snapshot)


def project(service: Service, project):
    """A project and its versions by family, the newest first."""
    query.parse()
    snapshot = service.store.snapshot()
    found = _project(snapshot, project)
    body = lambda: encode(project_response(found))  # noqa: E731
    return service.send_json(found, "fill project", body, snapshot)


def versions(service: Service, project):
    """A project's versions, the newest first, each with its builds."""
    query.parse()
    snapshot = service.store.snapshot()
    found = _project(snapshot, project)

    def body():
        return encode(
            FillVersions([version_response(found, v) for v in versions_newest_first(found)])
        )

    return service.send_json(found, "fill versions", body, snapshot)


def version(service: Service, project, version):
    """One version and its builds."""
    query.parse()
    snapshot = service.store.snapshot()
    found = _project(snapshot, project)
    _builds(found, version)
    body = lambda: encode(version_response(found, version))  # noqa: E731
    return service.send_json(found, ("fill version", version), body, snapshot)


def builds(service: Service, project, version):
    """A version's builds in the channels asked for (all by default), the newest first."""
    channels = _channels(query.parse())
    snapshot = service.store.snapshot()
    found = _project(snapshot, project)
    served = _builds(found, version)
    url = service.shapes.file_url

    def body():
        return encode(
            [
                fill_build(found, build, url)
                for build in reversed(served)
                if channels is None or channel(found, build) in channels
            ]
        )

    return service.send_json(found, ("fill builds", version, channels), body, snapshot)


def build(service: Service, project, version, build):
    """One build of a version, by its number."""
    query.parse()
    number = whole_number(build)
    if number is None:
        raise ApiError(
            400, "invalid_build", f"a build is a whole number, or latest: not {query.shown(build)}"
        )
    snapshot = service.store.snapshot()
    found = _project(snapshot, project)
    _builds(found, version)
    asked = found.build(number)
    if asked is None or asked.channel != version or asked.number > MAX_INT:
        raise ApiError(
            404,
            "build_not_found",
            f"{NOT_FOUND.format('build')}: {number} "
            f"(see {PROJECTS}/{found.slug}/versions/{version})",
        )
    return _send_build(service, found, asked, snapshot)


def latest_build(service: Service, project, version):
    """A version's newest build, whatever its channel."""
    query.parse()
    snapshot = service.store.snapshot()
    found = _project(snapshot, project)
    return _send_build(service, found, _builds(found, version)[-1], snapshot)


def _send_build(service, project, build, snapshot):
    # One body for a build however it is asked for: by number or as the latest.
    body = lambda: encode(fill_build(project, build, service.shapes.file_url))  # noqa: E731
    return service.send_json(project, ("fill build", id(build)), body, snapshot)


ROUTES = (
    (PROJECTS, "GET", projects),
    (PROJECTS + "/<project>", "GET", project),
    (VERSIONS, "GET", versions),
    (VERSIONS + "/<version>", "GET", version),
    (BUILDS, "GET", builds),
    (BUILDS + "/latest", "GET", latest_build),  # before <build>, which would match it
    (BUILDS + "/<build>", "GET", build),
)
