"""The logs: the format of every line, and the access log, written by a thread of its own.

Log lines go to stderr as `2026-11-23 18:50:01,123 INFO name: message`. The thread that
answered a request only appends a record of it; `LineWriter` formats and writes them a batch
at a time (docs/performance.md says why).
"""

import collections
import functools
import logging
import os
import re
import sys
import threading
import time
from urllib.parse import quote

log = logging.getLogger(__name__)
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOGGED_URL_CHARACTERS = "/:@!$&'()*+,;=-._~%?"  # the rest is percent-escaped: no log forging
# What quote() leaves alone: a target made only of these is logged as it is, at less cost.
_plain_url = re.compile(f"[A-Za-z0-9{re.escape(LOGGED_URL_CHARACTERS)}]*").fullmatch
HANDED_OVER = "handed-over"  # the bytes of a download nginx sends (X-Accel-Redirect)
STDERR = 2  # the process's, whatever sys.stderr has become
# A credential a client put in the target (a token, `bs_<id>_<secret>`, or an OIDC token, a
# JWT), where none belongs: the write routes refuse it 401, and the log must not keep it.
_credential = re.compile(r"(bs_[0-9A-Za-z]+_)[0-9A-Za-z]+|eyJ[\w-]*\.[\w-]*\.[\w-]*")


def log_to_stderr() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format=LOG_FORMAT)


def access_record(task, seconds):
    """What access_line() needs of a request that `task` answered in `seconds`, once its
    answer is sent or its connection closed (`task.body_sent`: the bytes of its body written
    to the socket): what the thread that answered it does is collect the values; formatting
    them is the log writer's job."""
    request = task.request
    if request.error:  # waitress could not read it: what it has of the target may be made up
        method, path, query = "-", "-", ""
    else:
        method, path, query = request.command, request.path, request.query
    if not task.wrote_header:  # it failed, or its client left: no answer of its own
        sent = "-"
    elif any(name.lower() == "x-accel-redirect" for name, _ in task.response_headers):
        sent = HANDED_OVER  # nginx sends the body, and logs it
    else:
        sent = task.body_sent
    # The client as the app saw it: behind a trusted proxy, the one X-Forwarded-For names
    # (the proxy middleware rewrote the environ in place); the peer for what waitress could
    # not read, which has no environ.
    environ = getattr(task, "environ", None)
    client = environ.get("REMOTE_ADDR") if environ else None
    client = client or task.channel.addr[0]
    return (time.time(), client, method, path, query, task.status[:3], sent, seconds)


def access_line(record):
    """An access record as a log line: client, method, target, status, bytes, time taken, in
    the format of the other log lines."""
    now, client, method, path, query, status, sent, seconds = record
    if not _plain_url(client):  # a trusted proxy's header may name anything
        client = quote(client, safe=LOGGED_URL_CHARACTERS)
    target = f"{path}?{query}" if query else path
    if "bs_" in target or "eyJ" in target:
        target = _credential.sub(_masked, target)
    if not _plain_url(target):
        target = quote(target.encode("latin-1"), safe=LOGGED_URL_CHARACTERS)
    return (
        f"{_log_time(int(now))},{int(now * 1000) % 1000:03d} INFO buildshelf.access: "
        f"{client} {method} {target} {status} {sent} {seconds * 1000:.2f}ms\n"
    ).encode()


def _masked(match):
    """A credential as the log shows it: a token's id, which is no secret, and no more."""
    return (match.group(1) or "") + "***"


@functools.lru_cache(maxsize=4)
def _log_time(second):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))


class LineWriter:
    """Writes what it is given to stderr from a thread of its own, a batch at a time, each
    item made a line (bytes) by `to_line` there; `observe`, if given, is called with each
    batch (a list) on that thread first (the app's metrics), and with `to_line` None it is
    all that is done (--quiet).

    The thread that answered a request only appends its item. Through the logging module,
    each waited for the handler's lock, and with one os.write each, for a system call that
    hands the interpreter lock to another thread; either way the threads queued behind each
    other (docs/performance.md). Formatting a batch together here also costs less than a
    line at a time in each. Lines reach the file within `interval` seconds: a short one, since
    formatting holds the interpreter lock for as long as the batch takes.
    """

    def __init__(self, fd=STDERR, interval=0.01, to_line=bytes, observe=None):
        self.fd, self.interval, self.to_line, self.observe = fd, interval, to_line, observe
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
        if self.observe is not None and items:
            try:
                self.observe(items)
            except Exception:  # a bug there must not stop the log
                log.exception("observing %d access records failed", len(items))
        if self.to_line is None:
            return
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
