"""What `app.screen(environ)` costs, in process: the server calls it on its loop thread for
every request once the headers are in, so a GET must hardly notice it.

    python bench/screen_cost.py

Over synthetic data (the twenty projects of bench/run.py), it prints the best of 5 runs of
screen for a GET without a body, a GET with `Content-Length: 0` and a write, beside what
the cheapest answer there is costs (a repeat recalled from memory, also on the loop thread)
and a GET through the whole app.
"""

import io
import tempfile
import timeit

import synthetic
from buildshelf import server, store

GET = {
    "REQUEST_METHOD": "GET",
    "PATH_INFO": "/api/v2/builds/latest",
    "QUERY_STRING": "project=p10",
    "REMOTE_ADDR": "127.0.0.1",
    "SERVER_NAME": "127.0.0.1",
    "SERVER_PORT": "80",
    "SERVER_PROTOCOL": "HTTP/1.1",
    "wsgi.url_scheme": "http",
}
EMPTY = dict(GET, CONTENT_LENGTH="0")
WRITE = dict(
    GET,
    REQUEST_METHOD="PUT",
    PATH_INFO="/api/v2/projects/p10/builds/9",
    HTTP_AUTHORIZATION="Bearer x",
    CONTENT_TYPE="multipart/form-data; boundary=x",
    CONTENT_LENGTH="1000000",
)


def best(call, number):
    """Nanoseconds per call, the best of 5 runs."""
    return min(timeit.repeat(call, number=number, repeat=5)) / number * 1e9


def main():
    with tempfile.TemporaryDirectory() as directory:
        synthetic.generate(directory, synthetic.TWENTY_SIZES)
        app = server.make_app(store.Store(directory, check_interval=0))

        def whole():
            app(dict(GET, **{"wsgi.input": io.BytesIO()}), lambda *args: None)

        whole()  # remembered from now on
        assert app.recall(GET) is not None
        rows = [
            ("screen, GET without a body", best(lambda: app.screen(GET), 1_000_000)),
            ("screen, GET with Content-Length: 0", best(lambda: app.screen(EMPTY), 1_000_000)),
            ("screen, PUT of a build (a write)", best(lambda: app.screen(WRITE), 200_000)),
            ("recall of a remembered GET", best(lambda: app.recall(GET), 200_000)),
            ("GET /builds/latest through the app", best(whole, 20_000)),
        ]
        for name, ns in rows:
            print(f"{name:40} {ns:8.0f} ns")


if __name__ == "__main__":
    main()
