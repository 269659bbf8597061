"""Response bodies encoded once per data version, and the HTTP rules for caching them.

A `Representation` is made the first time a response is asked for and kept in the memo of
the data it shows (a project or a snapshot), so it is dropped with that data: a repeated
request does no JSON encoding, no hashing and no compression.
"""

import gzip
import hashlib
import math
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

    def is_dated(self, now):
        """Whether to send Last-Modified (and honour If-Modified-Since) now.

        HTTP dates have whole seconds but the data can change several times a second.
        Sending a date only once the data is a second old, rounded up, makes every later
        version's date greater than any date a client holds for an earlier one, so
        If-Modified-Since never answers 304 for data that changed.
        """
        return now - self.loaded_at >= 1


def memoized(memo, key, make):
    """memo[key], made by make() the first time. Threads may race to make it: both agree."""
    found = memo.get(key)
    if found is None:
        found = memo[key] = make()
    return found


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
