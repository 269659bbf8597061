"""The artifact store (artifacts.py): objects named by their sha256, stored once, written
whole; sources that are not regular files, too large or mislabelled refused; full and
read-only stores, killed and concurrent writers; verify, rehash, objects and remove.
"""

import ctypes
import hashlib
import os
import signal
import stat
import subprocess
import sys
import threading
import time
import tracemalloc
from contextlib import contextmanager

import pytest

from buildshelf.kept import artifacts, objects
from buildshelf.kept.artifacts import NAME_RULE
from buildshelf.kept.objects import Refused
from buildshelf.kept.temp_files import remove_stale_temp_files

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MiB = 1 << 20


def sha(data):
    return hashlib.sha256(data).hexdigest()


def write(path, data):
    path.write_bytes(data)
    return str(path)


def files_under(directory):
    """Every file (not directory) under `directory`, relative to it, sorted."""
    return sorted(
        os.path.relpath(os.path.join(parent, name), directory)
        for parent, _, names in os.walk(directory)
        for name in names
    )


def temp_files(store):
    return sorted(name for name in os.listdir(store) if name.startswith(".incoming-"))


@pytest.fixture
def store(tmp_path):
    return str(tmp_path / "artifacts")


# --- storing -----------------------------------------------------------------------------------


def test_the_same_bytes_twice_are_one_object(tmp_path, store):
    data = bytes(range(256)) * 10_000  # 2.4 MiB: more than one chunk
    first = artifacts.store_file(store, write(tmp_path / "a.jar", data))
    second = artifacts.store_file(store, write(tmp_path / "b.jar", data))
    path = os.path.join(store, sha(data)[:2], sha(data))
    assert first == objects.Stored(sha(data), len(data), path, created=True)
    assert second == objects.Stored(sha(data), len(data), path, created=False)
    assert files_under(store) == [os.path.join(sha(data)[:2], sha(data))]
    with open(path, "rb") as f:
        assert f.read() == data
    assert stat.S_IMODE(os.stat(path).st_mode) & 0o222 == 0  # never written again


def test_other_bytes_are_another_object(tmp_path, store):
    a = artifacts.store_file(store, write(tmp_path / "a", b"alpha"))
    b = artifacts.store_file(store, write(tmp_path / "b", b"beta"))
    empty = artifacts.store_file(store, write(tmp_path / "e", b""))
    assert artifacts.objects(store) == {a.sha256: 5, b.sha256: 4, sha(b""): 0}
    assert empty.size == 0 and empty.created


def test_the_store_and_its_parents_are_made(tmp_path):
    store = str(tmp_path / "data" / "artifacts")
    stored = artifacts.store_file(store, write(tmp_path / "a", b"alpha"))
    assert stored.path == os.path.join(store, sha(b"alpha")[:2], sha(b"alpha"))
    assert artifacts.objects(store) == {sha(b"alpha"): 5}


def test_object_path_is_made_from_the_hash_only():
    digest = sha(b"x")
    assert artifacts.object_path("/s", digest) == f"/s/{digest[:2]}/{digest}"
    for bad in ["../" + digest[3:], digest.upper(), digest[:63], digest + "0", ""]:
        with pytest.raises(ValueError) as raised:
            artifacts.object_path("/s", bad)
        assert str(raised.value) == f"{bad!r} is not a sha256: 64 lowercase hex digits"


def test_a_damaged_object_is_replaced_by_a_good_copy(tmp_path, store):
    stored = artifacts.store_file(store, write(tmp_path / "a", b"alpha"))
    os.chmod(stored.path, 0o644)
    with open(stored.path, "wb") as f:
        f.write(b"alp")  # truncated
    again = artifacts.store_file(store, str(tmp_path / "a"))
    assert again == objects.Stored(  # created: the good copy replaced it
        stored.sha256, 5, stored.path, created=True, repaired="is 3 bytes, expected 5 bytes"
    )
    assert artifacts.rehash(store, stored.sha256) is None


def test_an_object_of_the_right_size_with_other_bytes_is_replaced(tmp_path, store):
    stored = artifacts.store_file(store, write(tmp_path / "a", b"alpha"))
    os.chmod(stored.path, 0o644)
    with open(stored.path, "r+b") as f:
        f.write(b"A")  # same size: only the hash tells
    again = artifacts.store_file(store, str(tmp_path / "a"))
    assert (again.created, again.repaired) == (
        True,
        f"holds other bytes: they hash to {sha(b'Alpha')}",
    )
    assert artifacts.rehash(store, stored.sha256) is None
    assert stat.S_IMODE(os.stat(stored.path).st_mode) & 0o222 == 0  # read-only again
    assert temp_files(store) == []


def test_memory_stays_bounded_at_any_size(tmp_path, store):
    source = write(tmp_path / "big", b"\x5a" * (32 * MiB))
    tracemalloc.start()
    try:
        stored = artifacts.store_file(store, source)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert stored.size == 32 * MiB
    assert peak < 4 * MiB  # one chunk at a time, never the file


@pytest.mark.parametrize("given", ["lower", "upper"])
def test_an_expected_sha256_that_matches(tmp_path, store, given):
    digest = sha(b"alpha")
    expected = digest if given == "lower" else digest.upper()
    stored = artifacts.store_file(store, write(tmp_path / "a", b"alpha"), expected_sha256=expected)
    assert stored.sha256 == digest and stored.created


def test_an_expected_sha256_that_differs_stores_nothing(tmp_path, store):
    wrong = sha(b"beta")
    with pytest.raises(Refused) as refused:
        artifacts.store_file(store, write(tmp_path / "a", b"alpha"), expected_sha256=wrong)
    assert str(refused.value) == (
        f"sha256 mismatch: the file hashes to {sha(b'alpha')}, --sha256 says {wrong}"
    )
    assert files_under(store) == []


def test_an_expected_sha256_that_is_no_sha256(tmp_path, store):
    with pytest.raises(Refused) as refused:
        artifacts.store_file(store, write(tmp_path / "a", b"alpha"), expected_sha256="abc")
    assert str(refused.value) == "--sha256 'abc' is not a sha256: give 64 hex digits"
    assert not os.path.exists(store)


# --- sources refused -----------------------------------------------------------------------------


def refusal(store, source, **kwargs):
    with pytest.raises(Refused) as refused:
        artifacts.store_file(store, source, **kwargs)
    return str(refused.value)


def test_a_missing_source(tmp_path, store):
    source = str(tmp_path / "nope.jar")
    assert refusal(store, source) == f"cannot read {source}: No such file or directory"


def test_a_directory(tmp_path, store):
    assert refusal(store, str(tmp_path)) == (
        f"{tmp_path} is a directory, not a regular file: give a file"
    )
    assert not os.path.exists(store)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path, store):
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    outcome = []
    # In a thread, so that a store_file that waited on the FIFO fails the test, not hangs it.
    thread = threading.Thread(target=lambda: outcome.append(refusal(store, fifo)), daemon=True)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive(), "store_file waited on a FIFO"
    assert outcome == [f"{fifo} is a FIFO, not a regular file: give a file"]


def test_a_device(store):
    assert refusal(store, "/dev/null") == (
        "/dev/null is a character device, not a regular file: give a file"
    )


@contextmanager
def unprivileged():
    """Run the block as nobody when root, whom permissions do not stop."""
    if os.geteuid() != 0:
        yield
        return
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)


def test_an_unreadable_source(tmp_path, store):
    source = write(tmp_path / "secret.jar", b"alpha")
    os.chmod(source, 0)
    with unprivileged():
        message = refusal(store, source)
    assert message == f"cannot read {source}: Permission denied"
    assert not os.path.exists(store)


def test_a_file_over_the_limit_by_its_size(tmp_path, store):
    source = write(tmp_path / "big.jar", b"x" * (MiB + 1))
    assert refusal(store, source, max_bytes=MiB) == (
        f"{source} is larger than 1 MiB: give --max-file-mb to raise the limit (nothing was stored)"
    )
    assert not os.path.exists(store)
    # The limit itself is allowed.
    exact = write(tmp_path / "exact.jar", b"x" * MiB)
    assert artifacts.store_file(store, exact, max_bytes=MiB).size == MiB


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux's /proc")
def test_a_file_that_grows_past_the_limit_while_copied(store):
    # A /proc file says 0 bytes to fstat and then reads as more: a file grown after fstat.
    source = "/proc/self/maps"
    assert os.stat(source).st_size == 0
    assert refusal(store, source, max_bytes=100) == (
        f"{source} is larger than {100 / MiB:g} MiB: give --max-file-mb to raise the limit "
        "(nothing was stored)"
    )
    assert files_under(store) == []


@pytest.mark.parametrize(
    "name", ["app-1.2.3.jar", "A_b+c-d.tar.gz", "x", "x" * 200, "0.txt", "-rc1", "a..b"]
)
def test_names_that_follow_the_rule(name):
    assert artifacts.check_name(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "my app.jar",
        ".hidden",
        "..",
        ".",
        "café.jar",
        "x" * 201,
        "dir/app.jar",
        "../app.jar",
        "dir\\app.jar",
        "",
        "app.jar\n",
        "app\x00.jar",
    ],
)
def test_names_refused_with_the_rule(name):
    with pytest.raises(Refused) as refused:
        artifacts.check_name(name)
    assert str(refused.value) == f"{name!r} is not a valid file name: {NAME_RULE}"


# --- full and read-only stores -------------------------------------------------------------------

MS_RDONLY, MS_REMOUNT = 1, 32
libc = ctypes.CDLL(None, use_errno=True)


def _checked(result, what):
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


@contextmanager
def small_tmpfs(directory):
    """A 1 MiB tmpfs mounted on `directory` for the block (skip if mounting is refused)."""
    os.mkdir(directory)
    target = os.fsencode(directory)
    try:
        _checked(libc.mount(b"tmpfs", target, b"tmpfs", 0, b"size=1m"), "mount")
    except PermissionError:
        pytest.skip("mounting a tmpfs was refused (EPERM): needs root with CAP_SYS_ADMIN")
    try:
        yield str(directory)
    finally:
        _checked(libc.umount2(target, 0), "umount")


def read_only(directory):
    _checked(
        libc.mount(None, os.fsencode(directory), None, MS_REMOUNT | MS_RDONLY, b"size=1m"),
        "remount read-only",
    )


def test_a_full_disk_stores_nothing(tmp_path):
    source = write(tmp_path / "big.jar", b"\x01" * (2 * MiB))
    with small_tmpfs(tmp_path / "mnt") as mnt:
        store = os.path.join(mnt, "artifacts")
        assert refusal(store, source) == (
            f"cannot store {source} in {store}: No space left on device (nothing was stored)"
        )
        assert files_under(mnt) == []  # no temp file, no object
        # The space the temp file took is free again: a small file still fits.
        assert artifacts.store_file(store, write(tmp_path / "small", b"a")).created


def test_a_read_only_file_system_stores_nothing(tmp_path):
    source = write(tmp_path / "a.jar", b"alpha")
    with small_tmpfs(tmp_path / "mnt") as mnt:
        store = os.path.join(mnt, "artifacts")
        kept = artifacts.store_file(store, write(tmp_path / "kept", b"kept"))
        read_only(mnt)
        assert refusal(store, source) == (
            f"cannot store {source} in {store}: Read-only file system (nothing was stored)"
        )
        assert files_under(store) == [os.path.relpath(kept.path, store)]
        # A store that did not exist yet cannot be made either.
        other = os.path.join(mnt, "other")
        assert refusal(other, source) == (
            f"cannot store {source} in {other}: Read-only file system (nothing was stored)"
        )


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in a 0o500 directory (see tmpfs test)")
def test_a_store_without_write_permission_stores_nothing(tmp_path, store):
    source = write(tmp_path / "a.jar", b"alpha")
    os.mkdir(store)
    os.chmod(store, 0o500)
    try:
        assert refusal(store, source) == (
            f"cannot store {source} in {store}: Permission denied (nothing was stored)"
        )
        assert os.listdir(store) == []
    finally:
        os.chmod(store, 0o700)


# --- killed and concurrent writers ---------------------------------------------------------------

# The writer stops after its first chunk is in the temp file, so that it is killed mid-copy
# however fast the disk: the test waits for the temp file, not for a guessed time.
KILLED_MID_COPY = """
import os, signal, sys
sys.path.insert(0, {root!r})
from buildshelf.kept import artifacts
write = os.write
def write_then_stop(fd, data):
    written = write(fd, data)
    signal.pause()
    return written
os.write = write_then_stop
artifacts.store_file({store!r}, {source!r})
"""


@pytest.mark.system
def test_a_writer_killed_mid_copy_leaves_no_object(tmp_path, store):
    source = write(tmp_path / "big.jar", b"\x07" * (64 * MiB))
    script = KILLED_MID_COPY.format(root=ROOT, store=store, source=source)
    proc = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 60
        while not (os.path.isdir(store) and temp_files(store)):
            assert proc.poll() is None, "the writer ended before it was killed"
            assert time.monotonic() < deadline, "no temp file within 60 s"
            time.sleep(0.01)
    finally:
        proc.kill()
    assert proc.wait(timeout=60) == -signal.SIGKILL
    assert artifacts.objects(store) == {}
    [leftover] = temp_files(store)
    assert leftover.endswith(".tmp")

    # An hour later, the next writer stores the file and removes the dead writer's leftover.
    hour_ago = time.time() - 3601
    os.utime(os.path.join(store, leftover), (hour_ago, hour_ago))
    stored = artifacts.store_file(store, source)
    assert stored.created and stored.size == 64 * MiB
    assert artifacts.objects(store) == {sha(b"\x07" * (64 * MiB)): 64 * MiB}
    assert temp_files(store) == []


def test_only_the_temp_files_of_writers_that_are_gone_are_removed(tmp_path, store):
    """A writer holds a lock on its temp file until it is placed or discarded, and the lock
    dies with its process: the file of a server killed mid-upload goes at the next upload
    (or start), not an hour later; a live writer's stays, whatever its age."""
    os.mkdir(store)
    live = artifacts.Staging(store, "live.jar")
    live.write(b"still coming")
    now = time.time()
    ages = {
        ".incoming-killed.tmp": 10,  # its writer killed: no lock held
        ".incoming-old.tmp": 3601,
        ".incoming-new.tmp": 0,  # may be a writer's between mkstemp and its lock
        ".other-old.tmp": 7200,  # not ours
        ".incoming-old.keep": 7200,
    }
    for name, age in ages.items():
        path = os.path.join(store, name)
        write_then = now - age
        open(path, "wb").close()
        os.utime(path, (write_then, write_then))
    hour_ago = now - 3601
    os.utime(live.path, (hour_ago, hour_ago))  # a stalled writer, still alive
    artifacts.store_file(store, write(tmp_path / "a", b"alpha"))
    assert sorted(n for n in os.listdir(store) if n.startswith(".")) == sorted(
        [".incoming-old.keep", ".incoming-new.tmp", ".other-old.tmp", os.path.basename(live.path)]
    )
    staged = live.finish()  # finished, but not yet placed: still its writer's
    os.utime(live.path, (hour_ago, hour_ago))
    remove_stale_temp_files(store)
    assert os.path.exists(staged.path)
    artifacts.place(store, staged, "live.jar")
    live.discard()
    assert artifacts.objects(store)[sha(b"still coming")] == 12


def test_eight_writers_of_the_same_bytes_at_once_leave_one_object(tmp_path, store):
    data = b"\x42" * (3 * MiB)
    sources = [write(tmp_path / f"{n}.jar", data) for n in range(8)]
    start = threading.Barrier(8)
    results, errors = [None] * 8, []

    def writer(n):
        start.wait()
        try:
            results[n] = artifacts.store_file(store, sources[n])
        except BaseException as error:  # reported below, not lost in the thread
            errors.append(error)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert {(r.sha256, r.size, r.path) for r in results} == {
        (sha(data), len(data), artifacts.object_path(store, sha(data)))
    }
    assert artifacts.objects(store) == {sha(data): len(data)}
    assert temp_files(store) == []
    assert artifacts.rehash(store, sha(data)) is None


# --- verify, rehash, objects, remove ------------------------------------------------------


def test_verify(tmp_path, store):
    stored = artifacts.store_file(store, write(tmp_path / "a", b"alpha"))
    assert artifacts.verify(store, stored.sha256, 5) is None
    assert artifacts.verify(store, stored.sha256, 6) == "is 5 bytes, expected 6 bytes"
    assert artifacts.verify(store, sha(b"beta"), 4) == "is missing"
    os.unlink(stored.path)
    os.mkdir(stored.path)
    assert artifacts.verify(store, stored.sha256, 5) == "is not a regular file"


def test_rehash(tmp_path, store):
    stored = artifacts.store_file(store, write(tmp_path / "a", b"alpha"))
    assert artifacts.rehash(store, stored.sha256) is None
    assert artifacts.rehash(store, sha(b"beta")) == "is missing"
    os.chmod(stored.path, 0o644)
    with open(stored.path, "r+b") as f:
        f.write(b"A")  # same size, other bytes: only rehash sees it
    assert artifacts.verify(store, stored.sha256, 5) is None
    assert (
        artifacts.rehash(store, stored.sha256) == f"holds other bytes: they hash to {sha(b'Alpha')}"
    )
    os.unlink(stored.path)
    os.symlink(tmp_path / "a", stored.path)
    assert artifacts.rehash(store, stored.sha256) == "is not a regular file"
    assert artifacts.verify(store, stored.sha256, 5) == "is not a regular file"


def test_objects_lists_only_objects(tmp_path, store):
    assert artifacts.objects(store) == {}  # no store yet
    a = artifacts.store_file(store, write(tmp_path / "a", b"alpha"))
    b = artifacts.store_file(store, write(tmp_path / "b", b"beta"))
    other = sha(b"other")
    wrong_dir = "00" if not other.startswith("00") else "01"
    junk = [
        ".incoming-abc.tmp",
        "README",
        other,  # an object's name at the top, not in its directory
        os.path.join(a.sha256[:2], ".incoming-x.tmp"),
        os.path.join(a.sha256[:2], a.sha256 + ".tmp"),
        os.path.join(a.sha256[:2], other.upper()),
        os.path.join(wrong_dir, other),  # in another prefix's directory
        os.path.join("zz", other),
    ]
    for name in junk:
        os.makedirs(os.path.dirname(os.path.join(store, name)), exist_ok=True)
        write(tmp_path / "artifacts" / name, b"junk")
    os.makedirs(os.path.join(store, other[:2], other))  # a directory named as an object
    os.symlink(a.path, os.path.join(store, b.sha256[:2], sha(b"link")))
    assert artifacts.objects(store) == {a.sha256: 5, b.sha256: 4}


def test_remove_deletes_exactly_the_objects_given(tmp_path, store):
    kept = artifacts.store_file(store, write(tmp_path / "a", b"alpha"))
    gone = [artifacts.store_file(store, write(tmp_path / n, n.encode())) for n in ["b", "c"]]
    junk = os.path.join(store, ".incoming-abc.tmp")
    write(tmp_path / "artifacts" / ".incoming-abc.tmp", b"junk")
    given = [g.sha256 for g in gone] + [sha(b"never stored")]
    expected = [objects.Removed(g.path, 1) for g in sorted(gone, key=lambda g: g.sha256)]
    assert artifacts.remove(store, given, dry_run=True) == expected
    assert len(artifacts.objects(store)) == 3
    assert artifacts.remove(store, given) == expected
    assert artifacts.objects(store) == {kept.sha256: 5}
    assert os.path.exists(junk)
    assert artifacts.remove(store, given) == []
    os.makedirs(os.path.join(store, sha(b"dir")[:2], sha(b"dir")))  # a directory is no object
    assert artifacts.remove(store, [sha(b"dir")]) == []


def test_remove_leaves_an_object_it_cannot_delete(tmp_path, store, monkeypatch):
    # A read-only store, or one owned by another user: what can go, goes; no exception
    # reaches a command that has already written its project file.
    a, b = (artifacts.store_file(store, write(tmp_path / n, n.encode())) for n in ["a", "b"])
    unlink = os.unlink

    def refused_for_a(path):
        if path == a.path:
            raise OSError(30, "Read-only file system", path)
        unlink(path)

    monkeypatch.setattr(artifacts.os, "unlink", refused_for_a)
    assert artifacts.remove(store, [a.sha256, b.sha256]) == [objects.Removed(b.path, 1)]
    assert artifacts.objects(store) == {a.sha256: 1}
