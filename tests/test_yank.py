"""A yank that can be undone (issue 25): the yank mark in the data files (both validation
paths), `yank`, `unyank`, `purge`, `yank --purge` and `check` through the command line, and
what a yanked build's download URL answers."""

import hashlib
import html
import json
import re

import pytest
import webtest

from buildshelf import cli, server
from buildshelf import store as store_module
from buildshelf.datafiles import datafile
from buildshelf.kept import artifacts
from buildshelf.text import size
from helpers import both_paths, build_in_file, make_build, make_project, objects, write_file

API = "/api/v2"
YANKED_AT = 1700000500000


@pytest.fixture
def jar(tmp_path):
    path = tmp_path / "alpha-9.jar"
    path.write_bytes(b"PK\x03\x04 a jar's bytes " * 100)
    return path


def publish(data_dir, number, jar, *flags):
    return cli.main(["publish", "alpha", "--data", str(data_dir), "--build", str(number),
                     "--channel", "1.21", "--timestamp", "1700000000000", "--file", str(jar),
                     *flags])  # fmt: skip


def run(data_dir, *argv):
    return cli.main([*argv, "--data", str(data_dir)])


def client_of(data_dir):
    return webtest.TestApp(server.make_app(store_module.Store(data_dir, check_interval=0)))


# --- the data files ------------------------------------------------------------------------


def test_a_yanked_build_is_read_alike_by_both_paths_and_leaves_every_list():
    text = json.dumps(
        make_project(
            [
                make_build(1, "1.20"),
                make_build(2, "1.20", yankedAt=YANKED_AT, yankReason="broken: see #12"),
                make_build(3, "1.20", yankedAt=YANKED_AT),
            ]
        )
    )
    fast, checked = both_paths(text)
    assert fast is not None
    for project in (fast, checked):
        assert [b.number for b in project.builds] == [1]
        assert project.latest("1.20").number == 1
        assert [b.number for b in project.select(None, True)] == [1]
        assert [(b.number, b.yanked_at, b.yank_reason) for b in project.yanked] == [
            (2, YANKED_AT, "broken: see #12"),
            (3, YANKED_AT, ""),
        ]
        assert project.yanked_build(2).number == 2 and project.yanked_build(1) is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"yankedAt": "yesterday"}, "'yankedAt' must be the time of the yank in epoch millis"),
        ({"yankedAt": -1}, "'yankedAt' must be the time of the yank in epoch millis"),
        ({"yankedAt": YANKED_AT, "yankReason": 3}, "'yankReason' must be a string"),
        ({"yankReason": "why"}, "'yankReason' needs 'yankedAt'"),
        # Text: it goes into log lines, chat messages and pages (issue 38).
        ({"yankedAt": YANKED_AT, "yankReason": "bad\x1b[31m"},
         "'yankReason' holds a control character (\\x1b at character 4): a reason is text"),
        ({"yankedAt": YANKED_AT, "yankReason": "a\x00b"}, "(\\x00 at character 2)"),
        ({"yankedAt": YANKED_AT, "yankReason": "a\x0cb"}, "(\\x0c at character 2)"),
        ({"yankedAt": YANKED_AT, "yankReason": "x\x7f"}, "(\\x7f at character 2)"),
        ({"yankedAt": YANKED_AT, "yankReason": "x\x85"}, "(\\x85 at character 2)"),
        ({"yankedAt": YANKED_AT, "yankReason": "x\ud800"}, "'yankReason' holds a lone surrogate"),
    ],
)  # fmt: skip
def test_a_wrong_yank_mark_is_refused_with_its_message(fields, message):
    text = json.dumps(make_project([make_build(1, **fields)]))
    assert datafile._fast_project("alpha", text) is None
    with pytest.raises(datafile.DataError) as error:
        datafile.parse_project("alpha.json", "alpha", text.encode())
    assert message in str(error.value)


def test_a_reason_is_any_text_in_lines_on_both_paths():
    printable = "crashes — 日本語 😀 «ok»\n\tsee #12\r\n"
    text = json.dumps(make_project([make_build(1, yankedAt=YANKED_AT, yankReason=printable)]))
    fast, checked = both_paths(text)
    assert fast is not None and fast.yanked[0].yank_reason == printable
    assert checked.yanked[0].yank_reason == printable
    # The fast path refuses what the build-by-build path refuses, whatever the other builds.
    two_lines = [make_build(1, yankedAt=YANKED_AT, yankReason=printable),
                 make_build(2, yankedAt=YANKED_AT, yankReason="a\u0085b")]  # fmt: skip
    assert datafile._fast_project("alpha", json.dumps(make_project(two_lines))) is None


# --- yank and unyank -----------------------------------------------------------------------


def test_yank_marks_the_build_keeps_its_file_and_unyank_restores_it(data_dir, jar, capsys):
    assert publish(data_dir, 9, jar) == 0
    [sha] = objects(data_dir)
    before = build_in_file(data_dir, 9)
    capsys.readouterr()
    assert run(data_dir, "yank", "alpha", "9", "--reason", "wrong jar") == 0
    out = capsys.readouterr().out
    assert out.startswith("yanked build 9 of alpha (reason: wrong jar): kept its file ")
    assert "'buildshelf unyank alpha 9' restores it" in out
    marked = build_in_file(data_dir, 9)
    assert marked["yankReason"] == "wrong jar" and marked["yankedAt"] > 1700000000000
    assert objects(data_dir) == [sha]
    client = client_of(data_dir)
    assert client.get(API + "/builds/latest?project=alpha&channel=1.21").json["buildNumber"] == 5
    assert run(data_dir, "unyank", "alpha", "9") == 0
    assert capsys.readouterr().out == "unyanked build 9 of alpha: it is served again\n"
    assert build_in_file(data_dir, 9) == before


def test_a_reason_with_an_escape_sequence_is_refused_and_nothing_written(data_dir, capsys):
    before = (data_dir / "alpha.json").read_bytes()
    assert run(data_dir, "yank", "alpha", "5", "--reason", "wrong\x1b[2Jjar") == 1
    assert (
        "'yankReason' holds a control character (\\x1b at character 6)" in capsys.readouterr().err
    )
    assert (data_dir / "alpha.json").read_bytes() == before


def test_yank_dry_run_writes_nothing(data_dir, jar, capsys):
    assert publish(data_dir, 9, jar) == 0
    before = (data_dir / "alpha.json").read_bytes()
    capsys.readouterr()
    assert run(data_dir, "yank", "alpha", "9", "--dry-run", "--purge") == 0
    assert capsys.readouterr().out.startswith("would yank build 9 of alpha")
    assert (data_dir / "alpha.json").read_bytes() == before and len(objects(data_dir)) == 1


def test_yank_purge_deletes_the_file_and_unyank_then_refuses(data_dir, jar, capsys):
    assert publish(data_dir, 9, jar) == 0
    [sha] = objects(data_dir)
    capsys.readouterr()
    assert run(data_dir, "yank", "alpha", "9", "--purge") == 0
    out = capsys.readouterr().out
    assert f"deleted {data_dir / 'artifacts' / sha[:2] / sha} (" in out
    assert objects(data_dir) == []
    assert "yankedAt" in build_in_file(data_dir, 9)
    assert run(data_dir, "unyank", "alpha", "9") == 1
    err = capsys.readouterr().err
    assert "its file alpha-9.jar was purged" in err
    assert "buildshelf publish alpha --build 9 --file alpha-9.jar --replace" in err


def test_yank_purge_keeps_a_file_a_served_build_uses(data_dir, jar, capsys):
    assert publish(data_dir, 9, jar) == 0
    assert publish(data_dir, 10, jar) == 0
    capsys.readouterr()
    assert run(data_dir, "yank", "alpha", "9", "--purge") == 0
    assert "kept its file" in capsys.readouterr().out
    assert len(objects(data_dir)) == 1
    assert run(data_dir, "unyank", "alpha", "9") == 0


def test_a_yank_of_a_yanked_or_missing_build_says_so(data_dir, capsys):
    assert run(data_dir, "yank", "alpha", "5") == 0
    assert run(data_dir, "yank", "alpha", "5") == 0
    assert capsys.readouterr().out.endswith("build 5 of alpha is already yanked: nothing changed\n")
    assert run(data_dir, "unyank", "alpha", "3") == 1
    assert "build 3 of alpha is not yanked" in capsys.readouterr().err


# --- purge and check -----------------------------------------------------------------------


def test_purge_deletes_the_files_of_builds_yanked_long_enough(data_dir, jar, tmp_path, capsys):
    other = tmp_path / "alpha-10.jar"
    other.write_bytes(b"other bytes")
    assert publish(data_dir, 9, jar) == 0 and publish(data_dir, 10, other) == 0
    assert run(data_dir, "yank", "alpha", "9") == 0 and run(data_dir, "yank", "alpha", "10") == 0
    doc = json.loads((data_dir / "alpha.json").read_text())
    for build in doc["builds"]:
        if build["buildNumber"] == 9:
            build["yankedAt"] = YANKED_AT  # in 2023: long ago
    write_file(data_dir / "alpha.json", doc)
    capsys.readouterr()
    assert run(data_dir, "check") == 0  # information only, so not said unless asked for
    assert capsys.readouterr().out == ""
    assert run(data_dir, "check", "--verbose") == 0
    out = capsys.readouterr().out
    assert "yanked build 9 of alpha keeps" in out and "2 yanked build files kept: " in out
    assert run(data_dir, "purge", "--dry-run") == 0
    assert capsys.readouterr().out.startswith("would delete ")
    assert len(objects(data_dir)) == 2
    assert run(data_dir, "purge", "alpha") == 0
    out = capsys.readouterr().out
    sha9 = hashlib.sha256(jar.read_bytes()).hexdigest()
    assert f"deleted {data_dir / 'artifacts' / sha9[:2] / sha9} ({size(jar.stat().st_size)})" in out
    assert objects(data_dir) == [hashlib.sha256(b"other bytes").hexdigest()]
    assert run(data_dir, "purge", "--older-than", "0") == 0
    assert objects(data_dir) == []


def _yanked_long_ago(data_dir, *numbers):
    doc = json.loads((data_dir / "alpha.json").read_text())
    for build in doc["builds"]:
        if build["buildNumber"] in numbers:
            build["yankedAt"] = YANKED_AT  # in 2023: long ago
    write_file(data_dir / "alpha.json", doc)


def test_purge_says_nothing_of_a_build_already_purged(data_dir, jar, capsys):
    assert publish(data_dir, 9, jar) == 0
    assert run(data_dir, "yank", "alpha", "9") == 0
    _yanked_long_ago(data_dir, 9)
    assert run(data_dir, "purge") == 0
    assert capsys.readouterr().out.count("deleted ") == 1
    assert objects(data_dir) == []
    assert run(data_dir, "purge") == 0  # its file is gone: neither "kept" nor "deleted"
    assert capsys.readouterr().out == ""


def test_purge_never_says_kept_of_a_shared_file_that_is_gone(data_dir, jar, capsys):
    assert publish(data_dir, 9, jar) == 0 and publish(data_dir, 10, jar) == 0
    assert run(data_dir, "yank", "alpha", "9") == 0
    _yanked_long_ago(data_dir, 9)
    capsys.readouterr()
    assert run(data_dir, "purge") == 0  # build 10 is served with the same bytes
    assert capsys.readouterr().out.endswith(": another build uses it\n")
    [sha] = objects(data_dir)
    (data_dir / "artifacts" / sha[:2] / sha).unlink()  # lost: check's problem, not purge's
    assert run(data_dir, "purge") == 0
    assert capsys.readouterr().out == ""


def test_purge_says_so_of_a_file_the_store_would_not_delete(data_dir, jar, capsys, monkeypatch):
    assert publish(data_dir, 9, jar) == 0 and run(data_dir, "yank", "alpha", "9") == 0
    _yanked_long_ago(data_dir, 9)
    monkeypatch.setattr(artifacts, "remove", lambda *_: [])  # as a read-only store does
    capsys.readouterr()
    assert run(data_dir, "purge") == 0
    [sha] = objects(data_dir)
    assert capsys.readouterr().out == (
        f"could not delete {data_dir / 'artifacts' / sha[:2] / sha}, the file of yanked "
        "build 9 of alpha\n"
    )


def test_purge_dry_run_with_nothing_due_says_how_many_are_not_due_yet(
    data_dir, jar, tmp_path, capsys
):
    other, third = tmp_path / "alpha-10.jar", tmp_path / "alpha-11.jar"
    other.write_bytes(b"other bytes")
    third.write_bytes(b"third bytes")
    assert publish(data_dir, 9, jar) == 0 and publish(data_dir, 10, other) == 0
    assert publish(data_dir, 11, third) == 0
    assert run(data_dir, "yank", "alpha", "9") == 0 and run(data_dir, "yank", "alpha", "10") == 0
    assert run(data_dir, "yank", "alpha", "11", "--purge") == 0  # keeps no file of its own
    assert run(data_dir, "yank", "alpha", "5") == 0  # a download URL: it keeps no file
    capsys.readouterr()
    assert run(data_dir, "purge", "--dry-run") == 0
    assert capsys.readouterr().out == (
        "nothing to purge: 2 yanked builds keep files, yanked less than 30 days ago "
        "(the first is due in 30 days)\n"
    )
    assert run(data_dir, "purge", "beta", "--dry-run") == 0
    assert capsys.readouterr().out == "nothing to purge: no yanked build of beta keeps a file\n"
    assert run(data_dir, "purge") == 0  # the same, not a dry run: quiet, as cron wants it
    assert capsys.readouterr().out == ""
    assert run(data_dir, "purge", "--older-than", "0", "--dry-run") == 0
    assert capsys.readouterr().out.count("would delete ") == 2
    assert len(objects(data_dir)) == 2


# --- the download URL and the HTTP route ---------------------------------------------------


def test_a_yanked_builds_download_is_410_never_cached_also_once_purged(data_dir, jar):
    assert publish(data_dir, 9, jar) == 0
    sha = hashlib.sha256(jar.read_bytes()).hexdigest()
    path = f"/downloads/alpha/9/{sha}/alpha-9.jar"
    assert client_of(data_dir).get(path).body == jar.read_bytes()
    assert run(data_dir, "yank", "alpha", "9", "--reason", "wrong jar") == 0
    for purged in (False, True):
        if purged:
            assert run(data_dir, "purge", "--older-than", "0") == 0
        client = client_of(data_dir)
        got = client.get(path, status=410)
        assert got.headers["Cache-Control"] == "no-store"
        body = got.json
        assert (body["code"], body["reason"], body["latest"]["buildNumber"]) == (
            "build_yanked",
            "wrong jar",
            5,
        )
        assert "error" in body
        head = client.head(path, status=410)
        assert head.headers["Cache-Control"] == "no-store"
    client.get(path + ".sha256", status=410)


# --- a browser's old link: the HTML 410 (issue 38) ------------------------------------------

XSS_REASON = '<script>alert(1)</script> & "<b>bold</b>"'
# The Accept headers browsers send for a link followed (a navigation).
BROWSERS = [
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,"
    "*/*;q=0.8,application/signed-exchange;v=b3;q=0.7",  # Chromium, Chrome, Edge
    "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",  # Firefox, Safari
    "text/html",
]
# Those of curl, wget, launchers and API clients: no Accept, */*, JSON asked for or tied.
API_CLIENTS = [
    None,
    "",
    "*/*",
    "application/json",
    "application/json, text/html",
    "text/html;q=0.5, */*",
    "text/html;q=0, */*",
    "nonsense;;q=x,,",
]


@pytest.fixture
def yanked_url(data_dir, jar):
    """Build 9's kept file's URL, the build yanked with a hostile reason; build 5 the
    latest."""
    assert publish(data_dir, 9, jar) == 0
    assert run(data_dir, "yank", "alpha", "9", "--reason", XSS_REASON) == 0
    sha = hashlib.sha256(jar.read_bytes()).hexdigest()
    return f"/downloads/alpha/9/{sha}/alpha-9.jar"


def accepting(accept):
    return {} if accept is None else {"Accept": accept}


@pytest.mark.parametrize("sidecar", ["", ".sha256"])
@pytest.mark.parametrize("accept", BROWSERS)
def test_a_browser_following_a_yanked_builds_link_gets_a_page_saying_why(
    data_dir, yanked_url, accept, sidecar
):
    got = client_of(data_dir).get(yanked_url + sidecar, headers={"Accept": accept}, status=410)
    assert got.content_type == "text/html" and got.charset == "utf-8"
    assert got.headers["Cache-Control"] == "no-store"
    assert got.headers["Vary"] == "Accept"
    assert got.headers["Content-Security-Policy"].startswith("default-src 'none'")
    text = " ".join(got.text.split())
    assert "Build #9 of Alpha was yanked" in text
    # The reason is text, escaped: no tag of it reaches the page.
    assert html.escape(XSS_REASON) in got.text
    assert "<script" not in got.text and "<b>bold" not in got.text
    links = re.findall(r'href="([^"]+)"', got.text)
    assert "/projects/alpha#build-5" in links  # the latest build on its project's page
    assert "https://ci.example.org/job/Alpha/5/artifact/alpha-5.jar" in links  # and its file
    assert "/projects/alpha#yanked-9" in links  # the yanked build among the project's


@pytest.mark.parametrize("sidecar", ["", ".sha256"])
@pytest.mark.parametrize("accept", API_CLIENTS)
def test_curl_wget_and_api_clients_still_get_the_json_410(data_dir, yanked_url, accept, sidecar):
    got = client_of(data_dir).get(yanked_url + sidecar, headers=accepting(accept), status=410)
    assert got.content_type == "application/json"
    assert (got.json["code"], got.json["reason"]) == ("build_yanked", XSS_REASON)
    assert got.headers["Cache-Control"] == "no-store"
    # Its HTML twin differs by Accept alone: no cache may answer one for the other.
    assert got.headers["Vary"] == "Accept"


@pytest.mark.parametrize("accept", [BROWSERS[0], None])
def test_a_head_of_a_yanked_builds_link_is_the_gets_headers(data_dir, yanked_url, accept):
    client = client_of(data_dir)
    got = client.get(yanked_url, headers=accepting(accept), status=410)
    head = client.head(yanked_url, headers=accepting(accept), status=410)
    assert head.body == b"" and head.headers["Vary"] == "Accept"
    for name in ("Content-Type", "Cache-Control", "Vary", "Content-Length"):
        assert head.headers.get(name) == got.headers.get(name), name


def test_a_purged_builds_link_gets_the_same_page(data_dir, yanked_url):
    assert run(data_dir, "purge", "--older-than", "0") == 0
    assert objects(data_dir) == []
    client = client_of(data_dir)
    page = client.get(yanked_url, headers={"Accept": BROWSERS[0]}, status=410)
    assert "Build #9 of Alpha was yanked" in " ".join(page.text.split())
    assert client.get(yanked_url, status=410).json["code"] == "build_yanked"


def test_the_page_of_a_yanked_build_of_a_project_with_none_served(data_dir, yanked_url):
    doc = json.loads((data_dir / "alpha.json").read_text())
    doc["builds"] = [b for b in doc["builds"] if b["buildNumber"] == 9]
    write_file(data_dir / "alpha.json", doc)
    page = client_of(data_dir).get(yanked_url, headers={"Accept": BROWSERS[1]}, status=410)
    text = " ".join(page.text.split())
    assert "Alpha serves no build now" in text
    assert "/projects/alpha#yanked-9" in page.text


def test_a_link_of_a_build_gone_from_its_file_is_a_json_404_for_everyone(data_dir, yanked_url):
    """A build taken out of its file by hand (not yanked) leaves no trace to explain: 404,
    as any URL naming no file."""
    doc = json.loads((data_dir / "alpha.json").read_text())
    doc["builds"] = [b for b in doc["builds"] if b["buildNumber"] != 9]
    write_file(data_dir / "alpha.json", doc)
    for accept in (BROWSERS[0], None):
        got = client_of(data_dir).get(yanked_url, headers=accepting(accept), status=404)
        assert got.json["code"] == "not_found"
