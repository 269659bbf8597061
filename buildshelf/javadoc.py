"""Javadoc addresses: a channel's javadoc root, and deep links to one page under it.

A page path comes from a client (`/jd?redirect=...`) and a page prefix from a data file; both
are checked here by one rule before either can reach a Location header, so that no input can
send a redirect off the project's javadoc host or out of the channel's javadoc root.
"""

import re
from urllib.parse import quote

SUFFIX = "-R0.1-SNAPSHOT"
MAX_PAGE_LENGTH = 512
# Plain relative segments joined by single '/': no scheme, no '//', no '\', no '%', no '?'.
SEGMENT = r"[A-Za-z0-9._$-]+"
PATH_PATTERN = re.compile(rf"{SEGMENT}(?:/{SEGMENT})*\Z")
DOT_SEGMENTS = frozenset({".", ".."})  # a browser resolves these: they would climb out
# RFC 3986 fragment characters without '%'; '<', '>', '[' and ']' (javadoc anchors such as
# #<init>() or #m(int[])) are accepted and percent-encoded by javadoc_url().
FRAGMENT_PATTERN = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/?<>\[\]]*\Z")
FRAGMENT_SAFE = "-._~!$&'()*+,;=:@/?"
EXAMPLE = "org/example/Foo.html or org/example/Foo.html#bar()"


def path_problem(path):
    """Why `path` is not a relative path of plain segments, or None if it is one."""
    if "\\" in path:
        return "holds a backslash: separate segments with '/'"
    if ":" in path:
        return "holds ':' (a scheme?): give a path relative to the javadoc root"
    if path == "" or path.startswith("/") or path.endswith("/") or "//" in path:
        return "has an empty segment (a leading, trailing or doubled '/')"
    if not PATH_PATTERN.match(path):
        return "may hold only letters, digits, '.', '_', '$', '-' and '/'"
    if not DOT_SEGMENTS.isdisjoint(path.split("/")):
        return "has a '.' or '..' segment"
    return None


def page_problem(page):
    """Why `page` (already percent-decoded once) is not a page path, or None if it is one."""
    if len(page) > MAX_PAGE_LENGTH:
        return f"is longer than {MAX_PAGE_LENGTH} characters"
    if "%" in page:
        return "is percent-encoded twice: encode it once"
    path, _, fragment = page.partition("#")
    problem = path_problem(path)
    if problem is not None:
        return problem
    if "#" in page and not fragment:
        return "has an empty #fragment: leave out the '#'"
    if not FRAGMENT_PATTERN.match(fragment):
        return "has a #fragment holding a character other than letters, digits and URL punctuation"
    return None


def javadoc_url(base_url, channel, page=None, page_prefix=""):
    """The javadoc root of `channel`, or the checked `page` under it (after `page_prefix`)."""
    root = base_url.rstrip("/") + "/" + channel + SUFFIX
    if not page:
        return root
    path, hash_sign, fragment = page.partition("#")
    prefix = page_prefix + "/" if page_prefix else ""
    return f"{root}/{prefix}{path}{hash_sign}{quote(fragment, safe=FRAGMENT_SAFE)}"
