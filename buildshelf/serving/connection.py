"""One client connection under waitress, guarded: a malformed request is refused and its
connection closed, a client that does not read its answers never holds a worker thread, and a
request whose answer the app has in memory is answered at once by the loop thread.

The server that accepts these connections and keeps them within limits is server.py's.
"""

import time

from waitress.channel import ClientDisconnected, HTTPChannel
from waitress.parser import HTTPRequestParser
from waitress.task import ErrorTask, WSGITask
from waitress.utilities import InternalServerError

from buildshelf.serving.accesslog import access_record
from buildshelf.web.answers import MALFORMED
from buildshelf.web.downloads import FileShrank

# A connection stops taking on pipelined requests while this much of its output is unsent;
# it goes on when the client has read it. Bodies of answers.BY_REFERENCE_BYTES or more are
# queued by reference (the app hands them over as wsgi.file_wrapper of shared, immutable
# bytes), so this bounds what each connection holds as copies, and nothing goes to a
# temporary file.
UNSENT_OUTPUT_LIMIT = 64 * 1024
# What a turn of the loop sends at most, shared among the open connections (at least
# MIN_SHARE each): then the loop goes on to the others. waitress would send until the socket
# is full, megabytes a connection for downloads to fast clients, while every other waited. A
# lone download still goes out in big sends; a worker thread handing an answer over sends
# MIN_SHARE of it at most, and the loop the rest.
TURN_BYTES = 4 << 20
MIN_SHARE = 64 << 10
# Pipelined requests the loop thread answers from memory per read of a connection (8 KiB: up
# to about 200 requests) before a worker thread takes over the rest.
ANSWERS_PER_READ = 32
# The environ key of the answer the loop thread recalled (see GuardedChannel.received).
RECALLED = "buildshelf.recalled"


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
    problem = None
    environ = None  # made on the loop thread when it looked for the answer in memory

    def parse_header(self, header_plus):
        super().parse_header(header_plus)
        # Before the body is read: waitress rewrites Content-Length once it has de-chunked it.
        self.problem = malformed(self)
        if self.problem:
            # Hand the request to the app at once, bodiless, for a JSON 400; whatever the
            # client sent after it is dropped with the connection.
            self.body_rcv, self.chunked, self.content_length = None, False, 0


class AccessLogged:
    """A waitress task that hands the server's access_log a record of the request it answered."""

    def service(self):
        started = time.perf_counter()
        try:
            super().service()
        except Exception as error:
            if not (self.wrote_header or isinstance(error, ClientDisconnected)):
                self.status = "500 Internal Server Error"  # waitress's answer instead
            raise
        finally:
            write = self.channel.server.access_log
            if write is not None:
                write(access_record(self, time.perf_counter() - started))


class GuardedErrorTask(AccessLogged, ErrorTask):
    """waitress's answer to a request it could not read (400, 413, 431, ...), logged."""

    def service(self):
        if isinstance(self.request.error, InternalServerError):  # logged by the failed task
            ErrorTask.service(self)
        else:
            super().service()


class GuardedTask(AccessLogged, WSGITask):
    def __init__(self, channel, request):
        super().__init__(channel, request)
        self.environ = request.environ  # made once: WSGITask.get_environment keeps it

    def get_environment(self):
        environ = super().get_environment()
        if self.request.problem:
            environ[MALFORMED] = self.request.problem
        return environ

    def set_close_on_finish(self):
        """Keep-alive after 204 and 304: waitress 3.0 closes the connection after them, for
        want of the Content-Length those answers may not carry, and clients revalidate all
        day. Close unless the client asked to, or the request was malformed."""
        if (
            self.has_body
            or self.version != "1.1"
            or self.request.problem
            or self.request.headers.get("CONNECTION", "").lower() == "close"
        ):
            super().set_close_on_finish()

    def build_response_header(self):
        if self.request.problem:
            self.set_close_on_finish()
        return super().build_response_header()


class GuardedChannel(HTTPChannel):
    """A connection that never makes a worker thread wait for its client, and whose requests
    the app can answer from memory are answered at once, on the loop thread."""

    task_class = GuardedTask
    error_task_class = GuardedErrorTask
    parser_class = GuardedParser
    awaiting_drain = False  # a pipelined request waits until the client reads what is sent
    answer_at_once = False  # set by GuardedServer.add_task on the loop thread

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.idle_since = self.creation_time  # since the last answer, or since connecting
        self.accepted_in_turn = self.server.turn
        self.send_buffer_bytes = self.sendbuf_len  # waitress asks its outbuf for this a send
        self.turn_left, self.sendbuf_len = MIN_SHARE, min(self.sendbuf_len, MIN_SHARE)

    def handle_read_event(self):
        # Readiness that select() reported in the turn this connection was accepted belongs
        # to the socket that had its descriptor number before: one closed in that turn to
        # make room (GuardedServer.accept_one). Reading it found nothing, which waitress
        # logged as a traceback and closed the new connection. select() reports this one's
        # own data in the next turn.
        if self.accepted_in_turn != self.server.turn:
            super().handle_read_event()

    def received(self, data):
        received = super().received(data)
        # Here no lock is held, and no worker thread has this connection: add_task left it.
        answered = 0
        while self.answer_at_once:
            self.answer_at_once = False
            # A worker thread takes over a long pipeline: the loop has other clients.
            if answered == ANSWERS_PER_READ or not self.answered_from_memory():
                self.server.task_dispatcher.add_task(self)
            answered += 1
        if (self.total_outbufs_len or self.close_when_flushed) and not self.requests:
            self.handle_write()  # now, rather than after another turn of select()
        return received

    def answered_from_memory(self):
        """Answer the first request if the server's recall() knows the answer; True if so.

        A worker thread would cost more than the answer: waking it, handing the interpreter
        lock back and forth, and waking the loop to send what it wrote (docs/performance.md).
        """
        request = self.requests[0]
        if request.error or request.problem or not self.connected:
            return False
        environ = self.task_class(self, request).get_environment()
        try:
            recalled = self.server.recall(environ)
        except Exception:  # a bug: the worker's call of the app meets it too, and answers 500
            recalled = None
        request.environ = environ  # made once, whichever thread answers
        if recalled is None:
            return False
        environ[RECALLED] = recalled
        self.service()  # waitress's, on this thread: no worker has the connection
        return True

    def _flush_some(self, do_close=True):
        try:
            return super()._flush_some(do_close)
        except FileShrank:
            # A file being sent ended early (downloads.py logged it once). Its headers are
            # out: close the connection, as waitress does when a send fails, but without the
            # traceback it logs for any other exception here.
            self.will_close = True
            return False

    def _flush_outbufs_below_high_watermark(self):
        # waitress blocks the worker here until the client reads; the server holds back the
        # next pipelined request instead (see GuardedServer.add_task). Called on every write:
        # no lock when nothing is pending.
        if self.total_outbufs_len:
            with self.outbuf_lock:
                self._flush_exception(self._flush_some, do_close=False)

    def service(self):
        super().service()
        self.idle_since = time.time()

    def writable(self):
        if self.requests and not (
            self.awaiting_drain or self.will_close or self.close_when_flushed
        ):
            # A worker thread has this connection: it sends what it writes, and wakes the
            # loop when done. Watching the socket meanwhile made select() return at once, and
            # the loop spin holding the interpreter lock that the worker waits for.
            return False
        return self.awaiting_drain or super().writable()

    def send(self, data, do_close=True):
        # waitress sends until a send takes nothing. Past the turn's share, its outbuf is
        # asked for nothing more (sendbuf_len), so no byte is read to be thrown away, and
        # sending nothing ends its loop.
        sent = super().send(data, do_close) if data else 0
        self.turn_left -= sent
        self.sendbuf_len = max(0, min(self.send_buffer_bytes, self.turn_left))
        return sent

    def handle_write(self):
        share = max(MIN_SHARE, TURN_BYTES // max(1, len(self.server.active_channels)))
        self.turn_left, self.sendbuf_len = share, min(self.send_buffer_bytes, share)
        super().handle_write()
        if self.awaiting_drain and self.total_outbufs_len <= UNSENT_OUTPUT_LIMIT:
            self.awaiting_drain = False
            if self.connected and self.requests:
                self.server.task_dispatcher.add_task(self)
