"""The pages for people: an HTML downloads page per project and an Atom feed of builds.

Rendered from the store's queries with bottle's SimpleTemplate (templates in views/) and kept
in the app's representation cache under the data they show, like the JSON bodies: a repeated
request renders nothing. With downloads counted, the data shown is also the counter's tally
and the UTC day (a `Showing`, shown_counts.py): a page is made again when the counts change,
at most once per tally.
They read the query with query.py and answer with answers.py, as the JSON API does, so that
both answer by the same rules.
"""

import datetime
import importlib.resources
import logging
import os
import re
import time
import xml.etree.ElementTree as ET
from types import SimpleNamespace
from urllib.parse import urlencode

import bottle

from buildshelf.model import epoch_seconds
from buildshelf.text import counted
from buildshelf.web import answers, query
from buildshelf.web.answers import ISO_TIME, send
from buildshelf.web.openapi_view import api_view
from buildshelf.web.query import API
from buildshelf.web.representation import Representation
from buildshelf.web.shapes import DOWNLOADS, SIDECAR
from buildshelf.web.shown_counts import Showings

log = logging.getLogger(__name__)

PAGE_SIZE = 50
FEED_SIZE = 50
UNNAMED_FILE = "artifact"  # a download's name when its URL names no file
HTML = "text/html; charset=utf-8"
ATOM = "application/atom+xml"
ATOM_NS = "http://www.w3.org/2005/Atom"
# Ids that survive a change of host name (RFC 4151): the authority names the software.
TAG = "tag:buildshelf,2026:"
# Everything these pages load is served here; no script at all.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
API_PAGE = "/api-document"  # the API document for people; the JSON is at API + "/openapi.json"
STATIC = {"style.css": "text/css; charset=utf-8", "icon.svg": "image/svg+xml"}
# Characters XML 1.0 forbids (JSON allows them in a commit message): shown as U+FFFD.
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
MAX_PAGE_DIGITS = 6
# Pages kept per filter: people read the newest builds; a crawler walking a 2,000-build
# history would otherwise keep every page of every channel (docs/pages.md: what a render costs).
KEPT_PAGES = 4


# The templates, stylesheet and icon: package data beside this module (setup.cfg). Bottle's
# templates need a directory on disk, which a package installed from a wheel always has.
VIEWS = str(importlib.resources.files(__package__) / "views")
_templates = {}


def render(name, **values):
    """The template views/<name>.tpl filled with `values`, as UTF-8 bytes."""
    template = _templates.get(name)
    if template is None:
        # An absolute lookup: bottle's default is relative to the current directory.
        template = _templates[name] = bottle.SimpleTemplate(name=name, lookup=[VIEWS])
    return xml_safe(template.render(**values)).encode()


def xml_safe(text):
    return NOT_XML.sub("\ufffd", text)


# --- what a page shows --------------------------------------------------------------------------


def utc_time(timestamp):
    """A build's timestamp (epoch milliseconds, or seconds: see model.epoch_seconds) as an
    aware datetime: the data files hold none that a datetime cannot (model.TIMESTAMPS)."""
    return datetime.datetime.fromtimestamp(epoch_seconds(timestamp), datetime.UTC)


def size_text(size):
    """A size in bytes as people read it: 371 bytes, 12.4 KiB, 63.2 MiB."""
    for unit in ("bytes", "KiB", "MiB"):
        if size < 1024 or unit == "MiB":
            return counted(size, "byte") if unit == "bytes" else f"{size:,.1f} {unit}"
        size /= 1024
    return None


def counting_link(project, download_url):
    """The counting redirect to a file kept elsewhere (the upstream's buttons go through it
    too): the route answers 302 to the URL, once it has counted the download for `project`."""
    return link(API + "/download", url=download_url, project=project.slug)


def build_view(project, build, shapes, downloads=None):
    """What a build card shows; `downloads` (build number -> downloads) when counted."""
    when = utc_time(build.timestamp)
    download_url = shapes.download_url(project, build)
    counts_shown = downloads is not None
    counted_here = counts_shown and not build.hosted  # a kept file is counted where it is sent
    return SimpleNamespace(
        number=build.number,
        channel=build.channel,
        experimental=build.is_experimental,
        url=build.url,
        download_url=download_url,
        button_url=counting_link(project, download_url) if counted_here else download_url,
        downloads=counted(downloads.get(build.number, 0), "download") if counts_shown else None,
        # A kept file's sha256sum -c line is served beside it (hosted.py).
        checksum_url=download_url + SIDECAR if build.hosted else None,
        file=build.file_name or UNNAMED_FILE,
        sha256=build.sha256 or None,
        size_text=size_text(build.size) if build.sha256 else None,
        iso=when.strftime(ISO_TIME),
        date=when.strftime("%Y-%m-%d %H:%M UTC"),
        commits=[
            SimpleNamespace(short=c.hash[:7], hash=c.hash, message=c.message) for c in build.commits
        ],
    )


def link(path, **params):
    """A path with the given non-empty parameters as its query."""
    query = urlencode({name: value for name, value in params.items() if value})
    return f"{path}?{query}" if query else path


def feed_link(project, channel=None, experimental=False):
    return link(
        API + "/feed",
        project=project.slug,
        channel=channel,
        experimental="true" if experimental else None,
    )


def project_view(project, shapes, downloads=None):
    stable = project.latest(None, False)
    newest = project.latest(None, True)
    page = f"/projects/{project.slug}"
    # The page hides experimental builds unless asked: the link to all of them asks.
    hidden = len(project.select(None, False)) < len(project.builds)
    return SimpleNamespace(
        slug=project.slug,
        name=project.ci_job,
        ci_job_url=project.ci_job_url,
        page=page,
        all_builds=link(page, experimental="true" if hidden else None),
        all_builds_text=(
            "The one build"
            if len(project.builds) == 1
            else f"All {counted(len(project.builds), 'build')}"
        ),
        feed=feed_link(project),
        javadoc=link(API + "/jd", project=project.slug)
        if stable and project.javadoc_base_url
        else None,
        json=link(API + "/builds", project=project.slug),
        total=None if downloads is None else counted(sum(downloads.values()), "download"),
        stable=build_view(project, stable, shapes, downloads) if stable else None,
        experimental=(
            build_view(project, newest, shapes, downloads)
            if newest and newest is not stable
            else None
        ),
    )


def channels(project):
    """The project's channels, the one with the newest build first."""
    newest = {}
    for build in project.builds:
        newest[build.channel] = build.number
    return sorted(newest, key=newest.get, reverse=True)


def index_page(snapshot, shapes, shown_counts=None):
    views = [
        project_view(p, shapes, shown_counts and shown_counts.downloads(p))
        for p in snapshot.projects.values()
    ]
    return render(
        "index",
        title="Buildshelf: downloads",
        projects=views,
        feeds=[(f"{v.name} builds", v.feed) for v in views],
    )


def page_count(builds):
    return max(1, -(-len(builds) // PAGE_SIZE))


def project_page(project, channel, experimental, page, shapes, shown_counts=None):
    builds = project.select(channel, experimental)
    downloads = shown_counts and shown_counts.downloads(project)
    pages = page_count(builds)
    newest_first = builds[::-1][(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
    here = f"/projects/{project.slug}"
    filters = {"channel": channel, "experimental": "true" if experimental else None}
    feed = feed_link(project, channel, experimental)
    # The newest build of this list, whatever it is when the link is followed.
    latest = link(DOWNLOADS + "/latest", project=project.slug, **filters) if builds else None
    return render(
        "project",
        title=f"{project.ci_job} builds: Buildshelf",
        project=project_view(project, shapes, downloads),
        chart=shown_counts and shown_counts.chart(project),
        builds=[build_view(project, b, shapes, downloads) for b in newest_first],
        total=len(builds),
        channels=channels(project),
        channel=channel,
        experimental=experimental,
        feed=feed,
        latest=latest,
        feeds=[(f"{project.ci_job} builds", feed)],
        page=page,
        pages=pages,
        first=(page - 1) * PAGE_SIZE + 1,
        last=(page - 1) * PAGE_SIZE + len(newest_first),
        newer=link(here, **filters, page=page - 1 if page > 2 else None) if page > 1 else None,
        older=link(here, **filters, page=page + 1) if page < pages else None,
    )


# --- the API document, for people ---------------------------------------------------------------


def api_page(document):
    return render("api", title="The Buildshelf API", api=api_view(document), feeds=[])


def error_page(status, message):
    return render("error", title=f"{status}: Buildshelf", status=status, message=message, feeds=[])


# --- the feed -----------------------------------------------------------------------------------


def atom_time(timestamp):
    return utc_time(timestamp).strftime(ISO_TIME)


def feed_xml(project, channel, experimental, shapes):
    """The Atom document of the newest FEED_SIZE builds passing the filters, as bytes."""
    builds = project.select(channel, experimental)[::-1][:FEED_SIZE]
    ET.register_namespace("", ATOM_NS)

    def add(parent, tag, text=None, **attributes):
        element = ET.SubElement(parent, f"{{{ATOM_NS}}}{tag}", attributes)
        element.text = text
        return element

    feed = ET.Element(f"{{{ATOM_NS}}}feed")
    which = f" in channel {channel}" if channel else ""
    kind = "builds" if experimental else "stable builds"
    add(
        feed,
        "id",
        f"{TAG}{project.slug}/feed"
        + (f";channel={channel}" if channel else "")
        + (";experimental" if experimental else ""),
    )
    add(feed, "title", f"{project.ci_job}: {kind}{which}")
    # The newest build's time, not the time of loading: every instance serves the same bytes.
    newest = builds[0] if builds else project.latest(None, True)
    add(feed, "updated", atom_time(newest.timestamp if newest else 0))
    add(feed, "link", rel="self", type=ATOM,
        href=shapes.public_url + feed_link(project, channel, experimental))  # fmt: skip
    add(feed, "link", rel="alternate", type="text/html", href=project.ci_job_url)
    author = add(feed, "author")
    add(author, "name", project.ci_job)
    add(author, "uri", project.ci_job_url)
    add(feed, "generator", "Buildshelf")
    for build in builds:
        entry = add(feed, "entry")
        add(entry, "id", f"{TAG}{project.slug}/builds/{build.number}")
        flag = ", experimental" if build.is_experimental else ""
        add(entry, "title", f"{project.ci_job} #{build.number} ({build.channel}{flag})")
        add(entry, "updated", atom_time(build.timestamp))
        add(
            entry,
            "link",
            rel="alternate",
            href=shapes.download_url(project, build),
            title=build.file_name or UNNAMED_FILE,
        )
        if build.sha256:  # the size is known: podcast-style clients can fetch it
            add(entry, "link", rel="enclosure", href=shapes.download_url(project, build),
                length=str(build.size))  # fmt: skip
        add(entry, "link", rel="related", type="text/html", href=build.url, title="CI run")
        add(entry, "category", term=build.channel)
        add(
            entry,
            "content",
            "\n".join(f"{c.hash[:7]} {c.message}" for c in build.commits) or "No commits listed.",
            type="text",
        )
    text = ET.tostring(feed, encoding="unicode", xml_declaration=False)
    return ('<?xml version="1.0" encoding="utf-8"?>\n' + xml_safe(text)).encode()


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
    path, accept = bottle.request.path, bottle.request.get_header("Accept", "")
    if path.startswith(("/api/", DOWNLOADS + "/")) or "text/html" not in accept:
        return answers.error_response(error)
    answers.set_common_headers(bottle.response)  # bottle dropped those the hook had set
    bottle.response.set_header("Vary", "Accept")
    message = error.body if isinstance(error.body, str) and error.body else None
    return fail_page(bottle.HTTPError(404, message or "There is no page at this address."))


def fail_page(error: bottle.HTTPError) -> bytes:
    """An HTML error: never cached, the message the JSON API would give."""
    bottle.response.status = error.status_code
    bottle.response.content_type = HTML
    bottle.response.set_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    bottle.response.set_header("Cache-Control", "no-store")
    return error_page(error.status_code, error.body)


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
