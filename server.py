"""The build-distribution HTTP API (v2): a bottle app over a `store.Store`, served by waitress.

Every response body is JSON except the /jd redirect and what pages.py adds (the HTML pages and
the Atom feed). What a route serves is decided by the store's current snapshot, taken once per
request.
"""

import argparse
import json
import logging
import os
import sys
import time
from urllib.parse import unquote_to_bytes

import bottle

import openapi
import pages
import serving
import store as store_module
from representation import Representation, accepts_gzip, etag_matches, memoized, modified_since

log = logging.getLogger(__name__)

API = "/api/v2"
JAVADOC_SUFFIX = "-R0.1-SNAPSHOT"
BUILD_PARAMETERS = ("project", "channel", "experimental")
SUPERSEDED_PARAMETERS = ("game_version", "version", "minecraft_version")
ALLOWED_METHODS = "GET, HEAD, OPTIONS"
JSON = "application/json"
DEFAULT_MAX_AGE = 60
CORS_REQUEST_HEADERS = "Accept, Accept-Encoding, If-None-Match, If-Modified-Since, Cache-Control"
JAVADOC_MAX_AGE = 10  # the latest build's channel moves when a build lands
GONE_MAX_AGE = 86400
ERROR_STATUSES = (400, 404, 405, 410, 500)
MAX_QUERY_FIELDS = 50
DEFAULT_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


class ApiError(bottle.HTTPError):
    """An error response: `code` is the machine-readable snake_case name of the problem."""

    def __init__(self, status, code, message):
        super().__init__(status, message)
        self.code = code


def encode(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def error_body(code, message):
    return encode({"error": message, "code": code})


def project_json(project):
    return {"slug": project.slug, "ciJob": project.ci_job, "ciJobUrl": project.ci_job_url,
            "javadocBaseUrl": project.javadoc_base_url}


def build_json(build):
    """The one place that decides a build's fields and their order (never `commit`)."""
    return {"buildNumber": build.number, "url": build.url, "downloadUrl": build.download_url,
            "channelVersion": build.channel, "timestamp": build.timestamp,
            "isExperimental": build.is_experimental,
            "commits": [{"message": c.message, "hash": c.hash} for c in build.commits]}


def _shown(text, limit=100):
    """A client's value quoted for an error message, cut so a message stays readable."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _decode(field):
    return unquote_to_bytes(field.replace(b"+", b" ")).decode()


def _query():
    """The query as (name, value) pairs, refusing bytes and characters no client means."""
    # WSGI hands over the raw bytes as latin-1; percent-decode those bytes, then read UTF-8.
    fields = [f for f in bottle.request.query_string.encode("latin-1").split(b"&") if f]
    if len(fields) > MAX_QUERY_FIELDS:
        raise ApiError(400, "invalid_query", f"too many query parameters (at most "
                       f"{MAX_QUERY_FIELDS})")
    try:
        pairs = [(_decode(name), _decode(value))
                 for name, _, value in (f.partition(b"=") for f in fields)]
    except UnicodeError:
        raise ApiError(400, "invalid_query", "the query string is not valid UTF-8 once "
                       "percent-decoded") from None
    for name, value in pairs:
        if not (name + value).isprintable():
            raise ApiError(400, "invalid_query", f"parameter {_shown(name)} holds a control or "
                           "invisible character (such as NUL, CR, LF or a zero-width space)")
    return pairs


def _build_query():
    """The parameters of a builds request as {name: value}."""
    params = {}
    for name, value in _query():
        if name in SUPERSEDED_PARAMETERS:
            raise ApiError(400, "superseded_parameter", f"parameter {name!r} was replaced: "
                           "use 'channel' instead")
        if name in params and name in BUILD_PARAMETERS:
            raise ApiError(400, "repeated_parameter", f"parameter {name!r} is given more than "
                           "once: give it once")
        params.setdefault(name, value)
    return params


def _required(params, name):
    value = params.get(name, "")
    if not value:
        raise ApiError(400, "missing_parameter", f"the query parameter {name!r} is required, "
                       f"e.g. ?{name}=... (see {API}/projects for the projects)")
    return value


def _flag(params, name):
    """True only for the value 'true' in any letter case: anything else means false."""
    return params.get(name, "").lower() == "true"


def _build_filter(snapshot):
    """The project, channel (None for all) and experimental flag a builds request names."""
    params = _build_query()
    slug = _required(params, "project")
    project = snapshot.project(slug)
    if project is None:
        raise ApiError(404, "unknown_project", f"no project {_shown(slug)}: see {API}/projects "
                       "for the projects served")
    return project, params.get("channel") or None, _flag(params, "experimental")


def _latest(snapshot):
    """The project, filters and latest build a request names; 404 when no build passes."""
    project, channel, experimental = _build_filter(snapshot)
    build = project.latest(channel, experimental)
    if build is None:
        which = "build" if experimental else "stable build"
        where = f" in channel {_shown(channel)}" if channel else ""
        hint = "" if experimental else " (add experimental=true to include experimental builds)"
        raise ApiError(404, "no_matching_build", f"project {project.slug!r} has no "
                       f"{which}{where}{hint}")
    return project, channel, experimental, build


def _send(representation, max_age, content_type=JSON):
    """Answer with `representation`, gzipped if the client takes it, or 304 if it has it."""
    environ, response = bottle.request.environ, bottle.response
    response.content_type = content_type
    response.set_header("Cache-Control", f"public, max-age={max_age}")
    body, etag = representation.body, representation.etag
    if representation.gzipped is not None:
        response.set_header("Vary", "Accept-Encoding")
        if accepts_gzip(environ.get("HTTP_ACCEPT_ENCODING", "")):
            body, etag = representation.gzipped, representation.gzip_etag
            response.set_header("Content-Encoding", "gzip")
    response.set_header("ETag", etag)
    dated = representation.is_dated(time.time())
    if dated:
        response.set_header("Last-Modified", representation.modified_date)
    if_none_match = environ.get("HTTP_IF_NONE_MATCH")
    if_modified_since = environ.get("HTTP_IF_MODIFIED_SINCE")
    if if_none_match is not None:  # it wins over If-Modified-Since (RFC 9110 13.2.2)
        current = etag_matches(if_none_match, etag)
    else:
        current = dated and if_modified_since is not None and not modified_since(
            if_modified_since, representation.modified)
    if current:
        response.status = 304
        return b""
    return body


def _project_response(project, key, make_body):
    """The representation of one view of a project, memoized if the view is a known one."""
    def make():
        return Representation.of(encode(make_body()), project.loaded_at)
    channel = key[1]
    if channel is not None and not project.has_channel(channel):
        return make()  # clients may send any channel: keep only the project's own
    return memoized(project.memo, key, make)


def make_app(store, max_age=DEFAULT_MAX_AGE):
    """The WSGI app serving `store`'s data; JSON successes may be cached `max_age` seconds."""
    app = bottle.Bottle()

    @app.hook("after_request")
    def common_headers():
        _set_common_headers(bottle.response)

    @app.get(API + "/projects")
    def projects():
        """Every project served."""
        _query()  # takes no parameters, but refuses a malformed query like every route
        snapshot = store.snapshot()
        return _send(memoized(snapshot.memo, "projects", lambda: Representation.of(encode(
            {"projects": [project_json(p) for p in snapshot.projects.values()]}),
            snapshot.loaded_at)), max_age)

    @app.get(API + "/builds")
    @app.get(API + "/builds/all")
    def builds():
        """A project's builds passing the filters, ascending by build number."""
        project, channel, experimental = _build_filter(store.snapshot())
        return _send(_project_response(
            project, ("builds", channel, experimental),
            lambda: [build_json(b) for b in project.select(channel, experimental)]), max_age)

    @app.get(API + "/builds/latest")
    def latest_build():
        """The highest-numbered build passing the filters."""
        project, channel, experimental, build = _latest(store.snapshot())
        return _send(_project_response(project, ("latest", channel, experimental),
                                       lambda: build_json(build)), max_age)

    @app.get(API + "/jd")
    def javadoc():
        """A redirect to the javadoc pages of a channel (by default the latest build's)."""
        project, _, _, build = _latest(store.snapshot())
        bottle.response.set_header("Cache-Control",
                                   f"public, max-age={min(max_age, JAVADOC_MAX_AGE)}")
        # Built from stored, validated values only: nothing the client sent reaches Location.
        bottle.redirect(javadoc_url(project, build.channel), 302)

    openapi_document = Representation.of(encode(openapi.DOCUMENT), time.time())

    @app.get(API + "/openapi.json")
    def openapi_json():
        """The OpenAPI 3.1 description of this API."""
        _query()
        return _send(openapi_document, max_age)

    @app.get("/healthz")
    def health():
        """Whether data is being served, and which files are rejected."""
        _query()
        snapshot = store.snapshot()
        bottle.response.status = 200 if snapshot.projects else 503
        bottle.response.content_type = JSON
        return encode({
            "status": "ok" if snapshot.projects else "no_data",
            "projects": len(snapshot.projects),
            "lastReload": _iso_time(snapshot.loaded_at),
            "rejectedFiles": [{"file": name, "error": error.located()}
                              for name, error in sorted(snapshot.errors.items())],
        })

    # Helpers handed over, not imported: run as a script, this module is __main__, not server.
    pages.install(app, store, max_age, send=_send, query=_build_query, build_filter=_build_filter)

    def preflight():
        """CORS preflight: any origin may read this API from a browser."""
        bottle.response.status = 204
        bottle.response.set_header("Access-Control-Allow-Methods", ALLOWED_METHODS)
        bottle.response.set_header("Access-Control-Allow-Headers", CORS_REQUEST_HEADERS)
        bottle.response.set_header("Access-Control-Max-Age", "86400")
        bottle.response.set_header("Cache-Control", "public, max-age=86400")

    @app.route("/api/v1<rest:re:(/.*)?>", method="ANY")
    def removed_v1(rest):
        """API version 1, removed."""
        raise ApiError(410, "api_version_removed", "API v1 was removed on 2025-11-05: use "
                       f"{API} (e.g. {API}/projects)")

    def error_response(error):
        if error.status_code == 500:
            log.error("%s %s failed:\n%s", bottle.request.method, bottle.request.path,
                      error.traceback)
        response = bottle.response
        # Bottle replaced the headers the after_request hook set with the error's own.
        _set_common_headers(response)
        response.content_type = JSON
        response.set_header("Cache-Control", f"public, max-age={GONE_MAX_AGE}"
                            if error.status_code == 410 else "no-store")
        if error.status_code == 405:
            response.set_header("Allow", ALLOWED_METHODS)
        if isinstance(error, ApiError):
            return error_body(error.code, error.body)
        code, message = {
            404: ("not_found", f"no such path: see {API}/projects"),
            405: ("method_not_allowed", "this API only answers GET and HEAD (and OPTIONS for "
                  "CORS)"),
        }.get(error.status_code, ("internal_error", "internal error: the cause is in the "
                                  "server's log"))
        return error_body(code, message)

    for status in ERROR_STATUSES:
        app.error(status)(error_response)
    for rule in {route.rule for route in app.routes if route.method == "GET"}:
        app.route(rule, "OPTIONS", preflight)
    return app


def _set_common_headers(response):
    response.set_header("X-Content-Type-Options", "nosniff")
    response.set_header("Access-Control-Allow-Origin", "*")
    response.set_header("Access-Control-Expose-Headers", "ETag")
    if "Cache-Control" not in response:
        response.set_header("Cache-Control", "no-store")


def _iso_time(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def javadoc_url(project, channel):
    return project.javadoc_base_url.rstrip("/") + "/" + channel + JAVADOC_SUFFIX


# --- command line ----------------------------------------------------------------------------

def _directory(value):
    if not os.path.isdir(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a directory")
    return value


def _number_in(low, high):
    def number(value):
        try:
            n = int(value)
        except ValueError:
            n = None
        if n is None or not low <= n <= high:
            raise argparse.ArgumentTypeError(f"{value!r} is not a whole number from {low} to "
                                             f"{high}")
        return n
    return number


def parse_args(argv=None, environ=os.environ):
    parser = argparse.ArgumentParser(
        prog="buildshelf", description="Serve the build-distribution API (v2) over the JSON "
        "files of a data directory, reloading them when they change.",
        epilog="Each flag's default may also come from the environment variable named in its "
        "help; a flag on the command line wins.")
    parser.add_argument("--data", type=_directory, metavar="DIR",
                        default=environ.get("BUILDSHELF_DATA", DEFAULT_DATA),
                        help="directory of <slug>.json files (BUILDSHELF_DATA; default: the "
                        "data/ directory beside server.py)")
    parser.add_argument("--host", default=environ.get("BUILDSHELF_HOST", "127.0.0.1"),
                        help="address to listen on (BUILDSHELF_HOST; default: %(default)s)")
    parser.add_argument("--port", type=_number_in(1, 65535),
                        default=environ.get("BUILDSHELF_PORT", "8080"),
                        help="TCP port (BUILDSHELF_PORT; default: %(default)s)")
    parser.add_argument("--threads", type=_number_in(1, 256),
                        default=environ.get("BUILDSHELF_THREADS", "4"),
                        help="worker threads (BUILDSHELF_THREADS; default: %(default)s)")
    parser.add_argument("--max-age", type=_number_in(0, 31536000),
                        default=environ.get("BUILDSHELF_MAX_AGE", str(DEFAULT_MAX_AGE)),
                        help="seconds clients and proxies may cache a JSON success "
                        "(BUILDSHELF_MAX_AGE; default: %(default)s)")
    parser.add_argument("--quiet", action="store_true",
                        help="no access log line per request")
    parser.add_argument("--check", action="store_true",
                        help="validate every data file, print each problem, exit 0 if all are "
                        "valid and 1 otherwise, without serving")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.check:
        problems = store_module.check_directory(args.data)
        for problem in problems:
            print(problem)
        log.info("checked %s: %d problem(s)", args.data, len(problems))
        return 1 if problems else 0

    data = store_module.Store(args.data)
    app = make_app(data, max_age=args.max_age)

    def listening(server):
        log.info("serving %d projects from %s on http://%s:%s%s", len(data.snapshot().projects),
                 os.path.abspath(args.data), server.effective_host, server.effective_port, API)
    try:
        serving.serve(app if args.quiet else serving.access_logged(app), args.host, args.port,
                      args.threads, on_listening=listening)
    except OSError as error:  # the address is taken, or not ours to listen on
        log.error("cannot listen on %s port %d: %s", args.host, args.port, error.strerror)
        return 1
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
