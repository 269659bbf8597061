"""One client connection under waitress, guarded: a malformed request, or one the app's
screen refuses once its head is in, is answered without its body and its connection closed; a
body is held on disk beyond a small buffer; a client that does not read its answers never
holds a worker thread; and a request whose answer the app has in memory is answered at once by
the loop thread.

A request is read by parser.py's GuardedParser and answered by tasks.py's GuardedTask. The
server that accepts these connections and keeps them within limits is server.py's; the bodies
they receive are held by bodies.py's.
"""

import collections
import socket
import time
import traceback

from waitress.channel import HTTPChannel

from buildshelf.serving.accesslog import access_record
from buildshelf.serving.parser import GuardedParser
from buildshelf.serving.tasks import GuardedErrorTask, GuardedTask
from buildshelf.web.downloads import FileShrank
from buildshelf.web.query import ApiError

# A connection stops taking on pipelined requests while this much of its output is unsent;
# it goes on when the client has read it. Bodies of contract.BY_REFERENCE_BYTES or more are
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
# After the answer to a request refused with its body unread, what the client still sends is
# read and dropped for up to this long before the connection is closed (see handle_close).
LINGER_SECONDS = 5
# A body must arrive at this pace at least, over each channel timeout: one that trickles (a
# byte every few seconds) is dropped with its file as one that stops is, where waitress's own
# timeout, reset by every byte, would keep it for ever. Apache's mod_reqtimeout asks as much
# by default (MinRate=500); a slow but steady upload goes far faster.
MIN_BODY_RATE = 500  # bytes a second


def _failed(what):
    """The 500 refusal of a request that `what` failed on (a bug): the app logs the
    traceback."""
    error = ApiError(500, "internal_error", f"internal error: {what} failed")
    error.traceback = traceback.format_exc()
    return error


class GuardedChannel(HTTPChannel):
    """A connection that never makes a worker thread wait for its client, and whose requests
    the app can answer from memory are answered at once, on the loop thread."""

    task_class = GuardedTask
    error_task_class = GuardedErrorTask
    awaiting_drain = False  # a pipelined request waits until the client reads what is sent
    answer_at_once = False  # set by GuardedServer.add_task on the loop thread
    lingers = False  # closing must wait: the answer is to a request whose body is unread
    lingering_until = 0.0  # time.monotonic() when a lingering connection is closed

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.unlogged = collections.deque()  # tasks whose answers are not all sent yet
        self.idle_since = self.creation_time  # since the last answer, or since connecting
        self.accepted_in_turn = self.server.turn
        self.send_buffer_bytes = self.sendbuf_len  # waitress asks its outbuf for this a send
        self.turn_left, self.sendbuf_len = MIN_SHARE, min(self.sendbuf_len, MIN_SHARE)

    def parser_class(self, adj):
        """The parser of a new request (waitress makes each so): one that asks this
        connection's screen."""
        return GuardedParser(adj, self)

    def screened(self, request):
        """The server's screen's verdict on `request`, whose head is in and whose body is
        not: None, the ApiError to answer instead, or a Deferred. It runs on the loop thread,
        as the server's recall does."""
        screen = self.server.screen
        if screen is None:
            return None
        environ = self.task_class(self, request).get_environment()
        if request.body_rcv is None:
            request.environ = environ  # the request is complete: its environ is made once
        request.shown = dict(environ)  # the screen's own, with the framing waitress took out
        if request.chunked:
            request.shown["HTTP_TRANSFER_ENCODING"] = "chunked"
        try:
            return screen(request.shown)
        except Exception:
            return _failed("the screen")

    def let_through(self, request):
        """Give the body of `request`, which the screen let through, to the server's
        `consume`, whose consumer, if any, takes it as it arrives; the ApiError to answer
        instead if that fails."""
        consume = self.server.consume
        if consume is None or request.body_rcv is None or request.shown is None:
            return None
        try:
            consumer = consume(request.shown)
        except Exception:
            return _failed("the body's consumer")
        if consumer is not None:
            request.body_rcv.getbuf().consume_with(consumer)
        return None

    def decide(self, request, verdict):
        """Have the server's deciding threads decide `verdict` on `request`: then `decided`
        runs on the loop thread, which serves the other connections meanwhile."""

        def deciding():
            try:
                outcome = verdict.decide(), None
            except ApiError as refusal:
                outcome = None, refusal
            except Exception:
                outcome = None, _failed("the screen's verdict")
            # From this thread, never the loop's: the loop runs the trigger's thunks holding
            # the lock that pull_trigger takes (a future's done-callback, which runs on the
            # thread that adds it when the future is done already, hung the loop so).
            self.server.trigger.pull_trigger(lambda: self.decided(request, *outcome))

        try:
            self.server.deciders.submit(deciding)
        except RuntimeError:  # the server is stopping: its deciding threads are gone
            request.refuse(
                ApiError(503, "credentials_unavailable", "the server is stopping: try again")
            )

    def decided(self, request, proven, refusal):
        """On the loop thread: `request`'s verdict has come. A refusal is answered, and its
        body never read; what is proven becomes environ[PROVEN], and the body is read."""
        if not (request.awaiting and request is self.request and self.connected):
            return  # refused by the server meanwhile, or the connection is gone
        if self.will_close or self.close_when_flushed:
            return  # closing: what it still had to answer is not answered
        request.awaiting, held, request.held = False, request.held, b""
        if refusal is None:
            request.proven = proven
            refusal = self.let_through(request)
        if refusal is not None:
            request.refuse(refusal)
            held = b""
        elif request.body_rcv is not None:
            # Sent now, or by waitress once the requests before this one are answered.
            request.expect_continue = request.wants_continue
            if request.expect_continue and not self.requests:
                self.send_continue()
            self.received(held)  # the body's first bytes, read with the head
            return
        request.completed = True  # refused, or a request with no body: it is whole
        with self.requests_lock:
            self.requests.append(request)
            self.request = request.channel = None
            if len(self.requests) == 1:
                self.server.add_task(self)
        self.received(held)  # what was pipelined after it, if anything; answers the queue

    def handle_close(self):
        if self.socket is None:  # closed already
            return
        if self.request is not None:  # a body still arriving: its buffer goes now
            self.request.close()
        if self.lingers and not self.lingering_until and not self.total_outbufs_len:
            # The answer is out, and the client may still be sending the body. Closing with
            # bytes unread sends a reset, which can reach the client before it reads the
            # answer (and nginx answers 502 for it). End the answer (FIN), read and drop what
            # comes until the client closes, for LINGER_SECONDS at most, then close.
            self.lingering_until = time.monotonic() + LINGER_SECONDS
            self.will_close = False
            try:
                self.socket.shutdown(socket.SHUT_WR)
                return
            except OSError:  # the client has gone
                pass
        if self.awaiting_drain:
            # Requests held back until the client read its answers, which no task will take
            # now: their bodies go (a publish's file, received into the store as it came).
            with self.requests_lock:
                waiting, self.requests = self.requests, []
            for request in waiting:
                request.close()
        super().handle_close()
        with self.outbuf_lock:  # what is unsent now never will be
            self._log_sent(closed=True)

    def readable(self):
        return not (self.held_back() or self.awaiting()) and super().readable()

    def awaiting(self):
        """Whether the request being received awaits its verdict: then nothing more of it is
        read."""
        return self.request is not None and self.request.awaiting

    def crawling(self, now, seconds):
        """Whether the body being received came at less than MIN_BODY_RATE since its pace
        was last checked, `seconds` or more ago (it is checked again from `now` then)."""
        request = self.request
        if request is None or request.body_rcv is None or request.completed:
            return False
        if request.awaiting or self.held_back():
            request.pace = None  # held back by the server, not the client: not counted
            return False
        received = request.body_bytes_received
        if request.pace is None:
            request.pace = (now, received)
            return False
        since, then = request.pace
        if now - since < seconds:
            return False
        request.pace = (now, received)
        return received - then < MIN_BODY_RATE * (now - since)

    def held_back(self):
        """Whether the body being received goes to a file, and the writer is behind: then it
        waits in the client's socket, and the loop reads the other connections."""
        request = self.request
        return (
            self.server.body_writer.backlogged
            and request is not None
            and request.body_rcv is not None
            and not request.completed
            and request.body_rcv.getbuf().memory is None
        )

    def handle_read(self):
        if self.held_back():  # became so in this turn, through another connection's read
            return
        if not self.lingering_until:
            return super().handle_read()
        try:
            data = self.recv(self.adj.recv_bytes)  # closes at the end or on a reset
        except OSError:
            data = b""
        if not data or time.monotonic() > self.lingering_until:
            self.handle_close()

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
        if request.error or request.problem or request.refused or not self.connected:
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
        self.bytes_sent += sent
        if self.unlogged:
            self._log_sent()
        return sent

    # --- the access log: each answer's body bytes written to the socket ---
    # Bytes are counted from the connection's first: an answer is the stretch of them queued
    # while its task ran (none of another task's: a connection runs one task at a time, and
    # waitress queues a 100 Continue only while it runs none). Counts change under
    # outbuf_lock, or on the loop thread while no task runs.

    bytes_sent = 0  # written to the socket

    def queued(self):
        """The count of the next byte queued to be sent."""
        with self.outbuf_lock:
            return self.bytes_sent + self.total_outbufs_len

    def log_when_sent(self, task):
        """Hand the server's access log `task`'s record once its answer is sent (now, if it
        is), or the connection closes."""
        if self.server.access_log is None:
            return
        with self.outbuf_lock:
            task.ends_at = self.queued()
            self.unlogged.append(task)
            self._log_sent(closed=not self.connected)

    def _log_sent(self, closed=False):
        while self.unlogged and (closed or self.unlogged[0].ends_at <= self.bytes_sent):
            task = self.unlogged.popleft()
            body_starts = task.starts_at + task.header_bytes
            task.body_sent = max(0, min(self.bytes_sent, task.ends_at) - body_starts)
            self.server.access_log(access_record(task, task.seconds))

    def handle_write(self):
        share = max(MIN_SHARE, TURN_BYTES // max(1, len(self.server.active_channels)))
        self.turn_left, self.sendbuf_len = share, min(self.send_buffer_bytes, share)
        super().handle_write()
        if self.awaiting_drain and self.total_outbufs_len <= UNSENT_OUTPUT_LIMIT:
            self.awaiting_drain = False
            if self.connected and self.requests:
                self.server.task_dispatcher.add_task(self)
