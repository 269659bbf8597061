"""The HTTP routes of the build-distribution API (v2): a bottle app over a `store.Store`.

`make_app(store)` builds the app: the JSON routes here, the pages and the feed from pages.py.
What a route serves is decided by the store's current snapshot, taken once per request; the
query is read by query.py and the answer sent by answers.py. `python server.py [flags]`
serves it, as `buildshelf serve` does.
"""

import argparse
import bisect
import logging
import os
import threading
import time
import weakref
from operator import attrgetter

import bottle

from buildshelf import artifacts, counts, javadoc, settings, webhooks
from buildshelf import metrics as prometheus
from buildshelf.credentials import Credentials
from buildshelf.serving import accesslog
from buildshelf.serving import server as serving
from buildshelf.store import Store, check
from buildshelf.text import counted
from buildshelf.web import answers, health, hosted, openapi, pages, publish, query
from buildshelf.web.answers import encode, redirect, send
from buildshelf.web.contract import MALFORMED, REFUSED, App
from buildshelf.web.query import API, ApiError
from buildshelf.web.representation import Representation, RepresentationCache
from buildshelf.web.shapes import DOWNLOADS, Shapes, project_json

log = logging.getLogger(__name__)


def make_app(
    store: Store,
    max_age: int = settings.DEFAULT_MAX_AGE,
    cache_mb: int = settings.DEFAULT_CACHE_MB,
    compat: str | None = None,
    accel_redirect: str | None = None,
    public_url: str = serving.base_url(settings.DEFAULT_HOST, settings.DEFAULT_PORT),
    credentials: Credentials | None = None,
    max_file_mb: int = settings.setting("max_file_mb").default,
    counter: counts.Counter | None = None,
    notifier: webhooks.Notifier | None = None,
    metrics: bool = True,
) -> App:
    """The WSGI app serving `store`'s data; JSON successes may be cached `max_age` seconds.
    With `accel_redirect`, nginx in front sends the kept files' bytes (hosted.install).

    At most `cache_mb` MiB of encoded responses are kept. `compat="upstream"` serves the
    upstream Canvas API's build shapes instead of the spec's. The files Buildshelf keeps are
    served at addresses on `public_url`, from `store`'s artifact store.

    Builds are published and yanked over HTTP for `credentials` (None: every write is refused
    401), a kept file of `max_file_mb` MiB at most (publish.install): the App's `screen`,
    `consume` and `max_body_bytes` (web/contract.py).

    `counter` counts the downloads (docs/downloads.md): a kept file's, a 302 of
    /downloads/latest and of /api/v2/download; /api/v2/downloads and /downloads/stats serve
    them, and the pages show them. None (--count-downloads off) counts none, and those routes
    answer 404.

    `notifier` sends the webhooks: /healthz reports its problems.

    With `metrics`, GET /metrics tells what the server did, from `counter` (a counts.Counter,
    None when downloads are not counted) and `notifier` (a webhooks.Notifier, or None) too;
    the server hands the App's `observe_requests` its access records (metrics.install).
    """
    if compat not in settings.COMPAT_MODES:
        raise ValueError(f"unknown compat mode {compat!r}")
    app = bottle.Bottle()
    cache = RepresentationCache(cache_mb << 20)
    shapes = Shapes(compat, public_url)

    def send_json(data, view, make_body, shown):
        """The JSON `make_body()` makes of `data`, made once per data version (`view` names
        what it shows), answering a request to which `shown` is the data version."""
        representation = cache.get(
            data, view, lambda: Representation.of(make_body(), data.loaded_at)
        )
        return send(representation, max_age, shown=shown)

    @app.hook("before_request")
    def refuse_malformed():
        problem = bottle.request.environ.get(MALFORMED)
        if problem:  # the server closes the connection after this answer
            raise ApiError(400, "malformed_request", f"malformed request: {problem}")

    @app.hook("before_request")
    def refuse_screened():
        if REFUSED in bottle.request.environ:  # the server closes the connection after it too
            raise bottle.request.environ[REFUSED]

    @app.hook("after_request")
    def common_headers():
        answers.set_common_headers(bottle.response)

    @app.get(API + "/projects")
    def projects():
        """Every project served."""
        query.parse()  # takes no parameters, but refuses a malformed query like every route
        snapshot = store.snapshot()
        body = lambda: encode({"projects": list(map(project_json, snapshot.projects.values()))})  # noqa: E731
        return send_json(snapshot, "projects", body, snapshot)

    @app.get(API + "/builds")
    @app.get(API + "/builds/all")
    def builds():
        """A project's builds passing the filters, ascending by build number."""
        snapshot = store.snapshot()
        project, channel, experimental = query.build_filter(snapshot, query.build_query())
        selected = project.select(channel, experimental)
        # The spec's two names serve one body; the upstream's envelopes differ.
        with_project = compat is not None and bottle.request.path == API + "/builds"
        # Keyed by the selection itself: filters that select the same builds share one body.
        view = ("builds", id(selected), with_project)
        return send_json(
            project, view, lambda: shapes.build_list(project, selected, with_project), snapshot
        )

    @app.get(API + "/builds/latest")
    def latest_build():
        """The highest-numbered build passing the filters."""
        snapshot = store.snapshot()
        project, _, _, build = query.latest(snapshot, query.build_query())
        return send_json(
            project, ("latest", id(build)), lambda: shapes.build(project, build), snapshot
        )

    @app.get(API + "/jd")
    def javadoc_redirect():
        """A redirect to the javadoc of a channel (by default the latest build's), or a page."""
        params = query.build_query(query.JAVADOC_PARAMETERS)
        page = query.javadoc_page(params)
        snapshot = store.snapshot()
        base = query.javadoc_base(query.build_filter(snapshot, params)[0])
        project, _, _, build = query.latest(snapshot, params)
        # Only checked values reach Location: data, and a page path of plain segments.
        return redirect(
            javadoc.javadoc_url(base, build.channel, page, project.javadoc_page_prefix), max_age
        )

    def count_download(project, build):
        """Whether the request is a download of `build` counted (a GET, counting on)."""
        environ = bottle.request.environ
        if counter is None or environ["REQUEST_METHOD"] != "GET":
            return False
        counter.count(
            project.slug, build.number, counts.file_key(build), environ.get("REMOTE_ADDR")
        )
        return True

    @app.get(DOWNLOADS + "/latest")
    def latest_download():
        """A redirect to the artifact of the build /builds/latest would answer with."""
        project, *_, build = query.latest(store.snapshot(), query.build_query())
        location = shapes.download_url(project, build)
        if not count_download(project, build):
            return redirect(location, max_age)
        # Cached by the client alone (whose repeats count once anyway): a shared cache such
        # as deploy/nginx.conf's would answer other networks' requests uncounted.
        return redirect(
            location,
            max_age,
            cache_control=f"private, max-age={min(max_age, answers.REDIRECT_MAX_AGE)}",
        )

    served_urls = downloads_by_url(shapes)

    @app.get(API + "/download")
    def counting_redirect():
        """A redirect to URL, counted, when URL is the downloadUrl of a build served."""
        project, build = query.download_url(served_urls(store.snapshot()))
        count_download(project, build)
        # Never stored: each click reaches the server, to be counted.
        return redirect(shapes.download_url(project, build), max_age, cache_control="no-store")

    counted_now = _counted_versions(store, counter)
    # Counts change every FLUSH_SECONDS while the data stays the same: answers are cached for
    # the version they show, but not answered from memory by the loop thread, which knows
    # only the data's version, and clients may keep them no longer than that.
    counts_max_age = min(max_age, counts.FLUSH_SECONDS)

    def send_counts(version, view, make_body):
        """The JSON make_body() makes of the counts' `version`, made once (`view` names what
        it shows)."""
        representation = cache.get(
            version, view, lambda: Representation.of(make_body(), version.loaded_at)
        )
        return send(representation, counts_max_age)

    @app.get(API + "/downloads")
    def downloads():
        """The downloads counted of one project or all, for the builds passing the filters."""
        params = query.build_query(query.DOWNLOADS_PARAMETERS)
        day, (channel, experimental) = query.counted_day(params), query.filters(params)
        date = params.get("date") or None
        version = counted_now(query.counts_of(counter))
        chosen = query.counted_projects(version.snapshot, params)

        def body():
            return shapes.downloads(chosen, version.tally, channel, experimental, day, date)

        one = chosen[0].slug if params.get("project") else None
        return send_counts(version, ("downloads", one, channel, experimental, date), body)

    @app.get(API + "/downloads/stats")
    def download_stats():
        """A project's downloads counted: in all, by day, by game version and by build."""
        params = query.build_query(query.STATS_PARAMETERS)
        days = query.stats_days(params)
        query.required(params, "project")  # a bad query is said before counting off is
        version = counted_now(query.counts_of(counter))
        project, channel, experimental = query.build_filter(version.snapshot, params)
        now = time.time()

        def body():
            # Summed once per selection and version, whatever the days asked for: a client
            # asking for each of 7..730 costs the rows' reading once.
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
        return send_counts(version, view, body)

    openapi_document = Representation.of(encode(openapi.document(compat)), time.time())

    @app.get(API + "/openapi.json")
    def openapi_json():
        """The OpenAPI 3.1 description of this API."""
        query.parse()
        return send(openapi_document, max_age)

    @app.get(API + "/builds/check")
    def update_check():
        """Whether a build, named by number or by its file's sha256, is the latest."""
        snapshot = store.snapshot()
        params = query.build_query(query.CHECK_PARAMETERS)
        asked = query.asked_build(params)
        project, channel, experimental, latest = query.latest(snapshot, params)
        try:
            status, number = query.checked(project, asked, latest)
        except ApiError as unknown:
            unknown.fields["latest"] = shapes.build_json(project, latest)
            raise
        selected = project.select(channel, experimental)
        behind = len(selected) - bisect.bisect_right(selected, number, key=attrgetter("number"))
        if status == "served":
            status = "outdated" if behind else "up_to_date"

        def body():
            return encode(
                {"status": status, "behind": behind, "latest": shapes.build_json(project, latest)}
            )

        return send_json(project, ("check", id(selected), asked), body, snapshot)

    problems = [notifier.problems] if notifier else []
    if counter is not None:
        problems.append(lambda: _counting_problem(counter))
    health.install(app, store, problems)
    observe_requests = prometheus.install(app, store, counter, notifier) if metrics else None
    hosted.install(app, store, shapes, accel_redirect, counter)
    counting = pages.install(
        app, store, max_age, cache, shapes, lambda: openapi.document(compat), counter
    )
    screen, consume = publish.install(app, store, credentials, shapes, max_file_mb << 20)

    @app.route("/api/v1<rest:re:(/.*)?>", method="ANY")
    def removed_v1(rest):
        """API version 1, removed."""
        raise ApiError(
            410,
            "api_version_removed",
            f"API v1 was removed on 2025-11-05: use {API} (e.g. {API}/projects)",
        )

    for status in answers.ERROR_STATUSES:
        app.error(status)(pages.not_found if status == 404 else answers.error_response)
    for rule in {route.rule for route in app.routes if route.method == "GET"}:
        app.route(rule, "OPTIONS", answers.preflight)
    recall = counting(answers.from_memory(store, cache))
    return App(
        answers.repeats_remembered(app, recall, cache),
        recall=recall,
        screen=screen,
        consume=consume,
        observe_requests=observe_requests,
        max_body_bytes=publish.max_body_bytes(max_file_mb << 20),
        router=app,
    )


def downloads_by_url(shapes: Shapes):
    """by_url(snapshot): {downloadUrl as served: {project slug: (project, build)}} of every
    build served in `snapshot`, made once per snapshot. Builds may share a downloadUrl, in
    one project (the highest-numbered is kept) or across projects (each is kept)."""
    made = [(lambda: None, {})]  # (a weak reference to the snapshot, its index)

    def by_url(snapshot):
        made_for, index = made[0]
        if made_for() is not snapshot:
            index = {}
            for project in snapshot.projects.values():
                for build in project.builds:  # ascending: the highest number stays
                    index.setdefault(shapes.download_url(project, build), {})[project.slug] = (
                        project,
                        build,
                    )
            made[0] = weakref.ref(snapshot), index  # one assignment: readers see both or neither
        return index

    return by_url


def _counting_problem(counter):
    problem = counter.problem
    return {} if problem is None else {"downloadCounting": problem}


class CountedVersion:
    """The downloads counted and the data they are counted against, as of one moment: the
    count routes' answers are cached under it, and go with it once either is replaced."""

    __slots__ = ("tally", "snapshot", "loaded_at", "sums", "__weakref__")

    def __init__(self, tally, snapshot):
        self.tally, self.snapshot, self.loaded_at = tally, snapshot, time.time()
        self.sums = {}  # (slug, id(selection)) -> shapes.SelectionCounts, made on first use


def _counted_versions(store: Store, counter):
    """counted_now(tally): the CountedVersion of `tally` and the store's current snapshot,
    the same object while neither changes."""
    lock = threading.Lock()
    current = [None]

    def counted_now(tally):
        snapshot = store.snapshot()
        with lock:
            version = current[0]
            if version is None or version.tally is not tally or version.snapshot is not snapshot:
                version = current[0] = CountedVersion(tally, snapshot)
            return version

    return counted_now


def serve(args: argparse.Namespace) -> int:
    """Serve args.data as the settings in `args` say until SIGTERM or SIGINT, or only check
    it (--check): the exit status."""
    accesslog.log_to_stderr()
    if args.check:
        return check(args.data)
    if not serving.resolves(args.host, args.port):
        return 1
    if args.public_url is None and args.host in ("0.0.0.0", "::", ""):
        log.warning(
            "listening on every interface without --public-url: the kept files' downloadUrl "
            "will name %s, which other machines may not reach (set --public-url or "
            "BUILDSHELF_PUBLIC_URL)",
            serving.base_url(args.host, args.port),
        )
    data = Store(args.data, artifacts_dir=args.artifacts)
    public_url = args.public_url or serving.base_url(args.host, args.port)
    notifier = _notifier(data, args, public_url)
    data.start()
    # What a server killed mid-upload was copying into the store: no writer holds it now.
    artifacts.remove_stale_temp_files(args.artifacts)
    counter = None
    if args.count_downloads == "on":
        counter = counts.Counter(args.state)
        counter.start()
    try:
        app = make_app(
            data,
            max_age=args.max_age,
            cache_mb=args.cache_mb,
            compat=args.compat,
            accel_redirect=args.accel_redirect,
            public_url=public_url,
            credentials=Credentials(args.state, args.github_oidc_issuer, public_url),
            max_file_mb=args.max_file_mb,
            counter=counter,
            metrics=args.metrics == "on",
            notifier=notifier,
        )

        def listening(base_url):
            snapshot, where = data.snapshot(), os.path.abspath(args.data)
            served = counted(len(snapshot.projects), "project")
            log.info("serving %s from %s on %s%s/projects", served, where, base_url, API)
            if not snapshot.projects:
                log.warning(
                    "nothing to serve: %s holds %s; is --data right? ('buildshelf add-project' "
                    "makes a project file; /healthz answers 503 until one is served)",
                    where,
                    "files that are refused (above)" if snapshot.errors else "no SLUG.json file",
                )

        # Request bodies are held where kept files go: a disk with room for them, never RAM
        # (as $TMPDIR may be); the data directory's until the store exists.
        bodies = args.artifacts if os.path.isdir(args.artifacts) else args.data
        return serving.run(
            app,
            args.host,
            args.port,
            args.threads,
            args.quiet,
            listening,
            body_directory=bodies,
            trusted_proxy=args.trusted_proxy,
        )
    finally:
        if counter is not None:  # once the server has stopped: no request counts after it
            counter.stop()
        data.stop()
        notifier.stop()


def _notifier(data: Store, args: argparse.Namespace, public_url: str) -> webhooks.Notifier:
    """The webhooks' notifier over `data`, started."""
    notifier = webhooks.Notifier(
        data,
        args.state,
        args.webhooks,
        build_json=Shapes(args.compat, public_url).build_json,
        public_url=public_url,
    )
    notifier.start()
    return notifier


def make_parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        prog="python server.py",
        parents=[settings.options(serve=True)],
        description="Serve the build-distribution API (v2): 'buildshelf serve' from a checkout.",
    )


def main(argv: list[str] | None = None) -> int:
    """`python server.py [flags]`: `buildshelf serve [flags]` from a checkout."""
    parser = make_parser()
    args = parser.parse_args(argv)
    settings.settle(parser, args, os.environ, serve=True)
    return serve(args)
