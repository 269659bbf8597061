"""Soak test: the real server under load while its data files change, beside slow clients.

    python bench/soak.py                  # short form, about 60 s in all (CI)
    python bench/soak.py --seconds 600    # long form; --clients and --slow change the load

It starts server.py on a free port of 127.0.0.1 over a temporary data directory, then for
--seconds, all at once:

- a writer process changes the data files every 100 ms: valid edits written atomically, torn
  writes (half a file, a pause, the rest), invalid JSON, extra projects added and deleted;
- --clients keep-alive connections ask for every endpoint in turn and check every answer
  against a model of the data: version v of a file can be recomputed (`project_doc`), and
  every build's timestamp and every javadoc URL tells which v it came from;
- --slow connections send nothing, or a request one byte a second (slowloris), while other
  connections ask for a ~4 MB list and hang up after a few KB.

Then it checks that the server catches up with the last write, stops it with SIGTERM, and
prints what it did and saw and a table of checks. Exit status 0 when every check passes, 1
otherwise. Everything is bounded in time and talks only to 127.0.0.1.
"""

import argparse
import asyncio
import functools
import json
import multiprocessing
import os
import random
import re
import socket
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from hashlib import blake2b
from operator import itemgetter

import harness

CORE = ("core0", "core1", "core2", "core3")  # always there
EXTRAS = ("extra0", "extra1", "extra2")  # added and deleted by the writer
BIG = "big"  # written once at start: the list that clients hang up on
SLUGS = CORE + EXTRAS + (BIG,)
CHANNELS = ("1.0", "1.1", "1.2")
NO_SUCH_CHANNEL = "9.9"
VERSION_STEP = 1_000_000  # a build's timestamp is v * VERSION_STEP + its number
# ~4 MB: on loopback the kernel takes ~3 MB of a response in its socket buffers, so with a
# smaller list the server would have handed over all of it before the client hangs up.
BIG_BUILDS, BIG_COMMITS = 8000, 5

WRITE_INTERVAL = 0.1  # seconds between two writer actions
CHANGES = ("edit", "torn", "invalid", "add", "delete")
CHANGE_WEIGHTS = (4, 2, 2, 1, 1)
ACTIONS = CHANGES + ("repair",)  # a repair: the writer's last valid write of each file
GARBAGE = (
    b'{"ciJob": ',
    b"",
    b"not json",
    b'{"ciJob": "x",, }',
    b"\xff\xfe{}",
    b'{"ciJob": "x", "builds": "none"}',
)

ERROR_KINDS = ("5xx", "dropped", "inconsistent", "unexpected status")
REQUEST_TIMEOUT = 10.0  # seconds; an answer that takes longer is a dropped request
# p99 of the normal clients. On a 2-core machine they measured ~150 ms alone and ~250 ms
# beside 300 slow connections (the server and these clients share the two cores); a server
# that slow clients starve would take seconds or time out.
LATENCY_BOUND = 1.0
DISCONNECTORS = 4  # loops that ask for the big list and hang up mid-response
EXAMPLES = 5  # examples printed per error kind
CONVERGE_SECONDS = 5.0  # after the last write, to serve exactly what the files say


# --- the data model ---------------------------------------------------------------------------


def build_doc(slug, v, number, commits=1):
    commit_list = [{"message": f"v{v} b{number}", "hash": f"{v:08x}{number:08x}"}]
    commit_list += [
        {"message": f"v{v} b{number} commit {i}", "hash": f"{v:08x}{number:08x}{i:x}"}
        for i in range(1, commits)
    ]
    return {
        "buildNumber": number,
        "url": f"https://ci.example.org/job/{slug}/{number}/",
        "downloadUrl": f"https://ci.example.org/job/{slug}/{number}/artifact/{slug}.jar",
        "channelVersion": f"1.{number % 3}",
        "timestamp": v * VERSION_STEP + number,
        "isExperimental": number % 4 == 0,
        "commits": commit_list,
    }


@functools.lru_cache(maxsize=256)
def project_doc(slug, v):
    """Version v of project `slug`, as written to its file. Never modify the result."""
    count, commits = (BIG_BUILDS, BIG_COMMITS) if slug == BIG else (20 + v % 13, 1)
    builds = [build_doc(slug, v, number, commits) for number in range(1, count + 1)]
    random.Random(f"{slug} {v}").shuffle(builds)  # files may list builds in any order
    return {
        "ciJob": slug,
        "ciJobUrl": f"https://ci.example.org/job/{slug}/",
        "javadocBaseUrl": f"https://jd.example.org/{slug}/v{v}/",
        "builds": builds,
    }


@functools.lru_cache(maxsize=4096)
def expected_builds(slug, v, channel, experimental):
    """What /builds serves from version v: the builds passing the filters, by number."""
    builds = sorted(project_doc(slug, v)["builds"], key=itemgetter("buildNumber"))
    return [
        b
        for b in builds
        if (experimental or not b["isExperimental"])
        and (not channel or b["channelVersion"] == channel)
    ]


def data_path(data_dir, slug):
    return os.path.join(data_dir, f"{slug}.json")


def write_atomically(data_dir, slug, v):
    """How a CI job should publish: a temporary file beside the real one, renamed over it."""
    path = data_path(data_dir, slug)
    with open(path + ".tmp", "wb") as f:
        f.write(json.dumps(project_doc(slug, v), indent=1).encode())
    os.replace(path + ".tmp", path)


def write_torn(data_dir, slug, v, rng):
    """How a careless editor saves: in place, so a reader may see half the file."""
    data = json.dumps(project_doc(slug, v), indent=1).encode()
    with open(data_path(data_dir, slug), "wb") as f:
        f.write(data[: len(data) // 2])
        f.flush()
        time.sleep(rng.uniform(0.02, 0.05))
        f.write(data[len(data) // 2 :])


def write_garbage(data_dir, slug, rng):
    with open(data_path(data_dir, slug), "wb") as f:
        f.write(rng.choice(GARBAGE))


# --- the writer process -----------------------------------------------------------------------


class Shared:
    """What the writer process tells the others, in shared memory.

    `highest(slug)` is the highest version of `slug` ever written, raised *before* the write
    starts: read after an answer arrived, it bounds the version that answer may show.
    """

    def __init__(self, context):
        self.versions = context.Array("q", len(SLUGS), lock=False)
        self.present = context.Array("b", len(SLUGS), lock=False)  # the file exists
        self.actions = context.Array("q", len(ACTIONS), lock=False)  # count of each
        self.stop = context.Event()

    def highest(self, slug):
        return self.versions[SLUGS.index(slug)]

    def is_present(self, slug):
        return bool(self.present[SLUGS.index(slug)])

    def final_state(self):
        """{slug: version} of every file, once the writer has stopped and repaired them."""
        return {slug: self.highest(slug) for slug in SLUGS if self.is_present(slug)}

    def action_counts(self):
        return {action: self.actions[i] for i, action in enumerate(ACTIONS)}


def write_initial_data(data_dir, shared):
    for i, slug in enumerate(SLUGS):
        shared.versions[i] = 0 if slug == BIG else 1
        shared.present[i] = 1
        write_atomically(data_dir, slug, shared.versions[i])


def pick_change(rng, shared):
    """The writer's next change and the project it changes."""
    change = rng.choices(CHANGES, CHANGE_WEIGHTS)[0]
    extras = [s for s in EXTRAS if shared.is_present(s)]
    absent = [s for s in EXTRAS if not shared.is_present(s)]
    if change == "add" and not absent:
        change = "delete"
    elif change == "delete" and not extras:
        change = "add"
    candidates = {"edit": CORE, "add": absent, "delete": extras}.get(change, CORE + tuple(extras))
    return change, rng.choice(candidates)


def make_change(data_dir, shared, change, slug, rng):
    i = SLUGS.index(slug)
    if change == "delete":
        shared.present[i] = 0
        os.remove(data_path(data_dir, slug))
    elif change == "invalid":
        write_garbage(data_dir, slug, rng)  # the server keeps serving the last good version
    else:
        shared.versions[i] += 1
        shared.present[i] = 1
        if change == "torn":
            write_torn(data_dir, slug, shared.versions[i], rng)
        else:
            write_atomically(data_dir, slug, shared.versions[i])
    shared.actions[ACTIONS.index(change)] += 1


def run_writer(data_dir, shared, deadline, seed):
    """Change a file every WRITE_INTERVAL until asked to stop or `deadline`, then repair all."""
    rng = random.Random(seed)
    next_time = time.monotonic()
    while not shared.stop.is_set() and time.monotonic() < deadline:
        change, slug = pick_change(rng, shared)
        make_change(data_dir, shared, change, slug, rng)
        next_time += WRITE_INTERVAL
        shared.stop.wait(max(0.0, next_time - time.monotonic()))
    # Leave every file valid and new, so that the end state is known (the convergence check).
    for slug in CORE + EXTRAS:
        if shared.is_present(slug):
            make_change(data_dir, shared, "repair", slug, rng)


# --- HTTP over raw sockets --------------------------------------------------------------------


class MalformedResponse(Exception):
    pass


@dataclass
class Request:
    kind: str  # projects, builds, latest, jd, healthz, openapi, error
    target: str
    method: str = "GET"
    slug: str = None
    channel: str = None  # None when not sent
    experimental: bool = False  # as the server reads the parameter
    expect: tuple = None  # (status, code) of an expected error
    if_none_match: str = None

    def encode(self):
        lines = [f"{self.method} {self.target} HTTP/1.1", "Host: 127.0.0.1"]
        if self.if_none_match:
            lines.append(f"If-None-Match: {self.if_none_match}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode()


@dataclass
class Response:
    status: int
    headers: dict  # lower-case names
    body: bytes


async def read_response(reader, method="GET"):
    """One whole response: status line, headers, and the body by Content-Length."""
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    match = re.fullmatch(r"HTTP/1\.1 (\d{3}) .*", status_line)
    if not match:
        raise MalformedResponse(f"status line {status_line!r}")
    headers = {}
    for line in header_lines:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    status = int(match[1])
    if method == "HEAD" or status in (204, 304):
        return Response(status, headers, b"")
    if not headers.get("content-length", "").isdigit():
        raise MalformedResponse(f"{status} without Content-Length")
    body = await reader.readexactly(int(headers["content-length"]))
    return Response(status, headers, body)


async def exchange(reader, writer, request):
    writer.write(request.encode())
    await writer.drain()
    return await read_response(reader, request.method)


async def connect(port, receive_buffer=None):
    """A connection to the server; a small receive buffer makes the server wait on us."""
    if receive_buffer is None:
        return await asyncio.open_connection("127.0.0.1", port)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.setblocking(False)
    try:
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    except BaseException:
        sock.close()
        raise
    return await asyncio.open_connection(sock=sock, limit=receive_buffer)


async def close(writer, abort=False):
    if abort:
        writer.transport.abort()  # with data unread, the kernel resets the connection
        return
    writer.close()
    try:
        await asyncio.wait_for(writer.wait_closed(), 1)
    except (TimeoutError, OSError):
        pass


# The ways a request can fail without an answer: all of them are a dropped connection.
CONNECTION_ERRORS = (
    OSError,
    EOFError,
    asyncio.TimeoutError,
    asyncio.IncompleteReadError,
    asyncio.LimitOverrunError,
    MalformedResponse,
)


# --- the requests of normal clients -----------------------------------------------------------

ERROR_REQUESTS = (
    ("/api/v2/builds/latest?project=nosuch", 404, "unknown_project"),
    ("/api/v2/builds", 400, "missing_parameter"),
    ("/api/v2/builds?project=core1&version=1.0", 400, "superseded_parameter"),
    ("/api/v2/jd?project=core2&project=core3", 400, "repeated_parameter"),
    ("/api/v2/nothing", 404, "not_found"),
    ("/api/v1/projects", 410, "api_version_removed"),
)


def random_build_request(rng, kind):
    """A /builds, /builds/latest or /jd request with a random project and filters."""
    path = {
        "builds": rng.choice(("/api/v2/builds", "/api/v2/builds/all")),
        "latest": "/api/v2/builds/latest",
        "jd": "/api/v2/jd",
    }[kind]
    # The big project's lists are megabytes: only the hanging-up clients ask for them.
    slug = rng.choice(CORE * 3 + EXTRAS + ((BIG,) if kind != "builds" else ()))
    query = [f"project={slug.upper() if rng.random() < 0.05 else slug}"]
    channel = rng.choice((None, None, "") + CHANNELS + (NO_SUCH_CHANNEL,))
    if channel is not None:
        query.append(f"channel={channel}")
    flag = rng.choice((None, None, "true", "TRUE", "false"))
    if flag is not None:
        query.append(f"experimental={flag}")
    rng.shuffle(query)
    return Request(
        kind,
        path + "?" + "&".join(query),
        slug=slug,
        channel=channel,
        experimental=flag is not None and flag.lower() == "true",
    )


def random_request(rng, etags):
    """One request of the mix; a quarter of those that can be are conditional."""
    kind = rng.choices(
        ("projects", "builds", "latest", "jd", "healthz", "openapi", "error", "head"),
        (10, 25, 20, 10, 5, 1, 8, 3),
    )[0]
    if kind == "projects":
        request = Request("projects", "/api/v2/projects")
    elif kind in ("builds", "latest", "jd"):
        request = random_build_request(rng, kind)
    elif kind == "healthz":
        request = Request("healthz", "/healthz")
    elif kind == "openapi":
        request = Request("openapi", "/api/v2/openapi.json")
    elif kind == "error":
        target, status, code = rng.choice(ERROR_REQUESTS)
        request = Request("error", target, expect=(status, code))
    else:
        request = rng.choice(
            (Request("projects", "/api/v2/projects"), random_build_request(rng, "latest"))
        )
        request.method = "HEAD"
    if request.target in etags and rng.random() < 0.25:
        request.if_none_match = etags[request.target]  # an ETag seen for this URL
    return request


# --- checking answers against the model -------------------------------------------------------


class Problem(Exception):
    """A wrong answer; `kind` is one of ERROR_KINDS."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


def json_body(response):
    try:
        return json.loads(response.body)
    except ValueError:
        raise Problem(
            "inconsistent", f"{response.status} body is not JSON: {response.body[:80]!r}"
        ) from None


def within_written(slug, v, shared):
    if v > shared.highest(slug):
        raise Problem(
            "inconsistent",
            f"{slug} served at v{v}, higher than ever written (v{shared.highest(slug)})",
        )


def check_builds(request, body, shared):
    """A /builds list: builds of one version, exactly those the model gives for it."""
    versions = {b.get("timestamp", -1) // VERSION_STEP for b in body if isinstance(b, dict)}
    if not versions:
        if request.channel == NO_SUCH_CHANNEL and body == []:
            return {}
        raise Problem("inconsistent", f"empty or malformed list: {body!r:.80}")
    if len(versions) > 1:
        raise Problem("inconsistent", f"list mixes versions {sorted(versions)}")
    [v] = versions
    within_written(request.slug, v, shared)
    if body != expected_builds(request.slug, v, request.channel, request.experimental):
        raise Problem("inconsistent", f"list is not version {v} of {request.slug}, filtered")
    return {request.slug: v}


def check_latest(request, body, shared):
    """A latest build: the last build of the list that its version's file gives."""
    v = body.get("timestamp", -1) // VERSION_STEP if isinstance(body, dict) else -1
    expected = expected_builds(request.slug, v, request.channel, request.experimental)
    if v < 0 or not expected or body != expected[-1]:
        raise Problem("inconsistent", f"not the latest build of any version: {body!r:.80}")
    within_written(request.slug, v, shared)
    return {request.slug: v}


def check_javadoc(request, location, shared):
    """A /jd Location: the base URL of version v and the channel of v's latest build."""
    match = re.fullmatch(
        r"https://jd\.example\.org/([a-z0-9]+)/v(\d+)/(.+)-R0\.1-SNAPSHOT", location
    )
    if not match or match[1] != request.slug:
        raise Problem("inconsistent", f"Location {location!r}")
    v = int(match[2])
    expected = expected_builds(request.slug, v, request.channel, request.experimental)
    if not expected or match[3] != expected[-1]["channelVersion"]:
        raise Problem(
            "inconsistent", f"Location {location!r} is not the channel of the latest build of v{v}"
        )
    within_written(request.slug, v, shared)
    return {request.slug: v}


def check_projects(body, shared):
    """/projects: well-formed entries in slug order, the core projects always there."""
    entries = body.get("projects") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        raise Problem("inconsistent", f"/projects body {body!r:.80}")
    versions = {}
    for entry in entries:
        slug = entry.get("slug") if isinstance(entry, dict) else None
        match = (
            re.fullmatch(
                r"https://jd\.example\.org/([a-z0-9]+)/v(\d+)/", str(entry.get("javadocBaseUrl"))
            )
            if slug
            else None
        )
        if (
            slug not in SLUGS
            or not match
            or match[1] != slug
            or entry
            != {
                "slug": slug,
                "ciJob": slug,
                "ciJobUrl": f"https://ci.example.org/job/{slug}/",
                "javadocBaseUrl": match[0],
            }
        ):
            raise Problem("inconsistent", f"/projects entry {entry!r:.100}")
        versions[slug] = int(match[2])
        within_written(slug, versions[slug], shared)
    if list(versions) != sorted(versions):
        raise Problem("inconsistent", f"/projects not in slug order: {list(versions)}")
    missing = set(CORE + (BIG,)) - set(versions)
    if missing:
        raise Problem("inconsistent", f"/projects lacks {sorted(missing)}")
    return versions


def check_health(body):
    # The writer leaves files torn and invalid: "degraded" while one is, and then only.
    not_as_on_disk = isinstance(body, dict) and bool(
        body.get("rejectedFiles") or body.get("unavailableFiles")
    )
    if not (
        isinstance(body, dict)
        and body.get("status") == ("degraded" if not_as_on_disk else "ok")
        and len(CORE) + 1 <= body.get("projects", 0) <= len(SLUGS)
        and isinstance(body.get("rejectedFiles"), list)
    ):
        raise Problem("inconsistent", f"/healthz body {body!r:.100}")


def expected_404(request, response):
    """Whether a 404 is right: an extra project may be deleted, a channel may not exist."""
    if request.kind not in ("builds", "latest", "jd"):
        return False
    if request.method == "HEAD":  # no body to say why
        return request.slug in EXTRAS or request.channel == NO_SUCH_CHANNEL
    code = json_body(response).get("code")
    if code == "unknown_project":
        return request.slug in EXTRAS
    return (
        code == "no_matching_build"
        and request.kind != "builds"
        and request.channel == NO_SUCH_CHANNEL
    )


def check(request, response, shared):
    """The versions {slug: v} an answer shows; raises Problem if it is wrong."""
    status = response.status
    if status >= 500:
        raise Problem("5xx", f"{status} {response.body[:100]!r}")
    if request.kind == "error":
        code = json_body(response).get("code") if status == request.expect[0] else None
        if (status, code) != request.expect:
            raise Problem("unexpected status", f"{status} {code}, expected {request.expect}")
        return {}
    if status == 304:
        if not request.if_none_match:
            raise Problem("unexpected status", "304 to an unconditional request")
        if response.headers.get("etag") != request.if_none_match:
            raise Problem(
                "inconsistent",
                f"304 with ETag {response.headers.get('etag')}, asked {request.if_none_match}",
            )
        return {}
    if status == 404 and expected_404(request, response):
        return {}
    if status != (302 if request.kind == "jd" else 200):
        raise Problem("unexpected status", f"{status} {response.body[:100]!r}")
    if request.method == "HEAD":
        return {}
    if request.kind == "jd":
        return check_javadoc(request, response.headers.get("location", ""), shared)
    body = json_body(response)
    if request.kind == "builds":
        return check_builds(request, body, shared)
    if request.kind == "latest":
        return check_latest(request, body, shared)
    if request.kind == "projects":
        return check_projects(body, shared)
    if request.kind == "healthz":
        check_health(body)
    elif not str(body.get("openapi", "")).startswith("3.1"):
        raise Problem("inconsistent", "/openapi.json is not an OpenAPI 3.1 document")
    return {}


# --- the clients ------------------------------------------------------------------------------


class Stats:
    """What all the clients did and saw (they share one event loop: no locks)."""

    def __init__(self):
        self.requests = 0
        self.statuses = Counter()
        self.latencies = []  # seconds, of every answered request of the normal clients
        self.errors = Counter()  # kind -> count
        self.examples = defaultdict(list)  # kind -> the first EXAMPLES messages
        self.server_closes = Counter()  # status -> answers with Connection: close
        self.etags = {}  # target -> the last ETag seen for it
        self.etag_bodies = {}  # (target, ETag) -> digest of its body: one ETag, one body
        self.etag_versions = {}  # (target, ETag) -> the versions its body showed
        self.slow_open = 0  # slow clients with a connection (see slow_connections)
        self.slow_held = []  # slow_open, sampled every second
        self.server_files = []  # the server's open files, sampled every second
        self.idle_closed = 0  # idle connections the server closed (channel_timeout)
        self.trickled = Counter()  # byte-at-a-time requests: answered, cut off...
        self.disconnects = Counter()  # hang-ups: before reading, after a few KB

    def error(self, kind, message):
        self.errors[kind] += 1
        if len(self.examples[kind]) < EXAMPLES:
            self.examples[kind].append(message)


def remember(stats, request, response, versions):
    """Keep the answer's ETag for conditional requests; one ETag must mean one body."""
    etag = response.headers.get("etag")
    if response.status != 200 or request.method != "GET" or not etag:
        return
    digest = blake2b(response.body, digest_size=16).digest()
    if stats.etag_bodies.setdefault((request.target, etag), digest) != digest:
        raise Problem("inconsistent", f"ETag {etag} seen with two different bodies")
    stats.etags[request.target] = etag
    stats.etag_versions[request.target, etag] = versions


def never_older(seen, versions):
    """One connection's requests are served in turn: none may show older data than before."""
    for slug, v in versions.items():
        if v < seen.get(slug, 0):
            raise Problem("inconsistent", f"{slug} went back from v{seen[slug]} to v{v}")
        seen[slug] = v


def judge(stats, seen, request, response, shared):
    """Check one answer, recording what is wrong with it."""
    try:
        versions = check(request, response, shared)
        if response.status == 304:  # the version of the body we were told is still current
            versions = stats.etag_versions.get((request.target, request.if_none_match), {})
        never_older(seen, versions)
        remember(stats, request, response, versions)
    except Problem as problem:
        conditional = " (conditional)" if request.if_none_match else ""
        stats.error(problem.kind, f"{request.method} {request.target}{conditional}: {problem}")


async def normal_client(number, port, deadline, stats, shared):
    """Keep-alive requests of the mix, one at a time, every answer checked, until `deadline`."""
    loop = asyncio.get_running_loop()
    rng = random.Random(number)
    seen = {}  # slug -> highest version this client was served
    connection = None
    while loop.time() < deadline:
        if connection is None:
            try:
                connection = await asyncio.wait_for(connect(port), REQUEST_TIMEOUT)
            except (TimeoutError, OSError) as error:
                stats.error("dropped", f"connect: {error!r}")
                await asyncio.sleep(0.1)
                continue
        request = random_request(rng, stats.etags)
        started = time.perf_counter()
        try:
            response = await asyncio.wait_for(exchange(*connection, request), REQUEST_TIMEOUT)
        except CONNECTION_ERRORS as error:
            stats.error("dropped", f"{request.method} {request.target}: {error!r:.100}")
            await close(connection[1], abort=True)
            connection = None
            continue
        stats.latencies.append(time.perf_counter() - started)
        stats.requests += 1
        stats.statuses[response.status] += 1
        judge(stats, seen, request, response, shared)
        if response.headers.get("connection", "").lower() == "close":
            stats.server_closes[response.status] += 1
            await close(connection[1])
            connection = None
    if connection is not None:
        await close(connection[1])


async def slow_connections(port, deadline, stats):
    """One slow client's connections, one after another, until the deadline.

    The client counts in stats.slow_open from its first connection until one is refused, and
    again once one is accepted. Between an orderly close (channel_timeout, an answer read) and
    its next connection it still counts, so the figure does not depend on when the sampler
    runs: the server closes all the idle connections of one age in the same sweep.
    """
    loop = asyncio.get_running_loop()
    held = False
    try:
        while loop.time() < deadline:
            try:
                reader, writer = await asyncio.wait_for(connect(port), REQUEST_TIMEOUT)
            except (TimeoutError, OSError):
                stats.slow_open -= held
                held = False
                await asyncio.sleep(1)
                continue
            stats.slow_open += not held
            held = True
            try:
                yield reader, writer
            finally:
                await close(writer)
    finally:
        stats.slow_open -= held


async def idle_connection(port, deadline, stats):
    """Open a connection and send nothing; when the server gives up on it, open another."""
    loop = asyncio.get_running_loop()
    async for reader, _writer in slow_connections(port, deadline, stats):
        try:
            if await asyncio.wait_for(reader.read(1), deadline - loop.time()) == b"":
                stats.idle_closed += 1
        except (TimeoutError, OSError):
            pass  # the deadline: we hang up


async def trickling_connection(port, deadline, stats, rng):
    """Send a request one byte a second (slowloris), read the answer, start again."""
    loop = asyncio.get_running_loop()
    request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    await asyncio.sleep(rng.uniform(0, 1))  # spread all their bytes over the second
    async for reader, writer in slow_connections(port, deadline, stats):
        try:
            for i in range(len(request)):
                writer.write(request[i : i + 1])
                await writer.drain()
                await asyncio.sleep(min(1.0, max(0.0, deadline - loop.time())))
                if loop.time() >= deadline:
                    break
            else:
                response = await asyncio.wait_for(read_response(reader), REQUEST_TIMEOUT)
                stats.trickled["answered" if response.status == 200 else "wrong answer"] += 1
        except CONNECTION_ERRORS:
            stats.trickled["cut off"] += 1


async def disconnector(port, deadline, stats, rng):
    """Ask for the big list and hang up before it is all sent, again and again."""
    loop = asyncio.get_running_loop()
    request = b"GET /api/v2/builds?project=big&experimental=true HTTP/1.1\r\nHost: x\r\n\r\n"
    while loop.time() < deadline:
        try:
            reader, writer = await asyncio.wait_for(
                connect(port, receive_buffer=4096), REQUEST_TIMEOUT
            )
            writer.write(request)
            await writer.drain()
            wanted = rng.choice((0, 1, 4, 16)) * 1024
            received = b""
            while len(received) < wanted:
                chunk = await asyncio.wait_for(reader.read(4096), REQUEST_TIMEOUT)
                if not chunk:
                    break
                received += chunk
            if wanted and not received.startswith(b"HTTP/1.1 200 "):
                stats.error("unexpected status", f"big list: {received[:40]!r}")
            stats.disconnects["after a few KB" if wanted else "before reading"] += 1
            await close(writer, abort=rng.random() < 0.5)
        except (TimeoutError, OSError) as error:
            stats.error("dropped", f"big list, to hang up on: {error!r:.100}")
        await asyncio.sleep(rng.uniform(0.05, 0.15))


async def sample_connections(deadline, stats, server_pid, warm_up):
    """Every second: the slow connections we hold, and the files the server has open."""
    loop = asyncio.get_running_loop()
    await asyncio.sleep(warm_up)
    while loop.time() < deadline - 1:
        stats.slow_held.append(stats.slow_open)
        files = harness.open_files(server_pid)
        if files is not None:
            stats.server_files.append(files)
        await asyncio.sleep(1)


async def run_clients(port, server_pid, args, shared):
    """All the clients at once, for args.seconds; what they saw."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + args.seconds
    stats = Stats()
    idle = args.slow // 2
    tasks = [normal_client(n, port, deadline, stats, shared) for n in range(args.clients)]
    tasks += [idle_connection(port, deadline, stats) for _ in range(idle)]
    tasks += [
        trickling_connection(port, deadline, stats, random.Random(n))
        for n in range(args.slow - idle)
    ]
    tasks += [disconnector(port, deadline, stats, random.Random(n)) for n in range(DISCONNECTORS)]
    tasks.append(sample_connections(deadline, stats, server_pid, min(5, args.seconds / 4)))
    # Every task stops by itself at the deadline; this timeout is a last resort.
    await asyncio.wait_for(asyncio.gather(*tasks), args.seconds + 2 * REQUEST_TIMEOUT)
    return stats


# --- the server -------------------------------------------------------------------------------


def get(port, target):
    """(status, body) of a plain GET, redirects not followed."""
    reply = harness.fetch(port, target, timeout=5)
    return reply.status, reply.body


def served_state(port):
    """{slug: version} the server serves now, by /projects and each latest build."""
    status, body = get(port, "/api/v2/projects")
    slugs = [p["slug"] for p in json.loads(body)["projects"]] if status == 200 else []
    state = {}
    for slug in slugs:
        status, body = get(port, f"/api/v2/builds/latest?project={slug}&experimental=true")
        state[slug] = json.loads(body)["timestamp"] // VERSION_STEP if status == 200 else None
    return state


def wait_for_convergence(port, expected):
    """Seconds until the server serves exactly `expected` ({slug: v}), or None."""
    started = time.monotonic()
    while time.monotonic() - started < CONVERGE_SECONDS:
        if served_state(port) == expected:
            return time.monotonic() - started
        time.sleep(0.1)
    return None


LOG_LINE = re.compile(r"\S+ \S+ (INFO|WARNING|ERROR|CRITICAL) (\S+): (.*)")
# The loggers of the server's log: the modules that write its lines.
STORE, APP, SERVING = "buildshelf.store", "buildshelf.server", "buildshelf.serving.server"


def log_records(path):
    """The server's log as records: a line with time, level and logger, and the lines under
    it (a traceback)."""
    records = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if LOG_LINE.match(line) or not records:
                records.append([line.rstrip("\n")])
            else:
                records[-1].append(line.rstrip("\n"))
    return records


def log_kind(record):
    match = LOG_LINE.match(record[0])
    level, logger, message = match.groups() if match else (None, None, None)
    if logger == STORE and level == "INFO":
        for kind in ("reloaded", "loaded"):
            if message.startswith(kind + " "):
                return kind
        if message.startswith("project ") and " removed" in message:
            return "removed"
    if logger == STORE and level == "ERROR" and len(record) == 1:
        return "data errors"
    if (
        logger == SERVING
        and level == "WARNING"
        and message.startswith("requests waited for a worker thread")
    ):
        return "queue depth warnings"  # more clients than threads: once a minute at most
    if logger in (APP, SERVING) and level == "INFO":  # server logs the start-up line
        return "start and stop"
    return "unexpected"


def read_server_log(path):
    """Counts of the server's log records by kind, and the records nobody expected."""
    counts, unexpected = Counter(), []
    for record in log_records(path):
        kind = log_kind(record)
        counts[kind] += 1
        if kind == "unexpected":
            unexpected.append(record[0] + (f" ... {record[-1]}" if len(record) > 1 else ""))
    return counts, unexpected


# --- the run ----------------------------------------------------------------------------------


@dataclass
class Result:
    stats: Stats
    actions: dict  # writer action -> count
    server_cpu: float  # seconds of CPU the server used during the load; None if unknown
    converged: float  # seconds until the last write was served; None if never
    stop: tuple  # (exit status, seconds) after SIGTERM
    log_counts: Counter
    unexpected_log: list


def soak(args, work):
    """Start the server and the writer, run the clients; what all of them did and saw."""
    context = multiprocessing.get_context()
    shared = Shared(context)
    data_dir = os.path.join(work, "data")
    os.mkdir(data_dir)
    write_initial_data(data_dir, shared)
    log_path = os.path.join(work, "server.log")
    server = writer = None
    try:
        server = harness.Server.buildshelf(data_dir, ["--quiet"], log_path)
        port = server.port
        big = len(get(port, f"/api/v2/builds?project={BIG}&experimental=true")[1])
        print(
            f"soak: {args.seconds} s, {args.clients} clients, {args.slow} slow connections, "
            f"{DISCONNECTORS} hanging-up loops on a {big / 1e6:.1f} MB list; server pid "
            f"{server.pid} on 127.0.0.1:{port}",
            flush=True,
        )
        writer = context.Process(
            target=run_writer,
            daemon=True,
            args=(data_dir, shared, time.monotonic() + args.seconds + 5, 1),
        )
        writer.start()
        cpu_before = harness.cpu_seconds(server.pid)
        stats = asyncio.run(run_clients(port, server.pid, args, shared))
        cpu_after = harness.cpu_seconds(server.pid)
        server_cpu = None if None in (cpu_before, cpu_after) else cpu_after - cpu_before
        shared.stop.set()
        writer.join(10)
        converged = wait_for_convergence(port, shared.final_state())
        stop = server.stop()
    finally:
        if writer is not None and writer.is_alive():
            writer.kill()
        if server is not None:
            server.kill()
    return Result(
        stats, shared.action_counts(), server_cpu, converged, stop, *read_server_log(log_path)
    )


# --- the report -------------------------------------------------------------------------------


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


def ms(seconds):
    return f"{seconds * 1000:.0f} ms"


def listed(counts):
    return ", ".join(f"{key} {n}" for key, n in counts.items()) or "none"


def print_summary(args, result):
    stats = result.stats
    print(
        f"\nrequests: {stats.requests} ({stats.requests / args.seconds:.0f}/s) from "
        f"{args.clients} keep-alive clients; by status: "
        + listed({f"{s}:": n for s, n in sorted(stats.statuses.items())})
    )
    print(
        "answers with 'Connection: close', the client then reconnecting: "
        + listed({f"{s}:": n for s, n in sorted(stats.server_closes.items())})
    )
    print("errors: " + listed({kind: stats.errors[kind] for kind in ERROR_KINDS}))
    for kind, examples in stats.examples.items():
        for example in examples:
            print(f"  {kind}: {example}")
    lat = stats.latencies
    print(
        f"latency of normal clients: p50 {ms(percentile(lat, 0.5))}, "
        f"p99 {ms(percentile(lat, 0.99))}, max {ms(max(lat, default=0))}"
    )
    if result.server_cpu is not None:
        print(
            f"server CPU during the load: {result.server_cpu:.1f} s "
            f"({result.server_cpu / max(1, stats.requests) * 1e6:.0f} us per normal request)"
        )
    print("writer actions: " + listed(result.actions))
    print("server log: " + listed(dict(sorted(result.log_counts.items()))))
    for line in result.unexpected_log[:EXAMPLES]:
        print(f"  unexpected: {line}")
    held, files = stats.slow_held, stats.server_files
    print(
        f"slow connections: {args.slow // 2} idle and {args.slow - args.slow // 2} "
        f"byte-at-a-time; held min {min(held, default=0)}, median "
        f"{statistics.median(held) if held else 0:.0f} (sampled each second)"
    )
    print(
        f"  server's open files min {min(files, default='?')}, max {max(files, default='?')}; "
        f"idle ones closed by the server: {stats.idle_closed}; byte-at-a-time requests: "
        + listed(stats.trickled)
    )
    print(
        f"mid-response hang-ups: {sum(stats.disconnects.values())} ("
        + listed(stats.disconnects)
        + ")"
    )


def checks(args, result):
    """[(check, what was measured, passed)]."""
    stats, actions, log = result.stats, result.actions, result.log_counts
    errors = stats.errors
    p99 = percentile(stats.latencies, 0.99)
    slow_min = min(stats.slow_held, default=0)
    unchanged = [a for a in CHANGES if not actions[a]]
    status, stop_seconds = result.stop
    return [
        ("no 5xx", str(errors["5xx"]), not errors["5xx"]),
        ("no dropped connections", str(errors["dropped"]), not errors["dropped"]),
        (
            "every answer consistent with one version",
            f"{errors['inconsistent']} wrong",
            not errors["inconsistent"],
        ),
        ("no unexpected status", str(errors["unexpected status"]), not errors["unexpected status"]),
        ("requests made", str(stats.requests), stats.requests >= 10 * args.seconds),
        (f"p99 latency under {ms(LATENCY_BOUND)}", ms(p99), p99 < LATENCY_BOUND),
        (
            "slow connections held throughout",
            f"min {slow_min} of {args.slow}",
            slow_min >= 0.9 * args.slow,
        ),
        (
            "mid-response hang-ups done",
            str(stats.disconnects["after a few KB"]),
            stats.disconnects["after a few KB"] > 0,
        ),
        (
            "writer made every kind of change",
            f"{sum(actions.values())} actions"
            + (f", no {', '.join(unchanged)}" if unchanged else ""),
            not unchanged,
        ),
        (
            "reloads seen in the server log",
            f"{log['reloaded']} reloaded, {log['data errors']} data errors",
            log["reloaded"] > 0,
        ),
        (
            "last write served soon after",
            "never" if result.converged is None else f"after {result.converged:.1f} s",
            result.converged is not None,
        ),
        ("server log: nothing unexpected", f"{log['unexpected']} records", not log["unexpected"]),
        ("SIGTERM: exit status 0", f"{status} after {stop_seconds:.1f} s", status == 0),
    ]


def print_checks(rows):
    print(f"\n{'check':<42} {'measured':<32} result")
    for name, measured, passed in rows:
        print(f"{name:<42} {measured:<32} {'PASS' if passed else 'FAIL'}")


# --- main ---------------------------------------------------------------------------------------


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seconds",
        type=int,
        default=50,
        help="length of the load (default: %(default)s; the whole run takes about 5 s more)",
    )
    parser.add_argument(
        "--clients", type=int, default=64, help="normal keep-alive clients (default: %(default)s)"
    )
    parser.add_argument(
        "--slow",
        type=int,
        default=300,
        help="slow connections, half idle, half byte-at-a-time (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    if args.seconds < 1 or args.clients < 1 or args.slow < 0:
        parser.error("--seconds and --clients must be at least 1, --slow at least 0")
    return args


def main(argv=None):
    args = parse_args(argv)
    harness.raise_open_file_limit(args.clients + args.slow + DISCONNECTORS + 100)
    with tempfile.TemporaryDirectory(prefix="soak-") as work:
        result = soak(args, work)
    print_summary(args, result)
    rows = checks(args, result)
    print_checks(rows)
    return 0 if all(passed for _, _, passed in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
