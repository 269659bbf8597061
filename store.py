"""The data directory as an immutable, indexed snapshot, reloaded when its files change.

One project per file, ``<slug>.json``. Nothing here knows about HTTP: the server asks a
`Snapshot` questions and gets plain values or ``None`` back.
"""

import errno
import gc
import hashlib
import json
import logging
import os
import re
import stat
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from itertools import chain, islice
from operator import attrgetter, lt

import msgspec

import javadoc

log = logging.getLogger(__name__)

SLUG_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]*\Z")
# A channel becomes a path segment of the javadoc redirect, so it may hold no '/', '%', '?'...
CHANNEL_PATTERN = re.compile(r"[A-Za-z0-9._+-]+\Z")
HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
HEX_BYTES = b"0123456789abcdefABCDEF"
# Absolute http(s) URLs of URI characters only (RFC 3986): they are served as they are and
# javadocBaseUrl becomes a Location header. Other characters must be percent-encoded.
# Both letter cases spelled out: IGNORECASE would let the Kelvin sign match 'k' (and long s
# 's', dotless i 'i'), and costs 70% more per URL.
URL_PATTERN = re.compile(
    r"[Hh][Tt][Tt][Pp][Ss]?://(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])"
    r"(?::[0-9]{1,5})?(?:[/?#][A-Za-z0-9\-._~%!$&'()*+,;=:@/?#]*)?\Z"
)
URL_RULE = "must be an absolute http(s) URL of ASCII letters, digits and URL punctuation"

PROJECT_KEYS = {"slug", "ciJob", "ciJobUrl", "javadocBaseUrl", "javadocPagePrefix", "builds"}
REQUIRED_PROJECT_KEYS = PROJECT_KEYS - {"slug", "javadocPagePrefix"}
BUILD_KEYS = {
    "buildNumber",
    "url",
    "downloadUrl",
    "channelVersion",
    "timestamp",
    "isExperimental",
    "commits",
}
COMMIT_KEYS = {"message", "hash"}
AUTHORED_COMMIT_KEYS = COMMIT_KEYS | {"author"}  # served only in the upstream compat mode
LEGACY_BUILD_KEYS = {"commit"}  # accepted and dropped: never served
# JSON's \ud800 escape decodes to a lone surrogate, which has no UTF-8: it could not be served.
SURROGATE = re.compile("[\ud800-\udfff]")
# Deeper than this is reported (a project file needs 5 levels); Python's parser stops near 1,000.
NESTING_SHOWN = 100


def printable(name):
    """A file name or path as one printable line, whatever bytes the file system gave.

    Control characters (a newline would forge a log line), bytes that are not UTF-8 (they
    cannot be encoded into JSON) and backslashes (so the escapes stay unambiguous) are escaped.
    """
    if name.isprintable() and "\\" not in name:
        return name
    return "".join(ch if ch.isprintable() and ch != "\\" else _escaped(ch) for ch in name)


def _escaped(char):
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte, as os.fsdecode keeps it
        return f"\\x{code - 0xDC00:02x}"
    return char.encode("unicode_escape").decode("ascii")


class DataError(Exception):
    """A data file that cannot be served, with where in the file the problem is."""

    def __init__(self, path, message, line=None, column=None, where=None):
        super().__init__(message)
        self.path, self.message = path, message
        self.line, self.column, self.where = line, column, where

    @property
    def name(self):
        """The file's name in its directory, printable (safe in a log line and in JSON)."""
        return printable(os.path.basename(self.path))

    def __str__(self):
        path = printable(os.fspath(self.path))
        if self.line is not None:
            return f"{path}:{self.line}:{self.column}: {self.message}"
        return f"{path}: {self.located()}"

    def located(self):
        """The message with its place in the file, without the file's path."""
        if self.line is not None:
            return f"line {self.line}, column {self.column}: {self.message}"
        if self.where is not None:
            return f"{self.where}: {self.message}"
        return self.message


# Builds and commits are msgspec structs: a large data directory holds hundreds of thousands of
# them, and msgspec decodes a file straight into them, types checked, without a dict per JSON
# object (four times faster than json.loads alone). Field names are the files' keys. They hold
# no reference cycles, so the garbage collector need not track them (gc=False: less memory).
class Commit(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    message: str
    hash: str
    author: str = ""


class Build(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    number: int = msgspec.field(name="buildNumber")
    url: str
    download_url: str = msgspec.field(name="downloadUrl")
    channel: str = msgspec.field(name="channelVersion")
    timestamp: int
    is_experimental: bool = msgspec.field(name="isExperimental")
    commits: tuple[Commit, ...]


@dataclass(frozen=True, eq=False)
class Project:
    """One data file's project; `builds` ascending by number, indexes built once."""

    slug: str
    ci_job: str
    ci_job_url: str
    javadoc_base_url: str
    builds: tuple
    # (channel or None, include experimental) -> builds ascending; None covers all channels.
    _selections: dict = field(repr=False)
    # Inserted between the channel's javadoc root and a page (Reposilite's ".cache/unpack").
    javadoc_page_prefix: str = ""
    loaded_at: float = field(default_factory=time.time)  # when this version was read

    def select(self, channel=None, experimental=False):
        """The builds passing the filters, ascending by number."""
        return self._selections.get((channel, bool(experimental)), ())

    def latest(self, channel=None, experimental=False):
        """The highest-numbered build passing the filters, or None."""
        selected = self.select(channel, experimental)
        return selected[-1] if selected else None


def index_builds(builds):
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


@dataclass(frozen=True, eq=False)
class Snapshot:
    """Everything served at one moment. Never changed: a reload builds a new one."""

    projects: dict  # slug -> Project, in slug order
    # name in the data directory ('.' for the directory itself) -> DataError: what is not
    # served as it is on disk
    errors: dict = field(default_factory=dict)
    loaded_at: float = field(default_factory=time.time)  # when this snapshot replaced the last

    def project(self, slug):
        """The project named `slug` (any letter case), or None."""
        if not slug.isascii():  # str.lower() maps some non-ASCII letters onto ASCII ones
            return None
        return self.projects.get(slug.lower())


# --- validation ------------------------------------------------------------------------------


def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def _unique_keys(pairs):
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        duplicate = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"key {duplicate!r} appears twice in one object")
    return obj


def _position(text, index):
    """(line, column) of `index` in `text`, counted in characters as JSONDecodeError does."""
    return text.count("\n", 0, index) + 1, index - text.rfind("\n", 0, index)


# Only read when a file was refused: strings are skipped so that their content is not taken
# for numbers or brackets.
_STRING_OR_NUMBER = re.compile(r'"(?:[^"\\]+|\\.)*"|-?([0-9]+)(\.[0-9]+)?([eE][-+]?[0-9]+)?')
_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]+|\\.)*"|([\[{])|([\]}])')


def _long_integer(path, text):
    """The DataError for an integer over Python's digit limit, placed at that integer."""
    limit = sys.get_int_max_str_digits()
    for match in _STRING_OR_NUMBER.finditer(text):
        digits = match.group(1)
        if digits and not (match.group(2) or match.group(3)) and len(digits) > limit:
            return DataError(
                path,
                f"an integer of {len(digits)} digits: at most {limit} are allowed",
                *_position(text, match.start()),
            )
    return DataError(path, f"an integer of more than {limit} digits")


def _too_deep(path, text):
    """The DataError for nesting too deep to parse, placed where it passes NESTING_SHOWN."""
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        if match.group(1):
            depth += 1
            if depth > NESTING_SHOWN:
                break
        elif match.group(2):
            depth -= 1
    else:
        return DataError(path, "arrays and objects nested too deeply to read")
    return DataError(
        path,
        f"arrays and objects nested more than {NESTING_SHOWN} levels deep "
        "(a project file needs 5): too deep to read",
        *_position(text, match.start()),
    )


def _text(path, data):
    """`data` (bytes) decoded, or a DataError with line and column."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line_start = data.rfind(b"\n", 0, error.start) + 1
        column = len(data[line_start : error.start].decode("utf-8", "replace")) + 1
        raise DataError(
            path, "not valid UTF-8", data.count(b"\n", 0, error.start) + 1, column
        ) from None


def parse_json(path, data):
    """Decode `data` (bytes) or raise DataError with line and column."""
    return _parse(path, _text(path, data))


def _parse(path, text):
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_reject_constant)
    except json.JSONDecodeError as error:
        raise DataError(path, error.msg, error.lineno, error.colno) from None
    except RecursionError:
        raise _too_deep(path, text) from None
    except ValueError as error:  # from the hooks, which know no position, or int()
        if str(error).startswith("Exceeds the limit"):  # int(): sys.set_int_max_str_digits
            raise _long_integer(path, text) from None
        raise DataError(path, str(error)) from None


def _unicode_problem(name, text):
    """Why a string holding a lone surrogate cannot be served, and where it is in it."""
    index = SURROGATE.search(text).start()
    return (
        f"{name!r} holds a lone surrogate ({text[index].encode('unicode_escape').decode()} "
        f"at character {index + 1}): strings must be valid Unicode"
    )


def _is_url(value):
    return type(value) is str and value.isascii() and URL_PATTERN.match(value) is not None


class _Invalid(Exception):
    """A problem in one build; the caller knows which build and raises a DataError."""


def _check_keys(value, allowed, required):
    keys = value.keys()
    if not (required <= keys <= allowed):
        unknown = sorted(keys - allowed)
        if unknown:
            raise _Invalid(f"unknown key {unknown[0]!r}")
        raise _Invalid(f"missing key {sorted(required - keys)[0]!r}")


def _commit_problem(value):
    if type(value) is not dict:
        return "must be an object with 'message' and 'hash'"
    try:
        _check_keys(value, AUTHORED_COMMIT_KEYS, COMMIT_KEYS)
    except _Invalid as problem:
        return str(problem)
    if type(value["message"]) is not str:
        return "'message' must be a string"
    if type(value.get("author", "")) is not str:
        return "'author' must be a string"
    for key in ("message", "author"):
        if SURROGATE.search(value.get(key, "")):
            return _unicode_problem(key, value[key])
    return "'hash' must be a string of hexadecimal digits"


def _build(value, channels):
    # On the path of every build at every load: exact type checks, no work for messages.
    if type(value) is not dict:
        raise _Invalid("must be an object")
    number = value.get("buildNumber")
    if not (type(number) is int and number >= 0):
        raise _Invalid("'buildNumber' must be an integer >= 0")
    if "gameVersion" in value:
        raise _Invalid("'gameVersion' is the old name: rename it to 'channelVersion'")
    if value.keys() != BUILD_KEYS:
        _check_keys(value, BUILD_KEYS | LEGACY_BUILD_KEYS, BUILD_KEYS)
    url, download_url = value["url"], value["downloadUrl"]
    if not _is_url(url):
        raise _Invalid(f"'url' {URL_RULE}")
    if not _is_url(download_url):
        raise _Invalid(f"'downloadUrl' {URL_RULE}")
    channel = value["channelVersion"]
    if type(channel) is not str or channel not in channels:  # a list or dict is unhashable
        if not (type(channel) is str and CHANNEL_PATTERN.match(channel)):
            raise _Invalid(
                "'channelVersion' must be a non-empty string of letters, digits and . _ + -"
            )
        # Thousands of builds share a handful of channels: check each once, store it once.
        channels[channel] = channel
    if type(value["timestamp"]) is not int:
        raise _Invalid("'timestamp' must be an integer")
    if type(value["isExperimental"]) is not bool:
        raise _Invalid("'isExperimental' must be true or false")
    if type(value["commits"]) is not list:
        raise _Invalid("'commits' must be an array")
    commits = []
    for commit in value["commits"]:
        if type(commit) is dict and (
            commit.keys() == COMMIT_KEYS or commit.keys() == AUTHORED_COMMIT_KEYS
        ):
            message, commit_hash = commit["message"], commit["hash"]
            author = commit.get("author", "")
            if (
                type(message) is str
                and (message.isascii() or not SURROGATE.search(message))
                and type(commit_hash) is str
                and commit_hash
                and HEX_DIGITS.issuperset(commit_hash)
                and type(author) is str
                and (author.isascii() or not SURROGATE.search(author))
            ):
                commits.append(Commit(message, commit_hash, author))
                continue
        raise _Invalid(f"commits[{len(commits)}]: {_commit_problem(commit)}")
    return Build(
        number,
        url,
        download_url,
        channels[channel],
        value["timestamp"],
        value["isExperimental"],
        tuple(commits),
    )


def _build_place(index, value):
    number = value.get("buildNumber") if type(value) is dict else None
    if type(number) is int and number >= 0:
        return f"build {number} (builds[{index}])"
    return f"builds[{index}]"


def _project_problem(doc, slug):
    """What is wrong with the file's own fields (its builds aside), or None."""
    if not isinstance(doc, dict):
        return "the file must hold a JSON object"
    try:
        _check_keys(doc, PROJECT_KEYS, REQUIRED_PROJECT_KEYS)
    except _Invalid as problem:
        return str(problem)
    if doc.get("slug", slug) != slug:
        return f"'slug' is {doc['slug']!r} but the file name says {slug!r}"
    if not (isinstance(doc["ciJob"], str) and doc["ciJob"]):
        return "'ciJob' must be a non-empty string"
    if SURROGATE.search(doc["ciJob"]):
        return _unicode_problem("ciJob", doc["ciJob"])
    for key in ("ciJobUrl", "javadocBaseUrl"):
        if not _is_url(doc[key]):
            return f"{key!r} {URL_RULE}"
    if "?" in doc["javadocBaseUrl"] or "#" in doc["javadocBaseUrl"]:
        return (
            "'javadocBaseUrl' must have no query or fragment: the channel's page is added "
            "to its path"
        )
    page_prefix = doc.get("javadocPagePrefix", "")
    if not isinstance(page_prefix, str):
        return "'javadocPagePrefix' must be a string, e.g. \".cache/unpack\""
    problem = javadoc.path_problem(page_prefix) if page_prefix else None
    if problem is not None or len(page_prefix) > javadoc.MAX_PAGE_LENGTH:
        return (
            f"'javadocPagePrefix' {problem or 'is too long'}: give a relative path such as "
            '".cache/unpack"'
        )
    if not isinstance(doc["builds"], list):
        return "'builds' must be an array"
    return None


def parse_project(path, slug, data, quick=True):
    """Validate one file's bytes into a Project, or raise DataError.

    `quick=False` skips the fast path: it decodes a file in one call that holds the
    interpreter lock throughout (a second for 200 MB), which a server already answering
    requests should not do.
    """
    if not SLUG_PATTERN.match(slug):
        raise DataError(
            path,
            f"'{printable(slug)}' is not a project slug: name the file "
            "<slug>.json, the slug made of a-z, 0-9, '.', '_' and '-', starting "
            "with a-z or 0-9",
        )
    text = _text(path, data)
    # Nearly every file is valid: checked whole, fast. Any doubt (a problem, a legacy key, a
    # key possibly written twice) and the file is read again, build by build, for the message.
    return (quick and _fast_project(slug, text)) or _checked_project(path, slug, _parse(path, text))


def _checked_project(path, slug, doc):
    problem = _project_problem(doc, slug)
    if problem is not None:
        raise DataError(path, problem)
    builds, channels = [], {}
    for index, value in enumerate(doc["builds"]):
        try:
            builds.append(_build(value, channels))
        except _Invalid as problem:
            raise DataError(path, str(problem), where=_build_place(index, value)) from None
    builds.sort(key=attrgetter("number"))
    for earlier, later in zip(builds, builds[1:]):
        if earlier.number == later.number:
            raise DataError(
                path, "buildNumber appears more than once", where=f"build {later.number}"
            )
    builds = tuple(builds)
    return Project(
        slug,
        doc["ciJob"],
        doc["ciJobUrl"],
        doc["javadocBaseUrl"],
        builds,
        index_builds(builds),
        doc.get("javadocPagePrefix", ""),
    )


# --- the fast path: the same rules, checked on the whole file at once ---------------------------
# A Python call per JSON object (the duplicate-key hook) and per build made loading take 4 times
# as long as json.load. Here msgspec checks the shape and the types while it decodes, and the
# remaining rules run as loops in C (map, set, join) over all builds. A file is accepted only when
# every rule above visibly holds, so whatever this accepts, _checked_project accepts with the
# same result; anything else (a problem, a legacy key, a key maybe written twice, an integer
# over 64 bits) goes to _checked_project, which finds the message.


class _File(msgspec.Struct, forbid_unknown_fields=True):
    ciJob: str
    ciJobUrl: str
    javadocBaseUrl: str
    builds: list[Build]
    slug: str | msgspec.UnsetType = msgspec.UNSET


_decode_file = msgspec.json.Decoder(_File).decode
_number, _url, _download_url = attrgetter("number"), attrgetter("url"), attrgetter("download_url")


def _fast_project(slug, text):
    """The file's Project if it is plainly valid, else None."""
    try:
        doc = _decode_file(text)
    except (msgspec.DecodeError, ValueError, RecursionError):  # the slow path says what
        return None
    builds = doc.builds
    numbers = list(map(_number, builds))
    urls = list(map(_url, builds)) + list(map(_download_url, builds))
    all_urls = "".join(urls)
    commits = list(chain.from_iterable(map(attrgetter("commits"), builds)))
    if any(map(attrgetter("author"), commits)):
        return None  # authors are rare: the build-by-build checks take them
    messages = "".join(map(attrgetter("message"), commits))
    hashes = list(map(attrgetter("hash"), commits))
    all_hashes = "".join(hashes)
    in_order = all(map(lt, numbers, islice(numbers, 1, None)))  # files are mostly in order
    fields = {k: v for k, v in msgspec.structs.asdict(doc).items() if v is not msgspec.UNSET}
    if not (
        _project_problem(fields, slug) is None
        and min(numbers, default=0) >= 0
        and (in_order or len(set(numbers)) == len(numbers))
        and all_urls.isascii()
        and all(map(URL_PATTERN.match, urls))
        and all(map(CHANNEL_PATTERN.match, set(map(attrgetter("channel"), builds))))
        and "" not in hashes
        and all_hashes.isascii()
        and not all_hashes.encode().translate(None, HEX_BYTES)
        and (messages.isascii() or not SURROGATE.search(messages))
    ):
        return None
    # Duplicate keys without a hook: outside strings, JSON has one ':' per key written, so more
    # of them than the keys read means a key written twice. An escaped ':' (\u003a) would skew
    # the count: such a file takes the slow path.
    keys = (
        4
        + (doc.slug is not msgspec.UNSET)
        + len(builds) * len(BUILD_KEYS)
        + len(commits) * len(COMMIT_KEYS)
    )
    colons = (
        all_urls.count(":")
        + messages.count(":")
        + doc.ciJob.count(":")
        + doc.ciJobUrl.count(":")
        + doc.javadocBaseUrl.count(":")
    )
    if text.count(":") - colons != keys or ("\\" in text and "\\u003" in text):
        return None
    # Thousands of builds share a handful of channels: keep one string of each, as _build does
    # (5 MB at 100,000 builds). The builds are new and seen by no one else yet.
    channels = {}
    for build in builds:
        channel = channels.setdefault(build.channel, build.channel)
        if channel is not build.channel:
            msgspec.structs.force_setattr(build, "channel", channel)
    builds = tuple(builds) if in_order else tuple(sorted(builds, key=_number))
    return Project(slug, doc.ciJob, doc.ciJobUrl, doc.javadocBaseUrl, builds, index_builds(builds))


# --- the directory ----------------------------------------------------------------------------

# A data file larger than this is refused unread: memory stays bounded whatever is dropped in.
MAX_FILE_BYTES = 1 << 30


def data_files(directory):
    """{slug: path} of the project files in `directory`: names ending in .json, not hidden.

    Whatever kind of file a name is (FIFO, directory, dangling link), it is listed here and
    refused when read, so that /healthz tells why it is not served.
    """
    files = {}
    for entry in os.scandir(directory):
        slug, ext = os.path.splitext(entry.name)
        if ext == ".json" and not slug.startswith("."):
            files[slug] = entry.path
    return files


def stamp(path):
    """What tells a changed file from an unchanged one without reading it (as linecache)."""
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size, st.st_ino


def read_regular_file(path):
    """The bytes and stat of the regular file at `path`; never blocks on a FIFO or device."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if st.st_size > MAX_FILE_BYTES:
            raise OSError(errno.EFBIG, f"larger than {MAX_FILE_BYTES >> 20} MiB")
        chunks, size = [], 0
        while chunk := os.read(fd, max(st.st_size - size + 1, 1 << 16)):
            size += len(chunk)
            if size > MAX_FILE_BYTES:
                raise OSError(errno.EFBIG, f"larger than {MAX_FILE_BYTES >> 20} MiB")
            chunks.append(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def check_directory(directory):
    """Every DataError in `directory`, in file order: the --check command."""
    problems = []
    for slug, path in sorted(data_files(directory).items()):
        try:
            parse_project(path, slug, read_regular_file(path)[0])
        except DataError as error:
            problems.append(error)
        except OSError as error:
            problems.append(DataError(path, error.strerror or str(error)))
    return problems


# A file changed again within the file system's timestamp granularity after we read it would
# keep its stamp: a file this young is read again (git's "racy clean" problem).
RACY_NS = 2_000_000_000
# How long one check waits for a file before going on without it. A file still being read
# then (a hung network mount, a huge parse) keeps its last good version and is reported as
# stalled; its read goes on, and is picked up by a later check when it completes.
READ_WAIT = 1.0
# The first load waits longer: a large data directory takes seconds to parse.
STARTUP_WAIT = 60.0
READER_THREADS = 1
# While requests are served, a larger file is parsed by the path that lets other threads run
# (parse_project's quick=False). The quick path holds the interpreter lock about 5 ms a MiB,
# so this bounds that pause to half a second; the other path costs more memory (its parse
# leaves the heap fragmented), so it is kept for the files that need it.
QUICK_RELOAD_BYTES = 100 << 20


@dataclass(frozen=True)
class _Loaded:
    """What the store remembers of one file between checks."""

    stamp: tuple
    digest: bytes
    racy: bool
    project: Project = None  # the last good version, kept while the file is broken
    error: DataError = None


class Store:
    """Serves the current Snapshot and replaces it when the data files change.

    `snapshot()` only returns the current snapshot: requests never read files. A watcher
    thread (`start()`) checks the files every `check_interval` seconds; `refresh()` checks
    now. Reads run on a reader thread with a deadline, so one file that hangs (a hung
    mount) or parses slowly never stops the others from reloading: a check goes on without
    it, and the next reads get a fresh reader thread.
    """

    def __init__(
        self, directory, check_interval=1.0, read_wait=READ_WAIT, startup_wait=STARTUP_WAIT
    ):
        self.directory = os.fspath(directory)
        self.check_interval = check_interval
        self.read_wait = read_wait
        self._reload_lock = threading.Lock()
        self._files = {}  # slug -> _Loaded
        self._directory_error = None
        self._snapshot = Snapshot({})
        self._readers = ThreadPoolExecutor(READER_THREADS, "buildshelf-read")
        self._reading = {}  # slug, or "." for the listing -> (future, monotonic start)
        self._stalled_before = set()  # keys still being read at the end of the last check
        self._check_started = None  # monotonic time of the check under way, if any
        self.last_check = None  # wall-clock time the last check ended
        self._serving = False  # once requests may come: big files are parsed politely then
        self._stopping = threading.Event()
        self._watcher = None
        with self._reload_lock:
            self._refresh_locked(startup_wait)
        self._serving = True

    def snapshot(self):
        """The current snapshot: never waits, never touches a file."""
        return self._snapshot

    def refresh(self):
        """Check the files now and reload what changed; returns the current snapshot."""
        with self._reload_lock:
            self._refresh_locked(self.read_wait)
        return self._snapshot

    def start(self):
        """Check the files every `check_interval` seconds on a thread of its own."""
        self._watcher = threading.Thread(target=self._watch, name="buildshelf-reload", daemon=True)
        self._watcher.start()

    def stop(self):
        self._stopping.set()
        if self._watcher:
            self._watcher.join()
        self._readers.shutdown(wait=False, cancel_futures=True)

    def _watch(self):
        while not self._stopping.wait(self.check_interval):
            try:
                self.refresh()
            except Exception:  # a bug here must not end reloading for good
                log.exception("checking the data files failed; trying again")

    def progress(self):
        """(seconds the check under way has taken, or None; {file name: seconds} of the reads
        that have outlasted `read_wait`)."""
        now = time.monotonic()
        started = self._check_started
        stalled = {
            printable(key if key == "." else key + ".json"): now - since
            for key, (future, since) in list(self._reading.items())
            if now - since > self.read_wait and not future.done()
        }
        return (None if started is None else now - started), stalled

    def _start_reading(self, key, work, *args):
        """The read of `key` under way, or a new one: a stalled read is never started twice."""
        reading = self._reading.get(key)
        if reading is None or reading[0].cancelled():  # cancelled: queued behind a stalled one
            self._reading[key] = (self._readers.submit(work, *args), time.monotonic())
        return self._reading[key][0]

    def _finish_reading(self, futures, deadline):
        """Wait until `deadline` for `futures` ({key: future}); the keys of those done."""
        # Only reads started by this check are waited for: one that stalled before is taken
        # if it has finished, never waited for again, so it slows no later check.
        wait(
            [future for key, future in futures.items() if key not in self._stalled_before],
            timeout=max(0.0, deadline - time.monotonic()),
        )
        stalled = {key for key, future in futures.items() if not future.done()}
        done = futures.keys() - stalled
        for key in done:
            del self._reading[key]
        if stalled - self._stalled_before:
            # A reader that hangs may never come back: later reads get a fresh thread. Reads
            # queued behind it are cancelled, and started again by the next check.
            log.warning(
                "still reading %s; serving the last good data meanwhile",
                ", ".join(sorted(map(printable, stalled))),
            )
            self._readers.shutdown(wait=False, cancel_futures=True)
            self._readers = ThreadPoolExecutor(READER_THREADS, "buildshelf-read")
        self._stalled_before = (self._stalled_before - futures.keys()) | stalled
        return {key for key in done if not futures[key].cancelled()}

    def _refresh_locked(self, wait_seconds):
        self._check_started = time.monotonic()
        try:
            self._check(self._check_started + wait_seconds)
        finally:
            self._check_started = None
            self.last_check = time.time()

    def _check(self, deadline):
        listing = {".": self._start_reading(".", data_files, self.directory)}
        if not self._finish_reading(listing, deadline):
            return  # the listing itself hangs: keep everything as it is
        try:
            paths = listing["."].result()
        except OSError as error:
            # Say, a directory swapped away mid-deploy: keep serving what we have.
            if self._directory_error is None:
                log.error(
                    "cannot read data directory %s: %s (still serving the last data)",
                    printable(self.directory),
                    error.strerror,
                )
                self._directory_error = DataError(self.directory, error.strerror)
                self._publish()
            return
        # Parsing makes a great many objects that all live on: collecting in the middle of it
        # finds no garbage and costs a third of the load time.
        gc_enabled = gc.isenabled()
        gc.disable()
        try:
            reads = {
                slug: self._start_reading(
                    slug, self._load, slug, path, self._files.get(slug), self._serving
                )
                for slug, path in paths.items()
            }
            done = self._finish_reading(reads, deadline)
        finally:
            if gc_enabled:
                gc.enable()
        files = {}
        for slug in paths:
            if slug in done:
                files[slug] = reads[slug].result()
            elif slug in self._files:  # stalled or cancelled: as it was until it is read
                files[slug] = self._files[slug]
        for slug in self._files.keys() - paths.keys():
            log.info("project %s removed: its file is gone", printable(slug))
        changed = (
            self._directory_error is not None
            or files.keys() != self._files.keys()
            or any(
                (loaded.project, loaded.error)
                != (self._files[slug].project, self._files[slug].error)
                for slug, loaded in files.items()
            )
        )
        self._files, self._directory_error = files, None
        if changed:
            self._publish()

    def _publish(self):
        files = self._files
        projects = {slug: files[slug].project for slug in sorted(files) if files[slug].project}
        errors = {loaded.error.name: loaded.error for loaded in files.values() if loaded.error}
        if self._directory_error:
            errors["."] = self._directory_error
        self._snapshot = Snapshot(projects, errors, time.time())

    @staticmethod
    def _load(slug, path, known, serving):
        """The file at `path` as a _Loaded, given what was `known` of it (on a reader thread)."""
        try:
            return Store._read(slug, path, known, serving)
        except Exception as error:  # a bug must cost one file, never the reloading of all
            log.exception("reading %s failed", printable(path))
            return _Loaded(
                (),
                b"",
                False,
                known and known.project,
                DataError(path, f"could not be read ({type(error).__name__})"),
            )

    @staticmethod
    def _read(slug, path, known, serving):
        try:
            if known and not known.racy and known.stamp == stamp(path):
                return known
            data, st = read_regular_file(path)
        except OSError as error:  # deleted, unreadable, or not a regular file
            error = DataError(path, error.strerror or str(error))
            if not (known and known.error and known.error.message == error.message):
                log.error("%s", error)
            return _Loaded((), b"", False, known and known.project, error)
        file_stamp = st.st_mtime_ns, st.st_size, st.st_ino
        racy = time.time_ns() - st.st_mtime_ns < RACY_NS
        # A fingerprint, not a defence: SHA-1 is the fastest digest here (hardware-assisted).
        digest = hashlib.sha1(data, usedforsecurity=False).digest()
        if known and known.digest == digest:  # touched, or rewritten with the same bytes
            return _Loaded(file_stamp, digest, racy, known.project, known.error)
        started = time.perf_counter()
        try:
            project = parse_project(
                path, slug, data, quick=not serving or len(data) <= QUICK_RELOAD_BYTES
            )
        except DataError as error:
            kept = known and known.project
            log.error(
                "%s (%s)", error, "still serving its last good version" if kept else "not served"
            )
            return _Loaded(file_stamp, digest, racy, kept, error)
        log.info(
            "%s %s: %d builds in %.0f ms",
            "reloaded" if known else "loaded",
            slug,
            len(project.builds),
            (time.perf_counter() - started) * 1000,
        )
        return _Loaded(file_stamp, digest, racy, project)
