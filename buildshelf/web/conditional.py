"""The validators of RFC 9110's conditional requests as a recipient reads them: HTTP dates and
entity tags. The JSON routes (representation.py) and the kept files (downloads.py) both read
them here, so that both answer a conditional request alike."""

import re
from datetime import UTC
from email.utils import parsedate_to_datetime

# An entity tag, weak or not (RFC 9110 8.8.3): the quoted part is the opaque tag compared.
_ENTITY_TAG = r'(?:W/)?"[^"]*"'
_WEAK_AND_OPAQUE_TAG = re.compile(r'(W/)?("[^"]*")')
# A list of them, empty elements allowed (RFC 9110 5.6.1). Spaces are taken whole (*+) and
# only before an element or after its tag: no run of them is tried in many ways, so a value
# of any length is checked in time linear in its length.
_ENTITY_TAG_LIST = re.compile(
    rf"[ \t]*+(?:{_ENTITY_TAG}[ \t]*+)?(?:,[ \t]*+(?:{_ENTITY_TAG}[ \t]*+)?)*"
)


def http_date(value: str | None) -> float | None:
    """Epoch seconds of an HTTP date, or None for a missing or invalid one (which a
    conditional request ignores, RFC 9110 13.1.3).

    All three forms that recipients must read (RFC 9110 5.6.7) are times in UTC: the
    IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), the obsolete RFC 850 form ("Sunday,
    06-Nov-94 08:49:37 GMT") and asctime's ("Sun Nov  6 08:49:37 1994"). The last names no
    zone, and email.utils then gives a naive time, which the server's local zone would
    otherwise shift by hours.
    """
    if value is None:
        return None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # asctime's form, or "-0000": no zone given, so GMT as all are
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def etag_matches(value: str, etag: str, strong: bool = False) -> bool:
    """Whether an If-None-Match value names the strong `etag` (quoted), by weak comparison
    (RFC 9110 8.8.3.2): with W/ or without, the same opaque tag. With `strong`, as If-Match
    compares (RFC 9110 13.1.1), a weak tag never matches. `*` names any; a value that is not
    a list of entity tags names none."""
    if value.strip(" \t") == "*":
        return True
    # Checked whole first: in a value like '"x, "tag"' the quotes pair up otherwise.
    if _ENTITY_TAG_LIST.fullmatch(value) is None:
        return False
    return any(
        tag == etag and not (strong and weak) for weak, tag in _WEAK_AND_OPAQUE_TAG.findall(value)
    )
