"""The HTML pages and the Atom feed, through webtest; the feed read by a real feed parser."""

import calendar
import datetime
import gzip
import hashlib
import html
import re
import shutil
import subprocess
import sys
import weakref
import xml.etree.ElementTree as ET
from urllib.parse import parse_qs, urlencode

import feedparser
import pytest
import webob
import webtest

from buildshelf import cli, counts, model, server
from buildshelf.web import pages, rendering, shown_counts
from helpers import make_build, make_project, recalled, refreshing_client, write_file

CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'"
)
PAGE_PATHS = [
    "/",
    "/projects/alpha",
    "/projects/alpha?channel=1.21&experimental=true",
    "/projects/big?page=2",
]
XSS = "<script>alert(1)</script>"


@pytest.fixture
def big_data_dir(data_dir):
    """A project of 120 builds: three pages, and more than a feed holds."""
    write_file(
        data_dir / "big.json",
        make_project(
            [
                make_build(n, "1.21" if n % 2 else "1.20", experimental=n % 10 == 0)
                for n in range(1, 121)
            ],
            ciJob="Big",
        ),
    )
    return data_dir


def text_of(html):
    """The visible text, tags dropped and whitespace folded."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def numbers_shown(resp):
    return [int(n) for n in re.findall(r'<h3 id="build-(\d+)">', resp.text)]


def raw(app, path, **headers):
    headers = {name.replace("_", "-"): value for name, value in headers.items()}
    return webob.Request.blank(path, headers=headers).get_response(app)


# --- the index -----------------------------------------------------------------------------------


def test_the_index_lists_each_project_with_its_latest_builds(client):
    resp = client.get("/")
    assert resp.content_type == "text/html" and resp.charset == "utf-8"
    text = text_of(resp.text)
    # alpha: stable 5, and experimental 8 because it is newer; beta: no experimental build
    assert (
        "Alpha Latest stable build #5 1.21 2023-11-14 22:13 UTC Download alpha-5.jar "
        "build #5, channel 1.21 Newer experimental build #8 1.21.1-pre1 Experimental "
        "2023-11-14 22:13 UTC Download alpha-8.jar build #8, channel 1.21.1-pre1, "
        "experimental All 6 builds Atom feed Javadoc JSON API document"
    ) in text
    assert (
        "Beta Latest stable build #10 2.0 2023-11-14 22:13 UTC Download alpha-10.jar "
        "build #10, channel 2.0 The one build"
    ) in text
    assert "Newer experimental build #10" not in text
    for href in [
        "/projects/alpha",
        "/api/v2/feed?project=alpha",
        "/api/v2/jd?project=alpha",
        "/api/v2/builds?project=alpha",
        "/api-document",
        "https://ci.example.org/job/Alpha/8/artifact/alpha-8.jar",
    ]:
        assert f'href="{href}"' in resp.text
    assert (
        '<link rel="alternate" type="application/atom+xml" title="Beta builds" '
        'href="/api/v2/feed?project=beta">'
    ) in resp.text


def test_projects_without_a_stable_build(data_dir, client):
    write_file(
        data_dir / "gamma.json", make_project([make_build(4, experimental=True)], ciJob="Gamma")
    )
    write_file(data_dir / "delta.json", make_project([], ciJob="Delta"))
    text = text_of(client.get("/").text)
    assert "Gamma No stable build yet. Newer experimental build #4 1.21 Experimental" in text
    assert "Delta No builds yet. All 0 builds Atom feed JSON API document" in text
    assert text.count("Javadoc") == 2  # only where a stable build gives /jd a target


def test_a_project_without_javadoc_has_no_javadoc_link(data_dir, client):
    doc = make_project([make_build(4)], ciJob="Gamma")
    del doc["javadocBaseUrl"]
    write_file(data_dir / "gamma.json", doc)
    assert text_of(client.get("/").text).count("Javadoc") == 2  # alpha's and beta's
    page = client.get("/projects/gamma").text
    assert "Javadoc" not in page and "/jd" not in page
    assert "Javadoc" in client.get("/projects/alpha").text


def test_the_index_with_no_projects(tmp_path):

    from buildshelf import server
    from buildshelf import store as store_module

    client = webtest.TestApp(server.make_app(store_module.Store(tmp_path, check_interval=0)))
    assert "No projects are served yet." in client.get("/").text


# --- a project's page --------------------------------------------------------------------------


def test_a_project_page_shows_stable_builds_newest_first(client):
    resp = client.get("/projects/alpha")
    assert numbers_shown(resp) == [5, 3, 1]
    text = text_of(resp.text)
    assert (
        "Build #5 1.21 2023-11-14 22:13 UTC 0005000 Change 5.0 0005000 Change 5.1 "
        "0005000 Change 5.2 Download alpha-5.jar build #5, channel 1.21 CI run of build "
        "#5"
    ) in text
    assert (
        "Build #3 1.20 2023-11-14 22:13 UTC No commits listed. Download alpha-3.jar "
        "build #3, channel 1.20 CI run of build #3"
    ) in text
    assert f'<code title="{5:04x}{2:036x}">0005000</code>' in resp.text
    assert 'href="https://ci.example.org/job/Alpha/5/"' in resp.text
    assert "3 builds, newest first" in text and "Experimental" not in text.split("Show builds")[1]


@pytest.mark.parametrize(
    "query, shown",
    [
        ("experimental=true", [8, 7, 5, 3, 2, 1]),
        ("experimental=TRUE&channel=1.20", [3, 2, 1]),
        ("channel=1.21", [5]),
        ("channel=1.21&experimental=true", [7, 5]),
        ("channel=&experimental=", [5, 3, 1]),
        ("channel=9.9", []),
        ("channel=1.21.1-pre1", []),
        ("project=beta&x=1", [5, 3, 1]),  # other parameters are ignored, as by the API
    ],
)
def test_filters_have_the_api_semantics(client, query, shown):
    resp = client.get(f"/projects/alpha?{query}")
    assert numbers_shown(resp) == shown
    api = client.get(f"/api/v2/builds?project=alpha&{query.replace('project=beta&', '')}")
    assert shown == [b["buildNumber"] for b in reversed(api.json)]


def test_the_form_shows_the_filters_in_use(client):
    resp = client.get("/projects/alpha?channel=1.20&experimental=true")
    assert '<option value="1.20" selected>1.20</option>' in resp.text
    assert 'value="true" checked>' in resp.text
    assert '<form class="filters" method="get" action="/projects/alpha">' in resp.text
    # channels newest first; a channel the project does not have still shows what was asked
    assert re.findall(r'<option value="([^"]*)"', resp.text) == ["", "1.21.1-pre1", "1.21", "1.20"]
    odd = client.get("/projects/alpha?channel=9.9")
    assert '<option value="9.9" selected>9.9</option>' in odd.text
    assert "No stable build in channel 9.9. Try including experimental builds." in text_of(odd.text)


def test_the_feed_link_follows_the_filters(client):
    resp = client.get("/projects/alpha?channel=1.21&experimental=true")
    assert (
        '<link rel="alternate" type="application/atom+xml" title="Alpha builds" '
        'href="/api/v2/feed?project=alpha&amp;channel=1.21&amp;experimental=true">'
    ) in resp.text


def test_long_histories_are_paged_by_50(big_data_dir, client):
    first = client.get("/projects/big")
    stable = [n for n in range(120, 0, -1) if n % 10]
    assert numbers_shown(first) == stable[:50]
    assert "Builds 1 to 50 of 108, newest first" in first.text
    assert '<a rel="next" href="/projects/big?page=2">' in first.text
    assert 'rel="prev"' not in first.text
    second = client.get("/projects/big?page=2")
    assert numbers_shown(second) == stable[50:100]
    assert '<a rel="prev" href="/projects/big">' in second.text
    assert '<a rel="next" href="/projects/big?page=3">' in second.text
    third = client.get("/projects/big?page=3")
    assert numbers_shown(third) == stable[100:]
    assert "Builds 101 to 108 of 108" in third.text and 'rel="next"' not in third.text
    filtered = client.get("/projects/big?channel=1.21&experimental=true&page=2")
    assert '<a rel="prev" href="/projects/big?channel=1.21&amp;experimental=true">' in (
        filtered.text
    )


def test_paging_with_a_filter(big_data_dir, client):
    # every odd build is in 1.21 and none of them is experimental: 60 builds, two pages
    first = client.get("/projects/big?channel=1.21")
    assert numbers_shown(first) == list(range(119, 19, -2))
    assert '<a rel="next" href="/projects/big?channel=1.21&amp;page=2">' in first.text
    second = client.get("/projects/big?channel=1.21&page=2")
    assert numbers_shown(second) == list(range(19, 0, -2))
    assert "Builds 51 to 60 of 60" in second.text


@pytest.mark.parametrize(
    "query, status, message",
    [
        ("page=0", 400, "The page must be a whole number from 1 to 3."),
        ("page=x", 400, "The page must be a whole number from 1 to 3."),
        ("page=%D9%A3", 400, "The page must be a whole number from 1 to 3."),  # Arabic-Indic 3
        ("page=1234567", 400, "The page must be a whole number from 1 to 3."),
        ("page=4", 404, "There is no page 4: this list has 3."),
        ("channel=%FF", 400, "the query string is not valid UTF-8 once percent-decoded"),
        (
            "channel=1.21&channel=1.20",
            400,
            "parameter 'channel' is given more than once: give it once",
        ),
    ],
)
def test_bad_page_queries_get_an_html_error(big_data_dir, client, query, status, message):
    resp = client.get(f"/projects/big?{query}", status=status)
    assert resp.content_type == "text/html"
    assert f'<p class="lead">{message.replace(chr(39), "&#039;")}</p>' in resp.text
    assert resp.headers["Cache-Control"] == "no-store"
    assert resp.headers["Content-Security-Policy"] == CSP


def test_an_unknown_project_is_an_html_404(client):
    resp = client.get("/projects/nope", status=404)
    assert resp.content_type == "text/html"
    assert "<h1>Not found</h1>" in resp.text
    assert "There is no project &#039;nope&#039; here." in resp.text
    assert resp.headers["Cache-Control"] == "no-store"
    client.get("/projects/" + "%3Cb%3E", status=404).mustcontain(
        "There is no project &#039;&lt;b&gt;&#039; here."
    )
    # the JSON API keeps its JSON errors
    assert client.get("/api/v2/builds?project=nope", status=404).json["code"] == ("unknown_project")


def test_a_project_in_another_letter_case_is_served(client):
    assert numbers_shown(client.get("/projects/ALPHA")) == [5, 3, 1]


FILE_NAMES_IN_URLS = [
    ("https://ci.example.org/job/A/1/artifact/a-1.jar", "a-1.jar"),
    ("https://ci.example.org/dl/a%20b.zip?token=1#x", "a b.zip"),
    ("https://ci.example.org/job/A/1/", "1"),
    ("https://ci.example.org/", ""),
    ("https://ci.example.org", ""),
]


@pytest.mark.parametrize("url, name", FILE_NAMES_IN_URLS)
def test_the_file_name_in_a_download_url(url, name):
    assert model.file_name_in_url(url) == name


@pytest.mark.parametrize("url, name", FILE_NAMES_IN_URLS)
def test_the_download_button_and_the_feed_name_the_file(data_dir, client, url, name):
    write_file(data_dir / "alpha.json", make_project([make_build(9, downloadUrl=url)]))
    shown = name or "artifact"
    page = client.get("/projects/alpha").text
    assert f'<span class="file">{shown}</span>' in page
    feed = ET.fromstring(client.get("/api/v2/feed?project=alpha").body)
    links = feed.findall("{http://www.w3.org/2005/Atom}entry/{http://www.w3.org/2005/Atom}link")
    assert [link.get("title") for link in links if link.get("rel") == "alternate"] == [shown]


# --- safety --------------------------------------------------------------------------------------


@pytest.fixture
def hostile_dir(data_dir):
    write_file(
        data_dir / "evil.json",
        make_project(
            [
                make_build(
                    1,
                    commits=[
                        {"message": XSS, "hash": "abc"},
                        {"message": "\"quoted\" & 'single' \x01 \x0b", "hash": "d"},
                    ],
                ),
                make_build(2),
            ],
            ciJob='<img src=x onerror="alert(2)">',
        ),
    )
    return data_dir


@pytest.mark.parametrize("path", ["/", "/projects/evil"])
def test_every_data_value_is_escaped(hostile_dir, client, path):
    resp = client.get(path)
    assert "<script" not in resp.text and "<img" not in resp.text
    assert "&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" in resp.text


def test_hostile_commit_messages_show_as_text(hostile_dir, client):
    resp = client.get("/projects/evil")
    assert '<span class="message">&lt;script&gt;alert(1)&lt;/script&gt;</span>' in resp.text
    # characters HTML and XML cannot carry become U+FFFD, never a 500 (a lone surrogate, the
    # other such character, is refused when the file is read)
    assert (
        '<span class="message">&quot;quoted&quot; &amp; &#039;single&#039; \ufffd \ufffd</span>'
    ) in resp.text


@pytest.mark.parametrize("path", PAGE_PATHS + ["/projects/nope", "/projects/alpha?page=9"])
def test_pages_send_a_strict_content_security_policy(big_data_dir, client, path):
    resp = client.get(path, expect_errors=True)
    assert resp.status_int in (200, 404)
    assert resp.headers["Content-Security-Policy"] == CSP
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    assert "<script" not in resp.text and " style=" not in resp.text


# --- caching -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", PAGE_PATHS + ["/api/v2/feed?project=big", "/static/style.css", "/static/icon.svg"]
)
def test_pages_are_cached_like_json(big_data_dir, app, client, path):
    resp = client.get(path)
    assert resp.headers["Cache-Control"] == "public, max-age=60"
    client.get(path, headers={"If-None-Match": resp.headers["ETag"]}, status=304)
    zipped = raw(app, path, Accept_Encoding="gzip")
    if len(resp.body) >= 1024:
        assert zipped.headers["Content-Encoding"] == "gzip"
        assert gzip.decompress(zipped.body) == resp.body
        assert zipped.headers["Vary"] == "Accept-Encoding"


def test_a_repeated_page_request_does_no_template_work(big_data_dir, client, monkeypatch):
    calls = []
    real_render = rendering.render
    monkeypatch.setattr(
        rendering, "render", lambda *a, **k: calls.append(a) or real_render(*a, **k)
    )
    real_feed = pages.feed_xml
    monkeypatch.setattr(pages, "feed_xml", lambda *a: calls.append(a) or real_feed(*a))
    paths = PAGE_PATHS + ["/api/v2/feed?project=big", "/api/v2/feed?project=alpha&channel=1.21"]
    first = [client.get(path, headers={"Accept-Encoding": "gzip"}).body for path in paths]
    assert len(calls) == len(paths)
    again = [
        client.get(path, headers={"Accept-Encoding": accept}).body
        for accept in ("gzip", "identity")
        for path in paths
    ]
    assert len(calls) == len(paths)
    assert again == first + first


def test_pages_change_with_the_data(data_dir, client):
    etag = client.get("/projects/alpha").headers["ETag"]
    write_file(data_dir / "alpha.json", make_project([make_build(40)]))
    resp = client.get("/projects/alpha", headers={"If-None-Match": etag})
    assert resp.status_int == 200 and numbers_shown(resp) == [40]


def test_unknown_channels_and_pages_are_not_kept(client, app):
    client.get("/projects/alpha")
    unknown = []
    for i in range(20):
        unknown += [f"/projects/alpha?channel=x{i}", f"/api/v2/feed?project=alpha&channel=x{i}"]
        client.get(unknown[-2])
        client.get(unknown[-1])
        client.get(f"/projects/alpha?page={i + 2}", status=404)
    assert recalled(app, "/projects/alpha")
    assert not any(recalled(app, target) for target in unknown)


def test_only_the_first_pages_are_kept(client, data_dir, app):
    write_file(data_dir / "huge.json", make_project([make_build(n) for n in range(1, 302)]))
    for page in range(1, 8):
        assert len(numbers_shown(client.get(f"/projects/huge?page={page}"))) == (
            50 if page < 7 else 1
        )
    kept = [page for page in range(1, 8) if recalled(app, f"/projects/huge?page={page}")]
    assert kept == [1, 2, 3, 4]


def test_static_files(client):
    css = client.get("/static/style.css")
    assert css.content_type == "text/css" and b"prefers-color-scheme: dark" in css.body
    assert client.get("/static/icon.svg").content_type == "image/svg+xml"
    assert client.get("/static/nope.css", status=404).json["code"] == "not_found"


# --- the feed ------------------------------------------------------------------------------------


def feed_of(resp):
    parsed = feedparser.parse(resp.body)
    assert not parsed.bozo, parsed.get("bozo_exception")
    assert parsed.version == "atom10"
    return parsed


@pytest.mark.parametrize(
    "query, numbers",
    [
        ("project=alpha", [5, 3, 1]),
        ("project=alpha&experimental=true", [8, 7, 5, 3, 2, 1]),
        ("project=Alpha&channel=1.21&experimental=TRUE", [7, 5]),
        ("project=alpha&channel=9.9", []),
    ],
)
def test_the_feed_holds_the_builds_passing_the_filters(client, query, numbers):
    resp = client.get(f"/api/v2/feed?{query}")
    assert resp.content_type == "application/atom+xml"
    feed = feed_of(resp)
    assert [e.title.split(" ")[1] for e in feed.entries] == [f"#{n}" for n in numbers]
    api = client.get(f"/api/v2/builds?{query}").json[::-1]
    for entry, build in zip(feed.entries, api, strict=True):
        experimental = ", experimental" if build["isExperimental"] else ""
        assert (
            entry.title == f"Alpha #{build['buildNumber']} ({build['channelVersion']}"
            f"{experimental})"
        )
        assert entry.id == f"tag:buildshelf,2026:alpha/builds/{build['buildNumber']}"
        assert calendar.timegm(entry.updated_parsed) == build["timestamp"] // 1000
        assert entry.link == build["downloadUrl"]
        assert [link.href for link in entry.links if link.rel == "related"] == [build["url"]]
        assert entry.content[0].value == "\n".join(
            f"{c['hash'][:7]} {c['message']}" for c in build["commits"]
        ) or ("No commits listed.")
        assert [tag.term for tag in entry.tags] == [build["channelVersion"]]


def test_the_feed_itself(client):
    feed = feed_of(client.get("/api/v2/feed?project=alpha&channel=1.21&experimental=true"))
    assert feed.feed.id == "tag:buildshelf,2026:alpha/feed;channel=1.21;experimental"
    assert feed.feed.title == "Alpha: builds in channel 1.21"
    assert feed.feed.author_detail == {"name": "Alpha", "href": "https://ci.example.org/job/Alpha/"}
    assert calendar.timegm(feed.feed.updated_parsed) == (1700000000000 + 7) // 1000
    assert feed_of(client.get("/api/v2/feed?project=beta")).feed.id == (
        "tag:buildshelf,2026:beta/feed"
    )
    assert feed_of(client.get("/api/v2/feed?project=alpha")).feed.title == ("Alpha: stable builds")


def test_the_feed_holds_the_newest_50(big_data_dir, client):
    feed = feed_of(client.get("/api/v2/feed?project=big&experimental=true"))
    assert [e.id.rsplit("/", 1)[1] for e in feed.entries] == [str(n) for n in range(120, 70, -1)]


def test_the_feed_ids_do_not_depend_on_the_host(client):
    here = client.get("/api/v2/feed?project=alpha").body
    there = client.get(
        "/api/v2/feed?project=alpha",
        extra_environ={"HTTP_HOST": "builds.example.net", "wsgi.url_scheme": "https"},
    ).body
    assert here == there


def test_hostile_data_makes_a_well_formed_feed(hostile_dir, client):
    resp = client.get("/api/v2/feed?project=evil")
    root = ET.fromstring(resp.body)  # well-formed XML, control characters and all
    assert root.tag == "{http://www.w3.org/2005/Atom}feed"
    feed = feed_of(resp)
    assert feed.entries[1].content[0].value == (
        "abc <script>alert(1)</script>\nd \"quoted\" & 'single' \ufffd \ufffd"
    )


@pytest.mark.parametrize(
    "query",
    [
        "",
        "project=",
        "project=nope",
        "project=alpha&version=1",
        "project=alpha&project=beta",
        "project=alpha%00",
        "project=alpha&channel=%FF",
    ],
)
def test_the_feed_refuses_what_builds_refuses_with_the_same_json(client, query):
    feed = client.get(f"/api/v2/feed?{query}", expect_errors=True)
    builds = client.get(f"/api/v2/builds?{query}", expect_errors=True)
    assert feed.status_int == builds.status_int >= 400
    assert feed.json == builds.json and feed.content_type == "application/json"


# --- the stylesheet ------------------------------------------------------------------------------


def luminance(hex_colour):
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a, b):
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


TEXT_PAIRS = [
    ("text", "bg"),
    ("text", "surface"),
    ("muted", "bg"),
    ("muted", "surface"),
    ("link", "bg"),
    ("link", "surface"),
    ("on-accent", "accent"),
    ("on-accent", "accent-hover"),
    ("chip-text", "chip-bg"),
    ("badge-text", "badge-bg"),
    ("text", "code-bg"),
]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_text_colour_meets_wcag_aa(scheme):
    with open(f"{rendering.VIEWS}/style.css") as f:
        css = f.read()
    light, dark = css.split("@media (prefers-color-scheme: dark)")
    colours = dict(
        re.findall(
            r"--([\w-]+): (#[0-9a-f]{6})",
            light if scheme == "light" else dark[: dark.index("}\n}")],
        )
    )
    assert {name for pair in TEXT_PAIRS for name in pair} <= colours.keys()
    for text, background in TEXT_PAIRS:
        assert contrast(colours[text], colours[background]) >= 4.5, (scheme, text, background)


# --- installed without the source tree ----------------------------------------------------------


@pytest.mark.system
def test_a_real_install_is_one_package_that_finds_its_templates(tmp_path):
    """`pip install .` puts the buildshelf package, with views/ in it, and nothing else at the
    top of site-packages; the pages must find views/ from any directory."""
    root = pages.os.path.dirname(pages.os.path.dirname(pages.os.path.abspath(__file__)))
    # A copy: pip builds in the source tree and would leave build/ behind in the developer's.
    source = tmp_path / "source"
    shutil.copytree(
        root,
        source,
        ignore=shutil.ignore_patterns(
            ".*", "build", "*.egg-info", "__pycache__", "bench", "data", "docs", "tests"
        ),
    )
    # --ignore-installed: else pip would uninstall the developer's editable install
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--ignore-installed",
            "--no-build-isolation",
            "--no-index",
            "--prefix",
            str(tmp_path / "prefix"),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [site] = (tmp_path / "prefix").glob("lib/python3*/site-packages")
    top_level = sorted(p.name for p in site.iterdir() if not p.name.endswith(".dist-info"))
    assert top_level == ["buildshelf"]
    script = (
        "import os, webtest\n"
        "from buildshelf import server, store\n"
        "from buildshelf.web import rendering\n"
        "client = webtest.TestApp(server.make_app(store.Store(os.path.join(os.path.dirname(server.__file__), 'data'))))\n"
        "print(rendering.VIEWS)\n"
        "print(client.get('/').status, client.get('/static/style.css').status)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd="/",
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(site)},
    )
    assert done.returncode == 0, done.stderr
    views, statuses = done.stdout.splitlines()
    assert views == str(site / "buildshelf" / "web" / "views")
    assert sorted(pages.os.listdir(views)) == sorted(pages.os.listdir(rendering.VIEWS))
    assert statuses == "200 OK 200 OK"


# --- issue 17: pages that agree --------------------------------------------------------------


def test_each_card_links_to_a_page_with_the_number_of_builds_it_shows(big_data_dir, client):
    index = client.get("/")
    cards = re.findall(r'<a href="([^"]+)">(?:All ([\d,]+) builds|The one build)</a>', index.text)
    assert len(cards) == 3  # alpha, beta, big: beta has one build
    for href, count in cards:
        page = client.get(href.replace("&amp;", "&"))
        shown = re.search(r"(?:of|^)\s*([\d,]+)(?: builds?)?, newest first", page.text, re.M)
        total = int((count or "1").replace(",", ""))
        assert shown and int(shown.group(1).replace(",", "")) == total, href


def test_a_trailing_slash_moves_to_the_project_page(client):
    resp = client.get("/projects/alpha/?channel=1.21&experimental=true", status=301)
    assert resp.location.endswith("/projects/alpha?channel=1.21&experimental=true")
    assert client.get("/projects/ALPHA/", status=301).location.endswith("/projects/alpha")
    gone = client.get("/projects/nope/", status=404)
    assert gone.content_type == "text/html" and "There is no project &#039;nope&#039;" in gone


BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


@pytest.mark.parametrize(
    "path", ["/nope", "/projects", "/projects/", "/projects/alpha/builds", "/static/nope.css"]
)
def test_an_unknown_page_path_is_an_html_404_for_a_browser(client, path):
    resp = client.get(path, headers=BROWSER, status=404)
    assert resp.content_type == "text/html" and "Not found" in resp.text
    assert resp.headers["Content-Security-Policy"] == CSP
    assert resp.headers["Cache-Control"] == "no-store"
    assert client.get(path, status=404).json["code"] == "not_found"  # not a browser: JSON


@pytest.mark.parametrize("path", ["/api/v2/nope", "/api/v2/builds?project=nope", "/downloads/x"])
def test_the_api_answers_json_even_to_a_browser(client, path):
    assert client.get(path, headers=BROWSER, status=404).content_type == "application/json"


def test_the_feed_links_to_itself(client):
    path = "/api/v2/feed?project=alpha&channel=1.21&experimental=true"
    feed = feed_of(client.get(path))
    [self_link] = [link for link in feed.feed.links if link.rel == "self"]
    assert self_link.href == "http://127.0.0.1:8080" + path
    assert self_link.type == "application/atom+xml"


@pytest.mark.parametrize(
    "query, page",
    [
        ("project=alpha", "/projects/alpha"),
        ("project=Alpha&channel=1.21&experimental=true",
         "/projects/alpha?channel=1.21&experimental=true"),
    ],
)  # fmt: skip
def test_the_feed_s_alternate_is_the_project_page_with_its_filters(client, query, page):
    feed = feed_of(client.get(f"/api/v2/feed?{query}"))
    [alternate] = [link for link in feed.feed.links if link.rel == "alternate"]
    assert (alternate.href, alternate.type) == ("http://127.0.0.1:8080" + page, "text/html")
    assert client.get(page).status_int == 200  # the builds the feed holds, as a page
    assert feed.feed.author_detail.href == "https://ci.example.org/job/Alpha/"  # who builds


def test_a_timestamp_in_seconds_shows_as_the_same_time_as_in_milliseconds(data_dir, client):
    builds = [make_build(1, timestamp=1700000000), make_build(2, timestamp=1700000060000)]
    write_file(data_dir / "alpha.json", make_project(builds))
    text = text_of(client.get("/projects/alpha").text)
    assert "#1 1.21 2023-11-14 22:13 UTC" in text and "#2 1.21 2023-11-14 22:14 UTC" in text
    feed = feed_of(client.get("/api/v2/feed?project=alpha"))
    assert [calendar.timegm(e.updated_parsed) for e in feed.entries] == [1700000060, 1700000000]
    served = client.get("/api/v2/builds/all?project=alpha").json
    assert [b["timestamp"] for b in served] == [1700000000, 1700000060000]  # as in the file


# --- yanked builds (issue 38) ---

YANKED_AT = 1700000600000  # 2023-11-14 22:23:20 UTC


def yanked_numbers(resp):
    return [
        int(n) for n in re.findall(r'<article class="build yanked" id="yanked-(\d+)"', resp.text)
    ]


@pytest.fixture
def yanked_dir(data_dir):
    """alpha: builds 1, 3 and 5 served; 2 (with a hostile reason of two lines) and 4
    (experimental, no reason) yanked."""
    builds = [
        make_build(1, "1.20"),
        make_build(2, "1.20", yankedAt=YANKED_AT, yankReason=f"{XSS}\nsee issue 12"),
        make_build(3, "1.21"),
        make_build(4, "1.21", experimental=True, yankedAt=YANKED_AT + 60_000),
        make_build(5, "1.21"),
    ]
    write_file(data_dir / "alpha.json", make_project(builds))
    return data_dir


def test_the_project_page_lists_yanked_builds_apart_marked_with_their_reason(yanked_dir, client):
    page = client.get("/projects/alpha")
    assert numbers_shown(page) == [5, 3, 1] and yanked_numbers(page) == [4, 2]
    served, _, yanked = page.text.partition('<h2 id="yanked">Yanked builds</h2>')
    assert yanked and "yanked-" not in served
    text = " ".join(re.sub(r"<[^>]+>", "", yanked).split())  # as a browser shows it
    assert (
        "Build #4 1.21 Yanked Experimental built 2023-11-14 22:13 UTC, yanked 2023-11-14 22:24 UTC"
        " No reason was given." in text
    )
    assert "Build #2 1.20 Yanked built 2023-11-14 22:13 UTC, yanked 2023-11-14 22:23 UTC" in text
    # The reason is the yanker's text: escaped, its lines kept.
    assert f'<p class="reason">Why: {html.escape(XSS)}\nsee issue 12</p>' in yanked
    assert "<script" not in page.text
    # No way to download a yanked build: its link would answer 410.
    for number in (2, 4):
        assert alpha_url(number) not in page.text
        assert f'href="https://ci.example.org/job/Alpha/{number}/"' in yanked  # its CI run


@pytest.mark.parametrize(
    "query, yanked",
    [("channel=1.20", [2]), ("channel=1.21", [4]), ("experimental=true", [4, 2]), ("page=2", [])],
)
def test_the_yanked_builds_follow_the_channel_on_the_first_page(yanked_dir, client, query, yanked):
    builds = [make_build(n, "1.21") for n in range(10, 70)]
    if query == "page=2":  # a second page to show
        doc = make_project([*builds, make_build(2, "1.20", yankedAt=YANKED_AT)])
        write_file(yanked_dir / "alpha.json", doc)
    assert yanked_numbers(client.get(f"/projects/alpha?{query}")) == yanked


def test_a_project_with_only_yanked_builds_lists_them(yanked_dir, client):
    write_file(yanked_dir / "alpha.json", make_project([make_build(2, yankedAt=YANKED_AT)]))
    page = client.get("/projects/alpha")
    assert "No matching builds" in page.text and yanked_numbers(page) == [2]


def test_the_newest_50_yanked_builds_are_listed(data_dir, client):
    builds = [make_build(n, yankedAt=YANKED_AT) for n in range(1, 61)] + [make_build(99)]
    write_file(data_dir / "alpha.json", make_project(builds))
    page = client.get("/projects/alpha")
    assert yanked_numbers(page) == list(range(60, 10, -1))
    assert "10 older yanked builds not listed." in text_of(page.text)


# --- issue 25: pages made for sharing ----------------------------------------------------------

SHA = "4c7b68ce5c0be31b0767eb687d1cbee97723d7b74c7b68ce5c0be31b0767eb68"
KEPT_URL = f"http://127.0.0.1:8080/downloads/kept/2/{SHA}/kept-2.jar"


@pytest.fixture
def kept_dir(data_dir):
    """A project whose build 2 is kept here and build 1 has integrity data but is kept
    elsewhere."""
    kept = make_build(2, sha256=SHA, size=1234, file="kept-2.jar")
    del kept["downloadUrl"]
    write_file(
        data_dir / "kept.json",
        make_project([make_build(1, sha256="ab" * 32, size=99), kept], ciJob="Kept"),
    )
    return data_dir


@pytest.mark.parametrize(
    "query, latest",
    [
        ("", "/downloads/latest?project=alpha"),
        ("?channel=1.20", "/downloads/latest?project=alpha&channel=1.20"),
        (
            "?channel=1.21&experimental=true",
            "/downloads/latest?project=alpha&channel=1.21&experimental=true",
        ),
        ("?experimental=TRUE&page=1", "/downloads/latest?project=alpha&experimental=true"),
    ],
)
def test_a_project_page_links_the_latest_build_of_what_it_shows(client, query, latest):
    page = client.get("/projects/alpha" + query)
    links = re.findall(r'<a class="latest" href="([^"]+)"', page.text)
    assert [href.replace("&amp;", "&") for href in links] == [latest]
    # the link leads to the newest build the page lists, as the API names it
    newest = numbers_shown(page)[0]
    target = client.get(latest, status=302).location
    assert target == f"https://ci.example.org/job/Alpha/{newest}/artifact/alpha-{newest}.jar"


def test_a_page_listing_no_build_has_no_latest_link(client):
    assert 'class="latest"' not in client.get("/projects/alpha?channel=9.9").text


def test_each_kept_build_links_its_checksum_line(kept_dir, client):
    for path in ("/", "/projects/kept"):
        page = client.get(path).text
        # build 1's file is kept elsewhere: no line of it is served here
        assert re.findall(r'href="([^"]*\.sha256)"', page) == [f"{KEPT_URL}.sha256"], path
    line = client.get(KEPT_URL.removeprefix("http://127.0.0.1:8080") + ".sha256")
    assert line.text == f"{SHA}  kept-2.jar\n"


def test_the_index_cards_show_the_size_and_sha256_of_kept_builds(kept_dir, client):
    text = text_of(client.get("/").text)
    assert (
        "Kept Latest stable build #2 1.21 2023-11-14 22:13 UTC Download kept-2.jar build #2, "
        f"channel 1.21 1.2 KiB, SHA-256 {SHA[:12]}… .sha256 All 2 builds"
    ) in text
    assert "build #5, channel 1.21 Newer experimental build" in text  # no integrity data


API_PAGE = "/api-document"


def test_the_api_document_link_opens_a_page(client):
    for path in ("/", "/projects/alpha"):
        page = client.get(path).text
        assert f'<a href="{API_PAGE}">API document</a>' in page
        assert 'href="/api/v2/openapi.json">API document' not in page
    page = client.get(API_PAGE)
    assert page.content_type == "text/html"
    assert page.headers["Content-Security-Policy"] == CSP
    assert "<script" not in page.text and " style=" not in page.text
    assert 'href="/api/v2/openapi.json"' in page.text  # the document itself, for programs


def test_the_api_page_shows_every_operation_parameter_and_response(client):
    from buildshelf.web import openapi

    text = html.unescape(text_of(client.get(API_PAGE).text))
    document = openapi.document()
    for path, method, operation in (
        (path, method, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
    ):
        assert f"{method.upper()} {path} {operation['summary']}" in text
        for parameter in operation.get("parameters", []):
            name = parameter["$ref"].rsplit("/", 1)[1] if "$ref" in parameter else None
            parameter = document["components"]["parameters"][name] if name else parameter
            assert f"{parameter['name']} {parameter['in']}" in text, (path, parameter["name"])
        section = text.split(f"{method.upper()} {path} ", 1)[1]
        for status in operation["responses"]:
            assert f" {status} " in section[:20000], (path, status)
    for name in ("Build", "Project", "Error", "Health", "UpdateCheck"):
        assert f'id="schema-{name}"' in client.get(API_PAGE).text
    assert "the query parameter &#039;project&#039; is required" in client.get(API_PAGE).text


def test_the_api_page_shows_the_mode_served(data_dir):

    from buildshelf import server
    from buildshelf import store as store_module

    client = webtest.TestApp(
        server.make_app(store_module.Store(data_dir, check_interval=0), compat="upstream")
    )
    assert 'id="schema-BuildsEnvelope"' in client.get(API_PAGE).text


def test_the_api_page_is_cached_like_the_pages(client):
    resp = client.get(API_PAGE)
    assert resp.headers["Cache-Control"] == "public, max-age=60"
    client.get(API_PAGE, headers={"If-None-Match": resp.headers["ETag"]}, status=304)


# --- issue 26: download counts --------------------------------------------------------------------

TODAY = datetime.date(2026, 11, 26)  # the window's last day: 2026-08-29 is its first


def alpha_url(number):
    return f"https://ci.example.org/job/Alpha/{number}/artifact/alpha-{number}.jar"


COUNTED_ROWS = {
    ("alpha", 5, alpha_url(5), "2026-11-26"): 7,
    ("alpha", 5, "ab" * 32, "2026-11-26"): 3,  # the same build under another file key: summed
    ("alpha", 5, alpha_url(5), "2026-08-29"): 2,  # the window's first day
    ("alpha", 5, alpha_url(5), "2026-08-28"): 100,  # before the window: in the totals only
    ("alpha", 8, alpha_url(8), "2026-11-20"): 1,
    ("alpha", 99, "gone", "2026-11-25"): 50,  # a build no longer served: shown nowhere
    ("beta", 10, alpha_url(10), "2026-11-01"): 1234,
}


class FakeCounter:
    """What the pages read of a counts.Counter: tally(), a new Tally when the counts change."""

    def __init__(self, rows):
        self.current = counts.Tally.of(rows)

    def tally(self):
        return self.current


@pytest.fixture
def counter(monkeypatch):
    monkeypatch.setattr(shown_counts, "utc_day", lambda: (TODAY - shown_counts.EPOCH).days)
    return FakeCounter(COUNTED_ROWS)


@pytest.fixture
def counted_app(store, counter):
    return server.make_app(store, counter=counter)


@pytest.fixture
def counted(counted_app, store):
    """A client of the app with counting on."""
    return refreshing_client(counted_app, store)


def chart_of(page):
    """The page's one chart, parsed as XML (so it is well-formed), and the table of its days."""
    [svg] = re.findall(r"<svg.*?</svg>", page, re.S)
    days = re.findall(r"<th scope=\"row\">(\d{4}-\d\d-\d\d)</th>\s*<td>([\d,]+)</td>", page)
    return ET.fromstring(svg), [(day, int(n.replace(",", ""))) for day, n in days]


def summary_of(page):
    """The words above the chart, as a browser shows them."""
    [summary] = re.findall(r'<p class="downloads-summary">(.*?)</p>', page, re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", summary)).split())


def test_every_build_card_shows_its_downloads(counted):
    text = text_of(counted.get("/projects/alpha?experimental=true").text)
    for card in [
        "Build #8 1.21.1-pre1 Experimental 1 download 2023-11-14 22:13 UTC",
        "Build #7 1.21 Experimental 0 downloads 2023-11-14 22:13 UTC",
        # every day and every file of build 5: 7 + 3 + 2 + 100
        "Build #5 1.21 112 downloads 2023-11-14 22:13 UTC",
        "Build #3 1.20 0 downloads 2023-11-14 22:13 UTC",
        "Build #1 1.20 0 downloads",
    ]:
        assert card in text


def test_the_index_shows_each_projects_total(counted):
    text = text_of(counted.get("/").text)
    # build 99 is not served: its 50 are in no total
    for card in [
        "Alpha 113 downloads Latest stable build #5 1.21 2023-11-14 22:13 UTC 112 downloads",
        "Newer experimental build #8 1.21.1-pre1 Experimental 2023-11-14 22:13 UTC 1 download",
        "Beta 1,234 downloads Latest stable build #10 2.0 2023-11-14 22:13 UTC 1,234 downloads",
    ]:
        assert card in text


def test_a_project_page_shows_its_total_and_a_chart_of_the_last_90_days(counted):
    page = counted.get("/projects/alpha").text
    assert "Alpha Atom feed of this list Javadoc CI job JSON Downloads 113 downloads" in (
        text_of(page)
    )
    assert summary_of(page) == (
        "113 downloads in all; 13 in the last 90 days, 2026-08-29 to 2026-11-26 (UTC). "
        "The most in one day: 10, on 2026-11-26."
    )
    svg, days = chart_of(page)
    # every day of the window, oldest first, zeros included: the numbers as text
    assert len(days) == 90 and days[0] == ("2026-08-29", 2) and days[-1] == ("2026-11-26", 10)
    assert days[-2] == ("2026-11-25", 0) and days[-7] == ("2026-11-20", 1)
    assert sum(n for _, n in days) == 13
    # drawn on the server, for people who see it; named and described for those who do not
    ns = {"svg": "http://www.w3.org/2000/svg"}
    assert svg.get("role") == "img"
    title, desc = svg.find("svg:title", ns), svg.find("svg:desc", ns)
    assert svg.get("aria-labelledby") == title.get("id") and title.get("id")
    assert svg.get("aria-describedby") == desc.get("id") and desc.get("id")
    assert title.text == "Alpha: downloads per day, the last 90 days"
    assert "13 downloads from 2026-08-29 to 2026-11-26" in desc.text
    bars = svg.findall("svg:rect[@class='bar']", ns)
    assert [bar.find("svg:title", ns).text for bar in bars] == [
        "2026-08-29: 2 downloads",
        "2026-11-20: 1 download",
        "2026-11-26: 10 downloads",
    ]
    heights = [float(bar.get("height")) for bar in bars]
    assert heights[2] == pytest.approx(5 * heights[0]) == pytest.approx(10 * heights[1])
    lefts = [float(bar.get("x").rstrip("%")) for bar in bars]
    assert lefts[0] < 1.2 and lefts[2] > 98.8 - float(bars[2].get("width").rstrip("%"))
    labels = [t.text for t in svg.findall("svg:text", ns)]
    assert labels == ["10", "2026-08-29", "2026-10-13", "2026-11-26"]


def test_the_chart_ends_today_whatever_the_tally(counted, monkeypatch):
    before = counted.get("/projects/alpha")
    monkeypatch.setattr(shown_counts, "utc_day", lambda: (TODAY - shown_counts.EPOCH).days + 1)
    after = counted.get("/projects/alpha", headers={"If-None-Match": before.headers["ETag"]})
    assert after.status_int == 200
    _, days = chart_of(after.text)
    assert days[0] == ("2026-08-30", 0) and days[-2:] == [("2026-11-26", 10), ("2026-11-27", 0)]


def test_a_project_without_downloads_has_a_chart_of_zeros(counted, data_dir):
    write_file(data_dir / "gamma.json", make_project([make_build(4)], ciJob="Gamma"))
    page = counted.get("/projects/gamma").text
    assert summary_of(page) == (
        "0 downloads in all; none in the last 90 days, 2026-08-29 to 2026-11-26 (UTC)."
    )
    svg, days = chart_of(page)
    assert [n for _, n in days] == [0] * 90
    assert svg.findall("{http://www.w3.org/2000/svg}rect") == []
    assert "Gamma 0 downloads Latest stable build" in text_of(counted.get("/").text)


def test_files_kept_elsewhere_are_downloaded_through_the_counting_redirect(kept_dir, counted):
    for path in ("/", "/projects/kept", "/projects/alpha?experimental=true"):
        hrefs = re.findall(r'<a class="download" href="([^"]+)"', counted.get(path).text)
        assert hrefs, path
        for href in (html.unescape(href) for href in hrefs):
            if href.startswith(KEPT_URL.partition("/downloads/")[0]):
                assert href == KEPT_URL  # a kept file is counted where it is served
                continue
            route, _, query = href.partition("?")
            assert route == "/api/v2/download"
            asked = parse_qs(query, strict_parsing=True)
            # Whose download it is, named: the fixtures' projects share URLs.
            owners = {"/": {"alpha", "beta", "kept"}, "/projects/kept": {"kept"}}
            assert asked["project"][0] in owners.get(path, {"alpha"})
            assert asked["url"][0] in (alpha_url(n) for n in range(1, 11))


@pytest.mark.parametrize(
    "url",
    [
        "https://ci.example.org/a%20b/x.jar?x=1&y=2&url=z#frag",
        "https://ci.example.org/%E2%9C%93/+plus+/x%2By.jar;v=1",
    ],
)
def test_the_counting_redirect_names_the_download_url_exactly(data_dir, counted, url):
    write_file(data_dir / "alpha.json", make_project([make_build(9, downloadUrl=url)]))
    [href] = re.findall(r'<a class="download" href="([^"]+)"', counted.get("/projects/alpha").text)
    route, _, query = html.unescape(href).partition("?")
    assert route == "/api/v2/download"
    assert parse_qs(query, strict_parsing=True) == {"url": [url], "project": ["alpha"]}


@pytest.mark.parametrize("path", PAGE_PATHS)
def test_without_counting_no_count_shows_and_files_are_linked(big_data_dir, kept_dir, client, path):
    page = client.get(path).text
    assert not re.search(r"\d downloads?\b", text_of(page)) and 'class="count"' not in page
    assert "<svg" not in page and "/api/v2/download?" not in page
    for href in re.findall(r'<a class="download" href="([^"]+)"', page):
        assert href.startswith(("https://ci.example.org/", "http://127.0.0.1:8080/downloads/"))


def test_counted_pages_are_made_once_per_tally(counted, counter, monkeypatch):
    calls = []
    real_render = rendering.render
    monkeypatch.setattr(
        rendering, "render", lambda *a, **k: calls.append(a) or real_render(*a, **k)
    )
    paths = ["/", "/projects/alpha", "/projects/alpha?experimental=true"]
    first = [counted.get(path) for path in paths]
    again = [counted.get(path) for path in paths]
    assert len(calls) == len(paths) and [r.body for r in again] == [r.body for r in first]
    counter.current = counts.Tally.of({**COUNTED_ROWS, ("alpha", 3, alpha_url(3), "2026-11-26"): 5})
    later = [
        counted.get(path, headers={"If-None-Match": resp.headers["ETag"]})
        for path, resp in zip(paths, first)
    ]
    assert [r.status_int for r in later] == [200, 200, 200] and len(calls) == 2 * len(paths)
    assert "Alpha 118 downloads" in text_of(later[0].text)
    assert "Build #3 1.20 5 downloads" in text_of(later[1].text)


def test_counted_pages_are_cached_like_json(counted_app, counted):
    for path in PAGE_PATHS[:3]:
        resp = counted.get(path)
        assert resp.headers["Cache-Control"] == "public, max-age=60"
        counted.get(path, headers={"If-None-Match": resp.headers["ETag"]}, status=304)
        zipped = raw(counted_app, path, Accept_Encoding="gzip")
        assert zipped.headers["Content-Encoding"] == "gzip"
        assert gzip.decompress(zipped.body) == resp.body


def test_pages_keep_no_tally_that_is_not_current(counted, counter):
    for n in range(1, 6):  # each tally shown, then replaced
        for path in PAGE_PATHS[:3]:
            counted.get(path)
        old = weakref.ref(counter.current)
        counter.current = counts.Tally.of({("alpha", 5, alpha_url(5), "2026-11-26"): n})
        # freed by whoever replaced it (the counter's thread), not by the next request
        assert old() is None
    assert "Alpha 5 downloads" in text_of(counted.get("/").text)


@pytest.mark.parametrize("path", PAGE_PATHS[:3])
def test_counted_pages_keep_the_strict_content_security_policy(counted, path):
    resp = counted.get(path)
    assert resp.headers["Content-Security-Policy"] == CSP
    assert "<script" not in resp.text and " style=" not in resp.text


def test_the_chart_is_styled_by_the_stylesheet_in_both_schemes():
    with open(f"{rendering.VIEWS}/style.css") as f:
        css = f.read()
    for selector in (".chart .bar", ".chart .grid", ".chart text"):
        assert selector in css
    # a bar is a graphic: WCAG asks 3:1 against what it is drawn on
    light, dark = css.split("@media (prefers-color-scheme: dark)")
    for part in (light, dark[: dark.index("}\n}")]):
        colours = dict(re.findall(r"--([\w-]+): (#[0-9a-f]{6})", part))
        assert contrast(colours["accent"], colours["surface"]) >= 3


def test_counted_pages_are_answered_from_memory_while_the_counts_stand(
    counted_app, counted, counter, monkeypatch
):
    for path in PAGE_PATHS[:3]:
        counted.get(path)
        assert recalled(counted_app, path)
    counter.current = counts.Tally.of({("alpha", 5, alpha_url(5), "2026-11-26"): 4})
    assert not any(recalled(counted_app, path) for path in PAGE_PATHS[:3])
    assert "Alpha 4 downloads" in text_of(counted.get("/").text)
    assert recalled(counted_app, "/")
    monkeypatch.setattr(shown_counts, "utc_day", lambda: (TODAY - shown_counts.EPOCH).days + 1)
    assert not recalled(counted_app, "/")  # the chart's window moved


def test_the_day_changes_at_midnight_utc(monkeypatch):
    midnight = calendar.timegm((2026, 11, 27, 0, 0, 0))
    for now, day in [(midnight - 0.001, TODAY), (midnight, TODAY + datetime.timedelta(days=1))]:
        monkeypatch.setattr(shown_counts.time, "time", lambda now=now: now)
        assert shown_counts.EPOCH + datetime.timedelta(days=shown_counts.utc_day()) == day


def test_a_yanked_builds_page_links_the_latest_through_the_counting_redirect(
    data_dir, counted, tmp_path
):
    """As the project page links a file kept elsewhere: so that its download counts."""
    jar = tmp_path / "alpha-9.jar"
    jar.write_bytes(b"PK a jar")
    assert cli.main(["publish", "alpha", "--data", str(data_dir), "--build", "9", "--channel",
                     "1.21", "--timestamp", "1700000000000", "--file", str(jar)]) == 0  # fmt: skip
    assert cli.main(["yank", "alpha", "9", "--data", str(data_dir)]) == 0
    path = f"/downloads/alpha/9/{hashlib.sha256(b'PK a jar').hexdigest()}/alpha-9.jar"
    page = counted.get(path, headers=BROWSER, status=410)
    [href] = re.findall(r'<a class="download" href="([^"]+)"', page.text)
    assert html.unescape(href) == "/api/v2/download?" + urlencode(
        {"url": alpha_url(5), "project": "alpha"}
    )
