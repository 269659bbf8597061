"""What a write refused on its credential costs a real server, and holds of its disk (issue
33): a credential is proven on the request's head, off the loop thread, before a byte of the
body is kept.

    python bench/write_screen.py [--seconds 60] [--rate 300] [--rounds 3]

It prints three tables, over a copy of the sample data with default flags (but
--max-file-mb 1100, so that a body of 1 GiB is not refused for its size alone):

1. The disk held by 16 connections, each a publish with a forged GitHub token (the test
   issuer's claims and kid, signed by another key) and a Content-Length of 1 GiB, sending
   the head of a file part and 1 MiB of it at once, then a byte a second for --seconds: the most bytes the server held meanwhile in the artifact
   store (its files, and those it has open there with no name), and how each was answered.
2. The median and p99 latency of `GET /api/v2/builds/latest` (one keep-alive client asking
   every 2 ms) alone, during a flood of `PUT`s with unknown well-formed tokens at --rate a
   second from rotating addresses (each request from an address of its own in 127.0.0.0/8,
   so that the failure limit never answers 429), and during a flood of `GET`s of a 404 at
   the same rate; --rounds of each, in turns, and the medians.
3. The loop thread's CPU (the server's main thread, /proc/PID/task/PID/stat) per request of
   each flood, without the latency client.
"""

import argparse
import multiprocessing
import os
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time

import harness

sys.path.insert(0, os.path.join(harness.ROOT, "tests"))
from buildshelf.publishing import tokens  # noqa: E402
from oidc_issuer import OidcIssuer, new_key  # noqa: E402

AUDIENCE = "http://127.0.0.1:8080"
UNKNOWN = "bs_000000000000_" + "A" * 43
FILE_PART = b'--b\r\nContent-Disposition: form-data; name="file"; filename="x.jar"\r\n\r\n'
PROBE_EVERY = 0.002
FLOOD_SECONDS = 10


def put_head(token, length, port):
    return (
        f"PUT /api/v2/projects/tinplate/builds/9999 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {token}\r\n"
        "Content-Type: multipart/form-data; boundary=b\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def held_bytes(pid, store_dir):
    """What the server holds in the artifact store that is no object: files being received,
    named or not."""
    held = 0
    for name in os.listdir(store_dir):
        path = os.path.join(store_dir, name)
        if len(name) != 64 and os.path.isfile(path):
            held += os.path.getsize(path)
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith(store_dir) and link.endswith("(deleted)"):
                held += os.stat(f"/proc/{pid}/fd/{fd}").st_size
        except OSError:
            pass
    return held


def trickling_forgeries(server, issuer, store_dir, seconds):
    """(the most bytes held, the answers' status lines) of 16 forged 1 GiB uploads that send
    a byte a second for `seconds`."""
    socks, answers = [], {}
    for _ in range(16):
        sock = socket.create_connection(("127.0.0.1", server.port))
        # A file part, its first MiB at once (as the reproduction sent it), then
        # the rest a byte a second.
        sock.sendall(put_head(issuer.token(key=new_key()), 1 << 30, server.port) + FILE_PART)
        sock.sendall(os.urandom(1 << 20))
        sock.setblocking(False)
        socks.append(sock)
    most, ends = 0, time.monotonic() + seconds
    while time.monotonic() < ends:
        for n, sock in enumerate(socks):
            try:
                answers.setdefault(n, sock.recv(65536).split(b"\r\n")[0].decode())
            except BlockingIOError:
                pass
            except OSError:
                answers.setdefault(n, "reset")
            try:
                sock.send(b"x")
            except OSError:
                pass
        most = max(most, held_bytes(server.pid, store_dir))
        time.sleep(1)
    for sock in socks:
        sock.close()
    return most, answers


def flood(port, kind, rate, seconds, first, results):
    """Requests of `kind` ("put" or "404") at `rate` a second for `seconds`, each on a new
    connection from an address of its own (numbered from `first`); put on the queue
    `results`: status -> how many (a process of its own, so that the client's work is not the
    measure's)."""
    got = {}
    started = time.monotonic()
    for n in range(int(rate * seconds)):
        wait = started + n / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        address = first + n
        source = f"127.{1 + address // 62500 % 250}.{address // 250 % 250}.{1 + address % 250}"
        if kind == "put":
            raw = put_head(UNKNOWN, 100, port)
        else:
            raw = harness.request_bytes("/no/such/page", f"127.0.0.1:{port}")
        try:
            status = harness.fetch(port, "", raw=raw, source=source, timeout=10).status
        except OSError:
            status = "error"
        got[status] = got.get(status, 0) + 1
    results.put(got)


def probe(port, until, latencies):
    """GET /api/v2/builds/latest every PROBE_EVERY on one keep-alive connection until
    `until`, each answer's seconds appended to `latencies`."""
    request = harness.request_bytes("/api/v2/builds/latest?project=tinplate", close=False)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        while time.monotonic() < until:
            started = time.monotonic()
            sock.sendall(request)
            reply = harness.read_reply(sock, started + 10)
            assert reply.status == 200, reply.status
            latencies.append(time.monotonic() - started)
            time.sleep(max(0.0, started + PROBE_EVERY - time.monotonic()))


def loop_cpu(pid):
    """The CPU seconds of the server's loop thread (its main thread) so far."""
    with open(f"/proc/{pid}/task/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / harness.CLOCK_TICKS


def run_flood(server, kind, rate, seconds, first, with_probe):
    """(latencies, the flood's counts, the loop thread's CPU seconds) of one flood."""
    results, counts, latencies = multiprocessing.SimpleQueue(), {}, []
    cpu_before = loop_cpu(server.pid)
    flooder = None
    if kind:
        flooder = multiprocessing.Process(
            target=flood, args=(server.port, kind, rate, seconds, first, results)
        )
        flooder.start()
    if with_probe:
        probing = threading.Thread(
            target=probe, args=(server.port, time.monotonic() + seconds, latencies)
        )
        probing.start()
        probing.join()
    if flooder:
        counts = results.get()
        flooder.join()
    return latencies, counts, loop_cpu(server.pid) - cpu_before


def quantiles(latencies):
    ordered = sorted(latencies)
    return statistics.median(ordered) * 1e3, ordered[int(len(ordered) * 0.99)] * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=60, help="of the trickling uploads")
    parser.add_argument("--rate", type=int, default=300, help="requests a second of a flood")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    harness.stop_servers_on_sigterm()
    work = tempfile.mkdtemp(prefix="write-screen-")
    try:
        data_dir, state = os.path.join(work, "data"), os.path.join(work, "state")
        shutil.copytree(os.path.join(harness.ROOT, "data"), data_dir)
        tokens.create(state, "tinplate", 1, "bench")
        with OidcIssuer(audience=AUDIENCE) as issuer:
            flags = ["--state", state, "--max-file-mb", "1100", "--public-url", AUDIENCE,
                     "--github-oidc-issuer", issuer.url, "--quiet"]  # fmt: skip
            log = os.path.join(work, "server.log")
            with harness.Server.buildshelf(data_dir, flags, log_path=log) as server:
                store_dir = os.path.join(data_dir, "artifacts")
                os.makedirs(store_dir, exist_ok=True)
                most, answers = trickling_forgeries(server, issuer, store_dir, args.seconds)
                print(
                    f"\n16 forged GitHub tokens, Content-Length 1 GiB, trickling {args.seconds} s"
                )
                print(f"  most bytes held in the artifact store: {most:,}")
                shown = sorted(set(answers.values()))
                print(f"  answered: {', '.join(shown)} ({len(answers)} of 16)")
                latency_table(server, args)
    finally:
        harness.stop_all()
        shutil.rmtree(work, ignore_errors=True)


def latency_table(server, args):
    rows = {"alone": [], "404": [], "put": []}
    cpu = {"404": [], "put": []}
    statuses = {"404": {}, "put": {}}
    first = 0
    for _ in range(args.rounds):
        for kind in ("404", "put", None):
            latencies, counts, _ = run_flood(server, kind, args.rate, FLOOD_SECONDS, first, True)
            first += args.rate * FLOOD_SECONDS
            rows[kind or "alone"].append(quantiles(latencies))
            if kind:
                for status, count in counts.items():
                    statuses[kind][status] = statuses[kind].get(status, 0) + count
        for kind in ("404", "put"):
            _, counts, seconds = run_flood(server, kind, args.rate, FLOOD_SECONDS, first, False)
            first += args.rate * FLOOD_SECONDS
            cpu[kind].append(seconds / max(1, sum(counts.values())) * 1e6)
    print(f"\nGET /api/v2/builds/latest every 2 ms, beside a flood of {args.rate}/s "
          f"({args.rounds} rounds of {FLOOD_SECONDS} s; medians of the rounds)")  # fmt: skip
    print(f"  {'beside':<38} {'median ms':>10} {'p99 ms':>8}")
    names = {"alone": "nothing", "404": "GETs of a 404", "put": "PUTs with unknown tokens"}
    medians = {}
    for kind, name in names.items():
        medians[kind] = tuple(statistics.median(r[i] for r in rows[kind]) for i in (0, 1))
        print(f"  {name:<38} {medians[kind][0]:>10.2f} {medians[kind][1]:>8.2f}")
    print(
        f"  PUTs / 404s: median {medians['put'][0] / medians['404'][0]:.2f}x, "
        f"p99 {medians['put'][1] / medians['404'][1]:.2f}x"
    )
    for kind in ("404", "put"):
        print(f"  answers to the {names[kind]}: {statuses[kind]}")
    print("\nThe loop thread's CPU per request of a flood (no latency client)")
    per = {kind: statistics.median(values) for kind, values in cpu.items()}
    for kind in ("404", "put"):
        print(f"  {names[kind]:<38} {per[kind]:>8.0f} us")
    print(f"  PUTs / 404s: {per['put'] / per['404']:.2f}x")


if __name__ == "__main__":
    main()
