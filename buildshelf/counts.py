"""Downloads counted: one per client network and build within a window, in memory on the
request path, written in batches to the state's `downloads` database by a thread of its own.

`Counter.count` runs on request threads: a few dict operations under one lock, never the
disk. The client network (an IPv4 /24, an IPv6 /64) is kept in memory only, as long as the
window, in a table of bounded size; the database holds counts by project, build, file and
UTC day, never an address. `Counter.tally()` is an immutable `Tally` of what the database
holds plus what waits to be written, replaced after each batch.
"""

import collections
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from buildshelf import addresses, state
from buildshelf.model import Kept
from buildshelf.periodic import Periodic
from buildshelf.text import counted as counted_noun

log = logging.getLogger(__name__)

DEDUP_SECONDS = 24 * 3600  # the window: one count per network and build per 24 h
FLUSH_SECONDS = 10  # counts reach SQLite (and the read routes) this often
# Networks remembered at most, the oldest forgotten first: 120 bytes each (measured with
# tracemalloc over 200,000 of them; bench/count_flood.py measures the server's RSS), so 30 MB
# at most, and room for a day of 250,000 distinct networks before one is forgotten early
# (and may then count twice).
MAX_REMEMBERED = 250_000
# Rows (project, build, file, day) waiting in memory at most while the database cannot be
# written; the count of a new row beyond them is lost (and logged). A row costs about 300
# bytes and there is one per file downloaded per day: a week's outage of a large site fits.
MAX_PENDING_ROWS = 100_000
DATABASE = "downloads"
_V4 = 1 << 64  # IPv4 networks are keyed above every IPv6 /64
SCHEMA = state.Schema(
    DATABASE,
    migrations=(
        """
CREATE TABLE IF NOT EXISTS downloads (
    project TEXT NOT NULL,
    build INTEGER NOT NULL,
    file TEXT NOT NULL,          -- the kept file's sha256, or the build's downloadUrl
    day TEXT NOT NULL,           -- YYYY-MM-DD, UTC
    downloads INTEGER NOT NULL,
    PRIMARY KEY (project, build, file, day)
) WITHOUT ROWID
""",
    ),
)

_ADD = """
INSERT INTO downloads (project, build, file, day, downloads) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (project, build, file, day) DO UPDATE SET downloads = downloads + excluded.downloads
"""


def network(address: str) -> int | None:
    """The client network of an address as an int key: IPv4 /24, IPv6 /64 (an IPv4-mapped
    IPv6 address is IPv4); None for what is not an address."""
    found = addresses.packed(address)
    if found is None:
        return None
    if len(found) == 4:
        return _V4 | int.from_bytes(found[:3], "big")
    return int.from_bytes(found[:8], "big")


def file_key(build: Kept) -> str:
    """What a download's row names the file by (a build's primary, or an extra file): the
    kept file's SHA-256, else its downloadUrl (a changed Jenkins URL moves no kept file's
    history)."""
    return build.sha256 if build.hosted else build.download_url


Row = tuple[str, int, str, str]  # (project slug, build number, file key, 'YYYY-MM-DD' UTC)


@dataclass(frozen=True)
class Tally:
    """The downloads counted, as of one moment (immutable; a new one replaces it)."""

    rows: Mapping[Row, int]  # file key: the kept file's sha256, or the build's downloadUrl
    started: str | None  # first day any download was counted ('YYYY-MM-DD'), or None
    # Indexed once, in __post_init__: slug -> build -> day -> downloads; slug -> file keys.
    _builds: Mapping = field(init=False, repr=False, compare=False)
    _files: Mapping = field(init=False, repr=False, compare=False)
    _totals: Mapping = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        builds, files, totals = {}, {}, {}
        for (slug, number, key, day), downloads in self.rows.items():
            days = builds.setdefault(slug, {}).setdefault(number, {})
            days[day] = days.get(day, 0) + downloads
            files.setdefault(slug, set()).add(key)
            totals[slug] = totals.get(slug, 0) + downloads
        frozen = {
            slug: MappingProxyType(
                {
                    number: MappingProxyType(dict(sorted(days.items())))
                    for number, days in by.items()
                }
            )
            for slug, by in builds.items()
        }
        object.__setattr__(self, "rows", MappingProxyType(dict(self.rows)))
        object.__setattr__(self, "_builds", frozen)
        object.__setattr__(self, "_files", {slug: frozenset(keys) for slug, keys in files.items()})
        object.__setattr__(self, "_totals", totals)

    @classmethod
    def of(cls, rows: Mapping[Row, int]) -> "Tally":
        """The tally of `rows`, started on their first day."""
        return cls(rows, min((row[3] for row in rows), default=None))

    def builds(self, slug: str) -> Mapping[int, Mapping[str, int]]:
        """Build number -> {day: downloads}, the files of one build summed; {} if none."""
        return self._builds.get(slug, _NONE)

    def files(self, slug: str) -> frozenset[str]:
        """The file keys counted for the project."""
        return self._files.get(slug, frozenset())

    def total(self, slug: str) -> int:
        """Every download of the project counted."""
        return self._totals.get(slug, 0)


_NONE = MappingProxyType({})
EMPTY = Tally({}, None)


class Counter:
    """Downloads counted in memory and written to `state_dir`'s `downloads` database every
    `flush_seconds` by start()'s thread, and at stop()."""

    def __init__(
        self,
        state_dir: str,
        *,
        window=DEDUP_SECONDS,
        flush_seconds=FLUSH_SECONDS,
        clock=time.time,
        max_remembered=MAX_REMEMBERED,
        max_pending_rows=MAX_PENDING_ROWS,
    ):
        self.state_dir, self.window = state_dir, window
        self.clock = clock
        self.max_remembered, self.max_pending_rows = max_remembered, max_pending_rows
        self.counted = 0  # running totals since start (read by /metrics)
        self.deduplicated = 0
        self.lost = 0  # counts dropped: more rows waiting than max_pending_rows
        self.problem: str | None = None  # why counts wait in memory, or None
        self._lock = threading.Lock()  # request threads and the flushing thread share these
        self._seen = {}  # (network, build) key -> when counted, the oldest first
        self._order = collections.deque()  # the same keys, in the order counted
        self._build_ids = {}  # (slug, number) -> a small int, for compact keys
        self._pending = {}  # Row -> downloads not yet written
        self._day = (None, None)  # (day number, 'YYYY-MM-DD') of the last count
        self._stored = {}  # Row -> downloads, as the database holds them
        self._loaded = False  # whether _stored was read from the database
        self._tally = EMPTY
        self._connection = None
        self._flush_lock = threading.Lock()  # one batch at a time (the thread, stop, tests)
        self._flusher = Periodic(
            "download counts", flush_seconds,
            lambda: self.flush(),  # looked up each round: a test may wrap it after this
            log, "download counts: flushing failed",
        )  # fmt: skip

    # --- on request threads ---

    def count(self, slug: str, number: int, file_key: str, address: str | None) -> bool:
        """Count a download of `file_key` of build `number` of `slug` by `address`: True if
        counted, False if its network had it counted within the window (or `address` is not
        an address). O(1), never touches the disk."""
        net = network(address)
        if net is None:
            return False
        now = self.clock()
        with self._lock:
            build = self._build_ids.get((slug, number))
            if build is None:
                build = self._build_ids[(slug, number)] = len(self._build_ids)
            key = (build << 65) | net
            self._forget_expired(now)
            if key in self._seen:
                self.deduplicated += 1
                return False
            if len(self._seen) >= self.max_remembered:
                del self._seen[self._order.popleft()]
            self._seen[key] = now
            self._order.append(key)
            row = (slug, number, file_key, self._today(now))
            pending = self._pending.get(row)
            if pending is None and len(self._pending) >= self.max_pending_rows:
                self.lost += 1
            else:
                self._pending[row] = (pending or 0) + 1
            self.counted += 1
            return True

    def tally(self) -> Tally:
        """The downloads counted, at most flush_seconds behind count(); never waits."""
        return self._tally

    def _forget_expired(self, now):
        # Each key is popped once: amortized O(1) per count. A clock set back leaves keys a
        # little longer, never forgets one early.
        order, seen, oldest = self._order, self._seen, now - self.window
        while order and seen[order[0]] <= oldest:
            del seen[order.popleft()]

    def _today(self, now):
        number = int(now // 86400)
        if self._day[0] != number:
            self._day = (number, time.strftime("%Y-%m-%d", time.gmtime(number * 86400)))
        return self._day[1]

    # --- the flushing thread ---

    def start(self) -> None:
        """Start the thread that writes the counts every flush_seconds."""
        self.flush()  # reads what the database holds, so that the first tally has it
        self._flusher.start()

    def stop(self) -> None:
        """Write what is pending, then stop the thread: exact after a graceful stop."""
        self._flusher.stop()
        try:
            self.flush()
        except Exception:  # a bug: say so, and let the server stop
            log.exception("download counts: the last batch failed")
        if self.lost:
            log.error(
                "download counts: %s lost while the database could not be written (more "
                "than %d rows waited)",
                counted_noun(self.lost, "download"),
                self.max_pending_rows,
            )
        if self.problem is not None:
            waiting = sum(self._pending.values())
            log.error(
                "download counts: %s could not be written at stop (%s)",
                counted_noun(waiting, "download"),
                self.problem,
            )
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def flush(self) -> None:
        """Write the pending counts now, and make the next tally."""
        with self._flush_lock:
            with self._lock:
                batch, self._pending = self._pending, {}
            try:
                self._write(batch)
            except (OSError, sqlite3.Error) as error:
                self._wait_in_memory(batch, error)
            else:
                for row, downloads in batch.items():
                    self._stored[row] = self._stored.get(row, 0) + downloads
                if self.problem is not None:
                    log.warning(
                        "download counts: the database is written again, the counts "
                        "that waited in memory too"
                    )
                    self.problem = None
            if batch or self._tally is EMPTY:
                with self._lock:  # only the pending counts: requests wait on this lock
                    pending = list(self._pending.items())
                rows = dict(self._stored)  # the flushing side's alone (self._flush_lock)
                for row, downloads in pending:
                    rows[row] = rows.get(row, 0) + downloads
                self._tally = Tally.of(rows)

    def _write(self, batch):
        if self._connection is None:
            if not batch and not os.path.exists(self._path()):
                self._loaded = True  # nothing stored, and nothing to store yet: no file
                return
            # Locked, full: opened again, its table made, at the next batch.
            self._connection = state.open_database(self.state_dir, SCHEMA)
        if not self._loaded:
            stored = {}
            for project, build, file, day, downloads in self._connection.execute(
                "SELECT project, build, file, day, downloads FROM downloads"
            ):
                stored[(project, build, file, day)] = downloads
            self._stored, self._loaded = stored, True
        if batch:
            with self._connection:
                self._connection.executemany(_ADD, [(*row, n) for row, n in batch.items()])

    def _path(self):
        return os.path.join(self.state_dir, DATABASE + ".sqlite3")

    def _wait_in_memory(self, batch, error):
        """Put `batch` back before what was counted since, up to max_pending_rows; say once
        why."""
        with self._lock:
            for row, downloads in self._pending.items():
                batch[row] = batch.get(row, 0) + downloads
            kept = dict(list(batch.items())[: self.max_pending_rows])
            self.lost += sum(batch.values()) - sum(kept.values())
            self._pending = kept
        problem = f"the database {DATABASE}.sqlite3 in {self.state_dir} cannot be written: {error}"
        if self.problem is None:
            log.error(
                "download counts: %s; the counts wait in memory (up to %d rows) and are "
                "written when it can be (said once)",
                problem,
                self.max_pending_rows,
            )
        self.problem = problem
