"""The API's JSON shapes, made from the model's declaration (model.py): the fields served,
under their JSON names, in their order, in the spec's shapes or the upstream's (a build's
files by key, build_files.py's, on a build with extra files); the downloads counted
(counts.Tally) of the builds served, in the upstream's shapes (declared in count_shapes.py).
The OpenAPI document's schemas come from the same declarations (`schemas`), the health
report's too (health_shapes.py).
"""

import datetime
import functools
import io
import re
import time
import typing
from operator import attrgetter

import msgspec

from buildshelf.counts import Tally
from buildshelf.model import Build, Commit, Commits, Project, VersionInfo, served_fields
from buildshelf.web import upstream
from buildshelf.web.answers import encode
from buildshelf.web.build_files import BUILD_DOWNLOADS, FileDownload, files_json
from buildshelf.web.count_shapes import (
    SPEC_ONLY_STATS,
    BuildDownloads,
    DayDownloads,
    Downloads,
    DownloadStats,
    ProjectDownloads,
    VersionDownloads,
)
from buildshelf.web.health_shapes import Health

# Builds encoded in one call. Each slice's dicts and text are made, then freed, and the room
# they took stays the process's: a list of 2,000 builds (1.3 MB of JSON, 0.3 MB gzipped) left
# a server 6.0 MB larger at 1,000 a slice, 3.4 MB at 100, made in the same time (15.5 and
# 15.8 ms; issue 34).
ENCODE_SLICE = 100
SCHEMA_REF = "#/components/schemas/{name}"
PACKED_COMMIT_KEYS = ("message", "hash")  # a Commit's keys in Commits.json, but "author"


def json_maker(
    struct: type, mode: str | None = None, packed: bool = False
) -> typing.Callable[[object], dict]:
    """A function making the JSON object of a `struct` value: its fields served in `mode`,
    under their JSON names, in order; a field of structs holds their JSON objects. With
    `packed`, packed commits that are already in their served shape are a msgspec.Raw of
    their JSON (for answers.encode, which writes it as it is; no Commit is made)."""
    fields = served_fields(struct, mode)
    keys = tuple(field.encode_name for field in fields)
    names = [field.name for field in fields]
    values = attrgetter(*names) if len(names) > 1 else lambda value: (getattr(value, names[0]),)
    # key: (the maker of its items' JSON, whether packed commits are served as they are)
    nested = {
        field.encode_name: (json_maker(item, mode, packed), packed and _packs(item, mode))
        for field in fields
        if (item := _struct_items(field.type)) is not None
    }

    optional = any(field.default is msgspec.UNSET for field in fields)

    def to_json(value):
        obj = dict(zip(keys, values(value)))
        if optional:  # a field a value does not have is left out
            obj = {key: item for key, item in obj.items() if item is not msgspec.UNSET}
        for key, (make, as_packed) in nested.items():
            items = obj[key]
            if as_packed and type(items) is Commits and not items.authored:
                obj[key] = msgspec.Raw(items.json)
            else:
                obj[key] = [make(item) for item in items]
        return obj

    return to_json


def _packs(struct: type, mode: str | None) -> bool:
    """Whether `struct` served in `mode` has the shape of Commits.json, key for key."""
    return tuple(field.encode_name for field in served_fields(struct, mode)) == PACKED_COMMIT_KEYS


def _struct_items(kind):
    """The struct type a field of `kind` (tuple[Struct, ...], maybe Annotated) holds, or None."""
    args = typing.get_args(typing.get_args(kind)[0] if typing.get_origin(kind) else kind)
    return (
        args[0]
        if args and isinstance(args[0], type) and issubclass(args[0], msgspec.Struct)
        else None
    )


project_json = json_maker(Project)
DOWNLOADS = "/downloads"  # the upstream's path, outside the API prefix; kept files live under it
SIDECAR = ".sha256"  # added to a kept file's URL: its `sha256sum -c` line


def hosted_path(project: Project, build: Build, file=None) -> str:
    """Where a kept file is served (the build's primary, or `file`, an extra file of it):
    named by its project, build and bytes, and ending with its name, so that a URL's bytes
    never change and clients save it under its name."""
    file = build if file is None else file
    return f"{DOWNLOADS}/{project.slug}/{build.number}/{file.sha256}/{file.file}"


class Shapes:
    """The JSON of builds in one mode, None (the spec's) or upstream.MODE; a kept file's
    downloadUrl is on `public_url`, or, with `object_url`, the URL it gives of the object of a
    sha256 (a bucket's public one)."""

    def __init__(self, mode: str | None = None, public_url: str = "", object_url=None):
        self.mode, self.public_url, self.object_url = mode, public_url, object_url
        self._values = json_maker(Build, mode)
        # What answers.encode writes: the packed commits as they are. A list of 2,000 builds
        # is encoded in 5.7 ms instead of 14.6 (with msgspec's encoder, which alone took 10.0).
        self._encodable = json_maker(Build, mode, packed=True)
        self._extra = upstream.BUILD_FIELDS if mode else {}

    def build_json(self, project: Project, build: Build) -> dict:
        return self._build_json(project, build, self._values)

    def _build_json(self, project: Project, build: Build, fields) -> dict:
        obj = fields(build)
        if build.hosted:
            obj["downloadUrl"] = self.download_url(project, build)
        if build.downloads is not msgspec.UNSET and not self.mode:  # never the upstream's
            obj["downloads"] = files_json(build, lambda file: self.file_url(project, build, file))
        return {**self._extra, **obj} if self._extra else obj

    def download_url(self, project: Project, build: Build) -> str:
        return self.file_url(project, build, build)

    def file_url(self, project: Project, build: Build, file) -> str:
        """Where a file of `build` (the build itself: its primary; or an extra) is served."""
        if not file.hosted:
            return file.download_url
        if self.object_url is not None:
            return self.object_url(file.sha256)
        return self.public_url + hosted_path(project, build, file)

    def checksum_url(self, project: Project, build: Build, file) -> str | None:
        """Where the `sha256sum -c` line of a file of `build` (as file_url's) is served: beside
        its download on this server (web/hosted.py), wherever the bytes are; None for a
        file not kept."""
        return (
            self.public_url + hosted_path(project, build, file) + SIDECAR if file.hosted else None
        )

    def build(self, project: Project, build: Build) -> bytes:
        return encode(self._build_json(project, build, self._encodable))

    def build_list(self, project: Project, builds: tuple, with_project: bool) -> bytes:
        """The JSON of `builds`: an array, or the upstream's envelope (with the project's slug
        when `with_project`)."""
        if self.mode:
            return encode(
                upstream.envelope(
                    project, [self.build_json(project, b) for b in builds], with_project
                )
            )
        # A slice at a time: one long call into the C encoder would hold the interpreter
        # lock, and every other request with it, for a list of a million.
        out = io.BytesIO()  # its getvalue() hands over its buffer: no second copy of the body
        out.write(b"[")
        for i in range(0, len(builds), ENCODE_SLICE):
            if i:
                out.write(b",")
            chunk = [
                self._build_json(project, b, self._encodable) for b in builds[i : i + ENCODE_SLICE]
            ]
            out.write(encode(chunk)[1:-1])
        out.write(b"]")
        return out.getvalue()

    def downloads(self, projects, tally: Tally, channel, experimental, day, date) -> bytes:
        """/downloads: the downloads of `projects`' builds passing the filters, counted on
        `day` ('YYYY-MM-DD', which the client gave as `date`) or ever (None)."""
        summaries = []
        for project in projects:
            selected = project.select(channel, experimental)
            latest = selected[-1] if selected else None
            summaries.append(
                ProjectDownloads(
                    project.slug, project.ci_job, channel, date, experimental,
                    sum(_build_downloads(tally, project, selected, day).values()),
                    len(selected), len(selected),  # every build served has a downloadUrl
                    self.download_url(project, latest) if latest else None,
                    latest.number if latest else None,
                    False, False,
                )
            )  # fmt: skip
        total = sum(summary.total_downloads for summary in summaries)
        return encode(msgspec.to_builtins(Downloads(channel, date, experimental, total, summaries)))

    def selection_counts(self, project: Project, tally: Tally, selected) -> "SelectionCounts":
        """The downloads of `selected`, builds of `project`, summed once: every row of theirs
        is read here, and /downloads/stats then answers any `days` from the sums."""
        counted = tally.builds(project.slug)
        by_build, by_day = {}, {}
        versions = {}  # version -> [downloads, builds, the newest build's number]
        for build in selected:
            days = counted.get(build.number)
            downloads = 0
            if days:
                downloads = by_build[build.number] = sum(days.values())
                for day, count in days.items():
                    by_day[day] = by_day.get(day, 0) + count
            version = versions.setdefault(game_version(build.channel), [0, 0, 0])
            version[0] += downloads
            version[1] += 1
            version[2] = build.number  # ascending: the last is the newest
        # The most downloaded first; a tie as the upstream orders it, the newest build's first.
        ranked = sorted(versions.items(), key=lambda item: (-item[1][0], -item[1][2]))
        return SelectionCounts(
            by_build,
            by_day,
            [VersionDownloads(name, downloads, builds) for name, (downloads, builds, _) in ranked],
            len({self.download_url(project, build) for build in selected}),
        )

    def download_stats(
        self, project: Project, sums: "SelectionCounts", started, channel, experimental, days, now
    ) -> bytes:
        """/downloads/stats: the downloads of `project`'s builds passing the filters (their
        `sums`, counted since the day `started`), in all, by day over the `days` days ending
        with `now`'s (UTC), by game version and by build."""
        selected = project.select(channel, experimental)
        today = datetime.datetime.fromtimestamp(now, datetime.UTC).date()
        daily = [
            (today - datetime.timedelta(days=back)).isoformat() for back in range(days - 1, -1, -1)
        ]
        stats = DownloadStats(
            project.slug, channel, experimental, days, _iso_milliseconds(now),
            sum(sums.by_build.values()),
            [DayDownloads(day, sums.by_day.get(day, 0)) for day in daily],
            sums.versions, started, 0, len(selected), sums.tracked_urls, False, False,
            [BuildDownloads(build.number, sums.by_build.get(build.number, 0))
             for build in selected],
        )  # fmt: skip
        body = msgspec.to_builtins(stats)
        if self.mode:  # exactly the upstream's fields
            for key in SPEC_ONLY_STATS:
                del body[key]
        return encode(body)


class SelectionCounts(typing.NamedTuple):
    """The downloads of a selection of a project's builds, as of one tally."""

    by_build: dict[int, int]  # build number -> downloads ever, of the builds counted
    by_day: dict[str, int]  # 'YYYY-MM-DD' -> downloads, of every day counted
    versions: list  # VersionDownloads, the most downloaded first
    tracked_urls: int  # distinct downloadUrls of the selection


def schemas(mode: str | None = None) -> dict:
    """The OpenAPI schemas of what the API serves, as `mode` serves it: Project, Build and
    Commit with the fields served in `mode`, the health report and the downloads counted.
    Every field is required, no other field allowed."""
    _, components = msgspec.json.schema_components(
        (Project, Build, Health, Downloads, DownloadStats, FileDownload), ref_template=SCHEMA_REF
    )
    del components[VersionInfo.__name__]  # a data file's, never served: Project.versions
    for name, schema in components.items():
        schema.pop("title", None)
        if "description" in schema:  # a docstring, its lines joined
            schema["description"] = " ".join(schema["description"].split())
        struct = {"Project": Project, "Build": Build, "Commit": Commit}.get(name)
        if struct is not None:
            keys = [field.encode_name for field in served_fields(struct, mode)]
            schema["properties"] = {key: schema["properties"][key] for key in keys}
        for prop in schema["properties"].values():
            prop.pop("default", None)
        if name == "Build" and mode:
            schema["properties"] = {**upstream.BUILD_FIELD_SCHEMAS, **schema["properties"]}
        if name == "DownloadStats" and mode:
            for key in SPEC_ONLY_STATS:
                del schema["properties"][key]
        with_optional = struct or {"Health": Health, "FileDownload": FileDownload}.get(name)
        fields = msgspec.structs.fields(with_optional) if with_optional else ()
        optional = {f.encode_name for f in fields if f.default is msgspec.UNSET}
        optional &= schema["properties"].keys()
        schema["required"] = [key for key in schema["properties"] if key not in optional]
        if optional and name != "Health":  # served together or not at all
            schema["dependentRequired"] = {
                key: sorted(optional - {key}) for key in sorted(optional)
            }
        schema["additionalProperties"] = False
        if name == "Build" and not mode:
            schema["properties"]["downloads"] = BUILD_DOWNLOADS
    return components


# The downloads counted: what fills their shapes (count_shapes.py) from a Tally.
_VERSION = re.compile(r"(?<![0-9])[0-9]+\.[0-9]+(?:\.[0-9]+)?")
UNKNOWN_VERSION = "Unknown"  # the upstream's, for a channel without one


@functools.lru_cache(maxsize=1024)  # a project has few channels, and each has many builds
def game_version(channel: str) -> str:
    """The game version of a channel: its first N.N or N.N.N (UNKNOWN_VERSION without one)."""
    found = _VERSION.search(channel)
    return found[0] if found else UNKNOWN_VERSION


def _build_downloads(tally: Tally, project: Project, builds, day=None) -> dict[int, int]:
    """{number: downloads} of those of `builds` counted, ever or on `day` ('YYYY-MM-DD')."""
    counted = tally.builds(project.slug)
    if not counted:
        return {}
    found = {}
    for build in builds:
        days = counted.get(build.number)
        if days:
            found[build.number] = days.get(day, 0) if day else sum(days.values())
    return found


def _iso_milliseconds(seconds: float) -> str:
    """A UTC time as the upstream writes it (JavaScript's toISOString)."""
    whole = int(seconds)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + (
        f".{int((seconds - whole) * 1000):03d}Z"
    )
