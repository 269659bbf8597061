"""The app's own cost for the pages and the feed, in process: first render and repeated request.

Over synthetic data (two projects of 2,000 builds, one of 500), it calls the WSGI app directly,
with gzip accepted, and prints per path the body size, the first request (which renders) and
the mean of 5,000 repeated requests (which must render nothing), beside two JSON routes.
"""

import io
import tempfile
import time

import synthetic
from buildshelf import server, store

REPEAT = 5000


def call(app, path):
    path_info, _, query = path.partition("?")
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": path_info,
        "QUERY_STRING": query,
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(),
        "HTTP_ACCEPT_ENCODING": "gzip",
    }
    statuses = []
    body = b"".join(app(environ, lambda status, headers, exc_info=None: statuses.append(status)))
    return statuses[0], body


def main():
    with tempfile.TemporaryDirectory() as directory:
        synthetic.generate(directory, [2000, 2000, 500])
        data = store.Store(directory, check_interval=60)
        app = server.make_app(data)
        slug = sorted(data.snapshot().projects)[0]
        for path in [
            "/",
            f"/projects/{slug}",
            f"/projects/{slug}?experimental=true&page=2",
            f"/projects/{slug}?page=30",
            f"/api/v2/feed?project={slug}",
            f"/api/v2/builds?project={slug}",
            "/api/v2/projects",
        ]:
            started = time.perf_counter()
            status, body = call(app, path)
            first = (time.perf_counter() - started) * 1000
            started = time.perf_counter()
            for _ in range(REPEAT):
                call(app, path)
            again = (time.perf_counter() - started) / REPEAT * 1e6
            print(
                f"{path:45} {status[:3]} {len(body):>7} B gzipped   first {first:6.1f} ms   "
                f"repeated {again:5.0f} us"
            )


if __name__ == "__main__":
    main()
