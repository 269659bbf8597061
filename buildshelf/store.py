"""The data directory as an immutable `Snapshot`, replaced when its files change.

Requests read the current snapshot and never a file. A watcher thread checks the files' stat
stamps and reads what changed on a reader thread with a deadline, so that one file that hangs
or parses slowly never stops the others from reloading. Nothing here knows about HTTP; what a
file may hold is `datafile.py`'s business.
"""

import errno
import gc
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from buildshelf import files
from buildshelf.datafiles.datafile import DataError, fingerprint, parse_project
from buildshelf.kept import artifacts, stores
from buildshelf.model import Build, Kept, Project
from buildshelf.periodic import Periodic
from buildshelf.readers import Readers
from buildshelf.text import counted, printable

log = logging.getLogger(__name__)

# A data file larger than this is refused unread: memory stays bounded whatever is dropped in.
MAX_FILE_BYTES = 1 << 30


@dataclass(frozen=True, eq=False)
class Snapshot:
    """Everything served at one moment. Never changed: a reload builds a new one."""

    projects: dict[str, Project]  # by slug, in slug order
    # name in the data directory ('.' for the directory itself) -> DataError: what is not
    # served as it is on disk
    errors: dict[str, DataError] = field(default_factory=dict)
    loaded_at: float = field(default_factory=time.time)  # when this snapshot replaced the last

    def project(self, slug: str) -> Project | None:
        """The project named `slug` (any letter case), or None."""
        if not slug.isascii():  # str.lower() maps some non-ASCII letters onto ASCII ones
            return None
        return self.projects.get(slug.lower())


# --- the directory ---------------------------------------------------------------------------


def data_files(directory: str) -> dict[str, str]:
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


def read_regular_file(path: str) -> tuple[bytes, os.stat_result]:
    """The bytes and stat of the regular file at `path`; never blocks on a FIFO or device."""
    fd, st = files.open_regular(path)
    try:
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


def read_projects(directory: str) -> Iterator[tuple[str, Project | DataError]]:
    """(path, its Project or why it is not one) for every project file, in file order."""
    for slug, path in sorted(data_files(directory).items()):
        try:
            yield path, parse_project(path, slug, read_regular_file(path)[0])
        except DataError as error:
            yield path, error
        except OSError as error:
            yield path, DataError(path, error.strerror or str(error))


def stamp(path):
    """What tells a changed file from an unchanged one without reading it (as linecache)."""
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size, st.st_ino


# A file changed again within the file system's timestamp granularity after we read it would
# keep its stamp: a file this young is read again (git's "racy clean" problem).
RACY_NS = 2_000_000_000
# How long one check waits for a file before going on without it. A file still being read
# then (a hung network mount, a huge parse) keeps its last good version and is reported as
# stalled; its read goes on, and is picked up by a later check when it completes.
READ_WAIT = 1.0
# The first load waits longer: a large data directory takes seconds to parse.
STARTUP_WAIT = 60.0
# While requests are served, a larger file is parsed by the path that lets other threads run
# (parse_project's quick=False), so that the pause of the quick path, which holds the
# interpreter lock for the whole file, stays short (docs/performance.md); the other path
# costs more memory (its parse leaves the heap fragmented), so it is kept for the files that
# need it.
QUICK_RELOAD_BYTES = 100 << 20


# The key of the objects' check among the reads under way: never a project's slug.
OBJECTS = "artifacts/"


def _unavailable(store_dir, kept, stamps):
    """(slug, build, kept file, its object's path and what is wrong with it) for `kept`'s
    problems.

    Those of a project whose file no longer has the stamp it was read with (`stamps`: slug ->
    (path, stamp)) are left out: a yank or a replace rewrites the file, then deletes the
    objects it no longer names, and the next check reads the new file."""
    changed = {}

    def unchanged(slug):
        if slug not in changed:
            path, read = stamps[slug]
            try:  # a file that could not be read has no stamp: its problems stand
                changed[slug] = bool(read) and stamp(path) != read
            except OSError:
                changed[slug] = True
        return not changed[slug]

    store = stores.opened(store_dir)
    return tuple(
        (slug, build, file, f"{printable(store.name(file.sha256))} {problem}")
        for slug, build, file, problem in store.problems(kept)
        if unchanged(slug)
    )


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
        self,
        directory,
        check_interval=1.0,
        read_wait=READ_WAIT,
        startup_wait=STARTUP_WAIT,
        artifacts_dir=None,
    ):
        self.directory = os.fspath(directory)
        self.artifacts = artifacts_dir or artifacts.default_store(self.directory)
        self.read_wait = read_wait
        self._reload_lock = threading.Lock()
        self._files = {}  # slug -> _Loaded
        self._directory_error = None
        self._snapshot = Snapshot({})
        self._unavailable = ()  # (slug, build, file, problem) of kept files not to be sent
        self._readers = Readers()  # keys: a slug, "." for the listing, OBJECTS
        self._check_started = None  # monotonic time of the check under way, if any
        self._last_check_began = None  # monotonic time the latest check began
        self.last_check = None  # wall-clock time the last check ended
        self.reloads = 0  # snapshots that replaced another while serving (for /metrics)
        self._serving = False  # once requests may come: big files are parsed politely then
        self._watcher = Periodic(
            "buildshelf-reload", check_interval, self.refresh, log,
            "checking the data files failed; trying again",
        )  # fmt: skip
        self._listeners = []  # on_change's callbacks
        with self._reload_lock:
            self._refresh_locked(startup_wait)
        self._serving = True

    def snapshot(self) -> Snapshot:
        """The current snapshot: never waits, never touches a file."""
        return self._snapshot

    def unavailable(self) -> tuple[tuple[str, Build, Kept, str], ...]:
        """(project slug, build, kept file, problem) for each kept file of a served build
        (its primary or an extra, Build.kept_files) whose object is missing or damaged, as
        the last check found, the problem naming the object's path ("/srv/.../ab/abcd... is
        missing"): never waits, never touches a file."""
        return self._unavailable

    def refreshed(self) -> Snapshot:
        """The snapshot after a check begun no earlier than this call: for a request that
        found the disk ahead of the snapshot (a kept file's object deleted by a yank or a
        replace, which rewrote the project file first, before the watcher read it). A check
        begun meanwhile for another request serves this one too, so that many such requests
        cost one check. A slow disk holds a request no longer than it holds the watcher:
        read_wait for the lock, and each read with its deadline; then the snapshot is the
        newest there is."""
        asked = time.monotonic()
        if not self._reload_lock.acquire(timeout=self.read_wait):
            return self._snapshot
        try:
            if self._last_check_began < asked:
                self._refresh_locked(self.read_wait)
        finally:
            self._reload_lock.release()
        return self._snapshot

    def refresh(self) -> Snapshot:
        """Check the files now and reload what changed; returns the current snapshot."""
        with self._reload_lock:
            self._refresh_locked(self.read_wait)
        return self._snapshot

    def on_change(self, callback) -> None:
        """Call `callback(snapshot)` with each new snapshot once it is served, on the thread
        that made it (the watcher's, or a request's that refreshed): so it must only take
        note and return at once."""
        self._listeners.append(callback)

    def start(self) -> None:
        """Check the files every `check_interval` seconds on a thread of its own."""
        self._watcher.start()

    def stop(self) -> None:
        self._watcher.stop()
        self._readers.stop()

    def progress(self) -> tuple[float | None, dict[str, float]]:
        """(seconds the check under way has taken, or None; {file name: seconds} of the reads
        that have outlasted `read_wait`)."""
        now = time.monotonic()
        started = self._check_started
        stalled = {
            printable(key if key in (".", OBJECTS) else key + ".json"): seconds
            for key, seconds in self._readers.under_way(now).items()
            if seconds > self.read_wait
        }
        return (None if started is None else now - started), stalled

    def _refresh_locked(self, wait_seconds):
        self._check_started = self._last_check_began = time.monotonic()
        try:
            self._check(self._check_started + wait_seconds)
        finally:
            self._check_started = None
            self.last_check = time.time()

    def _check(self, deadline):
        listing = {".": self._readers.start(".", data_files, self.directory)}
        if not self._readers.finish(listing, deadline):
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
                slug: self._readers.start(
                    slug, self._load, slug, path, self._files.get(slug), self._serving
                )
                for slug, path in paths.items()
            }
            done = self._readers.finish(reads, deadline)
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
        self._check_objects()

    def _check_objects(self):
        """Stat the objects of the kept files served: one deleted or cut short by hand, or
        by a full disk, is reported within a check (a download of it is refused anyway)."""
        kept = [
            (project.slug, build, file)
            for project in self._snapshot.projects.values()
            for build in project.hosted_builds
            for file in build.kept_files
        ]
        if not kept:
            self._unavailable = ()
            return
        # A project is served from its file's last good version, read with this stamp.
        stamps = {
            slug: (os.path.join(self.directory, slug + ".json"), loaded.stamp)
            for slug, loaded in self._files.items()
        }
        reads = {OBJECTS: self._readers.start(OBJECTS, _unavailable, self.artifacts, kept, stamps)}
        if not self._readers.finish(reads, time.monotonic() + self.read_wait):
            return  # the store's file system hangs: keep the last report
        unavailable = reads[OBJECTS].result()
        before = {(s, b.number, f.file): problem for s, b, f, problem in self._unavailable}
        now = {(s, b.number, f.file): problem for s, b, f, problem in unavailable}
        for (slug, number, name), problem in now.items():
            if before.get((slug, number, name)) != problem:
                log.error(
                    "the file of build %d of %s, %s, is unavailable: its object %s",
                    number,
                    slug,
                    name,
                    problem,
                )
        for slug, number, name in before.keys() - now.keys():
            log.info("build %d of %s: its file %s is no longer unavailable", number, slug, name)
        self._unavailable = unavailable

    def _publish(self):
        files = self._files
        projects = {slug: files[slug].project for slug in sorted(files) if files[slug].project}
        errors = {loaded.error.name: loaded.error for loaded in files.values() if loaded.error}
        if self._directory_error:
            errors["."] = self._directory_error
        self._snapshot = snapshot = Snapshot(projects, errors, time.time())
        if self._serving:  # not the first load
            self.reloads += 1
        for callback in self._listeners:
            try:
                callback(snapshot)
            except Exception:  # a listener's bug must not stop reloading
                log.exception("a listener of new snapshots failed")

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
        digest = fingerprint(data)
        if known and known.digest == digest:  # touched, or rewritten with the same bytes
            return _Loaded(file_stamp, digest, racy, known.project, known.error)
        started = time.perf_counter()
        try:
            project = parse_project(
                path,
                slug,
                data,
                quick=not serving or len(data) <= QUICK_RELOAD_BYTES,
                digest=digest,
            )
        except DataError as error:
            kept = known and known.project
            outcome = "still serving its last good version" if kept else "not served"
            for line in error.lines():
                log.error("%s (%s)", line, outcome)
            return _Loaded(file_stamp, digest, racy, kept, error)
        log.info(
            "%s %s: %s in %.0f ms",
            "reloaded" if known else "loaded",
            slug,
            counted(len(project.builds), "build"),
            (time.perf_counter() - started) * 1000,
        )
        return _Loaded(file_stamp, digest, racy, project)
