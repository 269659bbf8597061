"""Buildshelf's data in the Fill v3 API's shapes (fill_shapes.py), by the mapping
docs/fill-v3.md writes down: a project's id and name, a version (a channelVersion) and its
family, support and Java, a build's channel, time and downloads; where the data files are
silent, the documented defaults; the order Fill lists each in (the newest first).
"""

import bisect
import re
import time
from operator import attrgetter

import msgspec

from buildshelf.model import (
    FILE_NAME_PATTERN,
    PRIMARY_KEY,
    SECONDS_BELOW,
    Build,
    Project,
    VersionInfo,
    epoch_seconds,
)
from buildshelf.web.fill_shapes import (
    FillBuild,
    FillChecksums,
    FillCommit,
    FillDownload,
    FillJava,
    FillJavaFlags,
    FillJavaVersion,
    FillProject,
    FillProjectResponse,
    FillSupport,
    FillVersion,
    FillVersionResponse,
)

# Fill writes a build's number and a file's size as Java ints, and run-task reads them as
# Kotlin Ints: a build numbered above this is not served here, a file this large not offered.
MAX_INT = 2**31 - 1
# The defaults where a project file's `versions` block says nothing (docs/fill-v3.md).
NOTHING_SAID = VersionInfo()
DEFAULT_SUPPORT = "SUPPORTED"
DEFAULT_EXPERIMENTAL = "ALPHA"
JAVA_OF_OTHERS = 21  # of a version unlike Minecraft's (the current Java of the servers)
# Minecraft's 1.minor[.patch], and the Java each release from (minor, patch) on needs, the
# newest first; before 1.17, Java 8.
_MINECRAFT = re.compile(r"1\.([0-9]+)(?:\.([0-9]+))?")
JAVA_SINCE = (((20, 5), 21), ((18, 0), 17), ((17, 0), 16))
JAVA_BEFORE = 8
_MAJOR_MINOR = re.compile(r"[0-9]+\.[0-9]+")
_number = attrgetter("number")


def default_java(version: str) -> int:
    """The oldest Java a version runs on when its project file does not say: Minecraft's for
    a version that starts like one of Minecraft's (1.N or 1.N.N), else JAVA_OF_OTHERS."""
    found = _MINECRAFT.match(version)
    if found is None:
        return JAVA_OF_OTHERS
    release = (int(found[1]), int(found[2] or 0))
    return next((java for since, java in JAVA_SINCE if release >= since), JAVA_BEFORE)


def default_family(version: str) -> str:
    """A version's family when its project file does not say: its leading N.N, else itself."""
    found = _MAJOR_MINOR.match(version)
    return found[0] if found else version


def _said(value, default):
    return default if value is msgspec.UNSET else value


def family(project: Project, version: str) -> str:
    return _said(project.versions.get(version, NOTHING_SAID).family, default_family(version))


def fill_time(timestamp: int) -> str:
    """A build's timestamp (epoch milliseconds, or seconds below 10^11) as Fill writes an
    instant: ISO-8601 in UTC, with milliseconds only when they are not 0."""
    millis = timestamp if timestamp >= SECONDS_BELOW else timestamp * 1000
    seconds, milli = divmod(millis, 1000)
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{whole}.{milli:03d}Z" if milli else whole + "Z"


def builds_of(project: Project, version: str) -> tuple[Build, ...]:
    """The builds of `version` served here, ascending by number: those of the project's that
    are served (not yanked), numbered MAX_INT at most."""
    builds = project.select(version, True)
    if builds and builds[-1].number > MAX_INT:  # a slice only when some are over it
        builds = builds[: bisect.bisect_right(builds, MAX_INT, key=_number)]
    return builds


def channel(project: Project, build: Build) -> str:
    """A build's Fill channel: STABLE, or its version's experimental channel (ALPHA)."""
    if not build.is_experimental:
        return "STABLE"
    said = project.versions.get(build.channel, NOTHING_SAID).experimental_channel
    return _said(said, DEFAULT_EXPERIMENTAL)


def fill_downloads(project: Project, build: Build, file_url) -> dict[str, FillDownload]:
    """A build's files by key, made in this one place: its own file as `server:default`
    (PRIMARY_KEY), then its extra files, each when its SHA-256 and a size Fill can write are
    known (a checksum is never made up; a kept file has both), else left out.
    `file_url(project, build, file)` is where a file (the build itself: its own) is
    downloaded."""
    downloads = {}
    for key, file in build.files:
        if file.sha256 is msgspec.UNSET or file.size > MAX_INT:
            continue
        # Clients save the file under its name: a plain one, never a path.
        name = file.file_name if FILE_NAME_PATTERN.match(file.file_name) else None
        suffix = "" if key == PRIMARY_KEY else "-" + key.replace(":", "-")
        downloads[key] = FillDownload(
            name or f"{project.slug}-{build.number}{suffix}.jar",
            FillChecksums(file.sha256),
            file.size,
            file_url(project, build, file),
        )
    return downloads


def fill_build(project: Project, build: Build, file_url) -> FillBuild:
    """A build in Fill's shape; its commits carry its time (the data keep none of theirs)."""
    when = fill_time(build.timestamp)
    return FillBuild(
        build.number,
        when,
        channel(project, build),
        [FillCommit(commit.hash, when, commit.message) for commit in build.commits],
        fill_downloads(project, build, file_url),
    )


def version_response(project: Project, version: str) -> FillVersionResponse:
    """A version with what its project file says of it, and its builds, the newest first."""
    said = project.versions.get(version, NOTHING_SAID)
    support = FillSupport(_said(said.support, DEFAULT_SUPPORT), said.support_end)
    java = FillJava(
        FillJavaVersion(_said(said.java, default_java(version))),
        FillJavaFlags(list(_said(said.java_flags, ()))),
    )
    builds = [build.number for build in reversed(builds_of(project, version))]
    return FillVersionResponse(FillVersion(version, support, java), builds)


def versions_newest_first(project: Project) -> list[str]:
    """The project's versions with a build served, the newest first: by the time of their
    first build; at the same time, the one whose newest build is numbered higher first."""
    return list(_appearances(project))


def _appearances(project):
    """{version: (when its first build was made, in seconds; its newest build's number)},
    the newest first."""
    seen = {}
    for channel_version, experimental in project.selections:
        if channel_version is not None and experimental:
            builds = builds_of(project, channel_version)
            if builds:
                first = min(map(epoch_seconds, map(attrgetter("timestamp"), builds)))
                seen[channel_version] = (first, builds[-1].number)
    return dict(sorted(seen.items(), key=lambda item: (-item[1][0], -item[1][1])))


def project_response(project: Project) -> FillProjectResponse:
    """A project's names and its versions by family: families, and the versions in each,
    the newest first, a family as new as its first version."""
    families = {}  # family -> [(first, newest)], [versions]
    for version, (first, newest) in _appearances(project).items():
        times, versions = families.setdefault(family(project, version), ([], []))
        times.append((first, newest))
        versions.append(version)

    def age(item):
        times = item[1][0]
        return -min(first for first, _ in times), -max(newest for _, newest in times)

    ordered = {name: versions for name, (_, versions) in sorted(families.items(), key=age)}
    return FillProjectResponse(FillProject(project.slug, project.ci_job), ordered)
