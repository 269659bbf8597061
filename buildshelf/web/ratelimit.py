"""Failed authentications counted per client: from the `limit`-th failure within a window of
`seconds`, the client is refused until that window is over.

A client is an IPv4 address, or an IPv6 /64, as the download counter groups IPv6 clients (a
host is given a /64, and may send from any address in it: its privacy addresses change
within it); an IPv4-mapped IPv6 address is its IPv4 address, and a string that is not an
address is its own client. An IPv4 /24, the counter's network, is not one client here: 256
neighbours would share one's refusal.

The window is fixed: it opens at a client's first failure and lasts `seconds`; the next
failure after it opens a new one. At most `max_addresses` clients are remembered, so a
flood of addresses (one failure each) costs bounded memory: to make room, the windows that
are over are forgotten, else the oldest half of those refusing nothing now, which can only
let a client in early, never keep one out. A client being refused is never forgotten before
its window is over, so a flood of new addresses cannot let it in early; if every window
remembered is refusing, a new address is not remembered (its failures are not counted)
until the oldest window is over.
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
        self._full_until = None  # every window refuses until then: no room to look for

    def failed(self, address: str) -> None:
        """Count a failed authentication from `address`."""
        key, now = client(address), self.clock()
        with self._lock:
            window = self._windows.get(key)
            if window is None or now - window[0] >= self.seconds:
                self._windows.pop(key, None)  # a new window goes last: the newest
                if len(self._windows) >= self.max_addresses:
                    self._forget(now)
                if len(self._windows) < self.max_addresses:
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
        """Make room: the windows that are over, else the oldest half of those that refuse
        nothing now. None, when every window refuses: then none can go before the oldest is
        over, and until then a new address is not looked for room for, so that a flood of
        them costs no scan of every window each."""
        if self._full_until is not None and now < self._full_until:
            return
        windows = self._windows
        over = [k for k, (opened, _) in windows.items() if now - opened >= self.seconds]
        if not over:
            below = [k for k, (_, failures) in windows.items() if failures < self.limit]
            over = below[: self.max_addresses // 2]
        for key in over:
            del windows[key]
        # The oldest window is first: new ones go last.
        self._full_until = None if over else next(iter(windows.values()))[0] + self.seconds
