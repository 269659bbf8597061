"""The serving side of uploads, over a real socket: the app's screen answers once a request's
head is in, before its body is read (no 100 Continue for a refusal); bodies over the limit
get a JSON 413, by Content-Length or as chunks arrive; a body is held in an anonymous file in
the directory the server is given, and a stalled one is dropped with it at the channel
timeout; nothing is left behind."""

import hashlib
import json
import os
import random
import re
import resource
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from buildshelf.serving.bodies import BACKLOG_BYTES, BodyBuffer, BodyWriter
from helpers import ROOT, free_port, real_server

MAX_BODY = 3 << 20  # over bodies.BODY_IN_MEMORY: held in a file
TIMEOUT = 2  # the channel timeout of the server that drops stalled bodies
UPLOAD = "PUT /upload HTTP/1.1\r\nHost: x\r\n{}\r\n"  # the headers put in {}


class UploadServer:
    """tests/upload_app.py on a free port: the real server over make_app, with a stand-in
    upload route and screen."""

    def __init__(self, data_dir, bodies, channel_timeout=None, env=None, preexec_fn=None):
        self.port, self.bodies = free_port(), bodies
        argv = [sys.executable, os.path.join(ROOT, "tests", "upload_app.py"), str(data_dir),
                str(self.port), str(bodies), str(MAX_BODY)]  # fmt: skip
        self.proc = subprocess.Popen(
            argv + ([str(channel_timeout)] if channel_timeout else []),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
            preexec_fn=preexec_fn,
        )
        assert self.proc.stdout.readline() == "listening\n", self.proc.communicate()[1]

    def stop(self):
        """The server's log, once it has stopped."""
        self.proc.send_signal(signal.SIGINT)
        return self.proc.communicate(timeout=20)[1]

    def body_files(self):
        """The files the server holds open in the bodies directory (anonymous ones too)."""
        links = []
        for fd in os.listdir(f"/proc/{self.proc.pid}/fd"):
            try:
                links.append(os.readlink(f"/proc/{self.proc.pid}/fd/{fd}"))
            except OSError:  # closed meanwhile
                pass
        return [link for link in links if link.startswith(str(self.bodies) + "/")]

    def holds_no_body(self):
        """Whether the server holds no body file, once the request it answered is over (its
        worker closes the body just after the answer is sent)."""
        deadline = time.monotonic() + 5
        while self.body_files():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def connect(self):
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)


@pytest.fixture
def server(data_dir, tmp_path):
    bodies = tmp_path / "bodies"
    bodies.mkdir()
    started = UploadServer(data_dir, bodies)
    try:
        yield started
    finally:
        if started.proc.poll() is None:
            started.stop()
    assert os.listdir(bodies) == []


_left = {}  # socket -> what was read of it past the last answer


def read_answer(sock):
    """(status, headers with lower-case names, body) of one answer; its body by
    Content-Length."""
    data = _left.pop(sock, b"")
    while b"\r\n\r\n" not in data:
        more = sock.recv(65536)
        assert more, f"closed after {data!r}"
        data += more
    head, _, rest = data.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value for name, value in (line.split(": ", 1) for line in lines)}
    length = int(headers.get("content-length", 0))
    while len(rest) < length:
        more = sock.recv(65536)
        assert more, "closed in the body"
        rest += more
    _left[sock] = rest[length:]
    return int(status.split()[1]), headers, rest[:length]


def closed(sock):
    """Whether the server closed `sock` (at once: within its timeout) after the answers."""
    try:
        return _left.pop(sock, b"") + sock.recv(1) == b""
    except ConnectionResetError:
        return True


def upload(server, body, headers="Authorization: Bearer x\r\n", expect=False):
    """PUT `body` to /upload by Content-Length: (status, headers, JSON body)."""
    head = f"Content-Length: {len(body)}\r\n{headers}"
    with server.connect() as sock:
        if expect:
            sock.sendall(UPLOAD.format(head + "Expect: 100-continue\r\n").encode())
            assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        else:
            sock.sendall(UPLOAD.format(head).encode())
        sock.sendall(body)
        status, headers, answer = read_answer(sock)
    return status, headers, json.loads(answer)


@pytest.mark.system
@pytest.mark.parametrize("expect", [False, True])
def test_a_refusal_is_answered_from_the_head_alone_and_the_connection_closed(server, expect):
    with server.connect() as sock:
        head = f"Content-Length: {1 << 30}\r\n" + ("Expect: 100-continue\r\n" if expect else "")
        sock.sendall(UPLOAD.format(head).encode())  # and not a byte of the body
        status, headers, body = read_answer(sock)
        assert status == 401 and headers["www-authenticate"] == "Bearer"  # no 100 Continue
        assert json.loads(body)["code"] == "unauthorized"
        assert headers["connection"] == "close" and closed(sock)


@pytest.mark.system
@pytest.mark.parametrize("expect", [False, True])
def test_a_content_length_over_the_limit_is_a_json_413_at_once(server, expect):
    with server.connect() as sock:
        head = f"Content-Length: {MAX_BODY + 1}\r\nAuthorization: Bearer x\r\n"
        sock.sendall(UPLOAD.format(head + ("Expect: 100-continue\r\n" if expect else "")).encode())
        status, headers, body = read_answer(sock)
        assert (status, json.loads(body)["code"]) == (413, "too_large")
        assert headers["connection"] == "close" and closed(sock)


@pytest.mark.system
def test_a_client_that_sends_its_body_anyway_is_answered_and_closed(server):
    with server.connect() as sock:
        size = 32 << 20  # more than the sockets' buffers hold
        sock.sendall(UPLOAD.format(f"Content-Length: {size}\r\n").encode())
        # The whole body before reading, as many clients do: the server, having answered,
        # drops what comes until the client closes, where a close at once sent a reset
        # that made this send fail, and could reach the client before the answer.
        sock.sendall(b"x" * size)
        status, headers, _ = read_answer(sock)
        assert status == 401 and headers["connection"] == "close" and closed(sock)
    assert server.holds_no_body()


@pytest.mark.system
@pytest.mark.parametrize("expect", [False, True])
def test_a_body_of_up_to_the_limit_is_taken_whole(server, expect):
    body = random.Random(1).randbytes(MAX_BODY)
    status, _, answer = upload(server, body, expect=expect)
    assert status == 200
    assert answer == {"sha256": hashlib.sha256(body).hexdigest(), "size": MAX_BODY}
    assert server.holds_no_body()


def chunked(body, size=100_000):
    pieces = [body[at : at + size] for at in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"


@pytest.mark.system
def test_a_chunked_body_is_taken_and_one_that_grows_past_the_limit_is_a_json_413(server):
    body = random.Random(2).randbytes(MAX_BODY // 2)
    with server.connect() as sock:
        sock.sendall(UPLOAD.format("Transfer-Encoding: chunked\r\nAuthorization: x\r\n").encode())
        sock.sendall(chunked(body))
        status, _, answer = read_answer(sock)
        assert (status, json.loads(answer)["size"]) == (200, len(body))
    with server.connect() as sock:
        sock.sendall(UPLOAD.format("Transfer-Encoding: chunked\r\nAuthorization: x\r\n").encode())
        try:
            sock.sendall(chunked(body + body + body))
        except ConnectionError:
            pass  # closed after the answer: the rest is not read
        status, headers, answer = read_answer(sock)
        assert (status, json.loads(answer)["code"]) == (413, "too_large")
        assert f"{MAX_BODY:,}" in json.loads(answer)["error"]
        assert headers["connection"] == "close"
    assert server.holds_no_body()


@pytest.mark.system
def test_a_stalled_body_is_dropped_at_the_channel_timeout_with_its_buffer(data_dir, tmp_path):
    bodies = tmp_path / "bodies"
    bodies.mkdir()
    server = UploadServer(data_dir, bodies, channel_timeout=TIMEOUT)
    try:
        with server.connect() as sock:
            # A Content-Length that lies: a shorter body, then nothing.
            sock.sendall(
                UPLOAD.format(f"Content-Length: {MAX_BODY}\r\nAuthorization: x\r\n").encode()
            )
            sock.sendall(b"x" * (MAX_BODY // 2))
            # The channel timeout runs from the last bytes received, not from the checks below.
            last_sent = time.monotonic()
            time.sleep(0.5)
            [held] = server.body_files()  # on disk, in the directory given, with no name
            assert re.fullmatch(re.escape(str(bodies)) + r"/.* \(deleted\)", held)
            assert os.listdir(bodies) == []
            assert closed(sock)  # dropped, with no answer
            assert TIMEOUT - 0.5 < time.monotonic() - last_sent < TIMEOUT + 3
        assert server.holds_no_body()
        assert server.proc.poll() is None
    finally:
        log = server.stop()
    assert "Traceback" not in log, log


@pytest.mark.system
@pytest.mark.parametrize("pace", ["trickle", "slow but steady"])
def test_a_trickling_body_is_dropped_at_the_channel_timeout_and_a_slow_one_is_not(
    data_dir, tmp_path, pace
):
    """A byte now and then resets waitress's timeout for ever: a body must also come at
    connection.MIN_BODY_RATE over each channel timeout, and one that does is taken whole."""
    bodies = tmp_path / "bodies"
    bodies.mkdir()
    server = UploadServer(data_dir, bodies, channel_timeout=TIMEOUT)
    every, size = 0.25, 10 if pace == "trickle" else 1024  # 40 or 4,096 bytes a second
    body = os.urandom(int(size * 4 * TIMEOUT * 3))  # sent over 3 channel timeouts
    try:
        with server.connect() as sock:
            head = f"Content-Length: {len(body)}\r\nAuthorization: x\r\n"
            sock.sendall(UPLOAD.format(head).encode())
            started = time.monotonic()
            try:
                for at in range(0, len(body), size):
                    sock.sendall(body[at : at + size])
                    time.sleep(every)
            except (BrokenPipeError, ConnectionResetError):
                pass
            if pace == "trickle":
                assert closed(sock)  # dropped, with no answer
                assert time.monotonic() - started < 2 * TIMEOUT + 2
            else:
                status, _, answer = read_answer(sock)
                assert (status, json.loads(answer)["sha256"]) == (
                    200,
                    hashlib.sha256(body).hexdigest(),
                )
        assert server.holds_no_body()
    finally:
        log = server.stop()
    assert "Traceback" not in log, log
    assert ("less than 500 bytes a second" in log) == (pace == "trickle"), log


@pytest.mark.system
def test_a_content_length_shorter_than_the_body_ends_the_request_there(server):
    body = b"a" * 1000
    with server.connect() as sock:
        sock.sendall(UPLOAD.format("Content-Length: 1000\r\nAuthorization: x\r\n").encode())
        sock.sendall(body + b"the rest is not a request\r\n\r\n")
        status, _, answer = read_answer(sock)
        assert (status, json.loads(answer)["sha256"]) == (200, hashlib.sha256(body).hexdigest())
        status, headers, _ = read_answer(sock)  # what followed, as a request: refused
        assert status == 400 and headers["connection"] == "close" and closed(sock)


@pytest.mark.system
def test_a_refusal_pipelined_after_a_request_is_answered_in_its_turn(server):
    with server.connect() as sock:
        sock.sendall(
            b"GET /api/v2/projects HTTP/1.1\r\nHost: x\r\n\r\n"
            + UPLOAD.format("Content-Length: 100000\r\n").encode()
        )
        assert read_answer(sock)[0] == 200
        assert read_answer(sock)[0] == 401 and closed(sock)


@pytest.mark.system
def test_a_failing_screen_refuses_with_a_500_and_logs_why(server):
    with server.connect() as sock:
        sock.sendall(b"GET /screen-fails HTTP/1.1\r\nHost: x\r\n\r\n")
        status, _, body = read_answer(sock)
        assert (status, json.loads(body)["code"]) == (500, "internal_error") and closed(sock)
    log = server.stop()
    assert "RuntimeError: a bug in the screen" in log


@pytest.mark.system
def test_the_screen_sees_the_client_address_as_the_proxy_settings_make_it(data_dir, tmp_path):
    (tmp_path / "bodies").mkdir()
    forwarded = b"GET /whom HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 192.0.2.7\r\n\r\n"
    for env, seen in [({}, "127.0.0.1"), ({"UPLOAD_APP_TRUSTED_PROXY": "127.0.0.1"}, "192.0.2.7")]:
        server = UploadServer(data_dir, tmp_path / "bodies", env=env)
        try:
            with server.connect() as sock:
                sock.sendall(forwarded)
                assert json.loads(read_answer(sock)[2])["error"] == seen
        finally:
            server.stop()


GET_WITH_BODY = "GET /api/v2/projects HTTP/1.1\r\nHost: x\r\n{}\r\n"


@pytest.mark.system
@pytest.mark.parametrize("stand_in", [False, True])
def test_a_body_of_a_get_is_still_held_to_1_kib_with_a_json_413(data_dir, tmp_path, stand_in):
    def answers(port):
        for head, body in [
            ("Content-Length: 1024\r\n", b"x" * 1024),
            ("Content-Length: 1025\r\n", b"x" * 1025),
            ("Transfer-Encoding: chunked\r\n", chunked(b"x" * 2000, 500)),
        ]:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(GET_WITH_BODY.format(head).encode() + body)
                status, headers, answer = read_answer(sock)
                yield status, json.loads(answer).get("code"), headers.get("connection")

    expected = [(200, None, None), (413, "too_large", "close"), (413, "too_large", "close")]
    if stand_in:  # the app's screen refuses them
        (tmp_path / "bodies").mkdir()
        server = UploadServer(data_dir, tmp_path / "bodies")
        try:
            assert list(answers(server.port)) == expected
        finally:
            server.stop()
    else:  # make_app as it is: the server's own limit
        with real_server(data_dir, "--quiet") as (port, _):
            assert list(answers(port)) == expected


def at_most_a_mib_a_file():
    """In the server's process: files end at 1 MiB, as on a disk that is full then (EFBIG
    where a full disk says ENOSPC: the server takes either as no room)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # kept across exec: the write fails instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))


@pytest.mark.system
def test_a_body_with_no_room_on_disk_is_a_json_507_and_logged(data_dir, tmp_path):
    (tmp_path / "bodies").mkdir()
    server = UploadServer(data_dir, tmp_path / "bodies", preexec_fn=at_most_a_mib_a_file)
    try:
        with server.connect() as sock:
            sock.sendall(
                UPLOAD.format(f"Content-Length: {MAX_BODY}\r\nAuthorization: x\r\n").encode()
            )
            try:
                sock.sendall(b"x" * MAX_BODY)
            except ConnectionError:
                pass  # closed after the answer: the rest is not read
            status, headers, body = read_answer(sock)
            assert (status, json.loads(body)["code"]) == (507, "insufficient_storage")
            assert headers["connection"] == "close"
        assert server.holds_no_body()
        assert upload(server, b"fits in memory")[0] == 200
        assert upload(server, b"held in a file" * 20_000)[0] == 200  # the writer goes on
    finally:
        log = server.stop()
    assert f"cannot keep a request body in {tmp_path / 'bodies'}: File too large" in log, log
    assert "Traceback" not in log


@pytest.mark.system
def test_a_body_whose_last_bytes_find_no_room_is_a_json_507(data_dir, tmp_path):
    """The last write fails once the body is whole, as the app reads it: still a 507."""
    (tmp_path / "bodies").mkdir()
    server = UploadServer(data_dir, tmp_path / "bodies", preexec_fn=at_most_a_mib_a_file)
    try:
        with server.connect() as sock:
            size = (1 << 20) + 100
            sock.sendall(UPLOAD.format(f"Content-Length: {size}\r\nAuthorization: x\r\n").encode())
            sock.sendall(b"x" * (1 << 20))
            time.sleep(0.5)  # all written: the file is full
            sock.sendall(b"x" * 100)
            status, _, body = read_answer(sock)
            assert (status, json.loads(body)["code"]) == (507, "insufficient_storage")
        assert server.holds_no_body()
        assert upload(server, b"held in a file" * 20_000)[0] == 200
    finally:
        log = server.stop()
    assert f"cannot keep a request body in {tmp_path / 'bodies'}: File too large" in log, log
    assert "Traceback" not in log


@pytest.mark.system
def test_a_disk_that_holds_up_a_bodys_writes_holds_up_no_other_request(data_dir, tmp_path):
    """A body held in a file is written off the loop thread, which answers every request:
    while each write of an upload waits half a second for the disk, other requests are
    answered at once, and the upload is taken whole."""
    (tmp_path / "bodies").mkdir()
    server = UploadServer(data_dir, tmp_path / "bodies", env={"UPLOAD_APP_SLOW_DISK": "0.5"})
    body = random.randbytes(512 << 10)  # 8 writes or so: 4 s
    answered = []
    uploading = threading.Thread(target=lambda: answered.append(upload(server, body)))
    try:
        uploading.start()
        time.sleep(0.5)  # the body spilled to its file, whose writes wait
        waits = []
        for _ in range(5):
            started = time.monotonic()
            with server.connect() as sock:
                sock.sendall(b"GET /api/v2/projects HTTP/1.1\r\nHost: x\r\n\r\n")
                assert read_answer(sock)[0] == 200
            waits.append(time.monotonic() - started)
        assert uploading.is_alive()  # the requests were answered beside the upload
        uploading.join(30)
        status, _, answer = answered[0]
        assert (status, answer) == (
            200,
            {"sha256": hashlib.sha256(body).hexdigest(), "size": len(body)},
        )
        assert max(waits) < 0.25, waits
        assert server.holds_no_body()
    finally:
        log = server.stop()
    assert "Traceback" not in log


def test_a_bug_in_a_write_stops_no_later_write(tmp_path, caplog):
    woken = []
    writer = BodyWriter(wake=lambda: woken.append(True))
    body = BodyBuffer(str(tmp_path), writer)
    writer.then(lambda: 1 / 0)
    chunk = b"x" * (64 << 10)
    for _ in range(2 * BACKLOG_BYTES // len(chunk)):  # over the backlog
        body.append(chunk)
    done = threading.Event()
    writer.then(done.set)
    assert done.wait(10)  # the writer went on
    assert body.getfile().read() == chunk * (2 * BACKLOG_BYTES // len(chunk))
    body.close()
    writer.stop()
    writer.thread.join(10)
    assert (writer.pending, woken) == (0, [True])  # the loop woken once the writer caught up
    assert body.file.closed
    assert "writing a request body failed" in caplog.text and "ZeroDivisionError" in caplog.text


@pytest.mark.system
def test_a_start_removes_what_a_killed_server_was_receiving(data_dir):
    """A server killed (-9) while it copied an upload into the store leaves its temp file,
    which no process holds any more: the next start removes it, at once."""
    store = data_dir / "artifacts"
    store.mkdir()
    left = store / ".incoming-killed.tmp"
    left.write_bytes(b"half an upload")
    then = time.time() - 5
    os.utime(left, (then, then))
    with real_server(data_dir, "--quiet"):
        assert not left.exists()
