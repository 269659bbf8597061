"""How an answer is sent: a representation with its validators, gzipped if the client takes
it, or a 304; a redirect; a JSON error; the headers every answer carries. An answer that
showed a version of the data is remembered, and a repeat of its request is answered from
memory, without routing, while that version is current.
"""

import io
import logging
import time

import bottle
import msgspec

from buildshelf.web.contract import BY_REFERENCE_BYTES, MALFORMED, REFUSED
from buildshelf.web.fill_shapes import FillError
from buildshelf.web.query import API, FILL_API, ApiError, in_fill_api, shown
from buildshelf.web.representation import Representation

log = logging.getLogger(__name__)

JSON = "application/json"
ISO_TIME = "%Y-%m-%dT%H:%M:%SZ"
ALLOWED_METHODS = "GET, HEAD, OPTIONS"
CORS_REQUEST_HEADERS = "Accept, Accept-Encoding, If-None-Match, If-Modified-Since, Cache-Control"
REDIRECT_MAX_AGE = 10  # /jd and /downloads/latest move when a build lands
GONE_MAX_AGE = 86400
ERROR_STATUSES = (400, 401, 403, 404, 405, 409, 410, 413, 415, 429, 500, 503, 507)
ANSWERED = "buildshelf.answered"  # environ: what send() answered with, to answer repeats
COMMON_HEADERS = (
    ("X-Content-Type-Options", "nosniff"),
    ("Access-Control-Allow-Origin", "*"),
    ("Access-Control-Expose-Headers", "ETag"),
)


def too_large(limit: int) -> ApiError:
    """The refusal of a request body over `limit` bytes."""
    return ApiError(
        413, "too_large", f"the request body is over this server's limit of {limit:,} bytes"
    )


def no_room() -> ApiError:
    """The refusal of a request body that the server has no room to receive."""
    return ApiError(
        507, "insufficient_storage", "the server has no room for the request body: try again later"
    )


# JSON as the API answers it: compact, in UTF-8 (\u escapes for control characters only),
# byte for byte what json.dumps(obj, ensure_ascii=False, separators=(",", ":")) writes for
# the same values (checked over every code point), with a msgspec.Raw (packed commits)
# written as it is.
ENCODER = msgspec.json.Encoder()


def encode(obj) -> bytes:
    return ENCODER.encode(obj)


def error_body(code: str, message: str) -> bytes:
    return encode({"error": message, "code": code})


def iso_time(seconds: float) -> str:
    return time.strftime(ISO_TIME, time.gmtime(seconds))


def redirect(
    location: str, max_age: int, status: int = 302, cache_control: str | None = None
) -> bytes:
    """A redirect (302 unless told) to `location`, which must come from validated data only;
    cacheable for `max_age` seconds (REDIRECT_MAX_AGE at most), unless `cache_control` says
    otherwise."""
    # Not bottle.redirect(): it joins the target to the request's URL, so a Host header that
    # does not parse (such as '[') made it fail with a 500.
    response = bottle.response
    response.status = status
    response.set_header("Location", location)
    response.set_header(
        "Cache-Control", cache_control or f"public, max-age={min(max_age, REDIRECT_MAX_AGE)}"
    )
    return b""


def send(
    representation: Representation, max_age: int, content_type: str = JSON, shown=None
) -> bytes | io.BytesIO:
    """Answer with `representation`, gzipped if the client takes it, or 304 if it has it.

    `shown`: the data version (snapshot) the answer shows, when nothing but the request
    target decides it. A repeat of the request is then answered from memory while that
    version is current (see repeats_remembered).
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
        set_headers(response, headers)
        response.status = 304
        return b""
    body = representation.body_of(variant)
    headers.append(("Content-Length", str(len(body))))
    set_headers(response, headers)
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
    return io.BytesIO(body) if len(body) >= BY_REFERENCE_BYTES else body


def from_memory(store, cache):
    """recall(environ): what a request that send() answered with a version of the data is
    answered again, for as long as that version is current: (status line, headers, body)
    with the status line and headers bottle gave for the same Variant, or None. It never
    routes, so it never takes long: the server may call it where a request must not wait
    (serving.serve's `recall`): routing through bottle was the better part of what a small
    answer cost (docs/performance.md). Bottle's hooks do not run for a repeat: what they added is in the headers replayed, and
    the refusal of a malformed request is checked here.
    """

    def recall(environ):
        if MALFORMED in environ or REFUSED in environ:
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


def repeats_remembered(wsgi, recall, cache):
    """`wsgi`, answering what `recall` knows from memory, and remembering what send()
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


def set_common_headers(response):
    set_headers(response, COMMON_HEADERS)
    if "Cache-Control" not in response:
        response.set_header("Cache-Control", "no-store")


def set_headers(response, headers):
    """response.set_header() for each (name, value), the name spelt as bottle keeps it
    (Title-Case). One dict update: bottle's per-header checks were a fifth of a request's cost
    in the app, and these names and values are ours."""
    response._headers.update((name, [value]) for name, value in headers)


def preflight(**path_parameters) -> None:
    """CORS preflight: any origin may read this API from a browser. Routed for every GET
    route, whatever its path parameters."""
    response = bottle.response
    response.status = 204
    response.set_header("Access-Control-Allow-Methods", ALLOWED_METHODS)
    response.set_header("Access-Control-Allow-Headers", CORS_REQUEST_HEADERS)
    response.set_header("Access-Control-Max-Age", "86400")
    response.set_header("Cache-Control", "public, max-age=86400")


def error_response(error: bottle.HTTPError) -> bytes:
    """The JSON answer to any error: an ApiError's own code, or the status's; in Fill's shape
    under FILL_API (`ok`, `error`: the code, `message`)."""
    if error.status_code == 500:
        log.error("%s %s failed:\n%s", bottle.request.method, bottle.request.path, error.traceback)
    response = bottle.response
    # Bottle replaced the headers the after_request hook set with the error's own.
    set_common_headers(response)
    response.content_type = JSON
    # A yanked build's 410 is not for good: an unyank must show at once.
    gone = error.status_code == 410 and getattr(error, "code", None) != "build_yanked"
    response.set_header("Cache-Control", f"public, max-age={GONE_MAX_AGE}" if gone else "no-store")
    if error.status_code == 405 and not isinstance(error, ApiError):  # bottle's own
        response.set_header("Allow", ALLOWED_METHODS)
    fill = in_fill_api(bottle.request.path)
    if isinstance(error, ApiError):
        if fill:
            return encode(FillError(False, error.code, error.body))
        return encode({"error": error.body, "code": error.code, **error.fields})
    code, message = {
        404: ("not_found", f"no such path: see {API}/projects"),
        405: ("method_not_allowed", "this API only answers GET and HEAD (and OPTIONS for CORS)"),
    }.get(error.status_code, ("internal_error", "internal error: the cause is in the server's log"))
    if fill:
        if code == "not_found":  # Fill's code and words (Spring's) for an unknown path
            request = bottle.request
            code = "unknown_method"
            message = f"No endpoint {request.method} {shown(request.path)}: see {FILL_API}/projects"
        return encode(FillError(False, code, message))
    return error_body(code, message)
