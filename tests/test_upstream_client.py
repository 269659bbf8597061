"""The official Java client (io.canvasmc.canvas.ClientV2) against the upstream compat mode.

Every request the client makes, as it makes it (parameters concatenated unencoded, so a raw
'+'), and every answer read as it reads it: first by a line-by-line Python port over webtest,
then by the real client, compiled from tests/upstream_client/ and run against a real server.
Both must give EXPECTED, written from the data below and the client's documented behaviour.
"""

import json
import os
import shutil
import subprocess

import pytest
import webtest
from webtest.http import StopableWSGIServer

from buildshelf import server
from buildshelf import store as store_module
from helpers import write_file

# Each test here starts a process (tests/conftest.py): none is in the fast lane.
pytestmark = pytest.mark.system

CHANNEL = "1.0.0+71"  # the case that failed: the client sends the '+' raw
JD_BASE = "https://repo.example.org/javadoc/releases/io/canvasmc/horizon/core"
JD_PAGES = ".cache/unpack"


def build(number, channel, experimental, commits):
    return {
        "buildNumber": number,
        "url": f"https://ci.example.org/job/Horizon/{number}/",
        "downloadUrl": f"https://ci.example.org/job/Horizon/{number}/artifact/horizon-{number}.jar",
        "channelVersion": channel,
        "timestamp": 1761000000000 + number,
        "isExperimental": experimental,
        "commits": commits,
    }


HORIZON = {
    "ciJob": "Horizon",
    "ciJobUrl": "https://ci.example.org/job/Horizon/",
    "javadocBaseUrl": JD_BASE,
    "javadocPagePrefix": JD_PAGES,
    "builds": [
        build(73, "1.1.0", False, []),
        build(69, "1.0.0", False, [{"message": "Initial", "hash": "a1", "author": "Jane Doe"}]),
        build(70, "1.0.0", True, []),
        build(
            71,
            CHANNEL,
            False,
            [
                {"message": 'Fix 🚀 "quotes"', "hash": "b2"},
                {"message": "Übersetzung", "hash": "c3", "author": "Ünï Côdé"},
            ],
        ),
        build(72, CHANNEL, True, [{"message": "Try", "hash": "d4", "author": "Bob"}]),
        build(74, "1.2.0-pre", True, []),
    ],
}
OTHER = dict(HORIZON, ciJob="Other", builds=[], javadocBaseUrl="https://jd.example.org/o/")
del OTHER["javadocPagePrefix"]


def read(number):
    """A build as the client's Build record holds it (Drive.java prints this)."""
    b = next(b for b in HORIZON["builds"] if b["buildNumber"] == number)
    return {
        "buildNumber": number,
        "url": b["url"],
        "downloadUrl": b["downloadUrl"],
        "channelVersion": b["channelVersion"],
        "timestamp": b["timestamp"],
        "buildStatus": "EXPERIMENTAL" if b["isExperimental"] else "STABLE",
        "hasChanges": bool(b["commits"]),
        "commits": [
            {"message": c["message"], "hash": c["hash"], "author": c.get("author", "")}
            for c in b["commits"]
        ],
    }


def reads(*numbers):
    return [read(n) for n in numbers]


def jd(query, location):
    return {"url": f"{{base}}jd?{query}", "status": 302, "location": location}


EXPECTED = {
    "getProjects()": ["horizon", "other"],
    "getProject()": "horizon",
    "getStableBuilds()": reads(69, 71, 73),
    "getBuilds(true)": reads(69, 70, 71, 72, 73, 74),
    "getBuilds(false)": reads(69, 71, 73),
    "getBuilds(channel, true)": reads(71, 72),
    "getBuilds(channel, false)": reads(71),
    "getBuilds(hasChanges)": reads(69, 71, 72),
    "getBuild(number)": read(72),
    "getStableBuildsNewerThan(number)": reads(73),
    "getLatestStableBuild()": read(73),
    "getLatestBuild(true)": read(74),
    "getLatestBuild(false)": read(73),
    "getLatestBuild(channel, true)": read(72),
    "getLatestBuild(channel, false)": read(71),
    "getLatestBuild(emptyChannel, false)": {
        "error": 'Unable to fetch CanvasMC REST API from "{base}builds/latest?project=horizon'
        '&channel=9.9&experimental=false"',
        "cause": "Failed to fetch from Canvas API: 404",
    },
    "getJavadocUrl(Build, channel)": jd(
        f"project=horizon&channel={CHANNEL}&redirect=io/canvasmc/canvas/ClientV2.Build.html"
        "&experimental=true",
        f"{JD_BASE}/{CHANNEL}-R0.1-SNAPSHOT/{JD_PAGES}/io/canvasmc/canvas/ClientV2.Build.html",
    ),
    'getJavadocUrl(ClientV2, "")': jd(
        "project=horizon&redirect=io/canvasmc/canvas/ClientV2.html&experimental=true",
        f"{JD_BASE}/1.2.0-pre-R0.1-SNAPSHOT/{JD_PAGES}/io/canvasmc/canvas/ClientV2.html",
    ),
    "switchProject(NOPE).getBuilds(true)": {
        "error": 'Unable to fetch CanvasMC REST API from "{base}builds/all?project=nope'
        '&experimental=true"',
        "cause": "Failed to fetch from Canvas API: 404",
    },
}
# What Drive.java is given: project, channel, a build number, a channel with no builds.
ARGUMENTS = ["Horizon", CHANNEL, "72", "9.9"]


def expected(base):
    """EXPECTED with the client's base URL filled in."""
    return json.loads(json.dumps(EXPECTED).replace("{base}", base))


@pytest.fixture
def horizon_store(tmp_path):
    write_file(tmp_path / "horizon.json", HORIZON)
    write_file(tmp_path / "other.json", OTHER)
    return store_module.Store(tmp_path, check_interval=0)


# --- the client, ported line by line -------------------------------------------------------------


class ClientFailure(Exception):
    pass


class PortedClient:
    """ClientV2's URLs and parsing in Python, with the same names and the same strictness."""

    def __init__(self, app, base, project):
        self.app, self.base, self.project = app, base, project.lower()

    def construct_url_request(self, kind, project, args):
        parts = [a for a in [project, *args] if a]  # appendParams skips null and ""
        return self.base + kind + ("?" + "&".join(parts) if parts else "")

    def send_request(self, url):
        resp = self.app.get(url, headers={"Accept": "application/json"}, expect_errors=True)
        if resp.status_int != 200:
            raise ClientFailure(f"Failed to fetch from Canvas API: {resp.status_int}")
        body = json.loads(resp.body)
        if not isinstance(body, dict):  # GSON.fromJson(body, JsonObject.class)
            raise ClientFailure(f"Expected a JsonObject but was {type(body).__name__}")
        return body

    @staticmethod
    def parse_build(obj):
        def get(o, name, kind):
            value = o[name]  # a missing member: NullPointerException in the client
            if not isinstance(value, kind) or isinstance(value, bool) != (kind is bool):
                raise ClientFailure(f"{name}: {value!r}")
            return value

        if get(obj, "result", str).upper() != "SUCCESS":
            return None
        commits = [
            {
                "message": get(c, "message", str),
                "hash": get(c, "hash", str),
                "author": get(c, "author", str),
            }
            for c in get(obj, "commits", list)
        ]
        experimental = get(obj, "isExperimental", bool)
        return {
            "buildNumber": get(obj, "buildNumber", int),
            "url": get(obj, "url", str),
            "downloadUrl": get(obj, "downloadUrl", str),
            "channelVersion": get(obj, "channelVersion", str),
            "timestamp": get(obj, "timestamp", int),
            "buildStatus": "EXPERIMENTAL" if experimental else "STABLE",
            "hasChanges": bool(commits),
            "commits": commits,
        }

    def get_builds(self, channel, experimental):
        url = self.construct_url_request(
            "builds/all",
            "project=" + self.project,
            ["channel=" + channel if channel else "", f"experimental={str(experimental).lower()}"],
        )
        parsed = [self.parse_build(b) for b in self.send_request(url)["builds"]]
        return [b for b in parsed if b is not None]

    def get_latest_build(self, channel, experimental):
        url = self.construct_url_request(
            "builds/latest",
            "project=" + self.project,
            ["channel=" + channel if channel else "", f"experimental={str(experimental).lower()}"],
        )
        parsed = self.parse_build(self.send_request(url))
        if parsed is None:
            raise ClientFailure("Couldn't find latest build")
        return parsed

    def get_javadoc_url(self, class_name, channel):
        path = class_name.replace(".", "/").replace("$", ".") + ".html"
        return self.construct_url_request(
            "jd",
            "project=" + self.project,
            ["channel=" + channel if channel else "", "redirect=" + path, "experimental=true"],
        )


def drive(app, base):
    """What Drive.java does, through the port."""
    client = PortedClient(app, base, ARGUMENTS[0])
    channel, number, empty = ARGUMENTS[1], int(ARGUMENTS[2]), ARGUMENTS[3]

    def failure(url_kind, call):
        try:
            return {"returned": str(call())}
        except ClientFailure as error:
            return {
                "error": f'Unable to fetch CanvasMC REST API from "{url_kind}"',
                "cause": str(error),
            }

    def follow(url):
        resp = app.get(url, headers={"Accept": "application/json"}, expect_errors=True)
        return {"url": url, "status": resp.status_int, "location": resp.headers.get("Location")}

    out = {
        "getProjects()": [
            p["slug"]
            for p in client.send_request(client.construct_url_request("projects", None, []))[
                "projects"
            ]
        ]
    }
    out["getProject()"] = client.project
    out["getStableBuilds()"] = client.get_builds("", False)
    out["getBuilds(true)"] = client.get_builds("", True)
    out["getBuilds(false)"] = client.get_builds("", False)
    out["getBuilds(channel, true)"] = client.get_builds(channel, True)
    out["getBuilds(channel, false)"] = client.get_builds(channel, False)
    out["getBuilds(hasChanges)"] = [b for b in client.get_builds("", True) if b["hasChanges"]]
    out["getBuild(number)"] = next(
        b for b in client.get_builds("", True) if b["buildNumber"] == number
    )
    out["getStableBuildsNewerThan(number)"] = [
        b
        for b in client.get_builds("", True)
        if b["buildStatus"] == "STABLE" and b["buildNumber"] > number
    ]
    out["getLatestStableBuild()"] = client.get_latest_build("", False)
    out["getLatestBuild(true)"] = client.get_latest_build("", True)
    out["getLatestBuild(false)"] = client.get_latest_build("", False)
    out["getLatestBuild(channel, true)"] = client.get_latest_build(channel, True)
    out["getLatestBuild(channel, false)"] = client.get_latest_build(channel, False)
    out["getLatestBuild(emptyChannel, false)"] = failure(
        f"{base}builds/latest?project=horizon&channel={empty}&experimental=false",
        lambda: client.get_latest_build(empty, False),
    )
    out["getJavadocUrl(Build, channel)"] = follow(
        client.get_javadoc_url("io.canvasmc.canvas.ClientV2$Build", channel)
    )
    out['getJavadocUrl(ClientV2, "")'] = follow(
        client.get_javadoc_url("io.canvasmc.canvas.ClientV2", "")
    )
    client.project = "NOPE".lower()
    out["switchProject(NOPE).getBuilds(true)"] = failure(
        f"{base}builds/all?project=nope&experimental=true", lambda: client.get_builds("", True)
    )
    return out


def test_every_call_of_the_client_works_in_the_upstream_mode(horizon_store):
    app = webtest.TestApp(server.make_app(horizon_store, compat="upstream"))
    assert drive(app, "/api/v2/") == expected("/api/v2/")


def test_without_the_mode_the_clients_build_calls_fail(horizon_store):
    # As the issue found: the spec's bare array is not the object the client parses.
    client = PortedClient(webtest.TestApp(server.make_app(horizon_store)), "/api/v2/", "horizon")
    with pytest.raises(ClientFailure, match="Expected a JsonObject but was list"):
        client.get_builds("", True)
    with pytest.raises(KeyError, match="result"):
        client.get_latest_build("", True)


# --- the real client ------------------------------------------------------------------------------

CLIENT_SOURCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "upstream_client")
GSON = "/usr/share/java/gson.jar"
BASE_URL_LINE = 'private static final String BASE_URL = "https://canvasmc.io/api/v2/";'


def java_tools():
    """javac, java and gson, or a skip; CI sets BUILDSHELF_REQUIRE_JAVA=1 to fail instead."""
    javac, java = shutil.which("javac"), shutil.which("java")
    if javac and java and os.path.exists(GSON):
        return javac, java
    message = (
        "needs javac and java 17+ and gson: apt-get install default-jdk-headless "
        "libgoogle-gson-java"
    )
    if os.environ.get("BUILDSHELF_REQUIRE_JAVA") == "1":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def compiled_client(tmp_path):
    """The official client, pointed at `base`, compiled with Drive.java: a classpath maker."""
    javac, java = java_tools()

    def compile_for(base):
        sources = tmp_path / "src"
        shutil.copytree(CLIENT_SOURCES, sources)
        client = sources / "io" / "canvasmc" / "canvas" / "ClientV2.java"
        text = client.read_text()
        assert text.count(BASE_URL_LINE) == 1, "the client's BASE_URL line changed"
        client.write_text(
            text.replace(BASE_URL_LINE, BASE_URL_LINE.replace("https://canvasmc.io/api/v2/", base))
        )
        classes = tmp_path / "classes"
        subprocess.run(
            [
                javac,
                "-nowarn",
                "-encoding",
                "UTF-8",
                "-cp",
                GSON,
                "-d",
                str(classes),
                *map(str, sources.rglob("*.java")),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        return [java, "-cp", f"{classes}{os.pathsep}{GSON}", "Drive"]

    return compile_for


def test_the_real_client_works_in_the_upstream_mode(horizon_store, compiled_client):
    http = StopableWSGIServer.create(server.make_app(horizon_store, compat="upstream"), port=0)
    try:
        base = f"http://127.0.0.1:{http.effective_port}/api/v2/"
        command = compiled_client(base)
        run = subprocess.run(
            [*command, *ARGUMENTS], capture_output=True, text=True, encoding="utf-8", timeout=120
        )
    finally:
        http.shutdown()
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == expected(base)
