"""The pages in a real browser: headless Chromium (Debian's) driving the real server.

Over the sample data plus a hostile project, it checks what only a browser can tell: the
page renders, the console is clean, the CSP blocks nothing we serve, no request leaves the
server, the filters work by clicking, hostile data stays text, and 375 px needs no sideways
scrolling. It takes screenshots into a temporary directory, or into $BUILDSHELF_SCREENSHOTS
when set (`BUILDSHELF_SCREENSHOTS=docs/screenshots` refreshes the docs' pictures).

Without Chromium these tests are skipped, naming the command that installs it, so that
`pip install -e '.[test]' && pytest` works on any machine; in CI (CI=true) they fail instead.
"""

import datetime
import json
import os
import random
import re
import shutil
import socket
import time
import urllib.error
import urllib.request

import pytest

from buildshelf import cli, counts, server, store
from helpers import ROOT, free_port, make_build, make_project, real_server, write_file

# Each test here starts a process (tests/conftest.py): none is in the fast lane.
pytestmark = pytest.mark.system

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
XSS = "<script>alert(1)</script>"
LONG_WORD = "Refactor" * 40  # no break opportunity: must wrap, not widen the page
# Chromium reaches for Google services unless told not to; none of that is reachable here.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--disable-dev-shm-usage",
    "--lang=en-US",
]
# Recorded before any page script could run (there is none): every CSP violation.
WATCH_CSP = (
    "window.__violations = [];document.addEventListener('securitypolicyviolation', "
    "e => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));"
)


def sample_kept_link(slug, number):
    """The download URL of a build the sample data keeps."""
    with open(os.path.join(ROOT, "data", f"{slug}.json")) as f:
        [build] = [b for b in json.load(f)["builds"] if b["buildNumber"] == number]
    return f"/downloads/{slug}/{number}/{build['sha256']}/{build['file']}"


# Build 11 of the sample's waystone, kept: base_url's server has it yanked, for a hostile
# reason with a long word.
YANKED_LINK = sample_kept_link("waystone", 11)
YANK_REASON = f"{XSS} broke saves\n<img src=x onerror=alert(3)> {LONG_WORD}"


def chromium_missing():
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(path)]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (pip install -e '.[test]')")
    return missing


def serving(data, *flags):
    """The real server over `data`, on a free port: its base URL while the generator runs."""
    with real_server(data, "--quiet", *flags) as (port, _):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def sample_url(tmp_path_factory):
    """The real server over the sample data, as it ships (its download counts kept outside
    the checkout, so that the server never writes to it)."""
    state = tmp_path_factory.mktemp("browser-state")
    yield from serving(os.path.join(ROOT, "data"), "--state", str(state))


@pytest.fixture(scope="module")
def base_url(tmp_path_factory):
    """The real server over the sample data plus a hostile project of 60 builds."""
    data = tmp_path_factory.mktemp("browser-data")
    shutil.copytree(os.path.join(ROOT, "data"), data, dirs_exist_ok=True)
    write_file(
        data / "evil.json",
        make_project(
            [
                make_build(
                    n,
                    "1.0-" + "x" * 40,
                    commits=[
                        {"message": XSS, "hash": "badc0de"},
                        {"message": f"<img src=x onerror=alert(2)> {LONG_WORD}", "hash": "f00d"},
                    ],
                    downloadUrl=f"https://ci.example.org/{LONG_WORD}-{n}.jar",
                )
                for n in range(1, 61)
            ],
            ciJob='Evil "<b>bold</b>"',
            ciJobUrl="https://ci.example.org/job/evil/",
        ),
    )
    assert cli.main(["yank", "waystone", "11", "--data", str(data), "--reason", YANK_REASON]) == 0
    yield from serving(data)


def sample_counts(directory, today):
    """Rows of downloads for the sample's builds over 120 days ending `today`: a weekly
    rhythm, growing, most of each day's on the newest builds; the same every run."""
    snapshot = store.Store(directory, check_interval=0).snapshot()
    pick, rows = random.Random(26), {}
    for age in range(120):
        day = (today - datetime.timedelta(days=age)).isoformat()
        for slug, project in snapshot.projects.items():
            weekday = (today.toordinal() - age) % 7
            wanted = int((30 - age / 6) * (1.3 if weekday in (5, 6) else 1) * pick.random())
            for build in project.builds[-3:] if age < 30 else project.builds[-8:-3]:
                share = pick.randint(0, wanted)
                wanted -= share
                key = build.sha256 or build.download_url
                rows[slug, build.number, key, day] = (
                    rows.get((slug, build.number, key, day), 0) + share
                )
    return {row: n for row, n in rows.items() if n}


class StandInCounter:
    """The counter's read side, all the pages use: one tally."""

    def __init__(self, rows):
        self.counted = counts.Tally.of(rows)

    def tally(self):
        return self.counted


@pytest.fixture(scope="module")
def counted_url():
    """The app over the sample data with downloads counted (by a stand-in counter holding
    sample_counts), served by waitress in this process: its base URL and the rows."""
    from webtest.http import StopableWSGIServer

    directory, port = os.path.join(ROOT, "data"), free_port()
    base = f"http://127.0.0.1:{port}"
    rows = sample_counts(directory, datetime.datetime.now(datetime.UTC).date())
    app = server.make_app(
        store.Store(directory, check_interval=0), public_url=base, counter=StandInCounter(rows)
    )
    serving = StopableWSGIServer.create(app, host="127.0.0.1", port=port)
    # Not serving.wait(): it leaves its connection open (a ResourceWarning, an error here).
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    yield base, rows
    serving.shutdown()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    missing = chromium_missing()
    if missing:
        message = (
            f"missing {', '.join(missing)}: as root, apt-get update && apt-get install "
            "-y chromium chromium-driver"
        )
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail("CI must run the browser tests: " + message)
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"  # selenium-manager must never download a browser
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS + [f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH_CSP})
    yield driver
    driver.quit()


def viewport(driver, width, height, scheme="light"):
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
    )
    driver.execute_cdp_cmd(
        "Emulation.setEmulatedMedia",
        {"features": [{"name": "prefers-color-scheme", "value": scheme}]},
    )


def opener(browser, url):
    """Open a path; afterwards, the console must be clean and the CSP never violated."""
    browser.get_log("browser")  # drop what earlier tests left
    viewport(browser, 1280, 900)

    def open_path(path):
        browser.get(url + path)
        return browser

    yield open_path
    problems = [
        entry["message"]
        for entry in browser.get_log("browser")
        if entry["level"] in ("SEVERE", "WARNING")
    ]
    assert problems == []
    assert browser.execute_script("return window.__violations") == []


@pytest.fixture
def page(browser, base_url):
    yield from opener(browser, base_url)


@pytest.fixture
def sample_page(browser, sample_url):
    yield from opener(browser, sample_url)


@pytest.fixture
def counted_page(browser, counted_url):
    yield from opener(browser, counted_url[0])


def texts(driver, selector):
    from selenium.webdriver.common.by import By

    return [element.text for element in driver.find_elements(By.CSS_SELECTOR, selector)]


def test_the_index_renders_the_sample_data(sample_page):
    driver = sample_page("/")
    assert driver.title == "Buildshelf: downloads"
    assert texts(driver, ".card h2") == ["Tinplate", "TinplateProxy", "Waystone"]
    downloads = texts(driver, ".card .download")
    assert "Download tinplate-1.21.3-146.jar\nbuild #146, channel 1.21.3" in downloads
    # the stylesheet is applied (the CSP let it through): the page background is ours
    assert (
        driver.execute_script("return getComputedStyle(document.body).backgroundColor")
        == "rgb(246, 247, 248)"
    )


def test_no_request_leaves_the_server(page, base_url):
    driver = page("/")
    driver.get_log("performance")
    for path in ("/", "/projects/tinplate", "/projects/evil?experimental=true"):
        page(path)
        resources = driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)"
        )
        assert all(url.startswith(base_url + "/") for url in resources), resources
        assert base_url + "/static/style.css" in resources
    requested = [json.loads(entry["message"])["message"] for entry in driver.get_log("performance")]
    urls = [
        event["params"]["request"]["url"]
        for event in requested
        if event["method"] == "Network.requestWillBeSent"
    ]
    assert urls and all(url.startswith(base_url + "/") for url in urls), urls


def test_the_filters_work_by_clicking(page, base_url):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    driver = page("/")
    driver.find_element(By.LINK_TEXT, "Tinplate").click()
    WebDriverWait(driver, 10).until(lambda d: d.current_url == base_url + "/projects/tinplate")
    assert texts(driver, "#builds-heading") == ["31 builds, newest first"]
    Select(driver.find_element(By.ID, "channel")).select_by_visible_text("1.21.4-pre1")
    driver.find_element(By.CSS_SELECTOR, "label[for=experimental]").click()
    driver.find_element(By.CSS_SELECTOR, ".filters button").click()
    WebDriverWait(driver, 10).until(lambda d: "channel=" in d.current_url)
    assert driver.current_url == (
        base_url + "/projects/tinplate?channel=1.21.4-pre1&experimental=true"
    )
    with urllib.request.urlopen(
        base_url + "/api/v2/builds?project=tinplate&channel=1.21.4-pre1&experimental=true"
    ) as resp:
        expected = [f"Build #{b['buildNumber']}" for b in reversed(json.load(resp))]
    assert texts(driver, ".build h3") == expected and expected
    assert set(texts(driver, ".build .badge")) == {"Experimental"}
    assert driver.find_element(By.ID, "experimental").is_selected()


def test_paging_by_clicking(page, base_url):
    from selenium.webdriver.common.by import By

    driver = page("/projects/evil")
    assert texts(driver, ".build h3")[0] == "Build #60"
    driver.find_element(By.LINK_TEXT, "Older builds").click()
    assert driver.current_url == base_url + "/projects/evil?page=2"
    assert texts(driver, ".build h3") == [f"Build #{n}" for n in range(10, 0, -1)]
    driver.find_element(By.LINK_TEXT, "Newer builds").click()
    assert driver.current_url == base_url + "/projects/evil"


def test_an_xss_probe_shows_as_text(page):
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    driver = page("/projects/evil")
    assert texts(driver, "h1") == ['Evil "<b>bold</b>"']
    messages = texts(driver, ".build:first-child .message")
    assert messages[:2] == [XSS, f"<img src=x onerror=alert(2)> {LONG_WORD}"]
    assert driver.find_elements(By.CSS_SELECTOR, "main script, main img, h1 b") == []
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018 (reading it raises when there is none)


def gone_logged(browser):
    """Chromium logs each page answered 410 as an error on its console: take those entries,
    all of them about the yanked link, and no other."""
    logged = browser.get_log("browser")
    assert logged and all(
        YANKED_LINK in entry["message"] and "410" in entry["message"] for entry in logged
    ), logged


def test_a_yanked_builds_old_link_opens_a_page_saying_why(page, browser, base_url):
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    driver = page(YANKED_LINK)
    gone_logged(browser)
    assert driver.title == "Build #11 of Waystone was yanked: Buildshelf"
    assert texts(driver, "h1") == ["Build #11 of Waystone was yanked"]
    # The reason shows as the text it is, on its two lines; nothing of it runs.
    assert texts(driver, ".reason") == ["Why: " + YANK_REASON]
    assert driver.find_elements(By.CSS_SELECTOR, "main script, main img") == []
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018 (reading it raises when there is none)
    # The latest build: its download, and its card on the project page, one click away.
    with urllib.request.urlopen(base_url + "/api/v2/builds/latest?project=waystone") as resp:
        latest = json.load(resp)
    download = driver.find_element(By.CSS_SELECTOR, "a.download")
    assert download.get_attribute("href") == latest["downloadUrl"]
    driver.find_element(By.PARTIAL_LINK_TEXT, "on the Waystone page").click()
    number = latest["buildNumber"]
    assert driver.current_url == f"{base_url}/projects/waystone#build-{number}"
    assert driver.find_element(By.ID, f"build-{number}").is_displayed()
    # The yanked build is listed there, apart, with its reason.
    [listed] = driver.find_elements(By.CSS_SELECTOR, "#yanked-11 .reason")
    assert listed.text == "Why: " + YANK_REASON
    # Python's urllib sends no Accept, as scripts and launchers often do: the JSON.
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(base_url + YANKED_LINK)
    assert refused.value.code == 410 and json.load(refused.value)["code"] == "build_yanked"


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/projects/tinplate",
        "/projects/evil",
        "/projects/tinplate-proxy?experimental=true",
        "/projects/waystone",
        "/api-document",
        YANKED_LINK,
    ],
)
def test_no_horizontal_scroll_at_375_px(page, browser, path):
    viewport(browser, 375, 812)
    driver = page(path)
    if path == YANKED_LINK:
        gone_logged(browser)
    assert driver.execute_script("return window.innerWidth") == 375
    assert driver.execute_script("return document.documentElement.scrollWidth") <= 375


# Each line of a file name: its text, and whether the name is wider than the box it is in.
FILE_NAME_LINES = """
return [...document.querySelectorAll('.file')].map(element => {
  const text = element.firstChild, lines = [];
  for (let i = 0; i < text.length; i++) {
    const range = document.createRange();
    range.setStart(text, i);
    range.setEnd(text, i + 1);
    const top = Math.round(range.getBoundingClientRect().top);
    if (!lines.length || lines[lines.length - 1].top !== top) lines.push({top, text: ''});
    lines[lines.length - 1].text += text.data[i];
  }
  const whole = document.createRange();
  whole.selectNodeContents(text);
  const width = [...whole.getClientRects()].reduce((sum, rect) => sum + rect.width, 0);
  const box = element.closest('a, p, li'), style = getComputedStyle(box);
  const room = box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  return {lines: lines.map(line => line.text), wider: width > room};
});
"""


@pytest.mark.parametrize("width", [375, 1280])
@pytest.mark.parametrize(
    "path",
    ["/", "/projects/tinplate-proxy?experimental=true", "/projects/waystone", "/projects/evil"],
)
def test_file_names_are_never_broken_at_a_hyphen(page, browser, width, path):
    viewport(browser, width, 900)
    names = page(path).execute_script(FILE_NAME_LINES)
    assert names
    for name in names:
        if not name["wider"]:
            assert len(name["lines"]) == 1, name  # a name that fits is never broken
        else:  # one wider than the screen breaks where the line ends, never sooner
            assert all(not line.endswith("-") for line in name["lines"][:-1]), name


def test_the_index_uses_the_width_of_a_desktop_screen(sample_page, browser):
    driver = sample_page("/")
    viewport(browser, 1280, 900)
    cards = driver.execute_script(
        "return [...document.querySelectorAll('.card')].map(c => c.getBoundingClientRect())"
    )
    assert len({round(card["top"]) for card in cards}) < len(cards)  # more than one a row
    used = max(card["right"] for card in cards) - min(card["left"] for card in cards)
    assert used >= 0.9 * 1280


def test_the_index_shows_the_integrity_of_kept_builds(sample_page):
    from selenium.webdriver.common.by import By

    driver = sample_page("/")
    [waystone] = [c for c in driver.find_elements(By.CSS_SELECTOR, ".card") if "Waystone" in c.text]
    [integrity] = texts(waystone, ".integrity")
    assert re.fullmatch(r"371 bytes, SHA-256 [0-9a-f]{12}\S* \.sha256", integrity), integrity
    checksum = waystone.find_element(By.PARTIAL_LINK_TEXT, ".sha256").get_attribute("href")
    with urllib.request.urlopen(checksum) as resp:
        assert resp.read().decode().endswith("  waystone-1.1-11.jar\n")


def test_the_api_page_renders_the_document(sample_page, sample_url):
    from selenium.webdriver.common.by import By

    driver = sample_page("/")
    driver.find_element(By.LINK_TEXT, "API document").click()
    assert driver.current_url == sample_url + "/api-document"
    assert texts(driver, "h1") == ["Buildshelf API"]
    operations = texts(driver, ".operation h3")
    assert "GET /api/v2/builds/latest" in operations and len(operations) >= 10


# --- issue 26: download counts ------------------------------------------------------------------

# The chart as the browser lays it out: its box, its bars' and its labels'.
CHART_LAYOUT = """
const svg = document.querySelector('.chart svg'), box = svg.getBoundingClientRect();
const rect = r => ({left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width});
return {
  svg: rect(box), parent: svg.parentElement.clientWidth,
  bars: [...svg.querySelectorAll('.bar')].map(b => rect(b.getBoundingClientRect())),
  labels: [...svg.querySelectorAll('text')].map(t => ({
    ...rect(t.getBoundingClientRect()), text: t.textContent,
    size: parseFloat(getComputedStyle(t).fontSize)})),
  scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
};
"""


@pytest.mark.parametrize("width", [375, 1280])
def test_the_chart_fits_and_reads_at_a_phones_and_a_desktops_width(counted_page, browser, width):
    viewport(browser, width, 900)
    driver = counted_page("/projects/tinplate")
    layout = driver.execute_script(CHART_LAYOUT)
    assert layout["innerWidth"] == width and layout["scrollWidth"] <= width  # no sideways scroll
    svg = layout["svg"]
    # as wide as the page's column (343 px at 375, 992 at 1280, less the box's padding)
    assert svg["width"] == layout["parent"] and svg["width"] >= {375: 300, 1280: 950}[width]
    assert 0 <= svg["left"] and svg["right"] <= width
    assert svg["bottom"] - svg["top"] == 168
    bars = layout["bars"]
    assert len(bars) >= 80  # the sample has downloads on most of the 90 days
    for bar, after in zip(bars, bars[1:]):
        assert bar["right"] <= after["left"]  # apart, in order of days
    assert all(bar["width"] >= 2 for bar in bars), min(bar["width"] for bar in bars)
    assert svg["left"] <= bars[0]["left"] and bars[-1]["right"] <= svg["right"]
    assert len({round(bar["bottom"], 1) for bar in bars}) == 1  # one baseline
    labels = layout["labels"]
    assert [label["text"] for label in labels][1:] == [
        (datetime.datetime.now(datetime.UTC).date() - datetime.timedelta(days=ago)).isoformat()
        for ago in (89, 44, 0)
    ]
    for label in labels:
        assert label["size"] >= 12, label  # the text keeps its size on a phone
        assert svg["left"] <= label["left"] and label["right"] <= svg["right"], label
        assert svg["top"] <= label["top"] and label["bottom"] <= svg["bottom"], label
    for i, one in enumerate(labels):
        for other in labels[i + 1 :]:
            assert (
                one["right"] <= other["left"]
                or other["right"] <= one["left"]
                or one["bottom"] <= other["top"]
                or other["bottom"] <= one["top"]
            ), (one, other)


def test_a_screen_reader_gets_the_chart_as_an_image_named_and_described(counted_page, browser):
    driver = counted_page("/projects/tinplate")
    tree = browser.execute_cdp_cmd("Accessibility.getFullAXTree", {})["nodes"]
    images = [
        node
        for node in tree
        if node.get("role", {}).get("value") == "image" and not node.get("ignored")
    ]
    [chart] = [n for n in images if "downloads per day" in n.get("name", {}).get("value", "")]
    assert chart["name"]["value"] == "Tinplate: downloads per day, the last 90 days"
    assert chart["description"]["value"].startswith("A bar for each day: ")
    # and the numbers as text: the summary, and a table of the 90 days
    [summary] = texts(driver, ".downloads-summary")
    assert re.fullmatch(r"[\d,]+ downloads in all; [\d,]+ in the last 90 days, .*", summary)
    assert len(driver.find_elements("css selector", ".days tbody tr")) == 90


def test_the_totals_show_on_the_front_page_and_the_project_pages(counted_page, counted_url):
    rows = counted_url[1]
    totals = {}
    for (slug, *_), n in rows.items():
        totals[slug] = totals.get(slug, 0) + n
    driver = counted_page("/")
    names = {"Tinplate": "tinplate", "TinplateProxy": "tinplate-proxy", "Waystone": "waystone"}
    assert texts(driver, ".card h2") == list(names)
    assert texts(driver, ".card .total") == [
        f"{totals[slug]:,} downloads" for slug in names.values()
    ]
    for slug in names.values():
        driver = counted_page(f"/projects/{slug}")
        [summary] = texts(driver, ".downloads-summary")
        assert summary.startswith(f"{totals[slug]:,} downloads in all; ")
        by_build = {}
        for (row_slug, number, *_), n in rows.items():
            if row_slug == slug:
                by_build[number] = by_build.get(number, 0) + n
        shown = texts(driver, ".build-head")
        assert shown
        for head in shown:
            number = int(re.match(r"Build #(\d+)", head).group(1))
            n = by_build.get(number, 0)
            assert f"{n:,} download{'' if n == 1 else 's'}" in head.splitlines(), head


SCREENSHOTS = [
    ("index", "/"),
    ("project", "/projects/tinplate?experimental=true"),
    ("api", "/api-document"),
]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width, height", [(375, 812), (1280, 900)])
def test_screenshots(counted_page, browser, width, height, scheme, tmp_path):
    from selenium.webdriver.common.by import By

    # Only when asked: the test command writes nothing into the checkout.
    screenshots = os.environ.get("BUILDSHELF_SCREENSHOTS") or str(tmp_path)
    os.makedirs(screenshots, exist_ok=True)
    for name, path in SCREENSHOTS:
        counted_page(path)
        viewport(browser, width, height, scheme)
        background = browser.execute_script(
            "return getComputedStyle(document.body).backgroundColor"
        )
        assert background == {"light": "rgb(246, 247, 248)", "dark": "rgb(17, 20, 24)"}[scheme]
        file = os.path.join(screenshots, f"{name}-{width}-{scheme}.png")
        assert browser.save_screenshot(file)
        assert os.path.getsize(file) > 1000
        if name == "project":  # the chart alone, as the docs show it
            file = os.path.join(screenshots, f"chart-{width}-{scheme}.png")
            assert browser.find_element(By.CSS_SELECTOR, ".downloads").screenshot(file)
            assert os.path.getsize(file) > 1000
