"""A kept file that changes size while it is served, as `cp` over an object, `rsync --inplace`
or a filesystem repair change it: never a response framed to another length than the one
recorded, and no CPU spent on a connection that cannot be finished (issue 23, item 3)."""

import hashlib
import http.client
import os
import random
import re
import signal
import socket
import threading
import time

import pytest
from waitress.buffers import ReadOnlyFileBasedBuffer

from buildshelf import cli
from buildshelf.web import downloads
from helpers import real_server

CONTENT = random.Random(23).randbytes(200_000)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def answered(tmp_path, environ):
    """The body downloads.answer gives to a GET of a file of CONTENT, in `environ`."""
    path = tmp_path / "alpha-9.jar"
    path.write_bytes(CONTENT)
    sha = hashlib.sha256(CONTENT).hexdigest()
    download = downloads.Download(str(path), "alpha-9.jar", sha, len(CONTENT), 1700000000)
    return path, downloads.answer(download, {"REQUEST_METHOD": "GET", **environ})[2]


def test_a_file_that_shrank_before_the_body_was_measured_keeps_its_length(tmp_path, caplog):
    path, body = answered(tmp_path, {"wsgi.file_wrapper": ReadOnlyFileBasedBuffer})
    os.truncate(path, 1000)
    # What waitress's task does with it: the body keeps the headers' length...
    assert body.prepare(len(CONTENT)) == len(CONTENT)
    # ...and its channel, asking for bytes that are not there, meets the end of the answer.
    for _ in range(2):
        with pytest.raises(downloads.FileShrank):
            body.get(1 << 16)
    body.close()
    assert [r.getMessage() for r in caplog.records] == [
        f"{path} shrank while being sent (it is 1,000 bytes, the answer needs 195.3 KiB): "
        "the connection is closed"
    ]


def test_a_file_cut_behind_what_was_read_ends_the_answer(tmp_path):
    path, body = answered(tmp_path, {"HTTP_RANGE": "bytes=100-"})
    chunks = iter(body)
    assert next(chunks) == CONTENT[100 : 100 + downloads.CHUNK_BYTES]
    os.truncate(path, len(CONTENT) - 1)  # past what is read next, not past the answer's end
    with pytest.raises(downloads.FileShrank):
        next(chunks)
    body.close()


def kept(data_dir, content):
    """Publish `content` as build 9 of alpha's kept file: (its URL path, its object's path),
    the object made writable, as an operator's tools find it."""
    jar = data_dir.parent / "alpha-9.jar"
    jar.write_bytes(content)
    argv = ["publish", "alpha", "--data", str(data_dir), "--build", "9", "--channel", "9.9",
            "--timestamp", "1700000000000", "--file", str(jar)]  # fmt: skip
    assert cli.main(argv) == 0
    sha = hashlib.sha256(content).hexdigest()
    path = data_dir / "artifacts" / sha[:2] / sha
    path.chmod(0o644)
    return f"/downloads/alpha/9/{sha}/alpha-9.jar", path


def copy_over(path, content, stop):
    """Copy the same bytes over the file as `cp` does, over and over until `stop`: it cuts the
    file to nothing, then writes it in 128 KiB blocks."""
    with open(path, "r+b", buffering=0) as f:
        while not stop.is_set():
            os.ftruncate(f.fileno(), 0)
            for start in range(0, len(content), 128 << 10):
                os.pwrite(f.fileno(), content[start : start + (128 << 10)], start)


def fetch(port, url, byte_range):
    """What is wrong with one GET of `url` (with Range: bytes=`byte_range`- unless None), or
    None. A 503, or a body cut short by a closed connection, is a right answer."""
    start = byte_range or 0
    headers = {} if byte_range is None else {"Range": f"bytes={byte_range}-"}
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        connection.request("GET", url, headers=headers)
        response = connection.getresponse()
        if response.status == 503:
            response.read()
            return None
        if response.status != (200 if byte_range is None else 206):
            return f"{response.status} to {headers}"
        length = response.getheader("Content-Length")
        if length != str(len(CONTENT) - start):
            return f"{response.status} with Content-Length {length}"
        try:
            body = response.read()
        except http.client.IncompleteRead:
            return None
        return None if body == CONTENT[start:] else f"a {response.status} body of other bytes"
    except TimeoutError:
        return "no answer within 20 s"
    finally:
        connection.close()


@pytest.mark.system
def test_an_object_shrinking_and_coming_back_is_never_sent_framed_to_another_length(data_dir):
    url, path = kept(data_dir, CONTENT)
    wrong, answered = [], []
    stop = threading.Event()

    def client(seed):
        rng = random.Random(seed)
        while not stop.is_set():
            problem = fetch(port, url, rng.choice([None, None, rng.randrange(len(CONTENT))]))
            answered.append(problem)
            if problem:
                wrong.append(problem)
                stop.set()
            if len(answered) >= 3000:
                stop.set()

    with real_server(data_dir, "--quiet") as (port, proc):
        # Each 503 and each connection closed is logged: read the log, or the server waits.
        log = threading.Thread(target=proc.stderr.read)
        log.start()
        threads = [threading.Thread(target=copy_over, args=(path, CONTENT, stop))]
        threads += [threading.Thread(target=client, args=(seed,)) for seed in range(4)]
        for thread in threads:
            thread.start()
        stop.wait(30)  # some 3 s on the old code and the new; the bound is for a busy machine
        stop.set()
        for thread in threads:
            thread.join(30)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
        log.join(10)
    assert wrong == []
    assert len(answered) > 300


@pytest.mark.system
def test_a_download_cut_short_closes_its_connection_and_spends_no_cpu_after(data_dir):
    content = random.Random(6).randbytes(32 << 20)
    url, path = kept(data_dir, content)
    with real_server(data_dir) as (port, proc):
        with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
            sock.sendall(f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            received = sock.recv(1 << 16)
            while b"\r\n\r\n" not in received:
                received += sock.recv(1 << 16)
            assert received.startswith(b"HTTP/1.1 200 ")
            # The server has sent what the sockets hold, and waits for the client to read on:
            # the file is cut (as rsync --inplace cuts it) in the middle of the transfer.
            os.truncate(path, 1 << 20)
            truncated = time.monotonic()
            read_to_the_end = []
            reader = threading.Thread(target=lambda: read_to_the_end.append(read_all(sock)))
            reader.start()
            time.sleep(max(0, truncated + 2 - time.monotonic()))
            before = cpu_seconds(proc.pid)
            time.sleep(5)
            spent = cpu_seconds(proc.pid) - before
            reader.join(30)
        assert spent < 1
        [got] = read_to_the_end
        assert got is not None and got < len(content), "the connection was not closed"
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
        log = proc.stderr.read()
    assert len(re.findall(r"ERROR .* shrank while being sent", log)) == 1, log


def read_all(sock):
    """How many bytes `sock` gives until the server closes it; None if it does not within
    the socket's timeout."""
    got = 0
    try:
        while chunk := sock.recv(1 << 20):
            got += len(chunk)
    except TimeoutError:
        return None
    return got


def cpu_seconds(pid):
    """The CPU time the process has spent, user and system, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
