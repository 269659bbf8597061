"""A request's parser on a guarded connection (GuardedParser): a request that could smuggle
another past a proxy is marked (malformed); once the head is in, before a byte of the body is
read, the connection's screen is asked; a body let through goes into the buffer the server
gives (bodies.py's), what came past the head waits in memory while a Deferred verdict is
decided, and waitress's own refusals of a body become the app's.

The connection that reads its requests with it is connection.py's.
"""

import io

from waitress.parser import HTTPRequestParser
from waitress.utilities import RequestEntityTooLarge

from buildshelf.web.answers import too_large
from buildshelf.web.contract import Deferred


def malformed(request):
    """Why `request` must be refused and its connection closed, or None.

    Both are ways to smuggle a second request past a proxy that frames messages differently.
    """
    if request.chunked and "CONTENT_LENGTH" in request.headers:
        return "Content-Length and Transfer-Encoding together (RFC 9112 6.3)"
    if request.version == "1.1" and "HOST" not in request.headers:
        return "an HTTP/1.1 request without a Host header (RFC 9112 3.2)"
    return None


class GuardedParser(HTTPRequestParser):
    """A request's parser that asks the connection's screen once the head is in, keeps the
    body in a BodyBuffer, and turns waitress's own refusals of a body into the app's."""

    problem = None  # why the request is malformed
    refused = None  # the ApiError to answer instead of the request
    body_unread = False  # a body was announced, and is dropped: see GuardedChannel.handle_close
    environ = None  # made on the loop thread when the request was screened or recalled
    shown = None  # the environ the screen saw, which consume is given too
    awaiting = False  # the screen's Deferred verdict is being decided: nothing more is read
    held = b""  # what came past the head, in the same read, while the verdict was awaited
    wants_continue = False  # the client asked for a 100 Continue, sent once the verdict lets it
    proven = None  # what the verdict proved: the app's environ[PROVEN]
    pace = None  # (time, body bytes received) when the body's pace was last checked

    def __init__(self, adj, channel):
        super().__init__(adj)
        self.channel = channel

    def parse_header(self, header_plus):
        super().parse_header(header_plus)
        # Before the body is read: waitress rewrites Content-Length once it has de-chunked it.
        self.problem = malformed(self)
        if self.problem:
            self.drop_body()
            return
        if self.body_rcv is not None:
            self.body_rcv.buf = self.channel.server.body_buffer()
        verdict = self.channel.screened(self)
        if isinstance(verdict, Deferred):
            # Not a byte more is read, and no 100 Continue sent, until it is decided.
            self.awaiting = True
            self.wants_continue, self.expect_continue = self.expect_continue, False
            self.channel.decide(self, verdict)
        else:
            self.refuse(verdict if verdict is not None else self.channel.let_through(self))

    def refuse(self, error):
        """Answer `error` instead of the request: see drop_body."""
        if error is not None:
            self.refused = error
            self.awaiting, self.held = False, b""
            self.drop_body()

    def drop_body(self):
        """Hand the request to the app at once, bodiless, with no 100 Continue: whatever the
        client sent after its head, or is still sending, is dropped with the connection."""
        if self.body_rcv is not None:
            self.body_rcv.getbuf().close()
            self.body_unread = True
        self.body_rcv, self.chunked, self.content_length = None, False, 0
        self.expect_continue = False

    def received(self, data):
        if self.awaiting and self.headers_finished:
            # The connection is not read while the verdict is awaited (GuardedChannel.readable):
            # this came in the read that brought the head, recv_bytes at most.
            self.held += data
            return len(data)
        consumed = super().received(data)
        if isinstance(self.error, RequestEntityTooLarge):
            # Over max_request_body_size: by Content-Length, or as chunks arrived. The app
            # answers it in JSON, where waitress would answer in plain text (and would first
            # send a 100 Continue to a client that asked for one, and read on).
            self.error = None
            self.refuse(too_large(self.adj.max_request_body_size - 1))
        elif self.body_rcv is not None and self.body_rcv.getbuf().error is not None:
            self.refuse(self.body_rcv.getbuf().refusal())
            self.completed = True
        if self.awaiting and self.completed:
            self.completed = False  # a request with no body waits for its verdict too
        if self.completed:
            self.channel = None  # no cycle with the connection
        if self.problem or self.refused is not None:
            return len(data)
        return consumed

    def get_body_stream(self):
        # The screen's environ is made before the body is read: it has none.
        return super().get_body_stream() if self.completed else io.BytesIO()
