"""Running a WSGI app under waitress: its limits, the access log, answers from memory, and a
graceful shutdown.

Waitress reads a whole request before a worker thread sees it, so a slow sender costs a
connection, never a thread. The classes here make the other half true: a client that does
not read its answers never holds a worker thread either, and the connection slots go to the
clients that use them. A request whose answer the app has in memory is answered by the loop
thread that read it, without a worker thread.
"""

import collections
import errno
import functools
import logging
import os
import re
import resource
import signal
import threading
import time
from urllib.parse import quote

import waitress
from waitress import wasyncore
from waitress.channel import ClientDisconnected, HTTPChannel
from waitress.parser import HTTPRequestParser
from waitress.server import BaseWSGIServer, TcpWSGIServer
from waitress.task import ErrorTask, ThreadedTaskDispatcher, WSGITask
from waitress.utilities import InternalServerError

log = logging.getLogger(__name__)

# README "Security and limits" says why each value.
LIMITS = {
    "channel_timeout": 30,
    "cleanup_interval": 10,
    "max_request_header_size": 16 * 1024,
    "max_request_body_size": 1024,
}
# waitress watches sockets with select(), which sees none numbered 1,024 or more.
MAX_CONNECTIONS = 900
SPARE_FILES = 100  # descriptors kept for data files, logs and the listening sockets
# A connection stops taking on pipelined requests while this much of its output is unsent;
# it goes on when the client has read it. Bodies of BY_REFERENCE_BYTES or more are queued by
# reference (the app hands them over as wsgi.file_wrapper of shared, immutable bytes), so
# this bounds what each connection holds as copies, and nothing goes to a temporary file.
UNSENT_OUTPUT_LIMIT = 64 * 1024
BY_REFERENCE_BYTES = 16 * 1024
DRAIN_SECONDS = 10
ACCEPT_PAUSE_SECONDS = 0.25  # out of file descriptors with nothing to close: try again then
ACCEPTS_PER_TURN = 64
# Pipelined requests the loop thread answers from memory per read of a connection (8 KiB: up
# to about 200 requests) before a worker thread takes over the rest.
ANSWERS_PER_READ = 32
# A connection whose client has read nothing of its pending answers for this long is closed
# (checked every cleanup_interval, so within 30 s): its answers cost memory, never a thread.
STALL_SECONDS = 20
LOGGED_URL_CHARACTERS = "/:@!$&'()*+,;=-._~%?"  # the rest is percent-escaped: no log forging
# What quote() leaves alone: a target made only of these is logged as it is, at less cost.
_plain_url = re.compile(f"[A-Za-z0-9{re.escape(LOGGED_URL_CHARACTERS)}]*").fullmatch
# The WSGI environ key by which a request that must be refused reaches the app, with why.
MALFORMED = "buildshelf.malformed_request"
# The environ key of the answer the loop thread recalled (see GuardedChannel.received).
RECALLED = "buildshelf.recalled"
STDERR = 2  # the process's, whatever sys.stderr has become


def access_record(task, seconds):
    """What access_line() needs of a request that `task` answered in `seconds`: what the
    thread that answered it does is collect the values; formatting them is the log writer's
    job."""
    request = task.request
    if request.error:  # waitress could not read it: what it has of the target may be made up
        method, path, query = "-", "-", ""
    else:
        method, path, query = request.command, request.path, request.query
    if not task.wrote_header:  # it failed, or its client left: no answer of its own
        sent = "-"
    elif task.has_body and method != "HEAD":
        sent = (
            task.content_length if task.content_length is not None else task.content_bytes_written
        )
    else:
        sent = 0
    return (time.time(), task.channel.addr[0], method, path, query, task.status[:3], sent, seconds)


def access_line(record):
    """An access record as a log line: client, method, target, status, bytes, time taken, in
    the format of the other log lines."""
    now, client, method, path, query, status, sent, seconds = record
    target = f"{path}?{query}" if query else path
    if not _plain_url(target):
        target = quote(target.encode("latin-1"), safe=LOGGED_URL_CHARACTERS)
    return (
        f"{_log_time(int(now))},{int(now * 1000) % 1000:03d} INFO buildshelf.access: "
        f"{client} {method} {target} {status} {sent} {seconds * 1000:.2f}ms\n"
    ).encode()


@functools.lru_cache(maxsize=4)
def _log_time(second):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))


class LineWriter:
    """Writes what it is given to stderr from a thread of its own, a batch at a time, each
    item made a line (bytes) by `to_line` there.

    The thread that answered a request only appends its item. Through the logging module,
    each waited for the handler's lock, and with one os.write each, for a system call that
    hands the interpreter lock to another thread; either way the threads queued behind each
    other (README "Performance"). Formatting a batch together here also costs less than a
    line at a time in each. Lines reach the file within `interval` seconds: a short one, since
    formatting holds the interpreter lock for as long as the batch takes.
    """

    def __init__(self, fd=STDERR, interval=0.01, to_line=bytes):
        self.fd, self.interval, self.to_line = fd, interval, to_line
        self._pending = collections.deque()  # appends and pops are atomic: no lock
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="buildshelf-log", daemon=True)
        self._thread.start()

    def __call__(self, item):
        self._pending.append(item)

    def _run(self):
        while not self._closing.wait(self.interval):
            self.flush()

    def flush(self):
        items = []
        while self._pending:
            items.append(self._pending.popleft())
        data = memoryview(b"".join(map(self.to_line, items)))
        try:
            while data:
                data = data[os.write(self.fd, data) :]
        except OSError:  # stderr closed or full: serving matters more than its log
            pass

    def close(self):
        self._closing.set()
        self._thread.join()
        self.flush()


class OncePer:
    """Says yes at most once per `seconds`: for warnings that could otherwise flood the log."""

    def __init__(self, seconds):
        self.seconds, self.next_time = seconds, 0.0

    def due(self, now):
        if now < self.next_time:
            return False
        self.next_time = now + self.seconds
        return True


class QueueWatchingDispatcher(ThreadedTaskDispatcher):
    """waitress's worker threads, noting the deepest queue instead of logging a warning per
    queued request while holding the queue's lock (which stalled every worker under load)."""

    deepest = 0

    def add_task(self, task):
        with self.lock:
            self.queue.append(task)
            self.queue_cv.notify()
            idle = len(self.threads) - self.stop_count - self.active_count
            self.deepest = max(self.deepest, len(self.queue) - idle)


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
    """A task that hands the server's access_log a record of the request it answered."""

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
        lock back and forth, and waking the loop to send what it wrote (README "Performance").
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

    def handle_write(self):
        super().handle_write()
        if self.awaiting_drain and self.total_outbufs_len <= UNSENT_OUTPUT_LIMIT:
            self.awaiting_drain = False
            if self.connected and self.requests:
                self.server.task_dispatcher.add_task(self)


class GuardedServer(TcpWSGIServer):
    """Closes connections that stall, and makes room for new ones at the connection limit."""

    channel_class = GuardedChannel
    stalled = ()
    turn = 0  # turns of the serve loop
    accept_paused_until = 0.0
    connection_limit = MAX_CONNECTIONS
    access_log = None  # called with each request's access_record
    recall = None  # the answer to a request from memory, or None: see serve()
    loop_thread = None
    _warn_full = OncePer(60)
    _warn_queue = OncePer(60)

    def pull_trigger(self):
        # The loop thread, having answered from memory, is awake already: no wake-up call.
        if threading.get_ident() != self.loop_thread:
            super().pull_trigger()

    def add_task(self, channel):
        if channel.total_outbufs_len > UNSENT_OUTPUT_LIMIT:
            channel.awaiting_drain = True  # handle_write queues it once the client reads
            self.pull_trigger()
        elif self.recall is not None and threading.get_ident() == self.loop_thread:
            channel.answer_at_once = True  # from channel.received, once it lets go of its lock
        else:
            self.task_dispatcher.add_task(channel)

    def readable(self):
        now = time.time()
        if now >= self.next_channel_cleanup:
            self.next_channel_cleanup = now + self.adj.cleanup_interval
            self.maintenance(now)
        return self.accepting and time.monotonic() >= self.accept_paused_until

    def maintenance(self, now):
        super().maintenance(now)
        self.stalled = []
        dispatcher = self.task_dispatcher
        if dispatcher.deepest > 0 and self._warn_queue.due(now):
            log.warning(
                "requests waited for a worker thread: up to %d queued at once "
                "(logged once a minute; see --threads)",
                dispatcher.deepest,
            )
            dispatcher.deepest = 0
        # waitress closes idle connections; also close those whose client reads nothing. Not
        # here: maintenance runs while select()'s lists are built (see close_stalled).
        cutoff = now - STALL_SECONDS
        self.stalled = [
            channel
            for channel in self.active_channels.values()
            if channel.total_outbufs_len and channel.last_activity < cutoff
        ]

    def close_stalled(self):
        """Close the connections maintenance found stalled. Their sockets accept no more
        bytes, so select() never reports them writable, where waitress would close them."""
        for channel in self.stalled:
            channel.handle_close()
        self.stalled = []

    def close_idlest(self, count, reason):
        """Close the `count` connections that have gone longest without an answer."""
        channels = sorted(self.active_channels.values(), key=lambda c: c.idle_since)[:count]
        for channel in channels:
            channel.handle_close()
        if channels and self._warn_full.due(time.time()):
            log.warning(
                "closed %d connection(s) idle since the longest to stay within %s "
                "(%d open); logged once a minute",
                len(channels),
                reason,
                len(self.active_channels),
            )
        return len(channels)

    def handle_accept(self):
        # Several at a time: behind a flood of connections, a client's own waits in the
        # listen backlog for as many turns of the loop as there are connections before it.
        for _ in range(ACCEPTS_PER_TURN):
            if not self.accept_one():
                return

    def accept_one(self):
        """Accept a connection if one is waiting; False when none is (or none can be)."""
        # Here, not in readable(): a socket closed while select()'s lists are built breaks it.
        excess = len(self.active_channels) - self.connection_limit + 1
        if excess > 0:
            self.close_idlest(excess, "the connection limit")
        try:
            accepted = self.accept()
        except OSError as error:
            if error.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                raise
            # Out of file descriptors: waitress would log a traceback and try again at once,
            # for ever. Make room, or wait a moment if there is nothing to close.
            if not self.close_idlest(1, "the open-files limit"):
                self.accept_paused_until = time.monotonic() + ACCEPT_PAUSE_SECONDS
            return False
        if accepted is None:
            return False
        conn, addr = accepted
        try:
            self.set_socket_options(conn)
        except OSError:  # the client has gone already
            conn.close()
            return True
        self.channel_class(self, conn, addr, self.adj, map=self._map)
        return True


def connection_limit():
    """How many connections to allow, raising the soft open-files limit if it is too low."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = MAX_CONNECTIONS + SPARE_FILES
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return MAX_CONNECTIONS
    limit = max(soft - min(SPARE_FILES, soft // 4), 1)
    log.warning(
        "the open-files limit (ulimit -n) is %d: at most %d connections at once "
        "(raise it to %d for %d)",
        soft,
        limit,
        wanted,
        MAX_CONNECTIONS,
    )
    return limit


def serve(app, host, port, threads, on_listening=None, access_log=None, recall=None):
    """Serve until SIGTERM or SIGINT, then finish what is in flight and return.

    `access_log` is called with an access_record per request. `recall(environ)` is the answer
    to a request that `app` knows without routing, (status line, headers, body), or None: it
    is called on the loop thread, which answers with it, so it must never take long.
    """
    limit = connection_limit()
    dispatcher = QueueWatchingDispatcher()
    dispatcher.set_thread_count(threads)
    server = waitress.create_server(
        _answering_recalled(app),
        host=host,
        port=port,
        ident="buildshelf",
        connection_limit=limit,
        _dispatcher=dispatcher,
        **LIMITS,
    )
    for dispatcher in list(server._map.values()):
        if isinstance(dispatcher, TcpWSGIServer):
            dispatcher.__class__ = GuardedServer
            dispatcher.connection_limit = limit
            dispatcher.access_log, dispatcher.recall = access_log, recall
            dispatcher.loop_thread = threading.get_ident()
    stopping = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda signum, frame: stopping.append(signum))
    if on_listening:
        on_listening(server)
    listeners = [d for d in server._map.values() if isinstance(d, GuardedServer)]
    while not stopping:
        wasyncore.poll(0.5, server._map)  # one turn of select(), as wasyncore.loop() takes
        for listener in listeners:
            listener.turn += 1
            if listener.stalled:
                listener.close_stalled()
    log.info("signal %d: finishing the requests in flight", stopping[0])
    drain(server._map, time.monotonic() + DRAIN_SECONDS)
    server.task_dispatcher.shutdown()


def _answering_recalled(app):
    """`app`, except for a request whose answer the loop thread recalled."""

    def application(environ, start_response):
        recalled = environ.get(RECALLED)
        if recalled is None:
            return app(environ, start_response)
        start_response(recalled[0], recalled[1])
        return recalled[2]

    return application


def drain(socket_map, deadline):
    """Stop accepting, close idle connections, and let the busy ones finish their responses."""
    for dispatcher in list(socket_map.values()):
        if isinstance(dispatcher, BaseWSGIServer):
            wasyncore.dispatcher.close(dispatcher)  # its own close() would stop the workers
    while time.monotonic() < deadline:
        channels = [c for c in socket_map.values() if isinstance(c, HTTPChannel)]
        if not channels:
            return
        for channel in channels:
            # A request still arriving has not been started: the client may send it again.
            if not (channel.requests or channel.total_outbufs_len):
                channel.will_close = True
        wasyncore.loop(timeout=0.05, map=socket_map, count=1)
    log.warning("gave up waiting for %d connection(s)", len(socket_map) - 1)
