"""Sending to one webhook target: each attempt, and the target's delivery thread.

An attempt POSTs a delivery's bytes within ATTEMPT_SECONDS however slowly the receiver
answers, follows no redirect (`post`), and signs them at that moment (`signed_now`); the
answer says how long to wait before the next request (`wait_asked`: Retry-After, Discord's
`retry_after` and rate-limit headers). A target's thread (`Sender`) sends its deliveries from
the outbox one at a time, in the order they happened, each until it is delivered, refused or
given up, backing off between attempts (`next_delay`): a receiver that hangs or fails holds up
no one but itself.

A target is named in logs by its index and host only: its URL is a credential.
"""

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from buildshelf import http_client
from buildshelf.http_client import HttpError
from buildshelf.web.conditional import http_date
from buildshelf.webhooks import formats
from buildshelf.webhooks.outbox import Delivery, Outbox
from buildshelf.webhooks.targets import Target

log = logging.getLogger(__name__)

ATTEMPT_SECONDS = 10  # an attempt's whole time: connecting, sending, the answer's head and body
FIRST_RETRY = (5, 10)  # seconds: the first retry comes within 10 s
GROWTH = (1.5, 2.0)  # each delay is the last times this (jittered): at most double
MAX_DELAY = 3600  # seconds: an hour at most between attempts
GIVE_UP = 24 * 3600  # an event is dropped once it is this old and its last attempt failed
BATCH = 50  # deliveries read from the outbox at a time, per target: memory stays bounded
ANSWER_BYTES = 64 << 10  # of an answer's body, read for Discord's retry_after and no more
# How often a thread looks again: the notifier at webhooks.json's stamp, a target's thread at
# the outbox.
STAMP_SECONDS = 1.0
USER_AGENT = "Buildshelf-Webhooks (+https://github.com/buildshelf)"

# Outcomes of an attempt, as /metrics counts them.
DELIVERED = "delivered"  # answered 2xx
FAILED = "failed"  # to be tried again (connection, timeout, 5xx, 429)
REJECTED = "rejected"  # a 3xx or another 4xx: not tried again
DROPPED = "dropped"  # failed for GIVE_UP: given up
OUTCOMES = (DELIVERED, FAILED, REJECTED, DROPPED)


# --- one attempt ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict  # names in lower case
    body: bytes  # its first ANSWER_BYTES


Timeout = http_client.Timeout  # what post raises when the attempt's time is up


def post(url: str, body: bytes, headers: dict, seconds: float = ATTEMPT_SECONDS) -> Answer:
    """POST `body` to `url` and read the answer, all within `seconds` however slowly the
    receiver drips it; a redirect is an answer like any other, never followed. An attempt
    with no answer is http_client.HttpError, whose `reason` (never str(), which names the
    URL) says why."""
    with http_client.request(
        url,
        http_client.Deadline(seconds),
        method="POST",
        body=body,
        headers={**headers, "User-Agent": USER_AGENT},
        redirects=False,
    ) as answer:
        data = answer.first(ANSWER_BYTES)
        return Answer(answer.status, {k.lower(): v for k, v in answer.headers.items()}, data)


def signed_now(target: Target, body: bytes, headers: dict, now: float) -> dict:
    """`headers` with a signature of this moment, for a signed request: the same webhook-id
    and body on every attempt, but receivers refuse a webhook-timestamp more than a few
    minutes old (Standard Webhooks' libraries: five), which a retry's would be."""
    if "webhook-signature" not in headers or target.secret is None:
        return headers
    stamp = str(int(now))
    signature = formats.sign(target.secret, headers["webhook-id"], stamp, body)
    return {**headers, "webhook-timestamp": stamp, "webhook-signature": signature}


def wait_asked(answer: Answer, now: float) -> float | None:
    """Seconds the receiver asked us to wait before the next request: Retry-After (seconds or
    a date), Discord's JSON `retry_after` and X-RateLimit-Reset-After; None if none."""
    asked = []
    value = answer.headers.get("retry-after", "").strip()
    if value:
        try:
            asked.append(float(value))
        except ValueError:
            when = http_date(value)
            if when is not None:
                asked.append(when - now)
    if answer.status == 429 or answer.headers.get("x-ratelimit-remaining") == "0":
        try:
            asked.append(float(answer.headers.get("x-ratelimit-reset-after", "")))
        except ValueError:
            pass
    if answer.status == 429 and answer.body[:1] == b"{":
        try:
            retry_after = msgspec.json.decode(answer.body).get("retry_after")
        except (msgspec.DecodeError, AttributeError):
            retry_after = None
        if type(retry_after) in (int, float):
            asked.append(float(retry_after))
    asked = [min(max(seconds, 0.0), MAX_DELAY) for seconds in asked if seconds == seconds]
    return max(asked) if asked else None


def next_delay(last: float | None, rng: random.Random) -> float:
    """The wait before the next attempt after one that failed, `last` the wait before it (None
    after the first attempt): within FIRST_RETRY, then growing with jitter, at most doubling,
    at most MAX_DELAY."""
    if last is None:
        return rng.uniform(*FIRST_RETRY)
    return min(last * rng.uniform(*GROWTH), MAX_DELAY * rng.uniform(0.9, 1.0))


# --- a target's thread -------------------------------------------------------------------------


@dataclass(frozen=True)
class Means:
    """What every target's thread sends with, the Notifier's: `outbox()`, the outbox (opened
    when first needed); `clock`, `sleep(stopping, seconds)`, `rng`, `post` and an attempt's
    `seconds`, real or a test's; `complain(message, *args)`, which logs the exception being
    handled unless it was the last logged, by any thread; `count(target, outcome)`, told of
    each attempt, for /metrics."""

    outbox: Callable[[], Outbox]
    clock: Callable[[], float]
    sleep: Callable[[threading.Event, float], bool]
    rng: random.Random
    post: Callable[..., Answer]
    seconds: float
    complain: Callable[..., None]
    count: Callable[[Target, str], None]


class Sender:
    """The delivery thread of one target (`start`), and what it knows of the target's state;
    `wake` it when deliveries are owed, `stopping` to stop it."""

    def __init__(self, key: str, target: Target, means: Means):
        self.key, self.target, self.means = key, target, means
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.not_before = 0.0  # the receiver's rate limit: no request before this time
        self.failing_since = None  # the first failure since the last success
        # Deliveries finished (delivered, refused, given up) whose row could not be deleted
        # yet (the outbox locked, its disk full): deleted again, never sent again.
        self.finished: set[int] = set()
        self.thread = None

    def start(self) -> None:
        self.thread = threading.Thread(
            target=self._deliver_all,
            name=f"buildshelf-webhook-{self.target.index}",
            daemon=True,
        )
        self.thread.start()

    def _deliver_all(self) -> None:
        """The thread: the target's deliveries one at a time, oldest first, BATCH at a time."""
        while not self.stopping.is_set():
            try:
                self.wake.clear()
                batch = self.means.outbox().pending(self.key, limit=BATCH)
                if not batch:
                    self.wake.wait(STAMP_SECONDS)
                    continue
                for delivery in batch:
                    if delivery.seq in self.finished:
                        self._forget(delivery)
                    elif not self._deliver(delivery):
                        return
            except Exception:  # the outbox unwritable, a bug: what is owed stays owed
                if self.stopping.is_set():
                    return
                self.means.complain("webhooks: delivering to target %d failed", self.target.index)
                self.stopping.wait(STAMP_SECONDS)

    def _deliver(self, delivery: Delivery) -> bool:
        """Attempt `delivery` until it is delivered, rejected or given up: False if stopped."""
        means = self.means
        while True:
            # At most MAX_DELAY: the wall clock set back must not hold a target for longer.
            wait = min(max(delivery.next_attempt, self.not_before) - means.clock(), MAX_DELAY)
            if wait > 0 and means.sleep(self.stopping, wait):
                return False
            if self.stopping.is_set():
                return False
            target = self.target
            problem, answer = None, None
            try:
                headers = signed_now(target, delivery.body, delivery.headers, means.clock())
                answer = means.post(target.url, delivery.body, headers, means.seconds)
            except HttpError as error:
                problem = error.reason
            now = means.clock()
            asked = None
            if answer is not None:
                asked = wait_asked(answer, now)
                if answer.headers.get("x-ratelimit-remaining") == "0" and asked is not None:
                    self.not_before = now + asked  # Discord's bucket is empty: wait for it
                if 200 <= answer.status < 300:
                    self.failing_since = None
                    self._forget(delivery)
                    means.count(target, DELIVERED)
                    return True
                if answer.status == 429 or answer.status >= 500:
                    problem = f"answered {answer.status}"
                else:
                    why = "a redirect, not followed" if 300 <= answer.status < 400 else "refused"
                    self._failing(now)
                    log.error(
                        "webhooks: target %d (%s) answered %d (%s) to %s: not tried again",
                        target.index,
                        target.host,
                        answer.status,
                        why,
                        _named(delivery),
                    )
                    self._forget(delivery)
                    means.count(target, REJECTED)  # last: a test waits for it, then reads
                    return True
            self._failing(now)
            if now - delivery.created >= GIVE_UP:
                log.error(
                    "webhooks: target %d (%s): gave up on %s after %d attempts over %d hours "
                    "(last: %s)",
                    target.index,
                    target.host,
                    _named(delivery),
                    delivery.attempts + 1,
                    GIVE_UP // 3600,
                    problem,
                )
                self._forget(delivery)
                means.count(target, DROPPED)
                return True
            delay = next_delay(delivery.delay, means.rng)
            wait = asked if asked is not None else delay
            try:
                delivery = means.outbox().failed(delivery, now, delay, now + wait)
            except Exception:  # not recorded (the outbox locked, its disk full): waited for all
                # the same, so that the receiver is not tried again at once, and on each second
                means.complain("webhooks: recording a failed attempt failed; backing off anyway")
                delivery = delivery.failed(now, delay, now + wait)
            log.warning(
                "webhooks: target %d (%s): %s, attempt %d of %s: tried again in %.0f s",
                target.index,
                target.host,
                problem,
                delivery.attempts,
                _named(delivery),
                wait,
            )
            means.count(target, FAILED)

    def _forget(self, delivery: Delivery) -> None:
        """Delete `delivery`, finished; if that fails (and raises), it is still never sent
        again: the thread deletes it when it comes next."""
        self.finished.add(delivery.seq)
        self.means.outbox().done(delivery)
        self.finished.discard(delivery.seq)

    def _failing(self, now):
        if self.failing_since is None:
            self.failing_since = now


def _named(delivery: Delivery) -> str:
    return f"{delivery.type} {delivery.project} build {delivery.number} (event {delivery.event})"
