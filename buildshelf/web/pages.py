"""The routes of the pages for people: an HTML downloads page per project, an Atom feed of
builds.

Rendered from the store's queries (rendering.py, with bottle's SimpleTemplate) and kept
in the app's representation cache under the data they show, like the JSON bodies: a repeated
request renders nothing. With downloads counted, the data shown is also the counter's tally
and the UTC day (a `Showing`, shown_counts.py): a page is made again when the counts change,
at most once per tally.
They read the query with query.py and answer with answers.py, as the JSON API does, so that
both answer by the same rules. A browser (query.prefers_html) gets a page where a client of
the API gets a JSON error: a 404 outside the API, the 410 of a yanked build's old link.
"""

import logging
import os
import time
from urllib.parse import urlencode

import bottle

from buildshelf.web import answers, query
from buildshelf.web.answers import send
from buildshelf.web.hosted import BuildYanked
from buildshelf.web.query import API, in_fill_api, prefers_html
from buildshelf.web.rendering import (
    ATOM,
    VIEWS,
    api_page,
    error_page,
    feed_xml,
    index_page,
    page_count,
    project_page,
    yanked_page,
)
from buildshelf.web.representation import Representation
from buildshelf.web.shapes import DOWNLOADS
from buildshelf.web.shown_counts import Showings

log = logging.getLogger(__name__)

HTML = "text/html; charset=utf-8"
# Everything these pages load is served here; no script at all.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
API_PAGE = "/api-document"  # the API document for people; the JSON is at API + "/openapi.json"
STATIC = {"style.css": "text/css; charset=utf-8", "icon.svg": "image/svg+xml"}
MAX_PAGE_DIGITS = 6
# Pages kept per filter: people read the newest builds; a crawler walking a 2,000-build
# history would otherwise keep every page of every channel (docs/pages.md: what a render costs).
KEPT_PAGES = 4


# --- the routes ---------------------------------------------------------------------------------


class Pages:
    """What the pages share, beside the Service's store, cache, shapes and settings: the
    counts' Showing when downloads are counted (None when not), the static files, read once,
    and the API document's page, made on first use (most apps, the tests', never show it).
    `api_document()` gives the OpenAPI document served, which API_PAGE shows to people.

    The feed takes the parameters of /builds, gives the same JSON errors and is cached like
    it; the pages read `channel` and `experimental` as the API does. With a counter, the pages
    show the downloads of its tally() and link the files kept elsewhere through the counting
    redirect; with None, no count and the files' own addresses."""

    def __init__(self, service, api_document):
        self.store, self.cache, self.shapes = service.store, service.cache, service.shapes
        self.max_age, self.counter, self.api_document = (
            service.max_age,
            service.counter,
            api_document,
        )
        self.showings = Showings(self.counter) if self.counter is not None else None
        self.static = {}
        for name in STATIC:
            with open(os.path.join(VIEWS, name), "rb") as f:
                self.static[name] = Representation.of(f.read(), os.path.getmtime(f.name))
        self.api = []

    def counting(self, recall):
        """`recall` (answers.from_memory), first making the counts' Showing current: a new
        tally or a new day replaces it, and the old one, no longer held, takes its pages out
        of the cache, and with them every answer remembered, so that no page showing old
        counts is answered from memory. A few identity checks, for the targets of the pages
        that show counts (index and project_builds) alone: what the loop thread may do. The
        identity without a counter."""
        if self.showings is None:
            return recall

        def counted_recall(environ):
            path = environ["PATH_INFO"]
            if path == "/" or path.startswith("/projects/"):  # those that show counts
                self.showings.showing(self.store.snapshot(), self.counter.tally())
            return recall(environ)

        return counted_recall


def _send_page(site: Pages, representation, shown):
    bottle.response.set_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    return send(representation, site.max_age, HTML, shown=shown)


def _kept_page(site: Pages, snapshot, data, view, make):
    """The page make(shown_counts, loaded_at) makes, kept under `data` (under the Showing
    when counted: made once per tally) and sent."""
    if site.showings is None:
        page = site.cache.get(data, view, lambda: make(None, data.loaded_at))
    else:
        shown_counts = site.showings.current(snapshot)
        showing = shown_counts.showing
        page = site.cache.get(showing, view, lambda: make(shown_counts, showing.since))
    # Answered from memory while the snapshot is current: a counted page too, since a
    # new tally or day drops the old Showing, its pages, and what was remembered of
    # them (see Pages.counting).
    return _send_page(site, page, snapshot)


def index(site: Pages):
    """Every project with its latest builds, for people."""
    try:
        query.build_query()
    except bottle.HTTPError as error:
        return fail_page(error)
    snapshot = site.store.snapshot()
    return _kept_page(
        site,
        snapshot,
        snapshot,
        "page:index",
        lambda shown_counts, loaded_at: Representation.of(
            index_page(snapshot, site.shapes, shown_counts), loaded_at
        ),
    )


def api_document_page(site: Pages):
    """The OpenAPI document as a page: the operations, their parameters and responses."""
    try:
        query.parse()
    except bottle.HTTPError as error:
        return fail_page(error)
    if not site.api:
        site.api.append(Representation.of(api_page(site.api_document()), time.time()))
    return _send_page(site, site.api[0], None)


def project_builds(site: Pages, slug):
    """One project's builds, newest first, filtered and paged."""
    snapshot = site.store.snapshot()
    try:
        project, channel, experimental, page = _page_filter(snapshot, slug)
    except bottle.HTTPError as error:
        return fail_page(error)

    def make(shown_counts, loaded_at):
        return Representation.of(
            project_page(project, channel, experimental, page, site.shapes, shown_counts),
            loaded_at,
        )

    # Any client may send any channel: keep only those that select builds.
    if page > KEPT_PAGES or not project.select(channel, experimental):
        shown_counts = site.showings and site.showings.current(snapshot)
        since = shown_counts.showing.since if shown_counts else project.loaded_at
        return _send_page(site, make(shown_counts, since), snapshot)
    view = ("page", project.slug, channel, experimental, page)
    return _kept_page(site, snapshot, project, view, make)


def project_builds_slash(site: Pages, slug):
    """The address with a trailing slash, as people type it: moved to the one without."""
    try:
        pairs = query.parse()
        project = _project(site.store.snapshot(), slug)
    except bottle.HTTPError as error:
        return fail_page(error)
    target = f"/projects/{project.slug}" + (f"?{urlencode(pairs)}" if pairs else "")
    return answers.redirect(target, site.max_age, status=301)


def feed(site: Pages):
    """An Atom feed of a project's newest builds passing the filters."""
    snapshot = site.store.snapshot()
    project, channel, experimental = query.build_filter(snapshot, query.build_query())

    def make():
        return Representation.of(
            feed_xml(project, channel, experimental, site.shapes), project.loaded_at
        )

    if not project.select(channel, experimental):
        return send(make(), site.max_age, ATOM, shown=snapshot)
    return send(
        site.cache.get(project, ("feed", channel, experimental), make),
        site.max_age,
        ATOM,
        shown=snapshot,
    )


def static_file(site: Pages, name):
    """The stylesheet and the icon."""
    if name not in site.static:
        raise bottle.HTTPError(404)
    return send(site.static[name], site.max_age, STATIC[name])


ROUTES = (
    ("/", "GET", index),
    (API_PAGE, "GET", api_document_page),
    ("/projects/<slug>", "GET", project_builds),
    ("/projects/<slug>/", "GET", project_builds_slash),
    (API + "/feed", "GET", feed),
    ("/static/<name>", "GET", static_file),
)


def not_found(error: bottle.HTTPError) -> bytes:
    """The answer to a 404: a page when a browser asks for a path outside the API and the
    files, else the API's JSON error."""
    path, accept = bottle.request.path, bottle.request.get_header("Accept")
    if path.startswith(("/api/", DOWNLOADS + "/")) or in_fill_api(path) or not prefers_html(accept):
        return answers.error_response(error)
    answers.set_common_headers(bottle.response)  # bottle dropped those the hook had set
    bottle.response.set_header("Vary", "Accept")
    message = error.body if isinstance(error.body, str) and error.body else None
    return fail_page(bottle.HTTPError(404, message or "There is no page at this address."))


def gone(site: Pages, error: bottle.HTTPError) -> bytes:
    """The answer to a 410. A yanked build's file, or its checksum line (BuildYanked): for a
    browser following an old link (its Accept prefers text/html), a page saying when and why
    it was yanked and linking the project's latest build; for curl, wget, launchers and any
    other client, the API's JSON. Both say `Vary: Accept`, so that no cache answers one with
    the other. Any other 410 (API v1's): the JSON."""
    if not isinstance(error, BuildYanked):
        return answers.error_response(error)
    if not prefers_html(bottle.request.get_header("Accept")):
        body = answers.error_response(error)
        bottle.response.set_header("Vary", "Accept")
        return body
    answers.set_common_headers(bottle.response)  # bottle dropped those the hook had set
    bottle.response.set_header("Vary", "Accept")
    counted = site.counter is not None
    page = yanked_page(error.project, error.build, error.latest, site.shapes, counted)
    return _html_error(error.status_code, page)


def fail_page(error: bottle.HTTPError) -> bytes:
    """An HTML error: never cached, the message the JSON API would give."""
    return _html_error(error.status_code, error_page(error.status_code, error.body))


def _html_error(status, page):
    """An HTML error page answered: never cached."""
    bottle.response.status = status
    bottle.response.content_type = HTML
    bottle.response.set_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    bottle.response.set_header("Cache-Control", "no-store")
    return page


def _project(snapshot, slug):
    """The project a page's address names, or an HTML 404."""
    project = snapshot.project(slug)
    if project is None:
        raise bottle.HTTPError(404, f"There is no project {slug!r} here.")
    return project


def _page_filter(snapshot, slug):
    """The project, channel, experimental flag and page number a page request names."""
    params = query.build_query()
    project = _project(snapshot, slug)
    channel, experimental = query.filters(params)
    pages = page_count(project.select(channel, experimental))
    number = params.get("page") or "1"
    if not (
        number.isdecimal()
        and number.isascii()
        and len(number) <= MAX_PAGE_DIGITS
        and 1 <= int(number)
    ):
        raise bottle.HTTPError(400, f"The page must be a whole number from 1 to {pages}.")
    if int(number) > pages:
        raise bottle.HTTPError(404, f"There is no page {number}: this list has {pages}.")
    return project, channel, experimental, int(number)
