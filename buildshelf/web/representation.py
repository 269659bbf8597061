"""Response bodies encoded once per data version, and the HTTP rules for caching them.

A `Representation` is made the first time a response is asked for and kept in a
`RepresentationCache` under the data it shows (a project or a snapshot): a repeated request
does no encoding, no hashing and no compression. Entries go with that data, or when the
cache is over its size, least recently used first. The cache also remembers which
representation answered a request target, and with which headers, so that a repeat of the
request needs no routing either (server.py).
"""

import functools
import gzip
import hashlib
import math
import threading
import weakref
from collections import OrderedDict, namedtuple
from dataclasses import dataclass
from email.utils import formatdate

from buildshelf.web.conditional import etag_matches, http_date

GZIP_MIN_BYTES = 1024  # below this, gzip saves less than its header and CPU cost
# Request targets remembered per data version; past this, the memory starts again, so that
# clients inventing targets cost nothing but the routing they would have cost anyway.
REMEMBERED_TARGETS = 1000
REMEMBERED_TARGET_LENGTH = 1000

# How a representation answers one request: its gzip encoding or not, Last-Modified sent or
# not, 304 or the body. The headers of an answer are decided by these and nothing else.
Variant = namedtuple("Variant", "gzipped dated not_modified")
# All eight, made once: a namedtuple is slow to make, and one is needed per request.
_VARIANTS = {
    tuple(v): v
    for v in (Variant(g, d, n) for g in (False, True) for d in (False, True) for n in (False, True))
}


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
        return cls(
            body,
            f'"{etag}"',
            gzipped,
            f'"{etag}-gzip"',
            loaded_at,
            modified,
            formatdate(modified, usegmt=True),
        )

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

    def body_of(self, variant):
        return self.gzipped if variant.gzipped else self.body

    def etag_of(self, variant):
        return self.gzip_etag if variant.gzipped else self.etag

    def variant(self, accept_encoding, if_none_match, if_modified_since, now):
        """The Variant answering a request with these header values (or None), at `now`."""
        gzipped = self.gzipped is not None and accepts_gzip(accept_encoding or "")
        dated = self.is_dated(now)
        if if_none_match is not None:  # it wins over If-Modified-Since (RFC 9110 13.2.2)
            not_modified = etag_matches(if_none_match, self.gzip_etag if gzipped else self.etag)
        else:
            not_modified = (
                dated
                and if_modified_since is not None
                and not modified_since(if_modified_since, self.modified)
            )
        return _VARIANTS[gzipped, dated, not_modified]


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
        self._held = set()  # id() of each Representation in _entries
        # request target -> (weakref to the data version shown, Representation,
        # {Variant: (status line, headers)}): only of representations in _entries, and
        # forgotten whenever one leaves, so that remembering never holds more memory.
        self._answers = {}
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
            self._held.add(id(made))
            self.size += made.size
            while self.size > self.max_bytes:
                (owner, old_view), old = self._entries.popitem(last=False)
                self._views[owner].discard(old_view)
                self._let_go(old)
        return made

    def _forget(self, owner):
        with self._lock:
            for view in self._views.pop(owner, ()):
                self._let_go(self._entries.pop((owner, view)))

    def _let_go(self, representation):
        self.size -= representation.size
        self._held.discard(id(representation))
        self._answers = {}

    def remember(self, target, shown, representation, variant, status, headers):
        """Note that `representation`, of data version `shown`, answered `target` as
        `variant` with this status line and these headers. Only a representation kept here
        is remembered."""
        if sum(map(len, target)) > REMEMBERED_TARGET_LENGTH:
            return
        with self._lock:
            if id(representation) not in self._held:
                return
            known = self._answers.get(target)
            if known is None or known[0]() is not shown or known[1] is not representation:
                if len(self._answers) >= REMEMBERED_TARGETS:
                    self._answers = {}
                known = self._answers[target] = (weakref.ref(shown), representation, {})
            known[2][variant] = (status, tuple(headers))

    def recall(self, target, current):
        """(representation, {Variant: (status line, headers)}) that answered `target` if the
        data version it showed is current() still, or None. Takes no lock: answers are only
        ever added, or all dropped at once."""
        known = self._answers.get(target)
        if known is None or known[0]() is not current():
            return None
        return known[1], known[2]


@functools.lru_cache(maxsize=256)  # few clients, and each sends the same value every time
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


def modified_since(if_modified_since, last_modified_second):
    """False when the client's copy, dated `if_modified_since`, is still current."""
    since = http_date(if_modified_since)
    return since is None or last_modified_second > since  # an invalid date is ignored
