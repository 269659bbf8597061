"""counts.py: client networks, the deduplication window, its bound, the batches written to
the state's database, the Tally, and a database that cannot be written."""

import logging
import os
import sqlite3
import threading

import pytest

from buildshelf import counts
from buildshelf.counts import EMPTY, Counter, Tally, network

SHA = "a" * 64
DAY = 20_000 * 86400  # 2024-10-04 00:00 UTC
URL = "https://ci.example.org/job/Alpha/9/artifact/alpha.jar"


class Clock:
    def __init__(self, now=DAY + 3600):
        self.now = now

    def __call__(self):
        return self.now


# --- network ---


@pytest.mark.parametrize(
    "one, other",
    [
        ("192.0.2.1", "192.0.2.254"),
        ("192.0.2.7", "::ffff:192.0.2.8"),  # IPv4-mapped IPv6 is IPv4
        ("2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff"),
        ("2001:DB8:1:2::1", "2001:db8:1:2::1"),
        ("fe80::1%eth0", "fe80::2"),
    ],
)
def test_addresses_of_one_network_have_one_key(one, other):
    assert network(one) == network(other) is not None


@pytest.mark.parametrize(
    "one, other",
    [
        ("192.0.2.1", "192.0.3.1"),
        ("10.0.0.1", "11.0.0.1"),
        ("2001:db8:1:2::1", "2001:db8:1:3::1"),
        # an IPv6 /64 whose bits are an IPv4 network's is still another network
        ("0:0:0:c000::1", "192.0.2.1"),
        ("::c000:201", "192.0.2.1"),  # IPv4-compatible is not IPv4-mapped
    ],
)
def test_addresses_of_other_networks_have_other_keys(one, other):
    assert network(one) != network(other)
    assert None not in (network(one), network(other))


@pytest.mark.parametrize(
    "text", [None, "", "localhost", "192.0.2", "192.0.2.1.5", "300.1.1.1", "::g", " 192.0.2.1", 5]
)
def test_what_is_not_an_address_has_no_network(text):
    assert network(text) is None


# --- Tally ---

ROWS = {
    ("alpha", 9, SHA, "2024-10-04"): 3,
    ("alpha", 9, SHA, "2024-10-05"): 1,
    ("alpha", 9, URL, "2024-10-05"): 2,  # the same build's file by URL, before it was kept
    ("alpha", 8, URL, "2024-10-02"): 5,
    ("beta", 10, SHA, "2024-10-06"): 7,
}


def test_a_tally_indexes_its_rows_by_build_and_day():
    tally = Tally.of(ROWS)
    assert tally.builds("alpha") == {
        9: {"2024-10-04": 3, "2024-10-05": 3},
        8: {"2024-10-02": 5},
    }
    assert list(tally.builds("alpha")[9]) == ["2024-10-04", "2024-10-05"]  # oldest first
    assert tally.files("alpha") == frozenset({SHA, URL})
    assert tally.total("alpha") == 11 and tally.total("beta") == 7
    assert tally.started == "2024-10-02"
    assert (tally.builds("gamma"), tally.files("gamma"), tally.total("gamma")) == ({}, set(), 0)


def test_a_tally_cannot_be_changed():
    rows = dict(ROWS)
    tally = Tally(rows, "2024-10-02")
    rows[("alpha", 1, SHA, "2024-10-07")] = 1  # the caller's dict is not the tally's
    assert tally.total("alpha") == 11
    with pytest.raises(TypeError):
        tally.rows[("alpha", 1, SHA, "2024-10-07")] = 1
    with pytest.raises(TypeError):
        tally.builds("alpha")[9]["2024-10-04"] = 0
    with pytest.raises(AttributeError):
        tally.started = None


def test_the_empty_tally():
    assert (EMPTY.rows, EMPTY.started, EMPTY.builds("alpha"), EMPTY.total("alpha")) == (
        {},
        None,
        {},
        0,
    )
    assert Tally.of({}) == EMPTY


# --- counting and the window ---


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def counter(tmp_path, clock):
    return Counter(str(tmp_path / "state"), clock=clock)


def test_one_count_per_network_and_build_within_the_window(counter, clock):
    assert counter.count("alpha", 9, SHA, "192.0.2.1") is True
    assert counter.count("alpha", 9, SHA, "192.0.2.99") is False  # the same /24
    assert counter.count("alpha", 9, URL, "::ffff:192.0.2.5") is False  # another file of it
    assert counter.count("alpha", 8, SHA, "192.0.2.1") is True  # another build
    assert counter.count("beta", 9, SHA, "192.0.2.1") is True  # another project's build 9
    assert counter.count("alpha", 9, SHA, "192.0.3.1") is True  # another network
    clock.now += counts.DEDUP_SECONDS - 1
    assert counter.count("alpha", 9, SHA, "192.0.2.1") is False
    clock.now += 1
    assert counter.count("alpha", 9, SHA, "192.0.2.1") is True  # the window is over
    assert (counter.counted, counter.deduplicated) == (5, 3)
    counter.flush()
    assert counter.tally().rows == {
        ("alpha", 9, SHA, "2024-10-04"): 2,
        ("alpha", 8, SHA, "2024-10-04"): 1,
        ("beta", 9, SHA, "2024-10-04"): 1,
        ("alpha", 9, SHA, "2024-10-05"): 1,
    }


def test_the_window_is_a_day():
    assert counts.DEDUP_SECONDS == 24 * 3600 and counts.FLUSH_SECONDS == 10


@pytest.mark.parametrize("address", [None, "", "unix:/run/x.sock"])
def test_a_request_without_an_address_is_not_counted(counter, address):
    assert counter.count("alpha", 9, SHA, address) is False
    assert (counter.counted, counter.deduplicated) == (0, 0)


def test_the_oldest_networks_are_forgotten_first_beyond_the_bound(tmp_path, clock):
    counter = Counter(str(tmp_path), clock=clock, max_remembered=3)
    for n in range(3):
        clock.now += 1
        assert counter.count("alpha", 9, SHA, f"10.0.{n}.1")
    assert counter.count("alpha", 9, SHA, "10.0.3.1")  # 10.0.0.0/24 is forgotten
    assert not counter.count("alpha", 9, SHA, "10.0.1.1")
    assert not counter.count("alpha", 9, SHA, "10.0.3.1")
    assert counter.count("alpha", 9, SHA, "10.0.0.1")
    assert len(counter._seen) == len(counter._order) == 3


def test_networks_past_the_window_are_forgotten(counter, clock):
    for n in range(100):
        counter.count("alpha", 9, SHA, f"10.0.{n}.1")
    clock.now += counts.DEDUP_SECONDS
    counter.count("alpha", 9, SHA, "10.1.0.1")
    assert len(counter._seen) == 1


# --- the database ---


def stored_rows(state_dir):
    with sqlite3.connect(os.path.join(state_dir, "downloads.sqlite3")) as db:
        return {
            (p, b, f, d): n
            for p, b, f, d, n in db.execute(
                "SELECT project, build, file, day, downloads FROM downloads"
            )
        }


def test_counts_are_written_in_batches_and_read_back(tmp_path, clock):
    state_dir = str(tmp_path / "state")
    counter = Counter(state_dir, clock=clock)
    counter.count("alpha", 9, SHA, "192.0.2.1")
    assert counter.tally() is EMPTY  # not before the batch
    assert not os.path.exists(state_dir)  # nothing on disk before it either
    counter.flush()
    assert stored_rows(state_dir) == {("alpha", 9, SHA, "2024-10-04"): 1}
    counter.count("alpha", 9, SHA, "192.0.3.1")
    counter.flush()
    assert stored_rows(state_dir) == {("alpha", 9, SHA, "2024-10-04"): 2}
    assert os.stat(os.path.join(state_dir, "downloads.sqlite3")).st_mode & 0o777 == 0o600
    counter.stop()
    # A new server: the counts kept, the window starts afresh (addresses are never stored).
    again = Counter(state_dir, clock=clock)
    again.start()
    try:
        assert again.tally().rows == {("alpha", 9, SHA, "2024-10-04"): 2}
        assert again.count("alpha", 9, SHA, "192.0.2.1")
    finally:
        again.stop()
    assert stored_rows(state_dir) == {("alpha", 9, SHA, "2024-10-04"): 3}


def test_no_address_reaches_the_disk(tmp_path, clock):
    state_dir = tmp_path / "state"
    counter = Counter(str(state_dir), clock=clock)
    counter.start()
    counter.count("alpha", 9, SHA, "198.51.100.77")
    counter.count("alpha", 9, SHA, "2001:db8:abcd:12::5")
    counter.stop()
    for path in state_dir.iterdir():
        data = path.read_bytes()
        for needle in (b"198.51.100", b"2001:db8", b"abcd", bytes([198, 51, 100])):
            assert needle not in data, (path, needle)


def test_the_thread_writes_every_flush_seconds(tmp_path, clock):
    flushed = threading.Event()
    counter = Counter(str(tmp_path), clock=clock, flush_seconds=0.01)
    original = counter.flush

    def flush():
        original()
        if counter.tally().rows:
            flushed.set()

    counter.flush = flush
    counter.start()
    try:
        counter.count("alpha", 9, SHA, "192.0.2.1")
        assert flushed.wait(10)
        assert stored_rows(str(tmp_path)) == {("alpha", 9, SHA, "2024-10-04"): 1}
    finally:
        counter.stop()


def test_a_locked_database_keeps_the_counts_in_memory_and_says_so_once(
    tmp_path, clock, caplog, monkeypatch
):
    monkeypatch.setattr(counts.state, "BUSY_SECONDS", 0.05)
    state_dir = str(tmp_path)
    counter = Counter(state_dir, clock=clock)
    counter.start()
    other = sqlite3.connect(os.path.join(state_dir, "downloads.sqlite3"), isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        for n in range(3):
            assert counter.count("alpha", 9, SHA, f"192.0.{n}.1")
            counter.flush()
            assert counter.tally().total("alpha") == n + 1  # shown while waiting
        assert "locked" in counter.problem
        said = [r for r in caplog.records if r.name == counts.__name__ and "cannot be" in r.message]
        assert len(said) == 1 and said[0].levelno == logging.ERROR
    finally:
        other.execute("ROLLBACK")
        other.close()
    counter.flush()
    assert counter.problem is None
    assert stored_rows(state_dir) == {("alpha", 9, SHA, "2024-10-04"): 3}
    counter.stop()


def test_a_database_locked_when_first_opened_is_written_once_it_is_free(
    tmp_path, clock, monkeypatch
):
    # Locked (or full) when the first download opens it: its table could not be made then,
    # and must be made once it can be, not "no such table" until the server restarts.
    monkeypatch.setattr(counts.state, "BUSY_SECONDS", 0.05)
    state_dir = str(tmp_path)
    other = counts.state.connect(state_dir, counts.DATABASE)  # a backup holding it, say
    other.execute("BEGIN EXCLUSIVE")
    counter = Counter(state_dir, clock=clock)
    try:
        assert counter.count("alpha", 9, SHA, "192.0.2.1")
        counter.flush()
        assert "locked" in counter.problem
    finally:
        other.rollback()
        other.close()
    counter.flush()
    assert counter.problem is None
    assert stored_rows(state_dir) == {("alpha", 9, SHA, "2024-10-04"): 1}
    counter.stop()


def test_counts_waiting_in_memory_are_bounded(tmp_path, clock, monkeypatch):
    counter = Counter(str(tmp_path), clock=clock, max_pending_rows=2)
    monkeypatch.setattr(counter, "_write", _failing)
    for build in range(4):
        assert counter.count("alpha", build, SHA, "192.0.2.1")
        counter.flush()
    assert len(counter._pending) == 2 and counter.lost == 2
    assert counter.problem.endswith("disk I/O error")


def _failing(batch):
    raise sqlite3.OperationalError("disk I/O error")


def test_a_read_only_state_directory_is_a_problem_not_a_failure(tmp_path, clock, caplog):
    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o700)
    (state_dir / "downloads.sqlite3").mkdir()  # what no one can open as a database
    counter = Counter(str(state_dir), clock=clock)
    counter.start()
    assert counter.count("alpha", 9, SHA, "192.0.2.1")
    counter.flush()
    assert counter.problem and counter.tally().total("alpha") == 1
    counter.stop()
    assert "could not be written at stop" in caplog.text


def test_no_database_is_made_until_a_download_is_counted(tmp_path, clock):
    """A server over a checkout's sample data that no one downloads from writes nothing."""
    state_dir = tmp_path / "state"
    counter = Counter(str(state_dir), clock=clock)
    counter.start()
    counter.flush()
    counter.stop()
    assert not state_dir.exists()
    counter = Counter(str(state_dir), clock=clock)
    counter.start()
    counter.count("alpha", 9, SHA, "192.0.2.1")
    counter.stop()
    assert stored_rows(str(state_dir)) == {("alpha", 9, SHA, "2024-10-04"): 1}
