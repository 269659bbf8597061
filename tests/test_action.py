"""The GitHub Action (action.yml, which runs action/publish.sh): its inputs as the docs name
them; and its steps run as GitHub's runner runs them, under `bash -eo pipefail`, against a
real server that trusts the job's repository, with a stand-in of the runner's token endpoint
and of GitHub's OIDC issuer (tests/github_actions.py, tests/oidc_issuer.py), behind a front
that fails as a proxy would: a publish, a job without `id-token: write`, retries with a fresh
token, the answers that are not retried, a re-run of the same workflow run, and an audience
that must be URL-encoded."""

import hashlib
import json
import os
import re
import stat
import subprocess
from contextlib import ExitStack, contextmanager

import pytest
import yaml

from buildshelf import store as store_module
from buildshelf.publishing import trust
from github_actions import (
    DROP,
    ROOT,
    action,
    front,
    github_token_endpoint,
    run_action,
)
from helpers import real_server

REPOSITORY = "acme/tinplate"
JAR = "build/libs/tinplate-1.21.4.jar"
MOJMAP = "build/libs/tinplate-1.21.4-mojmap.jar"
SCRIPT = os.path.join(ROOT, "action", "publish.sh")


def read(*path):
    with open(os.path.join(ROOT, *path), encoding="utf-8") as f:
        return f.read()


# --- action.yml ----------------------------------------------------------------------------------


def docs_inputs():
    """The inputs that docs/publishing.md's table of the action's inputs names, in order."""
    text = read("docs", "publishing.md")
    table = text[text.index("| input |") :].split("\n\n", 1)[0]
    return re.findall(r"^\| `([\w-]+)` \|", table, re.M)


def test_action_yml_is_a_composite_action_with_the_inputs_the_docs_name():
    found = action()
    assert found["runs"]["using"] == "composite"
    inputs = found["inputs"]
    assert list(inputs) == docs_inputs()
    assert [name for name, spec in inputs.items() if spec.get("required")] == [
        "url", "project", "file", "channel"
    ]  # fmt: skip
    assert all(spec.get("description") for spec in inputs.values())
    [step] = found["runs"]["steps"]
    # Every input reaches the script by the environment, none by the script's text (an
    # input's value in a `run:` would be run as shell).
    given = {re.fullmatch(r"\$\{\{ inputs\.([\w-]+) \}\}", v)[1]: k for k, v in step["env"].items()}
    assert sorted(given) == sorted(inputs)
    # The rule docs/publishing.md gives for running the script without the action.
    assert all(v == "BUILDSHELF_" + k.upper().replace("-", "_") for k, v in given.items())
    assert "${{" not in step["run"] and "$GITHUB_ACTION_PATH/action/publish.sh" in step["run"]
    script = read("action", "publish.sh")
    for variable in given.values():
        assert f"{variable}" in script, variable
    assert os.stat(SCRIPT).st_mode & stat.S_IXUSR  # to run it copied, as the docs say


def test_the_docs_workflow_uses_the_action_with_its_inputs():
    text = read("docs", "publishing.md")
    start = text.index("### GitHub Actions: trusted publishing")
    workflow = yaml.safe_load(
        re.compile(r"^```yaml\n(.*?)^```", re.M | re.S).search(text, start)[1]
    )
    [job] = workflow["jobs"].values()
    assert job["permissions"]["id-token"] == "write"
    [step] = [s for s in job["steps"] if "buildshelf@" in s.get("uses", "")]
    assert re.fullmatch(r"[\w-]+/buildshelf@v1", step["uses"])
    inputs = action()["inputs"]
    required = {name for name, spec in inputs.items() if spec.get("required")}
    assert required <= set(step["with"]) <= set(inputs)


# --- the action run against a real server ------------------------------------------------------


@pytest.fixture
def checkout(tmp_path):
    """A job's workspace: a checkout with three commits and the jar (and its mojmap) built."""
    path = tmp_path / "checkout"
    path.mkdir()
    author = dict(GIT_AUTHOR_NAME="CI", GIT_AUTHOR_EMAIL="ci@example.org",
                  GIT_COMMITTER_NAME="CI", GIT_COMMITTER_EMAIL="ci@example.org",
                  HOME=str(tmp_path), PATH="/usr/bin:/bin")  # fmt: skip
    git = ["git", "-c", "init.defaultBranch=main", "-C", str(path)]
    subprocess.run(git + ["init", "-q"], check=True, env=author)
    for subject in ("Start", "Update upstream", "Fix the spawn chunk"):
        subprocess.run(git + ["commit", "-q", "--allow-empty", "-m", subject], check=True,
                       env=author)  # fmt: skip
    commits = subprocess.run(git + ["log", "--format=%H"], check=True, capture_output=True,
                             text=True, env=author).stdout.split()  # fmt: skip
    (path / "build" / "libs").mkdir(parents=True)
    build(path, b"PK\x03\x04 the first jar")
    (path / MOJMAP).write_bytes(b"PK\x03\x04 its mojmap")
    return path, commits


def build(checkout_path, content):
    (checkout_path / JAR).write_bytes(content)
    return content


class Runner:
    """A job of acme/tinplate's release.yml, run 154 (id 9001), publishing to Buildshelf."""

    def __init__(self, tmp_path, checkout, endpoint, proxy):
        self.path, self.commits = checkout
        self.endpoint, self.front = endpoint, proxy
        self.sleeps = tmp_path / "sleeps"  # the pauses between attempts: recorded, not waited
        bin_dir = tmp_path / "runner-bin"
        bin_dir.mkdir()
        (bin_dir / "sleep").write_text(f'#!/bin/sh\necho "$@" >> {self.sleeps}\n')
        (bin_dir / "sleep").chmod(0o755)
        self.temp = tmp_path / "runner-temp"
        self.temp.mkdir()
        self.environment = dict(
            PATH=f"{bin_dir}:/usr/bin:/bin", HOME=str(tmp_path), RUNNER_TEMP=str(self.temp),
            ACTIONS_ID_TOKEN_REQUEST_URL=endpoint.url,
            ACTIONS_ID_TOKEN_REQUEST_TOKEN="request-token",
            GITHUB_SERVER_URL="https://github.com", GITHUB_REPOSITORY=REPOSITORY,
            GITHUB_RUN_ID="9001", GITHUB_RUN_NUMBER="154", GITHUB_RUN_ATTEMPT="1",
            GITHUB_SHA=self.commits[0],
        )  # fmt: skip

    def run(self, **inputs):
        """The action run with `inputs` over url, project, file and channel."""
        attempt = self.environment["GITHUB_RUN_ATTEMPT"]
        github = {"run_number": "154", "run_attempt": attempt, "sha": self.commits[0],
                  "event.before": self.commits[2]}  # fmt: skip
        given = dict(url=self.front.url, project="alpha", file=JAR, channel="1.21.4") | inputs
        result = run_action(given, github, self.environment, cwd=self.path)
        assert os.listdir(self.temp) == []  # its files removed, whatever happened
        return result

    def slept(self):
        return self.sleeps.read_text().split() if self.sleeps.exists() else []


@contextmanager
def github_job(tmp_path, data_dir, checkout, prefix="", job_ref="refs/heads/main", **trusted):
    """A real server trusting acme/tinplate's jobs for alpha (`trusted`: more of trust.add's
    arguments), behind a front under `prefix`, and the GitHub side of a job of `job_ref`: a
    Runner, and the server's process."""
    from oidc_issuer import OidcIssuer

    state = str(tmp_path / "state")
    trust.add(state, "alpha", REPOSITORY, **trusted)
    with ExitStack() as stack:
        issuer = stack.enter_context(OidcIssuer())
        proxy = stack.enter_context(front(prefix=prefix))
        endpoint = stack.enter_context(
            github_token_endpoint(issuer, "request-token", REPOSITORY, ref=job_ref)
        )
        flags = ("--state", state, "--public-url", proxy.url, "--github-oidc-issuer", issuer.url)
        proxy.upstream_port, process = stack.enter_context(real_server(data_dir, *flags))
        yield Runner(tmp_path, checkout, endpoint, proxy), process


def served(data_dir, number):
    return (
        store_module.Store(str(data_dir), check_interval=0)
        .snapshot()
        .projects["alpha"]
        .build(number)
    )


def said(result):
    return result.stdout + result.stderr


@pytest.mark.system
def test_the_action_publishes_with_trusted_publishing(tmp_path, data_dir, checkout):
    with github_job(tmp_path, data_dir, checkout, workflow="release.yml") as (runner, _):
        result = runner.run(experimental="true", fields='{"timestamp": 1764000000000}',
                            **{"extra-files": f"server:mojmap={MOJMAP}\n"})  # fmt: skip
    assert result.returncode == 0, said(result)
    build = served(data_dir, 154)
    jar = (runner.path / JAR).read_bytes()
    assert (build.file, build.sha256, build.size) == (
        "tinplate-1.21.4.jar", hashlib.sha256(jar).hexdigest(), len(jar)
    )  # fmt: skip
    assert (build.channel, build.is_experimental, build.timestamp) == (
        "1.21.4",
        True,
        1764000000000,
    )
    assert build.url == f"https://github.com/{REPOSITORY}/actions/runs/9001"
    assert [c.hash for c in build.commits] == runner.commits[:2]  # since github.event.before
    assert [c.message for c in build.commits] == ["Fix the spawn chunk", "Update upstream"]
    assert list(build.downloads) == ["server:mojmap"]
    assert runner.endpoint.audiences == [runner.front.url] and runner.front.passed == [201]
    assert runner.slept() == []
    assert json.loads(result.stdout.splitlines()[-1])["buildNumber"] == 154
    [token] = runner.endpoint.tokens
    assert token.rsplit(".", 1)[1] not in said(result)


@pytest.mark.system
@pytest.mark.parametrize("left", [("URL", "TOKEN"), ("TOKEN",), ("URL",)])
def test_a_job_without_id_token_write_is_told_so_and_sends_nothing(
    tmp_path, data_dir, checkout, left
):
    with github_job(tmp_path, data_dir, checkout) as (runner, _):
        for name in left:
            del runner.environment[f"ACTIONS_ID_TOKEN_REQUEST_{name}"]
        result = runner.run()
    assert result.returncode == 1
    assert "permissions: id-token: write" in result.stderr
    assert "ACTIONS_ID_TOKEN_REQUEST_URL" in result.stderr
    assert runner.endpoint.audiences == [] and runner.front.passed == []


@pytest.mark.system
def test_a_503_is_retried_with_a_fresh_token_and_no_earlier_answer_printed(
    tmp_path, data_dir, checkout
):
    with github_job(tmp_path, data_dir, checkout) as (runner, _):
        runner.endpoint.failures = [503]  # attempt 1: no token
        runner.front.failures = [503, DROP]  # attempt 2: 503; attempt 3: no answer at all
        result = runner.run()
    assert result.returncode == 0, said(result)
    assert runner.front.passed == [201]  # attempt 4
    assert len(set(runner.endpoint.tokens)) == 3  # a fresh token for each publish tried
    assert runner.endpoint.audiences == [runner.front.url] * 3
    assert runner.slept() == ["10", "20", "30"]
    # Each answer printed once, with its attempt: attempt 3's lack of one is not attempt 2's.
    assert said(result).count("Endpoint failure 1 (503)") == 1
    assert said(result).count("Proxy failure 1 (503)") == 1
    assert re.findall(r"^attempt (\d) of 5: (.*?):", said(result), re.M) == [
        ("1", "GitHub's token endpoint answered 503"),
        ("2", "Buildshelf answered 503"),
        ("3", "no answer from Buildshelf"),
        ("4", "Buildshelf answered 201"),
    ]
    assert served(data_dir, 154).sha256 == hashlib.sha256(b"PK\x03\x04 the first jar").hexdigest()


@pytest.mark.system
def test_five_attempts_at_most(tmp_path, data_dir, checkout):
    with github_job(tmp_path, data_dir, checkout) as (runner, _):
        runner.front.failures = [502, 504, DROP, 503, 502]
        result = runner.run()
    assert result.returncode == 1
    assert runner.slept() == ["10", "20", "30", "40"] and len(runner.endpoint.tokens) == 5
    assert "gave up after 5 attempts" in result.stderr


@pytest.mark.system
@pytest.mark.parametrize(
    "where, failure, said_then",
    [
        ("front", 500, "Buildshelf answered 500: Proxy failure 1 (500)"),
        ("front", 507, "Buildshelf answered 507"),
        ("endpoint", 400, "GitHub's token endpoint answered 400: Endpoint failure 1 (400)"),
        ("endpoint", 401, "GitHub's token endpoint answered 401"),
    ],
)
def test_an_answer_that_a_retry_cannot_change_is_not_retried(
    tmp_path, data_dir, checkout, where, failure, said_then
):
    with github_job(tmp_path, data_dir, checkout) as (runner, _):
        getattr(runner, where).failures = [failure]
        result = runner.run()
    assert result.returncode == 1
    assert said_then in said(result)
    assert runner.slept() == [] and runner.front.passed == []


@pytest.mark.system
def test_a_job_of_a_ref_not_trusted_is_a_403_not_retried(tmp_path, data_dir, checkout):
    with github_job(
        tmp_path, data_dir, checkout, job_ref="refs/heads/feature", ref="refs/tags/v*"
    ) as (runner, _):
        result = runner.run()
    assert result.returncode == 1
    assert "Buildshelf answered 403" in said(result)
    assert "ref refs/tags/v*" in said(result) and "on ref refs/heads/feature" in said(result)
    assert runner.slept() == [] and len(runner.endpoint.tokens) == 1


@pytest.mark.system
def test_a_re_run_of_the_workflow_run_replaces_its_build(tmp_path, data_dir, checkout):
    with github_job(tmp_path, data_dir, checkout) as (runner, _):
        assert runner.run().returncode == 0
        # Re-run: the same run number, a jar built again, with other bytes (a zip's times).
        runner.environment["GITHUB_RUN_ATTEMPT"] = "2"
        second = build(runner.path, b"PK\x03\x04 built again")
        rerun = runner.run()
        assert rerun.returncode == 0, said(rerun)
        assert runner.front.passed == [201, 200]
        assert served(data_dir, 154).sha256 == hashlib.sha256(second).hexdigest()
        # A first attempt whose build number is taken by other bytes is another run's: refused.
        runner.environment["GITHUB_RUN_ATTEMPT"] = "1"
        build(runner.path, b"PK\x03\x04 another run's")
        other = runner.run()
    assert other.returncode == 1
    assert "Buildshelf answered 409" in said(other) and "build_exists" in said(other)
    assert runner.slept() == []
    assert served(data_dir, 154).sha256 == hashlib.sha256(second).hexdigest()


@pytest.mark.system
def test_the_audience_is_url_encoded(tmp_path, data_dir, checkout):
    # A public URL whose path holds what a query string reads otherwise: `+` (a space), `&`
    # and `=` (another parameter), `%41` (an A).
    with github_job(tmp_path, data_dir, checkout, prefix="/shelf+beta&x=%41") as (runner, _):
        result = runner.run()
    assert result.returncode == 0, said(result)
    assert runner.front.url.endswith("/shelf+beta&x=%41")
    assert runner.endpoint.audiences == [runner.front.url]
    assert runner.front.passed == [201]


@pytest.mark.system
def test_a_url_with_trailing_slashes_is_the_public_url(tmp_path, data_dir, checkout):
    """The audience is the public URL exactly, as the server has it (its slashes at the end
    dropped): `url: https://builds.example.org//` is no other server."""
    with github_job(tmp_path, data_dir, checkout) as (runner, _):
        result = runner.run(url=runner.front.url + "//")
    assert result.returncode == 0, said(result)
    assert runner.endpoint.audiences == [runner.front.url] and runner.front.passed == [201]
