"""The server: waitress with Buildshelf's limits, serving a WSGI app until SIGTERM or
SIGINT, then finishing what is in flight.

Waitress reads a whole request before a worker thread sees it, so a slow sender costs a
connection, never a thread. The server here keeps connections within the open-files limit,
closes those that stall, makes room for new ones, and accepts its connections as
connection.py's guarded ones; a trusted proxy's client is read by proxy.py.
"""

import concurrent.futures
import ctypes
import errno
import logging
import resource
import signal
import socket
import threading
import time

import waitress
from waitress import wasyncore
from waitress.channel import HTTPChannel
from waitress.server import BaseWSGIServer, TcpWSGIServer
from waitress.task import ThreadedTaskDispatcher

from buildshelf.serving.accesslog import LineWriter, access_line
from buildshelf.serving.bodies import BodyBuffer, BodyWriter
from buildshelf.serving.connection import (
    MIN_BODY_RATE,
    RECALLED,
    UNSENT_OUTPUT_LIMIT,
    GuardedChannel,
)
from buildshelf.serving.proxy import as_the_app_sees_it, through_the_proxy
from buildshelf.serving.send_queues import HeldSockets
from buildshelf.text import counted
from buildshelf.web.contract import App

log = logging.getLogger(__name__)

# docs/running.md ("Security and limits") says why each value.
LIMITS = {
    "channel_timeout": 30,
    "cleanup_interval": 10,
    "max_request_header_size": 16 * 1024,
    # What a turn of the loop reads of a connection: waitress's 8 KiB a turn held uploads to
    # a third of the speed, for no gain in the API's latency beside them. Not more: a read
    # of over 128 KiB is an mmap and munmap for malloc, and cost every request 20 to 40 us
    # (docs/performance.md).
    "recv_bytes": 64 * 1024,
}
# waitress watches sockets with select(), which sees none numbered 1,024 or more.
MAX_CONNECTIONS = 900
SPARE_FILES = 100  # descriptors kept for data files, logs and the listening sockets
DRAIN_SECONDS = 10
ACCEPT_PAUSE_SECONDS = 0.25  # out of file descriptors with nothing to close: try again then
ACCEPTS_PER_TURN = 64
# A connection whose client has read nothing of its pending answers for this long is closed
# (checked every cleanup_interval, so within 30 s): its answers cost memory, never a thread.
STALL_SECONDS = 20
# Threads that decide the screen's Deferred verdicts (a write's credential, against the
# state's databases or the issuer's keys): the loop thread never waits for a file or the
# network, and a database that is locked or slow holds up only the writes waiting on it,
# never the worker threads that answer reads.
DECIDING_THREADS = 4
# How often the metrics take the access records when no line is written (--quiet): each
# wake-up of that thread cost 110 µs of CPU (11 ms a second idle at the log's 10 ms), and a
# scrape never notices a quarter of a second.
QUIET_INTERVAL = 0.25


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


class GuardedServer(TcpWSGIServer):
    """Closes connections that stall, and makes room for new ones at the connection limit."""

    channel_class = GuardedChannel
    stalled = ()
    turn = 0  # turns of the serve loop
    accept_paused_until = 0.0
    connection_limit = MAX_CONNECTIONS
    access_log = None  # called with each request's access_record
    recall = None  # the answer to a request from memory, or None: see serve()
    screen = None  # a request's refusal once its head is in, or None: see serve()
    consume = None  # the consumer of a request's body as it arrives, or None: see serve()
    body_directory = None  # where bodies go beyond bodies.BODY_IN_MEMORY (None: $TMPDIR)
    body_writer = None  # the bodies.BodyWriter that writes them there: serve() sets it
    deciders = None  # the executor of the screen's Deferred verdicts: serve() sets it
    loop_thread = None
    _warn_full = OncePer(60)
    _warn_queue = OncePer(60)
    _warn_crawling = OncePer(60)

    def body_buffer(self):
        """The buffer of a new request's body (for parser.GuardedParser)."""
        return BodyBuffer(self.body_directory, self.body_writer)

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
        # And those lingering after a refusal past their time, whose client sends nothing.
        cutoff, monotonic = now - STALL_SECONDS, time.monotonic()
        self.stalled = [
            channel
            for channel in self.active_channels.values()
            if channel.total_outbufs_len
            and channel.last_activity < cutoff
            or 0 < channel.lingering_until < monotonic
        ]
        # And those whose body trickles in, which waitress's timeout never closes: with it
        # goes the body's file, or its upload's staging file.
        crawling = [
            channel
            for channel in self.active_channels.values()
            if channel.crawling(now, self.adj.channel_timeout)
        ]
        if crawling and self._warn_crawling.due(now):
            log.warning(
                "closed %s whose request body came at less than %d bytes a second "
                "(logged once a minute)",
                counted(len(crawling), "connection"),
                MIN_BODY_RATE,
            )
        self.stalled += crawling

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
                "closed %s idle since the longest to stay within %s "
                "(%d open); logged once a minute",
                counted(len(channels), "connection"),
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


# glibc's malloc gives a block of 128 KiB or more its own mmap, returned when freed; but each
# such free raises that threshold to the block's size (to 32 MiB at most), and the trim
# threshold to twice that. After the first data file's bytes (1.7 MB for 2,000 builds) were
# freed, every later file's bytes, its text and the answers' buffers came from the heap, where
# the small blocks that outlive them pinned the room they left: 4 MB of a server reading 50
# such files (issue 34). Fixed instead: a block over the largest a request reads at once
# (READ_BYTES, CHUNK_BYTES: 1 MiB) is a file's or an answer's, made once per version, and
# goes back when freed; the reads stay in the heap, which keeps twice that before trimming
# (a 1 MiB read mmapped each time cost 700 us, against 200 us).
LARGE_BLOCK_BYTES = (1 << 20) + (64 << 10)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h


def return_large_blocks():
    """Fix the C allocator's mmap and trim thresholds (above); nothing where it is not glibc."""
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return
    if hasattr(libc, "gnu_get_libc_version"):  # another allocator has other settings
        libc.mallopt(M_MMAP_THRESHOLD, LARGE_BLOCK_BYTES)
        libc.mallopt(M_TRIM_THRESHOLD, 2 * LARGE_BLOCK_BYTES)


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


def serve(app: App, host, port, threads, on_listening=None, access_log=None,
          body_directory=None, trusted_proxy=None):  # fmt: skip
    """Serve `app` (its WSGI app and hooks, web/contract.py) until SIGTERM or SIGINT, then
    finish what is in flight and return.

    `access_log` is called with an access_record per request. `app.recall` and `app.screen`
    are called on the loop thread. A request the screen refuses reaches the app bodiless,
    its refusal as environ[contract.REFUSED], and the connection is closed after the answer;
    a contract.Deferred verdict is decided on one of DECIDING_THREADS while the connection is
    not read: what it raises is answered likewise, and what it returns reaches the app as
    environ[contract.PROVEN]. A body over `app.max_body_bytes` is refused likewise (413);
    one over bodies.BODY_IN_MEMORY is held in an anonymous file in `body_directory`,
    unless `app.consume` gives a Consumer, fed as the body arrives on the thread that writes
    bodies. A request from the address `trusted_proxy` comes from the last X-Forwarded-For
    hop it names; from any other peer, that header is dropped.
    """
    limit = connection_limit()
    dispatcher = QueueWatchingDispatcher()
    dispatcher.set_thread_count(threads)
    server = waitress.create_server(
        through_the_proxy(_answering_recalled(app), trusted_proxy),
        host=host,
        port=port,
        ident="buildshelf",
        connection_limit=limit,
        _dispatcher=dispatcher,
        max_request_body_size=app.max_body_bytes + 1,  # waitress refuses a body of this size
        **LIMITS,
        # The proxy's headers are read by through_the_proxy, for the app and the screen
        # alike: waitress wraps the app in no proxy middleware of its own.
        clear_untrusted_proxy_headers=False,
    )
    for dispatcher in list(server._map.values()):
        if isinstance(dispatcher, TcpWSGIServer):
            dispatcher.__class__ = GuardedServer
            dispatcher.connection_limit = limit
            dispatcher.access_log, dispatcher.recall = access_log, app.recall
            dispatcher.screen = app.screen and as_the_app_sees_it(app.screen, trusted_proxy)
            dispatcher.consume = app.consume
            dispatcher.body_directory = body_directory
            dispatcher.loop_thread = threading.get_ident()
    listeners = [d for d in server._map.values() if isinstance(d, GuardedServer)]
    body_writer = BodyWriter(wake=listeners[0].pull_trigger)
    deciders = concurrent.futures.ThreadPoolExecutor(DECIDING_THREADS, "buildshelf-decide")
    for listener in listeners:
        listener.body_writer, listener.deciders = body_writer, deciders
    stopping = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda signum, frame: stopping.append(signum))
    if on_listening:
        on_listening(server)
    while not stopping:
        wasyncore.poll(0.5, server._map)  # one turn of select(), as wasyncore.loop() takes
        for listener in listeners:
            listener.turn += 1
            if listener.stalled:
                listener.close_stalled()
    log.info("signal %d: finishing the requests in flight", stopping[0])
    drain(server._map, time.monotonic() + DRAIN_SECONDS)
    server.task_dispatcher.shutdown()
    deciders.shutdown(wait=False, cancel_futures=True)  # no connection awaits them now
    body_writer.stop()
    body_writer.thread.join(DRAIN_SECONDS)  # the bodies dropped are closed and removed


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
    """Stop accepting, close idle connections, let the busy ones finish their responses, and
    wait until their clients have had every byte (send_queues.py)."""
    held = HeldSockets(c.socket for c in socket_map.values() if isinstance(c, HTTPChannel))
    for dispatcher in list(socket_map.values()):
        if isinstance(dispatcher, BaseWSGIServer):
            wasyncore.dispatcher.close(dispatcher)  # its own close() would stop the workers
    while channels := [c for c in socket_map.values() if isinstance(c, HTTPChannel)]:
        if time.monotonic() >= deadline:
            log.warning("gave up waiting for %s", counted(len(channels), "connection"))
            break
        for channel in channels:
            # A request still arriving has not been started: the client may send it again.
            if not (channel.requests or channel.total_outbufs_len):
                channel.will_close = True
        wasyncore.loop(timeout=0.05, map=socket_map, count=1)
    if unsent := held.flush(deadline):
        log.warning("gave up waiting for %s to receive all", counted(unsent, "client"))


def base_url(host: str, port: int) -> str:
    """http://host:port, with an IPv6 address in brackets as URLs need."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def resolves(host: str, port: int) -> bool:
    """Whether `host` is an address or a name to listen on; if not, one line in the log says so."""
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError, ValueError) as error:
        log.error(
            "cannot listen on %s: it is not an address or a known host name (%s)",
            host,
            getattr(error, "strerror", None) or error,
        )
        return False
    return True


def run(
    app: App,
    host: str,
    port: int,
    threads: int,
    quiet: bool,
    on_listening,
    body_directory=None,
    trusted_proxy=None,
) -> int:
    """Serve `app` (a server.make_app) until stopped, with an access log unless `quiet`; the
    exit status: 0 once stopped, 1 if it cannot listen. `on_listening(base_url)` is called
    when it accepts connections. Bodies are held in `body_directory`, and `trusted_proxy` is
    trusted (see serve). The app's `observe_requests`, if it has one, is given the access
    records, a batch at a time, on the access log's thread, `quiet` or not (its metrics)."""
    observe = app.observe_requests
    if not quiet:
        access_log = LineWriter(to_line=access_line, observe=observe)
    elif observe is not None:  # no line to write: the records only tallied, less often
        access_log = LineWriter(to_line=None, observe=observe, interval=QUIET_INTERVAL)
    else:
        access_log = None
    try:
        serve(
            app,
            host,
            port,
            threads,
            on_listening=lambda server: on_listening(
                base_url(server.effective_host, server.effective_port)
            ),
            access_log=access_log,
            body_directory=body_directory,
            trusted_proxy=trusted_proxy,
        )
    except (OSError, ValueError) as error:  # the address is taken, or not ours to listen on
        log.error(
            "cannot listen on %s port %d: %s", host, port, getattr(error, "strerror", None) or error
        )
        return 1
    finally:
        if access_log:
            access_log.close()
    log.info("stopped")
    return 0
