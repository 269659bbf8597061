"""The models of the two clients of the Fill v3 API, as msgspec structs that decode as they do:
jpenilla/run-task's (Kotlin, kotlinx.serialization) and itzg/mc-image-helper's (Java, Jackson).
Each struct names its source file. tests/test_fill_v3.py decodes Buildshelf's /v3 answers with
them: a field a client requires and we lack, or a value it refuses, fails a test, not a user.

run-task, commit 740b1b51ddc0d5d07d6b37b3c3073211e1d4abb4,
plugin/src/main/kotlin/xyz/jpenilla/runtask/paperapi/model.kt, decoded by DownloadsAPI.kt's
`Json { ignoreUnknownKeys = true; namingStrategy = SnakeCase }`: unknown keys ignored, every
property without a default REQUIRED, no JSON null for a non-nullable type, `Int` 32 bits. Its
property names are single lower-case words, so the naming strategy renames none.

mc-image-helper, commit 8bd3adc3370fac0637283f3bf97c8a4a9d6d8176,
src/main/java/me/itzg/helpers/paper/model/*.java, decoded by ObjectMappers.defaultMapper()
(FAIL_ON_UNKNOWN_PROPERTIES off): unknown keys ignored, a missing field null (0 for an `int`),
but an enum value not among the names of its Java enum refused, and an `int` or `Integer`
beyond 32 bits refused. What it then reads (PaperDownloadsClient.java) is checked by the tests.
"""

import enum
import typing

import msgspec

Int = typing.Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]  # Kotlin Int, Java int


# --- run-task: paperapi/model.kt --------------------------------------------------------------


class RtChecksums(msgspec.Struct):
    """model.kt `Checksums(sha256: String)`."""

    sha256: str


class RtDownload(msgspec.Struct):
    """model.kt `Download(name: String, url: String, size: Int, checksums: Checksums)`."""

    name: str
    url: str
    size: Int
    checksums: RtChecksums


class RtCommit(msgspec.Struct):
    """model.kt `Commit(sha: String, message: String, time: String)`."""

    sha: str
    message: str
    time: str


class RtBuildResponse(msgspec.Struct):
    """model.kt `BuildResponse(id: Int, time: String, channel: String, commits: List<Commit>,
    downloads: Map<String, Download>)`."""

    id: Int
    time: str
    channel: str
    commits: list[RtCommit]
    downloads: dict[str, RtDownload]


class RtProject(msgspec.Struct):
    """model.kt `Project(id: String, name: String)`."""

    id: str
    name: str


class RtProjectResponse(msgspec.Struct):
    """model.kt `ProjectResponse(project: Project, versions: Map<String, List<String>>)`."""

    project: RtProject
    versions: dict[str, list[str]]


class RtProjectsResponse(msgspec.Struct):
    """model.kt `ProjectsResponse(projects: List<ProjectResponse>)`."""

    projects: list[RtProjectResponse]


class RtSupport(msgspec.Struct):
    """model.kt `Support(status: String, end: String? = null)`: `end` its only optional field."""

    status: str
    end: str | None = None


class RtJavaVersion(msgspec.Struct):
    """model.kt `JavaVersion(minimum: Int)`."""

    minimum: Int


class RtJavaFlags(msgspec.Struct):
    """model.kt `JavaFlags(recommended: List<String>)`."""

    recommended: list[str]


class RtJava(msgspec.Struct):
    """model.kt `Java(version: JavaVersion, flags: JavaFlags)`."""

    version: RtJavaVersion
    flags: RtJavaFlags


class RtVersion(msgspec.Struct):
    """model.kt `Version(id: String, support: Support, java: Java)`."""

    id: str
    support: RtSupport
    java: RtJava


class RtVersionResponse(msgspec.Struct):
    """model.kt `VersionResponse(version: Version, builds: List<Int>)`."""

    version: RtVersion
    builds: list[Int]


class RtErrorResponse(msgspec.Struct):
    """model.kt `ErrorResponse(error: String, message: String, ok: Boolean)`."""

    error: str
    message: str
    ok: bool


# run-task's `versions()` declares a bare List<VersionResponse>, which Fill's own answer
# ({"versions": [...]}) does not decode as; run-task never calls it (research, pitfall 1).
# Fill's shape is served: the object, as mc-image-helper reads it.
RT_BUILDS = list[RtBuildResponse]  # DownloadsAPI.kt builds(): a bare array, as Fill's


# --- mc-image-helper: paper/model/*.java ------------------------------------------------------


class MihChannel(enum.Enum):
    """Channel.java: ALPHA, BETA, STABLE, RECOMMENDED (Jackson reads an enum by its name)."""

    ALPHA = "ALPHA"
    BETA = "BETA"
    STABLE = "STABLE"
    RECOMMENDED = "RECOMMENDED"


class MihSupportStatus(enum.Enum):
    """SupportStatus.java: SUPPORTED, DEPRECATED, UNSUPPORTED."""

    SUPPORTED = "SUPPORTED"
    DEPRECATED = "DEPRECATED"
    UNSUPPORTED = "UNSUPPORTED"


class MihChecksums(msgspec.Struct):
    """Checksums.java: `String sha256`."""

    sha256: str | None = None


class MihDownload(msgspec.Struct):
    """Download.java: `Checksums checksums; String name; String url`."""

    checksums: MihChecksums | None = None
    name: str | None = None
    url: str | None = None


class MihBuildResponse(msgspec.Struct):
    """BuildResponse.java: `int id; Channel channel; Map<String, Download> downloads`."""

    id: Int = 0
    channel: MihChannel | None = None
    downloads: dict[str, MihDownload] | None = None


class MihSupport(msgspec.Struct):
    """Support.java: `SupportStatus status` (no `end`)."""

    status: MihSupportStatus | None = None


class MihJavaVersion(msgspec.Struct):
    """JavaInfo.java's JavaVersion: `int minimum`."""

    minimum: Int = 0


class MihJavaFlags(msgspec.Struct):
    """JavaInfo.java's JavaFlags: `List<String> recommended`."""

    recommended: list[str] | None = None


class MihJavaInfo(msgspec.Struct):
    """JavaInfo.java: `JavaVersion version; JavaFlags flags`."""

    version: MihJavaVersion | None = None
    flags: MihJavaFlags | None = None


class MihVersion(msgspec.Struct):
    """Version.java: `String id; Support support; JavaInfo java`."""

    id: str | None = None
    support: MihSupport | None = None
    java: MihJavaInfo | None = None


class MihVersionResponse(msgspec.Struct):
    """VersionResponse.java: `Version version; List<Integer> builds`."""

    version: MihVersion | None = None
    builds: list[Int] | None = None


class MihProjectResponse(msgspec.Struct):
    """ProjectResponse.java: `List<VersionResponse> versions`, what /versions answers."""

    versions: list[MihVersionResponse] | None = None


class MihErrorResponse(msgspec.Struct):
    """ErrorResponse.java: `String message; String error; boolean ok` (declared, never used)."""

    message: str | None = None
    error: str | None = None
    ok: bool = False


# What run-task and mc-image-helper decode each endpoint as (neither decodes every one).
RUN_TASK = {
    "projects": RtProjectsResponse,
    "project": RtProjectResponse,
    "version": RtVersionResponse,
    "builds": RT_BUILDS,
    "build": RtBuildResponse,
    "error": RtErrorResponse,
}
MC_IMAGE_HELPER = {
    "versions": MihProjectResponse,
    "build": MihBuildResponse,
    "error": MihErrorResponse,
}
