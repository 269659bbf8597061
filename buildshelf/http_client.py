"""Outgoing HTTP, for the three that make requests: import-jenkins's fetches
(jenkins/fetch.py), the OIDC issuer's keys (publishing/oidc.py) and webhook deliveries
(webhooks/sending.py).

An exchange keeps to a `Deadline`: connecting, sending, and each read of the status line and
headers get the time left, so that a server dripping its answer a byte at a time is cut off
at the deadline like one that says nothing. The body is read by the same deadline, or, for a
download that may take long, at a pace. Whether redirects are followed, whether internal
addresses are refused and whether the environment's proxy is used are the caller's to say.
Every failure is one `HttpError`, whose message names the URL and says why, and whose
`reason` says why without the URL: a webhook's URL is a credential.
"""

import functools
import http.client
import io
import ipaddress
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from urllib.parse import urlsplit

from buildshelf.text import counted, size, sizes

SCHEMES = ("http", "https")
READ_BYTES = 1 << 20  # the most a body's read asks for at once
# What makes an address internal, in the words a message uses; an address that is none of
# these but still not global (shared, documentation, benchmarking ranges) is "non-public".
INTERNAL = {
    "is_loopback": "loopback",
    "is_link_local": "link-local",
    "is_multicast": "multicast",
    "is_unspecified": "unspecified",
    "is_reserved": "reserved",
    "is_private": "private",
}


class HttpError(Exception):
    """No answer, or not one to read: str() says why, naming the URL; `reason` says why
    without it, for a log line that must not show the URL."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


class Timeout(HttpError):
    """The deadline passed, or the body stalled or fell behind its pace."""


class Deadline:
    """When an exchange (or several, one after the other) must be over; `seconds`, the time
    it was given, is what messages say."""

    def __init__(self, seconds: float):
        self.seconds, self.at = seconds, time.monotonic() + seconds

    def left(self) -> float:
        """The seconds left, or TimeoutError once there are none."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline passed")
        return left


class _Blocked(OSError):
    """A connection refused before it was made: the host's address is internal."""


class _TooSlow(TimeoutError):
    """The body fell behind the pace."""

    def __init__(self, received, elapsed):
        super().__init__(received, elapsed)
        self.received, self.elapsed = received, elapsed


def internal_kind(address: str) -> str | None:
    """What makes `address` internal ("loopback", "private"...), or None if it is public."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:  # ::ffff:127.0.0.1
        ip = ip.ipv4_mapped
    kind = next((kind for test, kind in INTERNAL.items() if getattr(ip, test)), None)
    return kind or (None if ip.is_global else "non-public")


def _connect(host, port, deadline, allowed):
    """A connection to `host` by `deadline`: if `allowed` is not None and does not name the
    host, to none of its addresses if any is internal. The address checked is the one
    connected to, so that a name that resolves again to another address (DNS rebinding) gets
    no further."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    if allowed is not None and host.lower() not in allowed:
        for *_, sockaddr in found:
            if kind := internal_kind(sockaddr[0]):
                at = "" if sockaddr[0] == host else f", which is at {sockaddr[0]}"
                raise _Blocked(
                    f"was redirected to {host}{at}, a {kind} address: not fetched "
                    f"(--allow-host {host} allows it)"
                )
    error = OSError(f"{host} has no address")
    for family, kind, proto, _, sockaddr in found:
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(deadline.left())
            sock.connect(sockaddr)
            return sock
        except OSError as failed:
            sock.close()
            error = failed
    raise error


class _TimedFile(io.RawIOBase):
    """A response's bytes from its socket, each read given the time left before the deadline;
    or, once a paced body starts, never silent for the deadline's seconds, and at the
    deadline's seconds plus as many again per `pace` bytes at most (checked as bytes come, so
    that a stall ends the deadline's seconds after them)."""

    def __init__(self, sock, fp, deadline):
        self.sock, self.fp, self.deadline = sock, fp, deadline
        self.pace, self.started, self.received = None, 0.0, 0

    def start_pace(self, pace):
        self.pace, self.started, self.received = pace, time.monotonic(), 0

    def readable(self):
        return True

    def fileno(self):
        return self.fp.fileno()

    def readinto(self, buffer):
        seconds = self.deadline.seconds
        self.sock.settimeout(self.deadline.left() if self.pace is None else seconds)
        count = self.fp.raw.readinto(buffer)
        if self.pace is not None and count:
            self.received += count
            elapsed = time.monotonic() - self.started
            if elapsed > seconds * (1 + self.received / self.pace):
                raise _TooSlow(self.received, elapsed)
        return count

    def close(self):
        self.fp.close()
        super().close()


class _TimedResponse(http.client.HTTPResponse):
    def __init__(self, sock, *args, deadline, pace, **kwargs):
        super().__init__(sock, *args, **kwargs)
        self.fp = io.BufferedReader(_TimedFile(sock, self.fp, deadline))
        self.pace = pace

    def begin(self):
        super().begin()
        if self.fp is not None and self.pace is not None:
            self.fp.raw.start_pace(self.pace)


class _TimedHTTPConnection(http.client.HTTPConnection):
    deadline, allowed = None, None  # set on each connection by _connection

    def connect(self):
        self.sock = _connect(self.host, self.port, self.deadline, self.allowed)
        # As http.client does: a request's head and body may go in two sends.
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._tunnel_host:  # an https URL through the environment's proxy
            self._tunnel()

    def send(self, data):
        if self.sock is not None:  # else connecting comes first, by the deadline too
            self.sock.settimeout(self.deadline.left())
        super().send(data)


# HTTPSConnection.connect calls super().connect(), which this order makes the timed one,
# and then wraps the socket for self.host: the certificate is checked for the name asked.
class _TimedHTTPSConnection(http.client.HTTPSConnection, _TimedHTTPConnection):
    pass


def _connection(cls, deadline, allowed, pace):
    def make(host, **kwargs):
        made = cls(host, **kwargs)
        made.deadline, made.allowed = deadline, allowed
        made.response_class = functools.partial(_TimedResponse, deadline=deadline, pace=pace)
        return made

    return make


class _TimedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, *policy):
        super().__init__()
        self.policy = policy

    def http_open(self, req):
        return self.do_open(_connection(_TimedHTTPConnection, *self.policy), req)


class _TimedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, *policy):
        super().__init__()
        self.policy = policy

    def https_open(self, req):
        return self.do_open(_connection(_TimedHTTPSConnection, *self.policy), req)


class _HttpOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """urllib follows redirects to ftp:// too: these follow http(s) ones only."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if urlsplit(newurl).scheme not in SCHEMES:
            fp.close()
            raise HttpError(
                f"{req.full_url} redirects to {newurl!r}, not an http(s) address",
                "redirects to an address that is not http(s)",
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class _EveryAnswer(urllib.request.HTTPErrorProcessor):
    """Every answer returned as it came: a redirect is neither followed nor an error."""

    def http_response(self, request, response):
        return response

    https_response = http_response


class Response:
    """An answer whose status line and headers came: `status`, `reason`, `headers` (names in
    any case), `length` (its Content-Length, or None); its body to read a chunk at a time
    (`chunk`), whole (`read`) or its start only (`first`), each failure an HttpError."""

    def __init__(self, url, deadline, answer, pace):
        self.url, self.deadline, self.pace = url, deadline, pace
        self._answer, self.received = answer, 0
        self.status, self.reason, self.headers = answer.status, answer.reason, answer.headers
        self.length = answer.length

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._answer.close()

    def _next(self, most):
        try:
            # read1: one receive at most, so that a sender's pace is seen as it goes.
            chunk = self._answer.read1(most)
        except (OSError, ValueError, http.client.HTTPException) as error:
            raise _failure(error, self.url, self.deadline, self) from None
        self.received += len(chunk)
        return chunk

    def chunk(self) -> bytes:
        """The body's next bytes, b"" at its end; one cut short is HttpError."""
        chunk = self._next(READ_BYTES)
        if not chunk and self.length is not None and self.received < self.length:
            # http.client ends a body at Content-Length, or earlier without a word if cut.
            got, announced = sizes(self.received, self.length)
            raise HttpError(
                f"{self.url} was cut short: {got} of {announced} came",
                f"cut short: {got} of {announced} came",
            )
        return chunk

    def read(self, most: int) -> bytes:
        """The body, whole; HttpError if it is over `most` bytes, which are all that is read."""
        body = bytearray()
        while len(body) <= most and (chunk := self.chunk()):
            body += chunk
        if len(body) > most:
            raise HttpError(
                f"{self.url} answers more than {size(most)}", f"answers more than {size(most)}"
            )
        return bytes(body)

    def first(self, most: int) -> bytes:
        """The body's first `most` bytes, or what came of it: the rest is never read."""
        body = bytearray()
        while len(body) < most and (chunk := self._next(most - len(body))):
            body += chunk
        return bytes(body)


def request(
    url: str,
    deadline: Deadline,
    *,
    method: str = "GET",
    body: bytes | None = None,
    headers: dict | None = None,
    redirects: bool = True,
    allowed_hosts: Iterable[str] | None = None,
    proxies: bool = False,
    pace: int | None = None,
) -> Response:
    """The answer to `method` on `url`, its status line and headers read by `deadline`.

    `redirects`: followed, to http(s) addresses only, and then an answer that is not 2xx is
    HttpError (what was asked for is a document); not followed, every answer is returned, a
    3xx like any other. `allowed_hosts`: None, any address is connected to; else only public
    addresses, but for these hosts' (in any case). `proxies`: the environment's proxy
    (`https_proxy`...) is used, never with `allowed_hosts`: the address checked must be the
    one connected to. `pace`: None, the body is read by the deadline too; else it must never
    be silent for the deadline's seconds, and must come at `pace` bytes each at least.
    """
    if urlsplit(url).scheme not in SCHEMES:
        raise HttpError(f"{url!r} is not an http:// or https:// address", "not an http(s) address")
    allowed = None if allowed_hosts is None else frozenset(h.lower() for h in allowed_hosts)
    policy = (deadline, allowed, pace)
    handlers = [
        _TimedHTTPHandler(*policy),
        _TimedHTTPSHandler(*policy),
        _HttpOnlyRedirects if redirects else _EveryAnswer,
    ]
    if not proxies or allowed is not None:
        handlers.append(urllib.request.ProxyHandler({}))
    opener = urllib.request.build_opener(*handlers)
    try:
        answer = opener.open(
            urllib.request.Request(url, body, headers or {}, method=method),
            timeout=deadline.left(),
        )
    except (OSError, ValueError, http.client.HTTPException) as error:
        raise _failure(error, url, deadline) from None
    codings = ", ".join(answer.headers.get_all("Transfer-Encoding", []))
    if codings and codings.strip().lower() != "chunked":
        answer.close()  # http.client would pass the framing on as the body
        raise HttpError(
            f"{url} sent its body as {codings!r}: only 'chunked' is read",
            f"sent its body as {codings!r}",
        )
    return Response(url, deadline, answer, pace)


def _failure(error, url, deadline, response=None) -> HttpError:
    """`error`, met asking for `url` (or reading `response`'s body), as an HttpError."""
    seconds = deadline.seconds
    if isinstance(error, urllib.error.HTTPError):
        error.close()
        said = f"answered {error.code} {error.reason}"
        return HttpError(f"{url} {said}", said)
    if isinstance(error, urllib.error.URLError):  # connecting or sending failed
        reason = error.reason
        if isinstance(reason, TimeoutError):
            return _failure(reason, url, deadline)
        if isinstance(reason, _Blocked):
            return HttpError(f"{url} {reason}", str(reason))
        return HttpError(f"cannot reach {url}: {reason}", _why(reason))
    if isinstance(error, _TooSlow):
        got, pace = sizes(error.received, response.pace)
        said = f"is too slow: {got} in {error.elapsed:.1f} s (at least {pace} each {seconds:g} s)"
        return Timeout(f"{url} {said}", said)
    if isinstance(error, TimeoutError):
        if response is not None and response.pace is not None:
            return Timeout(
                f"{url} sent nothing for {seconds:g} s", f"sent nothing for {seconds:g} s"
            )
        return Timeout(
            f"no answer from {url} within {seconds:g} s", f"no answer within {seconds:g} s"
        )
    if isinstance(error, http.client.IncompleteRead) and response is not None:
        got = counted(response.received + len(error.partial), "byte")  # a chunked body cut
        return HttpError(f"{url} was cut short after {got}", f"cut short after {got}")
    return HttpError(f"cannot read {url}: {error}", _why(error))


def _why(error):
    """What went wrong, in words that never quote the URL (str() of http.client's InvalidURL
    does)."""
    if isinstance(error, socket.gaierror):
        return "host name not found"
    if isinstance(error, ssl.SSLError):
        return f"TLS failed ({error.reason or type(error).__name__})"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror.lower()
    if isinstance(error, str):  # urllib's own reasons: "no host given"
        return error
    return type(error).__name__
