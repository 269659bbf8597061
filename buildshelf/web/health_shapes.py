"""The shapes of /healthz: what the server serves, and what it does not serve as it is on
disk (`Health`, and the parts it lists; the tokens to replace, `TokensHealth`), declared
once for the answer and its OpenAPI schema (shapes.schemas).
"""

import typing

import msgspec
from msgspec import Meta

_ISO_TIME = Meta(
    extra_json_schema={
        "format": "date-time",
        "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$",
    }
)


def _text(description, **schema):
    return typing.Annotated[str, Meta(description=description, extra_json_schema=schema)]


class RejectedFile(msgspec.Struct):
    """A data file not served as it is on disk. A project whose file broke keeps serving its
    last good version."""

    file: _text("The file's name in the data directory; `.` for the directory itself.", minLength=1)
    error: _text("The first problem and where in the file it is.", minLength=1)
    errors: typing.Annotated[
        list[str],
        Meta(
            min_length=1,
            description="Every problem of the file, each with its place (20 at most, then a "
            "line saying how many more); the first is `error`.",
        ),
    ]


class UnavailableFile(msgspec.Struct):
    """A kept file that cannot be downloaded: its object in the artifact store is missing or
    damaged. Its downloads answer 503 `artifact_unavailable`; everything else still serves."""

    project: str
    build: typing.Annotated[int, Meta(ge=0)]
    file: _text("The file's name, as its download URL ends.", minLength=1)
    problem: _text("What is wrong with the object, and its place on disk.", minLength=1)


class StalledRead(msgspec.Struct):
    """A read that has lasted longer than a check waits."""

    file: str
    seconds: typing.Annotated[float, Meta(ge=0)]


class FailingTarget(msgspec.Struct, rename="camel"):
    """A webhook target whose deliveries have failed for more than 15 minutes."""

    target: typing.Annotated[int, Meta(ge=0, description="Its index in webhooks.json, from 0.")]
    host: _text("Its host (and port): never its URL, which may be a credential.")
    failing_for: typing.Annotated[
        int, Meta(ge=0, description="Seconds since its first failure after its last success.")
    ]


class UnknownProject(msgspec.Struct, rename="camel"):
    """A project a webhook target's `projects` names that is not there: the target hears
    nothing of it."""

    target: typing.Annotated[int, Meta(ge=0, description="Its index in webhooks.json, from 0.")]
    host: _text("Its host (and port): never its URL, which may be a credential.")
    project: _text("The slug it names.")
    did_you_mean: typing.Annotated[
        str | None,
        Meta(description="The project it most likely meant, or null when none is close."),
    ]


class WebhooksHealth(msgspec.Struct):
    """What is wrong with the webhooks (docs/webhooks.md)."""

    file: typing.Annotated[
        RejectedFile | None,
        Meta(
            description="webhooks.json refused or malformed, as a rejected data file is told: "
            "the last good targets stay in force. null when it is read."
        ),
    ]
    failing: typing.Annotated[
        list[FailingTarget], Meta(description="Every target failing for more than 15 minutes.")
    ]
    unknown_projects: typing.Annotated[
        list[UnknownProject],
        Meta(
            description="Every project a target's `projects` names that is not there (no "
            "data file of that slug): the target hears nothing of it. Checked against the "
            "data served, so adding the project clears it."
        ),
    ] = msgspec.field(name="unknownProjects")


class WatchedToken(msgspec.Struct, rename="camel"):
    """A token to replace (docs/publishing.md): its id and project, never its secret."""

    id: _text("The token's id: ID in bs_ID_SECRET.", pattern="^[0-9a-f]{12}$")
    project: _text("The project it may publish to, or `*` for every project.", minLength=1)
    expires: typing.Annotated[str, _ISO_TIME, Meta(description="When it expires, UTC.")]
    seconds_left: typing.Annotated[
        int, Meta(description="Seconds until it expires; negative once it has expired.")
    ]
    last_used: typing.Annotated[
        str | None,
        _ISO_TIME,
        Meta(
            description="When it was last used to publish, UTC (recorded at most once a "
            "minute), or null."
        ),
    ]
    last_refused: typing.Annotated[
        str | None,
        _ISO_TIME,
        Meta(
            description="When a write was last refused because it had expired, UTC "
            "(recorded at most once a minute), or null."
        ),
    ]


class TokensHealth(msgspec.Struct, rename="camel"):
    """The tokens to replace before publishing breaks, or since it has."""

    expiring: typing.Annotated[
        list[WatchedToken],
        Meta(description="Tokens that expire within 14 days: a warning, still `ok`."),
    ]
    expired_in_use: typing.Annotated[
        list[WatchedToken],
        Meta(
            description="Tokens that have expired while still in use (used, or refused as "
            "expired, within the last 14 days): the status is `degraded`."
        ),
    ]


class Health(msgspec.Struct, rename="camel"):
    """What the server serves."""

    status: _text(
        "`ok` when every data file and every kept file is served as it is on disk; "
        "`degraded` when some are not (`rejectedFiles`, `unavailableFiles`: the rest serves), "
        "or when a part of the service reports a problem (`downloadCounting`, `webhooks`, "
        "`tokens.expiredInUse`); "
        "`stalled` when a file has been read for longer than a check waits, or a check takes "
        "too long: the data served may be out of date; `no_data` when no project at all is "
        "served (status 503).",
        enum=["ok", "degraded", "stalled", "no_data"],
    )
    projects: typing.Annotated[int, Meta(ge=0, description="How many projects are served.")]
    last_reload: typing.Annotated[
        str, _ISO_TIME, Meta(description="When the served data last changed, UTC.")
    ]
    last_check: typing.Annotated[
        str,
        _ISO_TIME,
        Meta(
            description="When the data files were last checked for changes, UTC (about every second)."
        ),
    ]
    check_running_for: typing.Annotated[
        float | None,
        Meta(
            description="Seconds the check under way has taken, or null.",
            extra_json_schema={"minimum": 0},
        ),
    ]
    rejected_files: typing.Annotated[
        list[RejectedFile], Meta(description="Every data file not served as it is on disk.")
    ]
    unavailable_files: typing.Annotated[
        list[UnavailableFile],
        Meta(description="Every kept file of a served build whose object is missing or damaged."),
    ]
    stalled_reads: typing.Annotated[
        list[StalledRead],
        Meta(
            description="Files (or `.`, the directory listing, or `artifacts/`, the kept files' "
            "check) whose read has lasted longer than a check waits, with how long; each keeps "
            "its last good version meanwhile."
        ),
    ]
    download_counting: typing.Annotated[
        str,
        Meta(
            min_length=1,
            description="Present only when download counts cannot be written to the state "
            "directory's database (locked, full, read-only): why. The counts wait in memory "
            "and downloads are served as ever.",
        ),
    ] = msgspec.UNSET
    webhooks: typing.Annotated[
        WebhooksHealth | msgspec.UnsetType,
        Meta(
            description="Present only while something is wrong with the webhooks: then the "
            "status is `degraded`."
        ),
    ] = msgspec.UNSET
    tokens: typing.Annotated[
        TokensHealth | msgspec.UnsetType,
        Meta(
            description="Present only while a token expires within 14 days, or has expired "
            "while still in use; only the latter makes the status `degraded`."
        ),
    ] = msgspec.UNSET
