"""Fetching on a user's behalf (import-jenkins: the job's JSON, --mirror's artifacts): an HTTP
GET whose redirects reach no internal address unless a host is allowed, decided on the
address actually connected to; whose body is framed only as HTTP/1.1 frames one; and that
keeps moving: the status line and headers within --timeout, then at least 1 MiB each
--timeout, and never a silence of --timeout.
"""

import http.client
import io
import ipaddress
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from buildshelf.text import counted, sizes

SCHEMES = ("http", "https")
# A body may take as long as it must, as long as it moves: at least 1 MiB for each
# --timeout seconds on average (30 s: 34 KiB/s), besides --timeout for each read.
PACE_BYTES = 1 << 20
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


class FetchError(Exception):
    """The answer could not be had, or not as asked: the message names the URL and why."""


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


def connect(host: str, port: int, timeout: float, allowed: frozenset) -> socket.socket:
    """A connection to `host`: unless it is `allowed`, to none of its addresses if any is
    internal. The address checked is the one connected to, so that a name that resolves
    again to another address (DNS rebinding) gets no further."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    if host.lower() not in allowed:
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
            sock.settimeout(timeout)
            sock.connect(sockaddr)
            return sock
        except OSError as failed:
            sock.close()
            error = failed
    raise error


class _PacedFile(io.RawIOBase):
    """A response's bytes from its socket: the status line and headers within --timeout in
    all, then the body never silent for --timeout, and at --timeout plus --timeout per
    PACE_BYTES at most (checked as bytes come, so a stall ends --timeout after them)."""

    def __init__(self, sock, fp, timeout):
        self.sock, self.fp, self.timeout = sock, fp, timeout
        self.started, self.received, self.body = time.monotonic(), 0, False

    def start_body(self):
        self.started, self.received, self.body = time.monotonic(), 0, True

    def readable(self):
        return True

    def fileno(self):
        return self.fp.fileno()

    def readinto(self, buffer):
        left = self.timeout if self.body else self.started + self.timeout - time.monotonic()
        if left <= 0:
            raise TimeoutError("the status line and headers took longer than the timeout")
        self.sock.settimeout(left)
        count = self.fp.raw.readinto(buffer)
        self.received += count or 0
        elapsed = time.monotonic() - self.started
        if self.body and count and elapsed > self.timeout * (1 + self.received / PACE_BYTES):
            raise _TooSlow(self.received, elapsed)
        return count

    def close(self):
        self.fp.close()
        super().close()


class _PacedResponse(http.client.HTTPResponse):
    def __init__(self, sock, *args, **kwargs):
        super().__init__(sock, *args, **kwargs)
        self.fp = io.BufferedReader(_PacedFile(sock, self.fp, sock.gettimeout()))

    def begin(self):
        super().begin()
        if self.fp is not None:
            self.fp.raw.start_body()


class _CheckedHTTPConnection(http.client.HTTPConnection):
    response_class = _PacedResponse
    allowed = frozenset()  # set on each connection by _connection

    def connect(self):
        self.sock = connect(self.host, self.port, self.timeout, self.allowed)


# HTTPSConnection.connect calls super().connect(), which this order makes the checked one,
# and then wraps the socket for self.host: the certificate is checked for the name asked.
class _CheckedHTTPSConnection(http.client.HTTPSConnection, _CheckedHTTPConnection):
    pass


def _connection(cls, allowed):
    def make(host, **kwargs):
        made = cls(host, **kwargs)
        made.allowed = allowed
        return made

    return make


class _CheckedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, allowed):
        super().__init__()
        self.allowed = allowed

    def http_open(self, req):
        return self.do_open(_connection(_CheckedHTTPConnection, self.allowed), req)


class _CheckedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, allowed):
        super().__init__()
        self.allowed = allowed

    def https_open(self, req):
        return self.do_open(_connection(_CheckedHTTPSConnection, self.allowed), req)


class _HttpOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """urllib follows redirects to ftp:// too: these follow http(s) ones only."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if urlsplit(newurl).scheme not in SCHEMES:
            fp.close()
            raise FetchError(f"{req.full_url} redirects to {newurl!r}, not an http(s) address")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def open_url(
    url: str, timeout: float, allowed_hosts: Iterable[str] = (), headers: dict | None = None
) -> http.client.HTTPResponse:
    """The answer to a GET of `url`, its status line and headers read, its body to read
    (with `reader`). Redirects may lead to `url`'s own host, to the `allowed_hosts` and to
    public addresses. No proxy: the address checked must be the one connected to."""
    if urlsplit(url).scheme not in SCHEMES:
        raise FetchError(f"{url!r} is not an http:// or https:// address")
    allowed = frozenset(host.lower() for host in (urlsplit(url).hostname or "", *allowed_hosts))
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}),
        _CheckedHTTPHandler(allowed),
        _CheckedHTTPSHandler(allowed),
        _HttpOnlyRedirects,
    )
    try:
        response = opener.open(urllib.request.Request(url, headers=headers or {}), None, timeout)
    except urllib.error.HTTPError as error:
        error.close()
        raise FetchError(f"{url} answered {error.code} {error.reason}") from None
    except urllib.error.URLError as error:
        if isinstance(error.reason, _Blocked):
            raise FetchError(f"{url} {error.reason}") from None
        if isinstance(error.reason, TimeoutError):
            raise FetchError(f"no answer from {url} within {timeout:g} s") from None
        raise FetchError(f"cannot reach {url}: {error.reason}") from None
    except TimeoutError:
        raise FetchError(f"no answer from {url} within {timeout:g} s") from None
    except (OSError, ValueError, http.client.HTTPException) as error:
        raise FetchError(f"cannot read {url}: {error}") from None
    codings = ", ".join(response.headers.get_all("Transfer-Encoding", []))
    if codings and codings.strip().lower() != "chunked":
        response.close()  # http.client would pass the framing on as the body
        raise FetchError(f"{url} sent its body as {codings!r}: only 'chunked' is read")
    return response


def reader(response: http.client.HTTPResponse, url: str, timeout: float) -> Callable[[], bytes]:
    """`response`'s body a chunk at a time (b"" at the end), refusing a stall, a crawl and an
    early end with FetchError."""
    length, received = response.length, 0

    def read():
        nonlocal received
        try:
            # read1: one receive at most, so that a sender's pace is seen as it goes.
            chunk = response.read1(READ_BYTES)
        except _TooSlow as slow:
            got, pace = sizes(slow.received, PACE_BYTES)
            raise FetchError(
                f"{url} is too slow: {got} in {slow.elapsed:.1f} s (at least {pace} each "
                f"{timeout:g} s)"
            ) from None
        except TimeoutError:
            raise FetchError(f"{url} sent nothing for {timeout:g} s") from None
        except http.client.IncompleteRead as error:  # a chunked body cut short
            got = received + len(error.partial)
            raise FetchError(f"{url} was cut short after {counted(got, 'byte')}") from None
        except (OSError, http.client.HTTPException) as error:
            raise FetchError(f"cannot read {url}: {error}") from None
        received += len(chunk)
        if not chunk and length is not None and received < length:
            # http.client ends a body at Content-Length, or earlier without a word if cut.
            raise FetchError(
                "{} was cut short: {} of {} came".format(url, *sizes(received, length))
            )
        return chunk

    return read
