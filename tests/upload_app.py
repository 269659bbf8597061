"""The real server over make_app, with a stand-in for the upload route and its screen (until
the real ones serve the tests): `python tests/upload_app.py DATA PORT BODIES MAX_BODY_BYTES
[CHANNEL_TIMEOUT]`. Prints "listening" once it accepts connections.

- `app.screen`: `PUT /upload` without Authorization is 401 (with WWW-Authenticate), with a
  Content-Length over MAX_BODY_BYTES 413; any other request's body is held to 1 KiB (413 by
  Content-Length, and chunked at once); `/screen-fails` makes the screen fail; `/whom`
  answers 400 naming REMOTE_ADDR, as the screen saw it.
- `PUT /upload` reads the body in 1 MiB chunks, hashes it, writes it to a file beside the
  data directory (fsynced, as a publish does) and answers {"sha256", "size"}.
BODIES is where the server holds bodies (serve's body_directory). UPLOAD_APP_TRUSTED_PROXY in
the environment is waitress's trusted_proxy (with X-Forwarded-For trusted);
UPLOAD_APP_RECV_BYTES its recv_bytes (for bench/publish_http.py); UPLOAD_APP_SLOW_DISK makes
each write of a body held in a file take that many seconds more (a disk held up).
"""

import dataclasses
import hashlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bottle  # noqa: E402

from buildshelf import files  # noqa: E402
from buildshelf.server import make_app  # noqa: E402
from buildshelf.serving import server as serving  # noqa: E402
from buildshelf.store import Store  # noqa: E402
from buildshelf.web import answers  # noqa: E402
from buildshelf.web.query import ApiError  # noqa: E402

SMALL_BODY_BYTES = 1024


def stand_in(app, max_body_bytes, kept_as):
    """`app` with a screen and a PUT /upload route, bodies of up to `max_body_bytes`, each
    upload written to the file `kept_as`."""

    def screen(environ):
        path = environ["PATH_INFO"]
        if path == "/screen-fails":
            raise RuntimeError("a bug in the screen")
        if path == "/whom":
            return ApiError(400, "whom", environ["REMOTE_ADDR"])
        upload = environ["REQUEST_METHOD"] == "PUT" and path == "/upload"
        if upload and "HTTP_AUTHORIZATION" not in environ:
            error = ApiError(401, "unauthorized", "no credentials")
            error.set_header("WWW-Authenticate", "Bearer")
            return error
        limit = max_body_bytes if upload else SMALL_BODY_BYTES
        if int(environ.get("CONTENT_LENGTH") or 0) > limit:
            return answers.too_large(limit)
        if not upload and environ.get("HTTP_TRANSFER_ENCODING"):
            return answers.too_large(limit)
        return None

    app.router.error(401)(answers.error_response)  # as JSON as the app's own errors

    @app.router.put("/upload")
    def upload():
        digest, size = hashlib.sha256(), 0
        body = bottle.request.environ["wsgi.input"]
        with open(kept_as, "wb") as out:
            while chunk := body.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
                size += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        bottle.response.content_type = answers.JSON
        return answers.encode({"sha256": digest.hexdigest(), "size": size})

    return dataclasses.replace(app, screen=screen, max_body_bytes=max_body_bytes)


def slow_disk(seconds):
    """Each write of a body held in a file waits `seconds` first, as behind another file's
    fsync."""
    write_all = files.write_all

    def slow(fd, data):
        time.sleep(seconds)
        write_all(fd, data)

    files.write_all = slow


def main(data, port, bodies, max_body_bytes, channel_timeout=None):
    if channel_timeout:
        serving.LIMITS.update(channel_timeout=int(channel_timeout), cleanup_interval=1)
    if os.environ.get("UPLOAD_APP_SLOW_DISK"):
        slow_disk(float(os.environ["UPLOAD_APP_SLOW_DISK"]))
    if os.environ.get("UPLOAD_APP_RECV_BYTES"):
        serving.LIMITS.update(recv_bytes=int(os.environ["UPLOAD_APP_RECV_BYTES"]))
    store = Store(data)
    store.start()
    kept_as = os.path.join(os.path.dirname(os.path.abspath(data)), "uploaded")
    app = stand_in(make_app(store), int(max_body_bytes), kept_as)
    try:
        return serving.run(
            app,
            "127.0.0.1",
            int(port),
            8,
            quiet=True,
            on_listening=lambda url: print("listening", flush=True),
            body_directory=bodies,
            trusted_proxy=os.environ.get("UPLOAD_APP_TRUSTED_PROXY"),
        )
    finally:
        store.stop()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
