"""The real server over a real socket: reloads, limits, the access log, shutdown."""

import fcntl
import hashlib
import http.client
import io
import json
import os
import random
import re
import resource
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
import time

import pytest
from waitress.adjustments import Adjustments
from waitress.buffers import ReadOnlyFileBasedBuffer

from buildshelf import cli
from buildshelf.serving import connection, send_queues
from buildshelf.serving import server as serving
from helpers import (
    ROOT,
    eventually,
    free_port,
    make_build,
    make_project,
    real_server,
    server_argv,
    write_file,
)

# --- the real thing --------------------------------------------------------------------------


@pytest.fixture
def running_server(data_dir):
    with real_server(data_dir) as started:
        yield started


def request(port, path, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path, headers=headers or {})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp, body


def refuses_connections(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return False
    except ConnectionRefusedError:
        return True


def latest_number(port, project="alpha"):
    resp, body = request(port, f"/api/v2/builds/latest?project={project}")
    return json.loads(body).get("buildNumber")


@pytest.mark.system
def test_the_real_server_answers_over_http(running_server, data_dir):
    port, proc = running_server
    resp, body = request(
        port, "/api/v2/builds/latest?project=alpha", {"Accept": "application/json"}
    )
    assert resp.status == 200 and resp.getheader("Content-Type") == "application/json"
    assert json.loads(body)["buildNumber"] == 5
    resp, body = request(port, "/api/v2/jd?project=alpha")
    assert resp.status == 302
    assert resp.getheader("Location") == "https://jd.example.org/alpha/1.21-R0.1-SNAPSHOT"
    write_file(data_dir / "alpha.json", make_project([make_build(60)]))
    eventually(lambda: latest_number(port) == 60)


@pytest.mark.system
def test_a_published_build_is_served_within_the_reload_interval(running_server, data_dir):
    port, _ = running_server
    request(port, "/api/v2/builds/latest?project=alpha")  # the server has read the files
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "buildshelf",
            "publish",
            "alpha",
            "--build",
            "90",
            "--channel",
            "1.21",
            "--download-url",
            "https://ci.example.org/job/Alpha/90/artifact/alpha.jar",
            "--data",
            str(data_dir),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "published build 90 of alpha\n", "")
    published = time.monotonic()
    deadline = published + 5  # the interval is 1 s: the margin is for a loaded machine
    while True:
        resp, body = request(port, "/api/v2/builds/latest?project=alpha")
        if json.loads(body)["buildNumber"] == 90:
            break
        assert time.monotonic() < deadline, "the published build was not served in time"
        time.sleep(0.05)
    assert json.loads(body)["url"] == "https://ci.example.org/job/Alpha/90/"


@pytest.mark.system
def test_a_304_and_a_204_keep_the_connection_open(running_server):
    port, _ = running_server
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/api/v2/projects")
    sock = conn.sock
    resp = conn.getresponse()
    etag = resp.getheader("ETag")
    resp.read()
    for method, headers, status in [
        ("GET", {"If-None-Match": etag}, 304),
        ("GET", {"If-None-Match": etag}, 304),
        ("OPTIONS", {}, 204),
        ("GET", {}, 200),
    ]:
        conn.request(method, "/api/v2/projects", headers=headers)
        assert conn.sock is sock  # http.client reconnects if the server closed it
        resp = conn.getresponse()
        assert resp.status == status and resp.getheader("Connection") is None
        resp.read()
    conn.close()


@pytest.mark.system
def test_the_real_server_refuses_oversized_headers(running_server):
    port, _ = running_server
    resp, _ = request(port, "/api/v2/projects", {"X-Big": "a" * 17 * 1024})
    assert resp.status == 431
    resp, _ = request(port, "/api/v2/projects", {"X-Fine": "a" * 8 * 1024})
    assert resp.status == 200


@pytest.mark.system
def test_the_real_server_logs_start_up_to_stderr(running_server):
    port, proc = running_server
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=10)
    log = proc.stderr.read()
    assert "serving 2 projects from" in log and f"http://127.0.0.1:{port}/api/v2" in log
    assert f"http://127.0.0.1:{port}/api/v2/projects\n" in log  # a URL that answers


# --- access log ------------------------------------------------------------------------------

ACCESS_PREFIX = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO buildshelf\.access: "


def access_lines(proc):
    """The access lines the server wrote until it stopped, checked to have the format of
    every log line."""
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=10)
    lines = [
        line
        for line in proc.stderr.read().splitlines(keepends=True)
        if " buildshelf.access: " in line
    ]
    assert all(re.match(ACCESS_PREFIX + r".*\n\Z", line) for line in lines), lines
    return [re.sub(ACCESS_PREFIX, "", line)[:-1] for line in lines]


@pytest.mark.system
def test_one_access_line_per_request(running_server):
    port, proc = running_server
    resp, body = request(port, "/api/v2/builds?project=alpha")
    request(port, "/api/v2/builds?project=alpha")  # a repeat, answered from memory
    request(port, "/api/v2/builds?project=nope")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("HEAD", "/api/v2/projects")
    conn.getresponse().read()
    conn.close()
    request(port, "/api/v2/builds?project=alpha", {"If-None-Match": resp.getheader("ETag")})
    # One that waitress refuses before the app sees it: still a line.
    request(port, "/api/v2/projects", {"X-Big": "a" * 17 * 1024})
    lines = access_lines(proc)
    expected = [
        rf"GET /api/v2/builds\?project=alpha 200 {len(body)}",
        rf"GET /api/v2/builds\?project=alpha 200 {len(body)}",
        r"GET /api/v2/builds\?project=nope 404 \d+",
        r"HEAD /api/v2/projects 200 0",
        r"GET /api/v2/builds\?project=alpha 304 0",
        r"- - 431 \d+",
    ]
    assert len(lines) == len(expected), lines
    for pattern in expected:  # in any order: a line is written once its answer is sent
        matching = [
            line for line in lines if re.fullmatch(rf"127\.0\.0\.1 {pattern} \d+\.\d\dms", line)
        ]
        assert matching, (pattern, lines)
        lines.remove(matching[0])


@pytest.mark.system
def test_the_access_log_cannot_be_forged(running_server):
    port, proc = running_server
    request(port, "/api/v2/x%0A1.2.3.4%20GET%20/%20200")
    request(port, "/api/v2/y%85%E2%80%A8%0D")  # line breaks to some readers of the log
    # Two lines, one a request, in either order: a worker may log the first answer after the
    # client, which has it, sent the second and had it answered.
    lines = sorted(access_lines(proc), key=lambda line: " /api/v2/y" in line)
    assert len(lines) == 2, lines
    assert " /api/v2/x%0A1.2.3.4%20GET%20/%20200 404 " in lines[0]
    assert " /api/v2/y%85%E2%80%A8%0D 404 " in lines[1]


@pytest.mark.system
@pytest.mark.parametrize("trusted", [True, False], ids=["trusted-proxy", "no-proxy"])
def test_the_access_log_names_a_trusted_proxy_s_client(data_dir, trusted):
    """Behind nginx (--trusted-proxy), the client that X-Forwarded-For names, as the failure
    limit and the download counts see it, for an answer from memory too; from any other peer
    the header is ignored. A name that is no address cannot forge a field of the line."""
    flags = ("--trusted-proxy", "127.0.0.1") if trusted else ()
    with real_server(data_dir, *flags) as (port, proc):
        for client in ("192.0.2.7", "192.0.2.8", "x 200 y"):
            request(port, "/api/v2/projects", {"X-Forwarded-For": client})
            time.sleep(0.1)  # the lines in order
        lines = access_lines(proc)
    clients = ["192.0.2.7", "192.0.2.8", "x%20200%20y"] if trusted else ["127.0.0.1"] * 3
    assert [line.split(" GET ")[0] for line in lines] == clients, lines


BIG = 64 << 20  # more than the kernel's buffers on both sides hold
READ = 1_500_000  # what the client reads of it before it leaves


@pytest.mark.system
def test_the_access_log_counts_the_body_bytes_written_to_the_socket(data_dir, tmp_path):
    jar = tmp_path / "big.jar"
    jar.write_bytes(b"x" * BIG)
    argv = ["publish", "alpha", "--data", str(data_dir), "--build", "9", "--channel", "1.21",
            "--file", str(jar)]  # fmt: skip
    assert cli.main(argv) == 0
    sha = hashlib.sha256(jar.read_bytes()).hexdigest()
    path = f"/downloads/alpha/9/{sha}/big.jar"
    with real_server(data_dir) as (port, proc):
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
            sock.settimeout(10)
            sock.connect(("127.0.0.1", port))
            sock.sendall(GET.format(path).encode())
            received = b""
            while b"\r\n\r\n" not in received or len(received.partition(b"\r\n\r\n")[2]) < READ:
                more = sock.recv(1 << 16)
                assert more, "the download ended early"
                received += more
            head, _, body = received.partition(b"\r\n\r\n")
            assert f"Content-Length: {BIG}".encode() in head
        # The client left with the rest unread; then a whole download, then its HEAD.
        whole = request(port, path)[1]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("HEAD", path)
        conn.getresponse().read()
        conn.close()
        lines = access_lines(proc)
    assert len(whole) == BIG
    sent = [int(re.fullmatch(rf"127\.0\.0\.1 GET {path} 200 (\d+) \S+", line)[1])
            for line in lines if " GET " in line]  # fmt: skip
    # In the order the answers ended: the cut one first, as the whole one began after it.
    assert len(sent) == 2 and len(body) <= sent[0] < BIG and sent[1] == BIG, (len(body), sent)
    assert [line for line in lines if " HEAD " in line][0].split()[4] == "0"


@pytest.mark.system
def test_a_download_handed_to_nginx_is_logged_as_handed_over(toy_server):
    port, proc = toy_server
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall((GET.format("/accel") + GET.format("/fast")).encode())
        [(status, headers, body), _] = read_responses(sock, ["GET", "GET"])
    assert status == "HTTP/1.1 200 OK" and body == b""
    lines = access_lines(proc)
    assert re.fullmatch(r"127\.0\.0\.1 GET /accel 200 handed-over \S+", lines[0]), lines
    assert re.fullmatch(r"127\.0\.0\.1 GET /fast 200 4 \S+", lines[1]), lines


def test_the_line_writer_writes_every_line_in_order_from_many_threads(tmp_path):
    import threading

    path = tmp_path / "access.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    writer = serving.LineWriter(fd, interval=0.001)

    def write_many(n):
        for i in range(2000):
            writer(f"{n} {i}\n".encode())

    threads = [threading.Thread(target=write_many, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    writer.close()
    os.close(fd)
    lines = path.read_text().splitlines()
    assert len(lines) == 16000
    for n in range(8):  # nothing lost, nothing torn, each thread's lines in its order
        assert [line for line in lines if line.startswith(f"{n} ")] == [
            f"{n} {i}" for i in range(2000)
        ]


def test_warnings_are_thinned_to_one_a_minute():
    once = serving.OncePer(60)
    assert [once.due(1000.0 + t) for t in [0, 1, 59, 61, 62, 121]] == [
        True,
        False,
        False,
        True,
        False,
        True,
    ]


# --- answers from memory, on the loop thread ---------------------------------------------------


def read_responses(sock, methods):
    """The (status line, headers, body) of the answers to requests made with `methods`, in
    order, read off a socket they were pipelined on."""
    data, answers = b"", []
    for method in methods:
        while b"\r\n\r\n" not in data:
            more = sock.recv(65536)
            assert more, f"the connection closed after {len(answers)} answers"
            data += more
        head, data = data.split(b"\r\n\r\n", 1)
        status, *lines = head.decode("latin-1").split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines)
        length = 0 if method == "HEAD" else int(headers.get("Content-Length", 0))
        while len(data) < length:
            more = sock.recv(65536)
            assert more, f"the connection closed in answer {len(answers) + 1}"
            data += more
        answers.append((status, headers, data[:length]))
        data = data[length:]
    return answers


@pytest.mark.system
def test_pipelined_answers_from_memory_and_from_workers_keep_their_order(running_server):
    port, _ = running_server
    requests = [
        ("GET", "/api/v2/builds?project=alpha", {}),
        ("GET", "/api/v2/builds/latest?project=alpha", {}),
        ("HEAD", "/api/v2/projects", {}),
        ("GET", "/api/v2/projects", {"Accept-Encoding": "gzip"}),
        ("GET", "/api/v2/nope", {}),
        ("GET", "/api/v2/builds?project=alpha", {"If-None-Match": "*"}),
        ("GET", "/api/v2/projects", {}),
    ]
    # Answers carry Last-Modified once their data is a second old: the same for all of them.
    eventually(lambda: request(port, "/api/v2/builds?project=beta")[0].getheader("Last-Modified"))
    alone = []
    for method, target, headers in requests:  # each on a connection of its own
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request(method, target, headers=headers)
        resp = conn.getresponse()
        alone.append((resp.status, resp.getheaders(), resp.read()))
        conn.close()
    # Now remembered, all but /nope. The loop thread answers the first two from memory; from
    # /nope on, a worker thread answers, and goes on with the rest (from memory too).
    pipelined = b"".join(
        f"{method} {target} HTTP/1.1\r\nHost: x\r\n".encode()
        + b"".join(f"{name}: {value}\r\n".encode() for name, value in headers.items())
        + b"\r\n"
        for method, target, headers in requests[2:] + requests[:2]
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(pipelined)
        answers = read_responses(sock, [method for method, _, _ in requests[2:] + requests[:2]])
    for (status, headers, body), (alone_status, alone_headers, alone_body) in zip(
        answers, alone[2:] + alone[:2]
    ):
        assert int(status.split()[1]) == alone_status and body == alone_body
        del headers["Date"]
        assert headers == {name: value for name, value in alone_headers if name != "Date"}


@pytest.mark.system
@pytest.mark.parametrize(
    "request_head, closes",
    [
        (b"GET /api/v2/projects HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", True),
        (b"GET /api/v2/projects HTTP/1.0\r\n\r\n", True),
        (b"GET /api/v2/projects HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", False),
    ],
)
def test_an_answer_from_memory_closes_the_connection_as_http_says(
    running_server, request_head, closes
):
    port, _ = running_server
    request(port, "/api/v2/projects")  # remembered from now on
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request_head)
        [(status, headers, body)] = read_responses(sock, ["GET"])
        assert status.endswith(" 200 OK") and json.loads(body)["projects"]
        if closes:
            assert headers["Connection"] == "close" and sock.recv(1) == b""
        else:
            assert headers["Connection"] == "Keep-Alive"
            sock.sendall(request_head)
            assert read_responses(sock, ["GET"])[0][2] == body


TOY_SERVER = """
import sys, threading
sys.path.insert(0, sys.argv[1])
from buildshelf.serving import server as serving
from buildshelf.web.contract import App
released = threading.Event()

def recall(environ):  # what the app knows without waiting
    if environ["PATH_INFO"] == "/fast":
        if environ["QUERY_STRING"] == "release":
            released.set()
        body = ("fast" + environ["QUERY_STRING"]).encode()
        return "200 OK", [("Content-Length", str(len(body)))], [body]
    if environ["PATH_INFO"] == "/bug":
        raise RuntimeError("a bug")
    if environ["PATH_INFO"] == "/accel":  # nginx sends the file: downloads.handed_over
        return "200 OK", [("X-Accel-Redirect", "/_o/ab/ab"), ("Content-Length", "0")], []
    return None

def app(environ, start_response):
    answer = recall(environ)
    if answer is None:  # the rest wait
        released.wait(60)
        answer = "200 OK", [("Content-Length", "4")], [b"slow"]
    start_response(answer[0], answer[1])
    return answer[2]

log = serving.LineWriter(to_line=serving.access_line)
serving.serve(App(app, recall=recall), "127.0.0.1", int(sys.argv[2]), threads=1,
              access_log=log, on_listening=lambda server: print("listening", flush=True))
log.close()
"""


@pytest.fixture
def toy_server(tmp_path):
    """serving.serve() over TOY_SERVER's app, with 1 worker thread: (port, process)."""
    script = tmp_path / "toy_server.py"
    script.write_text(TOY_SERVER)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(script), ROOT, str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline() == "listening\n"
        yield port, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=20)
        proc.stdout.close()
        proc.stderr.close()


GET = "GET {} HTTP/1.1\r\nHost: x\r\n\r\n"  # a request for the target put in {}


@pytest.mark.system
def test_what_the_app_recalls_is_answered_while_every_worker_waits(toy_server):
    port, _ = toy_server
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as waiting,
        socket.create_connection(("127.0.0.1", port), timeout=10) as other,
    ):
        # The only worker thread waits on this one; the /fast after it waits its turn.
        waiting.sendall((GET.format("/slow") + GET.format("/fast")).encode())
        for _ in range(3):
            other.sendall(GET.format("/fast").encode())
            assert read_responses(other, ["GET"])[0][2] == b"fast"
        other.sendall(GET.format("/fast?release").encode())
        assert read_responses(other, ["GET"])[0][2] == b"fastrelease"
        assert [body for _, _, body in read_responses(waiting, ["GET", "GET"])] == [
            b"slow",
            b"fast",
        ]


@pytest.mark.system
def test_a_long_pipeline_is_answered_whole_and_in_order(toy_server):
    port, _ = toy_server
    targets = [f"/fast?{n}" for n in range(200)]  # a worker thread takes over after 32
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall("".join(GET.format(target) for target in targets).encode())
        answers = read_responses(sock, ["GET"] * len(targets))
    assert [body for _, _, body in answers] == [f"fast{n}".encode() for n in range(200)]


@pytest.mark.system
def test_a_failing_app_gets_a_500_and_one_access_line(toy_server):
    port, proc = toy_server
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        # The loop thread's recall() fails, then the worker thread's app: waitress answers.
        sock.sendall((GET.format("/bug") + GET.format("/fast")).encode())
        [(status, _, _)] = read_responses(sock, ["GET"])
        assert status == "HTTP/1.1 500 Internal Server Error" and sock.recv(1) == b""
    lines = access_lines(proc)
    assert len(lines) == 1 and re.fullmatch(r"127\.0\.0\.1 GET /bug 500 - \S+", lines[0])


# --- shutdown --------------------------------------------------------------------------------


def read_response_head(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, rest = data.split(b"\r\n\r\n", 1)
    length = int(re.search(rb"Content-Length: (\d+)", head).group(1))
    return head, rest, length


@pytest.mark.system
def test_sigterm_finishes_the_response_in_flight_then_exits_0(data_dir, running_server):
    port, proc = running_server
    write_file(
        data_dir / "huge.json", make_project([make_build(n, commit_count=3) for n in range(15000)])
    )
    eventually(lambda: latest_number(port, "huge") == 14999)
    sock = socket.create_connection(("127.0.0.1", port))
    idle = socket.create_connection(("127.0.0.1", port))  # a keep-alive client, between requests
    partial = socket.create_connection(("127.0.0.1", port))
    partial.sendall(b"GET /healthz HTT")  # a request still arriving is not one in flight
    sock.sendall(b"GET /api/v2/builds?project=huge HTTP/1.1\r\nHost: x\r\n\r\n")
    head, body, length = read_response_head(sock)
    assert b" 200 " in head.split(b"\r\n")[0] and length > 5_000_000
    proc.send_signal(signal.SIGTERM)  # with megabytes still to send: the client reads nothing
    eventually(lambda: refuses_connections(port))  # no new connections once stopping
    while len(body) < length:
        chunk = sock.recv(1 << 20)
        assert chunk, f"connection closed after {len(body)} of {length} bytes"
        body += chunk
    assert json.loads(body)[-1]["buildNumber"] == 14999
    assert proc.wait(timeout=3) == 0  # well before the 10 s the drain may take
    assert idle.recv(1) == b"" and partial.recv(1) == b""  # closed, not left hanging
    for s in (sock, idle, partial):
        s.close()
    assert "finishing the requests in flight" in proc.stderr.read()


def kept_download(data_dir, size):
    """Build 9 of alpha with a kept file of `size` random bytes: (its URL path, the bytes)."""
    content = random.Random(37).randbytes(size)
    jar = data_dir.parent / "alpha-9.jar"
    jar.write_bytes(content)
    argv = ["publish", "alpha", "--data", str(data_dir), "--build", "9", "--channel", "1.21",
            "--file", str(jar)]  # fmt: skip
    assert cli.main(argv) == 0
    sha = hashlib.sha256(content).hexdigest()
    return f"/downloads/alpha/9/{sha}/alpha-9.jar", content


def unread_bytes(sock):
    """How many bytes wait in `sock`'s receive queue (FIONREAD)."""
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0" * 4))[0]


@pytest.mark.system
def test_a_download_under_way_has_reached_its_slow_client_when_the_server_exits(data_dir):
    """In a container, what the kernel still holds to send when PID 1 exits is lost with the
    container's network (issue 37: 2.5 of 5.2 MB arrived at 2 MiB/s). So when the process
    exits, every byte of the answer must be with the client's kernel: none left in flight."""
    path, content = kept_download(data_dir, 4 << 20)
    with real_server(data_dir, "--quiet") as (port, proc):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 10)  # a slow reader's
        sock.connect(("127.0.0.1", port))
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        head, body, length = read_response_head(sock)
        assert b" 200 " in head.split(b"\r\n")[0] and length == len(content)
        signalled, in_flight_at_exit = False, None
        while len(body) < length:
            chunk = sock.recv(16 << 10)  # 2 MiB/s, as the issue saw it
            assert chunk, f"connection closed after {len(body)} of {length} bytes"
            body += chunk
            time.sleep(0.008)
            if not signalled and len(body) > (1 << 20):
                proc.send_signal(signal.SIGTERM)
                signalled = True
            elif signalled and in_flight_at_exit is None and proc.poll() is not None:
                in_flight_at_exit = length - len(body) - unread_bytes(sock)
        sock.close()
        assert body == content
        # Not seen to exit before the last byte was read: nothing was left in flight then.
        assert proc.wait(timeout=10) == 0 and (in_flight_at_exit or 0) == 0


def test_held_sockets_wait_for_a_slow_client_but_not_past_their_deadline():
    with socket.create_server(("127.0.0.1", 0)) as listener:
        reader = socket.socket()
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 10)
        reader.connect(listener.getsockname())
        sender, _ = listener.accept()
        sender.setblocking(False)
        sender.send(b"x" * (1 << 20))  # what the kernel takes: more than the reader holds
        held = send_queues.HeldSockets([sender])
        sender.close()  # as the server closes its own: the copy keeps the connection
        assert send_queues.unsent_bytes(held.copies[0]) > 0
        started = time.monotonic()
        assert held.flush(started + 0.3) == 1  # the reader reads nothing: given up on
        assert 0.3 <= time.monotonic() - started < 1
        reader.close()

        reader = socket.create_connection(listener.getsockname())
        sender, _ = listener.accept()
        sender.setblocking(False)
        sent = sender.send(b"y" * (256 << 10))
        held = send_queues.HeldSockets([sender])
        sender.close()
        received = []
        thread = threading.Thread(
            target=lambda: received.extend(iter(lambda: reader.recv(4096), b""))
        )
        thread.start()
        assert held.flush(time.monotonic() + 10) == 0  # all acknowledged, the FIN too
        thread.join(10)
        assert len(b"".join(received)) == sent
        reader.close()


# --- hostile requests over a real socket ------------------------------------------------------

HOSTILE_REQUESTS = [  # (raw request, status expected): what waitress refuses never reaches us
    (b"GET http://evil.example/api/v2/jd?project=alpha HTTP/1.1\r\nHost: x\r\n\r\n", 302),
    (b"GET //evil.example/api/v2/jd?project=alpha HTTP/1.1\r\nHost: x\r\n\r\n", 404),
    (b"GET /api/v2/jd?project=alpha&channel=%2F%2Fevil.example HTTP/1.1\r\nHost: x\r\n\r\n", 404),
    (
        b"GET /api/v2/jd?project=alpha&channel=1.21%0d%0aSet-Cookie:x HTTP/1.1\r\nHost: x\r\n\r\n",
        400,
    ),
    (b"POST /api/v2/projects HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n", 413),
    (b"GET /api/v2/builds?project=alpha&x=" + b"a" * 15000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 200),
    (b"GET /api/v2/builds?project=alpha&x=" + b"a" * 17000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 431),
    (b"GET /api/v2/projects HTTP/1.1\r\nHost: x\r\nX: a\rb\r\n\r\n", 400),
    (b"GET /api/v2/builds?project=alpha\xff HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    (b"GET /api/v2/\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    (b"GET /api/v2/proj%00ects HTTP/1.1\r\nHost: x\r\n\r\n", 404),
    (b"TRACE /api/v2/projects HTTP/1.1\r\nHost: x\r\n\r\n", 405),
    (b"BREW /api/v2/projects HTTP/1.1\r\nHost: x\r\n\r\n", 405),
    (b"CONNECT evil.example:443 HTTP/1.1\r\nHost: x\r\n\r\n", 404),
    (b"GET * HTTP/1.1\r\nHost: x\r\n\r\n", 404),
]


@pytest.mark.system
def test_hostile_requests_get_a_4xx_or_a_safe_answer(running_server):
    port, _ = running_server
    for raw, expected in HOSTILE_REQUESTS:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(raw)
            head, _, _ = read_response_head(sock)
        status_line, *headers = head.decode("latin-1").split("\r\n")
        assert int(status_line.split()[1]) == expected, raw[:70]
        locations = [h for h in headers if h.lower().startswith("location:")]
        assert all(
            h == "Location: https://jd.example.org/alpha/1.21-R0.1-SNAPSHOT" for h in locations
        ), raw[:70]


@pytest.mark.system
def test_the_real_server_outlives_its_data_directory(running_server, data_dir):
    port, proc = running_server
    moved = data_dir.with_name("moved")
    data_dir.rename(moved)
    eventually(
        lambda: (
            json.loads(request(port, "/healthz")[1])["rejectedFiles"]
            == [{"file": ".", "error": os.strerror(2), "errors": [os.strerror(2)]}]
        )
    )
    assert latest_number(port) == 5
    moved.rename(data_dir)
    write_file(data_dir / "alpha.json", make_project([make_build(61)]))
    eventually(lambda: latest_number(port) == 61)
    assert proc.poll() is None


# --- clients that do not play along -----------------------------------------------------------


@pytest.fixture
def server_with_threads(data_dir):
    """A real server with 2 worker threads: fewer than the clients that attack it."""
    with real_server(data_dir, "--threads", "2", "--quiet") as (port, _):
        yield port


@pytest.mark.system
def test_clients_that_never_read_hold_no_worker_thread(data_dir, server_with_threads):
    port = server_with_threads
    write_file(
        data_dir / "big.json", make_project([make_build(n, commit_count=3) for n in range(3000)])
    )
    eventually(lambda: latest_number(port, "big") == 2999)
    request_line = b"GET /api/v2/builds?project=big HTTP/1.1\r\nHost: x\r\n\r\n"
    attackers = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
    for sock in attackers:  # 40 answers of 1 MB each, pipelined, never read
        sock.sendall(request_line * 40)
    try:
        # Within a second or so, waitress's own channel would block both threads until the
        # attackers read or leave; here every request is answered throughout.
        for _ in range(30):
            resp, body = request(port, "/api/v2/builds/latest?project=alpha")
            assert resp.status == 200 and json.loads(body)["buildNumber"] == 5
            time.sleep(0.1)
    finally:
        for sock in attackers:
            sock.close()


class TakesAll:
    """A socket whose client reads every byte at once (a fast client on loopback)."""

    def __init__(self, sock):
        self.sock, self.sent = sock, []

    def send(self, data):
        self.sent.append(bytes(data))
        return len(data)

    def __getattr__(self, name):
        return getattr(self.sock, name)


class StubServer:
    turn = 0

    def __init__(self, others):
        self.active_channels = {-n: None for n in range(1, others + 1)}

    def pull_trigger(self):
        pass


@pytest.mark.parametrize("others", [0, 15, 1000])
def test_a_turn_sends_at_most_a_connections_share_of_turn_bytes(others):
    share = max(connection.MIN_SHARE, connection.TURN_BYTES // (others + 1))
    body = random.Random(3).randbytes(connection.MIN_SHARE + 2 * share + 100)
    ours, theirs = socket.socketpair()
    with ours, theirs:
        server = StubServer(others)
        channel = connection.GuardedChannel(server, ours, ("x", 1), Adjustments(), map={})
        channel.socket = client = TakesAll(ours)
        outbuf = ReadOnlyFileBasedBuffer(io.BytesIO(body))
        outbuf.prepare()
        channel.write_soon(outbuf)  # as a worker thread hands a file over
        sent = [sum(map(len, client.sent))]
        while channel.total_outbufs_len:  # then each turn of the loop
            channel.handle_write()
            sent.append(sum(map(len, client.sent)))
    first = connection.MIN_SHARE
    assert sent == [first, first + share, first + 2 * share, len(body)]
    assert b"".join(client.sent) == body


@pytest.mark.system
@pytest.mark.parametrize(
    "raw",
    [
        b"POST /api/v2/projects HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /api/v2/projects HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /api/v2/projects HTTP/1.1\r\n\r\nGET /api/v2/projects HTTP/1.1\r\nHost: x\r\n\r\n",
    ],
)
def test_ambiguous_requests_get_a_json_400_and_the_connection_closes(running_server, raw):
    port, _ = running_server
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(raw)
        data = b""
        while chunk := sock.recv(65536):  # read to the end: the server must close
            data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 400 ") and b"Connection: close" in head
    assert json.loads(body)["code"] == "malformed_request"  # and nothing smuggled after it


@pytest.mark.system
def test_idle_connections_past_a_low_open_files_limit_never_lock_out_a_client(data_dir):
    port = free_port()
    proc = subprocess.Popen(
        server_argv(data_dir, "--port", str(port), "--quiet"),
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64)),
    )
    idle = []
    try:
        eventually(lambda: not refuses_connections(port))
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(100)]
        for _ in range(5):  # the idlest connections make room for each new one
            resp, body = request(port, "/api/v2/builds/latest?project=alpha")
            assert resp.status == 200 and json.loads(body)["buildNumber"] == 5
    finally:
        for sock in idle:
            sock.close()
        proc.send_signal(signal.SIGTERM)
        log = proc.communicate(timeout=10)[1]
    assert "the open-files limit (ulimit -n) is 64: at most 48 connections" in log
    assert "Traceback" not in log and len(log.splitlines()) < 10, log


def test_the_access_log_never_holds_a_credential_sent_in_the_target():
    """A client that puts its token, or an OIDC token, in the query (or the path) is refused
    401, and the access line must not keep the secret: it masks it, naming the token id."""
    from buildshelf.serving.accesslog import access_line

    secret = "B0qv30xRSill0Y6m7FJAWSnlRE7uFrazba7QTywDoEk"
    jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJlLXNpZ25hdHVyZQ"
    for path, query in [
        ("/api/v2/projects/waystone/builds/5", f"access_token=bs_b242cf49fa91_{secret}"),
        ("/api/v2/projects/waystone/builds/5", f"token=Bearer%20bs_b242cf49fa91_{secret}&x=1"),
        (f"/api/v2/projects/bs_b242cf49fa91_{secret}/builds/5", ""),
        ("/api/v2/projects/waystone/builds/5", f"token={jwt}"),
    ]:
        line = access_line((time.time(), "127.0.0.1", "PUT", path, query, "401", 90, 0.001))
        assert secret.encode() not in line and b"c2lnbmF0dXJl" not in line, line
    line = access_line(
        (time.time(), "127.0.0.1", "PUT", "/x", f"t=bs_b242cf49fa91_{secret}", "401", 9, 0.1)
    )
    assert b"bs_b242cf49fa91_" in line  # the id, which is no secret, stays for the reader
