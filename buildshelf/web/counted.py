"""The routes of downloads counted: the redirects that count one (/downloads/latest and
/api/v2/download) and the counts themselves (/api/v2/downloads, /api/v2/downloads/stats),
each a function of the Service (service.py), listed in ROUTES, which server.make_app
registers. Counts are answered from the cache per CountedVersion: a tally and a snapshot.
"""

import time

from buildshelf.web import answers, query
from buildshelf.web.answers import redirect
from buildshelf.web.query import API
from buildshelf.web.service import Service
from buildshelf.web.shapes import DOWNLOADS


def latest_download(service: Service):
    """A redirect to the artifact of the build /builds/latest would answer with, or to the
    file of it that `download` names by its key."""
    params = query.build_query(query.LATEST_PARAMETERS)
    project, *_, build = query.latest(service.store.snapshot(), params)
    file = query.asked_file(project, build, params)
    location = service.shapes.file_url(project, build, file)
    if not service.count_download(project, build, file):
        return redirect(location, service.max_age)
    # Cached by the client alone (whose repeats count once anyway): a shared cache such as
    # deploy/nginx.conf's would answer other networks' requests uncounted.
    return redirect(
        location,
        service.max_age,
        cache_control=f"private, max-age={min(service.max_age, answers.REDIRECT_MAX_AGE)}",
    )


def counting_redirect(service: Service):
    """A redirect to URL, counted, when URL is the downloadUrl of a build served."""
    project, build = query.download_url(service.served_urls(service.store.snapshot()))
    service.count_download(project, build)
    # Never stored: each click reaches the server, to be counted.
    location = service.shapes.download_url(project, build)
    return redirect(location, service.max_age, cache_control="no-store")


def downloads(service: Service):
    """The downloads counted of one project or all, for the builds passing the filters."""
    params = query.build_query(query.DOWNLOADS_PARAMETERS)
    day, (channel, experimental) = query.counted_day(params), query.filters(params)
    date = params.get("date") or None
    version = service.counted_now(query.counts_of(service.counter))
    chosen = query.counted_projects(version.snapshot, params)

    def body():
        return service.shapes.downloads(chosen, version.tally, channel, experimental, day, date)

    one = chosen[0].slug if params.get("project") else None
    return service.send_counts(version, ("downloads", one, channel, experimental, date), body)


def download_stats(service: Service):
    """A project's downloads counted: in all, by day, by game version and by build."""
    params = query.build_query(query.STATS_PARAMETERS)
    days = query.stats_days(params)
    query.required(params, "project")  # a bad query is said before counting off is
    version = service.counted_now(query.counts_of(service.counter))
    project, channel, experimental = query.build_filter(version.snapshot, params)
    now = time.time()
    shapes = service.shapes

    def body():
        # Summed once per selection and version, whatever the days asked for: a client asking
        # for each of 7..730 costs the rows' reading once.
        selected = project.select(channel, experimental)
        key = (project.slug, id(selected))  # the version holds the project, so its id
        sums = version.sums.get(key)
        if sums is None:  # threads may race to make it: both agree
            sums = version.sums[key] = shapes.selection_counts(project, version.tally, selected)
        return shapes.download_stats(
            project, sums, version.tally.started, channel, experimental, days, now
        )

    # The series ends today (UTC): a new day, a new body.
    view = ("stats", project.slug, channel, experimental, days, int(now // 86400))
    return service.send_counts(version, view, body)


ROUTES = (
    (DOWNLOADS + "/latest", "GET", latest_download),
    (API + "/download", "GET", counting_redirect),
    (API + "/downloads", "GET", downloads),
    (API + "/downloads/stats", "GET", download_stats),
)
