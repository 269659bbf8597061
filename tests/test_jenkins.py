"""import-jenkins: a Jenkins job's remote API JSON (freestyle and pipeline fixtures in
tests/jenkins_jobs/) merged into a project's file, from a file or over HTTP."""

import errno
import fcntl
import hashlib
import json
import os
import socket
import time
from contextlib import suppress

import pytest
import webtest

from buildshelf import cli, server
from buildshelf import store as store_module
from buildshelf.datafiles import checking
from buildshelf.jenkins import mirror as jenkins_mirror
from buildshelf.jenkins import remote_api
from buildshelf.writing import rewrite, writer
from helpers import FREESTYLE, JENKINS_JOBS, ROOT

PIPELINE = os.path.join(JENKINS_JOBS, "pipeline.json")
JOB = "https://ci.example.org/job/Alpha/"


def h(text):
    return (text * 40)[:40]


@pytest.fixture
def project(data_dir):
    """An empty project 'canvas' in the data directory; returns its path."""
    writer.add_project(str(data_dir), "canvas", "Alpha", JOB, "https://jd.example.org/canvas/")
    return data_dir / "canvas.json"


def builds_in(path):
    return json.loads(path.read_bytes())["builds"]


def run(data_dir, *argv):
    return cli.main(["import-jenkins", "canvas", *argv, "--data", str(data_dir)])


FREESTYLE_BUILDS = [
    {
        "buildNumber": 20,
        "url": JOB + "20/",
        "downloadUrl": JOB + "20/artifact/dist/alpha%201.21.4.jar",
        "channelVersion": "1.21.4",
        "timestamp": 1712000020000,
        "isExperimental": False,
        "commits": [],
    },
    {
        "buildNumber": 21,
        "url": JOB + "21/",
        "downloadUrl": JOB + "21/artifact/build/libs/alpha-1.21.4-21.jar",
        "channelVersion": "1.21.4",
        "timestamp": 1712000021000,
        "isExperimental": False,
        "commits": [{"message": "Fix chunk loading race", "hash": h("3f2a")}],
    },
    {
        "buildNumber": 25,
        "url": JOB + "25/",
        "downloadUrl": JOB + "25/artifact/build/libs/alpha-1.21.5-25.jar",
        "channelVersion": "1.21.5",
        "timestamp": 1712000025000,
        "isExperimental": True,
        "commits": [
            {"message": "Newer change", "hash": h("b2")},
            {"message": "Older change", "hash": h("a1")},
        ],
    },
]
FREESTYLE_SKIPPED = [
    "build 28: still building",
    "build 27: result UNSTABLE",
    "build 26: display name 'nightly-26' does not name a channel as '#N - VERSION'",
    "build 24: no artifact matching the first .jar that is not -sources or -javadoc",
    "build 23: result ABORTED",
    "build 22: result FAILURE",
]


def test_a_freestyle_job_adds_its_successful_builds(project, capsys):
    assert run(project.parent, "--job-json", FREESTYLE, "--verbose") == 0
    assert builds_in(project) == FREESTYLE_BUILDS
    assert capsys.readouterr().out.splitlines() == [
        "added build 25: channel 1.21.5, experimental",
        "added build 21: channel 1.21.4",
        "added build 20: channel 1.21.4",
        *(line.replace("build", "skipped build", 1) for line in FREESTYLE_SKIPPED),
        "canvas: added 3, failed 0, skipped 6, 0 already there",
    ]
    assert checking.check_directory(project.parent) == []


def test_a_pipeline_job_reads_its_change_sets(project, capsys):
    assert run(project.parent, "--job-json", PIPELINE, "--verbose") == 0
    pipeline = "https://ci.example.org/job/Alpha-pipeline/"
    assert builds_in(project) == [
        {
            "buildNumber": 40,
            "url": pipeline + "40/",
            "downloadUrl": pipeline + "40/artifact/build/libs/alpha-1.21.5-40.jar",
            "channelVersion": "1.21.5",
            "timestamp": 1712000040000,
            "isExperimental": False,
            "commits": [
                {"message": "Submodule change", "hash": h("e5")},
                {"message": "Main repo, second", "hash": h("d4")},
                {"message": "Main repo, first", "hash": h("c3")},
            ],
        },
        {
            "buildNumber": 41,
            "url": pipeline + "41/",
            "downloadUrl": pipeline + "41/artifact/build/libs/alpha-1.22-41.jar",
            "channelVersion": "1.22",
            "timestamp": 1712000041000,
            "isExperimental": True,
            "commits": [{"message": "Port to 1.22", "hash": h("41")}],
        },
    ]
    assert capsys.readouterr().out.splitlines()[-3:] == [
        "skipped build 43: still building",
        "skipped build 42: result FAILURE",
        "canvas: added 2, failed 0, skipped 2, 0 already there",
    ]


def test_a_run_prints_what_it_added_and_nothing_else(project, capsys):
    assert run(project.parent, "--job-json", FREESTYLE) == 0
    assert capsys.readouterr().out.splitlines() == [
        "added build 25: channel 1.21.5, experimental",
        "added build 21: channel 1.21.4",
        "added build 20: channel 1.21.4",
    ]


def test_a_second_run_adds_nothing_writes_nothing_and_says_nothing(project, capsys):
    assert run(project.parent, "--job-json", FREESTYLE) == 0
    before = project.read_bytes(), os.stat(project).st_mtime_ns
    capsys.readouterr()
    assert run(project.parent, "--job-json", FREESTYLE) == 0
    assert (project.read_bytes(), os.stat(project).st_mtime_ns) == before
    assert capsys.readouterr() == ("", "")  # so cron mails nothing
    assert run(project.parent, "--job-json", FREESTYLE, "--verbose") == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "canvas: added 0, failed 0, skipped 6, 3 already there"
    )


def test_a_job_none_of_whose_builds_is_for_the_project_says_so(project, capsys):
    pattern = r"no-such\.jar$"
    assert run(project.parent, "--job-json", FREESTYLE, "--artifact", pattern) == 0
    assert capsys.readouterr().out == (
        "canvas: none of the job's builds is for it: --verbose says why of each\n"
    )


def test_builds_already_in_the_file_are_kept_as_they_are(project):
    hand_edited = dict(FREESTYLE_BUILDS[1], channelVersion="1.21.4-hotfix", commits=[])
    writer.publish(str(project.parent), "canvas", dict(hand_edited))
    assert run(project.parent, "--job-json", FREESTYLE) == 0
    assert builds_in(project) == [FREESTYLE_BUILDS[0], hand_edited, FREESTYLE_BUILDS[2]]


def test_dry_run_says_what_and_why_and_writes_nothing(project, capsys):
    before = project.read_bytes(), os.stat(project).st_mtime_ns
    assert run(project.parent, "--job-json", FREESTYLE, "--dry-run") == 0
    assert (project.read_bytes(), os.stat(project).st_mtime_ns) == before
    assert capsys.readouterr().out.splitlines() == [
        "would add build 25: channel 1.21.5, experimental",
        "would add build 21: channel 1.21.4",
        "would add build 20: channel 1.21.4",
        *(line.replace("build", "would skip build", 1) for line in FREESTYLE_SKIPPED),
        "canvas: would add 3, would fail 0, would skip 6, 0 already there",
    ]


def test_the_artifact_and_experimental_patterns(project):
    assert (
        run(
            project.parent,
            "--job-json",
            FREESTYLE,
            "--artifact",
            r"paperclip.*\.jar$",
            "--experimental-pattern",
            r"1\.21\.4",
        )
        == 0
    )
    assert builds_in(project) == [
        {
            "buildNumber": 21,
            "url": JOB + "21/",
            "downloadUrl": JOB + "21/artifact/paperclip/alpha-paperclip-21.jar",
            "channelVersion": "1.21.4",
            "timestamp": 1712000021000,
            "isExperimental": True,
            "commits": [{"message": "Fix chunk loading race", "hash": h("3f2a")}],
        }
    ]


def test_a_build_the_server_would_refuse_fails_with_its_reason(project, tmp_path, capsys):
    job = {
        "allBuilds": [
            {
                "number": 5,
                "url": JOB + "5/",
                "displayName": "#5 - 1.21 beta",
                "result": "SUCCESS",
                "building": False,
                "timestamp": 1,
                "artifacts": [{"relativePath": "a.jar"}],
            },
            {
                "number": 6,
                "url": JOB + "6/",
                "displayName": "#6 - 1.21",
                "result": "SUCCESS",
                "timestamp": 2,
                "artifacts": [{"relativePath": "a.jar"}],
                "changeSet": {"items": [{"msg": "svn", "commitId": "r123"}]},
            },
            {"number": "7"},
            "junk",
            {
                "number": 8,
                "url": JOB + "8/",
                "displayName": "#8 - 1.21",
                "result": "SUCCESS",
                "timestamp": "yesterday",
                "artifacts": [{"relativePath": "a.jar"}],
            },
            {
                "number": 9,
                "url": JOB + "9/",
                "displayName": "#9 - 1.21",
                "result": "SUCCESS",
                "timestamp": 1712000021000000000,  # in nanoseconds
                "artifacts": [{"relativePath": "a.jar"}],
            },
        ]
    }
    (tmp_path / "job.json").write_text(json.dumps(job))
    failed = [
        "failed build 5: 'channelVersion' must be a non-empty string of letters, digits and "
        ". _ + -",
        "failed build 6: commits[0]: 'hash' must be a string of hexadecimal digits",
        "failed build 8: 'timestamp' must be an integer",
        "failed build 9: 'timestamp' 1712000021000000000 is after year 9999: give epoch "
        "milliseconds (date +%s%3N); this looks like microseconds or nanoseconds",
    ]
    assert run(project.parent, "--job-json", str(tmp_path / "job.json")) == 0
    assert capsys.readouterr().out.splitlines() == failed  # every run: someone should look
    assert run(project.parent, "--job-json", str(tmp_path / "job.json"), "--verbose") == 0
    assert capsys.readouterr().out.splitlines() == [
        *failed,
        "skipped allBuilds[2]: no build number",
        "skipped allBuilds[3]: no build number",
        "canvas: added 0, failed 4, skipped 2, 0 already there",
    ]
    assert builds_in(project) == []


@pytest.mark.parametrize(
    "content, message",
    [
        (
            b"{",
            "{path} is not JSON: line 1, column 2: Expecting property name enclosed in double "
            "quotes",
        ),
        (b"\xff", "{path} is not UTF-8 JSON"),
        (
            b"[]",
            "{path} has no 'allBuilds' array: is it the remote API JSON of a job "
            f"(.../job/NAME/api/json?tree={remote_api.TREE})?",
        ),
        (
            b'{"allBuilds": {}}',
            "{path} has no 'allBuilds' array: is it the remote API JSON of a "
            f"job (.../job/NAME/api/json?tree={remote_api.TREE})?",
        ),
        (b"[" * 100000, "{path} is not JSON Buildshelf can read: maximum recursion depth exceeded"),
    ],
)
def test_unreadable_job_json_is_refused(project, tmp_path, capsys, content, message):
    path = tmp_path / "job.json"
    path.write_bytes(content)
    before = project.read_bytes()
    assert run(project.parent, "--job-json", str(path)) == 1
    [line] = capsys.readouterr().err.splitlines()
    # Python words the recursion error its own way after the part we check.
    assert line.startswith(f"buildshelf import-jenkins: {message.format(path=path)}")
    assert project.read_bytes() == before


def test_a_missing_file_or_project_is_refused(project, capsys):
    assert run(project.parent, "--job-json", "/no/such.json") == 1
    assert (
        cli.main(
            ["import-jenkins", "gamma", "--job-json", FREESTYLE, "--data", str(project.parent)]
        )
        == 1
    )
    assert capsys.readouterr().err.splitlines() == [
        "buildshelf import-jenkins: cannot read /no/such.json: No such file or directory",
        f"buildshelf import-jenkins: no project 'gamma' in {project.parent}: add it with "
        "'buildshelf add-project gamma --ci-job ... --ci-job-url ...' (a project of another "
        "data directory: give --data DIR or set BUILDSHELF_DATA)",
    ]


# --- over HTTP ----------------------------------------------------------------------------------


def test_the_job_is_fetched_from_its_url(project, fake_jenkins):
    base, paths = fake_jenkins.base, fake_jenkins.paths
    assert run(project.parent, "--job-url", base + "/job/Alpha/") == 0
    assert builds_in(project) == FREESTYLE_BUILDS
    assert paths == ["/job/Alpha/api/json?tree=" + remote_api.quote(remote_api.TREE, safe="")]


def test_an_http_error_is_refused(project, fake_jenkins, capsys):
    base = fake_jenkins.base
    assert run(project.parent, "--job-url", base + "/job/Nope/") == 1
    url = f"{base}/job/Nope/api/json?tree=" + remote_api.quote(remote_api.TREE, safe="")
    assert capsys.readouterr().err == f"buildshelf import-jenkins: {url} answered 404 Not Found\n"


def test_an_unreachable_jenkins_is_refused(project, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    assert run(project.parent, "--job-url", f"http://127.0.0.1:{port}/job/A/") == 1
    err = capsys.readouterr().err
    assert err.startswith(
        f"buildshelf import-jenkins: cannot reach http://127.0.0.1:{port}/job/A/api/json?tree="
    )
    assert err.endswith(": [Errno 111] Connection refused\n")


def test_a_silent_jenkins_times_out(project, capsys):
    with socket.socket() as silent:  # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/job/A/api/json"
        assert run(project.parent, "--job-url", url, "--timeout", "0.3") == 1
    assert capsys.readouterr().err == (
        f"buildshelf import-jenkins: no answer from {url} within 0.3 s\n"
    )


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://ci.example.org/job/A/"])
def test_only_http_urls_are_fetched(project, capsys, url):
    assert run(project.parent, "--job-url", url) == 1
    assert capsys.readouterr().err == (
        f"buildshelf import-jenkins: --job-url must be an "
        f"http:// or https:// address, not {url!r}\n"
    )


def test_a_dry_run_takes_no_lock_and_writes_nothing(project):
    os.unlink(project.parent / rewrite.LOCK_NAME)  # so that taking the lock would show
    before = sorted(os.listdir(project.parent)), project.read_bytes()
    assert run(project.parent, "--job-json", FREESTYLE, "--dry-run") == 0
    assert (sorted(os.listdir(project.parent)), project.read_bytes()) == before


# --- --mirror: each build's artifact kept in the artifact store -------------------------------

A21 = "/job/Alpha/21/artifact/build/libs/alpha-1.21.4-21.jar"
A25 = "/job/Alpha/25/artifact/build/libs/alpha-1.21.5-25.jar"
JAR21, JAR25 = b"PK\x03\x04 twenty-one " * 3000, b"PK\x03\x04 twenty-five " * 5000
NAME_RULE = (  # build 20's artifact, with a space
    "'alpha 1.21.4.jar' is not a valid file name: a file name must be ASCII letters, digits "
    "and . _ + -, not start with a dot, and be at most 200 characters"
)


@pytest.fixture
def mirrored_job(fake_jenkins, tmp_path):
    """The freestyle job's JSON, saved, with its builds on the fake Jenkins, which serves the
    jars of builds 21 and 25."""
    fake_jenkins.routes.update({A21: JAR21, A25: JAR25})
    with open(FREESTYLE, "rb") as f:
        job = f.read().replace(b"https://ci.example.org", fake_jenkins.base.encode())
    (tmp_path / "job.json").write_bytes(job)
    return tmp_path / "job.json"


def mirror(data_dir, job, *argv):
    return run(data_dir, "--job-json", str(job), "--mirror", "--timeout", "0.5", *argv)


def store_files(store_dir):
    """Every file in the artifact store, temporary ones too, by path inside it."""
    return sorted(str(p.relative_to(store_dir)) for p in store_dir.rglob("*") if p.is_file())


def object_of(body):
    sha = hashlib.sha256(body).hexdigest()
    return f"{sha[:2]}/{sha}"


def kept(build, base, body, name):
    """A FREESTYLE_BUILDS build as --mirror keeps it from the fake Jenkins at `base`."""
    fields = {key: value for key, value in build.items() if key != "downloadUrl"}
    fields["url"] = fields["url"].replace("https://ci.example.org", base)
    return dict(fields, sha256=hashlib.sha256(body).hexdigest(), size=len(body), file=name)


MIRROR_SKIPPED = [
    *(line.replace("build", "skipped build", 1) for line in FREESTYLE_SKIPPED),
    f"skipped build 20: {NAME_RULE}",
]


def test_mirror_keeps_each_build_added_as_publish_file_does(
    project, mirrored_job, fake_jenkins, capsys
):
    data_dir, base = project.parent, fake_jenkins.base
    assert mirror(data_dir, mirrored_job, "--verbose") == 0
    assert builds_in(project) == [
        kept(FREESTYLE_BUILDS[1], base, JAR21, "alpha-1.21.4-21.jar"),
        kept(FREESTYLE_BUILDS[2], base, JAR25, "alpha-1.21.5-25.jar"),
    ]
    assert capsys.readouterr().out.splitlines() == [
        f"added build 25: channel 1.21.5, experimental, kept as alpha-1.21.5-25.jar "
        f"({len(JAR25):,} bytes)",
        f"added build 21: channel 1.21.4, kept as alpha-1.21.4-21.jar ({len(JAR21):,} bytes)",
        *MIRROR_SKIPPED,
        "canvas: added 2, failed 0, skipped 7, 0 already there",
    ]
    store_dir = data_dir / "artifacts"
    assert store_files(store_dir) == sorted([object_of(JAR21), object_of(JAR25)])
    assert (store_dir / object_of(JAR25)).read_bytes() == JAR25
    # Served as any kept file, and check finds every object whole and used.
    client = webtest.TestApp(server.make_app(store_module.Store(data_dir, check_interval=0)))
    latest = client.get("/api/v2/builds/latest?project=canvas&experimental=true").json
    assert latest["sha256"] == hashlib.sha256(JAR25).hexdigest()
    assert client.get(latest["downloadUrl"].removeprefix("http://127.0.0.1:8080")).body == JAR25
    assert cli.main(["check", "--data", str(data_dir), "--verify"]) == 0
    assert "unused" not in capsys.readouterr().out


def test_mirror_downloads_before_taking_the_lock(project, mirrored_job, fake_jenkins):
    free = []

    def lock_is_free(handler):
        fd = os.open(project.parent / rewrite.LOCK_NAME, os.O_RDONLY | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            free.append(True)
        except BlockingIOError:
            free.append(False)
        finally:
            os.close(fd)
        answer(JAR25)(handler)

    fake_jenkins.routes[A25] = lock_is_free
    assert mirror(project.parent, mirrored_job) == 0
    assert free == [True] and len(builds_in(project)) == 2


def test_a_second_run_downloads_nothing_and_a_dry_run_nothing_at_all(
    project, mirrored_job, fake_jenkins, capsys
):
    data_dir, base = project.parent, fake_jenkins.base
    assert mirror(data_dir, mirrored_job, "--dry-run") == 0
    assert fake_jenkins.paths == [] and not (data_dir / "artifacts").exists()
    assert builds_in(project) == []
    assert capsys.readouterr().out.splitlines() == [
        f"would add build 25: channel 1.21.5, experimental, downloading {base}{A25}",
        f"would add build 21: channel 1.21.4, downloading {base}{A21}",
        *(line.replace("skipped", "would skip", 1) for line in MIRROR_SKIPPED),
        "canvas: would add 2, would fail 0, would skip 7, 0 already there",
    ]
    assert mirror(data_dir, mirrored_job) == 0
    assert sorted(fake_jenkins.paths) == [A21, A25]
    before = project.read_bytes(), store_files(data_dir / "artifacts")
    fake_jenkins.paths.clear()
    capsys.readouterr()
    assert mirror(data_dir, mirrored_job) == 0
    assert fake_jenkins.paths == []
    assert (project.read_bytes(), store_files(data_dir / "artifacts")) == before
    assert capsys.readouterr().out == ""


def test_the_store_and_the_limit_are_those_of_publish(project, mirrored_job, tmp_path, monkeypatch):
    monkeypatch.setenv("BUILDSHELF_ARTIFACTS", str(tmp_path / "elsewhere"))
    assert mirror(project.parent, mirrored_job, "--max-file-mb", "1") == 0
    assert store_files(tmp_path / "elsewhere") == sorted([object_of(JAR21), object_of(JAR25)])


def answer(body, *headers, length=None, then=None):
    """A route's handler: `body` with these headers and a Content-Length (`length`, if it is
    not len(body); False: none), then `then(handler)`."""

    def handle(handler):
        handler.send_response(200)
        for header in headers:
            handler.send_header(*header)
        if length is not False:
            handler.send_header("Content-Length", str(len(body) if length is None else length))
        handler.end_headers()
        handler.wfile.write(body)
        handler.wfile.flush()
        if then is not None:
            then(handler)

    return handle


def stall(handler):
    handler.server.fake.release.wait(10)


def drip(handler):
    """A byte each 10 ms, for 3 s at most: then the body ends short."""
    deadline = time.monotonic() + 3
    with suppress(OSError):  # the client gave up: what this test wants
        while time.monotonic() < deadline:
            handler.wfile.write(b"x")
            handler.wfile.flush()
            time.sleep(0.01)


def chunked_cut_short(handler):
    handler.wfile.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")


def redirect(location):
    def handle(handler):
        handler.send_response(302)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return handle


OVER = b"x" * ((1 << 20) + 1)
TOO_LARGE = "{url} is larger than 1 MiB: give --max-file-mb to raise the limit (nothing was stored)"


@pytest.mark.parametrize(
    "route, reason",
    [
        pytest.param(None, "{url} answered 404 Not Found", id="404"),
        pytest.param(stall, "no answer from {url} within 0.5 s", id="silent"),
        pytest.param(
            answer(b"PK", length=1000, then=stall), "{url} sent nothing for 0.5 s", id="stalled"
        ),
        pytest.param(
            answer(b"PK" * 5, length=1000),
            "{url} was cut short: 10 bytes of 1,000 bytes came",
            id="cut short",
        ),
        pytest.param(chunked_cut_short, "{url} was cut short after 5 bytes", id="chunked cut"),
        pytest.param(answer(b"", length=100_000, then=drip), "{url} is too slow: ", id="crawling"),
        pytest.param(answer(OVER), TOO_LARGE, id="over the limit"),
        pytest.param(answer(OVER, length=False), TOO_LARGE, id="over the limit, unannounced"),
        pytest.param(
            answer(JAR21, ("Content-Encoding", "gzip")),
            "{url} sent its file encoded (gzip), not as it is",
            id="encoded",
        ),
        pytest.param(
            redirect("ftp://127.0.0.1/a.jar"),
            "{url} redirects to 'ftp://127.0.0.1/a.jar', not an http(s) address",
            id="redirect to ftp",
        ),
    ],
)
def test_a_failed_download_skips_only_its_build_and_leaves_nothing(
    project, mirrored_job, fake_jenkins, capsys, route, reason
):
    fake_jenkins.routes[A21] = route
    if route is None:
        del fake_jenkins.routes[A21]
    data_dir = project.parent
    assert mirror(data_dir, mirrored_job, "--max-file-mb", "1") == 0
    assert [b["buildNumber"] for b in builds_in(project)] == [25]
    added, failed = capsys.readouterr().out.splitlines()
    assert added.startswith("added build 25: ")
    assert failed.startswith("failed build 21: " + reason.format(url=fake_jenkins.base + A21))
    assert store_files(data_dir / "artifacts") == [object_of(JAR25)]


def test_a_refused_connection_skips_only_its_build(project, mirrored_job, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"  # closed again: nothing listens there
    job = json.loads(mirrored_job.read_text())
    [build] = [b for b in job["allBuilds"] if b["number"] == 21]
    build["url"] = closed + "/job/Alpha/21/"
    mirrored_job.write_text(json.dumps(job))
    assert mirror(project.parent, mirrored_job) == 0
    assert [b["buildNumber"] for b in builds_in(project)] == [25]
    assert (
        f"failed build 21: cannot reach {closed}{A21}: [Errno 111] Connection refused"
        in capsys.readouterr().out.splitlines()
    )
    assert store_files(project.parent / "artifacts") == [object_of(JAR25)]


def test_a_failed_write_leaves_no_object_behind(project, mirrored_job, monkeypatch, capsys):
    def full_disk(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(rewrite, "replace_file", full_disk)
    before = project.read_bytes()
    assert mirror(project.parent, mirrored_job) == 1
    assert capsys.readouterr().err == (
        f"buildshelf import-jenkins: cannot write {project}: No space left on device "
        "(the file is as it was)\n"
    )
    assert project.read_bytes() == before
    assert store_files(project.parent / "artifacts") == []


def test_a_failed_write_deletes_only_the_objects_its_downloads_made(
    project, mirrored_job, monkeypatch, capsys
):
    # An object no build names (its project file away for a moment): JAR21's, already there,
    # so the download of build 21 makes nothing; and another. Neither is this run's to delete.
    store_dir = project.parent / "artifacts"
    away = [store_dir / object_of(JAR21), store_dir / object_of(b"another project's jar")]
    for path, body in zip(away, [JAR21, b"another project's jar"]):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)

    def full_disk(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(rewrite, "replace_file", full_disk)
    assert mirror(project.parent, mirrored_job) == 1
    assert capsys.readouterr().out == (
        f"deleted {store_dir / object_of(JAR25)} (83.0 KiB), no build uses it\n"
    )
    assert store_files(store_dir) == sorted(str(p.relative_to(store_dir)) for p in away)


def test_an_interrupted_mirror_leaves_no_object_behind(project, mirrored_job, monkeypatch):
    downloaded = []

    def interrupted(url, *args):
        if downloaded:
            raise KeyboardInterrupt
        downloaded.append(real_download(url, *args))
        return downloaded[-1]

    real_download = jenkins_mirror.download
    monkeypatch.setattr(jenkins_mirror, "download", interrupted)
    before = project.read_bytes()
    assert mirror(project.parent, mirrored_job) == 130
    assert len(downloaded) == 1 and project.read_bytes() == before
    assert store_files(project.parent / "artifacts") == []


def test_an_object_removed_before_the_lock_skips_its_build(
    project, mirrored_job, monkeypatch, capsys
):
    def then_removed(url, *args):
        stored = real_download(url, *args)
        if url.endswith(A21):  # as a yank elsewhere, removing unused objects, would
            os.unlink(stored.path)
        return stored

    real_download = jenkins_mirror.download
    monkeypatch.setattr(jenkins_mirror, "download", then_removed)
    assert mirror(project.parent, mirrored_job) == 0
    assert [b["buildNumber"] for b in builds_in(project)] == [25]
    assert "failed build 21: its downloaded file is missing: run again" in (
        capsys.readouterr().out.splitlines()
    )
    assert store_files(project.parent / "artifacts") == [object_of(JAR25)]


# --- what a fetch keeps to: where it connects, what it keeps, how long it waits (issue 23) ---


def raw(head):
    """A route's handler writing `head`, a whole answer, as it is."""

    def handle(handler):
        handler.wfile.write(head)

    return handle


def drip_head(handler):
    """A status line, then a header a byte each 0.1 s for 5 s at most; then the rest."""
    handler.wfile.write(b"HTTP/1.1 200 OK\r\nX-Drip: ")
    with suppress(OSError):  # the client gave up: what this test wants
        for _ in range(50):
            handler.wfile.write(b"x")
            if handler.server.fake.release.wait(0.1):
                return
        handler.wfile.write(b"\r\nContent-Length: 2\r\n\r\nPK")


LOGIN_PAGE = answer(
    b"<html><form>Sign in</form></html>", ("Content-Type", "text/html;charset=utf-8")
)
GZIP_CHUNKED = raw(
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nPK\r\n0\r\n\r\n"
)
GZIP_CHUNKED_REASON = "{url} sent its body as 'gzip, chunked': only 'chunked' is read"


@pytest.mark.parametrize(
    "route, reason",
    [
        pytest.param(
            LOGIN_PAGE,
            "{url} answered an HTML page (text/html), not the file: it looks like a login page",
            id="login page",
        ),
        pytest.param(GZIP_CHUNKED, GZIP_CHUNKED_REASON, id="gzip, chunked"),
        pytest.param(drip_head, "no answer from {url} within 0.5 s", id="dripped headers"),
    ],
)
def test_a_download_that_is_not_the_file_or_drips_fails_its_build(
    project, mirrored_job, fake_jenkins, capsys, route, reason
):
    fake_jenkins.routes[A21] = route
    assert mirror(project.parent, mirrored_job) == 0
    assert [b["buildNumber"] for b in builds_in(project)] == [25]
    added, failed = capsys.readouterr().out.splitlines()
    assert failed.startswith("failed build 21: " + reason.format(url=fake_jenkins.base + A21))
    assert store_files(project.parent / "artifacts") == [object_of(JAR25)]


def test_an_html_artifact_may_be_html(project, mirrored_job, fake_jenkins):
    job = json.loads(mirrored_job.read_text())
    [build] = [b for b in job["allBuilds"] if b["number"] == 21]
    build["artifacts"] = [{"fileName": "alpha-21.html", "relativePath": "docs/alpha-21.html"}]
    mirrored_job.write_text(json.dumps(job))
    fake_jenkins.routes["/job/Alpha/21/artifact/docs/alpha-21.html"] = LOGIN_PAGE
    assert mirror(project.parent, mirrored_job, r"--artifact=-2[15]\.jar$|\.html$") == 0
    assert sorted(b["file"] for b in builds_in(project)) == ["alpha-1.21.5-25.jar", "alpha-21.html"]


def test_a_redirect_to_another_loopback_name_is_refused_unless_allowed(
    project, mirrored_job, fake_jenkins, capsys
):
    base = fake_jenkins.base  # http://127.0.0.1:PORT: the job's host, allowed at any address
    elsewhere = base.replace("127.0.0.1", "localhost") + "/elsewhere/alpha.jar"
    fake_jenkins.routes.update({A21: redirect(elsewhere), "/elsewhere/alpha.jar": JAR21})
    assert mirror(project.parent, mirrored_job) == 0
    assert [b["buildNumber"] for b in builds_in(project)] == [25]
    assert capsys.readouterr().out.splitlines()[1] == (
        f"failed build 21: {base}{A21} was redirected to localhost, which is at 127.0.0.1, "
        "a loopback address: not fetched (--allow-host localhost allows it)"
    )
    assert "/elsewhere/alpha.jar" not in fake_jenkins.paths
    assert store_files(project.parent / "artifacts") == [object_of(JAR25)]
    assert mirror(project.parent, mirrored_job, "--allow-host", "LocalHost") == 0
    assert sorted(b["buildNumber"] for b in builds_in(project)) == [21, 25]
    assert fake_jenkins.paths[-1] == "/elsewhere/alpha.jar"


def test_a_redirect_to_the_jobs_own_host_is_followed(project, mirrored_job, fake_jenkins):
    fake_jenkins.routes.update(
        {A21: redirect("/elsewhere/alpha.jar"), "/elsewhere/alpha.jar": JAR21}
    )
    assert mirror(project.parent, mirrored_job) == 0
    assert sorted(b["buildNumber"] for b in builds_in(project)) == [21, 25]


class NoTrafficOut(socket.socket):
    """A socket that connects to the fake Jenkins only: the test says where else it went."""

    def connect(self, address):
        if address[0] != "127.0.0.1":
            raise OSError(f"the test kept a connection to {address[0]} from going out")
        super().connect(address)


@pytest.mark.parametrize(
    "address, kind",
    [
        ("10.0.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("127.0.0.2", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "non-public"),
        ("::1", "loopback"),
        ("fd00::1", "private"),
        ("fe80::1", "link-local"),
        ("::ffff:169.254.169.254", "link-local"),
        ("93.184.215.14", None),
    ],
)
def test_a_redirect_is_checked_on_the_address_it_would_connect_to(
    project, mirrored_job, fake_jenkins, monkeypatch, capsys, address, kind
):
    """internal.test resolves to `address` here, first and then to another (DNS rebinding):
    nothing connects to anything but 127.0.0.1 and the address checked."""
    answers = iter([address, "93.184.215.14"] if kind else [address, "10.0.0.1"])
    real_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host != "internal.test":
            return real_getaddrinfo(host, port, *args, **kwargs)
        found = next(answers)
        if ":" in found:
            return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (found, port, 0, 0))]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (found, port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket, "socket", NoTrafficOut)
    fake_jenkins.routes[A21] = redirect("http://internal.test/alpha.jar")
    url = fake_jenkins.base + A21
    stopped = f"cannot reach {url}: the test kept a connection to {address} from going out"
    for allowed in ([], ["--allow-host", "internal.test"]):
        assert mirror(project.parent, mirrored_job, *allowed) == 0
        reason = capsys.readouterr().out.splitlines()[-1]
        if kind and not allowed:
            assert reason == (
                f"failed build 21: {url} was redirected to internal.test, which is at "
                f"{address}, a {kind} address: not fetched (--allow-host internal.test allows it)"
            )
        else:
            assert reason == f"failed build 21: {stopped}"
        answers = iter([address, "10.0.0.1"])


def job_route(fake_jenkins, route):
    fake_jenkins.routes["/job/Alpha/api/json"] = route
    return fake_jenkins.base + "/job/Alpha/api/json"


@pytest.mark.parametrize(
    "route, reason",
    [
        pytest.param(drip_head, "no answer from {url} within 0.5 s", id="dripped headers"),
        pytest.param(
            answer(b"{", length=1000, then=drip),
            "{url} is too slow: ",
            id="dripped JSON",
        ),
        pytest.param(
            answer(b"{", length=1000, then=stall), "{url} sent nothing for 0.5 s", id="stalled JSON"
        ),
        pytest.param(GZIP_CHUNKED, GZIP_CHUNKED_REASON, id="gzip, chunked"),
    ],
)
def test_a_job_json_that_drips_or_is_misframed_is_refused(
    project, fake_jenkins, capsys, route, reason
):
    url = job_route(fake_jenkins, route)
    assert run(project.parent, "--job-url", url, "--timeout", "0.5") == 1
    assert capsys.readouterr().err.startswith(
        "buildshelf import-jenkins: " + reason.format(url=url)
    )
    assert builds_in(project) == []


def test_a_job_json_redirected_to_another_loopback_name_is_refused_unless_allowed(
    project, fake_jenkins, capsys
):
    elsewhere = fake_jenkins.base.replace("127.0.0.1", "localhost") + "/job/Alpha/api/json"
    fake_jenkins.routes["/job/Moved/api/json"] = redirect(elsewhere)
    url = fake_jenkins.base + "/job/Moved/api/json"
    assert run(project.parent, "--job-url", url) == 1
    assert capsys.readouterr().err == (
        f"buildshelf import-jenkins: {url} was redirected to localhost, which is at 127.0.0.1, "
        "a loopback address: not fetched (--allow-host localhost allows it)\n"
    )
    assert run(project.parent, "--job-url", url, "--allow-host", "localhost") == 0
    assert len(builds_in(project)) == 3


@pytest.mark.parametrize("value", ["http://ci.internal", "ci.internal:8080", "ci internal", ""])
def test_allow_host_takes_a_host_alone(project, capsys, value):
    with pytest.raises(SystemExit) as exited:
        run(project.parent, "--job-json", FREESTYLE, "--allow-host", value)
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(
        f"argument --allow-host: {value!r} is not a host name or address (no scheme or port)\n"
    )


# --- saving the job's JSON (issue 17) --------------------------------------------------------

PUBLISHING = os.path.join(ROOT, "docs", "publishing.md")


def test_the_docs_save_the_job_json_with_the_tree_import_jenkins_reads():
    with open(PUBLISHING, encoding="utf-8") as f:
        docs = f.read()
    job = "https://ci.buildshelf.example/job/Tinplate/"
    assert f"curl -fsS '{remote_api.api_url(job)}' -o tinplate-job.json" in docs
    sample = docs.split("A saved file looks", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    [build] = remote_api.parse_job(sample.encode(), "the sample")
    assert remote_api.to_build(build)["channelVersion"] == "1.21.4"


def test_the_plain_api_json_is_one_message_saying_what_to_fetch(project, tmp_path, capsys):
    plain = {
        "_class": "hudson.model.FreeStyleProject",
        "builds": [
            {"_class": "hudson.model.FreeStyleBuild", "number": n, "url": f"{JOB}{n}/"}
            for n in (9, 8)
        ],
    }
    path = tmp_path / "job.json"
    path.write_text(json.dumps(plain))
    before = project.read_bytes()
    assert run(project.parent, "--job-json", str(path)) == 1
    assert capsys.readouterr() == (
        "",
        f"buildshelf import-jenkins: {path} tells no build's displayName, result, timestamp, "
        "artifacts: save the job's JSON with the fields Buildshelf reads: curl -fsS "
        f"'{remote_api.api_url(JOB)}' -o job.json\n",
    )
    assert project.read_bytes() == before


# --- extra files: --extra-artifact (issue 35) ---------------------------------------------------

PAPERCLIP = "paperclip/alpha-paperclip-21.jar"
JAVADOC = "build/libs/alpha-1.21.4-21-javadoc.jar"
EXTRA_ARTIFACTS = ("--extra-artifact", r"server:paperclip=^paperclip/",
                   "--extra-artifact", r"docs:javadoc=-javadoc\.jar$")  # fmt: skip


def test_an_extra_artifact_is_linked_under_its_key_and_a_build_without_it_has_none(project, capsys):
    assert run(project.parent, "--job-json", FREESTYLE, *EXTRA_ARTIFACTS) == 0
    built = {build["buildNumber"]: build for build in builds_in(project)}
    assert built[21] == dict(
        FREESTYLE_BUILDS[1],
        downloads={
            "docs:javadoc": {"downloadUrl": JOB + "21/artifact/" + JAVADOC},
            "server:paperclip": {"downloadUrl": JOB + "21/artifact/" + PAPERCLIP},
        },
    )
    assert built[25] == FREESTYLE_BUILDS[2] and built[20] == FREESTYLE_BUILDS[0]
    assert capsys.readouterr().out.splitlines()[1] == (
        "added build 21: channel 1.21.4, docs:javadoc, server:paperclip"
    )
    assert checking.check_directory(project.parent) == []


def test_extra_artifacts_are_picked_before_the_primary(project):
    # the default rule's jar taken as an extra file: the primary is the next one it allows
    taken = ("--extra-artifact", r"server:mojmap=alpha-1\.21\.4-21\.jar$")
    assert run(project.parent, "--job-json", FREESTYLE, *taken) == 0
    [built] = [build for build in builds_in(project) if build["buildNumber"] == 21]
    assert built["downloadUrl"] == JOB + "21/artifact/" + PAPERCLIP
    assert built["downloads"] == {
        "server:mojmap": {"downloadUrl": FREESTYLE_BUILDS[1]["downloadUrl"]}
    }


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--extra-artifact", "paperclip"], "'paperclip' is not KEY=REGEX"),
        (["--extra-artifact", "server:default=x"], "the key 'server:default' is the primary"),
        (["--extra-artifact", "A:b=x"], "the key 'A:b' must be kind:variant"),
        (["--extra-artifact", "a:b=("], "'(' is not a regular expression"),
        (["--extra-artifact", "a:b=x", "--extra-artifact", "a:b=y"], "a:b is given twice"),
        (
            [arg for n in range(17) for arg in ("--extra-artifact", f"a:{n}=x")],
            "17 --extra-artifact: a build takes 16 at most",
        ),
    ],
)
def test_a_bad_extra_artifact_is_bad_usage(project, capsys, flags, message):
    with pytest.raises(SystemExit) as exited:
        run(project.parent, "--job-json", FREESTYLE, *flags)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err.splitlines()[-1]


A21_PAPERCLIP = "/job/Alpha/21/artifact/" + PAPERCLIP
A21_JAVADOC = "/job/Alpha/21/artifact/" + JAVADOC
PAPERCLIP_JAR, JAVADOC_JAR = b"PK\x03\x04 paperclip " * 2000, b"PK\x03\x04 javadoc " * 1000


def test_mirror_keeps_each_extra_artifact_as_publish_extra_file_does(
    project, mirrored_job, fake_jenkins, capsys
):
    fake_jenkins.routes.update({A21_PAPERCLIP: PAPERCLIP_JAR, A21_JAVADOC: JAVADOC_JAR})
    data_dir, base = project.parent, fake_jenkins.base
    assert mirror(data_dir, mirrored_job, *EXTRA_ARTIFACTS) == 0
    [built] = [build for build in builds_in(project) if build["buildNumber"] == 21]
    assert built == dict(
        kept(FREESTYLE_BUILDS[1], base, JAR21, "alpha-1.21.4-21.jar"),
        downloads={
            "docs:javadoc": {
                "sha256": hashlib.sha256(JAVADOC_JAR).hexdigest(),
                "size": len(JAVADOC_JAR),
                "file": "alpha-1.21.4-21-javadoc.jar",
            },
            "server:paperclip": {
                "sha256": hashlib.sha256(PAPERCLIP_JAR).hexdigest(),
                "size": len(PAPERCLIP_JAR),
                "file": "alpha-paperclip-21.jar",
            },
        },
    )
    assert capsys.readouterr().out.splitlines()[1] == (
        f"added build 21: channel 1.21.4, kept as alpha-1.21.4-21.jar ({len(JAR21):,} bytes), "
        f"docs:javadoc kept as alpha-1.21.4-21-javadoc.jar ({len(JAVADOC_JAR):,} bytes), "
        f"server:paperclip kept as alpha-paperclip-21.jar ({len(PAPERCLIP_JAR):,} bytes)"
    )
    jars = (JAR21, JAR25, PAPERCLIP_JAR, JAVADOC_JAR)
    assert store_files(data_dir / "artifacts") == sorted(map(object_of, jars))
    assert cli.main(["check", "--data", str(data_dir), "--verify"]) == 0


def test_mirror_fails_a_build_whose_extra_artifact_fails_and_keeps_none_of_its_files(
    project, mirrored_job, fake_jenkins, capsys
):
    fake_jenkins.routes.update({A21_PAPERCLIP: PAPERCLIP_JAR})  # and no javadoc: a 404
    data_dir = project.parent
    assert mirror(data_dir, mirrored_job, *EXTRA_ARTIFACTS) == 0
    assert [b["buildNumber"] for b in builds_in(project)] == [25]
    deleted, added, failed = capsys.readouterr().out.splitlines()
    # the primary's file, downloaded first, deleted: a build is added whole or not at all
    assert deleted.startswith(f"deleted {data_dir / 'artifacts' / object_of(JAR21)} (")
    assert added.startswith("added build 25: ")
    assert failed == f"failed build 21: {fake_jenkins.base}{A21_JAVADOC} answered 404 Not Found"
    assert store_files(data_dir / "artifacts") == [object_of(JAR25)]
