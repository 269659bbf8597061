"""Webhook delivery against a real receiver on 127.0.0.1: the events a data change makes, the
outbox, the signature as the Standard Webhooks library checks it, retries (the same
webhook-id), a hanging receiver, 429 and Retry-After, redirects not followed, order, a flood of
1,000 builds at Discord's rate in bounded memory, health and the targets file. Time is a fake
clock that sleeping moves on: no test waits for a retry."""

import base64
import contextlib
import json
import logging
import os
import signal
import sqlite3
import threading
import time
import tracemalloc
import urllib.error
import urllib.request
from datetime import UTC, datetime
from unittest import mock

import pytest
import standardwebhooks
import webtest

from buildshelf import cli, server
from buildshelf.store import Store
from buildshelf.web.shapes import Shapes
from buildshelf.webhooks import delivery, outbox, sending
from helpers import ALPHA_BUILDS, bump_mtime, make_build, make_project, real_server, write_file
from test_openapi import validate as validate_schema
from webhook_receiver import HANG, Receiver

KEY = bytes(range(1, 33))
SECRET = "whsec_" + base64.b64encode(KEY).decode()
PUBLIC = "https://builds.example.org"
START = float(int(time.time()))


class FakeTime:
    """A clock that sleeping moves on at once, up to `limit` (then sleepers wait for more)."""

    def __init__(self):
        self.now, self.limit, self.slept = START, float("inf"), []
        self.changed = threading.Condition()

    def clock(self):
        return self.now

    def sleep(self, stopping, seconds):
        with self.changed:
            self.slept.append(seconds)
            while self.now + seconds > self.limit and not stopping.is_set():
                self.changed.wait(0.05)
            if not stopping.is_set():
                self.now += seconds
            return stopping.is_set()

    def run_until(self, limit):
        with self.changed:
            self.limit = limit
            self.changed.notify_all()


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.close()


@pytest.fixture
def fake():
    return FakeTime()


@pytest.fixture
def state(tmp_path):
    return str(tmp_path / "state")


def write_targets(path, *targets, mode=0o600):
    write_file(path, {"targets": list(targets)})
    os.chmod(path, mode)
    bump_mtime(path)
    return path


@pytest.fixture
def make_notifier(data_dir, state, fake, receiver):  # stopped before the receiver
    made = []

    def make(*targets, start=True, **options):
        store = Store(data_dir, check_interval=0)
        path = os.path.join(state, "webhooks.json")
        os.makedirs(state, mode=0o700, exist_ok=True)
        if targets:
            write_targets(path, *targets)
        options = {"clock": fake.clock, "sleep": fake.sleep, "attempt_seconds": 10, **options}
        notifier = delivery.Notifier(
            store,
            state,
            path,
            build_json=Shapes(None, PUBLIC).build_json,
            public_url=PUBLIC,
            **options,
        )
        made.append(notifier)
        if start:
            notifier.start()
        return store, notifier

    yield make
    for notifier in made:
        notifier.stop()


def publish(data_dir, *numbers, slug="alpha", builds=ALPHA_BUILDS, **fields):
    """The project file with `numbers` added (as builds made by make_build)."""
    path = data_dir / f"{slug}.json"
    write_file(path, make_project([*builds, *(make_build(n, **fields) for n in numbers)]))
    bump_mtime(path)


def json_target(receiver, **more):
    return {"url": receiver.url(), "format": "json", "secret": SECRET, **more}


class _Clock(datetime):
    at = START

    @classmethod
    def now(cls, tz=None):
        return datetime.fromtimestamp(cls.at, tz)


def verified(received, now=START):
    """The body as the Standard Webhooks library verifies it at `now` (raising if it does
    not): the signature, and the timestamp within its five minutes of `now`."""
    _Clock.at = now
    with mock.patch.object(standardwebhooks.webhooks, "datetime", _Clock):
        return standardwebhooks.Webhook(SECRET).verify(received.body, received.headers)


# --- events -----------------------------------------------------------------------------------


def test_events_published_replaced_yanked_in_number_order(data_dir, make_notifier, receiver):
    store, notifier = make_notifier(json_target(receiver), start=False)
    assert notifier.announce() == 0  # the first snapshot announces nothing
    builds = [b for b in ALPHA_BUILDS if b["buildNumber"] != 2]  # 2 yanked (gone)
    builds = [make_build(5, "1.21", commit_count=1) if b["buildNumber"] == 5 else b for b in builds]
    write_file(data_dir / "alpha.json", make_project([*builds, make_build(12), make_build(10)]))
    bump_mtime(data_dir / "alpha.json")
    store.refresh()
    assert notifier.announce() == 4
    rows = notifier.outbox.pending(outbox.target_key(receiver.url(), "json"))
    assert [(r.type, r.number) for r in rows] == [
        ("build.yanked", 2),
        ("build.published", 5),
        ("build.published", 10),
        ("build.published", 12),
    ]
    bodies = [json.loads(r.body) for r in rows]
    assert [b["data"]["replaced"] for b in bodies] == [False, True, False, False]
    assert bodies[2]["data"]["build"]["buildNumber"] == 10
    assert bodies[0]["data"]["build"]["isExperimental"] is True  # the yanked build as it was
    assert notifier.announce() == 0  # each change once


def test_a_yank_carries_its_reason_and_an_unyank_is_announced_as_such(
    data_dir, make_notifier, receiver
):
    """A yank keeps the build in its file, marked: the event says why (issue 38); its
    unyank is `build.unyanked`, never a new release."""
    store, notifier = make_notifier(json_target(receiver), start=False)
    assert (
        cli.main(["yank", "alpha", "5", "--reason", "crashes <@here>", "--data", str(data_dir)])
        == 0
    )
    assert cli.main(["yank", "alpha", "7", "--data", str(data_dir)]) == 0
    store.refresh()
    assert notifier.announce() == 2
    assert cli.main(["unyank", "alpha", "5", "--data", str(data_dir)]) == 0
    store.refresh()
    assert notifier.announce() == 1
    rows = notifier.outbox.pending(outbox.target_key(receiver.url(), "json"))
    assert [(r.type, r.number) for r in rows] == [
        ("build.yanked", 5),
        ("build.yanked", 7),
        ("build.unyanked", 5),
    ]
    yanked, unexplained, unyanked = [json.loads(r.body) for r in rows]
    assert yanked["data"]["reason"] == "crashes <@here>"
    assert yanked["data"]["build"]["buildNumber"] == 5
    assert "yankReason" not in yanked["data"]["build"]  # the build as the API serves it
    assert unexplained["data"]["reason"] == ""
    assert "reason" not in unyanked["data"] and unyanked["data"]["replaced"] is False
    assert unyanked["data"]["build"] == yanked["data"]["build"]
    # A yanked number published again with other content is a release, not an unyank.
    doc = json.loads((data_dir / "alpha.json").read_text())
    doc["builds"] = [b for b in doc["builds"] if b["buildNumber"] != 7] + [make_build(7, "1.22")]
    write_file(data_dir / "alpha.json", doc)
    bump_mtime(data_dir / "alpha.json")
    store.refresh()
    assert notifier.announce() == 1
    last = notifier.outbox.pending(outbox.target_key(receiver.url(), "json"))[-1]
    assert (last.type, json.loads(last.body)["data"]["build"]["channelVersion"]) == (
        "build.published",
        "1.22",
    )


@pytest.mark.parametrize("kind", ["discord", "slack"])
def test_the_chat_formats_say_a_real_yank_s_reason_and_unyank(
    data_dir, make_notifier, receiver, kind
):
    store, notifier = make_notifier({"url": receiver.url(), "format": kind}, start=False)
    assert cli.main(["yank", "alpha", "5", "--reason", "wrong jar", "--data", str(data_dir)]) == 0
    store.refresh()
    assert notifier.announce() == 1
    assert cli.main(["unyank", "alpha", "5", "--data", str(data_dir)]) == 0
    store.refresh()
    assert notifier.announce() == 1
    yanked, unyanked = [
        r.body.decode() for r in notifier.outbox.pending(outbox.target_key(receiver.url(), kind))
    ]
    assert "wrong jar" in yanked and "unyanked" not in yanked
    assert "unyanked" in unyanked and "wrong jar" not in unyanked


def test_the_json_payload_carries_a_build_s_extra_files(data_dir, make_notifier, receiver):
    store, notifier = make_notifier(json_target(receiver), start=False)
    extra = {"downloadUrl": "https://cdn.example.org/alpha-20-mojmap.jar"}
    publish(data_dir, 20, downloads={"server:mojmap": extra})
    store.refresh()
    assert notifier.announce() == 1
    [row] = notifier.outbox.pending(outbox.target_key(receiver.url(), "json"))
    build = json.loads(row.body)["data"]["build"]  # as the API serves it
    assert build["downloads"] == {
        "server:default": {"name": "alpha-20.jar", "url": build["downloadUrl"]},
        "server:mojmap": {"name": "alpha-20-mojmap.jar", "url": extra["downloadUrl"]},
    }


def test_unchanged_reload_and_other_projects_announce_nothing(data_dir, make_notifier, receiver):
    store, notifier = make_notifier(
        json_target(receiver, projects=["beta"], events=["build.yanked"]), start=False
    )
    publish(data_dir, 20)  # alpha: this target does not want it
    store.refresh()
    assert notifier.announce() == 0


def test_a_start_announces_nothing_of_what_was_there(make_notifier, receiver):
    make_notifier(json_target(receiver))
    assert receiver.received == []


# --- delivery --------------------------------------------------------------------------------


def test_signed_as_standard_webhooks_and_retried_with_the_same_id(
    data_dir, make_notifier, receiver, fake
):
    answers = iter([(500, {}, b""), (503, {}, b""), (200, {}, b"")])
    receiver.answer = lambda got: next(answers, (200, {}, b""))
    store, notifier = make_notifier(json_target(receiver))
    publish(data_dir, 20)
    store.refresh()
    got = receiver.wait_for(3)
    assert {r.headers["webhook-id"] for r in got} == {got[0].headers["webhook-id"]}
    assert {r.body for r in got} == {got[0].body}
    for received in got:  # each attempt signed anew: a retry's signature is never stale
        now = int(received.headers["webhook-timestamp"])
        assert verified(received, now)["data"]["build"]["buildNumber"] == 20
    assert got[0].path == "/hook/SECRET-PATH-TOKEN"
    wait_until(lambda: notifier.deliveries.get((0, "delivered")) == 1)
    assert notifier.deliveries == {(0, "failed"): 2, (0, "delivered"): 1}
    assert 0 < fake.slept[0] <= 10  # the first retry within 10 s
    assert fake.slept[0] < fake.slept[1] <= 2 * fake.slept[0]
    assert notifier.outbox.count() == 0


def test_a_retry_an_hour_later_still_verifies(data_dir, make_notifier, receiver, fake):
    def answer(got):
        return (200, {}, b"") if fake.now > START + 3600 else (502, {}, b"")

    receiver.answer = answer
    store, notifier = make_notifier(json_target(receiver))
    publish(data_dir, 20)
    store.refresh()
    wait_until(lambda: notifier.deliveries.get((0, "delivered")) == 1)
    last = receiver.received[-1]
    # standardwebhooks refuses a timestamp more than 5 minutes from its clock: this one is now
    assert int(last.headers["webhook-timestamp"]) == int(fake.now) > START + 3600
    assert verified(last, fake.now)["data"]["build"]["buildNumber"] == 20
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        verified(receiver.received[0], fake.now)


def test_retries_back_off_doubling_at_most_to_an_hour_then_dropped_after_a_day(
    data_dir, make_notifier, receiver, fake, caplog
):
    receiver.answer = lambda got: (500, {}, b"")
    store, notifier = make_notifier(json_target(receiver))
    publish(data_dir, 20)
    store.refresh()
    with caplog.at_level(logging.WARNING, "buildshelf.webhooks.sending"):
        wait_until(lambda: notifier.deliveries.get((0, "dropped")) == 1, seconds=60)
    delays = fake.slept
    assert delays[0] <= 10
    assert all(b <= 2 * a for a, b in zip(delays, delays[1:]))
    assert max(delays) <= 3600 and max(delays) > 3000
    assert sum(delays) >= 24 * 3600  # tried for at least a day
    assert len(receiver.received) == len(delays) + 1
    dropped = [r.getMessage() for r in caplog.records if "gave up" in r.getMessage()]
    assert len(dropped) == 1
    assert f"target 0 ({receiver.host})" in dropped[0]
    assert "build.published alpha build 20 (event msg_" in dropped[0]
    assert notifier.outbox.count() == 0


def test_next_delay_grows_with_jitter_and_at_most_doubles():
    import random

    rng, last, seen = random.Random(1), None, []
    for _ in range(40):
        delay = sending.next_delay(last, rng)
        assert delay <= 10 if last is None else delay <= 2 * last
        seen.append(delay)
        last = delay
    assert max(seen) <= 3600 and seen[12] > 1000
    assert len({round(d, 3) for d in seen[:8]}) == 8  # jittered: never the same twice


@pytest.mark.parametrize(
    "date",
    ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"],
)
def test_a_retry_after_date_is_read_as_utc_in_any_time_zone(monkeypatch, date):
    """Each of the three forms of an HTTP date is UTC, asctime's too, which names no zone."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        now = datetime(1994, 11, 6, 8, 49, 0, tzinfo=UTC).timestamp()
        answer = sending.Answer(503, {"retry-after": date}, b"")
        assert sending.wait_asked(answer, now) == 37
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.parametrize(
    "answer, asked",
    [
        ((429, {"Retry-After": "7"}, b""), 7),
        (
            (429, {"Content-Type": "application/json"}, b'{"retry_after": 2.5, "global": false}'),
            2.5,
        ),
        ((429, {"X-RateLimit-Reset-After": "3.25", "X-RateLimit-Remaining": "0"}, b""), 3.25),
        ((503, {"Retry-After": "40"}, b""), 40),
    ],
)
def test_429_and_retry_after_are_waited_for(data_dir, make_notifier, receiver, fake, answer, asked):
    answers = iter([answer, (204, {}, b"")])
    receiver.answer = lambda got: next(answers, (200, {}, b""))
    store, notifier = make_notifier({"url": receiver.url(), "format": "discord"})
    publish(data_dir, 20)
    store.refresh()
    got = receiver.wait_for(2)
    assert got[0].body == got[1].body
    wait_until(lambda: notifier.deliveries.get((0, "delivered")) == 1)
    assert fake.slept == [asked]


@pytest.mark.parametrize("status", [301, 302, 307, 308, 400, 401, 403, 404, 410, 422])
def test_a_redirect_or_another_4xx_is_not_followed_nor_retried(
    data_dir, make_notifier, receiver, status, caplog
):
    def answer(got):
        if got.path == "/elsewhere":
            return (200, {}, b"")
        return (status, {"Location": receiver.url("/elsewhere")}, b"")

    receiver.answer = answer
    store, notifier = make_notifier({"url": receiver.url(), "format": "slack"})
    publish(data_dir, 20, 21)
    store.refresh()
    wait_until(lambda: notifier.deliveries.get((0, "rejected")) == 2)
    assert [r.path for r in receiver.received] == ["/hook/SECRET-PATH-TOKEN"] * 2
    lines = [r.getMessage() for r in caplog.records if "not tried again" in r.getMessage()]
    assert len(lines) == 2 and f"target 0 ({receiver.host}) answered {status}" in lines[0]


def test_a_hanging_receiver_times_out_and_is_tried_again(data_dir, make_notifier, receiver):
    answers = iter([HANG, (200, {}, b"")])
    receiver.answer = lambda got: next(answers, (200, {}, b""))
    store, notifier = make_notifier(json_target(receiver), attempt_seconds=1)
    publish(data_dir, 20)
    store.refresh()
    got = receiver.wait_for(2)
    assert got[0].headers["webhook-id"] == got[1].headers["webhook-id"]
    wait_until(lambda: notifier.deliveries.get((0, "delivered")) == 1)
    assert notifier.deliveries[0, "failed"] == 1


def test_a_dripping_receiver_is_cut_off_at_the_deadline():
    """The deadline bounds the whole answer, not each read: a byte a second never ends it."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def drip():
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        while not stop.wait(0.1):
            try:
                conn.sendall(b"x")
            except OSError:
                break
        conn.close()

    threading.Thread(target=drip, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    try:
        with pytest.raises(sending.Timeout):
            sending.post(url, b"{}", {}, seconds=0.5)
    finally:
        stop.set()
        listener.close()


def test_events_reach_each_target_in_order_and_one_failing_holds_up_no_other(
    data_dir, make_notifier, receiver, fake
):
    slow = Receiver()
    slow.answer = lambda got: HANG
    try:
        store, notifier = make_notifier(
            {"url": slow.url(), "format": "discord"},
            json_target(receiver),
            attempt_seconds=60,
        )
        for number in (20, 21, 22):
            publish(data_dir, *range(20, number + 1))
            store.refresh()
        publish(data_dir, *range(20, 26), 30, 31)
        store.refresh()
        got = receiver.wait_for(8)
        assert [verified(r)["data"]["build"]["buildNumber"] for r in got] == [
            20,
            21,
            22,
            23,
            24,
            25,
            30,
            31,
        ]
        assert len(slow.received) == 1  # still on its first: one in flight, in order
    finally:
        slow.close()


def test_1000_builds_at_once_go_in_order_at_discords_rate_in_bounded_memory(
    data_dir, make_notifier, receiver, fake
):
    bucket = {"left": 5, "reset": 0.0, "early": 0}
    numbers = []

    def discord(got):  # Discord's webhook bucket: 5 requests, then wait 2 s
        numbers.append(int(json.loads(got.body)["embeds"][0]["title"].split("#")[1]))
        got.body, got.headers = b"", {}  # kept, the bodies would be what memory measures
        if fake.now >= bucket["reset"]:
            bucket["left"], bucket["reset"] = 5, fake.now + 2
        if bucket["left"] == 0:
            bucket["early"] += 1
            return 429, {"Retry-After": "2"}, b'{"retry_after": 2.0}'
        bucket["left"] -= 1
        after = round(bucket["reset"] - fake.now, 3)
        return (
            204,
            {"X-RateLimit-Remaining": str(bucket["left"]), "X-RateLimit-Reset-After": str(after)},
            b"",
        )

    receiver.answer = discord
    store, notifier = make_notifier({"url": receiver.url(), "format": "discord"}, start=False)
    long = "A commit message long enough to fill the embed. " * 8
    commits = [{"message": long, "hash": f"{i:040x}"} for i in range(20)]
    publish(data_dir, *range(100, 1100), commits=commits)
    store.refresh()
    assert notifier.announce() == 1000
    (total,) = notifier.outbox._db.execute("SELECT sum(length(body)) FROM deliveries").fetchone()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        notifier.start()
        wait_until(lambda: notifier.deliveries.get((0, "delivered")) == 1000, seconds=120)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert numbers == list(range(100, 1100))
    assert bucket["early"] == 0  # never a request the bucket had no room for
    assert fake.now - START >= 2 * (1000 / 5 - 1)  # Discord's rate: 5 each 2 s
    assert total > 4_000_000  # the outbox holds far more than the delivery thread ever does
    assert peak < total / 4, (peak, total)


# --- health, the file, the outbox ------------------------------------------------------------


def test_healthz_degraded_while_a_target_fails_for_15_minutes(
    data_dir, make_notifier, receiver, fake
):
    failing = {"on": True}
    receiver.answer = lambda got: (500, {}, b"") if failing["on"] else (200, {}, b"")
    fake.run_until(START + 14 * 60)
    store, notifier = make_notifier(json_target(receiver))
    client = webtest.TestApp(server.make_app(store, notifier=notifier))
    publish(data_dir, 20)
    store.refresh()
    wait_until(lambda: notifier.deliveries.get((0, "failed"), 0) >= 5)
    assert client.get("/healthz").json["status"] == "ok"
    fake.run_until(START + 60 * 60)
    wait_until(notifier.problems)
    assert fake.now > START + 15 * 60
    health = client.get("/healthz").json
    assert health["status"] == "degraded"
    (failing,) = health["webhooks"]["failing"]
    assert (failing["target"], failing["host"]) == (0, receiver.host)
    # Over 15 minutes, in whole seconds: 900.4 s is reported as 900.
    assert failing["failingFor"] >= 15 * 60 and health["webhooks"]["file"] is None
    validate_schema(health, "#/components/schemas/Health")
    assert "SECRET-PATH-TOKEN" not in json.dumps(health)
    failing["on"] = False
    fake.run_until(float("inf"))
    wait_until(lambda: notifier.deliveries.get((0, "delivered")) == 1)
    assert client.get("/healthz").json["status"] == "ok"


def test_a_malformed_file_keeps_the_last_good_targets(data_dir, make_notifier, receiver, state):
    store, notifier = make_notifier(json_target(receiver))
    client = webtest.TestApp(server.make_app(store, notifier=notifier))
    path = os.path.join(state, "webhooks.json")
    write_file(path, '{"targets": [{"url": "http://127.0.0.1:1/x", "format": "discrd"}]}')
    os.chmod(path, 0o600)
    bump_mtime(path, 20)
    notifier.reload_targets()
    assert [t.host for t in notifier.targets] == [receiver.host]
    health = client.get("/healthz").json
    assert health["status"] == "degraded"
    assert health["webhooks"]["file"]["file"] == "webhooks.json"
    assert health["webhooks"]["file"]["error"].startswith("line 1, column ")
    validate_schema(health, "#/components/schemas/Health")
    publish(data_dir, 20)
    store.refresh()
    wait_until(lambda: notifier.deliveries.get((0, "delivered")) == 1)
    write_targets(path, json_target(receiver))
    bump_mtime(path, 30)
    notifier.reload_targets()
    assert client.get("/healthz").json["status"] == "ok"


def test_a_file_others_may_read_is_refused_at_start_no_targets(
    data_dir, make_notifier, receiver, state
):
    path = os.path.join(state, "webhooks.json")
    os.makedirs(state, mode=0o700)
    write_targets(path, json_target(receiver), mode=0o644)
    store, notifier = make_notifier()
    assert notifier.targets == ()
    assert "0644" in notifier.problems()["webhooks"]["file"]["error"]
    publish(data_dir, 20)
    store.refresh()
    notifier.announce()
    # no target ever: no database made in the state directory
    assert not os.path.exists(os.path.join(state, "webhooks.sqlite3"))


def test_a_reordered_file_keeps_what_each_target_is_owed(
    data_dir, make_notifier, receiver, state, fake
):
    first = {"url": receiver.url("/a"), "format": "slack"}
    second = {"url": receiver.url("/b"), "format": "discord"}
    receiver.answer = lambda got: (503, {}, b"") if fake.now < START + 100 else (200, {}, b"")
    fake.run_until(START + 50)
    store, notifier = make_notifier(first, second)
    publish(data_dir, 20)
    store.refresh()
    wait_until(lambda: len(receiver.received) >= 4)
    write_targets(os.path.join(state, "webhooks.json"), second, first)
    bump_mtime(os.path.join(state, "webhooks.json"), 40)
    # the notifier's thread reads the file again within a second
    wait_until(lambda: [t.format for t in notifier.targets] == ["discord", "slack"])
    assert notifier.outbox.count() == 2  # each still owed to its target, wherever it is now
    fake.run_until(float("inf"))
    wait_until(lambda: notifier.outbox.count() == 0)
    delivered = {i: n for (i, outcome), n in notifier.deliveries.items() if outcome == "delivered"}
    assert delivered == {0: 1, 1: 1}
    last = {r.path: json.loads(r.body) for r in receiver.received}  # each path's last request
    assert "blocks" in last["/a"] and "embeds" in last["/b"]  # slack's and discord's, still


def test_the_outbox_is_durable_and_private(state):
    box = outbox.Outbox(state)
    assert box._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    owed = outbox.Owed("t", "msg_1", "build.published", "alpha", 1, b"{}", {"a": "b"})
    assert box.add([owed, owed], START) == 1  # one row per (target, event)
    box.close()
    box = outbox.Outbox(state)
    (row,) = box.pending("t")
    assert (row.event, row.body, row.headers) == ("msg_1", b"{}", {"a": "b"})
    assert os.stat(os.path.join(state, "webhooks.sqlite3")).st_mode & 0o777 == 0o600
    box.close()


def lock_outbox_while(state, answer, seconds=0.5):
    """A receiver's answer that first has another connection hold the outbox locked for
    `seconds` (a backup, the sqlite3 shell): the notifier's writes fail meanwhile."""
    held = []

    def locked(got):
        if not held:
            other = sqlite3.connect(
                os.path.join(state, "webhooks.sqlite3"),
                isolation_level=None,
                check_same_thread=False,
            )
            other.execute("BEGIN EXCLUSIVE")
            held.append(other)
            threading.Timer(seconds, lambda: (other.rollback(), other.close())).start()
        return answer(got)

    return locked


def test_a_delivery_done_but_not_deleted_is_not_sent_again(
    data_dir, make_notifier, receiver, state, monkeypatch
):
    # The row of a delivered event could not be deleted (the outbox locked or its disk full):
    # the receiver (a Discord channel) must not get it again every second until it can be.
    monkeypatch.setattr(outbox.state, "BUSY_SECONDS", 0.02)
    monkeypatch.setattr(sending, "STAMP_SECONDS", 0.02)
    receiver.answer = lock_outbox_while(state, lambda got: (200, {}, b""))
    store, notifier = make_notifier(json_target(receiver))
    publish(data_dir, 20)
    store.refresh()
    receiver.wait_for(1)
    time.sleep(0.5)  # the lock's time
    wait_until(lambda: notifier.outbox.count() == 0)
    assert len(receiver.received) == 1


def test_a_failure_not_recorded_is_still_backed_off(
    data_dir, make_notifier, receiver, state, fake, monkeypatch
):
    # A failed attempt that could not be recorded (the outbox locked) waits as long as it
    # would have: the receiver is not tried again every second while the outbox is locked.
    monkeypatch.setattr(outbox.state, "BUSY_SECONDS", 0.02)
    monkeypatch.setattr(sending, "STAMP_SECONDS", 0.02)
    fake.run_until(START + 60)  # about four attempts' back-off, then the sleepers wait
    receiver.answer = lock_outbox_while(state, lambda got: (500, {}, b""), seconds=0.5)
    store, notifier = make_notifier(json_target(receiver))
    publish(data_dir, 20)
    store.refresh()
    receiver.wait_for(1)
    time.sleep(0.5)  # the lock's time
    assert len(receiver.received) <= len(fake.slept) + 1  # each retry after its wait
    fake.run_until(float("inf"))


def wait_until(condition, seconds=30):
    """Wait for the delivery threads (real threads, fake time) to get somewhere."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.005)


# --- a real server -----------------------------------------------------------------------------


def server_flags(state):
    return ("--state", state, "--quiet")


def outbox_count(state):
    with contextlib.closing(sqlite3.connect(os.path.join(state, "webhooks.sqlite3"))) as db:
        return db.execute("SELECT count(*) FROM deliveries").fetchone()[0]


def get_latest(port):
    with urllib.request.urlopen(
        f"http://127.0.0.1:{port}/api/v2/builds/latest?project=alpha", timeout=5
    ) as answer:
        return json.load(answer)


@pytest.mark.system
def test_a_real_server_killed_mid_delivery_delivers_after_restart(data_dir, receiver, state):
    answers = iter([HANG])
    receiver.answer = lambda got: next(answers, (200, {}, b""))
    os.makedirs(state, mode=0o700)
    write_targets(os.path.join(state, "webhooks.json"), json_target(receiver))
    with real_server(data_dir, *server_flags(state)) as (port, proc):
        assert (
            cli.main(
                [
                    "publish",
                    "alpha",
                    "--data",
                    str(data_dir),
                    "--build",
                    "20",
                    "--channel",
                    "1.21",
                    "--download-url",
                    "https://ci.example.org/job/Alpha/20/alpha.jar",
                ]
            )
            == 0
        )
        (hanging,) = receiver.wait_for(1)
        for _ in range(20):  # the receiver hangs: reads go on as ever
            assert get_latest(port)["buildNumber"] == 20
        assert outbox_count(state) == 1  # written before the attempt, still owed
        proc.kill()
        proc.wait()
    receiver.released.set()
    with real_server(data_dir, *server_flags(state)) as (port, proc):
        delivered = receiver.wait_for(2)[1]
        wait_until(lambda: outbox_count(state) == 0)
    assert delivered.headers["webhook-id"] == hanging.headers["webhook-id"]
    assert delivered.body == hanging.body
    assert verified(delivered, time.time())["data"]["build"]["buildNumber"] == 20


@pytest.mark.system
def test_no_url_or_secret_in_logs_output_health_or_other_files(
    data_dir, receiver, state, tmp_path, capsys
):
    token = "Tok3nThatMustNeverLeak"
    discord = {"url": receiver.url(f"/api/webhooks/123/{token}"), "format": "discord"}
    signed = json_target(receiver, url=receiver.url(f"/hook?key={token}"))
    statuses = iter([500, 302, 404, 200, 503])
    receiver.answer = lambda got: (next(statuses, 200), {"Location": receiver.url()}, b"")
    os.makedirs(state, mode=0o700)
    path = write_targets(os.path.join(state, "webhooks.json"), discord, signed)
    said = []
    with real_server(data_dir, *server_flags(state)) as (port, proc):
        publish(data_dir, 20, 21)
        receiver.wait_for(4)
        write_file(path, {"targets": [{**discord, "format": "discrd"}]})
        os.chmod(path, 0o600)
        bump_mtime(path, 20)
        wait_until(lambda: "webhooks" in health_of(port))
        said.append(json.dumps(health_of(port)))
        assert cli.main(["check", "--data", str(data_dir), "--state", state]) == 1
        write_targets(path, discord, signed)
        bump_mtime(path, 40)
        assert cli.main(["webhook", "test", "--data", str(data_dir), "--state", state]) == 0
        publish(data_dir, 22)
        wait_until(lambda: outbox_count(state) == 0)
        proc.send_signal(signal.SIGINT)
        proc.wait(10)
        said.append(proc.stderr.read())
    out, err = capsys.readouterr()
    said += [out, err]
    assert f"target 0 ({receiver.host}, discord): 200 OK" in out
    assert "webhooks:" in said[-3] and "answered 404" in said[-3]  # the server did log
    secret_base64 = SECRET.removeprefix("whsec_")
    for text in said:
        assert token not in text and secret_base64 not in text
    for root, _, names in os.walk(tmp_path):
        for name in names:
            if name == "webhooks.json" or name.startswith("webhooks.sqlite3"):
                continue
            with open(os.path.join(root, name), "rb") as file:
                content = file.read()
            assert token.encode() not in content and KEY not in content, name
            assert secret_base64.encode() not in content, name


def health_of(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as error:
        return json.load(error)


def test_a_project_that_appears_announces_nothing_of_what_it_holds(
    data_dir, make_notifier, receiver
):
    store, notifier = make_notifier(json_target(receiver), start=False)
    write_file(data_dir / "gamma.json", make_project([make_build(1), make_build(2)]))
    store.refresh()
    assert notifier.announce() == 0
    write_file(data_dir / "gamma.json", make_project([make_build(1), make_build(2), make_build(3)]))
    bump_mtime(data_dir / "gamma.json")
    store.refresh()
    assert notifier.announce() == 1


def test_check_and_webhook_test_name_targets_by_index_and_host(data_dir, receiver, state, capsys):
    receiver.answer = lambda got: (500, {}, b"") if got.path == "/b" else (204, {}, b"")
    os.makedirs(state, mode=0o700)
    path = write_targets(
        os.path.join(state, "webhooks.json"),
        {"url": receiver.url("/a"), "format": "discord"},
        {"url": receiver.url("/b"), "format": "slack"},
    )
    common = ["--data", str(data_dir), "--state", state]
    assert cli.main(["webhook", "test", *common, "--target", "0"]) == 0
    assert capsys.readouterr().out == f"target 0 ({receiver.host}, discord): 204 No Content\n"
    assert cli.main(["webhook", "test", *common]) == 1
    assert capsys.readouterr().out.splitlines()[1] == (
        f"target 1 ({receiver.host}, slack): 500 Internal Server Error"
    )
    assert cli.main(["webhook", "test", *common, "--target", "2"]) == 1
    assert "no target 2: the file has 2 targets" in capsys.readouterr().err
    assert cli.main(["check", *common]) == 0
    assert capsys.readouterr().out == ""  # all is well: cron mails nothing
    assert cli.main(["check", *common, "--verbose"]) == 0
    host = receiver.host
    assert f"webhooks: 2 targets ({host}, {host})" in capsys.readouterr().out  # a drill sees them
    os.chmod(path, 0o640)
    assert cli.main(["check", *common]) == 1
    assert "webhooks.json" in capsys.readouterr().out


def test_check_tells_a_target_s_project_that_is_not_there(data_dir, receiver, state, capsys):
    os.makedirs(state, mode=0o700)
    path = os.path.join(state, "webhooks.json")
    write_targets(path, {"url": receiver.url(), "format": "discord", "projects": ["alpah"]})
    assert cli.main(["check", "--data", str(data_dir), "--state", state]) == 1
    assert capsys.readouterr().out == (
        f"{path}: targets[0] ({receiver.host}): 'projects' names 'alpah', which is no "
        "project: did you mean 'alpha'?\n"
    )
    write_targets(path, {"url": receiver.url(), "format": "discord", "projects": ["alpha"]})
    assert cli.main(["check", "--data", str(data_dir), "--state", state]) == 0
    assert capsys.readouterr().out == ""


def test_a_target_s_project_that_is_not_there_is_logged_once_and_degrades_healthz(
    data_dir, make_notifier, receiver, caplog
):
    said = "'projects' names"
    with caplog.at_level(logging.WARNING, "buildshelf.webhooks.delivery"):
        targets = json_target(receiver, projects=["alpah", "gamma", "alpha"])
        store, notifier = make_notifier(targets)
        client = webtest.TestApp(server.make_app(store, notifier=notifier))
        for _ in range(3):
            health = client.get("/healthz").json
        publish(data_dir, 20)  # a build, not a project: nothing new to say
        store.refresh()
        # Its announcement arrives after the notifier's thread has looked at the projects.
        assert receiver.wait_for(1)[0].json["data"]["build"]["buildNumber"] == 20
        lines = [r.getMessage() for r in caplog.records if said in r.getMessage()]
        assert len(lines) == 1  # at start only: neither the requests nor the build said it
        assert "'alpah', which is no project: did you mean 'alpha'?" in lines[0]
        assert "'gamma', which is no project" in lines[0]
        write_file(data_dir / "gamma.json", make_project([make_build(1)]))
        store.refresh()  # the projects changed: said again, of what is still wrong
        wait_until(lambda: len([r for r in caplog.records if said in r.getMessage()]) == 2)
    last = [r.getMessage() for r in caplog.records if said in r.getMessage()][-1]
    assert "'alpah'" in last and "'gamma'" not in last
    assert health["status"] == "degraded"
    assert health["webhooks"] == {
        "file": None,
        "failing": [],
        "unknownProjects": [
            {"target": 0, "host": receiver.host, "project": "alpah", "didYouMean": "alpha"},
            {"target": 0, "host": receiver.host, "project": "gamma", "didYouMean": None},
        ],
    }
    validate_schema(health, "#/components/schemas/Health")
    assert client.get("/healthz").json["webhooks"]["unknownProjects"] == [
        {"target": 0, "host": receiver.host, "project": "alpah", "didYouMean": "alpha"}
    ]


def test_webhook_test_links_the_public_url_and_a_project_the_target_hears(
    data_dir, receiver, state, capsys, monkeypatch
):
    receiver.answer = lambda got: (204, {}, b"")
    os.makedirs(state, mode=0o700)
    write_targets(
        os.path.join(state, "webhooks.json"),
        {"url": receiver.url("/d"), "format": "discord", "projects": ["beta"]},
        {"url": receiver.url("/s"), "format": "slack"},  # every project: the first, alpha
    )
    common = ["webhook", "test", "--data", str(data_dir), "--state", state]
    monkeypatch.delenv("BUILDSHELF_PUBLIC_URL", raising=False)
    for given, base in (
        ("https://builds.acme.test/shelf/", "https://builds.acme.test/shelf"),  # the box's
        (None, "http://127.0.0.1:8080"),  # a server started with no setting names itself so
    ):
        if given:
            monkeypatch.setenv("BUILDSHELF_PUBLIC_URL", given)
        else:
            monkeypatch.delenv("BUILDSHELF_PUBLIC_URL")
        receiver.received.clear()
        assert cli.main(common) == 0
        discord, slack = sorted(receiver.received, key=lambda got: got.path)
        [embed] = discord.json["embeds"]
        assert embed["url"] == f"{base}/projects/beta"
        assert f"({base}/downloads/latest?project=beta)" in json.dumps(embed["fields"])
        assert f"<{base}/projects/alpha|" in slack.body.decode()
        assert "builds.example.org" not in (discord.body + slack.body).decode()
    capsys.readouterr()


def test_a_state_directory_with_an_outbox_but_no_targets_file_says_so(make_notifier, state, caplog):
    # A restore that left webhooks.json out sends nothing: the log says why (issue 38).
    with caplog.at_level(logging.WARNING, "buildshelf.webhooks.delivery"):
        make_notifier(start=False)  # never had a target: no database, nothing to say
        assert "webhooks.json" not in caplog.text
        outbox.Outbox(state).close()  # the database a server with targets made
        make_notifier(start=False)
    [line] = [r.getMessage() for r in caplog.records if "webhooks.json" in r.getMessage()]
    assert "no webhook is sent" in line and "backing-up-and-restoring" in line


def test_check_fails_a_state_directory_with_an_outbox_but_no_targets_file(data_dir, state, capsys):
    # The restore drill runs check: a backup that left webhooks.json out fails it.
    common = ["--data", str(data_dir), "--state", state]
    assert cli.main(["check", *common]) == 0
    assert "webhooks:" not in capsys.readouterr().out
    outbox.Outbox(state).close()
    assert cli.main(["check", *common]) == 1
    assert "there is no" in capsys.readouterr().out
