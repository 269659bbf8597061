"""The downloads counted, as the API serves them: /api/v2/downloads and /api/v2/downloads/stats,
field by field, in the spec's shapes and the upstream's, every bad value refused, and
answers that follow the counts and the data."""

import calendar
import time

import jsonschema
import pytest
import referencing
import referencing.jsonschema

from buildshelf import server
from buildshelf.counts import Counter, Tally
from buildshelf.web import openapi, shapes
from helpers import (
    ALPHA_BUILDS,
    FakeCounter,
    make_build,
    make_project,
    refreshing_client,
    write_file,
)

# Requests are made at NOW: 2026-11-26 12:00:00.250 UTC.
NOW = calendar.timegm((2026, 11, 26, 12, 0, 0)) + 0.25
TODAY, YESTERDAY, LONG_AGO = "2026-11-26", "2026-11-25", "2026-01-01"  # LONG_AGO: 329 days
STARTED = "2025-12-01"  # as the counter says, whatever the rows


def url(number):
    """A build's downloadUrl, as tests/helpers.py makes it (for beta's too)."""
    return f"https://ci.example.org/job/Alpha/{number}/artifact/alpha-{number}.jar"


# alpha's builds (tests/helpers.py): 1, 3 (1.20), 5 (1.21) stable; 2 (1.20), 7 (1.21) and
# 8 (1.21.1-pre1) experimental. beta: 10 (2.0).
ROWS = {
    ("alpha", 1, url(1), TODAY): 2,
    ("alpha", 1, "ab" * 32, LONG_AGO): 3,  # build 1's earlier file: its history stays
    ("alpha", 2, url(2), YESTERDAY): 4,
    ("alpha", 5, url(5), YESTERDAY): 5,
    ("alpha", 5, url(5), TODAY): 1,
    ("alpha", 8, url(8), TODAY): 7,
    ("alpha", 4, url(4), TODAY): 100,  # no build 4 is served: never counted in
    ("beta", 10, url(10), LONG_AGO): 6,
    ("gamma", 1, "x", TODAY): 50,  # no such project
}
UPSTREAM_PROJECT_KEYS = [
    "project", "ciJob", "channel", "date", "includeExperimental", "totalDownloads",
    "totalBuilds", "downloadableBuilds", "latestDownloadUrl", "latestBuildNumber", "cached",
    "jenkinsDown",
]  # fmt: skip
UPSTREAM_STATS_KEYS = [
    "project", "channel", "includeExperimental", "days", "generatedAt", "totalDownloads",
    "dailyDownloads", "downloadsByMinecraftVersion", "trackingStartedDay",
    "backfilledDownloads", "trackedBuilds", "trackedUrls", "cached", "jenkinsDown",
]  # fmt: skip


@pytest.fixture
def now(monkeypatch):
    """The clock, at NOW unless a test moves it."""
    clock = [NOW]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    return clock


@pytest.fixture
def counter():
    return FakeCounter(Tally(ROWS, STARTED))


def client_of(store, **app_options):
    return refreshing_client(server.make_app(store, **app_options), store)


@pytest.fixture
def counted(store, counter, now):
    return client_of(store, counter=counter)


@pytest.fixture
def upstream(store, counter, now):
    return client_of(store, counter=counter, compat="upstream")


def project_entry(slug="alpha", **fields):
    """A /downloads project entry: alpha's stable builds, counted ever, unless told."""
    entry = {
        "project": slug,
        "ciJob": {"alpha": "Alpha", "beta": "Beta"}[slug],
        "channel": None,
        "date": None,
        "includeExperimental": False,
        "totalDownloads": 11,
        "totalBuilds": 3,
        "downloadableBuilds": 3,
        "latestDownloadUrl": url(5),
        "latestBuildNumber": 5,
        "cached": False,
        "jenkinsDown": False,
    }
    if slug == "beta":
        entry.update(totalDownloads=6, totalBuilds=1, downloadableBuilds=1)
        entry.update(latestDownloadUrl=url(10), latestBuildNumber=10)
    entry.update(fields)
    return entry


# --- /api/v2/downloads ------------------------------------------------------------------------


def test_every_project_stable_builds_counted_ever(counted):
    resp = counted.get("/api/v2/downloads")
    assert resp.content_type == "application/json"
    assert resp.json == {
        "channel": None,
        "date": None,
        "includeExperimental": False,
        "totalDownloads": 17,
        "projects": [project_entry("alpha"), project_entry("beta")],
    }
    assert list(resp.json) == ["channel", "date", "includeExperimental", "totalDownloads",
                               "projects"]  # fmt: skip
    assert [list(entry) for entry in resp.json["projects"]] == [UPSTREAM_PROJECT_KEYS] * 2


def test_experimental_builds_count_only_when_asked(counted):
    resp = counted.get("/api/v2/downloads?experimental=TRUE")
    # alpha: 1 (5) + 2 (4) + 3 (0) + 5 (6) + 7 (0) + 8 (7)
    alpha = project_entry(includeExperimental=True, totalDownloads=22, totalBuilds=6,
                          downloadableBuilds=6, latestDownloadUrl=url(8), latestBuildNumber=8)  # fmt: skip
    assert resp.json == {
        "channel": None,
        "date": None,
        "includeExperimental": True,
        "totalDownloads": 28,
        "projects": [alpha, project_entry("beta", includeExperimental=True)],
    }
    assert counted.get("/api/v2/downloads?experimental=yes").json["totalDownloads"] == 17


@pytest.mark.parametrize(
    "date, alpha, beta",
    [
        ("261126", 3, 0),  # today: builds 1 (2) and 5 (1)
        ("251126", 5, 0),  # yesterday: build 5; build 2 is experimental
        ("010126", 3, 6),  # build 1's earlier file, and beta's
        ("020126", 0, 0),
    ],
)
def test_a_date_restricts_the_counts_to_that_utc_day(counted, date, alpha, beta):
    resp = counted.get(f"/api/v2/downloads?date={date}")
    assert resp.json == {
        "channel": None,
        "date": date,
        "includeExperimental": False,
        "totalDownloads": alpha + beta,
        "projects": [
            project_entry("alpha", date=date, totalDownloads=alpha),
            project_entry("beta", date=date, totalDownloads=beta),
        ],
    }


def test_a_date_with_experimental_builds(counted):
    resp = counted.get("/api/v2/downloads?date=251126&experimental=true&project=alpha")
    assert resp.json["totalDownloads"] == 9  # builds 2 (4) and 5 (5)


def test_one_project_in_any_letter_case(counted):
    resp = counted.get("/api/v2/downloads?project=ALPHA")
    assert resp.json == {
        "channel": None,
        "date": None,
        "includeExperimental": False,
        "totalDownloads": 11,
        "projects": [project_entry("alpha")],
    }


def test_an_empty_project_is_every_project(counted):
    assert counted.get("/api/v2/downloads?project=").json == counted.get("/api/v2/downloads").json


def test_a_channel_filters_and_a_project_without_its_builds_has_none(counted):
    resp = counted.get("/api/v2/downloads?channel=1.21")
    assert resp.json == {
        "channel": "1.21",
        "date": None,
        "includeExperimental": False,
        "totalDownloads": 6,
        "projects": [
            project_entry("alpha", channel="1.21", totalDownloads=6, totalBuilds=1,
                          downloadableBuilds=1),
            project_entry("beta", channel="1.21", totalDownloads=0, totalBuilds=0,
                          downloadableBuilds=0, latestDownloadUrl=None, latestBuildNumber=None),
        ],
    }  # fmt: skip


def test_the_same_answer_in_the_upstream_mode(counted, upstream):
    for target in ("/api/v2/downloads", "/api/v2/downloads?project=beta&date=010126"):
        assert upstream.get(target).body == counted.get(target).body


def test_a_kept_file_counts_and_is_named_by_its_public_url(data_dir, store, now):
    sha = "cd" * 32
    kept = make_build(3, "1.20", sha256=sha, size=9, file="alpha-3.jar")
    del kept["downloadUrl"]
    write_file(data_dir / "alpha.json", make_project([make_build(1, "1.20"), kept]))
    counter = FakeCounter(Tally({("alpha", 3, sha, TODAY): 4, ("alpha", 1, url(1), TODAY): 1},
                                TODAY))  # fmt: skip
    client = client_of(store, counter=counter, public_url="https://builds.example.org")
    entry = client.get("/api/v2/downloads?project=alpha").json["projects"][0]
    assert entry["totalDownloads"] == 5
    assert (
        entry["latestDownloadUrl"]
        == f"https://builds.example.org/downloads/alpha/3/{sha}/alpha-3.jar"
    )


# --- /api/v2/downloads/stats ------------------------------------------------------------------


def days_back(count, end=TODAY):
    """The `count` days ending with `end`, oldest first."""
    last = calendar.timegm(time.strptime(end, "%Y-%m-%d"))
    return [time.strftime("%Y-%m-%d", time.gmtime(last - back * 86400))
            for back in range(count - 1, -1, -1)]  # fmt: skip


def series(count, counted_days, end=TODAY):
    return [{"day": day, "downloads": counted_days.get(day, 0)} for day in days_back(count, end)]


def test_stats_of_a_project_field_by_field(counted):
    resp = counted.get("/api/v2/downloads/stats?project=alpha")
    assert resp.json == {
        "project": "alpha",
        "channel": None,
        "includeExperimental": False,
        "days": 90,
        "generatedAt": "2026-11-26T12:00:00.250Z",
        "totalDownloads": 11,
        "dailyDownloads": series(90, {TODAY: 3, YESTERDAY: 5}),
        "downloadsByMinecraftVersion": [
            {"version": "1.21", "downloads": 6, "buildCount": 1},
            {"version": "1.20", "downloads": 5, "buildCount": 2},
        ],
        "trackingStartedDay": STARTED,
        "backfilledDownloads": 0,
        "trackedBuilds": 3,
        "trackedUrls": 3,
        "cached": False,
        "jenkinsDown": False,
        "downloadsByBuild": [
            {"buildNumber": 1, "downloads": 5},
            {"buildNumber": 3, "downloads": 0},
            {"buildNumber": 5, "downloads": 6},
        ],
    }
    assert list(resp.json) == UPSTREAM_STATS_KEYS + ["downloadsByBuild"]
    daily = resp.json["dailyDownloads"]
    assert len(daily) == 90 and daily[0]["day"] == "2026-08-29" and daily[-1]["day"] == TODAY


def test_stats_with_experimental_builds(counted):
    resp = counted.get("/api/v2/downloads/stats?project=alpha&experimental=true")
    body = resp.json
    assert body["includeExperimental"] is True
    assert body["totalDownloads"] == 22
    assert body["dailyDownloads"] == series(90, {TODAY: 10, YESTERDAY: 9})
    assert body["downloadsByMinecraftVersion"] == [
        {"version": "1.20", "downloads": 9, "buildCount": 3},
        {"version": "1.21.1", "downloads": 7, "buildCount": 1},  # 1.21.1-pre1
        {"version": "1.21", "downloads": 6, "buildCount": 2},
    ]
    assert (body["trackedBuilds"], body["trackedUrls"]) == (6, 6)
    assert body["downloadsByBuild"] == [
        {"buildNumber": number, "downloads": downloads}
        for number, downloads in ((1, 5), (2, 4), (3, 0), (5, 6), (7, 0), (8, 7))
    ]


def test_stats_of_a_channel(counted):
    body = counted.get("/api/v2/downloads/stats?project=alpha&channel=1.20").json
    assert body["channel"] == "1.20"
    assert body["totalDownloads"] == 5
    assert body["dailyDownloads"] == series(90, {TODAY: 2})
    assert body["downloadsByMinecraftVersion"] == [
        {"version": "1.20", "downloads": 5, "buildCount": 2}
    ]
    assert body["downloadsByBuild"] == [
        {"buildNumber": 1, "downloads": 5},
        {"buildNumber": 3, "downloads": 0},
    ]


def test_stats_of_a_channel_without_builds(counted):
    body = counted.get("/api/v2/downloads/stats?project=beta&channel=9.9").json
    assert body["totalDownloads"] == 0
    assert body["dailyDownloads"] == series(90, {})
    assert body["downloadsByMinecraftVersion"] == []
    assert (body["trackedBuilds"], body["trackedUrls"], body["downloadsByBuild"]) == (0, 0, [])


@pytest.mark.parametrize(
    "given, days",
    [("", 90), ("7", 7), ("30", 30), ("730", 730), ("0", 7), ("6", 7), ("731", 730),
     ("99999", 730), ("0090", 90)],
)  # fmt: skip
def test_days_are_clamped_into_7_to_730(counted, given, days):
    body = counted.get(f"/api/v2/downloads/stats?project=beta&days={given}").json
    assert body["days"] == days
    assert [entry["day"] for entry in body["dailyDownloads"]] == days_back(days)


def test_the_series_holds_older_days_when_asked(counted):
    body = counted.get("/api/v2/downloads/stats?project=beta&days=400").json
    assert body["dailyDownloads"] == series(400, {LONG_AGO: 6})
    assert counted.get("/api/v2/downloads/stats?project=beta&days=329").json[
        "dailyDownloads"
    ] == series(329, {})  # LONG_AGO is the 330th day back


def test_tracking_started_is_the_counters_and_null_before_any_count(store, now):
    client = client_of(store, counter=FakeCounter(Tally({}, None)))
    body = client.get("/api/v2/downloads/stats?project=alpha").json
    assert body["trackingStartedDay"] is None
    assert body["totalDownloads"] == 0 and body["dailyDownloads"] == series(90, {})
    assert client.get("/api/v2/downloads").json["totalDownloads"] == 0


@pytest.mark.parametrize(
    "channel, version",
    [("1.21.4", "1.21.4"), ("1.21", "1.21"), ("1.21.4-pre1", "1.21.4"), ("1.0.0+71", "1.0.0"),
     ("1.21.4.5", "1.21.4"), ("v2.0", "2.0"), ("26.1-snapshot-3", "26.1"), ("mc1.8.9x", "1.8.9"),
     ("snapshot", "Unknown"), ("21", "Unknown"), ("1.", "Unknown")],
)  # fmt: skip
def test_the_game_version_of_a_channel(channel, version):
    assert shapes.game_version(channel) == version


def test_versions_tied_come_newest_build_first(data_dir, store, now):
    builds = [make_build(1, "1.0"), make_build(2, "snapshot"), make_build(3, "2.0")]
    write_file(data_dir / "gamma.json", make_project(builds))
    client = client_of(store, counter=FakeCounter(Tally({("gamma", 1, "x", TODAY): 2}, TODAY)))
    body = client.get("/api/v2/downloads/stats?project=gamma").json
    assert body["downloadsByMinecraftVersion"] == [
        {"version": "1.0", "downloads": 2, "buildCount": 1},
        {"version": "2.0", "downloads": 0, "buildCount": 1},
        {"version": "Unknown", "downloads": 0, "buildCount": 1},
    ]


def test_builds_sharing_a_url_are_one_tracked_url(data_dir, store, now):
    shared = "https://cdn.example.org/same.jar"
    builds = [make_build(1, "1.0", downloadUrl=shared), make_build(2, "1.0", downloadUrl=shared)]
    write_file(data_dir / "gamma.json", make_project(builds))
    client = client_of(store, counter=FakeCounter(Tally({}, None)))
    body = client.get("/api/v2/downloads/stats?project=gamma").json
    assert (body["trackedBuilds"], body["trackedUrls"]) == (2, 1)


def test_stats_in_the_upstream_mode_have_its_fields_in_its_order(counted, upstream):
    spec = counted.get("/api/v2/downloads/stats?project=alpha&experimental=true").json
    resp = upstream.get("/api/v2/downloads/stats?project=alpha&experimental=true")
    assert list(resp.json) == UPSTREAM_STATS_KEYS
    del spec["downloadsByBuild"]
    assert resp.json == spec


@pytest.mark.parametrize("mode, extra", [(None, ["downloadsByBuild"]), ("upstream", [])])
def test_the_document_of_each_mode_is_its_answers(store, counter, now, mode, extra):
    document = openapi.document(mode)
    schemas = document["components"]["schemas"]
    assert list(schemas["DownloadStats"]["properties"]) == UPSTREAM_STATS_KEYS + extra
    assert schemas["DownloadStats"]["required"] == UPSTREAM_STATS_KEYS + extra
    assert list(schemas["ProjectDownloads"]["properties"]) == UPSTREAM_PROJECT_KEYS
    registry = referencing.Registry().with_resource(
        "urn:doc", referencing.jsonschema.DRAFT202012.create_resource(document)
    )
    client = client_of(store, counter=counter, compat=mode)
    for target, schema in (
        ("/api/v2/downloads/stats?project=alpha&experimental=true", "DownloadStats"),
        ("/api/v2/downloads?channel=1.21", "Downloads"),
    ):
        validator = jsonschema.Draft202012Validator(
            {"$ref": f"urn:doc#/components/schemas/{schema}"}, registry=registry
        )
        validator.validate(client.get(target).json)
        with pytest.raises(jsonschema.ValidationError):  # and nothing else
            validator.validate({**client.get(target).json, "error": "Internal server error"})


# --- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "date",
    ["311126", "310426", "300226", "290225", "001126", "261326", "260026", "2611", "2611260",
     "26112026", "abcdef", "26-11-", "+26112", "２６１１２６", "26.5.6"],
)  # fmt: skip
def test_a_date_not_ddmmyy_is_refused(counted, date):
    resp = counted.get("/api/v2/downloads", params={"date": date}, status=400)
    assert resp.json["code"] == "invalid_date"
    assert repr(date) in resp.json["error"] and "DDMMYY" in resp.json["error"]
    assert resp.headers["Cache-Control"] == "no-store"


def test_a_leap_day_is_a_day(counted):
    assert counted.get("/api/v2/downloads?date=290224").json["date"] == "290224"


@pytest.mark.parametrize("days", ["x", "-5", "1.5", "1e3", "7 ", "٣٠", "9" * 31, "0x10"])
def test_days_not_a_whole_number_are_refused(counted, days):
    resp = counted.get("/api/v2/downloads/stats", params={"project": "alpha", "days": days},
                       status=400)  # fmt: skip
    assert resp.json["code"] == "invalid_days"


@pytest.mark.parametrize(
    "target, status, code",
    [
        ("/api/v2/downloads?project=nope", 404, "unknown_project"),
        ("/api/v2/downloads/stats?project=nope", 404, "unknown_project"),
        ("/api/v2/downloads/stats", 400, "missing_parameter"),
        ("/api/v2/downloads/stats?project=", 400, "missing_parameter"),
        ("/api/v2/downloads?project=alpha&project=beta", 400, "repeated_parameter"),
        ("/api/v2/downloads?date=261126&date=251126", 400, "repeated_parameter"),
        ("/api/v2/downloads?channel=1.20&channel=1.21", 400, "repeated_parameter"),
        ("/api/v2/downloads/stats?project=alpha&days=7&days=8", 400, "repeated_parameter"),
        ("/api/v2/downloads/stats?project=alpha&experimental=true&experimental=true", 400,
         "repeated_parameter"),
        ("/api/v2/downloads?game_version=1.21", 400, "superseded_parameter"),
        ("/api/v2/downloads/stats?project=alpha&version=1.21", 400, "superseded_parameter"),
        ("/api/v2/downloads?x=%00", 400, "invalid_query"),
        ("/api/v2/downloads/stats?project=alpha%FF", 400, "invalid_query"),
    ],
)  # fmt: skip
def test_the_apis_usual_refusals(counted, target, status, code):
    resp = counted.get(target, status=status)
    assert resp.json["code"] == code
    assert resp.headers["Cache-Control"] == "no-store"


@pytest.mark.parametrize(
    "target",
    [
        "/api/v2/downloads",
        "/api/v2/downloads?project=alpha&date=261126",
        "/api/v2/downloads?project=nope",  # counting off is the answer, whatever the project
        "/api/v2/downloads/stats?project=alpha",
        "/api/v2/downloads/stats?project=nope&days=30",
    ],
)
def test_counting_off_answers_404_downloads_not_counted(store, target):
    resp = client_of(store).get(target, status=404)
    assert resp.json == {
        "error": "this server does not count downloads (it runs with --count-downloads off)",
        "code": "downloads_not_counted",
    }
    assert resp.headers["Cache-Control"] == "no-store"


def test_bad_values_are_refused_before_counting_off_is_said(store):
    client = client_of(store)
    assert client.get("/api/v2/downloads?date=x", status=400).json["code"] == "invalid_date"
    resp = client.get("/api/v2/downloads/stats?project=alpha&days=x", status=400)
    assert resp.json["code"] == "invalid_days"
    resp = client.get("/api/v2/downloads/stats?days=30", status=400)
    assert resp.json["code"] == "missing_parameter"
    resp = client.get("/api/v2/downloads?channel=1&channel=2", status=400)
    assert resp.json["code"] == "repeated_parameter"


# --- caching: fresh counts, fresh data, a new day ---------------------------------------------


def test_answers_are_cacheable_for_10_seconds_at_most(store, counter, now):
    for max_age, expected in ((60, 10), (5, 5)):
        client = client_of(store, counter=counter, max_age=max_age)
        for target in ("/api/v2/downloads", "/api/v2/downloads/stats?project=alpha"):
            resp = client.get(target)
            assert resp.headers["Cache-Control"] == f"public, max-age={expected}"
            again = client.get(target, headers={"If-None-Match": resp.headers["ETag"]}, status=304)
            assert again.body == b""


def test_the_same_counts_give_the_same_body(counted, now):
    first = counted.get("/api/v2/downloads/stats?project=alpha")
    now[0] += 5
    second = counted.get("/api/v2/downloads/stats?project=alpha")
    assert second.body == first.body  # made once: generatedAt is when
    assert second.json["generatedAt"] == "2026-11-26T12:00:00.250Z"


def test_new_counts_are_served_at_once(counted, counter, now):
    assert counted.get("/api/v2/downloads?project=beta").json["totalDownloads"] == 6
    stats = counted.get("/api/v2/downloads/stats?project=beta")
    counter.current = Tally({**ROWS, ("beta", 10, url(10), TODAY): 2}, STARTED)
    now[0] += 10
    assert counted.get("/api/v2/downloads?project=beta").json["totalDownloads"] == 8
    body = counted.get("/api/v2/downloads/stats?project=beta").json
    assert body["totalDownloads"] == 8
    assert body["dailyDownloads"][-1] == {"day": TODAY, "downloads": 2}
    assert body["generatedAt"] == "2026-11-26T12:00:10.250Z" != stats.json["generatedAt"]


def test_new_data_is_served_at_once(counted, data_dir):
    assert counted.get("/api/v2/downloads?project=beta").json["totalDownloads"] == 6
    write_file(
        data_dir / "beta.json",
        make_project([make_build(10, "2.0"), make_build(11, "2.0")], ciJob="Beta",
                     ciJobUrl="https://ci.example.org/job/Beta/"),
    )  # fmt: skip
    entry = counted.get("/api/v2/downloads?project=beta").json["projects"][0]
    assert (entry["totalBuilds"], entry["latestBuildNumber"]) == (2, 11)
    assert counted.get("/api/v2/downloads/stats?project=beta").json["trackedBuilds"] == 2


def test_a_yanked_build_counts_no_more(counted, data_dir):
    assert counted.get("/api/v2/downloads?project=alpha").json["totalDownloads"] == 11
    yanked = [*ALPHA_BUILDS[:3], make_build(5, "1.21", yankedAt=1700000500000), *ALPHA_BUILDS[4:]]
    write_file(data_dir / "alpha.json", make_project(yanked))
    assert counted.get("/api/v2/downloads?project=alpha").json["totalDownloads"] == 5


def test_the_rows_are_summed_once_per_selection_and_counts(counted, counter, monkeypatch):
    made = []
    real = shapes.Shapes.selection_counts
    monkeypatch.setattr(
        shapes.Shapes, "selection_counts", lambda *args: made.append(args[1].slug) or real(*args)
    )
    for days in (7, 30, 90, 730):  # any days a client asks: the rows read once
        counted.get(f"/api/v2/downloads/stats?project=alpha&days={days}")
    assert made == ["alpha"]
    # Two more selections: one channel's builds, and none.
    counted.get("/api/v2/downloads/stats?project=alpha&channel=1.21")
    counted.get("/api/v2/downloads/stats?project=alpha&channel=9.9")
    assert made == ["alpha"] * 3
    counter.current = Tally(dict(ROWS), STARTED)  # the next batch
    counted.get("/api/v2/downloads/stats?project=alpha&days=7")
    assert made == ["alpha"] * 4


def test_a_new_day_ends_the_series(counted, now):
    assert counted.get("/api/v2/downloads/stats?project=alpha").json["dailyDownloads"][-1] == {
        "day": TODAY,
        "downloads": 3,
    }
    now[0] += 12 * 3600  # midnight, UTC
    daily = counted.get("/api/v2/downloads/stats?project=alpha").json["dailyDownloads"]
    assert daily == series(90, {TODAY: 3, YESTERDAY: 5}, end="2026-11-27")


def test_a_real_counter_is_read_after_its_batch(store, tmp_path, now):
    counter = Counter(str(tmp_path / "state"), clock=lambda: now[0])
    client = client_of(store, counter=counter)
    counter.flush()  # as start() does: the tally of what the database holds (nothing)
    assert client.get("/api/v2/downloads?project=alpha").json["totalDownloads"] == 0
    for address in ("203.0.113.9", "203.0.113.10", "2001:db8::1"):  # two networks
        counter.count("alpha", 5, url(5), address)
    counter.count("alpha", 2, url(2), "203.0.113.9")  # experimental
    assert client.get("/api/v2/downloads?project=alpha").json["totalDownloads"] == 0
    counter.flush()  # the batch: the routes see it at once
    try:
        assert client.get("/api/v2/downloads?project=alpha").json["totalDownloads"] == 2
        body = client.get("/api/v2/downloads/stats?project=alpha&experimental=true").json
        assert body["totalDownloads"] == 3
        assert body["dailyDownloads"][-1] == {"day": TODAY, "downloads": 3}
        assert body["trackingStartedDay"] == TODAY
    finally:
        counter.stop()


def test_head_and_the_cors_preflight(counted):
    for target in ("/api/v2/downloads?project=alpha", "/api/v2/downloads/stats?project=alpha"):
        get = counted.get(target)
        head = counted.head(target)
        assert head.body == b"" and head.headers["Content-Length"] == get.headers["Content-Length"]
        preflight = counted.options(target, status=204)
        assert preflight.headers["Access-Control-Allow-Methods"] == "GET, HEAD, OPTIONS"
