"""Response bodies encoded once per data version, and the HTTP rules for caching them.

A `Representation` is made the first time a response is asked for and kept in a
`RepresentationCache` under the data it shows (a project or a snapshot): a repeated request
does no encoding, no hashing and no compression. Entries go with that data, or when the
cache is over its size, least recently used first.
"""

import gzip
import hashlib
import math
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from email.utils import formatdate, parsedate_to_datetime

GZIP_MIN_BYTES = 1024  # below this, gzip saves less than its header and CPU cost


@dataclass(frozen=True, slots=True)
class Representation:
    body: bytes
    etag: str
    gzipped: bytes  # None when not worth compressing
    gzip_etag: str  # each encoding is a representation of its own, with its own validator
    loaded_at: float  # when the data shown was loaded
    modified: int  # the Last-Modified second, sent as is_dated() says
    modified_date: str  # the same as an HTTP date

    @classmethod
    def of(cls, body, loaded_at):
        etag = hashlib.blake2b(body, digest_size=12).hexdigest()
        gzipped = None
        if len(body) >= GZIP_MIN_BYTES:
            gzipped = gzip.compress(body, compresslevel=6, mtime=0)
        modified = math.ceil(loaded_at)
        return cls(body, f'"{etag}"', gzipped, f'"{etag}-gzip"', loaded_at, modified,
                   formatdate(modified, usegmt=True))

    @property
    def size(self):
        return len(self.body) + len(self.gzipped or b"")

    def is_dated(self, now):
        """Whether to send Last-Modified (and honour If-Modified-Since) now.

        HTTP dates have whole seconds but the data can change several times a second.
        Sending a date only once the data is a second old, rounded up, makes every later
        version's date greater than any date a client holds for an earlier one, so
        If-Modified-Since never answers 304 for data that changed.
        """
        return now - self.loaded_at >= 1


class RepresentationCache:
    """Representations by (data shown, view), at most `max_bytes` of them.

    A view names what is shown of the data (say, a selection of builds), so views that show
    the same thing share one entry whatever the query that asked for them. Entries of data
    no longer served go as soon as that data is dropped.
    """

    def __init__(self, max_bytes):
        self.max_bytes = max_bytes
        self.size = 0
        self._entries = OrderedDict()  # (id(data), view) -> Representation, oldest use first
        self._views = {}  # id(data) -> its views in _entries
        # Reentrant: dropping data can run its finalizer in this thread while the lock is held.
        self._lock = threading.RLock()

    def get(self, data, view, make):
        """The representation of `view` of `data`, made by make() if not kept.

        Threads may race to make it: both agree, and one is kept.
        """
        key = (id(data), view)
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return found
        made = make()
        with self._lock:
            if key in self._entries or made.size > self.max_bytes:
                return self._entries.get(key, made)
            if id(data) not in self._views:
                self._views[id(data)] = set()
                weakref.finalize(data, self._forget, id(data))
            self._views[id(data)].add(view)
            self._entries[key] = made
            self.size += made.size
            while self.size > self.max_bytes:
                (owner, old_view), old = self._entries.popitem(last=False)
                self._views[owner].discard(old_view)
                self.size -= old.size
        return made

    def views(self, data):
        """The views of `data` kept now."""
        with self._lock:
            return set(self._views.get(id(data), ()))

    def _forget(self, owner):
        with self._lock:
            for view in self._views.pop(owner, ()):
                self.size -= self._entries.pop((owner, view)).size


def accepts_gzip(accept_encoding):
    """Does an Accept-Encoding header value allow gzip? 'gzip' wins over '*'; q=0 refuses."""
    weights = {}
    for coding in accept_encoding.lower().split(","):
        name, _, params = coding.partition(";")
        q = params.strip()
        try:
            weights.setdefault(name.strip(), float(q[2:]) if q.startswith("q=") else 1.0)
        except ValueError:
            weights.setdefault(name.strip(), 0.0)
    weight = weights.get("gzip", weights.get("x-gzip", weights.get("*", 0.0)))
    return weight > 0


def etag_matches(if_none_match, etag):
    """If-None-Match by weak comparison (RFC 9110 13.1.2)."""
    if if_none_match.strip() == "*":
        return True
    return any(tag.strip().removeprefix("W/") == etag for tag in if_none_match.split(","))


def modified_since(if_modified_since, last_modified_second):
    """False when the client's copy, dated `if_modified_since`, is still current."""
    try:
        since = parsedate_to_datetime(if_modified_since).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return True  # an invalid date is ignored (RFC 9110 13.1.3)
    return last_modified_second > since
