"""Running a WSGI app under waitress: its limits, the access log, and a graceful shutdown."""

import logging
import signal
import time
from urllib.parse import quote

import waitress
from waitress import wasyncore
from waitress.channel import HTTPChannel
from waitress.server import BaseWSGIServer
from waitress.task import WSGITask

log = logging.getLogger(__name__)
access_log = logging.getLogger("buildshelf.access")

# Waitress reads a whole request before a thread sees it, so a slow client costs a connection
# slot, never a thread; these bound the slots and what each may hold. README "Security and
# limits" says why each value.
LIMITS = {
    # waitress watches sockets with select(), which sees none numbered 1,024 or more; its
    # poll() mode would lift that but doubles the CPU cost of every request (measured).
    "connection_limit": 900,
    "channel_timeout": 30,
    "cleanup_interval": 10,
    "max_request_header_size": 16 * 1024,
    "max_request_body_size": 1024,
}
DRAIN_SECONDS = 10
LOGGED_URL_CHARACTERS = "/:@!$&'()*+,;=-._~%?"  # the rest is percent-escaped: no log forging


def access_logged(app):
    """`app`, logging a line per request: client, method, target, status, bytes, time taken."""
    def logged(environ, start_response):
        started = time.perf_counter()
        status = []

        def start(status_line, headers, exc_info=None):
            status.append(status_line[:3])
            return start_response(status_line, headers, exc_info)
        body = app(environ, start)
        target = environ.get("PATH_INFO", "")
        if environ.get("QUERY_STRING"):
            target += "?" + environ["QUERY_STRING"]
        access_log.info("%s %s %s %s %s %.2fms", environ.get("REMOTE_ADDR", "-"),
                        environ["REQUEST_METHOD"],
                        quote(target.encode("latin-1"), safe=LOGGED_URL_CHARACTERS),
                        status[0] if status else "-",
                        sum(map(len, body)) if isinstance(body, list) else "-",
                        (time.perf_counter() - started) * 1000)
        return body
    return logged


class AtMostEvery(logging.Filter):
    """Lets one record through per `seconds`."""

    def __init__(self, seconds):
        super().__init__()
        self.seconds, self.next_time = seconds, 0.0

    def filter(self, record):
        if record.created < self.next_time:
            return False
        self.next_time = record.created + self.seconds
        return True


class KeepAliveTask(WSGITask):
    """waitress 3.0 closes the connection after every 204 and 304, for want of the
    Content-Length those answers may not carry. Clients revalidate all day: keep the
    connection open unless the client asked to close it."""

    def set_close_on_finish(self):
        if (self.has_body or self.version != "1.1"
                or self.request.headers.get("CONNECTION", "").lower() == "close"):
            super().set_close_on_finish()


class KeepAliveChannel(HTTPChannel):
    task_class = KeepAliveTask


def serve(app, host, port, threads, on_listening=None):
    """Serve until SIGTERM or SIGINT, then finish what is in flight and return."""
    # Under overload waitress warns once per queued request; one line a minute says as much.
    logging.getLogger("waitress.queue").addFilter(AtMostEvery(60))
    server = waitress.create_server(app, host=host, port=port, threads=threads,
                                    ident="buildshelf", **LIMITS)
    for dispatcher in list(server._map.values()):
        if isinstance(dispatcher, BaseWSGIServer):
            dispatcher.channel_class = KeepAliveChannel
    stopping = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda signum, frame: stopping.append(signum))
    if on_listening:
        on_listening(server)
    while not stopping:
        wasyncore.loop(timeout=0.5, map=server._map, count=1)
    log.info("signal %d: finishing the requests in flight", stopping[0])
    drain(server._map, time.monotonic() + DRAIN_SECONDS)
    server.task_dispatcher.shutdown()


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
