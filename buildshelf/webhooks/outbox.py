"""The webhooks' outbox: each delivery owed, one row per (target, event), written durably
before any attempt and deleted once delivered or given up, in the state's `webhooks` database.

A row holds the bytes to send, rendered once when the event was noticed, so that every
attempt sends the same body with the same `webhook-id`. Targets are named by a hash of their
URL and format (`target_key`), never by their place in webhooks.json: a file reordered keeps
what each target is owed, and a target removed keeps its rows until it comes back or they
are older than any retry.
"""

import dataclasses
import hashlib
import json
import os
import sqlite3
import threading
from dataclasses import dataclass

from buildshelf import state

DATABASE = "webhooks"

SCHEMA = state.Schema(
    DATABASE,
    migrations=(
        """
CREATE TABLE IF NOT EXISTS deliveries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- the order events happened in
    target TEXT NOT NULL,                   -- target_key(url, format)
    event TEXT NOT NULL,                    -- the event's id (webhook-id)
    type TEXT NOT NULL,
    project TEXT NOT NULL,
    number INTEGER NOT NULL,
    body BLOB NOT NULL,
    headers TEXT NOT NULL,                  -- a JSON object
    created REAL NOT NULL,                  -- epoch seconds the event was noticed
    attempts INTEGER NOT NULL DEFAULT 0,
    first_failure REAL,                     -- epoch seconds, the first attempt that failed
    delay REAL,                             -- the last back-off delay, seconds
    next_attempt REAL NOT NULL,             -- epoch seconds
    UNIQUE (target, event)
);
CREATE INDEX IF NOT EXISTS deliveries_by_target ON deliveries (target, seq);
""",
    ),
    # FULL: a commit is on the disk when it returns, so an event noticed is never lost to a
    # crash or a power cut (WAL's NORMAL may lose the last commits).
    pragmas=("synchronous=FULL",),
)


def left_without_targets(state_dir: str, targets_path: str) -> str | None:
    """What to say when there is no targets file but an outbox in `state_dir`: a server there
    had webhook targets, and one restored from a backup that left the file out would send
    nothing, silently (issue 38). None when there is nothing to say."""
    outbox_file = state.database_path(state_dir, SCHEMA.name)
    if os.path.exists(targets_path) or not os.path.exists(outbox_file):
        return None
    return (
        f"there is no {targets_path}, but {outbox_file} is there: a server here had webhook "
        "targets (restored from a backup without the file?), and no webhook is sent until it "
        "is back (docs/running.md#backing-up-and-restoring); if webhooks are no longer wanted, "
        "remove the outbox"
    )


def target_key(url: str, format: str) -> str:
    """What names a target in the outbox: neither its URL nor its place in the file."""
    return hashlib.sha256(f"{format}\n{url}".encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Delivery:
    """One delivery owed: an event's rendered bytes for one target."""

    seq: int
    target: str
    event: str
    type: str
    project: str
    number: int
    body: bytes
    headers: dict
    created: float
    attempts: int
    first_failure: float | None
    delay: float | None
    next_attempt: float

    def failed(self, now: float, delay: float, next_attempt: float) -> "Delivery":
        """This delivery after an attempt failed at `now`, the next one due at
        `next_attempt`, `delay` the back-off it waits."""
        first = self.first_failure if self.first_failure is not None else now
        return dataclasses.replace(
            self,
            attempts=self.attempts + 1,
            first_failure=first,
            delay=delay,
            next_attempt=next_attempt,
        )


@dataclass(frozen=True)
class Owed:
    """A delivery to write: what `Outbox.add` takes."""

    target: str
    event: str
    type: str
    project: str
    number: int
    body: bytes
    headers: dict


class Outbox:
    """The outbox in `state_dir`. Its methods may be called from any thread: one connection,
    one lock (each call is one short transaction)."""

    def __init__(self, state_dir: str):
        self._db = state.open_database(state_dir, SCHEMA)
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def add(self, owed: list[Owed], now: float) -> int:
        """Write `owed` in one transaction, in the order given: how many were new (a row
        already there for the same target and event is kept as it is)."""
        rows = [
            (o.target, o.event, o.type, o.project, o.number, o.body, json.dumps(o.headers), now)
            for o in owed
        ]
        with self._lock, self._db:
            before = self._db.total_changes
            self._db.executemany(
                "INSERT OR IGNORE INTO deliveries (target, event, type, project, number, body, "
                "headers, created, next_attempt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)",
                rows,
            )
            return self._db.total_changes - before

    def pending(self, target: str, after: int = 0, limit: int = 50) -> list[Delivery]:
        """The next `limit` deliveries owed to `target` after `seq` `after`, oldest first:
        a batch, so that memory stays bounded whatever is owed."""
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, target, event, type, project, number, body, headers, created, "
                "attempts, first_failure, delay, next_attempt FROM deliveries "
                "WHERE target = ? AND seq > ? ORDER BY seq LIMIT ?",
                (target, after, limit),
            ).fetchall()
        return [_delivery(row) for row in rows]

    def failed(self, delivery: Delivery, now: float, delay: float, next_attempt: float) -> Delivery:
        """Record a failed attempt of `delivery`, the next one due at `next_attempt`."""
        after = delivery.failed(now, delay, next_attempt)
        with self._lock, self._db:
            self._db.execute(
                "UPDATE deliveries SET attempts = attempts + 1, first_failure = ?, delay = ?, "
                "next_attempt = ? WHERE seq = ?",
                (after.first_failure, delay, next_attempt, delivery.seq),
            )
        return after

    def done(self, delivery: Delivery) -> None:
        """Forget `delivery`: delivered, or given up."""
        with self._lock, self._db:
            self._db.execute("DELETE FROM deliveries WHERE seq = ?", (delivery.seq,))

    def count(self, target: str | None = None) -> int:
        """How many deliveries are owed (to `target`)."""
        with self._lock:
            if target is None:
                return self._db.execute("SELECT count(*) FROM deliveries").fetchone()[0]
            return self._db.execute(
                "SELECT count(*) FROM deliveries WHERE target = ?", (target,)
            ).fetchone()[0]

    def expire(self, keep: set[str], before: float) -> list[tuple[str, int]]:
        """Delete the deliveries of targets not in `keep` noticed before `before` (a target
        removed from the file for longer than any retry): (target, how many) of each."""
        with self._lock, self._db:
            gone = self._db.execute(
                "SELECT target, count(*) FROM deliveries WHERE created < ? GROUP BY target",
                (before,),
            ).fetchall()
            gone = [(target, n) for target, n in gone if target not in keep]
            for target, _ in gone:
                self._db.execute(
                    "DELETE FROM deliveries WHERE target = ? AND created < ?", (target, before)
                )
        return gone


def _delivery(row: sqlite3.Row | tuple) -> Delivery:
    *head, headers, created, attempts, first, delay, next_attempt = row
    return Delivery(*head, json.loads(headers), created, attempts, first, delay, next_attempt)
