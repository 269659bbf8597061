"""The content-addressed artifact store: files copied into a directory under their sha256, so
that identical bytes are stored once and an object, once written, never changes.

An object lives at `<store>/<sha256[:2]>/<sha256>` (lowercase hex). It is written as a data
file is (writer.py): copied from a file or a download to a hidden temporary file in the store,
hashed while copying, fsynced, renamed to its place, and the directory fsynced. A writer killed
at any point leaves no object or a whole one, and at most a temporary file that a later writer
removes.
"""

import fcntl
import hashlib
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import suppress

from buildshelf import files
from buildshelf.kept.objects import (
    CHUNK_BYTES,
    FULL,
    MAX_BYTES_DEFAULT,
    MISSING,
    NoSpace,
    Progress,
    Refused,
    Removed,
    Staged,
    Stored,
    check_expected,
    too_large,
)
from buildshelf.kept.temp_files import TEMP_PREFIX, TEMP_SUFFIX, remove_stale_temp_files
from buildshelf.model import FILE_NAME_PATTERN, FILE_NAME_RULE, SHA256_PATTERN, Build, Kept
from buildshelf.text import printable, sizes

IN_DATA_DIRECTORY = "artifacts"  # the store's default place: one directory to back up
NAME_RULE = "a file name " + FILE_NAME_RULE

_PREFIX = re.compile(r"[0-9a-f]{2}")

# Objects are read-only (they never change) and readable as the umask allows, so that a
# server running as another user can send them.
OBJECT_PERMISSIONS = 0o444


def default_store(data: str) -> str:
    """The artifact store inside the data directory `data`."""
    return os.path.join(data, IN_DATA_DIRECTORY)


def check_name(name: str) -> str:
    """`name` if it may name an artifact file (see NAME_RULE), else Refused."""
    if not FILE_NAME_PATTERN.match(name):
        raise Refused(f"{name!r} is not a valid file name: {NAME_RULE}")
    return name


def object_path(store: str, sha256: str) -> str:
    """Where the object with this sha256 (64 lowercase hex digits) lives in `store`."""
    if not SHA256_PATTERN.match(sha256):
        # Checked here, so that no sha256 from a data file can name a path outside the store.
        raise ValueError(f"{sha256!r} is not a sha256: 64 lowercase hex digits")
    return os.path.join(store, sha256[:2], sha256)


def store_file(
    store: str,
    source: str,
    max_bytes: int = MAX_BYTES_DEFAULT,
    expected_sha256: str | None = None,
    progress: Progress | None = None,
) -> Stored:
    """Copy the regular file `source` into `store` as an object and return it.

    Refused (with nothing left behind) when `source` is not a readable regular file, is
    larger than `max_bytes`, does not hash to `expected_sha256`, or the store cannot take it.
    `progress(done, size)` is told of each chunk copied.
    """
    expected = _expected(expected_sha256)
    fd, size = _open_source(source, max_bytes)
    try:
        read = _file_reader(fd, source)
        return _store(store, source, _told(read, progress, size), max_bytes, expected)
    finally:
        os.close(fd)


def store_stream(
    store: str,
    read: Callable[[], bytes],
    source: str,
    max_bytes: int = MAX_BYTES_DEFAULT,
    size: int | None = None,
    progress: Progress | None = None,
    expected_sha256: str | None = None,
) -> Stored:
    """Store the bytes `read()` returns, chunk by chunk until b"", as an object: a download,
    or publish --file - (standard input).

    `read` raises Refused to give up (a connection cut, a timeout); `source` names the bytes
    in messages; `size`, when announced, is held to `max_bytes` before anything is written.
    Refused, with nothing left behind, as store_file is. `progress(done, size)` is told of
    each chunk.
    """
    expected = _expected(expected_sha256)
    if size is not None and size > max_bytes:
        raise too_large(source, max_bytes)
    return _store(store, source, _told(read, progress, size), max_bytes, expected)


def _expected(sha256):
    """The --sha256 given, lowercased (None if none), or Refused if it is not one."""
    if sha256 is not None and not SHA256_PATTERN.match(sha256.lower()):
        raise Refused(f"--sha256 {sha256!r} is not a sha256: give 64 hex digits")
    return None if sha256 is None else sha256.lower()


def verify(store: str, sha256: str, size: int) -> str | None:
    """None if the object is in `store` with `size` bytes, else what is wrong with it, as a
    sentence about the object without its subject (MISSING)."""
    try:
        st = os.lstat(object_path(store, sha256))
    except FileNotFoundError:
        return MISSING
    except OSError as error:
        return f"cannot be looked at: {error.strerror}"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_size != size:
        return "is {}, expected {}".format(*sizes(st.st_size, size))
    return None


def rehash(store: str, sha256: str) -> str | None:
    """None if the object's bytes hash to `sha256`, else what is wrong, as verify says it
    (reads in chunks)."""
    try:
        fd, _ = files.open_regular(object_path(store, sha256), follow_symlinks=False)
    except FileNotFoundError:
        return MISSING
    except files.NotRegular:
        return "is not a regular file"
    except OSError as error:
        return f"cannot be read ({error.strerror})"
    with os.fdopen(fd, "rb") as f:
        actual = hashlib.file_digest(f, "sha256").hexdigest()
    return None if actual == sha256 else f"holds other bytes: they hash to {actual}"


def problems(
    store: str, kept: Iterable[tuple[str, Build, Kept]], hash_again: bool = False
) -> Iterator[tuple[str, Build, Kept, str]]:
    """(name, build, file, problem) for each (name, build, file) of `kept` whose object in
    `store` is missing, of another size or, with `hash_again`, holds other bytes; `file` is
    one of the build's kept files (Build.kept_files). An object several files name is looked
    at once."""
    found = {}
    for name, build, file in kept:
        key = file.sha256, file.size
        if key not in found:
            found[key] = verify(store, *key)
            if found[key] is None and hash_again:
                found[key] = rehash(store, file.sha256)
        if found[key] is not None:
            yield name, build, file, found[key]


def objects(store: str) -> dict[str, int]:
    """Every object in `store`: sha256 -> size on disk. Temporary files, and anything not
    named and placed as an object is, are left out."""
    found = {}
    try:
        prefixes = sorted(e.name for e in os.scandir(store) if _PREFIX.fullmatch(e.name))
    except FileNotFoundError:
        return found
    for prefix in prefixes:
        directory = os.path.join(store, prefix)
        if not os.path.isdir(directory) or os.path.islink(directory):
            continue
        with os.scandir(directory) as entries:
            for entry in entries:
                if (
                    SHA256_PATTERN.match(entry.name)
                    and entry.name.startswith(prefix)
                    and entry.is_file(follow_symlinks=False)
                ):
                    found[entry.name] = entry.stat(follow_symlinks=False).st_size
    return dict(sorted(found.items()))


def remove(store: str, sha256s: Iterable[str], dry_run: bool = False) -> list[Removed]:
    """Delete the objects of `store` with these sha256s; return those deleted, by sha256.
    One that is not there, or cannot be deleted, is left out. With `dry_run`, delete nothing
    and return those there.

    The caller holds the data directory's lock and has checked that no build uses them.
    """
    removed, directories = [], set()
    for sha256 in sorted(set(sha256s)):
        path = object_path(store, sha256)
        try:
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode):
                continue  # not an object: `check` names it
            if not dry_run:
                os.unlink(path)
        except OSError:
            # Removed meanwhile by someone else, or a store that is read-only or not ours to
            # change: an unused object costs only space, and `check` lists it.
            continue
        removed.append(Removed(path, st.st_size))
        directories.add(os.path.dirname(path))
    # So that the deletions survive a crash, as the renames that made the objects do; one
    # that does not survive leaves an unused object again, nothing worse.
    for directory in [] if dry_run else sorted(directories):
        with suppress(OSError):
            files.fsync_directory(directory)
    return removed


# --- storing ------------------------------------------------------------------------------


def _open_source(source, max_bytes):
    """An open descriptor on `source`, checked to be a regular file within the limit."""
    try:
        fd, st = files.open_regular(source)
    except files.NotRegular as error:
        raise Refused(f"{source} is {error.kind}, not a regular file: give a file") from None
    except OSError as error:
        raise Refused(f"cannot read {source}: {error.strerror}") from None
    if st.st_size > max_bytes:
        os.close(fd)
        raise too_large(source, max_bytes)
    return fd, st.st_size


def _told(read, progress, size):
    """`read`, telling `progress` of the bytes read so far, if there is one to tell."""
    if progress is None:
        return read
    done = 0

    def reading():
        nonlocal done
        chunk = read()
        done += len(chunk)
        progress(done, size)
        return chunk

    return reading


def _file_reader(fd, source):
    def read():
        try:
            return os.read(fd, CHUNK_BYTES)
        except OSError as error:
            raise Refused(f"cannot read {source}: {error.strerror} (nothing was stored)") from None

    return read


def _store(store, source, read, max_bytes, expected):
    staging = Staging(store, source, max_bytes)
    try:
        while chunk := read():
            staging.write(chunk)
        staged = staging.finish()
        check_expected(staged.sha256, expected)
        return place(store, staged, source)
    finally:
        staging.discard()


class Staging:
    """A file being received into `store` (`source` names it in messages), chunk by chunk:
    written to a hidden temporary file in the store, hashed on the way, held to
    `max_bytes`; memory stays bounded at any size. `finish()` gives the Staged file for
    `place`; `discard()` removes it. Every refusal is Refused (TooLarge, NoSpace), and leaves
    the temporary file for the caller's discard()."""

    def __init__(self, store: str, source: str, max_bytes: int = MAX_BYTES_DEFAULT):
        self.store, self.source, self.max_bytes = store, source, max_bytes
        self.digest, self.size, self.fd = hashlib.sha256(), 0, None
        remove_stale_temp_files(store)
        try:
            _make_directories(store)
            self.fd, self.path = tempfile.mkstemp(dir=store, prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX)
        except OSError as error:
            raise _cannot_store(source, store, error) from None
        # Held until discard(), through place(): the mark of a live writer, which the
        # kernel drops when its process dies (see remove_stale_temp_files).
        with suppress(OSError):
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.max_bytes:  # a file may grow after its fstat, a download not say
            raise too_large(self.source, self.max_bytes)
        self.digest.update(chunk)
        try:
            files.write_all(self.fd, chunk)
        except OSError as error:
            raise _cannot_store(self.source, self.store, error) from None

    def finish(self) -> Staged:
        """The file, whole: made read-only as objects are and fsynced. It stays open (and
        locked) until discard(), which its caller calls once place() has taken it."""
        try:
            os.fchmod(self.fd, files.new_file_mode(OBJECT_PERMISSIONS))
            os.fsync(self.fd)
        except OSError as error:
            raise _cannot_store(self.source, self.store, error) from None
        return Staged(self.path, self.digest.hexdigest(), self.size)

    def discard(self) -> None:
        """Close the file and remove it if it is still there (not placed): at any point, any
        number of times."""
        self._close()
        with suppress(OSError):
            os.unlink(self.path)

    def _close(self):
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)


def place(store: str, staged: Staged, source: str) -> Stored:
    """Make `staged` (received into `store` by Staging) the object of its sha256: renamed into
    place, never copied, or removed when identical bytes are already there. The staged file
    is gone once this returns or raises (Refused, with nothing stored)."""
    tmp, sha256, size = staged.path, staged.sha256, staged.size
    try:
        path = object_path(store, sha256)
        directory = os.path.dirname(path)
        _make_directories(directory)
        # Identical bytes are stored once; an object of another size or with other bytes is
        # damaged, and the fresh copy replaces it. Two writers of the same bytes may both
        # rename: either copy is the object.
        found = verify(store, sha256, size) or rehash(store, sha256)
        created = found is not None
        if created:
            os.replace(tmp, path)
        else:
            os.unlink(tmp)
    except BaseException as error:
        with suppress(OSError):
            os.unlink(tmp)
        if isinstance(error, OSError):
            raise _cannot_store(source, store, error) from None
        raise
    try:
        files.fsync_directory(directory)
    except OSError as error:
        raise Refused(
            f"stored {source} as {path} but could not fsync its directory: {error.strerror} "
            "(it may not survive a crash)"
        ) from None
    return Stored(sha256, size, path, created, None if found == MISSING else found)


def _cannot_store(source, store, error):
    refusal = NoSpace if error.errno in FULL else Refused
    return refusal(f"cannot store {source} in {store}: {error.strerror} (nothing was stored)")


def _make_directories(path):
    """Create `path` and its missing parents, fsyncing each parent so that they survive."""
    missing = []
    path = os.path.abspath(path)
    while not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    for directory in reversed(missing):
        with suppress(FileExistsError):  # made meanwhile by a concurrent writer
            os.mkdir(directory)
        files.fsync_directory(os.path.dirname(directory))


class LocalStore:
    """The store in a directory, `where` (objects.ArtifactStore): this module's functions."""

    def __init__(self, where: str):
        self.where = where

    def name(self, sha256: str) -> str:
        return object_path(self.where, sha256)

    def store_file(self, source, max_bytes=MAX_BYTES_DEFAULT, expected_sha256=None, progress=None):
        return store_file(self.where, source, max_bytes, expected_sha256, progress)

    def store_stream(
        self, read, source, max_bytes=MAX_BYTES_DEFAULT, size=None, progress=None,
        expected_sha256=None,
    ):  # fmt: skip
        return store_stream(self.where, read, source, max_bytes, size, progress, expected_sha256)

    def staging(self, source: str, max_bytes: int = MAX_BYTES_DEFAULT) -> Staging:
        return Staging(self.where, source, max_bytes)

    def place(self, staged: Staged, source: str) -> Stored:
        return place(self.where, staged, source)

    def verify(self, sha256: str, size: int) -> str | None:
        return verify(self.where, sha256, size)

    def rehash(self, sha256: str) -> str | None:
        return rehash(self.where, sha256)

    def problems(self, kept, hash_again=False):
        return problems(self.where, kept, hash_again)

    def objects(self) -> dict[str, int]:
        return objects(self.where)

    def remove(self, sha256s, dry_run=False) -> list[Removed]:
        return remove(self.where, sha256s, dry_run)

    def remove_stale(self, dry_run=False) -> list[str]:
        removed = remove_stale_temp_files(self.where, dry_run)
        return [f"the temporary file {printable(path)}" for path in removed]

    def exists(self) -> bool:
        return os.path.isdir(self.where)
