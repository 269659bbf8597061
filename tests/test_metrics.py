"""GET /metrics: each metric present and moving as requests are made and the data changes, in
process and over a real server (requests answered from memory on its loop thread too, with
--quiet); each app with a registry of its own; route labels bounded."""

import hashlib
import http.client
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import prometheus_client
import pytest
import webtest
from prometheus_client.parser import text_string_to_metric_families

from buildshelf import cli, counts, metrics, server
from buildshelf import store as store_module
from buildshelf.serving import accesslog
from helpers import ROOT, eventually, free_port, make_build, make_project, real_server, write_file

# Every metric of ours, as the text format names its samples' families.
ALWAYS = {
    "buildshelf_http_requests": "counter",
    "buildshelf_http_request_duration_seconds": "histogram",
    "buildshelf_http_response_body_bytes": "counter",
    "buildshelf_data_reloads": "counter",
    "buildshelf_data_loaded_timestamp_seconds": "gauge",
    "buildshelf_rejected_files": "gauge",
    "buildshelf_unavailable_objects": "gauge",
    "buildshelf_builds_served": "gauge",
}
WITH_COUNTER = {"buildshelf_downloads_counted": "counter", "buildshelf_downloads_deduplicated": "counter"}  # fmt: skip
WITH_NOTIFIER = {"buildshelf_webhook_deliveries": "counter"}
LATEST = "/api/v2/builds/latest"
KEPT_RULE = "/downloads/<project>/<build>/<sha256>/<file>"


def scraped(text):
    """{family name: {(sample name, sorted label pairs): value}} of a /metrics answer."""
    return {
        family.name: {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for sample in family.samples
        }
        for family in text_string_to_metric_families(text)
    }


def scrape(client):
    resp = client.get(metrics.PATH)
    assert resp.headers["Cache-Control"] == "no-store"
    return scraped(resp.text)


def requests_of(families, route):
    """{status: requests} of `route`."""
    return {
        dict(labels)["status"]: value
        for (_, labels), value in families["buildshelf_http_requests"].items()
        if dict(labels)["route"] == route
    }


def record(method, path, status="200", sent=100, seconds=0.0003):
    """An access record as the server makes one (accesslog.access_record)."""
    return (time.time(), "127.0.0.1", method, path, "", status, sent, seconds)


@pytest.fixture
def fakes():
    return SimpleNamespace(
        counter=SimpleNamespace(counted=0, deduplicated=0),
        notifier=SimpleNamespace(deliveries={}, problems=dict),
    )


@pytest.fixture
def observed(store, fakes):
    """An app with metrics from the fake counter and notifier: (app, its webtest client)."""
    app = server.make_app(store, counter=fakes.counter, notifier=fakes.notifier)
    return app, webtest.TestApp(app)


# --- the answer -------------------------------------------------------------------------------


def test_metrics_answer_the_prometheus_text_format_with_every_metric(observed):
    app, client = observed
    resp = client.get(metrics.PATH)
    assert resp.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    families = {f.name: f.type for f in text_string_to_metric_families(resp.text)}
    assert families.items() >= {**ALWAYS, **WITH_COUNTER, **WITH_NOTIFIER}.items()
    # And what every Prometheus client exports about its process.
    assert {"process_cpu_seconds", "process_resident_memory_bytes", "python_info"} <= set(families)
    assert client.head(metrics.PATH).body == b""


def test_openmetrics_when_the_scraper_asks_for_it(observed):
    _, client = observed
    resp = client.get(metrics.PATH, headers={"Accept": "application/openmetrics-text"})
    assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
    assert resp.text.endswith("# EOF\n")


def test_a_malformed_query_is_refused_as_on_every_route(observed):
    resp = observed[1].get(metrics.PATH + "?x=%0A", status=400)
    assert resp.json["code"] == "invalid_query"


def test_each_app_has_a_registry_of_its_own(store):
    one, other = server.make_app(store), server.make_app(store)
    one.observe_requests([record("GET", LATEST)] * 3)
    assert requests_of(scrape(webtest.TestApp(one)), LATEST) == {"200": 3}
    assert requests_of(scrape(webtest.TestApp(other)), LATEST) == {}
    assert not [
        name
        for name in prometheus_client.REGISTRY._names_to_collectors
        if name.startswith("buildshelf")
    ]


def test_metrics_off_is_no_route_and_nothing_to_observe(store):
    app = server.make_app(store, metrics=False)
    assert app.observe_requests is None
    assert webtest.TestApp(app).get(metrics.PATH, status=404).json["code"] == "not_found"


# --- requests ---------------------------------------------------------------------------------


def test_requests_are_tallied_by_the_rule_of_their_route_and_status(observed):
    app, client = observed
    sha = "a" * 64
    app.observe_requests(
        [
            record("GET", LATEST),
            record("HEAD", LATEST, sent=0),
            record("GET", LATEST, "304", sent=0),
            record("GET", f"/downloads/alpha/9/{sha}/alpha-9.jar", sent=3 << 20, seconds=0.7),
            record("GET", f"/downloads/beta/10/{sha}/beta-10.jar", "200", accesslog.HANDED_OVER),
            record("GET", f"/downloads/beta/10/{sha}/beta-10.jar.sha256", "404"),
            record("POST", "/api/v2/projects", "405"),  # a route's path, another method
            record("PUT", "/api/v2/projects/alpha/builds/9", "401"),
            record("GET", "/no/such/path", "404"),
            record("GET", "/../../etc/passwd", "404"),
            ("0", "-", "-", "-", "", "400", "-", 0.0001),  # what waitress could not read
        ]
    )
    families = scrape(client)
    assert requests_of(families, LATEST) == {"200": 2, "304": 1}
    assert requests_of(families, KEPT_RULE) == {"200": 2, "404": 1}
    assert requests_of(families, "/api/v2/projects") == {"405": 1}
    assert requests_of(families, "/api/v2/projects/<slug>/builds/<number>") == {"401": 1}
    assert requests_of(families, metrics.UNMATCHED) == {"404": 2, "400": 1}
    sent = families["buildshelf_http_response_body_bytes"]
    # The bytes nginx sends are not Buildshelf's to count (the access log says handed-over).
    assert sent[("buildshelf_http_response_body_bytes_total", (("route", KEPT_RULE),))] == (
        (3 << 20) + 100
    )
    assert sent[("buildshelf_http_response_body_bytes_total", (("route", LATEST),))] == 100


def test_the_latency_histogram_puts_each_request_in_its_bucket(observed):
    app, client = observed
    app.observe_requests([record("GET", LATEST, seconds=s) for s in (0.0003, 0.0005, 0.002, 30)])
    histogram = scrape(client)["buildshelf_http_request_duration_seconds"]

    def sample(name, **labels):
        return histogram[(name, tuple(sorted({"route": LATEST, **labels}.items())))]

    bucket = "buildshelf_http_request_duration_seconds_bucket"
    assert [sample(bucket, le=le) for le in ("0.0005", "0.001", "0.0025", "10.0", "+Inf")] == [
        2,
        2,
        3,
        3,
        4,
    ]
    assert sample("buildshelf_http_request_duration_seconds_count") == 4
    assert sample("buildshelf_http_request_duration_seconds_sum") == pytest.approx(30.0028)


def test_made_up_paths_are_one_label_and_the_memory_of_routes_is_bounded(observed):
    app, client = observed
    flood = [record("GET", f"/made-up/{i}", "404") for i in range(3 * metrics.ROUTES_KEPT)]
    app.observe_requests(flood)
    labels = {dict(labels)["route"] for _, labels in scrape(client)["buildshelf_http_requests"]}
    assert labels == {metrics.UNMATCHED}
    requests = app.observe_requests.__self__  # the metrics.Requests it tallies into
    assert len(requests._routes) <= metrics.ROUTES_KEPT


def test_the_log_thread_hands_every_record_to_observe_and_writes_nothing_when_quiet(tmp_path):
    path = tmp_path / "log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    seen = []
    writer = accesslog.LineWriter(fd, interval=0.001, to_line=None, observe=seen.extend)
    for i in range(5000):
        writer(i)
    writer.close()
    os.close(fd)
    assert (seen, path.read_bytes()) == (list(range(5000)), b"")


# --- what is served, read when scraped ---------------------------------------------------------


def sample_of(families, name):
    [(value)] = families[name].values()
    return value


def test_reloads_rejected_files_and_builds_served_follow_the_data(data_dir, store):
    client = webtest.TestApp(server.make_app(store))
    families = scrape(client)
    assert sample_of(families, "buildshelf_data_reloads") == 0  # the first load is no reload
    assert sample_of(families, "buildshelf_rejected_files") == 0
    served = {dict(labels)["project"]: value for (_, labels), value in families["buildshelf_builds_served"].items()}  # fmt: skip
    assert served == {"alpha": 6, "beta": 1}
    write_file(data_dir / "beta.json", make_project([make_build(10, "2.0"), make_build(11, "2.0")]))
    write_file(data_dir / "broken.json", "{")
    store.refresh()
    families = scrape(client)
    assert sample_of(families, "buildshelf_data_reloads") == 1
    assert sample_of(families, "buildshelf_rejected_files") == 1
    served = {dict(labels)["project"]: value for (_, labels), value in families["buildshelf_builds_served"].items()}  # fmt: skip
    assert served == {"alpha": 6, "beta": 2}
    assert sample_of(families, "buildshelf_data_loaded_timestamp_seconds") == pytest.approx(
        store.snapshot().loaded_at
    )


def test_unavailable_objects_are_counted(data_dir, tmp_path):
    jar = tmp_path / "alpha-9.jar"
    jar.write_bytes(b"a build")
    argv = ["publish", "alpha", "--data", str(data_dir), "--build", "9", "--channel", "1.21",
            "--file", str(jar)]  # fmt: skip
    assert cli.main(argv) == 0
    store = store_module.Store(data_dir, check_interval=0)
    client = webtest.TestApp(server.make_app(store))
    assert sample_of(scrape(client), "buildshelf_unavailable_objects") == 0
    sha = hashlib.sha256(b"a build").hexdigest()
    os.unlink(data_dir / "artifacts" / sha[:2] / sha)
    store.refresh()
    assert sample_of(scrape(client), "buildshelf_unavailable_objects") == 1


def test_downloads_counted_and_deduplicated_are_the_counter_s_own(observed, fakes):
    families = scrape(observed[1])
    assert [sample_of(families, name) for name in WITH_COUNTER] == [0, 0]
    fakes.counter.counted, fakes.counter.deduplicated = 12, 5
    families = scrape(observed[1])
    assert [sample_of(families, name) for name in WITH_COUNTER] == [12, 5]


def test_a_real_counter_s_downloads_are_scraped(store, tmp_path):
    counter = counts.Counter(str(tmp_path / "state"))
    client = webtest.TestApp(server.make_app(store, counter=counter))
    for address in ("192.0.2.1", "192.0.2.9", "198.51.100.1"):  # the second: the first's /24
        client.get("/downloads/latest?project=alpha", extra_environ={"REMOTE_ADDR": address})
    families = scrape(client)
    assert [sample_of(families, name) for name in WITH_COUNTER] == [2, 1]


def test_without_counting_or_webhooks_their_metrics_are_absent(store):
    families = scrape(webtest.TestApp(server.make_app(store)))
    assert families.keys() >= ALWAYS.keys()
    assert not families.keys() & (WITH_COUNTER.keys() | WITH_NOTIFIER.keys())


def test_webhook_deliveries_by_target_index_and_outcome(observed, fakes):
    assert scrape(observed[1])["buildshelf_webhook_deliveries"] == {}
    fakes.notifier.deliveries.update({(0, "delivered"): 3, (2, "retried"): 1})
    fakes.notifier.deliveries[2, "failed"] = 1
    deliveries = scrape(observed[1])["buildshelf_webhook_deliveries"]
    assert {
        (dict(labels)["target"], dict(labels)["outcome"]): value
        for (_, labels), value in deliveries.items()
    } == {("0", "delivered"): 3, ("2", "retried"): 1, ("2", "failed"): 1}


# --- over a real server -----------------------------------------------------------------------

# The real server (server.main, as `buildshelf serve`), its app's recall counting what the
# loop thread answered from memory, and telling it at /recalled.
COUNTING_SERVER = """
import dataclasses
import sys
sys.path.insert(0, sys.argv[1])
from buildshelf import server

made = server.make_app

def make_app(*args, **kwargs):
    app = made(*args, **kwargs)
    recall, recalled = app.recall, []

    def counting(environ):
        answer = recall(environ)
        if answer is not None:
            recalled.append(environ["PATH_INFO"])
        return answer

    app.router.get("/recalled")(lambda: str(len(recalled)))
    return dataclasses.replace(app, recall=counting)

server.make_app = make_app
sys.exit(server.main(sys.argv[2:]))
"""


def get(port, target, method="GET"):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, target)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def scraped_over(port):
    status, body = get(port, metrics.PATH)
    assert status == 200
    return scraped(body.decode())


@pytest.fixture
def counting_server(tmp_path, data_dir):
    script = tmp_path / "counting_server.py"
    script.write_text(COUNTING_SERVER)
    port = free_port()
    argv = [sys.executable, str(script), ROOT, "--data", str(data_dir), "--port", str(port)]
    proc = subprocess.Popen([*argv, "--quiet"], stderr=subprocess.PIPE, text=True)
    try:
        eventually(lambda: proc.poll() is not None or _accepts(port))
        assert proc.poll() is None, proc.communicate()[1]
        yield port, proc
    finally:
        proc.terminate()
        proc.communicate(timeout=20)


def _accepts(port):
    try:
        get(port, "/healthz")
        return True
    except OSError:
        return False


@pytest.mark.system
def test_requests_answered_from_memory_are_counted_with_quiet(counting_server):
    port, proc = counting_server
    target = LATEST + "?project=alpha"
    for method in ("GET", "GET", "GET", "HEAD"):
        assert get(port, target, method)[0] == 200
    assert get(port, target + "&channel=nope")[0] == 404
    # Answered from memory, on the loop thread: bottle never saw them.
    assert int(get(port, "/recalled")[1]) >= 2

    def seen():
        families = scraped_over(port)
        return requests_of(families, LATEST).get("200", 0) == 4 and families

    families = eventually(seen)
    assert requests_of(families, LATEST) == {"200": 4, "404": 1}
    assert requests_of(families, "/healthz")["200"] >= 1
    body_bytes = families["buildshelf_http_response_body_bytes"]
    route = (("route", LATEST),)
    # Three bodies of the same build and a 404's: what HEAD sends is no body.
    latest = get(port, target)[1]
    error = get(port, target + "&channel=nope")[1]
    assert body_bytes["buildshelf_http_response_body_bytes_total", route] == 3 * len(latest) + len(
        error
    )
    histogram = families["buildshelf_http_request_duration_seconds"]
    assert histogram["buildshelf_http_request_duration_seconds_count", route] == 5
    assert proc.poll() is None


@pytest.mark.system
def test_the_access_log_and_the_metrics_both_see_every_request(data_dir):
    with real_server(data_dir) as (port, proc):
        for _ in range(3):
            assert get(port, "/api/v2/projects")[0] == 200
        assert get(port, "/no/such/thing")[0] == 404
        families = eventually(
            lambda: (
                (f := scraped_over(port)) and requests_of(f, metrics.UNMATCHED) == {"404": 1} and f
            )
        )
        assert requests_of(families, "/api/v2/projects") == {"200": 3}
        proc.terminate()
        log = proc.communicate(timeout=10)[1]
    assert log.count(" GET /api/v2/projects 200 ") == 3
    assert log.count(" GET /no/such/thing 404 ") == 1


@pytest.mark.system
def test_with_metrics_off_there_is_no_route(data_dir):
    with real_server(data_dir, "--quiet", "--metrics", "off") as (port, _):
        assert get(port, metrics.PATH)[0] == 404
