"""What the data is: projects, builds and commits, the rules their values follow, and the
selections of builds a query can ask for.

Each type is declared once here and read in three ways: the data files decode into it
(`datafile.py`), the API's JSON is made from its served fields, and the OpenAPI schemas come
from the same declaration (`shapes.py`). A field's description is the schema's.
"""

import bisect
import re
import time
from operator import attrgetter
from typing import Annotated
from urllib.parse import unquote, urlsplit

import msgspec

SLUG_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]*\Z")
# A channel becomes a path segment of the javadoc redirect, so it may hold no '/', '%', '?'...
CHANNEL_PATTERN = re.compile(r"[A-Za-z0-9._+-]+\Z")
HASH_PATTERN = re.compile(r"[0-9a-fA-F]+\Z")
SHA256_PATTERN = re.compile(r"[0-9a-f]{64}\Z")
# The digits of the two patterns above, spelt out for checks of many values at once.
HASH_DIGITS = "0123456789abcdefABCDEF"
SHA256_DIGITS = HASH_DIGITS[:16]
# A kept file's name: it ends its download URL and names the file clients save.
FILE_NAME_PATTERN = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]{0,199}\Z")
FILE_NAME_RULE = (
    "must be ASCII letters, digits and . _ + -, not start with a dot, and be at most 200 characters"
)
# An extra file's key in a build's `downloads`: its kind and variant, as Fill keys a build's
# files by role ("server:mojmap"). The primary file is the build's own, always PRIMARY_KEY.
DOWNLOAD_KEY_PATTERN = re.compile(r"[a-z0-9-]+:[a-z0-9-]+\Z")
DOWNLOAD_KEY_RULE = (
    "must be kind:variant, each of lowercase letters, digits and -, such as server:mojmap"
)
PRIMARY_KEY = "server:default"
# The extra files one publish may give (--extra-file, --extra-url, the parts download:KEY
# of an HTTP upload and its JSON's `downloads`): an upload's parts are bounded. A data file
# may hold more.
MAX_PUBLISHED_EXTRAS = 16
# Absolute http(s) URLs of URI characters only (RFC 3986): they are served as they are and
# javadocBaseUrl becomes a Location header. Other characters must be percent-encoded.
# Both letter cases spelled out: IGNORECASE would let the Kelvin sign match 'k' (and long s
# 's', dotless i 'i'), and costs 70% more per URL.
URL_PATTERN = re.compile(
    r"[Hh][Tt][Tt][Pp][Ss]?://(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])"
    r"(?::[0-9]{1,5})?(?:[/?#][A-Za-z0-9\-._~%!$&'()*+,;=:@/?#]*)?\Z"
)

# The timestamps a build may have: from 1970 to the end of year 9999, the last year that an
# HTTP date, a feed's date and Python's datetime can write. The rule of the data files, of
# every command that writes one, and of what is published (dataformat.timestamp_problem).
LAST_MILLISECOND = 253402300799999  # 9999-12-31T23:59:59.999Z
TIMESTAMPS = range(LAST_MILLISECOND + 1)


def whole_number(text: str) -> int | None:
    """`text` as a whole number of ASCII digits, or None; more than 30 digits is none (int()
    refuses over 4,300, and no build number or size is near 30)."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 30 else None


def file_name_in_url(url: str) -> str:
    """The name a download URL gives its file: the last segment of its path that is not empty,
    percent-decoded; '' when the path has none. A name to show, or to keep the file under once
    FILE_NAME_PATTERN allows it."""
    return unquote(urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1])


def download_key_problem(key: str) -> str | None:
    """Why `key` cannot name an extra file of a build, to follow the key in a message; or
    None."""
    if not DOWNLOAD_KEY_PATTERN.match(key):
        return DOWNLOAD_KEY_RULE
    if key == PRIMARY_KEY:
        return "is the primary file's: the build's own downloadUrl or file is that file"
    return None


def sha256_hex(text: str) -> str | None:
    """`text` as a SHA-256 in lowercase hexadecimal, or None."""
    return text.lower() if SHA256_PATTERN.match(text.lower()) else None


def json_pattern(pattern: re.Pattern) -> str:
    """A whole-string Python pattern as JSON Schema (ECMA-262) writes it."""
    return "^" + pattern.pattern.removesuffix(r"\Z") + "$"


# Field markers: which fields the API serves, and in which mode (shapes.py), and which are
# keys of a data file (dataformat.py).
NOT_SERVED = msgspec.Meta(extra={"served": False})
DERIVED = msgspec.Meta(extra={"served": False, "in_file": False})  # made when a file is read
UPSTREAM_ONLY = "upstream"  # served only in the upstream compat mode (--compat upstream)
HTTP_URL = {"$ref": "#/components/schemas/HttpUrl"}


def _marks(field):
    return getattr(getattr(field.type, "__metadata__", [None])[0], "extra", None) or {}


def file_keys(struct) -> tuple[str, ...]:
    """The keys a data file may give for `struct`, in the order files are written."""
    return tuple(
        f.encode_name for f in msgspec.structs.fields(struct) if _marks(f).get("in_file", True)
    )


def served_fields(struct, mode=None) -> list:
    """The fields of `struct` the API serves in `mode` (None: the spec's), in order."""
    return [
        f for f in msgspec.structs.fields(struct) if _marks(f).get("served", True) in (True, mode)
    ]


def _described(kind, description, served=True, **schema):
    return Annotated[
        kind,
        msgspec.Meta(description=description, extra_json_schema=schema, extra={"served": served}),
    ]


# Builds and commits are msgspec structs: a large data directory holds hundreds of thousands of
# them, and msgspec decodes a file straight into them, types checked, without a dict per JSON
# object (docs/performance.md, "Why loading is fast"). Field names are the files' keys, in the
# order the API serves them. They hold no reference cycles, so the garbage collector need not
# track them (gc=False: less memory).
class Commit(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True, omit_defaults=True):
    """A commit contained in a build."""

    message: _described(str, "The commit message.")
    hash: _described(str, "The commit hash, hexadecimal.", pattern=json_pattern(HASH_PATTERN))
    author: _described(
        str,
        'The commit\'s author as the data file gives it; `""` when it gives none.',
        served=UPSTREAM_ONLY,
    ) = ""


_pack_commits = msgspec.json.Encoder().encode
_read_commits = msgspec.json.Decoder(tuple[Commit, ...]).decode


class Commits:
    """A build's commits as a snapshot keeps them: their JSON in one bytes object (`json`,
    `[{"message","hash"}]`, "author" only where given), read back as the tuple of Commit they
    are whenever they are asked for. The same 300,000 commits take 37 MB so, and took 82 MB
    as Commit objects (issue 34); the JSON lists are served from it as they are."""

    __slots__ = ("json",)

    def __init__(self, commits: tuple[Commit, ...]):
        self.json = _pack_commits(commits)

    def __iter__(self):
        return iter(_read_commits(self.json))

    def __len__(self) -> int:
        return len(_read_commits(self.json))

    def __getitem__(self, index):
        return _read_commits(self.json)[index]

    def __eq__(self, other) -> bool:
        if isinstance(other, Commits):
            return self.json == other.json
        return isinstance(other, tuple) and tuple(self) == other

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Commits({tuple(self)!r})"

    @property
    def authored(self) -> bool:
        """Whether a commit names its author. A key is the only place where `,"author":`
        can be written: in a string, each quote is escaped."""
        return b',"author":' in self.json


class Download(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True, kw_only=True):
    """An extra file of a build, under its key in the build's `downloads`: by the primary
    file's rules, kept (`file`, `sha256`, `size`) or elsewhere (`downloadUrl`, maybe with
    `sha256` and `size`). Its fields are its keys, in the order files are written."""

    download_url: str = msgspec.field(default="", name="downloadUrl")
    sha256: str | msgspec.UnsetType = msgspec.UNSET
    size: int | msgspec.UnsetType = msgspec.UNSET
    file: str | msgspec.UnsetType = msgspec.UNSET

    @property
    def hosted(self) -> bool:
        """Whether Buildshelf keeps this file (its artifact store has the bytes)."""
        return self.file is not msgspec.UNSET

    @property
    def file_name(self) -> str:
        """The file's name: the kept file's, else the one its downloadUrl gives ('' when that
        gives none)."""
        return self.file if self.hosted else file_name_in_url(self.download_url)


# Keyword-only: a kept file's build has no downloadUrl in its file, so the field has a default
# ("") before fields that have none, which msgspec allows only so.
class Build(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True, kw_only=True):
    """A build, with exactly these fields in this order; the deprecated `commit` is not served."""

    number: _described(int, "The build's number, unique in its project.", minimum=0) = (
        msgspec.field(name="buildNumber")
    )
    url: _described(str, "The address of the CI run of this build.", **HTTP_URL)
    download_url: _described(str, "The address of the build's artifact.", **HTTP_URL) = (
        msgspec.field(default="", name="downloadUrl")
    )
    channel: _described(
        str,
        "The channel the build belongs to: what `channel` selects, and part of the javadoc "
        "address.",
        pattern=json_pattern(CHANNEL_PATTERN),
    ) = msgspec.field(name="channelVersion")
    timestamp: _described(
        int,
        "The time of the build, exactly as the data file gives it (the sample data uses "
        "epoch milliseconds); none is after year 9999.",
        minimum=TIMESTAMPS.start,
        maximum=TIMESTAMPS.stop - 1,
    )
    is_experimental: _described(bool, "Whether the build is experimental (else stable).") = (
        msgspec.field(name="isExperimental")
    )
    # Decoded as a tuple; the builds of a data file's Project hold them packed (Commits), which
    # reads as the same tuple.
    commits: _described(tuple[Commit, ...], "The commits in the build; may be empty.")
    # Integrity data: both or neither; a hosted build has them and its file's name instead of
    # a downloadUrl in its file (the server makes its downloadUrl).
    sha256: _described(
        str | msgspec.UnsetType,
        "The artifact's SHA-256, 64 lowercase hexadecimal digits; with `size`, only on builds "
        "that have integrity data.",
        pattern=json_pattern(SHA256_PATTERN),
    ) = msgspec.UNSET
    size: _described(
        int | msgspec.UnsetType, "The artifact's size in bytes; with `sha256`.", minimum=0
    ) = msgspec.UNSET
    file: Annotated[str | msgspec.UnsetType, NOT_SERVED] = msgspec.UNSET
    # The yank mark: when it was yanked (epoch milliseconds) and why. A yanked build stays in
    # its file, so that `unyank` can bring it back, but is served nowhere.
    yanked_at: Annotated[int | msgspec.UnsetType, NOT_SERVED] = msgspec.field(
        default=msgspec.UNSET, name="yankedAt"
    )
    yank_reason: Annotated[str, NOT_SERVED] = msgspec.field(default="", name="yankReason")

    @property
    def downloads(self) -> "dict[str, Download] | msgspec.UnsetType":
        """The build's extra files by key, in the file's order: none (UNSET) but for a
        BuildWithExtras."""
        return msgspec.UNSET

    @property
    def yanked(self) -> bool:
        return self.yanked_at is not msgspec.UNSET

    @property
    def hosted(self) -> bool:
        """Whether Buildshelf keeps this build's file (its artifact store has the bytes)."""
        return self.file is not msgspec.UNSET

    @property
    def file_name(self) -> str:
        """The name of the build's file: the kept file's, else the one its downloadUrl gives
        ('' when that gives none)."""
        return self.file if self.hosted else file_name_in_url(self.download_url)

    @property
    def files(self) -> tuple[tuple[str, "Kept"], ...]:
        """(key, file) of each of the build's files, with its `file` (if kept), `sha256`,
        `size` and `file_name`: the primary (the build itself) first, as PRIMARY_KEY, then
        its extras, in their order."""
        if self.downloads is msgspec.UNSET:
            return ((PRIMARY_KEY, self),)
        return ((PRIMARY_KEY, self), *self.downloads.items())

    @property
    def kept_files(self) -> tuple["Kept", ...]:
        """The build's files Buildshelf keeps (see files), the primary first if kept."""
        if self.downloads is msgspec.UNSET:
            return (self,) if self.hosted else ()
        return tuple(file for _, file in self.files if file.hosted)


Kept = Build | Download  # a kept file: its `file`, `sha256` and `size` (Build.files)


class BuildWithExtras(Build, frozen=True, gc=False, forbid_unknown_fields=True, kw_only=True):
    """A build with extra files (its `downloads`, by key), written last. A type of its own:
    a slot for them on every Build would take 16 bytes more per build (a Build's 112 bytes
    would take 120, in the allocator's size class of 128: 1.6 MB at 100,000 builds), for a
    key nearly every build leaves out."""

    # By key (kind:variant), in the file's order; UNSET only while a file is decoded (the
    # fast path makes a Build of a build without).
    downloads: Annotated[dict[str, Download] | msgspec.UnsetType, NOT_SERVED] = msgspec.UNSET


# What a project file may say of a version (a channelVersion) for the Fill v3 API
# (docs/fill-v3.md): the values Fill's enums take, written once for the data files' rules and
# the API's shapes.
SUPPORT_STATUSES = ("SUPPORTED", "DEPRECATED", "UNSUPPORTED")
EXPERIMENTAL_CHANNELS = ("ALPHA", "BETA")  # the Fill channel of a version's experimental builds
DAY_PATTERN = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")  # and a real day: date.fromisoformat


class VersionInfo(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """What a project file's `versions` block says of one version: each key optional (UNSET
    when absent), its default the Fill v3 mapping's (docs/fill-v3.md)."""

    family: str | msgspec.UnsetType = msgspec.UNSET
    support: str | msgspec.UnsetType = msgspec.UNSET
    support_end: str | msgspec.UnsetType = msgspec.field(default=msgspec.UNSET, name="supportEnd")
    java: int | msgspec.UnsetType = msgspec.UNSET
    java_flags: tuple[str, ...] | msgspec.UnsetType = msgspec.field(
        default=msgspec.UNSET, name="javaFlags"
    )
    experimental_channel: str | msgspec.UnsetType = msgspec.field(
        default=msgspec.UNSET, name="experimentalChannel"
    )


class Project(msgspec.Struct, frozen=True, eq=False, weakref=True, kw_only=True):
    """A project, one data file."""

    slug: _described(
        str,
        "The identifier, the value of the `project` parameter.",
        pattern=json_pattern(SLUG_PATTERN),
    )
    ci_job: _described(str, "The name of the project's CI job.", minLength=1) = msgspec.field(
        name="ciJob"
    )
    ci_job_url: _described(str, "The address of that job.", **HTTP_URL) = msgspec.field(
        name="ciJobUrl"
    )
    # Absent from a file (or "" in it) for a project without javadoc: served "", as the
    # upstream serves such a project.
    javadoc_base_url: _described(
        str,
        'The base address of the project\'s javadoc; `""` for a project without javadoc.',
        anyOf=[HTTP_URL, {"const": ""}],
    ) = msgspec.field(default="", name="javadocBaseUrl")
    # Inserted between the channel's javadoc root and a page (Reposilite's ".cache/unpack").
    javadoc_page_prefix: Annotated[str, NOT_SERVED] = msgspec.field(
        default="", name="javadocPagePrefix"
    )
    # {channelVersion: what the file says of it}, for the Fill v3 API; served there only.
    versions: Annotated[dict[str, VersionInfo], NOT_SERVED] = msgspec.field(default_factory=dict)
    builds: Annotated[tuple[Build, ...], NOT_SERVED] = ()  # served, ascending by number
    yanked: Annotated[tuple[Build, ...], DERIVED] = ()  # the file's yanked builds, ascending
    # (channel or None, include experimental) -> builds ascending; None covers all channels.
    selections: Annotated[dict, DERIVED] = msgspec.field(default_factory=dict)
    # Those that keep a file: their primary, or an extra (Build.kept_files).
    hosted_builds: Annotated[tuple[Build, ...], DERIVED] = ()
    loaded_at: Annotated[float, DERIVED] = msgspec.field(default_factory=time.time)

    @classmethod
    def of(cls, builds: tuple[Build, ...], **fields) -> "Project":
        """The project with these `builds` (ascending by number) and its selections indexed;
        the yanked ones are set apart."""
        yanked = tuple(build for build in builds if build.yanked)
        if yanked:
            builds = tuple(build for build in builds if not build.yanked)
        return cls(
            builds=builds,
            yanked=yanked,
            selections=index_builds(builds),
            hosted_builds=tuple(
                build
                for build in builds
                if build.hosted or (build.downloads is not msgspec.UNSET and build.kept_files)
            ),
            **fields,
        )

    def select(self, channel: str | None = None, experimental: bool = False) -> tuple:
        """The builds passing the filters, ascending by number."""
        return self.selections.get((channel, bool(experimental)), ())

    def build(self, number: int) -> Build | None:
        """The build numbered `number`, or None."""
        index = bisect.bisect_left(self.builds, number, key=_number)
        found = self.builds[index] if index < len(self.builds) else None
        return found if found is not None and found.number == number else None

    def yanked_build(self, number: int) -> Build | None:
        """The yanked build numbered `number`, or None."""
        return next((build for build in self.yanked if build.number == number), None)

    def latest(self, channel: str | None = None, experimental: bool = False) -> Build | None:
        """The highest-numbered build passing the filters, or None."""
        selected = self.select(channel, experimental)
        return selected[-1] if selected else None


_number = attrgetter("number")


SECONDS_BELOW = 10**11  # a timestamp below this is in seconds (in milliseconds it is 1973)


def epoch_seconds(timestamp: int) -> float:
    """A build's timestamp in seconds: files give epoch milliseconds (the Jenkins convention),
    or seconds, which are told apart by size (below 10^11 is seconds: before 1973 in ms)."""
    return timestamp if timestamp < SECONDS_BELOW else timestamp / 1000


def index_builds(builds: tuple[Build, ...]) -> dict:
    """Map every (channel, experimental) filter to its builds, keeping ascending order.

    One pass over the builds, whatever the number of channels. Selections with the same
    builds are the same tuple, so that what is derived from one serves them all.
    """
    by_channel = {}
    for build in builds:
        by_channel.setdefault(build.channel, []).append(build)
    stable = tuple(b for b in builds if not b.is_experimental)
    all_stable = stable if len(stable) < len(builds) else builds
    selections = {(None, True): builds, (None, False): all_stable}
    # A subset as long as the set it is taken from is that set.
    for channel, in_channel in by_channel.items():
        in_channel = builds if len(in_channel) == len(builds) else tuple(in_channel)
        stable = [b for b in in_channel if not b.is_experimental]
        selections[channel, True] = in_channel
        selections[channel, False] = (
            in_channel
            if len(stable) == len(in_channel)
            else all_stable
            if len(stable) == len(all_stable)
            else tuple(stable)
        )
    return selections
