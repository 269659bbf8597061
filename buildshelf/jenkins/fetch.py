"""Fetching on a user's behalf (import-jenkins: the job's JSON, --mirror's artifacts), through
http_client: an HTTP GET whose redirects reach no internal address unless a host is allowed,
decided on the address actually connected to (so no proxy); whose body is framed only as
HTTP/1.1 frames one; and that keeps moving: the status line and headers within --timeout,
then at least 1 MiB each --timeout, and never a silence of --timeout.
"""

from collections.abc import Iterable
from urllib.parse import urlsplit

from buildshelf import http_client

# A body may take as long as it must, as long as it moves: at least 1 MiB for each
# --timeout seconds on average (30 s: 34 KiB/s), besides --timeout for each read.
PACE_BYTES = 1 << 20


def open_url(
    url: str, timeout: float, allowed_hosts: Iterable[str] = (), headers: dict | None = None
) -> http_client.Response:
    """The answer to a GET of `url`, its status line and headers read, its body to read
    (`chunk`, `read`), or http_client.HttpError naming the URL. Redirects may lead to `url`'s
    own host, to the `allowed_hosts` and to public addresses."""
    return http_client.request(
        url,
        http_client.Deadline(timeout),
        headers=headers,
        allowed_hosts=(urlsplit(url).hostname or "", *allowed_hosts),
        pace=PACE_BYTES,
    )
