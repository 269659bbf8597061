"""A webhook receiver on 127.0.0.1 for the tests: a real HTTP server on a thread of its own
that records each request and answers as the test scripts it (a status, headers and body, a
hang, a drip), checking Standard Webhooks signatures as the libraries do."""

import http.server
import json
import threading
import time
from dataclasses import dataclass, field

HANG = "hang"  # hold the connection without answering until released (or closed)


@dataclass
class Received:
    path: str
    headers: dict  # names in lower case
    body: bytes

    @property
    def json(self):
        return json.loads(self.body)


@dataclass
class Receiver:
    """`answer(received) -> (status, headers, body) or HANG`; every request is recorded."""

    answer: object = None
    received: list = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)
    arrived: threading.Condition = field(default_factory=threading.Condition)
    port: int = 0
    server: object = None

    def __post_init__(self):
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                got = Received(
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length),
                )
                with receiver.arrived:
                    receiver.received.append(got)
                    receiver.arrived.notify_all()
                answer = receiver.answer(got) if receiver.answer else (204, {}, b"")
                if answer == HANG:
                    receiver.released.wait(60)
                    self.close_connection = True
                    return
                status, headers, body = answer
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        # Polled every 50 ms, so that a shutdown is quick (the default, 0.5 s, was half a
        # second of every webhook test's teardown).
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def url(self, path="/hook/SECRET-PATH-TOKEN"):
        return f"http://127.0.0.1:{self.port}{path}"

    @property
    def host(self):
        return f"127.0.0.1:{self.port}"

    def wait_for(self, count, seconds=30):
        """The requests, once there are `count` of them (failing the test after `seconds`)."""
        deadline = time.monotonic() + seconds
        with self.arrived:
            while len(self.received) < count:
                left = deadline - time.monotonic()
                assert left > 0, f"{len(self.received)} requests arrived, not {count}"
                self.arrived.wait(left)
            return list(self.received)

    def close(self):
        self.released.set()
        self.server.shutdown()
        self.server.server_close()
