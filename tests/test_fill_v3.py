"""The Fill v3 read API (`/v3`, docs/fill-v3.md), over a data directory whose every build,
version and family the mapping places: each endpoint's answer whole, in Fill's field order;
the answers decoded with the two clients' models (fill_clients.py) and compared key by key
with mc-image-helper's recorded answers (tests/fill_v3/); mc-image-helper's choice of the
latest version; yanked builds never listed; the defaults; the errors, in Fill's shape; the
caching the v2 reads have; and run-task's flow against a real server (system)."""

import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import urllib.request
from email.utils import formatdate

import msgspec
import pytest
import webob

from buildshelf import server
from buildshelf import store as store_module
from buildshelf.model import LAST_MILLISECOND
from buildshelf.web import fill_mapping
from fill_clients import (
    MC_IMAGE_HELPER,
    RUN_TASK,
    MihBuildResponse,
    MihChannel,
    MihProjectResponse,
    MihVersionResponse,
    RtBuildResponse,
)
from helpers import (
    ROOT,
    make_build,
    make_project,
    real_server,
    recalled,
    refreshing_client,
    write_file,
)

FIXTURES = os.path.join(ROOT, "tests", "fill_v3")
PUBLIC_URL = "https://builds.example.org/bs"
KEPT_BYTES = b"the kept jar of build 8\n"
KEPT_SHA = hashlib.sha256(KEPT_BYTES).hexdigest()
OTHER_SHA = "4c7b68ce5c0be31b0767eb687d1cbee97723d7b74c7b68ce5c0be31b0767eb68"
DAY = 86_400_000


def at(days, millis=0):
    """A timestamp `days` days after 2024-01-01T00:00:00Z, in epoch milliseconds."""
    return 1704067200000 + days * DAY + millis


# Build numbers, versions and first appearances chosen so that no order is another's by
# accident: versions come newest first by their first build's time, not by number or name.
ALPHA = [
    make_build(1, "1.20.4", timestamp=at(0)),
    make_build(2, "1.20.4", timestamp=at(1, 123)),
    make_build(3, "1.21", timestamp=at(10), commit_count=2),
    make_build(4, "1.21", experimental=True, timestamp=at(11)),
    make_build(5, "1.21.1-pre1", experimental=True, timestamp=at(30)),
    make_build(6, "1.20.4", timestamp=at(40)),  # a late build of the oldest version
    make_build(7, "1.21", timestamp=at(41), yankedAt=at(42), yankReason="broken"),
    make_build(9, "24w14a", experimental=True, timestamp=at(15)),
    make_build(10, "1.21.1-pre1", experimental=True, timestamp=at(45), sha256=OTHER_SHA, size=7),
    make_build(11, "gone", timestamp=at(46), yankedAt=at(47)),  # its only build is yanked
    make_build(12, "combat-test-8", timestamp=at(16), commit_count=0),
    {
        **make_build(8, "1.21", timestamp=at(44, 500)),
        "sha256": KEPT_SHA,
        "size": len(KEPT_BYTES),
        "file": "alpha-8.jar",
    },
]
del ALPHA[-1]["downloadUrl"]
ALPHA_VERSIONS = {
    "1.20.4": {
        "support": "DEPRECATED",
        "supportEnd": "2024-12-31",
        "java": 17,
        "javaFlags": ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=200"],
    },
    "1.21": {"java": 22},
    "1.21.1-pre1": {"experimentalChannel": "BETA"},
    "24w14a": {"family": "snapshots", "support": "UNSUPPORTED"},
    "never-built": {"family": "x"},  # no build: not listed
}


@pytest.fixture
def fill_dir(tmp_path):
    directory = tmp_path / "data"
    directory.mkdir()
    write_file(directory / "alpha.json", make_project(ALPHA, versions=ALPHA_VERSIONS))
    write_file(
        directory / "beta.json",
        make_project(
            [make_build(1, "2.0", timestamp=at(5))], ciJob="Beta Server", javadocBaseUrl=""
        ),
    )
    objects = directory / "artifacts" / KEPT_SHA[:2]
    objects.mkdir(parents=True)
    (objects / KEPT_SHA).write_bytes(KEPT_BYTES)
    return directory


def serving(directory, **settings):
    """The app over `directory`'s data, and a client that reads the files before each
    request (as the watcher would have by then)."""
    store = store_module.Store(directory, check_interval=0)
    app = server.make_app(store, public_url=PUBLIC_URL, **settings)
    return app, refreshing_client(app, store)


@pytest.fixture
def fill_app_and_client(fill_dir):
    return serving(fill_dir)


@pytest.fixture
def fill_app(fill_app_and_client):
    return fill_app_and_client[0]


@pytest.fixture
def fill(fill_app_and_client):
    return fill_app_and_client[1]


def commits(number, count, time):
    return [
        {"sha": f"{number:04x}{i:036x}", "time": time, "message": f"Change {number}.{i}"}
        for i in range(count)
    ]


def kept_url(number, sha, name):
    return f"{PUBLIC_URL}/downloads/alpha/{number}/{sha}/{name}"


BUILD_8 = {
    "id": 8,
    "time": "2024-02-14T00:00:00.500Z",
    "channel": "STABLE",
    "commits": commits(8, 1, "2024-02-14T00:00:00.500Z"),
    "downloads": {
        "server:default": {
            "name": "alpha-8.jar",
            "checksums": {"sha256": KEPT_SHA},
            "size": len(KEPT_BYTES),
            "url": kept_url(8, KEPT_SHA, "alpha-8.jar"),
        }
    },
}
BUILD_10 = {
    "id": 10,
    "time": "2024-02-15T00:00:00Z",
    "channel": "BETA",
    "commits": commits(10, 1, "2024-02-15T00:00:00Z"),
    "downloads": {
        "server:default": {
            "name": "alpha-10.jar",
            "checksums": {"sha256": OTHER_SHA},
            "size": 7,
            "url": "https://ci.example.org/job/Alpha/10/artifact/alpha-10.jar",
        }
    },
}
BUILDS = "/v3/projects/alpha/versions/1.21/builds"
DEFAULT_JAVA = {"version": {"minimum": 21}, "flags": {"recommended": []}}
VERSION_1_21 = {
    "version": {
        "id": "1.21",
        "support": {"status": "SUPPORTED"},
        "java": {"version": {"minimum": 22}, "flags": {"recommended": []}},
    },
    "builds": [8, 4, 3],
}
ALPHA_PROJECT = {
    "project": {"id": "alpha", "name": "Alpha"},
    "versions": {
        "combat-test-8": ["combat-test-8"],
        "snapshots": ["24w14a"],
        "1.21": ["1.21.1-pre1", "1.21"],
        "1.20": ["1.20.4"],
    },
}


# --- each endpoint, whole -------------------------------------------------------------------


def test_projects_lists_each_project_in_slug_order(fill):
    resp = fill.get("/v3/projects")
    assert resp.content_type == "application/json"
    assert resp.json == {
        "projects": [
            ALPHA_PROJECT,
            {"project": {"id": "beta", "name": "Beta Server"}, "versions": {"2.0": ["2.0"]}},
        ]
    }


def test_a_project_lists_its_families_and_versions_newest_first(fill):
    resp = fill.get("/v3/projects/alpha")
    assert resp.json == ALPHA_PROJECT
    assert list(resp.json["versions"]) == ["combat-test-8", "snapshots", "1.21", "1.20"]
    assert list(resp.json) == ["project", "versions"]
    assert list(resp.json["project"]) == ["id", "name"]


def test_versions_come_newest_first_by_their_first_build_with_what_the_file_says(fill):
    resp = fill.get("/v3/projects/alpha/versions")
    assert resp.json == {
        "versions": [
            {
                "version": {"id": "1.21.1-pre1", "support": {"status": "SUPPORTED"},
                            "java": DEFAULT_JAVA},
                "builds": [10, 5],
            },
            {
                "version": {"id": "combat-test-8", "support": {"status": "SUPPORTED"},
                            "java": DEFAULT_JAVA},
                "builds": [12],
            },
            {
                "version": {"id": "24w14a", "support": {"status": "UNSUPPORTED"},
                            "java": DEFAULT_JAVA},
                "builds": [9],
            },
            VERSION_1_21,
            {
                "version": {
                    "id": "1.20.4",
                    "support": {"status": "DEPRECATED", "end": "2024-12-31"},
                    "java": {"version": {"minimum": 17},
                             "flags": {"recommended": ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=200"]}},
                },
                "builds": [6, 2, 1],
            },
        ]
    }  # fmt: skip


def test_a_version_is_its_entry_of_versions_alone(fill):
    assert fill.get("/v3/projects/alpha/versions/1.21").json == VERSION_1_21


def test_builds_are_a_bare_array_newest_first_without_the_yanked(fill):
    resp = fill.get("/v3/projects/alpha/versions/1.21/builds")
    assert [build["id"] for build in resp.json] == [8, 4, 3]  # 7 is yanked
    assert resp.json[0] == BUILD_8
    assert resp.json[1]["channel"] == "ALPHA" and resp.json[2]["channel"] == "STABLE"


def test_a_build_in_fill_s_field_order(fill):
    resp = fill.get("/v3/projects/alpha/versions/1.21/builds/8")
    assert resp.json == BUILD_8
    assert list(resp.json) == ["id", "time", "channel", "commits", "downloads"]
    assert list(resp.json["commits"][0]) == ["sha", "time", "message"]
    assert list(resp.json["downloads"]["server:default"]) == ["name", "checksums", "size", "url"]


def test_a_file_kept_elsewhere_is_at_its_download_url(fill):
    assert fill.get("/v3/projects/alpha/versions/1.21.1-pre1/builds/10").json == BUILD_10


def test_latest_is_the_newest_build_of_the_version_whatever_its_channel(fill):
    latest = fill.get("/v3/projects/alpha/versions/1.21.1-pre1/builds/latest")
    assert latest.json == BUILD_10
    assert latest.body == fill.get("/v3/projects/alpha/versions/1.21.1-pre1/builds/10").body
    assert fill.get("/v3/projects/alpha/versions/1.21/builds/latest").json == BUILD_8
    # an experimental build is latest too
    assert fill.get("/v3/projects/alpha/versions/24w14a/builds/latest").json["channel"] == "ALPHA"


def test_a_build_without_a_checksum_has_no_download(fill):
    """Never a checksum invented: the clients then say there is no server download."""
    resp = fill.get("/v3/projects/alpha/versions/1.20.4/builds/latest")
    assert resp.json == {
        "id": 6,
        "time": "2024-02-10T00:00:00Z",
        "channel": "STABLE",
        "commits": commits(6, 1, "2024-02-10T00:00:00Z"),
        "downloads": {},
    }


def test_a_build_without_commits_has_an_empty_list(fill):
    assert fill.get("/v3/projects/alpha/versions/combat-test-8/builds/12").json["commits"] == []


@pytest.mark.parametrize(
    "query, numbers",
    [
        ("", [8, 4, 3]),
        ("?channel=STABLE", [8, 3]),
        ("?channel=ALPHA", [4]),
        ("?channel=BETA", []),
        ("?channel=RECOMMENDED", []),
        ("?channel=STABLE&channel=ALPHA", [8, 4, 3]),
        ("?channel=ALPHA,STABLE", [8, 4, 3]),
        ("?channel=STABLE&channel=STABLE", [8, 3]),
        ("?other=1", [8, 4, 3]),  # Fill ignores what it does not know
    ],
)
def test_builds_by_channel(fill, query, numbers):
    resp = fill.get("/v3/projects/alpha/versions/1.21/builds" + query)
    assert [build["id"] for build in resp.json] == numbers


def test_an_experimental_channel_is_what_the_versions_block_says(fill):
    resp = fill.get("/v3/projects/alpha/versions/1.21.1-pre1/builds?channel=BETA")
    assert [(build["id"], build["channel"]) for build in resp.json] == [(10, "BETA"), (5, "BETA")]


def test_yanked_builds_are_never_listed(fill):
    versions = fill.get("/v3/projects/alpha/versions").json["versions"]
    listed = [number for entry in versions for number in entry["builds"]]
    assert sorted(listed) == [1, 2, 3, 4, 5, 6, 8, 9, 10, 12]  # not 7, not 11
    assert "gone" not in [entry["version"]["id"] for entry in versions]
    assert "gone" not in json.dumps(fill.get("/v3/projects").json)
    assert 7 not in [build["id"] for build in fill.get(BUILDS).json]
    fill_error(fill, BUILDS + "/7", 404, "build_not_found")
    fill_error(fill, "/v3/projects/alpha/versions/gone", 404, "version_not_found")
    fill_error(fill, "/v3/projects/alpha/versions/gone/builds/latest", 404, "version_not_found")


def test_a_version_the_block_names_without_a_build_is_not_served(fill):
    fill_error(fill, "/v3/projects/alpha/versions/never-built", 404, "version_not_found")


def test_a_project_is_found_in_any_letter_case_as_in_v2(fill):
    assert fill.get("/v3/projects/ALPHA").json == ALPHA_PROJECT


@pytest.mark.parametrize("compat", ["upstream", None])
def test_every_compat_mode_serves_the_same_answers(fill_dir, fill, compat):
    _, other = serving(fill_dir, compat=compat)
    for path in ("/v3/projects", "/v3/projects/alpha/versions", BUILDS + "/8"):
        assert other.get(path).body == fill.get(path).body


# --- the clients' models are the judges --------------------------------------------------------

ENDPOINTS = {
    "projects": "/v3/projects",
    "project": "/v3/projects/alpha",
    "versions": "/v3/projects/alpha/versions",
    "version": "/v3/projects/alpha/versions/1.21",
    "builds": BUILDS,
    "build": BUILDS + "/8",
    "latest": BUILDS + "/latest",
    "error": "/v3/projects/nope",
}


# run-task's versions() expects a bare array, which Fill's own answer is not: it never calls it.
@pytest.mark.parametrize("endpoint", sorted(set(ENDPOINTS) - {"versions"}))
def test_every_answer_decodes_with_run_task_s_model(fill, endpoint):
    """Every field run-task requires, of its type, never null, 32-bit integers."""
    model = RUN_TASK["build" if endpoint == "latest" else endpoint]
    body = fill.get(ENDPOINTS[endpoint], expect_errors=True).body
    assert msgspec.json.decode(body, type=model) is not None


@pytest.mark.parametrize("endpoint", ["versions", "build", "latest", "error"])
def test_what_mc_image_helper_reads_decodes_and_is_there(fill, endpoint):
    """Its enums refuse any other name; what PaperDownloadsClient reads must be present."""
    model = MC_IMAGE_HELPER["build" if endpoint == "latest" else endpoint]
    resp = fill.get(ENDPOINTS[endpoint], expect_errors=True)
    assert resp.content_type == "application/json"  # toObject() accepts no other type
    decoded = msgspec.json.decode(resp.body, type=model)
    if model is MihBuildResponse:
        download = decoded.downloads["server:default"]
        assert download.url.startswith("https://") and download.name == "alpha-8.jar"
        assert decoded.channel is MihChannel.STABLE


def test_every_build_s_channel_and_version_s_status_are_the_clients_enums(fill):
    for version in fill.get("/v3/projects/alpha/versions").json["versions"]:
        msgspec.convert(version, type=MihVersionResponse)
        for build in fill.get(
            f"/v3/projects/alpha/versions/{version['version']['id']}/builds"
        ).json:
            msgspec.convert(build, type=MihBuildResponse)
            msgspec.convert(build, type=RtBuildResponse)


def latest_version_as_mc_image_helper_picks(fill, channels):
    """PaperDownloadsClient.extractLatestVersionBuild: the versions in the server's order,
    each one's highest build fetched, until one's channel is asked for (else the last)."""
    versions = msgspec.json.decode(fill.get("/v3/projects/alpha/versions").body,
                                   type=MihProjectResponse).versions  # fmt: skip
    picked = None
    for entry in versions:
        if not entry.builds:
            continue
        number = max(entry.builds)
        body = fill.get(f"/v3/projects/alpha/versions/{entry.version.id}/builds/{number}").body
        build = msgspec.json.decode(body, type=MihBuildResponse)
        picked = (entry.version.id, build.id)
        if build.channel in channels:
            break
    return picked


def test_mc_image_helper_s_latest_version_is_the_newest_with_a_build_of_its_channel(fill):
    default = {MihChannel.STABLE, MihChannel.RECOMMENDED}  # RequestedChannel.DEFAULT
    experimental = {MihChannel.ALPHA, MihChannel.BETA}  # RequestedChannel.EXPERIMENTAL
    assert latest_version_as_mc_image_helper_picks(fill, default) == ("combat-test-8", 12)
    assert latest_version_as_mc_image_helper_picks(fill, experimental) == ("1.21.1-pre1", 10)


def shape(value):
    """The keys (in order) and value types of a JSON value; a list by the shapes of its items
    (each once)."""
    if isinstance(value, dict):
        return tuple((key, shape(item)) for key, item in value.items())
    if isinstance(value, list):
        return ("list", tuple(dict.fromkeys(map(shape, value))))
    return type(value).__name__


def fits(ours, theirs):
    """Whether the shape `ours` is `theirs`: the same keys in the same order, each value
    fitting; each item of a list fitting one of theirs (an empty list fits any list)."""
    if isinstance(ours, tuple) and ours[:1] == ("list",):
        return theirs[:1] == ("list",) and all(
            any(fits(item, their) for their in theirs[1]) for item in ours[1]
        )
    if isinstance(ours, tuple):
        return (
            isinstance(theirs, tuple)
            and [key for key, _ in ours] == [key for key, _ in theirs]
            and all(fits(item, their) for (_, item), (_, their) in zip(ours, theirs))
        )
    return ours == theirs


def mapped(value, *maps):
    """`value` with each object at the keys `maps` (maps keyed by data, as `downloads`)
    replaced by {"*": its first value}."""
    if isinstance(value, dict):
        return {
            key: {"*": mapped(next(iter(item.values())), *maps)}
            if key in maps and isinstance(item, dict) and item
            else mapped(item, *maps)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [mapped(item, *maps) for item in value]
    return value


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.parametrize(
    "path, recorded",
    [
        (BUILDS + "/8", "projects_paper_1_21_6_builds_46.json"),
        (BUILDS + "/latest", "projects_paper_1_21_8_builds_60.json"),
        ("/v3/projects/alpha/versions/1.21.1-pre1/builds/5", "projects_paper_1_21_9-rc1_builds_36.json"),
        ("/v3/projects/alpha/versions/1.21.1-pre1/builds/10", "projects_paper_1_21_9_builds_49.json"),
    ],
)  # fmt: skip
def test_a_build_has_the_keys_order_and_types_fill_recorded(fill, path, recorded):
    ours = fill.get(path).json
    if path.endswith("/5"):  # no checksum, no download: the shape of the rest is Fill's
        ours["downloads"] = fill.get(BUILDS + "/8").json["downloads"]
    theirs = mapped(fixture(recorded), "downloads")
    assert fits(shape(mapped(ours, "downloads")), shape(theirs))
    assert shape(mapped(ours, "downloads")) == shape(theirs)  # even the lists' items


def test_versions_have_the_keys_order_and_types_fill_recorded(fill):
    """Each of our versions is shaped as one Fill recorded: with or without a support end,
    recommended flags or none."""
    theirs = shape(
        fixture("projects_paper_versions_with_alphas.json")["versions"]
        + fixture("response_paper_project.json")["versions"]
    )
    ours = fill.get("/v3/projects/alpha/versions").json
    assert fits(shape(ours["versions"]), theirs)
    assert [key for key, _ in shape(ours)] == ["versions"]
    assert any("end" in entry["version"]["support"] for entry in ours["versions"])


def test_the_recorded_answers_decode_with_the_same_models():
    """The mirrors of the clients' models are right about Fill's own answers."""
    for name in os.listdir(FIXTURES):
        if not name.endswith(".json"):
            continue
        data = json.dumps(fixture(name)).encode()
        if "builds" in name:
            msgspec.json.decode(data, type=RtBuildResponse)
            msgspec.json.decode(data, type=MihBuildResponse)
        else:
            msgspec.json.decode(data, type=MihProjectResponse)


# --- the mapping's defaults --------------------------------------------------------------------


@pytest.mark.parametrize(
    "version, java",
    [
        ("1.21.4", 21), ("1.21.4-pre1", 21), ("1.20.5", 21), ("1.20.5-rc1", 21),
        ("1.20.10", 21), ("1.100", 21), ("1.20.4", 17), ("1.20", 17), ("1.18", 17),
        ("1.18.2", 17), ("1.17", 16), ("1.17.1", 16), ("1.16.5", 8), ("1.8.8", 8), ("1.0", 8),
        ("3.3.0-SNAPSHOT", 21), ("24w14a", 21), ("2.0", 21), ("combat-test-8", 21),
        ("11.20.4", 21), ("1.x", 21),
    ],
)  # fmt: skip
def test_the_default_java_follows_minecraft_s_releases(version, java):
    assert fill_mapping.default_java(version) == java


@pytest.mark.parametrize(
    "version, family",
    [
        ("1.21.4", "1.21"), ("1.21", "1.21"), ("1.21.4-pre1", "1.21"), ("3.3.0-SNAPSHOT", "3.3"),
        ("2.0-beta.1", "2.0"), ("24w14a", "24w14a"), ("combat-test-8", "combat-test-8"),
        ("v1.2", "v1.2"), ("10.200.3", "10.200"),
    ],
)  # fmt: skip
def test_the_default_family_is_the_leading_major_minor(version, family):
    assert fill_mapping.default_family(version) == family


@pytest.mark.parametrize(
    "timestamp, time",
    [
        (0, "1970-01-01T00:00:00Z"),
        (at(0), "2024-01-01T00:00:00Z"),
        (at(0, 7), "2024-01-01T00:00:00.007Z"),
        (at(0, 120), "2024-01-01T00:00:00.120Z"),
        (LAST_MILLISECOND, "9999-12-31T23:59:59.999Z"),
        (1704067200, "2024-01-01T00:00:00Z"),  # seconds, as a data file may give them
    ],
)
def test_times_are_iso_8601_utc_with_milliseconds_only_when_there_are_some(timestamp, time):
    assert fill_mapping.fill_time(timestamp) == time


def test_versions_first_seen_at_the_same_time_come_newest_build_first(fill_dir, fill):
    write_file(
        fill_dir / "beta.json",
        make_project([make_build(n, c, timestamp=at(1)) for n, c in ((1, "a"), (2, "b"), (3, "a"))]),
    )  # fmt: skip
    assert [
        v["version"]["id"] for v in fill.get("/v3/projects/beta/versions").json["versions"]
    ] == [
        "a",
        "b",
    ]
    assert list(fill.get("/v3/projects/beta").json["versions"]) == ["a", "b"]


def test_a_file_of_2_gib_or_more_is_not_offered(fill_dir, fill):
    """A size run-task reads as a 32-bit Int, as Fill writes it, could not be decoded."""
    big = make_build(1, "1.0", sha256=OTHER_SHA, size=2**31)
    fits = make_build(2, "1.0", sha256=OTHER_SHA, size=2**31 - 1)
    write_file(fill_dir / "beta.json", make_project([big, fits]))
    assert fill.get("/v3/projects/beta/versions/1.0/builds/1").json["downloads"] == {}
    download = fill.get("/v3/projects/beta/versions/1.0/builds/2").json["downloads"]
    assert download["server:default"]["size"] == 2**31 - 1


def test_a_build_s_extra_files_are_downloads_by_their_keys(fill_dir, fill):
    """The primary as server:default, then each extra file kept (it has a sha256 and a size)
    and each kept elsewhere that gives both; one without a checksum is left out."""
    build = make_build(3, "1.0", sha256=OTHER_SHA, size=7)
    build["downloads"] = {
        "server:mojmap": {"file": "beta-mojmap.jar", "sha256": KEPT_SHA, "size": 24},
        "dev:bundle": {"downloadUrl": "https://ci.example.org/b.jar", "sha256": OTHER_SHA,
                       "size": 9},
        "dev:sources": {"downloadUrl": "https://ci.example.org/s.jar"},
    }  # fmt: skip
    write_file(fill_dir / "beta.json", make_project([build]))
    downloads = fill.get("/v3/projects/beta/versions/1.0/builds/3").json["downloads"]
    assert list(downloads) == ["server:default", "server:mojmap", "dev:bundle"]
    assert downloads["server:mojmap"] == {
        "name": "beta-mojmap.jar",
        "checksums": {"sha256": KEPT_SHA},
        "size": 24,
        "url": f"{PUBLIC_URL}/downloads/beta/3/{KEPT_SHA}/beta-mojmap.jar",
    }
    assert downloads["dev:bundle"] == {
        "name": "b.jar",
        "checksums": {"sha256": OTHER_SHA},
        "size": 9,
        "url": "https://ci.example.org/b.jar",
    }


def test_a_build_numbered_beyond_32_bits_is_not_served_here(fill_dir, fill):
    """Fill's build ids are Java ints, run-task's Kotlin Ints: such a build is not listed."""
    write_file(
        fill_dir / "beta.json",
        make_project([make_build(2**31 - 1, "1.0"), make_build(2**31, "1.0"),
                      make_build(2**40, "2.0")]),
    )  # fmt: skip
    assert fill.get("/v3/projects/beta/versions/1.0/builds/latest").json["id"] == 2**31 - 1
    assert fill.get("/v3/projects/beta/versions/1.0").json["builds"] == [2**31 - 1]
    fill_error(fill, f"/v3/projects/beta/versions/1.0/builds/{2**31}", 404, "build_not_found")
    fill_error(fill, "/v3/projects/beta/versions/2.0", 404, "version_not_found")
    assert fill.get("/v3/projects/beta").json["versions"] == {"1.0": ["1.0"]}


@pytest.mark.parametrize(
    "url, name",
    [
        ("https://ci.example.org/a/b/beta-1.jar", "beta-1.jar"),
        ("https://ci.example.org/a/beta%2B1.jar?x=1", "beta+1.jar"),
        ("https://ci.example.org/", "beta-1.jar"),  # no name: the project's and build's
        ("https://ci.example.org/a/..%2F..%2Fetc%2Fpasswd", "beta-1.jar"),  # never a path
        ("https://ci.example.org/a/.hidden", "beta-1.jar"),
    ],
)
def test_a_download_s_name_is_a_plain_file_name(fill_dir, fill, url, name):
    """mc-image-helper saves the file under `name` in its output directory."""
    write_file(
        fill_dir / "beta.json",
        make_project([make_build(1, "1.0", downloadUrl=url, sha256=OTHER_SHA, size=1)]),
    )
    download = fill.get("/v3/projects/beta/versions/1.0/builds/1").json["downloads"]
    assert download["server:default"]["name"] == name
    assert download["server:default"]["url"] == url


# --- errors: Fill's shape ---------------------------------------------------------------------


def fill_error(client, path, status, error, method="GET", **kwargs):
    resp = client.request(path, method=method, status=status, expect_errors=True, **kwargs)
    assert resp.content_type == "application/json"
    assert resp.headers["Cache-Control"] == "no-store"
    assert list(resp.json) == ["ok", "error", "message"]
    assert resp.json["ok"] is False and resp.json["error"] == error
    assert isinstance(resp.json["message"], str) and resp.json["message"]
    msgspec.json.decode(resp.body, type=RUN_TASK["error"])
    return resp.json["message"]


@pytest.mark.parametrize(
    "path, error",
    [
        ("/v3/projects/nope", "project_not_found"),
        ("/v3/projects/nope/versions", "project_not_found"),
        ("/v3/projects/nope/versions/1.21", "project_not_found"),
        ("/v3/projects/nope/versions/1.21/builds", "project_not_found"),
        ("/v3/projects/nope/versions/1.21/builds/1", "project_not_found"),
        ("/v3/projects/nope/versions/1.21/builds/latest", "project_not_found"),
        ("/v3/projects/alpha/versions/1.22", "version_not_found"),
        ("/v3/projects/alpha/versions/1.22/builds", "version_not_found"),
        ("/v3/projects/alpha/versions/1.22/builds/3", "version_not_found"),
        ("/v3/projects/alpha/versions/1.22/builds/latest", "version_not_found"),
        ("/v3/projects/alpha/versions/1.21/builds/99", "build_not_found"),
        ("/v3/projects/alpha/versions/1.20.4/builds/8", "build_not_found"),  # another version's
        ("/v3/projects/alpha/versions/%C3%A9/builds", "version_not_found"),
        ("/v3/projects/%C3%A9", "project_not_found"),
    ],
)
def test_what_is_not_there_is_a_404_in_fill_s_shape(fill, path, error):
    message = fill_error(fill, path, 404, error)
    assert message.startswith("No " + error.split("_")[0] + " was found")


@pytest.mark.parametrize(
    "query",
    ["?channel=stable", "?channel=GOLD", "?channel=", "?channel=STABLE,gold",
     "?channel=STABLE&channel=Beta", "?channel=%20STABLE"],
)  # fmt: skip
def test_a_bad_channel_is_a_400_naming_the_channels(fill, query):
    message = fill_error(fill, BUILDS + query, 400, "invalid_channel")
    assert "ALPHA, BETA, STABLE or RECOMMENDED" in message


@pytest.mark.parametrize("build", ["abc", "-1", "1.5", "8x", "%2B8", "0x8", "9" * 31, "%C3%A9"])
def test_a_build_that_is_not_a_whole_number_is_a_400(fill, build):
    fill_error(fill, f"{BUILDS}/{build}", 400, "invalid_build")


@pytest.mark.parametrize(
    "path",
    ["/v3", "/v3/", "/v3/projects/", "/v3/projects/alpha/", "/v3/nope", BUILDS + "/8/x",
     "/v3/projects/alpha/versions/1.21/builds/", "/v3/projects/alpha/families"],
)  # fmt: skip
def test_an_unknown_path_under_v3_is_a_404_in_fill_s_shape(fill, path):
    fill_error(fill, path, 404, "unknown_method")
    fill_error(fill, path, 404, "unknown_method", headers={"Accept": "text/html"})


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_another_method_is_a_405_in_fill_s_shape(fill, method):
    fill_error(fill, BUILDS + "/8", 405, "method_not_allowed", method=method)


def test_a_malformed_query_is_a_400_in_fill_s_shape(fill):
    fill_error(fill, "/v3/projects?x=%00", 400, "invalid_query")


def test_v2_errors_keep_their_shape(fill):
    resp = fill.get("/api/v2/builds?project=nope", status=404)
    assert list(resp.json) == ["error", "code"]


def test_a_build_number_with_leading_zeros_is_that_build(fill):
    assert fill.get(BUILDS + "/008").json == BUILD_8


# --- as cacheable and cheap as the v2 reads -------------------------------------------------


@pytest.mark.parametrize("path", list(ENDPOINTS.values())[:-1])
def test_etag_304_cors_and_answers_from_memory(fill, fill_app, path):
    resp = fill.get(path)
    etag = resp.headers["ETag"]
    assert resp.headers["Access-Control-Allow-Origin"] == "*"
    assert resp.headers["Cache-Control"] == "public, max-age=60"
    again = fill.get(path, headers={"If-None-Match": etag}, status=304)
    assert again.body == b"" and again.headers["ETag"] == etag
    assert recalled(fill_app, path) is not None  # the next is answered without routing
    head = fill.head(path)
    assert head.body == b"" and head.headers["ETag"] == etag


def test_a_large_answer_is_gzipped_for_clients_that_take_it(fill_dir, fill_app, fill):
    builds = [make_build(n, "1.0", commit_count=3, sha256=OTHER_SHA, size=n) for n in range(60)]
    write_file(fill_dir / "beta.json", make_project(builds))
    plain = fill.get("/v3/projects/beta/versions/1.0/builds")
    zipped = webob.Request.blank(
        "/v3/projects/beta/versions/1.0/builds", headers={"Accept-Encoding": "gzip"}
    ).get_response(fill_app)
    assert zipped.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(zipped.body) == plain.body
    assert len(plain.json) == 60


def test_a_cors_preflight_is_answered(fill):
    resp = fill.options(BUILDS + "/latest", status=204)
    assert resp.headers["Access-Control-Allow-Methods"] == "GET, HEAD, OPTIONS"


def test_an_answer_changes_with_the_data(fill_dir, fill):
    etag = fill.get(BUILDS + "/latest").headers["ETag"]
    doc = make_project(ALPHA + [make_build(13, "1.21", timestamp=at(50))], versions=ALPHA_VERSIONS)
    write_file(fill_dir / "alpha.json", doc)
    resp = fill.get(BUILDS + "/latest", headers={"If-None-Match": etag})
    assert resp.status_int == 200 and resp.json["id"] == 13


# --- run-task's flow against a real server ---------------------------------------------------


def fetch(url):
    request = urllib.request.Request(
        url, headers={"Accept": "application/json", "User-Agent": "run-task-flow"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read()


@pytest.mark.system
def test_run_task_s_flow_downloads_the_latest_build_and_checks_its_sha256(fill_dir):
    """DownloadsAPIServiceImpl: builds/latest for its id, builds/{id}, then the server:default
    download, whose SHA-256 must be checksums.sha256 (case aside)."""
    with real_server(fill_dir, "--quiet") as (port, _):
        endpoint = f"http://127.0.0.1:{port}/v3/"  # run-task's downloadsEndpoint
        version = "projects/alpha/versions/1.21"
        latest = msgspec.json.decode(fetch(endpoint + version + "/builds/latest"),
                                     type=RtBuildResponse)  # fmt: skip
        build = msgspec.json.decode(fetch(f"{endpoint}{version}/builds/{latest.id}"),
                                    type=RtBuildResponse)  # fmt: skip
        download = build.downloads["server:default"]
        assert download.url == f"http://127.0.0.1:{port}/downloads/alpha/8/{KEPT_SHA}/alpha-8.jar"
        jar = fetch(download.url)
        assert hashlib.sha256(jar).hexdigest() == download.checksums.sha256.lower()
        assert len(jar) == download.size and build.id == latest.id == 8


# --- the recipes of docs/fill-v3.md, as they are written --------------------------------------

DOC_BASE = "https://builds.example.org"


def shell_recipes():
    """The ```sh blocks of docs/fill-v3.md's recipes that start with BASE=, in order."""
    with open(os.path.join(ROOT, "docs", "fill-v3.md"), encoding="utf-8") as f:
        recipes = f.read().split("\n## Recipes\n", 1)[1]
    blocks = re.findall(r"^```sh\n(.*?)^```", recipes, re.M | re.S)
    return [block for block in blocks if block.startswith(f"BASE={DOC_BASE}\n")]


def test_the_docs_have_the_shell_recipes():
    recipes = shell_recipes()
    assert len(recipes) == 4
    assert """jq -r '.downloads["server:default"].url'""" in recipes[0]


@pytest.mark.system
def test_the_shell_recipes_work_as_written(tmp_path):
    """On the sample data: tinplate's builds keep no checksum, waystone's 1.1 builds are kept
    files, so the recipes run with waystone and 1.1 for tinplate and 1.21.3."""
    data = shutil.copytree(os.path.join(ROOT, "data"), tmp_path / "data")
    build = json.loads((data / "waystone.json").read_text())["builds"]
    kept = max((b for b in build if b["channelVersion"] == "1.1"), key=lambda b: b["buildNumber"])
    work = tmp_path / "work"
    work.mkdir()
    with real_server(data, "--quiet") as (port, _):
        base = f"http://127.0.0.1:{port}"
        url = f"{base}/downloads/waystone/11/{kept['sha256']}/{kept['file']}"
        outputs = []
        for recipe in shell_recipes():
            script = recipe.replace(DOC_BASE, base).replace("tinplate", "waystone")
            script = script.replace("1.21.3", "1.1")
            done = subprocess.run(
                ["sh", "-e", "-c", script], cwd=work, capture_output=True, text=True, timeout=60
            )
            assert done.returncode == 0, f"{script}\n{done.stderr}"
            outputs.append(done.stdout.lower().splitlines())
    assert outputs[0] == [url.lower()]
    assert outputs[1] == ["server.jar: ok"]
    assert outputs[2] == ["2.0-beta.1", "11"]
    assert sorted(outputs[3][:2]) == [
        f'content-disposition: attachment; filename="{kept["file"]}"',
        f"last-modified: {formatdate(kept['timestamp'] // 1000, usegmt=True).lower()}",
    ]
    assert outputs[3][2:] == ["304"]  # mc-image-helper's copy is current
    assert (work / "server.jar").read_bytes() == (
        data / "artifacts" / kept["sha256"][:2] / kept["sha256"]
    ).read_bytes()
