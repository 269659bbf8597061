"""Failed authentications counted per client: from the `limit`-th failure within a window of
`seconds`, the client is refused until that window is over.

A client is an IPv4 address, or an IPv6 /64, as the download counter groups IPv6 clients (a
host is given a /64, and may send from any address in it: its privacy addresses change
within it); an IPv4-mapped IPv6 address is its IPv4 address, and a string that is not an
address is its own client. An IPv4 /24, the counter's network, is not one client here: 256
neighbours would share one's refusal.

The window is fixed: it opens at a client's first failure and lasts `seconds`; the next
failure after it opens a new one. At most `max_addresses` clients are remembered, so a
flood of addresses (one failure each) costs bounded memory: the oldest windows are forgotten
first, which can only let a client in early, never keep one out.
"""

import math
import threading
import time

from buildshelf import addresses

LIMIT = 10  # failures a client may have in a window; the next request is refused
WINDOW_SECONDS = 60
MAX_ADDRESSES = 10_000  # about 2 MB at most


def client(address: str) -> bytes | str:
    """Whose failures an address's are (the module's docstring says why): its 4 bytes for
    IPv4, the first 8 of its 16 for IPv6, or the string itself if it is not an address."""
    found = addresses.packed(address)
    if found is None:
        return address
    return found[:8] if len(found) == 16 else found


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
        self._windows = {}  # client(address) -> [opened at, failures], the oldest first
        self._lock = threading.Lock()  # the server's loop thread and the workers share it

    def failed(self, address: str) -> None:
        """Count a failed authentication from `address`."""
        key, now = client(address), self.clock()
        with self._lock:
            window = self._windows.get(key)
            if window is None or now - window[0] >= self.seconds:
                self._windows.pop(key, None)  # a new window goes last: the newest
                if len(self._windows) >= self.max_addresses:
                    self._forget(now)
                self._windows[key] = [now, 1]
            else:
                window[1] += 1

    def retry_after(self, address: str) -> int | None:
        """Whole seconds until `address` may try again, or None if it may now."""
        window = self._windows.get(client(address))  # a dict read is atomic: no lock here
        if window is None or window[1] < self.limit:
            return None
        left = window[0] + self.seconds - self.clock()
        return math.ceil(left) if left > 0 else None

    def _forget(self, now):
        """Make room: the windows that are over, else the oldest half."""
        over = [k for k, (opened, _) in self._windows.items() if now - opened >= self.seconds]
        for key in over or list(self._windows)[: self.max_addresses // 2]:
            del self._windows[key]
