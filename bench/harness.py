"""What every script in bench/ shares: a free port, a server process, an HTTP client, /proc.

    import harness   # bench/ is on sys.path when a script runs as `python bench/X.py`

- `free_port()`: a free TCP port of 127.0.0.1.
- `Server`: a server process (Buildshelf through `Server.buildshelf(...)`, or any argv, nginx
  and bench/bare.py included) started on a port, its stdout and stderr to a log file, returned
  once a GET of its `ready` target answers 200; `stop()` sends its stop signal and kills it
  if it has not exited after STOP_SECONDS; `kill()`; `stop_all()` kills what is left.
- `fetch(port, target, ...)`: one request on a new connection to 127.0.0.1, over a plain
  socket, so that the whole answer has one deadline (a server that dribbles its answer cannot
  hold a script), any bytes can be sent and the body can be discarded or hashed as it comes.
  `request_bytes` and `read_reply` are its two halves, for the scripts that hold sockets.
- what /proc says about a process: `cpu_seconds`, `memory`, `open_files`, `process_tree`.
- wrk (`wrk(...)` -> `Load`) and the table of targets that bench/run.py and
  bench/downloads.py print (`report`, `spread`).

Load generators that are the measurement itself (wrk, soak.py's asyncio clients,
downloads.py's recv loop, attack.py's held sockets) stay in their scripts.
"""

import hashlib
import json
import os
import re
import resource
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER_PY = os.path.join(ROOT, "server.py")
START_SECONDS = 60  # for a server to answer its `ready` target (50 x 2,000 builds load first)
STOP_SECONDS = 15  # for a server to exit after its stop signal (Buildshelf drains for 10)
WRK_TIMEOUT = "10s"  # wrk's 2 s default would drop the slowest answers instead of timing them
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- HTTP over plain sockets ------------------------------------------------------------------


@dataclass
class Reply:
    status: int
    headers: dict  # lower-case name -> value, latin-1; a header sent twice: "first, second"
    body: bytes  # b"" when not kept
    head: bytes  # the status line and headers as received
    size: int = 0  # body bytes received (also when not kept)
    sha256: str = None  # hex digest of the body, when asked for

    def json(self):
        return json.loads(self.body)


def request_bytes(target, host="127.0.0.1", close=True, method="GET", headers=None):
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    lines += ["Connection: close"] if close else []
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def receive(sock, deadline, size=65536):
    """One recv() that gives up at `deadline` (time.monotonic()) with TimeoutError."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("no complete answer in time")
    sock.settimeout(remaining)
    try:
        return sock.recv(size)
    except TimeoutError:
        raise TimeoutError("no complete answer in time") from None


def _body(sock, deadline, received, headers, bodiless, limit):
    """The body's pieces as they arrive: by Content-Length, chunks, or to the close."""
    if bodiless:
        return
    if "chunked" in headers.get("transfer-encoding", "").lower():
        yield from _chunks(sock, deadline, received)
        return
    length = headers.get("content-length")
    wanted = int(length) if length and length.isdigit() else None  # None: to the close
    cap = wanted if limit is None else limit if wanted is None else min(wanted, limit)
    size = 0
    while True:
        if cap is not None:
            received = received[: cap - size]
        if received:
            yield received
            size += len(received)
        if cap is not None and size >= cap:
            return
        received = receive(sock, deadline, 1 << 20)
        if not received:
            if wanted is None:
                return
            raise ConnectionError(f"closed after {size} of {wanted} body bytes")


def _chunks(sock, deadline, buffer):
    while True:
        while b"\r\n" not in buffer:
            buffer += _more(sock, deadline)
        line, _, buffer = buffer.partition(b"\r\n")
        size = int(line.split(b";")[0], 16)
        while len(buffer) < size + 2:
            buffer += _more(sock, deadline)
        if size == 0:
            return  # trailers are not read: every request here closes its connection
        yield buffer[:size]
        buffer = buffer[size + 2 :]


def _more(sock, deadline):
    data = receive(sock, deadline, 1 << 20)
    if not data:
        raise ConnectionError("closed inside a chunked body")
    return data


def read_reply(sock, deadline, keep_body=True, method="GET", hash_body=False, limit=None):
    """One response from `sock` by `deadline`; raises TimeoutError or ConnectionError.
    `limit`: stop reading once that many body bytes are in (a download cut short)."""
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        chunk = receive(sock, deadline)
        if not chunk:
            raise ConnectionError(f"closed before the headers ({len(buffer)} bytes)")
        buffer += chunk
    head, _, received = buffer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    match = re.match(r"HTTP/1\.[01] (\d{3})", status_line)
    if not match:
        raise ConnectionError(f"status line {status_line[:60]!r}")
    status, headers = int(match[1]), {}
    for line in lines:
        name, _, value = line.partition(":")
        name, value = name.strip().lower(), value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    bodiless = method == "HEAD" or status in (204, 304) or status < 200
    size, kept, digest = 0, [], hashlib.sha256() if hash_body else None
    for piece in _body(sock, deadline, received, headers, bodiless, limit):
        size += len(piece)
        if keep_body:
            kept.append(piece)
        if digest:
            digest.update(piece)
    return Reply(status, headers, b"".join(kept), head, size, digest and digest.hexdigest())


def fetch(
    port,
    target,
    timeout=30.0,
    keep_body=True,
    raw=None,
    method="GET",
    headers=None,
    source=None,
    hash_body=False,
    limit=None,
    host=None,
):
    """One request on a new connection to 127.0.0.1:`port` (from address `source` if given),
    the whole answer within `timeout` seconds; `raw`: these bytes instead of the request.
    The Host header is 127.0.0.1:`port`, as curl and wrk send it, unless `host` is given."""
    host = f"127.0.0.1:{port}" if host is None else host
    deadline = time.monotonic() + timeout
    with socket.create_connection(
        ("127.0.0.1", port), timeout=timeout, source_address=(source, 0) if source else None
    ) as sock:
        sock.sendall(raw if raw is not None else request_bytes(target, host, True, method, headers))
        return read_reply(sock, deadline, keep_body, method, hash_body, limit)


# --- server processes -------------------------------------------------------------------------


class Server:
    """A server process on 127.0.0.1:`port`, its stdout and stderr appended to `log_path`.
    The constructor returns once a GET of `ready` answers 200, or kills it and raises
    RuntimeError. Stopped by stop() (gracefully), kill(), the end of a `with` block
    (gracefully) or stop_all(); `preexec_fn` runs in the child before it starts."""

    running = []  # every server started and not yet stopped

    def __init__(
        self,
        argv,
        port,
        log_path=os.devnull,
        ready="/healthz",
        stop_signal=signal.SIGTERM,
        preexec_fn=None,
    ):
        self.argv, self.port, self.log_path, self.stop_signal = argv, port, log_path, stop_signal
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=preexec_fn,
            )
        self.pid = self.process.pid
        Server.running.append(self)
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                left = max(0.1, deadline - time.monotonic())
                if fetch(port, ready, timeout=left, keep_body=False).status == 200:
                    return
            except (OSError, ValueError):
                pass
            if not self.alive() or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"did not start: {' '.join(argv)} (see {log_path})")
            time.sleep(0.01)

    @classmethod
    def buildshelf(cls, data_dir, args=(), log_path=os.devnull, module=False, **options):
        """`python server.py` (or `python -m buildshelf`) --data `data_dir` on a free port."""
        port = free_port()
        launcher = ["-m", "buildshelf"] if module else [SERVER_PY]
        argv = [sys.executable, *launcher, "--data", data_dir, "--port", str(port), *args]
        return cls(argv, port, log_path, **options)

    @classmethod
    def nginx(cls, argv, port, ready="/healthz", **options):
        """nginx in the foreground; stopped with SIGQUIT (its workers finish, then it exits)."""
        return cls(
            argv + ["-g", "daemon off;"], port, ready=ready, stop_signal=signal.SIGQUIT, **options
        )

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def alive(self):
        return self.process.poll() is None

    def stop(self):
        """(exit status, or "killed" if it took over STOP_SECONDS; seconds it took)."""
        self._forget()
        if not self.alive():
            return self.process.returncode, 0.0  # it died before
        started = time.monotonic()
        self.process.send_signal(self.stop_signal)
        try:
            status = self.process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            status = "killed"
        return status, time.monotonic() - started

    def kill(self):
        if self.alive():
            self.process.kill()
        self.process.wait()
        self._forget()

    def _forget(self):
        if self in Server.running:
            Server.running.remove(self)

    def log_text(self, offset=0):
        with open(self.log_path, "rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", "replace")

    def log_size(self):
        try:
            return os.path.getsize(self.log_path)
        except OSError:
            return 0


def stop_all():
    """Kill every server still running: the cleanup of a script that is ending anyway."""
    for server in list(Server.running):
        server.kill()


def stop_servers_on_sigterm():
    """Make SIGTERM unwind like an error, so the `finally` blocks stop the servers."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def raise_open_file_limit(needed):
    """Every connection is a file of ours: raise the soft limit to the hard one if need be."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    if soft != resource.RLIM_INFINITY and soft < needed:
        raise SystemExit(f"the open-file limit ({soft}) is too low for {needed} files")


# --- what /proc says about a process ----------------------------------------------------------


def cpu_seconds(pid):
    """User and system CPU time of process `pid` so far, all its threads; None if unknown."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:  # gone, or not Linux
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def memory(pid, field="VmRSS"):
    """A /proc/<pid>/status figure in bytes (VmRSS, VmHWM), or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def open_files(pid):
    """How many files (connections included) process `pid` has open; None if unknown."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def process_tree(pid):
    """`pid` and its children (nginx's master and its workers)."""
    children = []
    for child in os.listdir("/proc"):
        if child.isdigit():
            try:
                with open(f"/proc/{child}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        children.append(int(child))
            except OSError:
                continue
    return [pid] + children


def running(pid):
    """Whether `pid` is a live process (a zombie left for init to reap is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# --- wrk and the table of targets -------------------------------------------------------------


class Load:
    """What one wrk run did: requests, seconds, errors and wrk's own words."""

    def __init__(self, out):
        self.out = out
        found = re.search(r"(\d+) requests in ([\d.]+)(\w+)", out)
        if found is None:
            raise SystemExit(f"wrk did not finish as expected:\n{out}")
        self.requests = int(found[1])
        self.seconds = float(found[2]) * {"ms": 1e-3, "s": 1, "m": 60}[found[3]]
        non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        socket_errors = re.search(r"Socket errors: (.*)", out)
        self.errors = ", ".join(
            filter(
                None,
                [
                    f"{non_2xx[1]} non-2xx" if non_2xx else "",
                    f"socket errors: {socket_errors[1]}" if socket_errors else "",
                ],
            )
        )
        p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
        self.p99_ms = float(p99[1]) * {"us": 1e-3, "ms": 1, "s": 1e3}[p99[2]] if p99 else None


def wrk(port, target, seconds, clients, script=None):
    """`wrk -t1 -c<clients>` (keep-alive) on `target` for `seconds`."""
    out = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{clients}",
            f"-d{seconds}s",
            "--latency",
            "--timeout",
            WRK_TIMEOUT,
            *(["-s", script] if script else []),
            f"http://127.0.0.1:{port}{target}",
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
    )
    return Load(out.stdout + out.stderr)


def spread(values, fmt="{:.0f}"):
    """The median and (min-max) of the rounds."""
    return (
        f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-"
        f"{fmt.format(max(values))})"
    )


def report(rows):
    """The table of targets: (name, goal, measured, ok) each."""
    width = max(len(r[0]) for r in rows)
    print(f"\n{'target':<{width}}  {'goal':<14} {'measured':<22} ok")
    for name, goal, measured, ok in rows:
        print(f"{name:<{width}}  {goal:<14} {measured:<22} {'yes' if ok else 'NO'}")
