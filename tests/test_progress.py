"""Progress of long work: a line rewritten in a terminal (a pseudo-terminal here) at most a
few times a second and cleared at the end; nothing when stderr is not a terminal, as under
cron. Through the real commands, `publish --file` and `import-jenkins --mirror`."""

import fcntl
import io
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import termios
import time

import pytest

import test_jenkins
from buildshelf import progress
from test_jenkins import A21, JAR21

project, mirrored_job = test_jenkins.project, test_jenkins.mirrored_job  # their fixtures

BIG = 64 << 20


def run(code, terminal, stdin=subprocess.DEVNULL):
    """`python -c code` with its stderr a pseudo-terminal (or a pipe): (exit status, what
    reached stderr; with a pipe, its stdout too)."""
    if not terminal:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
        )
        return done.returncode, done.stderr, done.stdout
    controller, terminal_end = pty.openpty()
    fcntl.ioctl(terminal_end, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 160, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=stdin,
        stdout=subprocess.DEVNULL,
        stderr=terminal_end,
    )
    os.close(terminal_end)
    shown = b""
    while True:
        try:
            data = os.read(controller, 1 << 16)
        except OSError:  # EIO: every end of the terminal closed
            break
        if not data:
            break
        shown += data
    os.close(controller)
    return proc.wait(timeout=60), shown.decode()


def publish_code(data_dir, *file):
    # The first line is due at once: copying 64 MiB takes less than the half second a real
    # run waits before saying anything.
    argv = ["publish", "alpha", "--data", str(data_dir), "--build", "9", "--channel", "1.21",
            "--file", *map(str, file)]  # fmt: skip
    return (
        "from buildshelf import cli, progress\n"
        "progress.FIRST_AFTER = 0\n"
        f"raise SystemExit(cli.main({argv!r}))\n"
    )


def lines_drawn(shown):
    """The lines a terminal showed one after the other, the clearing one last."""
    assert shown.startswith("\r") and shown.endswith("\r"), repr(shown)
    return shown[1:-1].split("\r")


@pytest.fixture
def big_jar(tmp_path):
    jar = tmp_path / "big.jar"
    jar.write_bytes(b"x" * BIG)
    return jar


@pytest.mark.system
def test_publish_of_a_large_file_shows_its_progress_in_a_terminal(data_dir, big_jar):
    status, shown = run(publish_code(data_dir, big_jar), terminal=True)
    assert status == 0, shown
    *drawn, cleared = lines_drawn(shown)
    assert drawn and all(line.startswith("storing big.jar: ") for line in drawn), drawn
    assert all(" of 64.0 MiB (" in line for line in drawn), drawn
    assert cleared.strip() == "" and len(cleared) == len(drawn[-1].rstrip())


@pytest.mark.system
def test_publish_of_a_file_on_stdin_shows_its_name_and_what_was_read(data_dir, big_jar):
    with open(big_jar, "rb") as stdin:
        code = publish_code(data_dir, "-", "--name", "alpha-9.jar")
        status, shown = run(code, terminal=True, stdin=stdin)
    assert status == 0, shown
    *drawn, _ = lines_drawn(shown)
    assert drawn and all(re.match(r"storing alpha-9\.jar: [\d.,]+ MiB *$", d) for d in drawn), drawn


@pytest.mark.system
def test_publish_shows_nothing_when_stderr_is_not_a_terminal(data_dir, big_jar):
    status, shown, out = run(publish_code(data_dir, big_jar), terminal=False)
    assert (status, shown, out) == (0, "", "published build 9 of alpha\n")


def slowly(body, pieces=5, pause=0.25):
    """A route's handler sending `body` in `pieces` over pieces x `pause` seconds."""

    def handle(handler):
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        step = -(-len(body) // pieces)
        for start in range(0, len(body), step):
            handler.wfile.write(body[start : start + step])
            handler.wfile.flush()
            time.sleep(pause)

    return handle


def mirror_code(data_dir, job):
    argv = ["import-jenkins", "canvas", "--data", str(data_dir), "--job-json", str(job),
            "--mirror"]  # fmt: skip
    return f"from buildshelf import cli\nraise SystemExit(cli.main({argv!r}))\n"


@pytest.mark.system
def test_each_mirror_download_shows_its_progress_in_a_terminal(
    project,
    mirrored_job,
    fake_jenkins,
    tmp_path,  # noqa: F811
):
    fake_jenkins.routes[A21] = slowly(JAR21)  # build 25's comes at once: no line
    other = tmp_path / "other"
    shutil.copytree(project.parent, other)
    status, shown = run(mirror_code(project.parent, mirrored_job), terminal=True)
    assert status == 0, shown
    *drawn, cleared = lines_drawn(shown)
    url = fake_jenkins.base + A21
    assert drawn and all(line.startswith(f"downloading {url}: ") for line in drawn), drawn
    assert all(" of " in line and "%)" in line for line in drawn), drawn
    assert cleared.strip() == ""
    status, shown, out = run(mirror_code(other, mirrored_job), terminal=False)
    assert (status, shown) == (0, "") and "added build 21" in out


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_line_is_rewritten_a_few_times_a_second_at_most():
    clock, terminal = Clock(), Terminal()
    with progress.Meter("storing a.jar", terminal, clock) as meter:
        for done in range(0, 1001):  # 10 s of work, noted each 10 ms
            clock.now = done / 100
            meter(done << 20, 1000 << 20)
    *drawn, cleared = lines_drawn(terminal.getvalue())
    assert len(drawn) <= 10 / progress.EVERY and drawn[0].startswith("storing a.jar: 50.0 MiB of")
    assert drawn[-1].rstrip() == "storing a.jar: 1,000.0 MiB of 1,000.0 MiB (100%)"
    assert cleared == " " * len(drawn[-1].rstrip())


def test_a_long_label_is_cut_in_its_middle_to_fit_the_terminal():
    clock, terminal = Clock(), Terminal()  # one that does not say its width: 80 columns
    url = "https://ci.example.org/job/Alpha/21/artifact/build/libs/alpha-1.21.4-21.jar"
    with progress.Meter(f"downloading {url}", terminal, clock) as meter:
        for done in range(0, 101):
            clock.now = done / 10
            meter(done << 10 if done < 100 else 1 << 30, 1 << 30)
    *drawn, _ = lines_drawn(terminal.getvalue())
    assert all(len(line) < 80 for line in drawn), drawn
    # The same room for the label whatever the numbers: it does not jump about.
    assert {line.partition(": ")[0] for line in drawn} == {
        "downloading https://...s/alpha-1.21.4-21.jar"
    }


def test_quick_work_and_no_terminal_show_nothing():
    clock, terminal, pipe = Clock(), Terminal(), io.StringIO()
    with progress.Meter("storing a.jar", terminal, clock) as meter:
        meter(1, 2)
    with progress.Meter("storing a.jar", pipe, clock) as meter:
        clock.now = 10
        meter(1, 2)
    assert terminal.getvalue() == pipe.getvalue() == ""
