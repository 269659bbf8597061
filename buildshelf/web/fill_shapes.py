"""The Fill v3 API's shapes (PaperMC's Fill, docs/fill-v3.md), declared once as msgspec
structs in the order of Fill's Java records (`model/response/v3/*`, `model/*`), which is the
order Fill writes their fields in: both what `/v3` answers and, through msgspec, their OpenAPI
schemas. Fill's channels, and its error. fill_mapping.py fills them from the store's data.
"""

import typing

import msgspec
from msgspec import Meta

from buildshelf.model import DAY_PATTERN, SUPPORT_STATUSES, json_pattern

FILL_CHANNELS = ("ALPHA", "BETA", "STABLE", "RECOMMENDED")  # Fill's BuildChannel, in its order
# 32 bits: Fill writes them as Java ints, run-task reads them as Kotlin Ints.
INT32 = Meta(ge=0, le=2**31 - 1)
# Instants as Fill (Jackson's ISO_INSTANT) writes them: UTC, milliseconds only when not 0.
_TIME = typing.Annotated[
    str,
    Meta(
        pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{3})?Z$",
        extra_json_schema={"format": "date-time"},
    ),
]


def _text(description, **schema):
    return typing.Annotated[str, Meta(description=description, extra_json_schema=schema)]


class FillProject(msgspec.Struct):
    """A project's names (Fill's `ProjectResponse.Project`)."""

    id: _text("The project's slug: the `{project}` of the paths.")
    name: _text("The name of the project's CI job (`ciJob`).")


class FillProjectResponse(msgspec.Struct):
    """A project and its versions by family (Fill's `ProjectResponse`)."""

    project: FillProject
    versions: typing.Annotated[
        dict[str, list[str]],
        Meta(
            description="Each family (the newest first) and its versions (the newest first): "
            "newest by the time of their first build served."
        ),
    ]


class FillProjects(msgspec.Struct):
    """Every project (Fill's `ProjectsResponse`)."""

    projects: typing.Annotated[list[FillProjectResponse], Meta(description="In slug order.")]


class FillSupport(msgspec.Struct):
    """Whether a version is supported (Fill's `Support`)."""

    status: _text(
        "The project file's `support`; `SUPPORTED` by default.", enum=list(SUPPORT_STATUSES)
    )
    end: (
        typing.Annotated[
            str,
            Meta(
                pattern=json_pattern(DAY_PATTERN),
                description="The project file's `supportEnd`, a day; absent when it gives none.",
                extra_json_schema={"format": "date"},
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET


class FillJavaVersion(msgspec.Struct):
    """Fill's `JavaVersion`."""

    minimum: typing.Annotated[
        int,
        Meta(
            ge=1,
            le=2**31 - 1,
            description="The oldest Java release the version runs on: the project file's "
            "`java`, else one derived from the version (docs/fill-v3.md).",
        ),
    ]


class FillJavaFlags(msgspec.Struct):
    """Fill's `JavaFlags`."""

    recommended: typing.Annotated[
        list[str], Meta(description="The project file's `javaFlags`; `[]` by default.")
    ]


class FillJava(msgspec.Struct):
    """The Java a version needs (Fill's `Java`)."""

    version: FillJavaVersion
    flags: FillJavaFlags


class FillVersion(msgspec.Struct):
    """A version: a `channelVersion` of the project's builds (Fill's `VersionResponse.Version`)."""

    id: _text("The `channelVersion`.")
    support: FillSupport
    java: FillJava


class FillVersionResponse(msgspec.Struct):
    """A version and its builds (Fill's `VersionResponse`)."""

    version: FillVersion
    builds: typing.Annotated[
        list[typing.Annotated[int, INT32]],
        Meta(description="The numbers of its builds served, the newest first, in every channel."),
    ]


class FillVersions(msgspec.Struct):
    """A project's versions (Fill's `VersionsResponse`)."""

    versions: typing.Annotated[
        list[FillVersionResponse],
        Meta(description="The newest first: by the time of their first build served."),
    ]


class FillChecksums(msgspec.Struct):
    """Fill's `Checksums` (its `md5` is never written)."""

    sha256: _text("The file's SHA-256, 64 lowercase hexadecimal digits.", pattern="^[0-9a-f]{64}$")


class FillDownload(msgspec.Struct):
    """One file of a build (Fill's `DownloadWithUrl`)."""

    name: _text("The file's name, a plain one (no path): clients save the file under it.")
    checksums: FillChecksums
    size: typing.Annotated[int, INT32, Meta(description="Its size in bytes.")]
    url: _text("Where it is downloaded: a kept file's address on `--public-url`, else its "
               "`downloadUrl`.", format="uri")  # fmt: skip


class FillCommit(msgspec.Struct):
    """A commit of a build (Fill's `Commit`)."""

    sha: _text("The commit hash.")
    time: typing.Annotated[
        str, _TIME, Meta(description="The build's time: the data files keep none of a commit.")
    ]
    message: _text("The commit message.")


class FillBuild(msgspec.Struct):
    """A build (Fill's `BuildResponse`)."""

    id: typing.Annotated[int, INT32, Meta(description="The build's number.")]
    time: typing.Annotated[str, _TIME, Meta(description="The build's timestamp, UTC.")]
    channel: _text(
        "`STABLE` for a stable build; an experimental one `ALPHA`, or `BETA` when the project "
        "file's `experimentalChannel` says so.",
        enum=list(FILL_CHANNELS),
    )
    commits: typing.Annotated[list[FillCommit], Meta(description="As the data file lists them.")]
    downloads: typing.Annotated[
        dict[str, FillDownload],
        Meta(
            description="Its files by key: `server:default`, the build's file, then its extra "
            "files, each when its SHA-256 and size are known (and the size below 2 GiB)."
        ),
    ]


class FillError(msgspec.Struct):
    """What every error under `/v3` holds (Fill's `ErrorResponse`)."""

    ok: typing.Annotated[
        bool, Meta(description="Always `false`.", extra_json_schema={"const": False})
    ]
    error: _text("The problem's stable name, for programs.")
    message: _text("What went wrong, for people.", minLength=1)
