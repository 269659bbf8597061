"""The JSON reads of the API (v2): the projects, a project's builds, the latest build, the
update check, the javadoc redirect, the OpenAPI document, and the 410 of API v1. Each route
is a function of the Service (service.py) and its URL's arguments, listed in ROUTES, which
server.make_app registers; what it serves is decided by the store's snapshot, taken once per
request.
"""

import bisect
from operator import attrgetter

import bottle

from buildshelf import javadoc
from buildshelf.web import query
from buildshelf.web.answers import encode, redirect, send
from buildshelf.web.query import API, ApiError
from buildshelf.web.service import Service
from buildshelf.web.shapes import project_json


def projects(service: Service):
    """Every project served."""
    query.parse()  # takes no parameters, but refuses a malformed query like every route
    snapshot = service.store.snapshot()

    def body():
        return encode({"projects": list(map(project_json, snapshot.projects.values()))})

    return service.send_json(snapshot, "projects", body, snapshot)


def builds(service: Service):
    """A project's builds passing the filters, ascending by build number."""
    snapshot = service.store.snapshot()
    project, channel, experimental = query.build_filter(snapshot, query.build_query())
    selected = project.select(channel, experimental)
    # The spec's two names serve one body; the upstream's envelopes differ.
    with_project = service.compat is not None and bottle.request.path == API + "/builds"
    # Keyed by the selection itself: filters that select the same builds share one body.
    view = ("builds", id(selected), with_project)

    def body():
        return service.shapes.build_list(project, selected, with_project)

    return service.send_json(project, view, body, snapshot)


def latest_build(service: Service):
    """The highest-numbered build passing the filters."""
    snapshot = service.store.snapshot()
    project, _, _, build = query.latest(snapshot, query.build_query())
    body = lambda: service.shapes.build(project, build)  # noqa: E731
    return service.send_json(project, ("latest", id(build)), body, snapshot)


def javadoc_redirect(service: Service):
    """A redirect to the javadoc of a channel (by default the latest build's), or a page."""
    params = query.build_query(query.JAVADOC_PARAMETERS)
    page = query.javadoc_page(params)
    snapshot = service.store.snapshot()
    base = query.javadoc_base(query.build_filter(snapshot, params)[0])
    project, _, _, build = query.latest(snapshot, params)
    # Only checked values reach Location: data, and a page path of plain segments.
    return redirect(
        javadoc.javadoc_url(base, build.channel, page, project.javadoc_page_prefix),
        service.max_age,
    )


def update_check(service: Service):
    """Whether a build, named by number or by its file's sha256, is the latest."""
    snapshot = service.store.snapshot()
    params = query.build_query(query.CHECK_PARAMETERS)
    asked = query.asked_build(params)
    project, channel, experimental, latest = query.latest(snapshot, params)
    build_json = service.shapes.build_json
    try:
        status, number, reason = query.checked(project, asked, latest)
    except ApiError as unknown:
        unknown.fields["latest"] = build_json(project, latest)
        raise
    selected = project.select(channel, experimental)
    behind = len(selected) - bisect.bisect_right(selected, number, key=attrgetter("number"))
    if status == "served":
        status = "outdated" if behind else "up_to_date"

    def body():
        said = {"status": status} if reason is None else {"status": status, "reason": reason}
        return encode({**said, "behind": behind, "latest": build_json(project, latest)})

    return service.send_json(project, ("check", id(selected), asked), body, snapshot)


def openapi_json(service: Service):
    """The OpenAPI 3.1 description of this API."""
    query.parse()
    return send(service.openapi_document, service.max_age)


def removed_v1(service: Service, rest):
    """API version 1, removed."""
    raise ApiError(
        410,
        "api_version_removed",
        f"API v1 was removed on 2025-11-05: use {API} (e.g. {API}/projects)",
    )


ROUTES = (
    (API + "/projects", "GET", projects),
    (API + "/builds", "GET", builds),
    (API + "/builds/all", "GET", builds),
    (API + "/builds/latest", "GET", latest_build),
    (API + "/jd", "GET", javadoc_redirect),
    (API + "/openapi.json", "GET", openapi_json),
    (API + "/builds/check", "GET", update_check),
    ("/api/v1<rest:re:(/.*)?>", "ANY", removed_v1),
)
