"""Conditional requests: HTTP dates in each of their three forms and entity tags, read the same
by the JSON routes and the downloads, whatever the server's time zone."""

import calendar
import email.utils
import http.client
import json
import time
import urllib.parse

import pytest
import webtest

from buildshelf import cli, server
from buildshelf import store as store_module
from buildshelf.web.conditional import http_date
from helpers import real_server

API = "/api/v2"
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def imf_fixdate(seconds):
    return email.utils.formatdate(seconds, usegmt=True)


def rfc850_date(seconds):
    t = time.gmtime(seconds)
    return (
        f"{DAYS[t.tm_wday]}, {t.tm_mday:02}-{MONTHS[t.tm_mon - 1]}-{t.tm_year % 100:02} "
        f"{t.tm_hour:02}:{t.tm_min:02}:{t.tm_sec:02} GMT"
    )


def asctime_date(seconds):
    t = time.gmtime(seconds)
    return (
        f"{DAYS[t.tm_wday][:3]} {MONTHS[t.tm_mon - 1]} {t.tm_mday:2} "
        f"{t.tm_hour:02}:{t.tm_min:02}:{t.tm_sec:02} {t.tm_year}"
    )


# The three forms RFC 9110 (5.6.7) makes a recipient read; each is a time in UTC.
DATE_FORMS = [imf_fixdate, rfc850_date, asctime_date]


def test_the_forms_written_here_are_the_rfcs_examples():
    seconds = calendar.timegm((1994, 11, 6, 8, 49, 37))
    assert [form(seconds) for form in DATE_FORMS] == [
        "Sun, 06 Nov 1994 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37 GMT",
        "Sun Nov  6 08:49:37 1994",
    ]


@pytest.fixture
def tokyo_time(monkeypatch):
    """This process in Tokyo's time zone, nine hours east of UTC, for the test."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


RFC_EXAMPLE = calendar.timegm((1994, 11, 6, 8, 49, 37))


@pytest.mark.parametrize(
    "value, seconds",
    [
        ("Sun, 06 Nov 1994 08:49:37 GMT", RFC_EXAMPLE),
        ("Sunday, 06-Nov-94 08:49:37 GMT", RFC_EXAMPLE),
        ("Sun Nov  6 08:49:37 1994", RFC_EXAMPLE),
        ("Sun, 06 Nov 1994 08:49:37 -0000", RFC_EXAMPLE),  # "-0000": no zone said, so GMT
        ("Sun, 06 Nov 1994 17:49:37 +0900", RFC_EXAMPLE),  # not an HTTP date, but clear
        # Invalid: ignored, as a conditional request ignores one (RFC 9110 13.1.3).
        ("yesterday", None),
        ("", None),
        (None, None),
        ("Sun, 06 Nov 1994 25:49:37 GMT", None),
        ("Sun, 06 Nov 99999999999 08:49:37 GMT", None),
    ],
)
def test_http_date(value, seconds, tokyo_time):
    assert http_date(value) == seconds


def get(port, path, **headers):
    """(status, headers, body) of a GET."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers={k.replace("_", "-"): v for k, v in headers.items()})
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


def last_modified(port, path):
    """The Last-Modified of `path`, in epoch seconds, once the server sends one (the JSON
    routes send it once the data is a second old)."""
    deadline = time.monotonic() + 10
    while True:
        status, headers, _ = get(port, path)
        assert status == 200
        if "Last-Modified" in headers:
            return calendar.timegm(email.utils.parsedate(headers["Last-Modified"]))
        assert time.monotonic() < deadline, "no Last-Modified sent"
        time.sleep(0.1)


@pytest.fixture
def kept_file(data_dir, tmp_path):
    """Build 9 of alpha in channel 9.9, its file kept by `publish --file`."""
    jar = tmp_path / "alpha-9.jar"
    jar.write_bytes(b"PK\x03\x04 a jar's bytes " * 100)
    argv = ["publish", "alpha", "--data", str(data_dir), "--build", "9", "--channel", "9.9",
            "--timestamp", "1700000000000", "--file", str(jar)]  # fmt: skip
    assert cli.main(argv) == 0
    return jar


# How old the client's copy is, in seconds, against the answer due.
AGES = {0: 304, 1: 200, 3 * 3600: 200}


# East of UTC, a date read as local time is hours early: a current copy got 200. West of it,
# hours late: a copy hours out of date got 304.
@pytest.mark.system
@pytest.mark.parametrize("zone", ["Asia/Tokyo", "America/Los_Angeles"])
def test_http_dates_are_read_as_utc_in_any_server_time_zone(data_dir, kept_file, zone, monkeypatch):
    monkeypatch.setenv("TZ", zone)  # the server process inherits it
    expected, answered = {}, {}
    with real_server(data_dir) as (port, _):
        json_path = API + "/builds/latest?project=alpha&channel=9.9"
        download_url = json.loads(get(port, json_path)[2])["downloadUrl"]
        download_path = urllib.parse.urlsplit(download_url).path
        for path in (json_path, download_path):
            modified = last_modified(port, path)
            for form in DATE_FORMS:
                for age, status in AGES.items():
                    expected[path, form.__name__, age] = status
                    since = form(modified - age)
                    answered[path, form.__name__, age] = get(port, path, If_Modified_Since=since)[0]
        # If-Range: a range only of the very version dated, 206; else the whole file.
        for form in DATE_FORMS:
            for age, status in {0: 206, 1: 200}.items():
                expected["If-Range", form.__name__, age] = status
                if_range = form(modified - age)
                got = get(port, download_path, Range="bytes=0-9", If_Range=if_range)
                answered["If-Range", form.__name__, age] = got[0]
        # If-Unmodified-Since: the very version dated or later, 200; an older one, 412.
        for form in DATE_FORMS:
            for age, status in {0: 200, -1: 200, 1: 412}.items():
                expected["If-Unmodified-Since", form.__name__, age] = status
                since = form(modified - age)
                got = get(port, download_path, If_Unmodified_Since=since)
                answered["If-Unmodified-Since", form.__name__, age] = got[0]
    assert answered == expected


@pytest.mark.parametrize(
    "template, matches",
    [
        ("{etag}", True),
        ("W/{etag}", True),  # If-None-Match compares weakly (RFC 9110 13.1.2)
        (' "x", {etag} ', True),
        ('"x",W/{etag}', True),
        ('"x", , {etag},', True),  # empty elements are allowed in a list
        ("*", True),
        (" * ", True),
        ('"x"', False),
        ('"x", "y"', False),
        ('"{bare},x"', False),  # a comma inside a tag is part of it
        ('"x, "{bare}"', False),  # not a list of tags that holds ours
        ("{bare}", False),  # unquoted: not an entity tag
        ("w/{etag}", False),  # W/ is written in capitals
        ("{etag}x", False),
        ("", False),
    ],
)
def test_json_routes_and_downloads_match_entity_tags_alike(data_dir, kept_file, template, matches):
    client = webtest.TestApp(server.make_app(store_module.Store(data_dir, check_interval=0)))
    json_path = API + "/builds/latest?project=alpha&channel=9.9"
    download_path = urllib.parse.urlsplit(client.get(json_path).json["downloadUrl"]).path
    # The checksum line has an ETag of its own, matched as the file's is.
    for path in (json_path, download_path, download_path + ".sha256"):
        etag = client.get(path).headers["ETag"]
        if_none_match = template.format(etag=etag, bare=etag.strip('"'))
        answer = client.get(path, headers={"If-None-Match": if_none_match})
        assert answer.status_int == (304 if matches else 200), (path, if_none_match)
    # If-Match reads the same lists, but compares strongly (13.1.1): a W/ tag never matches.
    strongly = matches and "W/" not in template
    for path in (download_path, download_path + ".sha256"):
        etag = client.get(path).headers["ETag"]
        if_match = template.format(etag=etag, bare=etag.strip('"'))
        answer = client.get(path, headers={"If-Match": if_match}, expect_errors=True)
        assert answer.status_int == (200 if strongly else 412), (path, if_match)


def test_the_checksum_lines_etag_is_not_the_files(data_dir, kept_file):
    client = webtest.TestApp(server.make_app(store_module.Store(data_dir, check_interval=0)))
    json_path = API + "/builds/latest?project=alpha&channel=9.9"
    download_path = urllib.parse.urlsplit(client.get(json_path).json["downloadUrl"]).path
    file_etag = client.get(download_path).headers["ETag"]
    line = client.get(download_path + ".sha256")
    assert line.headers["ETag"] != file_etag
    assert client.get(download_path + ".sha256", headers={"If-None-Match": file_etag}).body == (
        line.body
    )
