"""import-jenkins: a Jenkins job's remote API JSON (freestyle and pipeline fixtures in
tests/jenkins_jobs/) merged into a project's file, from a file or over HTTP."""

import http.server
import json
import os
import socket
import threading

import pytest

import cli
import jenkins
import store as store_module
import writer

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jenkins_jobs")
FREESTYLE = os.path.join(FIXTURES, "freestyle.json")
PIPELINE = os.path.join(FIXTURES, "pipeline.json")
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
    assert run(project.parent, "--job-json", FREESTYLE) == 0
    assert builds_in(project) == FREESTYLE_BUILDS
    assert capsys.readouterr().out.splitlines() == [
        "added build 25: channel 1.21.5, experimental",
        "added build 21: channel 1.21.4",
        "added build 20: channel 1.21.4",
        *(line.replace("build", "skipped build", 1) for line in FREESTYLE_SKIPPED),
        "canvas: added 3, skipped 6, 0 already there",
    ]
    assert store_module.check_directory(project.parent) == []


def test_a_pipeline_job_reads_its_change_sets(project, capsys):
    assert run(project.parent, "--job-json", PIPELINE) == 0
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
        "canvas: added 2, skipped 2, 0 already there",
    ]


def test_a_second_run_adds_nothing_and_writes_nothing(project, capsys):
    assert run(project.parent, "--job-json", FREESTYLE) == 0
    before = project.read_bytes(), os.stat(project).st_mtime_ns
    capsys.readouterr()
    assert run(project.parent, "--job-json", FREESTYLE) == 0
    assert (project.read_bytes(), os.stat(project).st_mtime_ns) == before
    assert capsys.readouterr().out.splitlines()[-1] == (
        "canvas: added 0, skipped 6, 3 already there"
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
        "canvas: would add 3, would skip 6, 0 already there",
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


def test_a_build_the_server_would_refuse_is_skipped_with_its_reason(project, tmp_path, capsys):
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
        ]
    }
    (tmp_path / "job.json").write_text(json.dumps(job))
    assert run(project.parent, "--job-json", str(tmp_path / "job.json")) == 0
    assert capsys.readouterr().out.splitlines() == [
        "skipped build 5: 'channelVersion' must be a non-empty string of letters, digits and "
        ". _ + -",
        "skipped build 6: commits[0]: 'hash' must be a string of hexadecimal digits",
        "skipped allBuilds[2]: no build number",
        "skipped allBuilds[3]: no build number",
        "skipped build 8: 'timestamp' must be an integer",
        "canvas: added 0, skipped 5, 0 already there",
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
            f"(.../job/NAME/api/json?tree={jenkins.TREE})?",
        ),
        (
            b'{"allBuilds": {}}',
            "{path} has no 'allBuilds' array: is it the remote API JSON of a "
            f"job (.../job/NAME/api/json?tree={jenkins.TREE})?",
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
        f"buildshelf import-jenkins: no project 'gamma' in {project.parent}: add it first with "
        "'buildshelf add-project gamma --ci-job ... --ci-job-url ... --javadoc-base-url ...'",
    ]


# --- over HTTP ----------------------------------------------------------------------------------


@pytest.fixture
def fake_jenkins():
    """A Jenkins on 127.0.0.1 serving the freestyle fixture at /job/Alpha/api/json."""
    paths = []
    with open(FREESTYLE, "rb") as f:
        freestyle = f.read()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            paths.append(self.path)
            if self.path.startswith("/job/Alpha/api/json"):
                body = freestyle
                self.send_response(200)
            else:
                body = b"<html>Not found</html>"
                self.send_response(404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", paths
    server.shutdown()
    server.server_close()
    thread.join()


def test_the_job_is_fetched_from_its_url(project, fake_jenkins):
    base, paths = fake_jenkins
    assert run(project.parent, "--job-url", base + "/job/Alpha/") == 0
    assert builds_in(project) == FREESTYLE_BUILDS
    assert paths == ["/job/Alpha/api/json?tree=" + jenkins.quote(jenkins.TREE, safe="")]


def test_an_http_error_is_refused(project, fake_jenkins, capsys):
    base, _ = fake_jenkins
    assert run(project.parent, "--job-url", base + "/job/Nope/") == 1
    url = f"{base}/job/Nope/api/json?tree=" + jenkins.quote(jenkins.TREE, safe="")
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
    os.unlink(project.parent / writer.LOCK_NAME)  # so that taking the lock would show
    before = sorted(os.listdir(project.parent)), project.read_bytes()
    assert run(project.parent, "--job-json", FREESTYLE, "--dry-run") == 0
    assert (sorted(os.listdir(project.parent)), project.read_bytes()) == before
