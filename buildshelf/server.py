"""The build-distribution API (v2) as one app over a `store.Store`: `make_app(store)` makes
the Service the routes share and registers each group of routes (the JSON reads of
web/reads.py, the counted downloads of web/counted.py, health, metrics, the kept files, the
pages, publishing), and returns a contract.App for the server. `python server.py [flags]`
serves it, as `buildshelf serve` does.
"""

import argparse
import functools
import logging
import os
import time

import bottle

from buildshelf import counts, settings, text
from buildshelf import metrics as prometheus
from buildshelf.datafiles.checking import check
from buildshelf.kept import stores
from buildshelf.publishing.credentials import Credentials
from buildshelf.publishing.expiry import TokenWatch
from buildshelf.serving import accesslog
from buildshelf.serving import server as serving
from buildshelf.store import Store
from buildshelf.web import answers, counted, fill, health, hosted, openapi, pages, publish, reads
from buildshelf.web.answers import encode
from buildshelf.web.contract import MALFORMED, REFUSED, App
from buildshelf.web.query import API, ApiError
from buildshelf.web.representation import Representation, RepresentationCache
from buildshelf.web.service import Service
from buildshelf.web.shapes import Shapes
from buildshelf.webhooks import delivery

log = logging.getLogger(__name__)


def make_app(
    store: Store,
    max_age: int = settings.DEFAULT_MAX_AGE,
    cache_mb: int = settings.DEFAULT_CACHE_MB,
    compat: str | None = None,
    accel_redirect: str | None = None,
    public_url: str = settings.DEFAULT_PUBLIC_URL,
    credentials: Credentials | None = None,
    max_file_mb: int = settings.setting("max_file_mb").default,
    counter: counts.Counter | None = None,
    notifier: delivery.Notifier | None = None,
    metrics: bool = True,
    artifacts_downloads: str | None = None,
    artifacts_public_url: str | None = None,
    token_watch: TokenWatch | None = None,
) -> App:
    """The WSGI app serving `store`'s data; JSON successes may be cached `max_age` seconds.
    With `accel_redirect`, nginx in front sends the kept files' bytes (hosted.download).

    At most `cache_mb` MiB of encoded responses are kept. `compat="upstream"` serves the
    upstream Canvas API's build shapes instead of the spec's. The files Buildshelf keeps are
    served at addresses on `public_url`, from `store`'s artifact store.

    Builds are published and yanked over HTTP for `credentials` (None: every write is refused
    401), a kept file of `max_file_mb` MiB at most (publish.py): the App's `screen`,
    `consume` and `max_body_bytes` (web/contract.py).

    `counter` counts the downloads (docs/downloads.md): a kept file's, a 302 of
    /downloads/latest and of /api/v2/download; /api/v2/downloads and /downloads/stats serve
    them, and the pages show them. None (--count-downloads off) counts none, and those routes
    answer 404.

    `notifier` sends the webhooks: /healthz reports its problems. `token_watch` keeps the
    tokens read: /healthz and /metrics report those to replace, from memory.

    The files of an s3:// store reach clients as `artifacts_downloads` says (redirect, the
    default, also when None; public, at `artifacts_public_url` + the object's key; proxy):
    docs/storage.md.

    With `metrics`, GET /metrics tells what the server did, from `counter` (a counts.Counter,
    None when downloads are not counted) and `notifier` (a webhooks.delivery.Notifier, or None) too;
    the server hands the App's `observe_requests` its access records (metrics.install).
    """
    if compat not in settings.COMPAT_MODES:
        raise ValueError(f"unknown compat mode {compat!r}")
    app = bottle.Bottle()
    cache = RepresentationCache(cache_mb << 20)
    shapes = served_shapes(store, compat, public_url, artifacts_downloads, artifacts_public_url)
    document = Representation.of(encode(openapi.document(compat)), time.time())
    problems = [notifier.problems] if notifier else []
    if counter is not None:
        problems.append(lambda: _counting_problem(counter))
    service = Service(
        store,
        cache,
        shapes,
        max_age,
        compat,
        counter,
        document,
        credentials=credentials,
        max_file_bytes=max_file_mb << 20,
        accel_redirect=accel_redirect,
        problems=tuple(problems),
        artifacts_downloads=artifacts_downloads,
        tokens=token_watch,
    )
    app.add_hook("before_request", _refuse_malformed)
    app.add_hook("before_request", _refuse_screened)
    app.add_hook("after_request", lambda: answers.set_common_headers(bottle.response))
    routes = reads.ROUTES + counted.ROUTES + publish.ROUTES + health.ROUTES + hosted.ROUTES
    routes += fill.ROUTES
    for rule, method, route in routes:
        app.route(rule, method, functools.partial(route, service))
    observe_requests = None
    if metrics:
        observe_requests = prometheus.install(app, store, counter, notifier, token_watch)
    site = pages.Pages(service, lambda: openapi.document(compat))
    for rule, method, route in pages.ROUTES:
        app.route(rule, method, functools.partial(route, site))
    # A browser gets a page for a 404 outside the API and for a yanked build's old link.
    pages_of = {404: pages.not_found, 410: functools.partial(pages.gone, site)}
    for status in answers.ERROR_STATUSES:
        app.error(status)(pages_of.get(status, answers.error_response))
    for rule in {route.rule for route in app.routes if route.method == "GET"}:
        app.route(rule, "OPTIONS", answers.preflight)
    recall = site.counting(answers.from_memory(store, cache))
    return App(
        answers.repeats_remembered(app, recall, cache),
        recall=recall,
        screen=functools.partial(publish.screen, service),
        consume=functools.partial(publish.consume, service),
        observe_requests=observe_requests,
        max_body_bytes=publish.max_body_bytes(service.max_file_bytes),
        router=app,
    )


def served_shapes(
    store: Store,
    compat: str | None,
    public_url: str,
    artifacts_downloads: str | None = None,
    artifacts_public_url: str | None = None,
) -> Shapes:
    """The builds' JSON as a server of `store` shows them, in its routes and its webhooks
    alike: a kept file's URL on `public_url`, or, with `artifacts_downloads` public, the
    bucket's public copy's (`artifacts_public_url` and the object's key)."""
    object_url = None
    if artifacts_downloads == stores.PUBLIC:
        key = stores.opened(store.artifacts).key
        object_url = lambda sha256: f"{artifacts_public_url}/{key(sha256)}"  # noqa: E731
    return Shapes(compat, public_url, object_url)


def _refuse_malformed():
    problem = bottle.request.environ.get(MALFORMED)
    if problem:  # the server closes the connection after this answer
        raise ApiError(400, "malformed_request", f"malformed request: {problem}")


def _refuse_screened():
    if REFUSED in bottle.request.environ:  # the server closes the connection after it too
        raise bottle.request.environ[REFUSED]


def _counting_problem(counter):
    problem = counter.problem
    return {} if problem is None else {"downloadCounting": problem}


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
    serving.return_large_blocks()  # before the files are read
    data = Store(args.data, artifacts_dir=args.artifacts)
    public_url = args.public_url or serving.base_url(args.host, args.port)
    notifier = _notifier(data, args, public_url)
    data.start()
    # What a server killed mid-upload was copying into the store (temporary files, multipart
    # uploads): no writer holds it now.
    stores.opened(args.artifacts).remove_stale()
    counter = None
    if args.count_downloads == "on":
        counter = counts.Counter(args.state)
        counter.start()
    token_watch = TokenWatch(args.state)
    token_watch.start()
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
            artifacts_downloads=args.artifacts_downloads,
            artifacts_public_url=args.artifacts_public_url,
            token_watch=token_watch,
        )

        def listening(base_url):
            snapshot, where = data.snapshot(), os.path.abspath(args.data)
            served = text.counted(len(snapshot.projects), "project")
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
        token_watch.stop()


def _notifier(data: Store, args: argparse.Namespace, public_url: str) -> delivery.Notifier:
    """The webhooks' notifier over `data`, started."""
    notifier = delivery.Notifier(
        data,
        args.state,
        args.webhooks,
        build_json=served_shapes(
            data, args.compat, public_url, args.artifacts_downloads, args.artifacts_public_url
        ).build_json,
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
