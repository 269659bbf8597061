"""Work done every so many seconds on a thread of its own (`Periodic`), from start to stop:
the store's check of its files, the download counts' flush, the tokens' expiry watch. A round
that fails is logged with its traceback, and the next one comes when due: a bug in one round
must not end the work for good."""

import logging
import threading
from collections.abc import Callable


class Periodic:
    """`work()` every `seconds` on a daemon thread named `name`; a round that raises is
    logged on `log` with the message `failed`."""

    def __init__(
        self, name: str, seconds: float, work: Callable[[], None], log: logging.Logger, failed: str
    ):
        self.name, self.seconds, self.work, self.log, self.failed = name, seconds, work, log, failed
        self._stopping = threading.Event()
        self._thread = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread, after the round under way, if any."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self):
        while not self._stopping.wait(self.seconds):
            try:
                self.work()
            except Exception:
                self.log.exception(self.failed)
