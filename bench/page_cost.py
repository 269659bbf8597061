"""The app's own cost for the pages and the feed, in process: first render and repeated request.

Over synthetic data (two projects of 2,000 builds, one of 500), it calls the WSGI app directly,
with gzip accepted, and prints per path the body size, the first request (which renders) and
the mean of 5,000 repeated requests (which must render nothing; fewer, 5 s of them, for a
page rendered on each request), beside two JSON routes.

It does so twice in the same run: with downloads not counted (`--count-downloads off`), and
counted, by a stand-in counter whose tally holds 90 days of counts for each of the newest 500
builds of every project (135,000 rows). Counted, a page is made again for each new tally (at
most every counts.FLUSH_SECONDS): `new tally` is the first request after one.
"""

import datetime
import io
import random
import tempfile
import time

import synthetic
from buildshelf import counts, server, store

REPEAT = 5000
REPEAT_SECONDS = 5  # a page rendered on each request (past KEPT_PAGES) repeats fewer times
COUNTED_BUILDS = 500  # the newest of each project
COUNTED_DAYS = 90


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


class StandInCounter:
    """The counter's read side: tally(), replaced by next_tally() as a flush replaces it."""

    def __init__(self, rows):
        self.rows, self.current = rows, counts.Tally.of(rows)

    def tally(self):
        return self.current

    def next_tally(self):
        self.current = counts.Tally.of(self.rows)


def rows_of(snapshot):
    today, pick, rows = datetime.datetime.now(datetime.UTC).date(), random.Random(26), {}
    for slug, project in snapshot.projects.items():
        for build in project.builds[-COUNTED_BUILDS:]:
            for age in range(COUNTED_DAYS):
                day = (today - datetime.timedelta(days=age)).isoformat()
                rows[slug, build.number, build.download_url, day] = pick.randint(1, 40)
    return rows


def timed(app, path):
    started = time.perf_counter()
    status, body = call(app, path)
    return status, body, (time.perf_counter() - started) * 1000


def main():
    with tempfile.TemporaryDirectory() as directory:
        synthetic.generate(directory, [2000, 2000, 500])
        data = store.Store(directory, check_interval=60)
        counter = StandInCounter(rows_of(data.snapshot()))
        slug = sorted(data.snapshot().projects)[0]
        paths = [
            "/",
            f"/projects/{slug}",
            f"/projects/{slug}?experimental=true&page=2",
            f"/projects/{slug}?page=30",
            f"/api/v2/feed?project={slug}",
            f"/api/v2/builds?project={slug}",
            "/api/v2/projects",
        ]
        print(f"counted: {len(counter.rows):,} rows")
        for label, app in [
            ("not counted", server.make_app(data)),
            ("counted", server.make_app(data, counter=counter)),
        ]:
            print(label)
            for path in paths:
                status, body, first = timed(app, path)
                started = time.perf_counter()
                for repeats in range(1, REPEAT + 1):  # noqa: B007 (its last value is wanted)
                    call(app, path)
                    if time.perf_counter() - started > REPEAT_SECONDS:
                        break
                again = (time.perf_counter() - started) / repeats * 1e6
                line = (
                    f"  {path:45} {status[:3]} {len(body):>7} B gzipped   first {first:6.1f} ms   "
                    f"repeated {again:5.0f} us"
                )
                if label == "counted":
                    counter.next_tally()  # not timed: the flushing thread's work
                    line += f"   new tally {timed(app, path)[2]:6.1f} ms"
                print(line)


if __name__ == "__main__":
    main()
