"""/healthz: whether data is served, which files are rejected, and whether a check stalls;
the tokens to replace (`tokens_health`)."""

import bottle
import msgspec

from buildshelf.publishing.tokens import EXPIRED_IN_USE, EXPIRING
from buildshelf.web import query
from buildshelf.web.answers import JSON, encode, iso_time
from buildshelf.web.health_shapes import (
    Health,
    RejectedFile,
    StalledRead,
    TokensHealth,
    UnavailableFile,
    WatchedToken,
)


def health(service):
    """Whether `service`'s store serves data, and what is not served as it is on disk; its
    `problems` (zero-argument callables, each returning the fields it adds to the report: a
    problem of a part of the service, which makes it `degraded`, or {}) too."""
    query.parse()
    store = service.store
    snapshot = store.snapshot()
    checking_for, stalled = store.progress()
    late = stalled or (checking_for or 0) > 2 * store.read_wait
    unavailable = [
        UnavailableFile(slug, build.number, file.file, problem)
        for slug, build, file, problem in store.unavailable()
    ]
    reported = {}
    for problem in service.problems:
        reported.update(problem())
    tokens = tokens_health(service.tokens)
    bottle.response.status = 200 if snapshot.projects else 503
    bottle.response.content_type = JSON
    return health_json(
        Health(
            status="no_data"
            if not snapshot.projects
            else "stalled"
            if late
            else "degraded"
            if snapshot.errors or unavailable or reported or (tokens and tokens.expired_in_use)
            else "ok",
            projects=len(snapshot.projects),
            last_reload=iso_time(snapshot.loaded_at),
            last_check=iso_time(store.last_check),
            check_running_for=None if checking_for is None else round(checking_for, 1),
            rejected_files=[
                RejectedFile(name, error.located(), error.lines(located=True))
                for name, error in sorted(snapshot.errors.items())
            ],
            unavailable_files=unavailable,
            stalled_reads=[
                StalledRead(name, round(seconds, 1)) for name, seconds in sorted(stalled.items())
            ],
            tokens=tokens or msgspec.UNSET,
        ),
        reported,
    )


def tokens_health(watch) -> TokensHealth | None:
    """The tokens that `watch` (publishing.expiry.TokenWatch, or None) finds in need of
    attention now, from memory; None when none does."""
    if watch is None:
        return None
    now, needing = watch.attention()
    if not needing:
        return None

    def when(millis):
        return None if millis is None else iso_time(millis // 1000)

    said = {EXPIRING: [], EXPIRED_IN_USE: []}
    for token, attention in needing:
        said[attention].append(
            WatchedToken(
                token.id,
                token.project,
                when(token.expires),
                (token.expires - now) // 1000,
                when(token.last_used),
                when(token.refused_expired),
            )
        )
    return TokensHealth(said[EXPIRING], said[EXPIRED_IN_USE])


def health_json(health: Health, problems: dict | None = None) -> bytes:
    """The health report, with the fields the service's parts add (`problems`)."""
    return encode({**msgspec.to_builtins(health), **(problems or {})})


ROUTES = (("/healthz", "GET", health),)
