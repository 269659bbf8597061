"""/metrics: what the server has done and serves, in the Prometheus text format, each app with
a registry of its own (prometheus_client).

Nothing is counted on a request's path for it. The requests are tallied from the access
records the server already makes of every request, those answered from memory on its loop
thread too, by the thread that writes the access log (`observe`, a batch at a time); every
other number is read when /metrics is scraped, from what the store, the download counter,
the webhook notifier and the token watch keep anyway. docs/metrics.md lists each metric and
its labels.
"""

import bisect
import threading

import bottle
from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.utils import floatToGoString

from buildshelf.web import query

PATH = "/metrics"
# The route label of a request no route matches (or that the server could not read): any
# path a client makes up is this one label, so the series stay as few as the routes.
UNMATCHED = "unmatched"
# Seconds: a repeat answered from memory takes a few hundred microseconds, a routed request
# a millisecond or two, a download as long as its client reads.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_BUCKET_LABELS = tuple(map(floatToGoString, LATENCY_BUCKETS)) + ("+Inf",)
# The paths whose route is remembered; past this many (paths made up by a client), the
# memory starts again, so that it stays bounded.
ROUTES_KEPT = 10_000


class Requests:
    """The requests answered, by route and status, their latency and the body bytes sent,
    tallied from access records by the thread that writes the access log (`observe`), each
    request's route found by `router` (the app's) as bottle finds it."""

    def __init__(self, router):
        self._router = router
        self._routes = {}  # (method, path) -> route label
        self._lock = threading.Lock()  # a scrape reads what a batch is adding to
        self.answered = {}  # (route, status) -> requests
        self.latency = {}  # route -> [requests in each LATENCY_BUCKETS, over the last, sum]
        self.sent = {}  # route -> body bytes written to the socket

    def observe(self, records) -> None:
        """Tally `records`, each as serving.accesslog.access_record makes it."""
        routes, answered, latency, sent = self._routes, self.answered, self.latency, self.sent
        with self._lock:
            for _, _, method, path, _, status, body, seconds in records:
                route = routes.get((method, path)) or self._route(method, path)
                answered[route, status] = answered.get((route, status), 0) + 1
                counts = latency.get(route)
                if counts is None:
                    counts = latency[route] = [0] * (len(LATENCY_BUCKETS) + 2)
                counts[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
                counts[-1] += seconds
                if body.__class__ is int:  # not "-" (no answer) or handed to nginx
                    sent[route] = sent.get(route, 0) + body

    def _route(self, method: str, path: str) -> str:
        """The rule of the route that answers `method` on `path`, or UNMATCHED; remembered."""
        if len(self._routes) >= ROUTES_KEPT:
            self._routes.clear()
        environ = {"REQUEST_METHOD": method, "PATH_INFO": path}
        try:
            rule = self._router.match(environ)[0].rule
        except bottle.HTTPError as error:
            # 404 (or the server's "-" for a request it could not read): no route's path;
            # 405: a route's, for other methods, of which bottle names the first in Allow.
            rule = UNMATCHED
            if error.status_code == 405:
                environ["REQUEST_METHOD"] = error.headers["Allow"].split(",")[0]
                rule = self._router.match(environ)[0].rule
        self._routes[method, path] = rule
        return rule

    def collect(self):
        with self._lock:
            answered, sent = dict(self.answered), dict(self.sent)
            latency = {route: list(counts) for route, counts in self.latency.items()}
        requests = CounterMetricFamily(
            "buildshelf_http_requests",
            "Requests answered, by the rule of the route that answered (or 'unmatched') and "
            "the status",
            labels=["route", "status"],
        )
        for (route, status), count in sorted(answered.items()):
            requests.add_metric([route, status], count)
        seconds = HistogramMetricFamily(
            "buildshelf_http_request_duration_seconds",
            "Seconds from a request read to its answer made, as the access log says",
            labels=["route"],
        )
        for route, counts in sorted(latency.items()):
            total, cumulative = counts.pop(), []
            for le, count in zip(_BUCKET_LABELS, counts):
                cumulative.append((le, count + (cumulative[-1][1] if cumulative else 0)))
            seconds.add_metric([route], cumulative, total)
        body_bytes = CounterMetricFamily(
            "buildshelf_http_response_body_bytes",
            "Bytes of answers' bodies written to the socket (not those nginx sends)",
            labels=["route"],
        )
        for route, count in sorted(sent.items()):
            body_bytes.add_metric([route], count)
        return [requests, seconds, body_bytes]


class Served:
    """What is served and how it was read, what the download counter and the webhooks did,
    and when the tokens expire: read from them when scraped."""

    def __init__(self, store, counter, notifier, tokens=None):
        self.store, self.counter, self.notifier = store, counter, notifier
        self.tokens = tokens

    def collect(self):
        store, snapshot = self.store, self.store.snapshot()
        families = [
            CounterMetricFamily(
                "buildshelf_data_reloads",
                "Times the data served was replaced after a data file changed",
                store.reloads,
            ),
            GaugeMetricFamily(
                "buildshelf_data_loaded_timestamp_seconds",
                "When the data served was read (Unix time)",
                snapshot.loaded_at,
            ),
            GaugeMetricFamily(
                "buildshelf_rejected_files",
                "Data files not served as they are on disk (/healthz names them)",
                len(snapshot.errors),
            ),
            GaugeMetricFamily(
                "buildshelf_unavailable_objects",
                "Kept files of served builds whose object is missing or damaged",
                len(store.unavailable()),
            ),
        ]
        builds = GaugeMetricFamily(
            "buildshelf_builds_served", "Builds served (not yanked), by project", labels=["project"]
        )
        for slug, project in snapshot.projects.items():
            builds.add_metric([slug], len(project.builds))
        families.append(builds)
        if self.counter is not None:  # else --count-downloads off
            families += [
                CounterMetricFamily(
                    "buildshelf_downloads_counted",
                    "Downloads counted (docs/downloads.md says which)",
                    self.counter.counted,
                ),
                CounterMetricFamily(
                    "buildshelf_downloads_deduplicated",
                    "Downloads not counted again: the same client network and build within "
                    "the window",
                    self.counter.deduplicated,
                ),
            ]
        if self.notifier is not None:
            deliveries = CounterMetricFamily(
                "buildshelf_webhook_deliveries",
                "Webhook deliveries tried, by the target's index in webhooks.json and outcome",
                labels=["target", "outcome"],
            )
            # One step under the interpreter lock, while delivery threads add to it.
            for (index, outcome), count in sorted(list(self.notifier.deliveries.items())):
                deliveries.add_metric([str(index), outcome], count)
            families.append(deliveries)
        if self.tokens is not None:
            expiry = GaugeMetricFamily(
                "buildshelf_token_expiry_timestamp_seconds",
                "When each token that still works (or expired while in use) expires (Unix "
                "time), by its id (never its secret) and project",
                labels=["token", "project"],
            )
            for token_id, project, expires in self.tokens.expiries():  # from memory
                expiry.add_metric([token_id, project], expires / 1000)
            families.append(expiry)
        return families


def install(app: bottle.Bottle, store, counter=None, notifier=None, tokens=None):
    """Add GET /metrics to `app` (made by server.make_app), over a registry of its own, for
    `store`, `counter` (a counts.Counter, or None when downloads are not counted),
    `notifier` (a webhooks.delivery.Notifier, or None) and `tokens` (a
    publishing.expiry.TokenWatch, or None). Returns what the server hands access records
    to, a batch at a time, on a thread that answers no request."""
    registry = CollectorRegistry()
    requests = Requests(app.router)
    registry.register(requests)
    registry.register(Served(store, counter, notifier, tokens))
    # What every Prometheus client exports: the process's CPU, memory and files, Python's.
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)

    @app.get(PATH)
    def metrics():
        """The metrics, in the format the scraper asks for (Accept): Prometheus text, or
        OpenMetrics."""
        query.parse()
        encode, content_type = choose_encoder(bottle.request.get_header("Accept", ""))
        bottle.response.set_header("Content-Type", content_type)
        return encode(registry)

    return requests.observe
