"""What the app and the server that runs it agree on, in one place: `App`, the WSGI app with
the hooks the server calls; the environ keys by which the server tells the app what it did;
what a screen may answer (`Deferred`); and what takes a body as it arrives (`Consumer`).

make_app (buildshelf/server.py) makes an App; serving/server.py runs one and reads nothing
else of the app. This side never imports waitress, nor bottle.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

# The environ keys the server sets for the app. MALFORMED: why a request that could smuggle
# another past a proxy is malformed. REFUSED: the ApiError to answer instead of a request,
# from the app's `screen` or from the server itself (answers.too_large, answers.no_room);
# the request reaches the app bodiless, and the server closes the connection after either
# answer. PROVEN: for a request whose screen answered `Deferred`, what its decide()
# returned. CONSUMED: for a request whose body the app's `consume` took as it arrived, the
# call that gives the consumer once it has been fed the whole body.
MALFORMED = "buildshelf.malformed_request"
REFUSED = "buildshelf.refused_request"
PROVEN = "buildshelf.proven_credential"
CONSUMED = "buildshelf.consumed_body"
# The size from which the app hands a body to the server by reference, as wsgi.file_wrapper
# of the shared bytes (serving.connection's UNSENT_OUTPUT_LIMIT counts on it).
BY_REFERENCE_BYTES = 16 * 1024
# The largest body a request may have when the app names none.
BODY_BYTES = 1024


@dataclass(frozen=True)
class Deferred:
    """The screen's verdict on a request that only the disk or the network can give (a
    credential checked against the tokens' database, a GitHub token's signature by the
    issuer's keys): the server calls `decide()` on a thread of its own, never the loop's,
    and reads nothing more of the body meanwhile. decide() returns what the app then gets as
    environ[PROVEN], or raises the ApiError to answer instead (the body is never read)."""

    decide: Callable[[], object]


class Consumer(Protocol):
    """What takes a request's body as it arrives, instead of the server keeping it: fed each
    chunk on the server's thread that writes bodies, then b"" once the body is whole (by the
    app, when it takes the consumer from environ[CONSUMED]); discard() once the body is
    dropped, whenever that is."""

    def feed(self, data: bytes) -> None: ...

    def discard(self) -> None: ...


@dataclass(frozen=True)
class App:
    """A WSGI app and the hooks the server calls. Each hook runs on the server's loop
    thread, so it must never wait for the disk or the network:

    - `recall(environ)`: the answer to a request known without routing, (status line,
      headers, body), or None.
    - `screen(environ)`: once a request's head is in, before its body is read: None, the
      ApiError to answer instead (environ[REFUSED]), or a Deferred.
    - `consume(environ)`: once the screen let a request with a body through, its Consumer,
      or None (the server then holds the body itself).
    - `observe_requests(records)`: the access records of the answers sent, a batch at a
      time, on the access log's thread (the metrics).

    `max_body_bytes` is the largest body the server takes; `router` the bottle app behind
    `wsgi`, for what reads or adds routes (the tests)."""

    wsgi: Callable[[dict, Callable], Any]
    recall: Callable[[dict], tuple | None] | None = None
    screen: Callable[[dict], Any] | None = None
    consume: Callable[[dict], Consumer | None] | None = None
    observe_requests: Callable[[list], None] | None = None
    max_body_bytes: int = BODY_BYTES
    router: Any = None

    def __call__(self, environ, start_response):
        return self.wsgi(environ, start_response)
