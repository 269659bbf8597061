"""One project file changed under a lock, checked with the server's own validation, then put
in place whole: how writer.py's every change is written (`update`).

A change is a read-modify-write under an exclusive `flock` on a hidden lock file in the data
directory (the server ignores names starting with '.'), so concurrent writers queue instead of
losing each other's builds. The new bytes go to a hidden temporary file beside the target,
are fsynced, renamed over it and the directory is fsynced: a writer killed at any point leaves
the old file or the new one. Files are written in one stable format, so that a change shows in
a diff as the lines it changed.

A file this process wrote last is changed build by build: only the builds a change makes are
encoded and checked, and the server, reading the bytes, finds them parsed already (_Known).
"""

import fcntl
import functools
import glob
import os
import tempfile
from collections.abc import Callable
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import is_, itemgetter, not_
from typing import TypeVar

import msgspec

from buildshelf import files, store
from buildshelf.datafiles import datafile, dataformat
from buildshelf.kept import objects
from buildshelf.model import SLUG_PATTERN, Build
from buildshelf.text import counted
from buildshelf.writing.refusals import FileInvalid, Invalid, NoSpace, Refused

Result = TypeVar("Result")  # what a change says happened, which update() returns

LOCK_NAME = ".buildshelf.lock"


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
    shows in a diff as the lines it changed: 2-space indent, keys in dataformat.PROJECT_KEYS'
    order (then any others; a version's in VERSION_KEYS'), builds ascending by number, a
    final newline."""
    return _encoded(_canonical(doc))[0]


def _canonical(doc, known=frozenset()):
    """`doc` as its bytes are written: builds by number, keys in order. The build objects
    whose id() is in `known` are so already (those of a _Known's document)."""
    builds = sorted(doc["builds"], key=BUILD_NUMBER)
    # Found in C: a write changes one build of thousands.
    for index in compress(range(len(builds)), map(not_, map(known.__contains__, map(id, builds)))):
        builds[index] = _ordered_build(builds[index])
    canonical = dict(doc, builds=builds)
    if type(doc.get("versions")) is dict:  # each version's keys in their order too
        canonical["versions"] = {
            version: _ordered(entry, dataformat.VERSION_KEYS) if type(entry) is dict else entry
            for version, entry in doc["versions"].items()
        }
    return _ordered(canonical, dataformat.PROJECT_KEYS)


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
    """A copy of `build`, its keys and its commits' in the order files are written, its
    extra files by key (each file's keys in order): the file's own, which no later change to
    the caller's object can alter (see _Known)."""
    copy = dict(_ordered(build, dataformat.WRITTEN_BUILD_KEYS))
    if type(copy["commits"]) is list:
        copy["commits"] = [
            dict(_ordered(commit, dataformat.AUTHORED_COMMIT_KEYS))
            if type(commit) is dict
            else commit
            for commit in copy["commits"]
        ]
    if type(copy.get("downloads")) is dict:
        copy["downloads"] = {
            key: dict(_ordered(extra, dataformat.DOWNLOAD_KEYS)) if type(extra) is dict else extra
            for key, extra in sorted(copy["downloads"].items())
        }
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


def read(path, slug):
    """The file's _Known (None if there is no file) and its permission bits."""
    try:
        # As the server reads it: a FIFO put in the file's place must not hang the writer.
        data, st = store.read_regular_file(path)
    except FileNotFoundError:
        return None, None
    except files.NotRegular:
        raise FileInvalid(f"{path} is not a regular file: it is left as it is") from None
    except OSError as error:
        raise Refused(f"cannot read {path}: {error.strerror}") from None
    mode = st.st_mode & 0o7777
    digest = datafile.fingerprint(data)
    fix = "it is left as it is: fix it by hand first"
    _validate(path, slug, data, fix, refusal=FileInvalid, digest=digest)
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
        known, mode = read(target, slug)
        new, result = change(known and known.doc)
        if new is None:
            return result
        data, project, written = _written(path, slug, new, known)
        if not dry_run:
            try:
                replace_file(target, data, files.new_file_mode(0o666) if mode is None else mode)
            except OSError as error:
                refusal = NoSpace if error.errno in objects.FULL else Refused
                raise refusal(
                    f"cannot write {path}: {error.strerror} (the file is as it was)"
                ) from None
            datafile.parses_to(slug, written.digest, project)  # the server parses nothing
            _remember(target, written)
            if then is not None:
                then(result)
        return result
