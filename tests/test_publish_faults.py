"""`buildshelf publish --file` under bad input and faults, each run as the real command in a
process of its own: exit 1, one line on stderr and nothing lost (the project file byte for
byte as it was, no temporary file left). Full and read-only file systems are real tmpfs
mounts (which need root with CAP_SYS_ADMIN: without it the tests fail under CI=true and are
skipped elsewhere) and, always, the same faults injected into the command's system calls,
asserting the same outcome. Then a writer killed during the copy, publishes of the same bytes
at once, and a hand edit naming an object that is not there, through `check` and a server.
"""

import ctypes
import hashlib
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import webtest

from buildshelf import server
from buildshelf import store as store_module
from buildshelf.datafiles import checking
from buildshelf.kept import artifacts
from buildshelf.kept.objects import CHUNK_BYTES
from buildshelf.kept.temp_files import LOCKING_SECONDS, TEMP_PREFIX
from helpers import ALPHA_BUILDS, ROOT, make_project, real_server, write_file

# Each test here starts a process (tests/conftest.py): none is in the fast lane.
pytestmark = pytest.mark.system

MiB = 1 << 20
CLI = ["-m", "buildshelf"]  # the command line, after the interpreter
TIMESTAMP = "1700000000000"


def sha(data):
    return hashlib.sha256(data).hexdigest()


def publish_argv(data, number, path, *flags):
    return ["publish", "alpha", "--data", str(data), "--build", str(number), "--channel",
            "1.21", "--timestamp", TIMESTAMP, "--file", str(path), *flags]  # fmt: skip


def run(argv, script=None, **options):
    """The real command with `argv` (through `script`, a faulty system's preamble, if given)."""
    command = [sys.executable, *CLI] if script is None else [sys.executable, "-c", script]
    return subprocess.run(
        command + [str(arg) for arg in argv],
        capture_output=True,
        text=True,
        timeout=120,
        **options,
    )


def temp_files(*directories):
    """Every temporary file a writer leaves under `directories` (`.incoming-*.tmp` in the
    store, `.<name>.*.tmp` beside a data file)."""
    return sorted(
        os.path.join(parent, name)
        for directory in directories
        for parent, _, names in os.walk(directory)
        for name in names
        if name.startswith(".") and name.endswith(".tmp")
    )


def objects(store_dir):
    return sorted(artifacts.objects(str(store_dir)))


def assert_refused(done, message, stdout=""):
    """Exit 1 and the message alone on one line of stderr: no traceback, no second line."""
    assert (done.returncode, done.stderr) == (1, f"buildshelf publish: {message}\n")
    assert done.stdout == stdout


def project_file(data):
    """The bytes of project alpha's file in the data directory `data`."""
    with open(os.path.join(data, "alpha.json"), "rb") as f:
        return f.read()


def make_data(directory):
    """A data directory with project alpha, as the conftest's fixture makes it."""
    os.makedirs(directory, exist_ok=True)
    write_file(os.path.join(directory, "alpha.json"), make_project(ALPHA_BUILDS))
    return directory


# --- bad --file inputs ------------------------------------------------------------------------


def bad_input(tmp_path, kind):
    """(the --file argument, the refusal it gets) for one kind of bad input."""
    if kind == "missing":
        path = tmp_path / "gone.jar"
        return path, f"cannot read {path}: No such file or directory"
    if kind == "directory":
        path = tmp_path / "dir.jar"
        path.mkdir()
        return path, f"{path} is a directory, not a regular file: give a file"
    if kind == "fifo":
        path = tmp_path / "fifo.jar"
        os.mkfifo(path)  # opened for reading, it would wait for a writer forever
        return path, f"{path} is a FIFO, not a regular file: give a file"
    if kind == "over the limit":
        path = tmp_path / "big.jar"
        path.write_bytes(b"x" * (MiB + 1))
        message = "is larger than 1 MiB: give --max-file-mb to raise the limit (nothing was stored)"
        return path, f"{path} {message}"
    name = {"space": "my build.jar", "leading dot": ".build.jar", "non-ASCII": "büild.jar"}[kind]
    path = tmp_path / name
    path.write_bytes(b"PK\x03\x04")
    return path, f"{name!r} is not a valid file name: {artifacts.NAME_RULE}"


@pytest.mark.parametrize(
    "kind",
    ["missing", "directory", "fifo", "over the limit", "space", "leading dot", "non-ASCII"],
)
def test_bad_file_input_is_refused_and_changes_nothing(data_dir, tmp_path, kind):
    path, message = bad_input(tmp_path, kind)
    before = (data_dir / "alpha.json").read_bytes()
    # A FIFO that made the command wait would end in the timeout, failing the test.
    done = run(publish_argv(data_dir, 9, path, "--max-file-mb", "1"))
    assert_refused(done, message)
    assert (data_dir / "alpha.json").read_bytes() == before
    assert objects(data_dir / "artifacts") == [] and temp_files(data_dir) == []


PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 24, 1, 2
libc = ctypes.CDLL(None, use_errno=True)


def without_root_file_access():
    """In the child, before exec: drop the capabilities that let root read any file from the
    bounding set, so that the command, still root, is refused as any user would be."""
    for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def test_an_unreadable_file_is_refused_and_changes_nothing(data_dir, tmp_path):
    secret = tmp_path / "secret.jar"
    secret.write_bytes(b"PK\x03\x04")
    secret.chmod(0)
    before = project_file(data_dir)
    as_root = {"preexec_fn": without_root_file_access} if os.geteuid() == 0 else {}
    done = run(publish_argv(data_dir, 9, secret), **as_root)
    assert_refused(done, f"cannot read {secret}: Permission denied")
    assert project_file(data_dir) == before
    assert objects(data_dir / "artifacts") == [] and temp_files(data_dir) == []


# --- a full disk and a read-only data directory ---------------------------------------------------

SPACE = 2 * MiB  # the tmpfs's size, and the simulated file system's

# The real command on a file system that fails as a full or read-only one would, for machines
# where mounting one is not allowed: the faults are injected into the system calls the
# command makes on paths under PLACE, and nowhere else.
FAULTY = """
import errno, os, sys
sys.path.insert(0, {root!r})
PLACE, FAULT, SPACE = {place!r}, {fault!r}, {space!r}

def inside(path):
    path = os.path.abspath(os.fsdecode(path))
    return path == PLACE or path.startswith(PLACE + os.sep)

def fail(code, path):
    raise OSError(code, os.strerror(code), os.fsdecode(path))

used = sum(
    os.lstat(os.path.join(parent, name)).st_size
    for parent, _, names in os.walk(PLACE)
    for name in names
)
real = {{name: getattr(os, name) for name in
        ["write", "open", "mkdir", "unlink", "remove", "rmdir", "replace", "rename", "chmod"]}}

def write(fd, data):
    global used
    if inside(os.readlink(f"/proc/self/fd/{{fd}}")):
        if used + len(data) > SPACE:
            fail(errno.ENOSPC, f"/proc/self/fd/{{fd}}")
        used += len(data)
    return real["write"](fd, data)

def open_(path, flags, *args, **kwargs):
    writes = flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC)
    creates = flags & os.O_CREAT and not os.path.lexists(path)
    if inside(path) and (writes or creates):
        fail(errno.EROFS, path)
    return real["open"](path, flags, *args, **kwargs)

def refused(name):
    def call(path, *args, **kwargs):
        if inside(path) and (name != "mkdir" or not os.path.lexists(path)):
            fail(errno.EROFS, path)
        return real[name](path, *args, **kwargs)
    return call

def renamed(name):
    def call(source, target, *args, **kwargs):
        if inside(source) or inside(target):
            fail(errno.EROFS, target)
        return real[name](source, target, *args, **kwargs)
    return call

if FAULT == "full":
    os.write = write
else:
    os.open = open_
    for name in ["mkdir", "unlink", "remove", "rmdir", "chmod"]:
        setattr(os, name, refused(name))
    for name in ["replace", "rename"]:
        setattr(os, name, renamed(name))

from buildshelf import cli
sys.exit(cli.main(sys.argv[1:]))
"""

MS_RDONLY, MS_REMOUNT = 1, 32


def _mount(source, target, kind, flags, options):
    if libc.mount(source, os.fsencode(target), kind, flags, options) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), target)


class Place:
    """A directory on a small file system that fills up or turns read-only: a real tmpfs, or
    a plain directory whose faults are injected into the commands run on it."""

    def __init__(self, path, real):
        self.path, self.real, self.fault = str(path), real, "full"

    def read_only(self):
        if self.real:
            _mount(None, self.path, None, MS_REMOUNT | MS_RDONLY, f"size={SPACE}".encode())
        self.fault = "read-only"

    def run(self, argv):
        if self.real:
            return run(argv)
        script = FAULTY.format(root=ROOT, place=self.path, fault=self.fault, space=SPACE)
        return run(argv, script)


@pytest.fixture(params=["tmpfs", "simulated"])
def place(request, tmp_path):
    path = tmp_path / "mnt"
    path.mkdir()
    if request.param == "simulated":
        yield Place(path, real=False)
        return
    try:
        _mount(b"tmpfs", path, b"tmpfs", 0, f"size={SPACE}".encode())
    except PermissionError:
        message = (
            "mounting a tmpfs was refused (EPERM): the file-system faults need root with "
            "CAP_SYS_ADMIN; the [simulated] variant of this test ran instead"
        )
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail("CI must run the file-system fault tests: " + message)
        pytest.skip(message)
    try:
        yield Place(path, real=True)
    finally:
        if libc.umount2(os.fsencode(path), 0) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"umount {path}: {os.strerror(code)}")


def test_a_disk_that_fills_during_the_copy_stores_nothing(place, tmp_path):
    data = make_data(os.path.join(place.path, "data"))
    store_dir = os.path.join(data, "artifacts")
    before = project_file(data)
    jar = tmp_path / "alpha-9.jar"
    jar.write_bytes(b"\x01" * (SPACE + MiB))  # larger than the space left
    done = place.run(publish_argv(data, 9, jar))
    assert_refused(
        done, f"cannot store {jar} in {store_dir}: No space left on device (nothing was stored)"
    )
    assert project_file(data) == before
    assert objects(store_dir) == [] and temp_files(place.path) == []
    # The space the temporary file took is free again: a small file is published.
    small = tmp_path / "alpha-10.jar"
    small.write_bytes(b"PK\x03\x04 small")
    done = place.run(publish_argv(data, 10, small))
    assert (done.returncode, done.stderr) == (0, "")
    assert objects(store_dir) == [sha(small.read_bytes())] and temp_files(place.path) == []


def test_a_read_only_data_directory_changes_nothing(place, tmp_path):
    data = make_data(os.path.join(place.path, "data"))
    store_dir = os.path.join(data, "artifacts")
    kept, stray = tmp_path / "alpha-9.jar", tmp_path / "stray.jar"
    kept.write_bytes(b"PK\x03\x04 kept")
    stray.write_bytes(b"PK\x03\x04 no build uses it")
    assert place.run(publish_argv(data, 9, kept)).returncode == 0
    assert place.run(publish_argv(data, 10, stray)).returncode == 0
    assert run(["yank", "alpha", "10", "--data", data]).returncode == 0
    # The yank deleted the stray object; put it back by hand, unused, as a copy would.
    stray_object = artifacts.object_path(store_dir, sha(stray.read_bytes()))
    os.makedirs(os.path.dirname(stray_object), exist_ok=True)
    shutil.copyfile(stray, stray_object)
    before = project_file(data)
    stored = objects(store_dir)
    place.read_only()

    jar = tmp_path / "alpha-11.jar"
    jar.write_bytes(b"PK\x03\x04 new")
    done = place.run(publish_argv(data, 11, jar))
    # The unused object cannot be deleted either: the refusal stays the one that matters.
    assert_refused(
        done, f"cannot store {jar} in {store_dir}: Read-only file system (nothing was stored)"
    )
    done = place.run(["yank", "alpha", "9", "--data", data])
    assert (done.returncode, done.stderr) == (
        1,
        f"buildshelf yank: cannot write {os.path.join(data, 'alpha.json')}: Read-only file "
        "system (the file is as it was)\n",
    )
    assert project_file(data) == before
    assert objects(store_dir) == stored and temp_files(place.path) == []


def test_a_read_only_data_directory_keeps_no_object_in_a_store_elsewhere(place, tmp_path):
    data = make_data(os.path.join(place.path, "data"))
    store_dir = str(tmp_path / "store")  # writable: the object is stored, then the file fails
    first = tmp_path / "alpha-9.jar"
    first.write_bytes(b"PK\x03\x04 first")
    assert place.run(publish_argv(data, 9, first, "--artifacts", store_dir)).returncode == 0
    before = project_file(data)
    place.read_only()
    jar = tmp_path / "alpha-10.jar"
    jar.write_bytes(b"PK\x03\x04 second")
    done = place.run(publish_argv(data, 10, jar, "--artifacts", store_dir))
    # The object stored for the refused build was deleted, and said: no build uses it.
    stored = artifacts.object_path(store_dir, sha(jar.read_bytes()))
    assert_refused(
        done,
        f"cannot write {os.path.join(data, 'alpha.json')}: Read-only file system (the file is "
        "as it was)",
        f"deleted {stored} (11 bytes), no build uses it\n",
    )
    assert project_file(data) == before
    assert objects(store_dir) == [sha(first.read_bytes())]
    assert temp_files(place.path, store_dir) == []


def test_an_object_that_cannot_be_deleted_stays_unused_and_the_yank_succeeds(data_dir, tmp_path):
    # A store the command may not change (read-only, or another user's): the build is
    # yanked, its object stays, and `check` lists it as a yanked build's kept file; the
    # command does not fail after its write.
    jar = tmp_path / "alpha-9.jar"
    jar.write_bytes(b"PK\x03\x04 kept")
    assert run(publish_argv(data_dir, 9, jar)).returncode == 0
    store_dir = str(data_dir / "artifacts")
    script = FAULTY.format(root=ROOT, place=store_dir, fault="read-only", space=SPACE)
    done = run(["yank", "alpha", "9", "--purge", "--data", data_dir], script)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("yanked build 9 of alpha: kept its file ")
    assert "yankedAt" in next(
        b
        for b in json.loads((data_dir / "alpha.json").read_text())["builds"]
        if b["buildNumber"] == 9
    )
    checked = run(["check", "--data", data_dir, "--verbose"])
    assert checked.returncode == 0
    path = artifacts.object_path(store_dir, sha(jar.read_bytes()))
    assert f"yanked build 9 of alpha keeps {path} (" in checked.stdout  # for a later purge


# --- a writer killed during the copy --------------------------------------------------------------

# The real command, stopped once its first chunk is in the store's temporary file, so that it
# is killed during the copy however fast the disk: the test waits for that, not for a time.
STOPPED_MID_COPY = """
import os, signal, sys
sys.path.insert(0, {root!r})
real_write = os.write
def write(fd, data):
    written = real_write(fd, data)
    if os.path.basename(os.readlink(f"/proc/self/fd/{{fd}}")).startswith(".incoming-"):
        signal.pause()
    return written
os.write = write
from buildshelf import cli
sys.exit(cli.main(sys.argv[1:]))
"""


def test_a_writer_killed_during_the_copy_loses_nothing(data_dir, tmp_path):
    store_dir = str(data_dir / "artifacts")
    jar = tmp_path / "alpha-9.jar"
    jar.write_bytes(bytes(range(256)) * (32 * 4096))  # 32 MiB: many chunks
    before = (data_dir / "alpha.json").read_bytes()
    script = STOPPED_MID_COPY.format(root=ROOT)
    argv = [str(a) for a in publish_argv(data_dir, 9, jar)]
    proc = subprocess.Popen([sys.executable, "-c", script, *argv], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not any(os.path.getsize(t) >= CHUNK_BYTES for t in temp_files(store_dir)):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "no chunk in a temporary file within 60 s"
            time.sleep(0.01)
    finally:
        proc.kill()
    assert proc.wait(timeout=60) == -signal.SIGKILL
    proc.stderr.close()
    assert (data_dir / "alpha.json").read_bytes() == before
    assert objects(store_dir) == []
    [leftover] = temp_files(data_dir)
    assert os.path.dirname(leftover) == store_dir
    assert os.path.basename(leftover).startswith(TEMP_PREFIX)

    # The leftover is no object and no build names it: nothing for check to report.
    checked = run(["check", "--data", data_dir])
    assert (checked.returncode, checked.stdout) == (0, "")
    # The dead writer's lock died with it: the retry publishes, and removes its temporary
    # file, which no process holds locked, once it is LOCKING_SECONDS old (a younger one may be
    # a live writer's that has not locked it yet). Made that old here: how long the retry took
    # to start must not decide what it finds.
    old = time.time() - LOCKING_SECONDS - 1
    os.utime(leftover, (old, old))
    done = run(publish_argv(data_dir, 9, jar))
    assert (done.returncode, done.stdout) == (0, "published build 9 of alpha\n")
    assert objects(store_dir) == [sha(jar.read_bytes())]
    assert temp_files(data_dir) == []
    assert checking.check(str(data_dir), store_dir) == 0


# --- publishes of the same bytes at once ----------------------------------------------------------


def start(argv):
    return subprocess.Popen(
        [sys.executable, *CLI, *map(str, argv)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(procs):
    return [(proc.wait(timeout=120), *proc.communicate()) for proc in procs]


def kept_builds(data_dir):
    doc = json.loads((data_dir / "alpha.json").read_text())
    return {
        b["buildNumber"]: (b["file"], b["sha256"], b["size"]) for b in doc["builds"] if "file" in b
    }


def test_publishes_of_the_same_bytes_at_once_share_one_object(data_dir, tmp_path):
    data = b"PK\x03\x04" + bytes(range(256)) * (3 * 4096)  # 3 MiB: more than one chunk
    jars = []
    for number in range(9, 13):
        jars.append(tmp_path / f"alpha-{number}.jar")
        jars[-1].write_bytes(data)
    results = finish([start(publish_argv(data_dir, 9 + n, jar)) for n, jar in enumerate(jars)])
    assert results == [(0, f"published build {9 + n} of alpha\n", "") for n in range(4)]
    assert kept_builds(data_dir) == {
        9 + n: (f"alpha-{9 + n}.jar", sha(data), len(data)) for n in range(4)
    }
    assert objects(data_dir / "artifacts") == [sha(data)]
    assert temp_files(data_dir) == []


def test_publishes_of_the_same_build_at_once_add_it_once(data_dir, tmp_path):
    jar = tmp_path / "alpha-9.jar"
    jar.write_bytes(b"PK\x03\x04" + bytes(range(256)) * (3 * 4096))
    results = finish([start(publish_argv(data_dir, 9, jar)) for _ in range(4)])
    assert sorted(results) == [
        (0, "build 9 of alpha is already there as given: nothing changed\n", ""),
    ] * 3 + [(0, "published build 9 of alpha\n", "")]
    assert kept_builds(data_dir) == {9: ("alpha-9.jar", sha(jar.read_bytes()), jar.stat().st_size)}
    assert objects(data_dir / "artifacts") == [sha(jar.read_bytes())]
    assert temp_files(data_dir) == []


# --- a hand edit naming an object that is not there -----------------------------------------------


@pytest.fixture(params=["another sha256", "another size"])
def hand_edited(request, data_dir, tmp_path):
    """Build 9 published with its file, then its sha256 or size changed by hand: (the data
    directory, the build as edited, what `check` says of its object)."""
    jar = tmp_path / "alpha-9.jar"
    jar.write_bytes(b"PK\x03\x04 the real bytes")
    assert run(publish_argv(data_dir, 9, jar)).returncode == 0
    doc = json.loads((data_dir / "alpha.json").read_text())
    [build] = [b for b in doc["builds"] if b["buildNumber"] == 9]
    if request.param == "another sha256":
        build["sha256"] = sha(b"bytes never stored")
        problem = "is missing"
    else:
        problem = f"is {build['size']} bytes, expected {build['size'] + 1} bytes"
        build["size"] += 1
    write_file(data_dir / "alpha.json", doc)
    return data_dir, build, problem


def test_check_names_a_hand_edited_build_whose_object_is_not_there(hand_edited):
    data_dir, build, problem = hand_edited
    done = run(["check", "--data", data_dir])
    assert done.returncode == 1
    assert (
        done.stdout
        == f"{data_dir / 'alpha.json'}: build 9, file alpha-9.jar: its object {problem}\n"
    )


def get(port, path, method="GET"):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path)
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type"), response.read()
    finally:
        conn.close()


def test_a_hand_edited_build_whose_object_is_not_there_is_a_503_and_the_rest_serves(hand_edited):
    data_dir, build, _ = hand_edited
    url = f"/downloads/alpha/9/{build['sha256']}/alpha-9.jar"
    with real_server(data_dir, "--quiet") as (port, _):
        for method in ["GET", "HEAD"]:
            status, kind, body = get(port, url, method)
            assert (status, kind) == (503, "application/json")
            if method == "GET":
                assert json.loads(body) == {
                    "error": "the file of build 9 of 'alpha' is unavailable on this server; "
                    "try again later",
                    "code": "artifact_unavailable",
                }
        # Made from the data, the checksum line answers while the object is missing.
        assert get(port, url + ".sha256")[::2] == (
            200,
            f"{build['sha256']}  alpha-9.jar\n".encode(),
        )
        for path in [
            "/",
            "/projects/alpha",
            "/api/v2/projects",
            "/api/v2/builds?project=alpha",
            "/api/v2/builds/latest?project=alpha",
            "/api/v2/feed?project=alpha",
            "/api/v2/builds/check?project=alpha&build=5",
            f"/api/v2/builds/check?project=alpha&sha256={build['sha256']}",
        ]:
            assert get(port, path)[0] == 200, path
        latest = json.loads(get(port, "/api/v2/builds/latest?project=alpha")[2])
        assert (latest["sha256"], latest["size"]) == (build["sha256"], build["size"])
        assert get(port, "/downloads/latest?project=alpha")[0] == 302


def test_health_names_a_hand_edited_build_whose_object_is_not_there(hand_edited):
    data_dir, build, problem = hand_edited
    store = store_module.Store(data_dir, check_interval=0)
    health = webtest.TestApp(server.make_app(store)).get("/healthz")
    assert health.status_int == 200 and health.json["status"] == "degraded"
    path = artifacts.object_path(str(data_dir / "artifacts"), build["sha256"])
    assert health.json["unavailableFiles"] == [
        {"project": "alpha", "build": 9, "file": "alpha-9.jar", "problem": f"{path} {problem}"}
    ]
