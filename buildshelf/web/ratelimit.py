"""Failed authentications counted per client address: from the `limit`-th failure within a
window of `seconds`, the address is refused until that window is over.

The window is fixed: it opens at an address's first failure and lasts `seconds`; the next
failure after it opens a new one. At most `max_addresses` addresses are remembered, so a
flood of addresses (one failure each) costs bounded memory: the oldest windows are forgotten
first, which can only let an address in early, never keep one out.
"""

import math
import threading
import time

LIMIT = 10  # failures an address may have in a window; the next request is refused
WINDOW_SECONDS = 60
MAX_ADDRESSES = 10_000  # about 2 MB at most


class FailureLimit:
    def __init__(
        self,
        limit: int = LIMIT,
        seconds: float = WINDOW_SECONDS,
        max_addresses: int = MAX_ADDRESSES,
        clock=time.monotonic,
    ):
        self.limit, self.seconds, self.max_addresses = limit, seconds, max_addresses
        self.clock = clock
        self._windows = {}  # address -> [opened at, failures], the oldest window first
        self._lock = threading.Lock()  # the server's loop thread and the workers share it

    def failed(self, address: str) -> None:
        """Count a failed authentication from `address`."""
        now = self.clock()
        with self._lock:
            window = self._windows.get(address)
            if window is None or now - window[0] >= self.seconds:
                self._windows.pop(address, None)  # a new window goes last: the newest
                if len(self._windows) >= self.max_addresses:
                    self._forget(now)
                self._windows[address] = [now, 1]
            else:
                window[1] += 1

    def retry_after(self, address: str) -> int | None:
        """Whole seconds until `address` may try again, or None if it may now."""
        window = self._windows.get(address)  # a dict read is atomic: no lock on this path
        if window is None or window[1] < self.limit:
            return None
        left = window[0] + self.seconds - self.clock()
        return math.ceil(left) if left > 0 else None

    def _forget(self, now):
        """Make room: the windows that are over, else the oldest half."""
        over = [a for a, (opened, _) in self._windows.items() if now - opened >= self.seconds]
        for address in over or list(self._windows)[: self.max_addresses // 2]:
            del self._windows[address]
