"""HTTP caching, compression, CORS, HEAD and the health check."""

import gc
import gzip
import os
import re
import threading
import weakref
from types import SimpleNamespace

import pytest
import webob
import webtest

from buildshelf import server
from buildshelf import store as store_module
from buildshelf.web import answers, contract, representation
from helpers import bump_mtime, hang_reads_of, make_build, make_project, recalled, write_file

API = "/api/v2"
JSON_PATHS = [
    API + "/projects",
    API + "/builds?project=alpha",
    API + "/builds/all?project=alpha&experimental=true",
    API + "/builds/latest?project=alpha",
    API + "/builds/latest?project=beta",
]


@pytest.fixture
def aged(store, monkeypatch):
    """Pretend the data was loaded long ago, so responses carry Last-Modified."""
    real_time = answers.time.time
    monkeypatch.setattr(answers.time, "time", lambda: real_time() + 3600)


@pytest.fixture
def big_data_dir(data_dir):
    write_file(
        data_dir / "big.json", make_project([make_build(n, commit_count=3) for n in range(40)])
    )
    return data_dir


def raw(app, path, method="GET", **headers):
    """The response as sent: webtest would undo the gzip encoding."""
    headers = {name.replace("_", "-"): value for name, value in headers.items()}
    return webob.Request.blank(path, method=method, headers=headers).get_response(app)


# --- validators: ETag and Last-Modified --------------------------------------------------------


@pytest.mark.parametrize("path", JSON_PATHS)
def test_every_json_200_has_a_strong_etag_and_a_304_round_trip(client, path):
    resp = client.get(path)
    etag = resp.headers["ETag"]
    assert etag.startswith('"') and etag.endswith('"') and len(etag) > 10
    again = client.get(path, headers={"If-None-Match": etag}, status=304)
    assert again.body == b""
    assert again.headers["ETag"] == etag
    assert again.headers["Cache-Control"] == "public, max-age=60"


@pytest.mark.parametrize("if_none_match", ['"nope"', 'W/"nope"', '"a", "b"'])
def test_a_different_etag_gets_the_full_body(client, if_none_match):
    resp = client.get(API + "/projects", headers={"If-None-Match": if_none_match})
    assert resp.status_int == 200 and resp.json["projects"]


@pytest.mark.parametrize("template", ["{etag}", "W/{etag}", '"x", {etag}', "*"])
def test_if_none_match_forms(client, template):
    etag = client.get(API + "/projects").headers["ETag"]
    client.get(API + "/projects", headers={"If-None-Match": template.format(etag=etag)}, status=304)


def test_the_etag_changes_with_the_data_and_only_then(data_dir, client):
    etag = client.get(API + "/builds?project=alpha").headers["ETag"]
    bump_mtime(data_dir / "alpha.json")
    assert client.get(API + "/builds?project=alpha").headers["ETag"] == etag
    write_file(data_dir / "alpha.json", make_project([make_build(40)]))
    resp = client.get(API + "/builds?project=alpha", headers={"If-None-Match": etag})
    assert resp.status_int == 200 and resp.headers["ETag"] != etag


def test_etags_differ_between_views(client):
    etags = {client.get(path).headers["ETag"] for path in JSON_PATHS}
    assert len(etags) == len(JSON_PATHS)


def test_etags_agree_across_instances_over_the_same_files(data_dir, client):
    other = webtest.TestApp(server.make_app(store_module.Store(data_dir, check_interval=0)))
    for path in JSON_PATHS:
        assert client.get(path).headers["ETag"] == other.get(path).headers["ETag"]


def test_no_last_modified_in_the_first_second_of_a_version(client):
    # A date with one-second resolution could not tell this version from one a moment ago.
    resp = client.get(API + "/projects")
    assert "Last-Modified" not in resp.headers
    client.get(
        API + "/projects",
        headers={"If-Modified-Since": "Fri, 01 Jan 2100 00:00:00 GMT"},
        status=200,
    )


def test_if_modified_since_round_trip(client, aged):
    resp = client.get(API + "/builds/latest?project=alpha")
    last_modified = resp.headers["Last-Modified"]
    assert last_modified.endswith(" GMT")
    again = client.get(
        API + "/builds/latest?project=alpha",
        headers={"If-Modified-Since": last_modified},
        status=304,
    )
    assert again.body == b""
    client.get(
        API + "/builds/latest?project=alpha",
        headers={"If-Modified-Since": "Thu, 01 Jan 1970 00:00:00 GMT"},
        status=200,
    )
    client.get(
        API + "/builds/latest?project=alpha",
        headers={"If-Modified-Since": "not a date"},
        status=200,
    )


def test_if_none_match_wins_over_if_modified_since(client, aged):
    resp = client.get(API + "/projects")
    client.get(
        API + "/projects",
        status=200,
        headers={"If-None-Match": '"other"', "If-Modified-Since": resp.headers["Last-Modified"]},
    )


def test_last_modified_follows_the_project_not_the_others(data_dir, client, aged):
    alpha = client.get(API + "/builds?project=alpha").headers["Last-Modified"]
    write_file(data_dir / "beta.json", make_project([make_build(77)]))
    assert client.get(API + "/builds?project=alpha").headers["Last-Modified"] == alpha


# --- Cache-Control ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", JSON_PATHS)
def test_json_successes_are_publicly_cacheable(client, path):
    assert client.get(path).headers["Cache-Control"] == "public, max-age=60"


def test_max_age_is_configurable(store):
    client = webtest.TestApp(server.make_app(store, max_age=5))
    assert client.get(API + "/projects").headers["Cache-Control"] == "public, max-age=5"
    assert client.get(API + "/jd?project=alpha").headers["Cache-Control"] == "public, max-age=5"


def test_the_javadoc_redirect_is_cached_briefly(client):
    resp = client.get(API + "/jd?project=alpha", status=302)
    assert resp.headers["Cache-Control"] == "public, max-age=10"


@pytest.mark.parametrize(
    "path, status",
    [
        (API + "/builds", 400),
        (API + "/builds?project=nope", 404),
        ("/nope", 404),
        (API + "/builds/latest?project=alpha&channel=x", 404),
        ("/healthz", 200),
    ],
)
def test_errors_and_health_are_never_stored(client, path, status):
    assert client.get(path, status=status).headers["Cache-Control"] == "no-store"


def test_405_and_500_are_never_stored(client):
    resp = client.post(API + "/projects", status=405)
    assert resp.headers["Cache-Control"] == "no-store"


def test_gone_may_be_cached(client):
    assert client.get("/api/v1/builds", status=410).headers["Cache-Control"] == (
        "public, max-age=86400"
    )


# --- gzip ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "accept", ["gzip", "gzip, deflate, br", "br;q=1.0, gzip;q=0.8", "*", "GZIP", "x-gzip"]
)
def test_gzip_round_trip(big_data_dir, app, client, accept):
    plain = client.get(API + "/builds?project=big")
    resp = raw(app, API + "/builds?project=big", Accept_Encoding=accept)
    assert resp.status_int == 200 and resp.headers["Content-Encoding"] == "gzip"
    assert resp.headers["Vary"] == "Accept-Encoding"
    assert int(resp.headers["Content-Length"]) == len(resp.body) < len(plain.body)
    assert gzip.decompress(resp.body) == plain.body
    assert resp.headers["ETag"] != plain.headers["ETag"]
    client.get(
        API + "/builds?project=big",
        status=304,
        headers={"Accept-Encoding": accept, "If-None-Match": resp.headers["ETag"]},
    )


@pytest.mark.parametrize("accept", [None, "identity", "gzip;q=0", "br", "*;q=0", "gzip;q=0, *"])
def test_identity_for_everyone_else(big_data_dir, app, accept):
    headers = {"Accept_Encoding": accept} if accept else {}
    resp = raw(app, API + "/builds?project=big", **headers)
    assert "Content-Encoding" not in resp.headers
    assert resp.headers["Vary"] == "Accept-Encoding"
    assert resp.json[0]["buildNumber"] == 0


def test_small_bodies_are_not_compressed(app):
    resp = raw(app, API + "/builds/latest?project=beta", Accept_Encoding="gzip")
    assert len(resp.body) < 1024
    assert "Content-Encoding" not in resp.headers and "Vary" not in resp.headers


def test_a_repeated_request_does_no_encoding(big_data_dir, client, monkeypatch):
    client.get(API + "/builds?project=big", headers={"Accept-Encoding": "gzip"})
    client.get(API + "/builds/latest?project=big")
    client.get(API + "/projects")

    def fail(*args, **kwargs):
        raise AssertionError("encoded again")

    monkeypatch.setattr(answers, "ENCODER", SimpleNamespace(encode=fail))
    monkeypatch.setattr(server.Representation, "of", fail)
    for accept in ("gzip", "identity"):
        client.get(API + "/builds?project=big", headers={"Accept-Encoding": accept})
        client.get(API + "/builds/all?project=BIG", headers={"Accept-Encoding": accept})
    client.get(API + "/builds/latest?project=big")
    client.get(API + "/projects")


def count_encodings(monkeypatch):
    made = []
    of = server.Representation.of

    def counted(body, loaded_at):
        made.append(body)
        return of(body, loaded_at)

    monkeypatch.setattr(server.Representation, "of", counted)
    return made


def test_unknown_channels_share_one_entry(client, monkeypatch):
    made = count_encodings(monkeypatch)
    for i in range(20):
        assert client.get(API + f"/builds?project=alpha&channel=x{i}").json == []
    assert made == [b"[]"]


def test_filters_that_select_the_same_builds_share_one_body(client, monkeypatch):
    made = count_encodings(monkeypatch)
    for query in ("channel=2.0", "channel=2.0&experimental=true", "", "experimental=true"):
        client.get(API + f"/builds?project=beta&{query}")  # beta: one stable build, in 2.0
    for query in ("channel=1.21.1-pre1&experimental=true", "experimental=true"):
        assert client.get(API + f"/builds/latest?project=alpha&{query}").json["buildNumber"] == 8
    assert len(made) == 2


def test_the_cache_keeps_at_most_its_size_and_drops_the_least_recently_used():
    cache = representation.RepresentationCache(max_bytes=3000)
    data = [store_module.Snapshot({}) for _ in range(5)]

    def make():
        return representation.Representation.of(b"x" * 1000, 0.0)

    for d in data[:4]:
        cache.get(d, "v", make)
    assert cache.size == 3000  # data[0] went
    cache.get(data[1], "v", lambda: pytest.fail("made again"))  # now the most recently used
    cache.get(data[4], "v", make)  # data[2] goes
    assert cache.size == 3000
    cache.get(data[1], "v", lambda: pytest.fail("made again"))
    remade = []
    cache.get(data[2], "v", lambda: remade.append(1) or make())
    assert remade == [1]
    big = representation.Representation.of(b"y" * 5000, 0.0)
    assert cache.get(data[3], "big", lambda: big) is big and cache.size == 3000  # not kept


def test_entries_go_with_the_data_they_show(data_dir, client, app, store):
    targets = [API + "/builds?project=alpha&experimental=true", API + "/builds?project=beta"]
    for target in targets + [API + "/projects"]:
        client.get(target)
    old_alpha = weakref.ref(store.snapshot().projects["alpha"])
    write_file(data_dir / "alpha.json", make_project([make_build(40)]))
    store.refresh()
    gc.collect()
    assert old_alpha() is None  # the cache keeps nothing of the data it showed
    # Answers are remembered for one snapshot: the new one is answered afresh.
    assert not any(recalled(app, target) for target in targets + [API + "/projects"])
    client.get(targets[1])
    assert recalled(app, targets[1])


# --- repeats answered from memory -------------------------------------------------------------

REMEMBERED_PATHS = JSON_PATHS + [
    API + "/builds?project=big",
    API + "/feed?project=alpha",
    "/",
    "/projects/alpha",
    "/projects/big?page=1",
]
VARIANTS = [  # (method, request headers)
    ("GET", {}),
    ("GET", {"Accept-Encoding": "gzip, deflate, br"}),
    ("HEAD", {}),
    ("HEAD", {"Accept-Encoding": "gzip"}),
    ("GET", {"If-None-Match": "*"}),
    ("GET", {"If-Modified-Since": "Sun, 06 Nov 2094 08:49:37 GMT"}),
]


def no_routing(monkeypatch):
    """From here on, a request that reaches bottle's routing fails the test."""

    def fail(*args, **kwargs):
        raise AssertionError("routed again")

    monkeypatch.setattr(server.bottle.Bottle, "_handle", fail)


def answer(app, path, method, headers):
    resp = raw(app, path, method, **headers)
    return resp.status, sorted(resp.headerlist), resp.body


@pytest.mark.parametrize("path", REMEMBERED_PATHS)
@pytest.mark.parametrize("when", ["fresh", "dated"])
def test_a_repeat_is_answered_from_memory_exactly_as_bottle_answered(
    big_data_dir, app, path, when, monkeypatch
):
    if when == "dated":  # Last-Modified is sent, and If-Modified-Since is honoured
        real_time = answers.time.time
        monkeypatch.setattr(answers.time, "time", lambda: real_time() + 3600)
    first = {
        (method, tuple(headers.items())): answer(app, path, method, headers)
        for method, headers in VARIANTS
    }
    no_routing(monkeypatch)
    for (method, headers), expected in first.items():
        assert answer(app, path, method, dict(headers)) == expected, (method, headers)


def test_a_variant_not_seen_yet_is_routed_then_remembered(big_data_dir, app, monkeypatch):
    path = API + "/builds?project=big"
    raw(app, path)
    routed = []
    handle = server.bottle.Bottle._handle
    monkeypatch.setattr(
        server.bottle.Bottle,
        "_handle",
        lambda self, environ: routed.append(1) or handle(self, environ),
    )
    gzipped = raw(app, path, Accept_Encoding="gzip")
    assert gzipped.headers["Content-Encoding"] == "gzip" and routed == [1]
    assert raw(app, path, Accept_Encoding="gzip").body == gzipped.body and routed == [1]


def test_a_remembered_answer_never_outlives_its_data(data_dir, client, store):
    path = API + "/builds/latest?project=beta"
    assert client.get(path).json["buildNumber"] == 10
    assert client.get(path).json["buildNumber"] == 10
    in_flight = store.snapshot()  # as a slow request would: the old data stays in memory
    write_file(data_dir / "beta.json", make_project([make_build(10, "2.0"), make_build(11, "2.0")]))
    assert client.get(path).json["buildNumber"] == 11
    os.remove(data_dir / "beta.json")
    client.get(path, status=404)
    assert in_flight.project("beta")


def test_errors_and_redirects_are_routed_every_time(client, app, monkeypatch):
    for path in (
        API + "/builds?project=nope",
        API + "/builds",
        API + "/jd?project=alpha",
        "/downloads/latest?project=alpha",
        "/healthz",
        API + "/openapi.json",
    ):
        client.get(path, expect_errors=True)
        assert not recalled(app, path)


def test_a_malformed_request_is_refused_even_when_its_target_is_remembered(app):
    client = webtest.TestApp(app)
    client.get(API + "/projects")
    refused = webtest.TestApp(app, extra_environ={contract.MALFORMED: "no Host"})
    assert refused.get(API + "/projects", status=400).json["code"] == "malformed_request"


def test_remembered_targets_are_bounded(app, monkeypatch):
    monkeypatch.setattr(representation, "REMEMBERED_TARGETS", 50)
    client = webtest.TestApp(app)
    targets = [API + f"/builds/latest?project=alpha&n={i}" for i in range(120)]
    for target in targets:  # unknown parameters are ignored: each is another target
        client.get(target)
    assert 0 < sum(bool(recalled(app, target)) for target in targets) <= 50
    long_query = API + "/builds/latest?project=alpha&n=" + "9" * 2000
    client.get(long_query)
    client.get(targets[0])
    assert recalled(app, targets[0]) and not recalled(app, long_query)


def test_only_what_the_cache_holds_is_remembered(data_dir, store):
    app = server.make_app(store, cache_mb=0)
    client = webtest.TestApp(app)
    client.get(API + "/projects")
    client.get(API + "/projects")
    assert not recalled(app, API + "/projects")


def test_letting_a_representation_go_forgets_every_answer():
    cache = representation.RepresentationCache(max_bytes=2500)
    data = [store_module.Snapshot({}) for _ in range(3)]
    made = [
        cache.get(d, "v", lambda: representation.Representation.of(b"x" * 1000, 0.0))
        for d in data[:2]
    ]
    variant = representation.Variant(False, False, False)
    cache.remember(("GET", "/a", ""), data[0], made[0], variant, "200 OK", [])
    assert cache.recall(("GET", "/a", ""), lambda: data[0]) == (made[0], {variant: ("200 OK", ())})
    assert cache.recall(("GET", "/a", ""), lambda: data[1]) is None  # another version
    cache.get(data[2], "v", lambda: representation.Representation.of(b"y" * 1000, 0.0))
    assert cache.recall(("GET", "/a", ""), lambda: data[0]) is None  # data[0]'s went


# --- CORS, HEAD, nosniff ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, status",
    [
        (API + "/projects", 200),
        (API + "/jd?project=alpha", 302),
        (API + "/builds", 400),
        ("/nope", 404),
        ("/api/v1", 410),
        ("/healthz", 200),
    ],
)
def test_every_response_allows_any_origin_and_forbids_sniffing(client, path, status):
    resp = client.get(path, status=status)
    assert resp.headers["Access-Control-Allow-Origin"] == "*"
    assert resp.headers["X-Content-Type-Options"] == "nosniff"


def test_405_and_500_carry_the_common_headers_too(client):
    resp = client.request(API + "/projects", method="DELETE", status=405)
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    assert resp.headers["Access-Control-Allow-Origin"] == "*"


@pytest.mark.parametrize(
    "path",
    [
        API + "/projects",
        API + "/builds",
        API + "/builds/all",
        API + "/builds/latest",
        API + "/jd",
        "/healthz",
    ],
)
def test_cors_preflight(client, path):
    resp = client.options(
        path,
        headers={
            "Origin": "https://downloads.example.org",
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "if-none-match",
        },
        status=204,
    )
    assert resp.body == b""
    assert resp.headers["Access-Control-Allow-Origin"] == "*"
    assert resp.headers["Access-Control-Allow-Methods"] == "GET, HEAD, OPTIONS"
    assert "If-None-Match" in resp.headers["Access-Control-Allow-Headers"]
    assert resp.headers["Access-Control-Max-Age"] == "86400"


def test_every_get_route_answers_a_preflight(app, client):
    rules = {route.rule for route in app.router.routes if route.method == "GET"}
    assert "/projects/<slug>" in rules and "/downloads/<project>/<build>/<sha256>/<file>" in rules
    for rule in rules:
        path = re.sub(r"<[^>]*>", "x", rule)
        assert client.options(path, expect_errors=True).status_int == 204, rule


def test_options_on_an_unknown_path_is_404(client):
    client.options("/nope", status=404)


@pytest.mark.parametrize(
    "path", JSON_PATHS + [API + "/jd?project=alpha", API + "/builds", "/healthz", "/api/v1/x"]
)
@pytest.mark.parametrize("accept", ["gzip", "identity"])
def test_head_has_the_same_headers_as_get(big_data_dir, app, path, accept):
    path = path.replace("project=alpha", "project=big")
    get = raw(app, path, Accept_Encoding=accept)
    head = raw(app, path, "HEAD", Accept_Encoding=accept)
    assert head.status_int == get.status_int and head.body == b""
    assert sorted(head.headers.items()) == sorted(get.headers.items())


# --- /healthz --------------------------------------------------------------------------------


def test_health_is_ok_when_every_file_is_served_as_it_is(client):
    resp = client.get("/healthz")
    assert resp.json["status"] == "ok" and resp.json["projects"] == 2
    assert resp.json["rejectedFiles"] == resp.json["unavailableFiles"] == []


def test_health_is_degraded_while_a_file_is_rejected_and_ok_once_fixed(data_dir, client):
    write_file(data_dir / "broken.json", '{"ciJob": ')
    resp = client.get("/healthz")
    assert resp.status_int == 200
    assert resp.json["status"] == "degraded" and resp.json["projects"] == 2
    assert resp.json["rejectedFiles"] == [
        {
            "file": "broken.json",
            "error": "line 1, column 11: Expecting value",
            "errors": ["line 1, column 11: Expecting value"],
        }
    ]
    assert resp.json["lastReload"].endswith("Z") and len(resp.json["lastReload"]) == 20
    os.unlink(data_dir / "broken.json")
    assert client.get("/healthz").json["status"] == "ok"


def test_health_is_503_with_the_same_body_when_nothing_is_served(tmp_path):
    write_file(tmp_path / "broken.json", "[]")
    client = webtest.TestApp(server.make_app(store_module.Store(tmp_path, check_interval=0)))
    resp = client.get("/healthz", status=503)
    assert resp.content_type == "application/json"
    assert resp.json["status"] == "no_data" and resp.json["projects"] == 0
    assert resp.json["rejectedFiles"] == [
        {
            "file": "broken.json",
            "error": "the file must hold a JSON object",
            "errors": ["the file must hold a JSON object"],
        }
    ]


def test_health_names_a_vanished_directory(data_dir, client):
    data_dir.rename(data_dir.with_name("elsewhere"))
    resp = client.get("/healthz")
    assert resp.json["projects"] == 2
    assert resp.json["rejectedFiles"] == [
        {"file": ".", "error": os.strerror(2), "errors": [os.strerror(2)]}
    ]


def test_health_says_stalled_while_a_read_hangs_and_ok_after(data_dir, monkeypatch):
    store = store_module.Store(data_dir, read_wait=0.05)
    client = webtest.TestApp(server.make_app(store))
    release = hang_reads_of("alpha.json", monkeypatch)
    write_file(data_dir / "alpha.json", make_project([make_build(40)]))
    store.refresh()
    release.wait(0.1)  # longer than read_wait: the read now counts as stalled
    health = client.get("/healthz").json
    assert health["status"] == "stalled" and health["projects"] == 2
    assert [read["file"] for read in health["stalledReads"]] == ["alpha.json"]
    assert health["stalledReads"][0]["seconds"] >= 0.05
    assert client.get(API + "/builds/latest?project=beta").json["buildNumber"] == 10
    release.set()
    latest_alpha = API + "/builds/latest?project=alpha"
    for _ in range(100):  # the hung read ends, and a check after that takes its result
        store.refresh()
        if client.get(latest_alpha).json["buildNumber"] == 40:
            break
        threading.Event().wait(0.05)
    health = client.get("/healthz").json
    assert health["status"] == "ok" and health["stalledReads"] == []
    assert client.get(latest_alpha).json["buildNumber"] == 40
