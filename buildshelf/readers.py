"""Reads that may hang (a file on a hung network mount, the parse of a huge file), each done on
a reader thread and waited for until a deadline, so that one that hangs never holds up the
others: a read still under way is never started again nor waited for again, and once one
hangs the reads after it get a fresh thread. The store reads its files and looks at the kept
files' objects so.
"""

import logging
import time
from concurrent.futures import ThreadPoolExecutor, wait

from buildshelf.text import printable

log = logging.getLogger(__name__)

READER_THREADS = 1


class Readers:
    """The reads under way, each by a key that names what it reads (a project's slug, say)."""

    def __init__(self):
        self._threads = ThreadPoolExecutor(READER_THREADS, "buildshelf-read")
        self._reading = {}  # key -> (future, monotonic start)
        self._stalled_before = set()  # keys still being read at the end of the last check

    def start(self, key, work, *args):
        """The read of `key` under way, or a new one: a stalled read is never started twice."""
        reading = self._reading.get(key)
        if reading is None or reading[0].cancelled():  # cancelled: queued behind a stalled one
            self._reading[key] = (self._threads.submit(work, *args), time.monotonic())
        return self._reading[key][0]

    def finish(self, futures, deadline):
        """Wait until `deadline` for `futures` ({key: future}); the keys of those done."""
        # Only reads started by this check are waited for: one that stalled before is taken
        # if it has finished, never waited for again, so it slows no later check.
        wait(
            [future for key, future in futures.items() if key not in self._stalled_before],
            timeout=max(0.0, deadline - time.monotonic()),
        )
        stalled = {key for key, future in futures.items() if not future.done()}
        done = futures.keys() - stalled
        for key in done:
            del self._reading[key]
        if stalled - self._stalled_before:
            # A reader that hangs may never come back: later reads get a fresh thread. Reads
            # queued behind it are cancelled, and started again by the next check.
            log.warning(
                "still reading %s; serving the last good data meanwhile",
                ", ".join(sorted(map(printable, stalled))),
            )
            self._threads.shutdown(wait=False, cancel_futures=True)
            self._threads = ThreadPoolExecutor(READER_THREADS, "buildshelf-read")
        self._stalled_before = (self._stalled_before - futures.keys()) | stalled
        return {key for key in done if not futures[key].cancelled()}

    def under_way(self, now):
        """{key: seconds since it was started} of each read not done yet."""
        return {
            key: now - since
            for key, (future, since) in list(self._reading.items())
            if not future.done()
        }

    def stop(self):
        """Cancel the reads not started; one under way is left to end on its own."""
        self._threads.shutdown(wait=False, cancel_futures=True)
