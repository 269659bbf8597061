"""The data files, one project per file, `<slug>.json`, validated by the rules of their
format (dataformat.py) in two ways: whole and fast, or build by build for the messages
(`parse_project`, which remembers the last valid file of each project; `checked_document`
for a document decoded, `checked_build` for one build object); `DataError`, every problem
of a file with its place; a build as a file holds it (`build_document`).

Nothing here knows about HTTP or about reloading: `store.py` reads the directory with these,
`writer.py` writes files these accept.
"""

import hashlib
import os
import re
from itertools import chain, compress, islice, repeat
from operator import attrgetter, eq, is_, lt, not_

import msgspec

from buildshelf.datafiles import dataformat, strictjson
from buildshelf.datafiles.dataformat import (
    COMMIT_KEYS,
    PLAIN_BUILD_KEYS,
    SURROGATE,
    RuleBroken,
    project_problem,
    valid_build,
    version_infos,
)
from buildshelf.datafiles.fast_rules import NO_EXTRAS, extras_hold, given, integrity_holds
from buildshelf.model import (
    CHANNEL_PATTERN,
    HASH_DIGITS,
    SLUG_PATTERN,
    TIMESTAMPS,
    URL_PATTERN,
    Build,
    BuildWithExtras,
    Commits,
    Project,
    VersionInfo,
)
from buildshelf.text import printable

HEX_BYTES = HASH_DIGITS.encode()
# A ':' written as a JSON escape: an odd run of backslashes, then u003a. An even run is
# escaped backslashes, then the letters "u003a".
ESCAPED_COLON = re.compile(r"(?<!\\)(?:\\\\)*\\u003[aA]")


# A file can hold thousands of broken builds: the messages stop here, with a count of the rest.
MAX_PROBLEMS = 20


class DataError(Exception):
    """A data file that cannot be served, with where in the file the problem is; `also` holds
    the file's other problems (MAX_PROBLEMS at most in all), `count` counts them all."""

    def __init__(self, path, message, line=None, column=None, where=None):
        super().__init__(message)
        self.path, self.message = path, message
        self.line, self.column, self.where = line, column, where
        self.also, self.count = (), 1

    @classmethod
    def of_all(cls, problems: list["DataError"]) -> "DataError":
        """The first of `problems` (one file's, in file order), carrying the others."""
        first = problems[0]
        first.also, first.count = problems[1:MAX_PROBLEMS], len(problems)
        return first

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

    def lines(self, located: bool = False) -> list[str]:
        """Every problem, one line each (with the file's path unless `located`), and how
        many more there are."""
        lines = [e.located() if located else str(e) for e in (self, *self.also)]
        if unshown := self.count - len(lines):
            more = f"and {unshown} more problems, not shown"
            lines.append(more if located else f"{printable(os.fspath(self.path))}: {more}")
        return lines


def build_document(
    number, channel, timestamp, experimental, commits, url=None, download_url=None, **given
) -> dict:
    """A build as a data file holds it, its keys in their written order: a file elsewhere at
    `download_url`, or (None) one kept, whose address the server makes; `given` what is
    given of the file's `sha256`, `size` and, for a kept one, its `file` name, and of the
    build's extra files (`downloads`). `url` None: the job run's, which the writer makes
    under the lock."""
    build = {
        "buildNumber": number,
        "url": url,
        "downloadUrl": download_url,
        "channelVersion": channel,
        "timestamp": timestamp,
        "isExperimental": experimental,
        "commits": commits,
    }
    if download_url is None:
        del build["downloadUrl"]
    build.update(
        (key, given[key]) for key in ("sha256", "size", "file", "downloads") if key in given
    )
    return build


def parse_json(path: str, data: bytes):
    """Decode `data` (bytes) strictly or raise DataError with line and column."""
    return _parse(path, _text(path, data))


def _text(path, data):
    try:
        return strictjson.text_of(data)
    except strictjson.Invalid as error:
        raise DataError(path, error.message, error.line, error.column) from None


def _parse(path, text):
    try:
        return strictjson.loads(text)
    except strictjson.Invalid as error:
        raise DataError(path, error.message, error.line, error.column) from None


class InvalidBuild(ValueError):
    """One build object that breaks a rule of the data files: the message says which."""


def checked_build(value) -> Build:
    """One build object (a file's `builds[i]`, say one published over HTTP) checked by the
    data files' rules, as the Build it is served as; InvalidBuild if it breaks one."""
    try:
        return valid_build(value, {})
    except RuleBroken as problem:
        raise InvalidBuild(str(problem)) from None


def _build_place(index, value):
    number = value.get("buildNumber") if type(value) is dict else None
    if type(number) is int and number >= 0:
        return f"build {number} (builds[{index}])"
    return f"builds[{index}]"


def fingerprint(data: bytes) -> bytes:
    """The SHA-1 of a file's bytes: a fingerprint, not a defence (the fastest digest here,
    hardware-assisted), by which the same bytes are known again."""
    return hashlib.sha1(data, usedforsecurity=False).digest()


def parse_project(
    path: str, slug: str, data: bytes, quick: bool = True, digest: bytes | None = None
) -> Project:
    """Validate one file's bytes into a Project, or raise DataError.

    `quick=False` skips the fast path: it decodes a file in one call that holds the
    interpreter lock throughout, which a server already answering requests should not do for
    a large file (store.QUICK_RELOAD_BYTES). It also parses bytes parsed before again.
    """
    if not SLUG_PATTERN.match(slug):
        raise DataError(
            path,
            f"'{printable(slug)}' is not a project slug: name the file "
            "<slug>.json, the slug made of a-z, 0-9, '.', '_' and '-', starting "
            "with a-z or 0-9",
        )
    # The server's watcher reads the bytes a write made (whose Project the writer noted:
    # parses_to), and the next write reads them again: each time the same Project, which a
    # publish over HTTP made three times while holding the interpreter lock (issue 24).
    digest = digest or fingerprint(data)  # the caller's, when it has it
    last = _LAST_VALID.get(slug)
    if quick and last is not None and last[0] == digest:
        return last[1]
    text = _text(path, data)
    # Nearly every file is valid: checked whole, fast. Any doubt (a problem, a legacy key, a
    # key possibly written twice) and the file is read again, build by build, for the message.
    project = (quick and _fast_project(slug, text)) or _checked_project(
        path, slug, _parse(path, text)
    )
    _LAST_VALID[slug] = digest, project
    return project


# slug -> (SHA-1 of the bytes, their Project): the last valid file of each project parsed, or
# written (parses_to), in this process. A Project is made of the slug and the bytes alone, and
# never changes; most often it is the one the store serves, so this costs no memory of its own.
_LAST_VALID: dict[str, tuple[bytes, Project]] = {}


def _checked_project(path, slug, doc):
    return checked_document(path, slug, doc)[0]


def checked_document(
    path: str, slug: str, doc, known: dict[int, Build] | None = None
) -> tuple[Project, dict[int, Build]]:
    """`doc`, a project file's JSON decoded, checked build by build by the rules parse_project
    checks the file's bytes by: its Project, and the Build of each of its build objects by
    id(); DataError with every problem found.

    `known` is what an earlier call returned for the objects still in `doc`: a writer that
    changes one build of a document it checked passes it back, and only the builds it changed
    are checked again. The objects must not have changed since."""
    known = known or {}
    problem = project_problem(doc, slug)
    problems = [] if problem is None else [DataError(path, problem)]
    if not isinstance(doc, dict) or not isinstance(doc.get("builds"), list):
        raise DataError.of_all(problems)
    values, channels = doc["builds"], {}
    # Found in C: a writer changes one build of thousands.
    builds = list(map(known.get, map(id, values)))  # None where not known
    for index in compress(range(len(values)), map(is_, builds, repeat(None))):
        try:
            builds[index] = valid_build(values[index], channels)
        except RuleBroken as problem:
            where = _build_place(index, values[index])
            problems.append(DataError(path, str(problem), where=where))
    checked = dict(zip(map(id, values), builds))
    builds = sorted(filter(None, builds), key=_number)
    numbers = list(map(_number, builds))
    if any(map(eq, numbers, islice(numbers, 1, None))):
        for earlier, later in zip(numbers, numbers[1:]):
            if earlier == later:
                where = f"build {later}"
                problems.append(DataError(path, "buildNumber appears more than once", where=where))
    if problems:
        raise DataError.of_all(problems)
    project = Project.of(
        tuple(builds),
        slug=slug,
        ci_job=doc["ciJob"],
        ci_job_url=doc["ciJobUrl"],
        javadoc_base_url=doc.get("javadocBaseUrl", ""),
        javadoc_page_prefix=doc.get("javadocPagePrefix", ""),
        versions=version_infos(doc.get("versions", {})),
    )
    return project, checked


def parses_to(slug: str, digest: bytes, project: Project) -> None:
    """Note that the bytes whose fingerprint is `digest` parse to `project`: for a writer that
    made them from a document checked_document checked, so that the server's read of them
    parses nothing."""
    _LAST_VALID[slug] = digest, project


# --- the fast path: the same rules, checked on the whole file at once ---------------------------
# A Python call per JSON object (the duplicate-key hook) and per build made loading take 4 times
# as long as json.load. Here msgspec checks the shape and the types while it decodes, and the
# remaining rules run as loops in C (map, compress, set, join) over all builds. A file is
# accepted only when every rule (dataformat.py) visibly holds, so whatever this accepts,
# _checked_project accepts with the same result; anything else (a problem, the legacy key, a
# key maybe written twice, an integer msgspec finds out of range) goes to _checked_project,
# which finds the message. It knows every other key: integrity data, kept files, extra files
# (fast_rules.py checks the files' rules), authors, javadocPagePrefix.


class _File(msgspec.Struct, forbid_unknown_fields=True):
    """A project file as msgspec reads it: PROJECT_KEYS, an optional one UNSET when absent."""

    ciJob: str
    ciJobUrl: str
    builds: list[Build]
    slug: str | msgspec.UnsetType = msgspec.UNSET
    javadocBaseUrl: str | msgspec.UnsetType = msgspec.UNSET
    javadocPagePrefix: str | msgspec.UnsetType = msgspec.UNSET
    versions: dict[str, VersionInfo] | msgspec.UnsetType = msgspec.UNSET


class _FileWithExtras(_File):
    """A project file some build of which may have extra files (`downloads`)."""

    builds: list[BuildWithExtras]


_decode_file = msgspec.json.Decoder(_File).decode
_decode_file_with_extras = msgspec.json.Decoder(_FileWithExtras).decode
_BUILD_FIELDS = Build.__struct_fields__


def _decoded(text):
    """(the file as msgspec reads it, its builds), or None. Only a file in which "downloads"
    is written pays for extra files (an escaped key aside, which the slow path reads): it is
    read as a _FileWithExtras, its builds without any made Builds (see BuildWithExtras)."""
    with_extras = '"downloads"' in text
    try:
        doc = (_decode_file_with_extras if with_extras else _decode_file)(text)
    except (msgspec.DecodeError, ValueError, RecursionError):  # the slow path says what
        return None
    if not with_extras:
        return doc, doc.builds
    return doc, [
        build
        if build.downloads is not msgspec.UNSET
        else Build(**dict(zip(_BUILD_FIELDS, msgspec.structs.astuple(build))))
        for build in doc.builds
    ]


_number, _url, _download_url = attrgetter("number"), attrgetter("url"), attrgetter("download_url")
_timestamp, _commits = attrgetter("timestamp"), attrgetter("commits")
_sha256, _size, _file = attrgetter("sha256"), attrgetter("size"), attrgetter("file")
_downloads = attrgetter("downloads")
_yanked_at, _yank_reason = attrgetter("yanked_at"), attrgetter("yank_reason")
_message, _hash, _author = attrgetter("message"), attrgetter("hash"), attrgetter("author")


def _counted_in_versions(versions: dict) -> tuple[int, int]:
    """(the keys, the ':' in string values) of a `versions` block that project_problem
    passed: its JVM flags may hold ':', a version or a family (CHANNEL_PATTERN) none."""
    flags = [flag for entry in versions.values() for flag in entry.get("javaFlags", ())]
    keys = len(versions) + sum(map(len, versions.values()))
    return keys, sum(flag.count(":") for flag in flags)


def _given_fields(doc) -> dict:
    """The project's own keys the file gave; `versions` as plain JSON, since its rules are
    project_problem's, over what the file gave (a few entries)."""
    fields = {k: v for k, v in msgspec.structs.asdict(doc).items() if v is not msgspec.UNSET}
    if "versions" in fields:
        fields["versions"] = msgspec.to_builtins(doc.versions)
    return fields


def _share_channels_pack_commits(builds) -> None:
    """Thousands of builds share a handful of channels: keep one string of each, as
    valid_build does (5 MB at 100,000 builds); and their commits packed, as valid_build does.
    The builds are new and seen by no one else yet."""
    channels = {}
    for build, packed in zip(builds, map(Commits, map(_commits, builds))):
        channel = channels.setdefault(build.channel, build.channel)
        if channel is not build.channel:
            msgspec.structs.force_setattr(build, "channel", channel)
        msgspec.structs.force_setattr(build, "commits", packed)


def _fast_project(slug, text):
    """The file's Project if it is plainly valid, else None."""
    if (decoded := _decoded(text)) is None:
        return None
    doc, builds = decoded
    fields = _given_fields(doc)
    numbers = list(map(_number, builds))
    timestamps = list(map(_timestamp, builds))
    in_order = all(map(lt, numbers, islice(numbers, 1, None)))  # files are mostly in order
    sha256s, sizes, files = (list(map(get, builds)) for get in (_sha256, _size, _file))
    with_integrity = given(sha256s)
    download_urls = list(map(_download_url, builds))
    # A kept file's build has no downloadUrl (it reads ""); the others have one.
    kept = None if files.count(msgspec.UNSET) == len(files) else given(files)
    urls = list(map(_url, builds))
    urls += download_urls if kept is None else compress(download_urls, map(not_, kept))
    extras = NO_EXTRAS  # in a file where "downloads" is not written, as nearly everywhere
    if type(doc) is _FileWithExtras:
        extras = extras_hold(builds, list(map(_downloads, builds)))
    if extras is None:
        return None
    urls += extras.urls
    all_urls = "".join(urls)
    commits = list(chain.from_iterable(map(_commits, builds)))
    messages = "".join(map(_message, commits))
    authors = list(map(_author, commits))
    authors_given = len(authors) - authors.count("")
    all_authors = "".join(authors) if authors_given else ""
    hashes = list(map(_hash, commits))
    all_hashes = "".join(hashes)
    marks = list(map(_yanked_at, builds))  # the yank marks, UNSET where none
    yanked_ats = list(compress(marks, given(marks)))
    reasons = list(map(_yank_reason, builds))
    reasons_given = len(reasons) - reasons.count("")
    all_reasons = "".join(reasons) if reasons_given else ""
    if not (
        project_problem(fields, slug) is None
        and 0 <= min(numbers, default=0) <= max(numbers, default=0) <= dataformat.MAX_BUILD_NUMBER
        and min(timestamps, default=0) in TIMESTAMPS
        and max(timestamps, default=0) in TIMESTAMPS
        and (in_order or len(set(numbers)) == len(numbers))
        and integrity_holds(with_integrity, sha256s, sizes, files, kept, download_urls)
        and all_urls.isascii()
        and all(map(URL_PATTERN.match, urls))
        and all(map(CHANNEL_PATTERN.match, set(map(attrgetter("channel"), builds))))
        and "" not in hashes
        and all_hashes.isascii()
        and not all_hashes.encode().translate(None, HEX_BYTES)
        and (messages.isascii() or not SURROGATE.search(messages))
        and (all_authors.isascii() or not SURROGATE.search(all_authors))
        and (not yanked_ats or (min(yanked_ats) >= 0 and max(yanked_ats) in TIMESTAMPS))
        # a reason only beside a yankedAt
        and (not reasons_given or not any(compress(reasons, map(not_, given(marks)))))
        and not dataformat.YANK_REASON_REFUSED.search(all_reasons)
    ):
        return None
    # Duplicate keys without a hook: outside strings, JSON has one ':' per key written, so more
    # of them than the keys read means a key written twice (or one given the value that means
    # absent, as "author": ""). An escaped ':' (\u003a) would skew the count: such a file takes
    # the slow path.
    version_keys, version_colons = _counted_in_versions(fields.get("versions", {}))
    keys = (
        len(fields)
        # a build's plain keys, 'file' standing for 'downloadUrl' in a kept one; sha256 and size
        + len(builds) * len(PLAIN_BUILD_KEYS)
        + 2 * with_integrity.count(True)
        + len(commits) * len(COMMIT_KEYS)
        + authors_given
        + len(yanked_ats)
        + reasons_given
        + version_keys
        + extras.keys
    )
    colons = (
        sum(value.count(":") for value in fields.values() if type(value) is str)
        + all_urls.count(":")
        + messages.count(":")
        + all_authors.count(":")
        + all_reasons.count(":")
        + version_colons
        + extras.colons
    )
    if text.count(":") - colons != keys or ("\\u003" in text and ESCAPED_COLON.search(text)):
        return None
    _share_channels_pack_commits(builds)
    builds = tuple(builds) if in_order else tuple(sorted(builds, key=_number))
    return Project.of(
        builds,
        slug=slug,
        ci_job=doc.ciJob,
        ci_job_url=doc.ciJobUrl,
        javadoc_base_url=fields.get("javadocBaseUrl", ""),
        javadoc_page_prefix=fields.get("javadocPagePrefix", ""),
        versions=doc.versions if "versions" in fields else {},
    )
