"""The only code that writes data files: one project file changed under a lock, checked with
the server's own validation, then put in place whole.

A change is a read-modify-write under an exclusive `flock` on a hidden lock file in the data
directory (the server ignores names starting with '.'), so concurrent writers queue instead of
losing each other's builds. The new bytes go to a hidden temporary file beside the target,
are fsynced, renamed over it and the directory is fsynced: a writer killed at any point leaves
the old file or the new one. Files are written in one stable format, so that a change shows in
a diff as the lines it changed.

A file this process wrote last is changed build by build: only the builds a change makes are
encoded and checked, and the server, reading the bytes, finds them parsed already (_Known).
"""

import difflib
import fcntl
import functools
import glob
import os
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import KW_ONLY, dataclass, field
from itertools import chain, compress, repeat
from operator import is_, itemgetter, not_
from typing import TypeVar
from urllib.parse import urlsplit

import msgspec

from buildshelf import artifacts, datafile, files, store
from buildshelf.model import SLUG_PATTERN, Build
from buildshelf.text import counted, printable

Result = TypeVar("Result")  # what a change says happened, which update() returns
Selected = TypeVar("Selected")  # a selection of builds, whose `added` are to be added

LOCK_NAME = ".buildshelf.lock"


class Refused(Exception):
    """A change not made: the message says why and what to do. Nothing was written."""


# What a refusal was, for a caller that answers each differently (the HTTP routes); the
# message is the same for every caller.
class NoProject(Refused):
    """The project has no file."""


class NoBuild(Refused):
    """The project has no build of that number."""


class Invalid(Refused):
    """The build given breaks a rule of the data files, or its file cannot be kept."""


class Exists(Refused):
    """A different build of that number is there; `fields` are the keys that differ."""

    def __init__(self, message: str, fields: list[str]):
        super().__init__(message)
        self.fields = fields


class NoSpace(Refused):
    """The disk (or the quota) is full."""


def project_path(directory: str, slug: str) -> str:
    if not SLUG_PATTERN.match(slug):
        raise Refused(
            f"{slug!r} is not a project slug: use a-z, 0-9, '.', '_' and '-', "
            "starting with a-z or 0-9"
        )
    return os.path.join(directory, slug + ".json")


@contextmanager
def locked(directory):
    """Hold the data directory's write lock (waiting for it) for the block."""
    path = os.path.join(directory, LOCK_NAME)
    try:
        # Read-only is enough for flock, so a lock file another user created still works.
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as error:
        raise Refused(f"cannot open the lock file {path}: {error.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel if this process dies
        yield
    finally:
        os.close(fd)


def encode(doc: dict) -> bytes:
    """A project document as bytes in the data files' one stable format, so that a change
    shows in a diff as the lines it changed: 2-space indent, keys in datafile.PROJECT_KEYS'
    order (then any others), builds ascending by number, a final newline."""
    return _encoded(_canonical(doc))[0]


def _canonical(doc, known=frozenset()):
    """`doc` as its bytes are written: builds by number, keys in order. The build objects
    whose id() is in `known` are so already (those of a _Known's document)."""
    builds = sorted(doc["builds"], key=BUILD_NUMBER)
    # Found in C: a write changes one build of thousands.
    for index in compress(range(len(builds)), map(not_, map(known.__contains__, map(id, builds)))):
        builds[index] = _ordered_build(builds[index])
    return _ordered(dict(doc, builds=builds), datafile.PROJECT_KEYS)


BUILD_NUMBER = itemgetter("buildNumber")
# The stable format is json.dumps(indent=2, ensure_ascii=False)'s, made by msgspec 25 times
# faster. A file is its fields, then the builds' array, each build encoded alone (indented
# as deep as the array's items), so that a write encodes only the builds it changed.
BUILD_INDENT = b" " * 4
EMPTY_BUILDS = b'\n  "builds": []'
BUILDS_OPEN, BUILDS_CLOSE = b'\n  "builds": [\n', b"\n  ]"


def _encoded(canonical, known=None):
    """(the bytes of the document `canonical`, {id() of each build object: its bytes in
    them}); `known` is an earlier call's, for the build objects still in `canonical`."""
    known = known or {}
    builds = canonical["builds"]
    parts = list(map(known.get, map(id, builds)))  # None where not known
    for index in compress(range(len(parts)), map(is_, parts, repeat(None))):
        parts[index] = _build_bytes(builds[index])
    encoded = dict(zip(map(id, builds), parts))
    head = _json(dict(canonical, builds=[])) + b"\n"
    if not parts:
        return head, encoded
    # The whole copied once: 1.5 MB for 2,000 builds, whose every copy cost 1 ms.
    before, _, after = head.partition(EMPTY_BUILDS)
    parts[0] = before + BUILDS_OPEN + parts[0]
    parts[-1] += BUILDS_CLOSE + after
    return b",\n".join(parts), encoded


def _build_bytes(build):
    """A build's bytes as a file holds them."""
    return BUILD_INDENT + _json(build).replace(b"\n", b"\n" + BUILD_INDENT)


def _json(value):
    try:
        return msgspec.json.format(msgspec.json.encode(value), indent=2)
    except UnicodeEncodeError:  # a lone surrogate, e.g. from argv bytes that are not UTF-8
        raise Refused(
            "the text holds characters that are not valid Unicode (such as bytes "
            "that are not UTF-8): give it as UTF-8"
        ) from None


def _ordered_build(build):
    """A copy of `build`, its keys and its commits' in the order files are written: the
    file's own, which no later change to the caller's object can alter (see _Known)."""
    copy = dict(_ordered(build, datafile.WRITTEN_BUILD_KEYS))
    if type(copy["commits"]) is list:
        copy["commits"] = [
            dict(_ordered(commit, datafile.AUTHORED_COMMIT_KEYS))
            if type(commit) is dict
            else commit
            for commit in copy["commits"]
        ]
    return copy


def _ordered(value, keys):
    """`value` with `keys` first, in their order (then any others): `value` itself when so
    already, as nearly every build of a file this module wrote is."""
    if _in_order(tuple(value), keys):
        return value
    ordered = {key: value[key] for key in keys if key in value}
    ordered.update((key, item) for key, item in value.items() if key not in ordered)
    return ordered


@functools.lru_cache(maxsize=256)  # a file's objects have a handful of key lists
def _in_order(written, keys):
    wanted = [key for key in keys if key in written]
    return list(written[: len(wanted)]) == wanted


def _read(path, slug):
    """The file's _Known (None if there is no file) and its permission bits."""
    try:
        # As the server reads it: a FIFO put in the file's place must not hang the writer.
        data, st = store.read_regular_file(path)
    except FileNotFoundError:
        return None, None
    except files.NotRegular:
        raise Refused(f"{path} is not a regular file: it is left as it is") from None
    except OSError as error:
        raise Refused(f"cannot read {path}: {error.strerror}") from None
    mode = st.st_mode & 0o7777
    digest = datafile.fingerprint(data)
    _validate(path, slug, data, "it is left as it is: fix it by hand first", digest=digest)
    known = _KNOWN.get(path)
    if known is None or known.digest != digest:
        # Valid, so strict JSON (no key twice, no NaN, no lone surrogate): msgspec reads it
        # as datafile.parse_json does, in half the time.
        known = _Known(digest, msgspec.json.decode(data))
        _remember(path, known)
    return known, mode


@dataclass(frozen=True)
class _Known:
    """A project file this process read or wrote last, for its next write. Decoding, checking
    and encoding a whole file each hold the interpreter lock (50 ms in all for 2,000 builds),
    which every request waited out while a server published over HTTP (issue 24), when a
    write changes one build. A change never modifies the document it is given, so one can be
    shared, and its build objects known by id()."""

    digest: bytes  # the fingerprint of the file's bytes
    doc: dict  # the document they decode to: canonical, once written here
    # Once written here, by id() of each build object of `doc`: its Build, its bytes.
    checked: dict[int, Build] = field(default_factory=dict)
    encoded: dict[int, bytes] = field(default_factory=dict)


_KNOWN: dict[str, _Known] = {}  # by the file's real path
KNOWN_FILES = 4


def _remember(path, known):
    _KNOWN.pop(path, None)
    while len(_KNOWN) >= KNOWN_FILES:
        _KNOWN.pop(next(iter(_KNOWN)), None)
    _KNOWN[path] = known


def _written(path, slug, new, known):
    """(the bytes of the document `new`, the Project they parse to, the _Known of a file
    holding them), checked by the server's rules: Invalid if they break one. Only the build
    objects that are not `known`'s are encoded and checked."""
    encoded, checked = (known.encoded, known.checked) if known else ({}, {})
    canonical = _canonical(new, encoded)
    data, encoded = _encoded(canonical, encoded)
    with _refused_as(Invalid, path):
        project, checked = datafile.checked_document(path, slug, canonical, checked)
    return data, project, _Known(datafile.fingerprint(data), canonical, checked, encoded)


def _validate(path, slug, data, advice=None, refusal=Refused, digest=None):
    with _refused_as(refusal, path, advice):
        datafile.parse_project(path, slug, data, digest=digest)


@contextmanager
def _refused_as(refusal, path, advice=None):
    """Raise `refusal`, saying what is wrong, for a file (or a document) the block finds
    invalid; `advice` says what to do."""
    try:
        yield
    except datafile.DataError as error:
        notes = [advice] if advice else []
        if others := error.count - 1:
            notes.append(f"'buildshelf check' lists its {counted(others, 'other problem')}")
        raise refusal(f"{error}" + (f" ({'; '.join(notes)})" if notes else "")) from None
    except (ValueError, TypeError, RecursionError) as error:  # what validation did not foresee
        raise refusal(
            f"{path}: not a valid project file ({error.__class__.__name__}: "
            f"{error})" + (f" ({advice})" if advice else "")
        ) from None


def replace_file(path: str, data: bytes, mode: int) -> None:
    """Put `data` at `path` whole: temp file beside it, fsync, rename over, fsync the
    directory. Interrupted anywhere, `path` holds its old content or the new one."""
    directory, name = os.path.split(path)
    # Leftovers of writers killed before their rename: we hold the lock, so none is live.
    for leftover in glob.glob(os.path.join(glob.escape(directory), f".{glob.escape(name)}.*.tmp")):
        with suppress(OSError):
            os.unlink(leftover)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
    try:
        files.fsync_directory(directory)
    except OSError as error:
        raise Refused(
            f"wrote {path} but could not fsync its directory: {error.strerror} (the "
            "change is served but may not survive a crash)"
        ) from None


def update(
    directory: str,
    slug: str,
    change: Callable[[dict | None], tuple[dict | None, Result]],
    dry_run: bool = False,
    then: Callable[[Result], None] | None = None,
) -> Result:
    """Apply `change` to project `slug`'s document under the lock and write the result.

    `change(doc)` gets the current document (None when the file does not exist), which it
    must not modify, and returns `(new, result)`: the new document, or None when there is
    nothing to write, and what happened, which `update` returns. It raises Refused to refuse.
    The new document is checked by the server's rules before anything is written (with
    `dry_run`, only checked); of a file this process wrote last, only the build objects that
    `change` made. `then(result)` runs after the write, still under the lock.
    """
    path = project_path(directory, slug)
    # A dry run writes nothing, so it needs no lock (nor write access): renames are atomic.
    with nullcontext() if dry_run else locked(directory):
        target = os.path.realpath(path)  # a symlinked data file stays a symlink
        known, mode = _read(target, slug)
        new, result = change(known and known.doc)
        if new is None:
            return result
        data, project, written = _written(path, slug, new, known)
        if not dry_run:
            try:
                replace_file(target, data, files.new_file_mode(0o666) if mode is None else mode)
            except OSError as error:
                refusal = NoSpace if error.errno in artifacts.FULL else Refused
                raise refusal(
                    f"cannot write {path}: {error.strerror} (the file is as it was)"
                ) from None
            datafile.parses_to(slug, written.digest, project)  # the server parses nothing
            _remember(target, written)
            if then is not None:
                then(result)
        return result


# --- the changes the commands make ------------------------------------------------------------


def add_project(
    directory: str, slug: str, ci_job: str, ci_job_url: str, javadoc_base_url: str = ""
) -> bool:
    """Create project `slug` with no builds; True if created, False if already there as given.
    Without `javadoc_base_url`, the project has no javadoc: its file has no javadocBaseUrl."""
    fields = {"ciJob": ci_job, "ciJobUrl": ci_job_url, "javadocBaseUrl": javadoc_base_url}

    def change(doc):
        if doc is None:
            new = dict(fields, builds=[])
            if not javadoc_base_url:
                del new["javadocBaseUrl"]
            return new, True
        differing = [key for key, value in fields.items() if doc.get(key, "") != value]
        if not differing:
            return None, False
        key = differing[0]
        raise Refused(
            f"project {slug!r} exists with {key} {doc.get(key, '')!r}, not "
            f"{fields[key]!r}: edit {project_path(directory, slug)} to change it"
        )

    return update(directory, slug, change)


def no_project(directory: str, slug: str, note: str = "") -> NoProject:
    """The refusal of a project `directory` lacks: the closest slug there (a typo), else how
    to add it; then, with `note`, how to name a project of another data directory."""
    try:
        near = difflib.get_close_matches(slug, store.data_files(directory), n=1)
    except OSError:
        near = []
    hint = (
        f"did you mean {near[0]}?"
        if near
        else f"add it with 'buildshelf add-project {slug} --ci-job ... --ci-job-url ...'"
    )
    note = f"{note}; " if note else ""
    return NoProject(
        f"no project {slug!r} in {printable(directory)}: {hint} ({note}a project of another "
        "data directory: give --data DIR or set BUILDSHELF_DATA)"
    )


def _existing_project(doc, directory, slug):
    if doc is None:
        raise no_project(directory, slug)
    return doc


class NoRunUrl(Invalid):
    """A build without url for a project whose ciJobUrl is no Jenkins job's: the message
    says so whoever asked; each caller adds how its user gives the url."""


def job_run_url(ci_job_url: str, number: int) -> str:
    """A Jenkins job run's address: the job's, then the number. Only a Jenkins job's URL
    (/job/ in its path) makes one: other CIs (GitHub's runs) number their runs otherwise."""
    if "/job/" not in urlsplit(ci_job_url).path:
        raise NoRunUrl(
            f"the build has no url, and ciJobUrl {ci_job_url} is not a Jenkins job's (its path "
            "has no /job/) to make one from: give the address of the build's CI run"
        )
    return ci_job_url.rstrip("/") + f"/{number}/"


STDIN = "-"  # Keep's source, publish --file's PATH: standard input


@dataclass(frozen=True)
class Keep:
    """A file to keep in the artifact store for the build published: the file at `source`,
    copied in; standard input (STDIN, named by `name`), streamed in; or, with `staged`, a file already received into the store (an HTTP upload,
    artifacts.Staging), renamed into place: no second copy. The artifact's name is `name`,
    by default the source's."""

    source: str
    max_bytes: int = artifacts.MAX_BYTES_DEFAULT
    sha256: str | None = None  # what the CI job computed: a file that differs is refused
    _: KW_ONLY  # the rest by name: a positional argument once took another's place
    staged: artifacts.Staged | None = None
    name: str | None = None
    progress: artifacts.Progress | None = None  # told of the copy as it goes

    def stored(self, store_dir: str) -> artifacts.Stored:
        """The file as an object of `store_dir` (see Keep); artifacts.Refused if not."""
        artifacts.check_name(self.name or os.path.basename(self.source))
        if self.staged is not None:
            return artifacts.place(store_dir, self.staged, self.source)
        if self.source == STDIN:  # publish --file - (what a CI job sends over ssh)
            return artifacts.store_stream(
                store_dir,
                _read_stdin,
                f"{self.name} (standard input)",
                self.max_bytes,
                progress=self.progress,
                expected_sha256=self.sha256,
            )
        return artifacts.store_file(
            store_dir, self.source, self.max_bytes, self.sha256, self.progress
        )


def _read_stdin() -> bytes:
    try:
        return sys.stdin.buffer.read1(artifacts.CHUNK_BYTES)
    except OSError as error:
        raise artifacts.Refused(
            f"cannot read standard input: {error.strerror} (nothing was stored)"
        ) from None


@dataclass(frozen=True)
class Published:
    """What a publish did: "added", "replaced" or "unchanged", and the kept file's object."""

    outcome: str
    stored: artifacts.Stored | None = None


Report = Callable[[artifacts.Removed], None]  # told of each object a command deletes


def unreported(removed: artifacts.Removed) -> None:
    """A caller that does not tell anyone of the objects deleted (a test's)."""


def publish(
    directory: str,
    slug: str,
    build: dict,
    replace: bool = False,
    any_timestamp: bool = False,
    keep: Keep | None = None,
    store_dir: str | None = None,
    report: Report = unreported,
) -> Published:
    """Add `build` (a build object; a None 'url' means the job run's) to project `slug`.

    The outcome is "added", "replaced" or "unchanged" (the same build is already there:
    with `any_timestamp`, whatever its timestamp, so that a retry without --timestamp
    matches). With `keep`, its file is stored first in the artifact store `store_dir`, under
    the lock, so that the project file never names an object that is not there (a damaged
    one is repaired). The object of a replaced build, or the one stored for a build refused,
    is then deleted if no build uses it (see remove_if_unused).
    """
    stored, made_unused = None, set()

    def change(doc):
        nonlocal stored
        doc = _existing_project(doc, directory, slug)
        if build["url"] is None:  # before a file is kept: its copy may be long
            build["url"] = job_run_url(doc["ciJobUrl"], build["buildNumber"])
        if keep is not None:  # again on a retry: it puts back an object missing or damaged
            try:
                stored = keep.stored(store_dir)
            except artifacts.NoSpace as refused:
                raise NoSpace(str(refused)) from None
            except artifacts.Refused as refused:
                raise Invalid(str(refused)) from None
            name = keep.name or os.path.basename(keep.source)
            build.update(sha256=stored.sha256, size=stored.size, file=name)
        same = [b for b in doc["builds"] if b.get("buildNumber") == build["buildNumber"]]
        others = [b for b in doc["builds"] if b.get("buildNumber") != build["buildNumber"]]
        new = dict(doc, builds=others + [build])
        if not same:
            return new, "added"
        if "yankedAt" in same[0]:  # a yanked build's number may be published again
            made_unused.update(_kept_objects(same))
            return new, "replaced"
        compared = dict(build, timestamp=same[0].get("timestamp")) if any_timestamp else build
        if same[0] == compared:
            return None, "unchanged"
        if not replace:
            try:  # the build's own faults first
                datafile.checked_build(build)
            except datafile.InvalidBuild as problem:
                where = f"{project_path(directory, slug)}: build {build['buildNumber']}"
                raise Invalid(f"{where}: {problem}") from None
            keys = same[0].keys() | compared.keys()
            fields = [
                k
                for k in datafile.WRITTEN_BUILD_KEYS
                if k in keys and same[0].get(k) != compared.get(k)
            ]
            raise Exists(
                f"{project_path(directory, slug)}: build {build['buildNumber']} is already "
                f"there with another {', '.join(fields)}: give --replace to replace it "
                "(nothing written)",
                fields,
            )
        made_unused.update(_kept_objects(same))
        return new, "replaced"

    try:
        outcome = update(
            directory,
            slug,
            change,
            then=lambda _: remove_if_unused(directory, store_dir, made_unused, report),
        )
    except Refused:
        # The object stored for the build refused, if this command made it (identical bytes
        # already there may be a build's that is not readable now) and no build uses it.
        if stored is not None and stored.created:
            with locked(directory):
                remove_if_unused(directory, store_dir, {stored.sha256}, report)
        raise
    return Published(outcome, stored)


def yank(
    directory: str,
    slug: str,
    number: int,
    store_dir: str | None = None,
    report: Report = unreported,
    reason: str = "",
    purge: bool = False,
    dry_run: bool = False,
) -> dict:
    """Mark build `number` of project `slug` yanked (now, for `reason`): it stays in its file,
    served nowhere, and its kept file stays in `store_dir`, so that `unyank` can restore it.
    With `purge`, its object is deleted at once unless a build not yanked uses it (see
    remove_if_unused). Returns the build's document as it was: with a yankedAt, it was
    yanked already and nothing changed."""

    def change(doc):
        build = _the_build(doc, directory, slug, number, "nothing yanked")
        if "yankedAt" in build:
            return None, build
        marked = dict(build, yankedAt=time.time_ns() // 1_000_000)
        if reason:
            marked["yankReason"] = reason
        return dict(doc, builds=[marked if b is build else b for b in doc["builds"]]), build

    def purged(build):
        if purge:
            objects = _kept_objects([build])
            remove_if_unused(directory, store_dir, objects, report, {(slug, number)}, dry_run)

    build = update(directory, slug, change, dry_run, then=purged)
    if dry_run:  # nothing was written, so `then` did not run: say what it would delete
        purged(build)
    return build


def _the_build(doc, directory, slug, number, nothing):
    """The document of build `number` in project `slug`'s `doc`; NoBuild if none."""
    for build in _existing_project(doc, directory, slug)["builds"]:
        if build.get("buildNumber") == number:
            return build
    raise NoBuild(f"project {slug!r} has no build {number}: {nothing}")


YANK_KEYS = ("yankedAt", "yankReason")


def unyank(directory: str, slug: str, number: int, store_dir: str | None = None) -> dict:
    """Serve yanked build `number` of project `slug` again; Refused when it is not yanked, or
    when its kept file is no longer in `store_dir` (purged): it must be published again."""

    def change(doc):
        build = _the_build(doc, directory, slug, number, "nothing unyanked")
        if "yankedAt" not in build:
            raise Refused(f"build {number} of {slug} is not yanked: nothing to restore")
        if "file" in build and store_dir is not None:
            if artifacts.verify(store_dir, build["sha256"], build["size"]) is not None:
                name = build["file"]
                raise Refused(
                    f"build {number} of {slug} cannot be served again: its file {name} was "
                    f"purged from {printable(store_dir)}. Publish it again: 'buildshelf "
                    f"publish {slug} --build {number} --file {name} --replace' (with its "
                    "channel and timestamp)"
                )
        restored = {key: value for key, value in build.items() if key not in YANK_KEYS}
        return dict(doc, builds=[restored if b is build else b for b in doc["builds"]]), build

    return update(directory, slug, change)


@dataclass(frozen=True)
class Purged:
    """A yanked build whose object a purge looked at: deleted, or kept for another build."""

    slug: str
    build: dict
    removed: artifacts.Removed | None


def purge(
    directory: str,
    store_dir: str,
    slug: str | None = None,
    older_than_days: float = 30,
    dry_run: bool = False,
) -> list[Purged]:
    """Delete the objects of the builds yanked at least `older_than_days` ago (of project
    `slug`, else of every project) that no other build uses; with `dry_run`, delete nothing
    and say what would go. Refused while a data file cannot be read."""
    if slug is not None:
        project_path(directory, slug)
        if not os.path.exists(project_path(directory, slug)):
            raise no_project(directory, slug)
    before = time.time_ns() // 1_000_000 - older_than_days * 86_400_000
    with nullcontext() if dry_run else locked(directory):
        due = [
            (project.slug, build)
            for _, project in _readable_projects(directory)
            if slug is None or project.slug == slug
            for build in project.yanked
            if build.hosted and build.yanked_at <= before
        ]
        ignoring = {(name, build.number) for name, build in due}
        unused = {build.sha256 for _, build in due} - used_objects(directory, ignoring)
        removed = {r.path: r for r in artifacts.remove(store_dir, unused, dry_run)}
    return [
        Purged(
            name,
            {"buildNumber": build.number, "file": build.file, "sha256": build.sha256},
            removed.get(artifacts.object_path(store_dir, build.sha256)),
        )  # fmt: skip
        for name, build in due
    ]


def _kept_objects(builds):
    """The sha256s of the objects whose files these build documents keep."""
    return {b["sha256"] for b in builds if "file" in b}


def _readable_projects(directory):
    """(path, Project) of every data file; Refused while one cannot be read, since it may
    use any object."""
    read = list(store.read_projects(directory))
    for path, project in read:
        if isinstance(project, datafile.DataError):
            raise Refused(
                f"{path} cannot be read as a project file: it may use objects, so none was deleted"
            )
    return read


def used_objects(directory: str, ignoring: frozenset = frozenset()) -> set[str]:
    """The sha256s of the objects the builds of `directory` use, yanked ones too (their files
    stay until purged) but those `ignoring` names as (slug, number); Refused while a data
    file cannot be read, since it may use any of them."""
    used = set()
    for _, project in _readable_projects(directory):
        for build in chain(project.hosted_builds, project.yanked):
            if build.hosted and (project.slug, build.number) not in ignoring:
                used.add(build.sha256)
    return used


def remove_if_unused(
    directory: str,
    store_dir: str | None,
    sha256s: set[str],
    report: Report,
    ignoring: frozenset = frozenset(),
    dry_run: bool = False,
) -> None:
    """Delete the objects of `store_dir` with these sha256s that no build of `directory`
    uses, telling `report` of each; the caller holds the lock. Only the objects a write made
    unused are given: one that no build names for another reason (its project file away for
    a moment) stays, for `check --prune` to delete. Nothing is deleted while a data file
    cannot be read."""
    if store_dir is None or not sha256s:
        return
    try:
        used = used_objects(directory, ignoring)
    except Refused:  # the write is done: an object left costs only space, `check` lists it
        return
    for removed in artifacts.remove(store_dir, sha256s - used, dry_run):
        report(removed)


def prune(
    directory: str, store_dir: str, dry_run: bool = False, report: Report = unreported
) -> None:
    """Delete every object of `store_dir` that no build of `directory` uses, telling
    `report` of each (with `dry_run`, of each it would delete); Refused, deleting nothing,
    while a data file cannot be read."""
    # A dry run deletes nothing, so it needs no lock (nor write access).
    with nullcontext() if dry_run else locked(directory):
        unused = artifacts.objects(store_dir).keys() - used_objects(directory)
        for removed in artifacts.remove(store_dir, unused, dry_run):
            report(removed)


def add_builds(
    directory: str, slug: str, select: Callable[[dict], Selected], dry_run: bool = False
) -> Selected:
    """Add the builds `select(doc)` picks (its `added`) to project `slug`'s document; the
    builds already there stay exactly as they are. Returns the selection made under the lock."""

    def change(doc):
        selection = select(_existing_project(doc, directory, slug))
        added = selection.added
        return (dict(doc, builds=doc["builds"] + added) if added else None), selection

    return update(directory, slug, change, dry_run)


def selected(directory: str, slug: str, select: Callable[[dict], Selected]) -> Selected:
    """What `select(doc)` picks from project `slug`'s document as it is now: no lock taken,
    nothing validated or written."""
    known, _ = _read(os.path.realpath(project_path(directory, slug)), slug)
    return select(_existing_project(known and known.doc, directory, slug))
