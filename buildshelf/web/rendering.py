"""What the pages for people and the Atom feed say, made from the store's queries: the
HTML of the index, of a project's builds (filtered and paged, its yanked builds apart), of
the API document, of an error and of a yanked build's link (`yanked_page`), bottle's
SimpleTemplate templates (views/) filled with what a page shows; the Atom XML of a
project's newest builds (`feed_xml`). Characters XML cannot carry are shown as U+FFFD in
both. pages.py answers with them and keeps them in the representation cache.
"""

import datetime
import importlib.resources
import re
import xml.etree.ElementTree as ET
from types import SimpleNamespace
from urllib.parse import urlencode

import bottle

from buildshelf.model import epoch_seconds
from buildshelf.text import counted
from buildshelf.web.answers import ISO_TIME
from buildshelf.web.openapi_view import api_view
from buildshelf.web.query import API
from buildshelf.web.shapes import DOWNLOADS

PAGE_SIZE = 50
SHOWN_TIME = "%Y-%m-%d %H:%M UTC"  # a time as a page shows it, beside its ISO_TIME
FEED_SIZE = 50
UNNAMED_FILE = "artifact"  # a download's name when its URL names no file
ATOM = "application/atom+xml"
ATOM_NS = "http://www.w3.org/2005/Atom"
# Ids that survive a change of host name (RFC 4151): the authority names the software.
TAG = "tag:buildshelf,2026:"
# Characters XML 1.0 forbids (JSON allows them in a commit message): shown as U+FFFD.
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


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
        checksum_url=shapes.checksum_url(project, build, build),
        file=build.file_name or UNNAMED_FILE,
        sha256=build.sha256 or None,
        size_text=size_text(build.size) if build.sha256 else None,
        iso=when.strftime(ISO_TIME),
        date=when.strftime(SHOWN_TIME),
        commits=[
            SimpleNamespace(short=c.hash[:7], hash=c.hash, message=c.message) for c in build.commits
        ],
        extras=[_extra_view(project, build, key, file, shapes) for key, file in build.files[1:]],
    )


def _extra_view(project, build, key, file, shapes):
    """What a build card shows of an extra file: its key, name, size and sha256 (if known),
    its link and, kept, its checksum line's."""
    url = shapes.file_url(project, build, file)
    return SimpleNamespace(
        key=key,
        file=file.file_name or UNNAMED_FILE,
        url=url,
        checksum_url=shapes.checksum_url(project, build, file),
        sha256=file.sha256 or None,
        size_text=size_text(file.size) if file.sha256 else None,
    )


def yanked_view(project, build):
    """What a project page and a yanked build's 410 page show of a yanked build: what it was,
    when it was yanked and why, and no download (its link answers 410)."""
    when, yanked = utc_time(build.timestamp), utc_time(build.yanked_at)
    anchor = f"yanked-{build.number}"  # its entry on the project page
    return SimpleNamespace(
        number=build.number,
        channel=build.channel,
        experimental=build.is_experimental,
        anchor=anchor,
        link=f"{page_path(project)}#{anchor}",
        url=build.url,
        reason=build.yank_reason or None,
        file=build.file_name or UNNAMED_FILE,
        sha256=build.sha256 or None,
        size_text=size_text(build.size) if build.sha256 else None,
        iso=when.strftime(ISO_TIME),
        date=when.strftime(SHOWN_TIME),
        yanked_iso=yanked.strftime(ISO_TIME),
        yanked_date=yanked.strftime(SHOWN_TIME),
    )


def yanked_listed(project, channel):
    """The yanked builds a project page lists, of `channel` when one is chosen (experimental
    or not: a yanked build is served to no one), newest first."""
    return [b for b in reversed(project.yanked) if channel is None or b.channel == channel]


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


def page_path(project):
    """The path of the project's page."""
    return f"/projects/{project.slug}"


def page_link(project, channel=None, experimental=False):
    """The project's page, showing the builds these filters pass (the feed's alternate)."""
    return link(
        page_path(project),
        channel=channel,
        experimental="true" if experimental else None,
    )


def project_view(project, shapes, downloads=None):
    stable = project.latest(None, False)
    newest = project.latest(None, True)
    page = page_path(project)
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
    here = page_path(project)
    filters = {"channel": channel, "experimental": "true" if experimental else None}
    feed = feed_link(project, channel, experimental)
    # The newest build of this list, whatever it is when the link is followed.
    latest = link(DOWNLOADS + "/latest", project=project.slug, **filters) if builds else None
    # Listed once, on the first page, and PAGE_SIZE at most: the newest are those asked about.
    yanked = yanked_listed(project, channel) if page == 1 else []
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
        yanked=[yanked_view(project, b) for b in yanked[:PAGE_SIZE]],
        yanked_unlisted=counted(len(yanked) - PAGE_SIZE, "older yanked build")
        if len(yanked) > PAGE_SIZE
        else None,
    )


# --- the API document, for people ---------------------------------------------------------------


def api_page(document):
    return render("api", title="The Buildshelf API", api=api_view(document), feeds=[])


def error_page(status, message):
    return render("error", title=f"{status}: Buildshelf", status=status, message=message, feeds=[])


def yanked_page(project, build, latest, shapes, counted_downloads):
    """The 410 page of a link to a file of `build`, yanked: when and why, and `latest` (None:
    the project serves none), the project's latest build, with its download, as the JSON
    410 names it. `counted_downloads`: a file kept elsewhere is linked through the counting
    redirect, as the project page links it."""
    view = project_view(project, shapes)
    return render(
        "yanked",
        title=f"Build #{build.number} of {project.ci_job} was yanked: Buildshelf",
        project=view,
        yanked=yanked_view(project, build),
        # build_view links through the counting redirect when given counts (none shown here).
        latest=latest and build_view(project, latest, shapes, {} if counted_downloads else None),
        latest_page=latest and f"{view.page}#build-{latest.number}",
        feeds=[],
    )


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
    # The same builds as a page; the CI job is the feed's author, below.
    add(feed, "link", rel="alternate", type="text/html",
        href=shapes.public_url + page_link(project, channel, experimental))  # fmt: skip
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
        for key, file in build.files[1:]:  # its extra files, each by its key
            extra = {"length": str(file.size)} if file.sha256 else {}
            add(entry, "link", rel="enclosure", href=shapes.file_url(project, build, file),
                title=f"{key}: {file.file_name or UNNAMED_FILE}", **extra)  # fmt: skip
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
