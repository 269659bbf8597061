"""The downloads counted as the API answers them: `/downloads` (`Downloads`, a
`ProjectDownloads` per project) and `/downloads/stats` (`DownloadStats`), declared once as
msgspec structs, which are both the answers' shapes and, through msgspec, their OpenAPI
schemas. The upstream's fields in its order, in both modes; the spec's adds what
SPEC_ONLY_STATS names. shapes.py fills them from a counts.Tally.
"""

import typing

import msgspec
from msgspec import Meta

from buildshelf.model import HTTP_URL

SPEC_ONLY_STATS = ("downloadsByBuild",)


def _count(description):
    return typing.Annotated[int, Meta(ge=0, description=description)]


def _upstream_constant(description):
    return typing.Annotated[bool, Meta(description=description, extra_json_schema={"const": False})]


_CHANNEL = typing.Annotated[
    str | None,
    Meta(description="The `channel` asked for; null when none (every channel)."),
]
_INCLUDE_EXPERIMENTAL = typing.Annotated[
    bool, Meta(description="Whether `experimental=true` was asked: experimental builds count.")
]
_DAY_PATTERN = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_DAY = Meta(pattern=_DAY_PATTERN, extra_json_schema={"format": "date"})
_DATE = typing.Annotated[
    typing.Annotated[str, Meta(pattern="^[0-9]{6}$")] | None,
    Meta(description="The `date` asked for, as given (DDMMYY); null when none: counts of "
         "every day."),
]  # fmt: skip
_CACHED = _upstream_constant(
    "Always `false`: the counts are read from memory, never from a fallback cache."
)
_JENKINS_DOWN = _upstream_constant("Always `false`: there is no Jenkins to be down.")


class ProjectDownloads(msgspec.Struct, rename="camel"):
    """One project's downloads, counted for its builds that pass the filters."""

    project: typing.Annotated[str, Meta(description="The project's slug.")]
    ci_job: typing.Annotated[str, Meta(description="The name of the project's CI job.")]
    channel: _CHANNEL
    date: _DATE
    include_experimental: _INCLUDE_EXPERIMENTAL
    total_downloads: _count(
        "The downloads of the builds passing the filters: on `date` if given, else ever."
    )
    total_builds: _count("How many builds pass the filters.")
    downloadable_builds: _count(
        "How many of them have a `downloadUrl`: all of them (every build served has one)."
    )
    latest_download_url: typing.Annotated[
        typing.Annotated[str, Meta(extra_json_schema=HTTP_URL)] | None,
        Meta(description="The `downloadUrl` of the latest build passing the filters; null "
             "when none does."),
    ]  # fmt: skip
    latest_build_number: typing.Annotated[
        int | None, Meta(description="Its `buildNumber`; null when no build passes the filters.")
    ]
    cached: _CACHED
    jenkins_down: _JENKINS_DOWN


class Downloads(msgspec.Struct, rename="camel"):
    """The downloads of every project asked for (one, or all in slug order)."""

    channel: _CHANNEL
    date: _DATE
    include_experimental: _INCLUDE_EXPERIMENTAL
    total_downloads: _count("The sum of the projects' `totalDownloads`.")
    projects: list[ProjectDownloads]


class DayDownloads(msgspec.Struct):
    """The downloads of one UTC day."""

    day: typing.Annotated[str, _DAY]
    downloads: _count("The downloads counted that day.")


class VersionDownloads(msgspec.Struct, rename="camel"):
    """The downloads of the builds of one game version."""

    version: typing.Annotated[
        str,
        Meta(description="The first `N.N` or `N.N.N` in the builds' `channelVersion`; "
             "`Unknown` for channels without one (as the upstream)."),
    ]  # fmt: skip
    downloads: _count("The downloads of those builds, ever.")
    build_count: _count("How many builds of that version pass the filters.")


class BuildDownloads(msgspec.Struct, rename="camel"):
    """The downloads of one build."""

    build_number: typing.Annotated[int, Meta(ge=0)]
    downloads: _count("The downloads of the build, ever (its files summed).")


class DownloadStats(msgspec.Struct, rename="camel"):
    """One project's downloads for its builds that pass the filters: in all, by day, by game
    version and by build."""

    project: typing.Annotated[str, Meta(description="The project's slug.")]
    channel: _CHANNEL
    include_experimental: _INCLUDE_EXPERIMENTAL
    days: typing.Annotated[
        int,
        Meta(ge=7, le=730, description="How many days `dailyDownloads` covers: `days` asked "
             "for (90 by default), brought into 7..730."),
    ]  # fmt: skip
    generated_at: typing.Annotated[
        str,
        Meta(description="When this answer was made, UTC, in milliseconds.",
             extra_json_schema={"format": "date-time", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}"
                                "T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$"}),
    ]  # fmt: skip
    total_downloads: _count("The downloads of the builds passing the filters, ever.")
    daily_downloads: typing.Annotated[
        list[DayDownloads],
        Meta(description="One entry per UTC day of the last `days` days, the oldest first and "
             "today last, days without a download included (0)."),
    ]  # fmt: skip
    downloads_by_minecraft_version: typing.Annotated[
        list[VersionDownloads],
        Meta(description="The most downloaded version first; a tie, the version of the newer "
             "build first."),
    ]  # fmt: skip
    tracking_started_day: typing.Annotated[
        typing.Annotated[str, _DAY] | None,
        Meta(description="The first UTC day on which this server counted a download (of any "
             "project); null before the first."),
    ]  # fmt: skip
    backfilled_downloads: typing.Annotated[
        int,
        Meta(description="Always 0: no download is backfilled (the upstream adds downloads "
             "counted before its daily series began).", extra_json_schema={"const": 0}),
    ]  # fmt: skip
    tracked_builds: _count("How many builds pass the filters (every one has a `downloadUrl`).")
    tracked_urls: _count("How many distinct `downloadUrl`s those builds have.")
    cached: _CACHED
    jenkins_down: _JENKINS_DOWN
    downloads_by_build: typing.Annotated[
        list[BuildDownloads],
        Meta(description="Every build passing the filters, ascending by `buildNumber`, with "
             "its downloads (0 included). Not served with `--compat upstream`."),
    ]  # fmt: skip
