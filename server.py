"""The build-distribution HTTP API (v2): a bottle app over a `store.Store`, served by waitress.

Every response body is JSON except the /jd and /downloads/latest redirects, and what pages.py
adds (the HTML pages and the Atom feed). What a route serves is decided by the store's current
snapshot, taken once per request.
"""

import io
import json
import logging
import sys
import time
from urllib.parse import unquote_to_bytes

import bottle

import javadoc
import openapi
import pages
import serving
import upstream
from representation import Representation, RepresentationCache

log = logging.getLogger(__name__)

API = "/api/v2"
BUILD_PARAMETERS = ("project", "channel", "experimental")
JAVADOC_PARAMETERS = BUILD_PARAMETERS + ("redirect",)
COMPAT_MODES = (None, upstream.MODE)
SUPERSEDED_PARAMETERS = ("game_version", "version", "minecraft_version")
ALLOWED_METHODS = "GET, HEAD, OPTIONS"
JSON = "application/json"
DEFAULT_MAX_AGE = 60
CORS_REQUEST_HEADERS = "Accept, Accept-Encoding, If-None-Match, If-Modified-Since, Cache-Control"
REDIRECT_MAX_AGE = 10  # /jd and /downloads/latest move when a build lands
GONE_MAX_AGE = 86400
ERROR_STATUSES = (400, 404, 405, 410, 500)
DOWNLOADS = "/downloads"  # the upstream's path, outside the API prefix
MAX_QUERY_FIELDS = 50
ENCODE_SLICE = 1000  # builds encoded in one call
DEFAULT_CACHE_MB = 256
ANSWERED = "buildshelf.answered"  # environ: what _send answered with, to answer repeats


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
    return {
        "slug": project.slug,
        "ciJob": project.ci_job,
        "ciJobUrl": project.ci_job_url,
        "javadocBaseUrl": project.javadoc_base_url,
    }


def encode_builds(builds):
    """A JSON array of `builds`, made a slice at a time: one long call into the C encoder would
    hold the interpreter lock, and every other request with it, for a list of a million."""
    out = io.BytesIO()  # its getvalue() hands over its buffer: no second copy of the body
    out.write(b"[")
    for i in range(0, len(builds), ENCODE_SLICE):
        if i:
            out.write(b",")
        out.write(encode([build_json(b) for b in builds[i : i + ENCODE_SLICE]])[1:-1])
    out.write(b"]")
    return out.getvalue()


def build_json(build):
    """The one place that decides a build's fields and their order (never `commit`)."""
    return {
        "buildNumber": build.number,
        "url": build.url,
        "downloadUrl": build.download_url,
        "channelVersion": build.channel,
        "timestamp": build.timestamp,
        "isExperimental": build.is_experimental,
        "commits": [{"message": c.message, "hash": c.hash} for c in build.commits],
    }


def _shown(text, limit=100):
    """A client's value quoted for an error message, cut so a message stays readable."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _decode(field):
    # '+' stays a plus sign: no value here holds a space, and real clients send the '+' of a
    # channel such as 1.0.0+71 unencoded.
    return unquote_to_bytes(field).decode()


def _query():
    """The query as (name, value) pairs, refusing bytes and characters no client means."""
    # WSGI hands over the raw bytes as latin-1; percent-decode those bytes, then read UTF-8.
    fields = [f for f in bottle.request.query_string.encode("latin-1").split(b"&") if f]
    if len(fields) > MAX_QUERY_FIELDS:
        raise ApiError(
            400, "invalid_query", f"too many query parameters (at most {MAX_QUERY_FIELDS})"
        )
    try:
        pairs = [
            (_decode(name), _decode(value))
            for name, _, value in (f.partition(b"=") for f in fields)
        ]
    except UnicodeError:
        raise ApiError(
            400, "invalid_query", "the query string is not valid UTF-8 once percent-decoded"
        ) from None
    for name, value in pairs:
        if not (name + value).isprintable():
            raise ApiError(
                400,
                "invalid_query",
                f"parameter {_shown(name)} holds a control or "
                "invisible character (such as NUL, CR, LF or a zero-width space)",
            )
    return pairs


def _build_query(once=BUILD_PARAMETERS):
    """The parameters of a builds request as {name: value}; those in `once` given once."""
    params = {}
    for name, value in _query():
        if name in SUPERSEDED_PARAMETERS:
            raise ApiError(
                400,
                "superseded_parameter",
                f"parameter {name!r} was replaced: use 'channel' instead",
            )
        if name in params and name in once:
            raise ApiError(
                400,
                "repeated_parameter",
                f"parameter {name!r} is given more than once: give it once",
            )
        params.setdefault(name, value)
    return params


def _required(params, name):
    value = params.get(name, "")
    if not value:
        raise ApiError(
            400,
            "missing_parameter",
            f"the query parameter {name!r} is required, "
            f"e.g. ?{name}=... (see {API}/projects for the projects)",
        )
    return value


def _flag(params, name):
    """True only for the value 'true' in any letter case: anything else means false."""
    return params.get(name, "").lower() == "true"


def _filters(params):
    """The channel (None for all) and the experimental flag a request names."""
    return params.get("channel") or None, _flag(params, "experimental")


def _build_filter(snapshot, params):
    """The project, channel (None for all) and experimental flag a builds request names."""
    slug = _required(params, "project")
    project = snapshot.project(slug)
    if project is None:
        raise ApiError(
            404,
            "unknown_project",
            f"no project {_shown(slug)}: see {API}/projects for the projects served",
        )
    return project, *_filters(params)


def _latest(snapshot, params):
    """The project, filters and latest build a request names; 404 when no build passes."""
    project, channel, experimental = _build_filter(snapshot, params)
    build = project.latest(channel, experimental)
    if build is None:
        which = "build" if experimental else "stable build"
        where = f" in channel {_shown(channel)}" if channel else ""
        hint = "" if experimental else " (add experimental=true to include experimental builds)"
        raise ApiError(
            404, "no_matching_build", f"project {project.slug!r} has no {which}{where}{hint}"
        )
    return project, channel, experimental, build


def _javadoc_page(params):
    """The page `redirect` names, checked; None without one (the channel's root)."""
    page = params.get("redirect", "")
    problem = javadoc.page_problem(page) if page else None
    if problem is not None:
        raise ApiError(
            400,
            "invalid_redirect",
            f"parameter 'redirect' {problem}: give a page "
            f"path relative to the javadoc root, e.g. {javadoc.EXAMPLE}",
        )
    return page or None


def _redirect(location, max_age):
    """A 302 to `location`, which must come from validated data only."""
    # Not bottle.redirect(): it joins the target to the request's URL, so a Host header that
    # does not parse (such as '[') made it fail with a 500.
    response = bottle.response
    response.status = 302
    response.set_header("Location", location)
    response.set_header("Cache-Control", f"public, max-age={min(max_age, REDIRECT_MAX_AGE)}")
    return b""


def _send(representation, max_age, content_type=JSON, shown=None):
    """Answer with `representation`, gzipped if the client takes it, or 304 if it has it.

    `shown`: the data version (snapshot) the answer shows, when nothing but the request
    target decides it. A repeat of the request is then answered from memory while that
    version is current (see _repeats_remembered).
    """
    environ, response = bottle.request.environ, bottle.response
    variant = _variant(representation, environ)
    headers = [("Content-Type", content_type), ("Cache-Control", f"public, max-age={max_age}")]
    if representation.gzipped is not None:
        headers.append(("Vary", "Accept-Encoding"))
    if variant.gzipped:
        headers.append(("Content-Encoding", "gzip"))
    headers.append(("Etag", representation.etag_of(variant)))
    if variant.dated:
        headers.append(("Last-Modified", representation.modified_date))
    if shown is not None:
        environ[ANSWERED] = (shown, representation, variant)
    if variant.not_modified:
        _set_headers(response, headers)
        response.status = 304
        return b""
    body = representation.body_of(variant)
    headers.append(("Content-Length", str(len(body))))
    _set_headers(response, headers)
    return _outgoing(body)


def _variant(representation, environ):
    return representation.variant(
        environ.get("HTTP_ACCEPT_ENCODING"),
        environ.get("HTTP_IF_NONE_MATCH"),
        environ.get("HTTP_IF_MODIFIED_SINCE"),
        time.time(),
    )


def _outgoing(body):
    """`body`, a large one as a file (for wsgi.file_wrapper): the connection then holds the
    shared bytes of the representation, never a copy, however slowly its client reads."""
    return io.BytesIO(body) if len(body) >= serving.BY_REFERENCE_BYTES else body


def _from_memory(store, cache):
    """recall(environ): what a request that _send answered with a version of the data is
    answered again, for as long as that version is current: (status line, headers, body)
    with the status line and headers bottle gave for the same Variant, or None. It never
    routes, so it never takes long: the server may call it where a request must not wait
    (serving.serve's `recall`).

    Routing, parsing the query and building the response through bottle took 58 us of CPU a
    request in process and 148 us in a running server: the better part of what a small
    answer cost beyond bare waitress (README "Performance"). From memory: 6 and 32 us.
    Bottle's hooks do not run for a repeat: what they added is in the headers replayed, and
    the refusal of a malformed request is checked here.
    """

    def recall(environ):
        if serving.MALFORMED in environ:
            return None
        method = environ["REQUEST_METHOD"]
        known = cache.recall(
            (method, environ["PATH_INFO"], environ["QUERY_STRING"]), store.snapshot
        )
        if known is None:
            return None
        representation, replies = known
        variant = _variant(representation, environ)
        reply = replies.get(variant)
        if reply is None:
            return None
        status, headers = reply[0], list(reply[1])
        if variant.not_modified or method == "HEAD":
            return status, headers, []
        body = _outgoing(representation.body_of(variant))
        if isinstance(body, io.BytesIO):
            return status, headers, environ.get("wsgi.file_wrapper", bottle.WSGIFileWrapper)(body)
        return status, headers, [body]

    return recall


def _repeats_remembered(wsgi, recall, cache):
    """`wsgi`, answering what `recall` knows from memory, and remembering what _send
    answered for recall to know next time."""

    def answer(environ, start_response):
        recalled = recall(environ)
        if recalled is not None:
            start_response(recalled[0], recalled[1])
            return recalled[2]
        replied = []

        def start(status, headers, exc_info=None):
            replied[:] = status, headers
            return start_response(status, headers, exc_info)

        body = wsgi(environ, start)
        answered = environ.pop(ANSWERED, None)  # the environ may outlive the request
        if answered is not None and replied and replied[0][:3] in ("200", "304"):
            target = (environ["REQUEST_METHOD"], environ["PATH_INFO"], environ["QUERY_STRING"])
            cache.remember(target, *answered, *replied)
        return body

    return answer


def make_app(store, max_age=DEFAULT_MAX_AGE, cache_mb=DEFAULT_CACHE_MB, compat=None):
    """The WSGI app serving `store`'s data; JSON successes may be cached `max_age` seconds.

    At most `cache_mb` MiB of encoded responses are kept. `compat="upstream"` serves the
    upstream Canvas API's build shapes instead of the spec's.
    """
    if compat not in COMPAT_MODES:
        raise ValueError(f"unknown compat mode {compat!r}")
    app = bottle.Bottle()
    cache = app.config["buildshelf.cache"] = RepresentationCache(cache_mb << 20)
    one_build = upstream.build_json if compat else build_json

    @app.hook("before_request")
    def refuse_malformed():
        problem = bottle.request.environ.get(serving.MALFORMED)
        if problem:  # the server closes the connection after this answer
            raise ApiError(400, "malformed_request", f"malformed request: {problem}")

    @app.hook("after_request")
    def common_headers():
        _set_common_headers(bottle.response)

    @app.get(API + "/projects")
    def projects():
        """Every project served."""
        _query()  # takes no parameters, but refuses a malformed query like every route
        snapshot = store.snapshot()
        return _send(
            cache.get(
                snapshot,
                "projects",
                lambda: Representation.of(
                    encode({"projects": [project_json(p) for p in snapshot.projects.values()]}),
                    snapshot.loaded_at,
                ),
            ),
            max_age,
            shown=snapshot,
        )

    @app.get(API + "/builds")
    @app.get(API + "/builds/all")
    def builds():
        """A project's builds passing the filters, ascending by build number."""
        snapshot = store.snapshot()
        project, channel, experimental = _build_filter(snapshot, _build_query())
        selected = project.select(channel, experimental)
        # The spec's two names serve one body; the upstream's envelopes differ.
        with_project = compat is not None and bottle.request.path == API + "/builds"
        # Keyed by the selection itself: filters that select the same builds share one body.
        return _send(
            cache.get(
                project,
                ("builds", id(selected), with_project),
                lambda: Representation.of(
                    build_list(project, selected, with_project), project.loaded_at
                ),
            ),
            max_age,
            shown=snapshot,
        )

    def build_list(project, builds, with_project):
        if compat is None:
            return encode_builds(builds)
        return encode(upstream.build_list_json(project, builds, with_project))

    @app.get(API + "/builds/latest")
    def latest_build():
        """The highest-numbered build passing the filters."""
        snapshot = store.snapshot()
        project, _, _, build = _latest(snapshot, _build_query())
        return _send(
            cache.get(
                project,
                ("latest", id(build)),
                lambda: Representation.of(encode(one_build(build)), project.loaded_at),
            ),
            max_age,
            shown=snapshot,
        )

    @app.get(API + "/jd")
    def javadoc_redirect():
        """A redirect to the javadoc of a channel (by default the latest build's), or a page."""
        params = _build_query(JAVADOC_PARAMETERS)
        page = _javadoc_page(params)
        project, _, _, build = _latest(store.snapshot(), params)
        # Only checked values reach Location: data, and a page path of plain segments.
        return _redirect(
            javadoc.javadoc_url(
                project.javadoc_base_url, build.channel, page, project.javadoc_page_prefix
            ),
            max_age,
        )

    @app.get(DOWNLOADS + "/latest")
    def latest_download():
        """A redirect to the artifact of the build /builds/latest would answer with."""
        *_, build = _latest(store.snapshot(), _build_query())
        return _redirect(build.download_url, max_age)

    openapi_document = Representation.of(encode(openapi.document(compat)), time.time())

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
        checking_for, stalled = store.progress()
        late = stalled or (checking_for or 0) > 2 * store.read_wait
        bottle.response.status = 200 if snapshot.projects else 503
        bottle.response.content_type = JSON
        return encode(
            {
                "status": "no_data" if not snapshot.projects else "stalled" if late else "ok",
                "projects": len(snapshot.projects),
                "lastReload": _iso_time(snapshot.loaded_at),
                "lastCheck": _iso_time(store.last_check),
                "checkRunningFor": None if checking_for is None else round(checking_for, 1),
                "rejectedFiles": [
                    {"file": name, "error": error.located()}
                    for name, error in sorted(snapshot.errors.items())
                ],
                "stalledReads": [
                    {"file": name, "seconds": round(seconds, 1)}
                    for name, seconds in sorted(stalled.items())
                ],
            }
        )

    # Helpers handed over, not imported: run as a script, this module is __main__, not server.
    pages.install(
        app,
        store,
        max_age,
        cache,
        send=_send,
        query=_build_query,
        build_filter=_build_filter,
        filters=_filters,
    )

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
        raise ApiError(
            410,
            "api_version_removed",
            f"API v1 was removed on 2025-11-05: use {API} (e.g. {API}/projects)",
        )

    def error_response(error):
        if error.status_code == 500:
            log.error(
                "%s %s failed:\n%s", bottle.request.method, bottle.request.path, error.traceback
            )
        response = bottle.response
        # Bottle replaced the headers the after_request hook set with the error's own.
        _set_common_headers(response)
        response.content_type = JSON
        response.set_header(
            "Cache-Control",
            f"public, max-age={GONE_MAX_AGE}" if error.status_code == 410 else "no-store",
        )
        if error.status_code == 405:
            response.set_header("Allow", ALLOWED_METHODS)
        if isinstance(error, ApiError):
            return error_body(error.code, error.body)
        code, message = {
            404: ("not_found", f"no such path: see {API}/projects"),
            405: (
                "method_not_allowed",
                "this API only answers GET and HEAD (and OPTIONS for CORS)",
            ),
        }.get(
            error.status_code,
            ("internal_error", "internal error: the cause is in the server's log"),
        )
        return error_body(code, message)

    for status in ERROR_STATUSES:
        app.error(status)(error_response)
    for rule in {route.rule for route in app.routes if route.method == "GET"}:
        app.route(rule, "OPTIONS", preflight)
    # Bottle.__call__ calls self.wsgi: the app stays a Bottle, with its routes and config.
    app.recall = _from_memory(store, cache)
    app.wsgi = _repeats_remembered(app.wsgi, app.recall, cache)
    return app


COMMON_HEADERS = (
    ("X-Content-Type-Options", "nosniff"),
    ("Access-Control-Allow-Origin", "*"),
    ("Access-Control-Expose-Headers", "ETag"),
)


def _set_common_headers(response):
    _set_headers(response, COMMON_HEADERS)
    if "Cache-Control" not in response:
        response.set_header("Cache-Control", "no-store")


def _set_headers(response, headers):
    """response.set_header() for each (name, value), the name spelt as bottle keeps it
    (Title-Case). One dict update: bottle's per-header checks were a fifth of a request's cost
    in the app, and these names and values are ours."""
    response._headers.update((name, [value]) for name, value in headers)


def _iso_time(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


if __name__ == "__main__":
    import cli  # the command line lives there; this keeps `python server.py [flags]` working

    sys.exit(cli.main())
