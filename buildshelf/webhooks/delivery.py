"""Webhook delivery: events made from the store's snapshot changes, written to the outbox, and
sent to each target on threads of their own, with retries.

The store tells the `Notifier` of each new snapshot on whatever thread made it; the notifier
only notes it and wakes its own thread, which compares the last snapshot it saw with the
newest (events.py: a build new to a project is `build.published`, one whose content changed
too, with `replaced`, one gone from a project still served `build.yanked`, a yanked one
served again `build.unyanked`), renders each
event for each target that wants it, and writes them to the outbox before any is sent. Each
target has one delivery thread (sending.py's Sender, which the notifier starts and stops as
webhooks.json names the targets), which sends its deliveries one at a time in the order they
happened, so a receiver that hangs or fails holds up no one but itself, and never a request.

A target is named in logs and health by its index and host only: its URL is a credential.
"""

import http.client
import logging
import os
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable

from buildshelf.http_client import HttpError
from buildshelf.store import Snapshot
from buildshelf.webhooks import formats
from buildshelf.webhooks.events import events_between
from buildshelf.webhooks.outbox import Outbox, Owed, left_without_targets, target_key
from buildshelf.webhooks.sending import (
    ATTEMPT_SECONDS,
    GIVE_UP,
    STAMP_SECONDS,
    Answer,
    Means,
    Sender,
    post,
)
from buildshelf.webhooks.targets import (
    PUBLISHED,
    NoTargetsFile,
    Target,
    TargetsError,
    UnknownProject,
    read_targets,
    unknown_projects,
)

log = logging.getLogger(__name__)

FAILING = 15 * 60  # a target failing for longer is reported by /healthz
EXPIRE_SECONDS = 3600  # how often the outbox is swept of removed targets' old deliveries


# --- the notifier ------------------------------------------------------------------------------


def real_sleep(stopping: threading.Event, seconds: float) -> bool:
    """Wait `seconds` unless `stopping` is set first: whether it is."""
    return stopping.wait(seconds)


class Notifier:
    """Turns the store's snapshot changes into webhook deliveries (see the module's text).

    `deliveries` counts the attempts by (target index, outcome); `problems()` is what
    /healthz adds. `clock`, `sleep(stopping, seconds)`, `rng` and `post` are for tests.
    """

    def __init__(
        self,
        store,
        state_dir: str,
        path: str,
        *,
        build_json: Callable,
        public_url: str,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[threading.Event, float], bool] = real_sleep,
        rng: random.Random | None = None,
        post: Callable[..., Answer] = post,
        attempt_seconds: float = ATTEMPT_SECONDS,
    ):
        self.store, self.path = store, path
        self._build_json, self._public_url = build_json, public_url
        self._clock = clock
        self._means = Means(
            lambda: self.outbox,
            clock,
            sleep,
            rng or random.Random(),
            post,
            attempt_seconds,
            self._complain,
            self._count,
        )
        self._state_dir, self._outbox = state_dir, None
        self._outbox_lock = threading.Lock()
        self._complaint = None  # the last error logged by the threads: each logged once
        self.targets: tuple[Target, ...] = ()
        self.file_problem: TargetsError | None = None
        self._stamp = False  # webhooks.json's stamp when last read (None: no file)
        self._workers: dict[str, Sender] = {}
        self._counts = Counter()
        self._lock = threading.Lock()  # of _counts and _workers
        self._newest = self._seen = store.snapshot()  # the first announces nothing
        self._changed = threading.Event()
        self._stopping = threading.Event()
        self._thread = None
        self._last_expiry = 0.0
        # (targets, projects) -> the projects the targets name that are not there; and the
        # (targets, projects) last logged: said once, and again when either changes
        self._unknown: tuple[tuple, list[UnknownProject]] = ((), [])
        self._told = None
        self.reload_targets()
        self._tell_unknown_projects()
        left = left_without_targets(state_dir, path)
        if left:
            log.warning("webhooks: %s", left)
        store.on_change(self._noted)

    @property
    def outbox(self) -> Outbox:
        """The outbox, opened when first needed: a server that never had a target makes no
        database."""
        if self._outbox is None:
            with self._outbox_lock:
                if self._outbox is None:
                    self._outbox = Outbox(self._state_dir)
        return self._outbox

    def _complain(self, message: str, *args) -> None:
        """Log the exception being handled, unless it is the one logged last: an outbox that
        cannot be written fails every second, and says so once."""
        error = sys.exc_info()[1]
        complaint = (message, type(error), str(error))
        if complaint != self._complaint:
            self._complaint = complaint
            log.exception(message, *args)

    # -- what others read

    @property
    def deliveries(self) -> dict[tuple[int, str], int]:
        """(target index, outcome) -> attempts, since start: for /metrics."""
        with self._lock:
            return dict(self._counts)

    def problems(self) -> dict:
        """What /healthz adds: the file refused, the targets failing for over FAILING
        seconds (index and host only), the projects the targets name that are not there;
        {} when all is well."""
        now, problem = self._clock(), self.file_problem
        file = None
        if problem is not None:
            file = {  # as /healthz tells a data file rejected (shapes.WebhooksHealth)
                "file": problem.name,
                "error": problem.located(),
                "errors": problem.lines(located=True),
            }
        with self._lock:
            workers = list(self._workers.values())
        failing = [
            {"target": w.target.index, "host": w.target.host, "failingFor": int(now - since)}
            for w in sorted(workers, key=lambda w: w.target.index)
            if (since := w.failing_since) is not None and now - since > FAILING
        ]
        unknown = [
            {"target": u.target.index, "host": u.target.host, "project": u.project,
             "didYouMean": u.near}
            for u in self.unknown_projects()[1]
        ]  # fmt: skip
        if file is None and not failing and not unknown:
            return {}
        return {"webhooks": {"file": file, "failing": failing, "unknownProjects": unknown}}

    def unknown_projects(self) -> tuple[tuple, list[UnknownProject]]:
        """(targets, projects), and each project the targets name that is not one of those
        projects: the newest snapshot's, and those whose file is rejected (a project all the
        same). Worked out again only when the targets or the projects change."""
        snapshot = self.store.snapshot()
        rejected = {os.path.splitext(name)[0] for name in snapshot.errors}
        now = (self.targets, frozenset(snapshot.projects) | rejected)
        seen, unknown = self._unknown
        if seen != now:
            unknown = unknown_projects(*now)
            self._unknown = now, unknown
        return now, unknown

    def _tell_unknown_projects(self) -> None:
        """Log the projects the targets name that are not there: at start, and again when
        the targets or the projects change, never for each request."""
        now, unknown = self.unknown_projects()
        if now != self._told:
            self._told = now
            if unknown:
                log.warning("webhooks: %s", "; ".join(u.message() for u in unknown))

    # -- the notifier's thread

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="buildshelf-webhooks", daemon=True)
        self._thread.start()
        with self._lock:
            for worker in self._workers.values():
                worker.start()

    def stop(self, wait: float = 2.0) -> None:
        """Stop the threads; a delivery under way is left to finish or time out (it stays in
        the outbox until it is known to be delivered)."""
        self._stopping.set()
        self._changed.set()
        if self._thread is not None:
            self._thread.join()
            try:
                self.announce()  # what the last moments changed is owed too
            except Exception:
                log.exception("webhooks: noting the last changes failed")
        with self._lock:
            workers = list(self._workers.values())
        for worker in workers:
            worker.stopping.set()
            worker.wake.set()
        deadline = time.monotonic() + wait
        for worker in workers:
            if worker.thread is not None:
                worker.thread.join(max(0.0, deadline - time.monotonic()))
        alive = any(w.thread is not None and w.thread.is_alive() for w in workers)
        if self._outbox is not None and not alive:
            self._outbox.close()

    def _noted(self, snapshot: Snapshot) -> None:
        """The store's callback, on any thread: take note, wake the notifier, return."""
        self._newest = snapshot
        self._changed.set()

    def _run(self):
        last_stamp_check = 0.0
        while not self._stopping.is_set():
            try:
                if time.monotonic() - last_stamp_check >= STAMP_SECONDS:
                    last_stamp_check = time.monotonic()
                    self.reload_targets()
                self._tell_unknown_projects()
                self.announce()
                self._expire()
            except Exception:  # a bug, a full disk: the snapshot is kept and tried again
                self._complain("webhooks: noting the data's changes failed; trying each second")
            self._changed.wait(STAMP_SECONDS)
            self._changed.clear()

    def reload_targets(self) -> None:
        """Read webhooks.json again if its stamp changed; keep the last good targets if it
        is refused."""
        try:
            st = os.stat(self.path)
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_mode)
        except OSError:
            stamp = None
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            targets = read_targets(self.path)
        except NoTargetsFile:
            targets = ()
        except TargetsError as error:
            self.file_problem = error
            log.error(
                "webhooks: %s (%s)",
                "\n".join(error.lines(located=True)),
                "keeping the targets in force"
                if self.targets
                else "no webhooks are sent until it is fixed",
            )
            return
        self.file_problem = None
        self._use(targets)

    def _use(self, targets: tuple[Target, ...]) -> None:
        keyed = {target_key(t.url, t.format): t for t in targets}
        with self._lock:
            for key, worker in list(self._workers.items()):
                if key not in keyed:
                    worker.stopping.set()
                    worker.wake.set()
                    del self._workers[key]
            for key, target in keyed.items():
                worker = self._workers.get(key)
                if worker is None:
                    worker = self._workers[key] = Sender(key, target, self._means)
                    if self._thread is not None:
                        worker.start()
                worker.target = target
        if targets or self.targets:
            log.info(
                "webhooks: %d target%s: %s",
                len(targets),
                "" if len(targets) == 1 else "s",
                ", ".join(f"{t.index} ({t.host}, {t.format})" for t in targets) or "none",
            )
        self.targets = targets

    def announce(self) -> int:
        """Write the events between the last snapshot seen and the newest to the outbox, then
        wake the targets' threads: how many deliveries were written."""
        newest, seen = self._newest, self._seen
        if newest is seen:
            return 0
        now = self._clock()
        events = events_between(seen, newest, self._build_json, self._project_url, now)
        owed, targets = [], self.targets
        for event in events:
            for target in targets:
                if target.wants(event.type, event.project):
                    body, headers = formats.render(target, event)
                    owed.append(
                        Owed(
                            target_key(target.url, target.format),
                            event.id,
                            event.type,
                            event.project,
                            event.build["buildNumber"],
                            body,
                            headers,
                        )
                    )
        written = self.outbox.add(owed, now) if owed else 0
        self._seen = newest  # only once the events are on the disk
        for event in events:
            wanting = sum(t.wants(event.type, event.project) for t in targets)
            if wanting:  # without targets, a line per build would only be noise
                log.info(
                    "webhooks: %s %s build %d%s (event %s): %d target%s",
                    event.type,
                    event.project,
                    event.build["buildNumber"],
                    " (replaced)" if event.replaced else "",
                    event.id,
                    wanting,
                    "" if wanting == 1 else "s",
                )
        with self._lock:
            for worker in self._workers.values():
                worker.wake.set()
        return written

    def _project_url(self, slug: str) -> str:
        return formats.project_page(self._public_url, slug)

    def _expire(self):
        now = self._clock()
        # Only once a target opened it: with none, nothing is owed that could be sent.
        if now - self._last_expiry < EXPIRE_SECONDS or self._outbox is None:
            return
        self._last_expiry = now
        with self._lock:
            keep = set(self._workers)
        for _, count in self.outbox.expire(keep, now - GIVE_UP):
            log.warning(
                "webhooks: dropped %d event%s owed to a target removed from %s over %d hours ago",
                count,
                "" if count == 1 else "s",
                os.path.basename(self.path),
                GIVE_UP // 3600,
            )

    def _count(self, target, outcome):
        with self._lock:
            self._counts[target.index, outcome] += 1


# --- webhook test --------------------------------------------------------------------------------


def send_samples(
    targets,
    public_url: str,
    only: int | None = None,
    projects=(),
    post=post,
    seconds=ATTEMPT_SECONDS,
):
    """Send formats.sample_event() to each target (or the one of index `only`), one
    after the other: (target, status or None, what to say) for each. The sample names the
    first of `projects` the target hears of, linked on `public_url`."""
    for target in targets:
        if only is not None and target.index != only:
            continue
        heard = [slug for slug in projects if target.wants(PUBLISHED, slug)]
        event = formats.sample_event(public_url, *heard[:1])
        body, headers = formats.render(target, event)
        try:
            answer = post(target.url, body, headers, seconds)
        except HttpError as error:
            yield target, None, error.reason
            continue
        reason = http.client.responses.get(answer.status, "")
        yield target, answer.status, f"{answer.status} {reason}".strip()
