"""http_client.py against a real HTTP server on 127.0.0.1: the deadline over a server that
drips, the paced body, the bounded reads, redirects followed or not, internal addresses
refused, the environment's proxy, and every failure as one HttpError whose reason never
names the URL."""

import http.client
import http.server
import socket
import threading
import time
from contextlib import suppress

import pytest

from buildshelf import http_client
from buildshelf.http_client import Deadline, HttpError, Timeout


@pytest.fixture
def server():
    """`routes`: path -> handler(request handler); each request's path and body noted in
    `asked`. Handlers that wait end when the test does (`release`)."""
    routes, asked, release = {}, [], threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def answer(self):
            length = int(self.headers.get("Content-Length", 0))
            asked.append((self.command, self.path, self.rfile.read(length)))
            route = routes.get(self.path)
            if route is None:
                return send(self, b"not here", status=404)
            with suppress(OSError):  # the client gave up: what some tests want
                route(self)

        do_GET = do_POST = answer

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.routes, httpd.asked, httpd.release = routes, asked, release
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield httpd
    release.set()
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def send(handler, body, *headers, status=200, length=None):
    handler.send_response(status)
    for header in headers:
        handler.send_header(*header)
    if length is not False:
        handler.send_header("Content-Length", str(len(body) if length is None else length))
    handler.end_headers()
    handler.wfile.write(body)
    handler.wfile.flush()


def answering(body, *headers, status=200, length=None):
    return lambda handler: send(handler, body, *headers, status=status, length=length)


def redirect(location, status=302):
    return answering(b"", ("Location", location), status=status)


def dripping(start):
    """A handler that writes `start`, then a byte each 50 ms, for 5 s at most."""

    def drip(handler):
        handler.wfile.write(start)
        for _ in range(100):
            handler.wfile.write(b"x")
            handler.wfile.flush()
            if handler.server.release.wait(0.05):
                return

    return drip


drip_head = dripping(b"HTTP/1.1 200 OK\r\nX-Drip: ")  # a header that never ends
drip_body = dripping(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")


def stall(handler):
    handler.server.release.wait(10)


def get(url, seconds=5.0, **options):
    return http_client.request(url, Deadline(seconds), **options)


def failure(url, seconds=5.0, read=lambda answer: answer.read(1 << 20), **options):
    """The HttpError a request (and reading its answer) raises."""
    with pytest.raises(HttpError) as raised:
        with get(url, seconds, **options) as answer:
            read(answer)
    assert url.split("://")[1] not in raised.value.reason  # a webhook's URL is a credential
    return raised.value


def test_an_answer_is_read_whole(server):
    server.routes["/a"] = answering(b"hello", ("Content-Type", "text/plain"))
    with get(server.url + "/a", headers={"Accept": "text/plain"}) as answer:
        assert (answer.status, answer.reason, answer.length) == (200, "OK", 5)
        assert answer.headers.get_content_type() == "text/plain"
        assert answer.read(5) == b"hello"


def test_a_post_sends_its_body(server):
    server.routes["/hook"] = answering(b"", status=204)
    with get(server.url + "/hook", method="POST", body=b'{"a": 1}') as answer:
        assert answer.status == 204
    assert server.asked == [("POST", "/hook", b'{"a": 1}')]


# --- the deadline -----------------------------------------------------------------------------


@pytest.mark.parametrize("route", [drip_head, drip_body, stall], ids=["head", "body", "silent"])
def test_the_deadline_bounds_the_whole_exchange_however_it_drips(server, route):
    """A socket's timeout bounds one read, not a drip of them: the deadline bounds all."""
    server.routes["/drip"] = route
    url = server.url + "/drip"
    started = time.monotonic()
    error = failure(url, 0.5)
    assert 0.4 < time.monotonic() - started < 1.5
    assert isinstance(error, Timeout)
    assert (str(error), error.reason) == (
        f"no answer from {url} within 0.5 s",
        "no answer within 0.5 s",
    )


def test_one_deadline_bounds_several_exchanges(server):
    server.routes["/slow"] = lambda handler: (time.sleep(0.3), send(handler, b"{}"))
    deadline = Deadline(0.5)
    with http_client.request(server.url + "/slow", deadline) as answer:
        answer.read(10)
    with pytest.raises(Timeout, match="within 0.5 s"):
        http_client.request(server.url + "/slow", deadline).read(10)


def test_a_paced_body_may_outlast_the_deadline_while_it_keeps_the_pace(server):
    server.routes["/drip"] = drip_body  # 20 bytes a second
    url = server.url + "/drip"
    with get(url, 0.5, pace=10) as answer:  # at least 10 bytes each 0.5 s: kept
        started = time.monotonic()
        while time.monotonic() - started < 1.5:
            assert answer.chunk()
    error = failure(url, 0.5, read=lambda answer: answer.read(1000), pace=100)
    assert isinstance(error, Timeout)
    assert str(error).startswith(f"{url} is too slow: ")
    assert error.reason.startswith("is too slow: ")


def test_a_paced_body_that_stalls_is_given_up(server):
    server.routes["/stall"] = lambda handler: (
        handler.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nPK"),
        handler.wfile.flush(),
        stall(handler),
    )
    url = server.url + "/stall"
    error = failure(url, 0.3, read=lambda answer: answer.read(9), pace=1 << 20)
    assert (str(error), error.reason) == (f"{url} sent nothing for 0.3 s", "sent nothing for 0.3 s")


# --- bounded reads ----------------------------------------------------------------------------


def test_a_body_over_the_limit_is_refused_unread(server):
    server.routes["/big"] = answering(b"x" * 100_000)
    url = server.url + "/big"
    error = failure(url, read=lambda answer: answer.read(1000))
    assert (str(error), error.reason) == (
        f"{url} answers more than 1,000 bytes",
        "answers more than 1,000 bytes",
    )


def test_the_first_bytes_only_are_read(server):
    server.routes["/big"] = answering(b"y" * 10 + b"x" * (1 << 20))
    with get(server.url + "/big") as answer:
        assert answer.first(10) == b"y" * 10
        assert answer.received == 10


def test_a_body_cut_short_is_refused(server):
    server.routes["/short"] = answering(b"PK" * 5, length=1000)
    server.routes["/chunked"] = lambda handler: handler.wfile.write(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"
    )
    short, chunked = server.url + "/short", server.url + "/chunked"
    assert str(failure(short)) == f"{short} was cut short: 10 bytes of 1,000 bytes came"
    assert str(failure(chunked)) == f"{chunked} was cut short after 5 bytes"


def test_a_body_framed_otherwise_than_chunked_is_refused(server):
    server.routes["/gzip"] = lambda handler: handler.wfile.write(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nPK\r\n0\r\n\r\n"
    )
    url = server.url + "/gzip"
    assert str(failure(url)) == f"{url} sent its body as 'gzip, chunked': only 'chunked' is read"


# --- redirects and addresses ------------------------------------------------------------------


def test_a_redirect_not_followed_is_an_answer_like_any_other(server):
    server.routes.update({"/moved": redirect("/here"), "/here": answering(b"here")})
    with get(server.url + "/moved", redirects=False) as answer:
        assert (answer.status, answer.headers["Location"]) == (302, "/here")
    assert [path for _, path, _ in server.asked] == ["/moved"]
    with get(server.url + "/moved") as answer:
        assert (answer.status, answer.read(10)) == (200, b"here")


@pytest.mark.parametrize("status", [400, 404, 500, 503])
def test_an_error_is_an_answer_unless_redirects_are_followed(server, status):
    server.routes["/no"] = answering(b"", status=status)
    url = server.url + "/no"
    with get(url, redirects=False) as answer:
        assert answer.status == status
    said = f"answered {status} {http.client.responses[status]}"
    error = failure(url)
    assert (str(error), error.reason) == (f"{url} {said}", said)


def test_a_redirect_elsewhere_than_http_is_refused(server):
    server.routes["/ftp"] = redirect("ftp://127.0.0.1/a.jar")
    url = server.url + "/ftp"
    assert (
        str(failure(url)) == f"{url} redirects to 'ftp://127.0.0.1/a.jar', not an http(s) address"
    )


def test_a_redirect_to_an_internal_address_is_refused_unless_its_host_is_allowed(server):
    elsewhere = server.url.replace("127.0.0.1", "localhost") + "/here"
    server.routes.update({"/moved": redirect(elsewhere), "/here": answering(b"here")})
    url = server.url + "/moved"
    error = failure(url, allowed_hosts=["127.0.0.1"])
    assert str(error) == (
        f"{url} was redirected to localhost, which is at 127.0.0.1, a loopback address: not "
        "fetched (--allow-host localhost allows it)"
    )
    assert [path for _, path, _ in server.asked] == ["/moved"]
    with get(url, allowed_hosts=["127.0.0.1", "LocalHost"]) as answer:
        assert answer.read(10) == b"here"
    with get(url) as answer:  # no allowed hosts: no address is checked
        assert answer.read(10) == b"here"


@pytest.mark.parametrize(
    "address, kind",
    [("10.0.0.1", "private"), ("169.254.169.254", "link-local"), ("::ffff:127.0.0.1", "loopback")]
    + [("100.64.0.1", "non-public"), ("fd00::1", "private"), ("93.184.215.14", None)],
)
def test_internal_kind(address, kind):
    assert http_client.internal_kind(address) == kind


def test_the_environments_proxy_is_used_only_when_asked(server, monkeypatch):
    monkeypatch.setenv("http_proxy", server.url)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    server.routes["http://issuer.test/keys"] = answering(b"{}")
    with get("http://issuer.test/keys", proxies=True) as answer:
        assert answer.read(10) == b"{}"
    assert server.asked[-1][1] == "http://issuer.test/keys"
    server.routes["/keys"] = answering(b"direct")
    with get(server.url + "/keys") as answer:
        assert answer.read(10) == b"direct"
    assert server.asked[-1][1] == "/keys"


# --- failures for people ----------------------------------------------------------------------


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


def test_a_refused_connection(server):
    url = f"http://127.0.0.1:{closed_port()}/a"
    error = failure(url)
    assert (str(error), error.reason) == (
        f"cannot reach {url}: [Errno 111] Connection refused",
        "connection refused",
    )


def test_a_host_name_not_found(monkeypatch):
    def getaddrinfo(host, *args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    url = "http://nowhere.test/hook/SECRET"
    error = failure(url)
    assert str(error) == f"cannot reach {url}: [Errno -2] Name or service not known"
    assert error.reason == "host name not found"


def test_tls_with_a_server_that_speaks_none(server):
    url = server.url.replace("http:", "https:") + "/a"
    error = failure(url)
    assert str(error).startswith(f"cannot reach {url}: [SSL")
    assert error.reason.startswith("TLS failed (")


def test_an_address_that_is_not_http():
    error = failure("ftp://ci.example.org/a.jar")
    assert str(error) == "'ftp://ci.example.org/a.jar' is not an http:// or https:// address"


def test_a_server_that_hangs_up(server):
    server.routes["/bye"] = lambda handler: handler.wfile.write(b"")
    url = server.url + "/bye"
    error = failure(url)
    assert str(error) == f"cannot read {url}: Remote end closed connection without response"
    assert error.reason == "RemoteDisconnected"
