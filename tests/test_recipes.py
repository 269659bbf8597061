"""The recipes for the team that runs the box, run as the docs write them: the set-up steps of
docs/running.md in a temporary root; the HTTPS recipes of docs/publishing.md (GitHub Actions
with trusted publishing, Jenkins and any other CI with a token) against a real server started
there as the unit starts it; the ssh recipes and the lines of deploy/buildshelf.cron, each in
a clean environment (`env -i` with the PATH that sshd or cron gives); and what they wrote read
back where the service reads."""

import hashlib
import http.client
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
from contextlib import contextmanager
from urllib.parse import urlsplit

import pytest
import yaml

from buildshelf import store as store_module
from github_actions import LOST, expanded, front, github_token_endpoint, run_action
from helpers import free_port, wait_for_port

# Each test here starts a process (tests/conftest.py): none is in the fast lane.
pytestmark = pytest.mark.system

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The places the set-up uses: each moves under the temporary root.
BOX_PATHS = ("/etc/buildshelf", "/etc/cron.d", "/etc/systemd/system", "/usr/local/bin",
             "/opt/buildshelf", "/srv/buildshelf", "/var/backups/buildshelf")  # fmt: skip
# What Debian's sshd gives a session's PATH, and cron's own.
SSHD_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/games"
# Set-up steps the test does not run: it makes no venv (the one running the tests stands in
# for it), no user (it writes as whoever runs it) and starts no service.
NOT_RUN = re.compile(r"^(python3 -m venv |/opt/buildshelf/\.venv/bin/pip |adduser |systemctl )")
JOB_URL = "https://ci.buildshelf.example/job/Tinplate/"


def read(*path):
    with open(os.path.join(REPO, *path), encoding="utf-8") as f:
        return f.read()


def code_block(markdown, after, language):
    """The first ```language block after the text `after`, or after each text of a tuple in
    turn (a heading, then a line under it)."""
    start = 0
    for text in (after,) if isinstance(after, str) else after:
        start = markdown.index(text, start)
    match = re.compile(rf"^```{language}\n(.*?)^```", re.M | re.S).search(markdown, start)
    return match[1]


def moved(text, root):
    """`text` with every absolute path of the box moved under `root`."""
    places = "|".join(map(re.escape, BOX_PATHS))
    return re.sub(rf"(?<![\w./-])({places})(?![\w-])", lambda m: root + m[1], text)


@pytest.fixture
def box(tmp_path):
    """A box set up as docs/running.md says, under tmp_path/root; returns that root."""
    return set_up_box(tmp_path, code_block(read("docs", "running.md"), "## Deploying", "sh"))


def set_up_box(tmp_path, setup):
    """A box set up by the lines of `setup` (but NOT_RUN's), run as one script as a reader
    pastes them, under tmp_path/root; returns that root."""
    root = str(tmp_path / "root")
    for place in ("/etc/cron.d", "/etc/systemd/system", "/usr/local/bin"):  # every Debian has
        os.makedirs(root + place)
    os.makedirs(root + "/opt/buildshelf")
    os.symlink(sys.prefix, root + "/opt/buildshelf/.venv")
    script = "\n".join(line for line in setup.splitlines() if not NOT_RUN.match(line))
    script = re.sub(r" -o \S+ -g \S+", "", script)  # no user deploy here
    subprocess.run(["sh", "-euc", moved(script, root)], cwd=REPO, check=True)
    for path in ("/etc/buildshelf/buildshelf.env", "/usr/local/bin/buildshelf",
                 "/usr/local/bin/buildshelf-ssh", "/etc/cron.d/buildshelf"):  # fmt: skip
        with open(root + path, "r+", encoding="utf-8") as f:
            text = moved(f.read(), root)
            f.seek(0)
            f.truncate()
            f.write(text)
    data = root + "/srv/buildshelf/data"
    shutil.copytree(os.path.join(REPO, "data"), data, dirs_exist_ok=True)
    return root


def served(root):
    """The projects the service would serve: the data directory its settings name."""
    with open(root + "/etc/buildshelf/buildshelf.env", encoding="utf-8") as f:
        lines = f.read().splitlines()
    settings = dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))
    assert settings["BUILDSHELF_DATA"] == root + "/srv/buildshelf/data"
    return store_module.Store(settings["BUILDSHELF_DATA"], check_interval=0).snapshot().projects


def forced_command():
    """The command= of the authorized_keys line in docs/publishing.md, which is `restrict`."""
    block = code_block(section("### A key that may only publish and yank"), "```text", "text")
    [line] = block.splitlines()
    options = line.split(" ", 1)[0]
    assert options.split(",")[0] == "restrict"
    return re.fullmatch(r'restrict,command="([^"]+)"', options)[1]


@pytest.fixture
def ci_side(tmp_path, box):
    """A CI job's side: a checkout with three commits, and an `ssh` that runs on the box what
    sshd runs for the key of docs/publishing.md's authorized_keys line: its forced command,
    by the login shell, in a clean environment with sshd's PATH and SSH_ORIGINAL_COMMAND.
    It keeps the ssh command lines in `ssh_calls`, and holds a host to its pinned key: with
    a ~/.ssh/known_hosts, the host must be there."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    author = dict(GIT_AUTHOR_NAME="CI", GIT_AUTHOR_EMAIL="ci@example.org",
                  GIT_COMMITTER_NAME="CI", GIT_COMMITTER_EMAIL="ci@example.org", HOME=str(tmp_path))  # fmt: skip
    git = ["git", "-c", "init.defaultBranch=main", "-C", str(checkout)]
    subprocess.run(git + ["init", "-q"], check=True, env=author)
    for subject in ("Start", "Update upstream", "Fix the spawn chunk"):
        subprocess.run(
            git + ["commit", "-q", "--allow-empty", "-m", subject], check=True, env=author
        )
    commits = subprocess.run(git + ["log", "--format=%H"], check=True, capture_output=True,
                             text=True).stdout.split()  # fmt: skip
    bin_dir = tmp_path / "ci-bin"
    bin_dir.mkdir()
    ssh = bin_dir / "ssh"
    calls = tmp_path / "ssh-calls"
    forced = shlex.quote(moved(forced_command(), box))
    ssh.write_text(
        "#!/bin/bash\n"
        f'echo "$*" >> {calls}\n'
        "while [[ $1 == -* ]]; do [[ $1 == -[oi] ]] && shift; shift; done\n"
        "host=${1#*@}; shift  # the rest is the command line sshd hands the forced command\n"
        'if [ -e ~/.ssh/known_hosts ] && ! grep -q "^$host " ~/.ssh/known_hosts; then\n'
        '    echo "Host key verification failed." >&2; exit 255\n'
        "fi\n"
        f"exec env -i HOME=/nonexistent PATH={box}/usr/local/bin:{SSHD_PATH.split(':', 1)[1]} "
        f'SSH_ORIGINAL_COMMAND="$*" /bin/bash -c {forced}\n'
    )
    ssh.chmod(0o755)
    home = tmp_path / "ci-home"  # no ~/.ssh: a fresh runner has none
    home.mkdir()
    return dict(checkout=str(checkout), commits=commits, path=f"{bin_dir}:/usr/bin:/bin",
                home=str(home), ssh_calls=calls)  # fmt: skip


def the_box(box):
    """Every file under /srv/buildshelf (the data, the store, the state) with its bytes."""
    top = box + "/srv/buildshelf"
    found = {}
    for directory, _, names in os.walk(top):
        for name in names:
            with open(os.path.join(directory, name), "rb") as f:
                found[os.path.relpath(os.path.join(directory, name), top)] = f.read()
    return found


def test_the_github_actions_ssh_recipe_publishes_the_jar_through_the_forced_command(
    box, ci_checkout
):
    ci_side, content = ci_checkout
    workflow = code_block(section("### GitHub Actions over ssh"), "```yaml", "yaml")
    [step] = [s for s in workflow.split("- name: ")[1:] if s.startswith("Publish to Buildshelf")]
    step_env = dict(re.findall(r"^ {10}(\w+): (.+)$", step.split("run: |\n")[0], re.M))
    assert step_env["SSH_KEY"] == "${{ secrets.BUILDSHELF_SSH_KEY }}"
    known_host = step_env["KNOWN_HOST"]
    assert re.fullmatch(r"builds\.example\.org ssh-ed25519 \S+", known_host)  # pinned
    assert "ssh-keyscan -t ed25519 builds.example.org" in section("### GitHub Actions over ssh")
    run = textwrap.dedent(step.split("run: |\n", 1)[1])
    assert "ssh-keyscan" not in run  # never trusted from the job itself
    head, second, first = ci_side["commits"]

    def job(before, number):
        environment = dict(PATH=ci_side["path"], HOME=ci_side["home"], BEFORE=before,
                           SSH_KEY="dummy-key", KNOWN_HOST=known_host,
                           GITHUB_SERVER_URL="https://github.com", GITHUB_REPOSITORY="acme/tinplate",
                           GITHUB_RUN_ID="9001", GITHUB_RUN_NUMBER=number, GITHUB_SHA=head)  # fmt: skip
        # As GitHub runs a `shell: bash` step.
        return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", run],
                              cwd=ci_side["checkout"], env=environment, capture_output=True,
                              text=True, timeout=120)  # fmt: skip

    result = job(first, "154")
    assert (result.returncode, result.stdout) == (0, "published build 154 of tinplate\n"), result
    build = assert_kept(box, 154, content)
    assert build.url == "https://github.com/acme/tinplate/actions/runs/9001"
    assert [c.hash for c in build.commits] == [head, second]
    with open(os.path.join(ci_side["home"], ".ssh", "known_hosts")) as f:
        assert f.read() == known_host + "\n"
    with open(ci_side["ssh_calls"]) as f:
        assert "-o StrictHostKeyChecking=yes" in f.read()
    # A re-run: the same number, a jar built again with other bytes: replaced.
    with open(os.path.join(ci_side["checkout"], JAR), "ab") as f:
        f.write(b"built again")
    result = job(first, "154")
    assert result.returncode == 0, result
    assert result.stdout.startswith("replaced build 154 of tinplate\ndeleted "), result
    assert_kept(box, 154, content + b"built again")
    # A new branch's first push: before is all zeros, and the last commit is the build's.
    result = job("0" * 40, "155")
    assert (result.returncode, result.stdout) == (0, "published build 155 of tinplate\n"), result
    assert [c.hash for c in served(box)["tinplate"].build(155).commits] == [head]


def test_the_jenkins_ssh_recipe_publishes_through_the_forced_command(box, ci_side):
    pipeline = code_block(section("### Jenkins over ssh"), "```groovy", "groovy")
    script = sh_step(pipeline)
    head, _, first = ci_side["commits"]
    environment = dict(PATH=ci_side["path"], HOME=ci_side["home"], BUILD_NUMBER="155",
                       BUILD_URL=JOB_URL + "155/", GIT_COMMIT=head,
                       GIT_PREVIOUS_SUCCESSFUL_COMMIT=first)  # fmt: skip
    result = subprocess.run(["bash", "-c", script], cwd=ci_side["checkout"], env=environment,
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 0, result.stderr
    build = served(box)["tinplate"].build(155)
    assert build.download_url == JOB_URL + "155/artifact/build/libs/tinplate-1.21.4.jar"
    assert len(build.commits) == 2


def forced(box, command, stdin=b"PK\x03\x04 a jar"):
    """The forced command run as sshd runs it for `command`, the jar on its stdin."""
    return subprocess.run(
        ["/bin/bash", "-c", moved(forced_command(), box)],
        env={"HOME": "/nonexistent", "PATH": f"{box}/usr/local/bin:/usr/bin:/bin",
             "SSH_ORIGINAL_COMMAND": command},
        input=stdin, capture_output=True, timeout=60,
    )  # fmt: skip


PUBLISH = "buildshelf publish tinplate --build 9 --channel 1.21.4 "


@pytest.mark.parametrize(
    "command",
    [
        PUBLISH + "--file /etc/passwd",
        PUBLISH + "--file /etc/buildshelf/buildshelf.env --name buildshelf.env",
        PUBLISH + "--file=/etc/passwd --name x.jar",
        PUBLISH + "--file - --name x.jar --data /tmp",
        PUBLISH + "--file - --name x.jar --dat /tmp",  # argparse would take an abbreviation
        PUBLISH + "--file - --name x.jar --data=/tmp",
        PUBLISH + "--file - --name x.jar --artifacts /tmp",
        PUBLISH + "--file - --name x.jar --state /tmp",
        PUBLISH + "--file - --name x.jar --git HEAD",
        PUBLISH + "--file - --name x.jar --max-file-mb 99999",
        PUBLISH + "--file - --name --data /tmp",
        PUBLISH + "--file - --name x.jar; touch CANARY",
        PUBLISH + "--file - --name x.jar && touch CANARY",
        PUBLISH + "--file - --name x.jar | touch CANARY",
        PUBLISH + "--file - --name x.jar > CANARY",
        PUBLISH + "--file - --name $(touch CANARY).jar",
        PUBLISH + "--file - --name `touch CANARY`.jar",
        PUBLISH + '--file - --name "$(touch CANARY)".jar',
        PUBLISH + "--file - --name x.jar\ntouch CANARY",
        PUBLISH + "--file - --name x.jar --commit abc",
        PUBLISH + "--file - --name x.jar extra",
        PUBLISH + "--file - --name 'x.jar",
        PUBLISH + "--file - --name ~/x.jar",
        PUBLISH + "--file - --name x.jar\\",
        "buildshelf yank tinplate #105",
        "buildshelf yank tinplate 105 106",
        "buildshelf yank tinplate 105; touch CANARY",
        "buildshelf yank tinplate 105 --purge",
        "buildshelf check --prune",
        "buildshelf token create tinplate",
        "buildshelf trust tinplate --github evil/fork",
        "buildshelf",
        "touch CANARY",
        "bash -c 'touch CANARY'",
        "",
        "buildshelf yank " + "tinplate " * 1000,
    ],
)
def test_the_forced_command_refuses_anything_else_and_runs_nothing(box, tmp_path, command):
    canary = tmp_path / "canary"
    before = the_box(box)
    result = forced(box, command.replace("CANARY", str(canary)))
    assert result.returncode == 2, result
    assert result.stderr.decode().startswith("buildshelf-ssh: refused: "), result.stderr
    assert len(result.stderr.decode().splitlines()) == 1
    assert the_box(box) == before and not canary.exists()


def test_the_forced_command_passes_quoted_text_on_as_it_is(box):
    args = ["publish", "tinplate", "--build", "9", "--channel", "1.21.4", "--file", "-",
            "--name", "x.jar", "--url", "https://ci.example.org/~ci/9#log",
            "--commit", "ab12", "Fix #12: `a; b` $(c) it's {d,e} ~f *"]  # fmt: skip
    quoted = subprocess.run(["bash", "-c", 'printf "%q " "$@"', "-", *args], check=True,
                            capture_output=True, text=True).stdout  # fmt: skip
    result = forced(box, "buildshelf " + quoted, stdin=b"the jar")
    assert result.returncode == 0, result.stderr
    build = served(box)["tinplate"].build(9)
    assert (build.file, build.size, build.url) == ("x.jar", 7, args[11])
    assert build.commits[0].message == args[-1]
    assert forced(box, "buildshelf yank tinplate 9").returncode == 0
    assert 9 not in [b.number for b in served(box)["tinplate"].builds]


def test_the_cron_lines_run_with_cron_s_path(box, fake_jenkins):
    jenkins = fake_jenkins.base + "/job/Alpha/"  # it serves the freestyle job there
    with open(box + "/etc/cron.d/buildshelf", encoding="utf-8") as f:
        crontab = f.read()
    [path] = re.findall(r"^PATH=(.*)$", crontab, re.M)
    jobs = [line.split(None, 6) for line in crontab.splitlines() if re.match(r"^[\d*]", line)]
    assert [job[5] for job in jobs] == ["deploy", "deploy"]  # the user who writes the data

    def cron(command):
        # As cron runs a line: /bin/sh -c, a clean environment but for the crontab's own.
        result = subprocess.run(["env", "-i", f"PATH={path}", "HOME=/nonexistent", "/bin/sh",
                                 "-c", command.replace(JOB_URL, jenkins)],
                                capture_output=True, text=True)  # fmt: skip
        assert result.returncode == 0, (command, result.stdout, result.stderr)
        return result.stdout + result.stderr

    first = [cron(command) for *_, command in jobs]
    assert "added build 21: channel 1.21.4" in first[0]
    assert served(box)["tinplate"].build(21).channel == "1.21.4"  # imported from the job
    # cron mails what a job prints: with nothing new and nothing wrong, nothing.
    assert [cron(command) for *_, command in jobs] == ["", ""]


def test_deploying_sets_the_public_url_before_the_first_start_and_says_to_restart(tmp_path):
    # A newcomer follows the steps in order: the service reads the settings when it starts.
    section = read("docs", "running.md").split("## Deploying", 1)[1].split("\n## ", 1)[0]
    setup = code_block(section, "", "sh")
    lines = setup.splitlines()
    start = next(i for i, line in enumerate(lines) if "enable --now buildshelf" in line)
    edits = [i for i, line in enumerate(lines) if "BUILDSHELF_PUBLIC_URL=" in line]
    assert edits and max(edits) < start
    assert "systemctl restart buildshelf" in section  # what a later edit needs
    [host] = re.findall(r"^host=(\S+)", setup, re.M)
    root = set_up_box(tmp_path, setup.replace(f"host={host}", "host=builds.acme.test"))
    with open(root + "/etc/buildshelf/buildshelf.env", encoding="utf-8") as f:
        assert "\nBUILDSHELF_PUBLIC_URL=https://builds.acme.test\n" in f.read()


def test_the_settings_file_reaches_the_service_and_every_user(box):
    unit = read("deploy", "buildshelf.service")
    assert "EnvironmentFile=/etc/buildshelf/buildshelf.env" in unit.splitlines()
    wrapper = read("deploy", "buildshelf")
    assert ". /etc/buildshelf/buildshelf.env" in wrapper
    assert re.search(r"^ExecStart=(\S+)$", unit, re.M)[1] in wrapper  # the same command
    # A flag still wins over the file.
    result = subprocess.run(["env", "-i", f"PATH={box}/usr/local/bin:/usr/bin:/bin", "buildshelf",
                             "check", "--data", box + "/nowhere"], capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 2 and "nowhere" in result.stderr


# --- over HTTPS ---

PUBLIC_URL = "https://builds.example.org"  # what the recipes publish to: the box's public URL
JAR = "build/libs/tinplate-1.21.4.jar"  # where the recipes find the jar in the checkout


def section(heading):
    """docs/publishing.md from `heading` to the next heading of its level or above."""
    text = read("docs", "publishing.md")
    start = text.index(heading + "\n")
    level = heading.split(" ", 1)[0]
    found = re.compile(rf"^#{{1,{len(level)}}} ", re.M).search(text, start + len(heading))
    return text[start : found.start() if found else len(text)]


def groovy_single_quoted(text):
    """A Groovy \'\'\'...\'\'\' string's value: its escapes applied, as Jenkins reads it before
    the shell does (a backslash at the end of a line joins it to the next)."""
    escapes = {"\\": "\\", "'": "'", "n": "\n", "t": "\t", "$": "$", "\n": ""}

    def escape(match):
        assert match[1] in escapes, f"Groovy refuses the escape \\{match[1]}"
        return escapes[match[1]]

    return re.sub(r"\\(.)", escape, text, flags=re.S)


def sh_step(pipeline):
    """The script of the first `sh \'\'\'...\'\'\'` step of a pipeline, as the shell gets it."""
    script = pipeline.split("sh '''", 1)[1].split("'''", 1)[0]
    first, rest = script.split("\n", 1)  # the #! line, right after the quotes
    return groovy_single_quoted(first + "\n" + textwrap.dedent(rest))


def as_root_on_the_box(box, *argv):
    """`buildshelf ARGV` run on the box as the docs say (the user who owns the data; here,
    whoever runs the tests), through /usr/local/bin/buildshelf in a clean environment."""
    result = subprocess.run(["env", "-i", f"PATH={box}/usr/local/bin:/usr/bin:/bin", "buildshelf",
                             *argv], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, (argv, result.stderr)
    return result.stdout


def new_token(box, slug="tinplate"):
    [token] = as_root_on_the_box(box, "token", "create", slug, "--note", "CI").splitlines()
    assert re.fullmatch(r"bs_[^_]+_\S+", token)
    return token


@contextmanager
def service(box, port, public_url, *flags, **environment):
    """Buildshelf started as deploy/buildshelf.service starts it (the settings file read, then
    the venv's command), on 127.0.0.1:`port` with `public_url` and `flags`; yields its log's
    path."""
    log = os.path.join(box, f"service-{port}.log")
    argv = [f"{box}/usr/local/bin/buildshelf", "--port", str(port), "--public-url", public_url,
            *flags]  # fmt: skip
    with open(log, "w") as stderr:
        proc = subprocess.Popen(["env", "-i", "PATH=/usr/bin:/bin",
                                 *(f"{k}={v}" for k, v in environment.items()), *argv],
                                stderr=stderr)  # fmt: skip
    try:
        if not wait_for_port(port, proc):
            with open(log) as f:
                pytest.fail(f.read())
        yield log
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def ci_checkout(ci_side):
    """The CI side with the jar built, 3 MiB of it, in the checkout: (ci_side, its bytes)."""
    content = random.Random(24).randbytes(3 << 20)
    os.makedirs(os.path.join(ci_side["checkout"], os.path.dirname(JAR)))
    with open(os.path.join(ci_side["checkout"], JAR), "wb") as f:
        f.write(content)
    return ci_side, content


def assert_kept(box, number, content):
    """Build `number` of tinplate is served, its file kept in the store with `content`."""
    build = served(box)["tinplate"].build(number)
    sha = hashlib.sha256(content).hexdigest()
    assert (build.file, build.sha256, build.size) == (os.path.basename(JAR), sha, len(content))
    with open(f"{box}/srv/buildshelf/data/artifacts/{sha[:2]}/{sha}", "rb") as f:
        assert f.read() == content
    return build


def github_workflow():
    """The workflow of docs/publishing.md's trusted publishing, read: (its job, the step that
    publishes)."""
    workflow = yaml.safe_load(
        code_block(section("### GitHub Actions: trusted publishing"), "```yaml", "yaml")
    )
    [job] = workflow["jobs"].values()
    [step] = [s for s in job["steps"] if s.get("name") == "Publish to Buildshelf"]
    return job, step


@contextmanager
def github_actions_box(box, ci_checkout, **failures):
    """The box serving behind a front, trusting the publisher the docs' `buildshelf trust`
    names, and a GitHub job of run 154 (id 9001, its first attempt) of that repository:
    yields (the front, the token endpoint, the job's environment, the sleeps file), then
    checks that no token was shown."""
    from oidc_issuer import OidcIssuer  # tests/oidc_issuer.py: a GitHub-like issuer

    ci_side, _ = ci_checkout
    trust = code_block(section("### GitHub Actions: trusted publishing"), "", "sh")
    as_root_on_the_box(box, *trust.split()[1:])  # buildshelf trust tinplate --github ...
    repository = re.search(r"--github (\S+)", trust)[1]
    head, _, first = ci_side["commits"]
    sleeps = os.path.join(box, "sleeps")  # the retry's pauses: recorded, not waited for
    bin_dir = os.path.join(box, "runner-bin")
    os.makedirs(bin_dir)
    with open(os.path.join(bin_dir, "sleep"), "w") as f:
        f.write(f'#!/bin/sh\necho "$@" >> {sleeps}\n')
    os.chmod(os.path.join(bin_dir, "sleep"), 0o755)
    port = free_port()
    with OidcIssuer() as issuer, front(port) as proxy:
        proxy.failures = [LOST]  # the first publish goes through, its answer is lost
        with service(box, port, proxy.url, BUILDSHELF_GITHUB_OIDC_ISSUER=issuer.url) as log:
            with github_token_endpoint(issuer, "request-token", repository) as endpoint:
                environment = dict(
                    PATH=f"{bin_dir}:/usr/bin:/bin", HOME=ci_side["home"],
                    ACTIONS_ID_TOKEN_REQUEST_URL=endpoint.url,
                    ACTIONS_ID_TOKEN_REQUEST_TOKEN="request-token",
                    GITHUB_SERVER_URL="https://github.com", GITHUB_REPOSITORY=repository,
                    GITHUB_RUN_ID="9001", GITHUB_RUN_NUMBER="154", GITHUB_RUN_ATTEMPT="1",
                    GITHUB_SHA=head, RUNNER_TEMP=ci_side["home"],
                )  # fmt: skip
                yield proxy, endpoint, environment, sleeps
            with open(log) as f:
                logged = f.read()
    for token in endpoint.tokens:
        assert token.rsplit(".", 1)[1] not in logged


def assert_published_by_github(box, ci_checkout, result, proxy, endpoint, sleeps):
    """The job published build 154 with its commits since the push's before, on its second
    attempt, the first's answer lost; each with a fresh token for the public URL."""
    ci_side, content = ci_checkout
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert proxy.passed == [201, 200]  # the first attempt published; its answer was lost
    lines = [line for line in result.stdout.splitlines() if line.startswith("attempt ")]
    assert [line.split(":")[1] for line in lines] == [
        " Buildshelf answered 502",
        " Buildshelf answered 200",
    ]
    assert endpoint.audiences == [proxy.url, proxy.url]  # a fresh token, for the public URL
    assert len(set(endpoint.tokens)) == 2
    with open(sleeps) as f:
        assert f.read() == "10\n"
    build = assert_kept(box, 154, content)
    assert build.url == "https://github.com/acme/tinplate/actions/runs/9001"
    assert [c.message for c in build.commits] == ["Fix the spawn chunk", "Update upstream"]
    assert [c.hash for c in build.commits] == ci_side["commits"][:2]
    for token in endpoint.tokens:
        assert token.rsplit(".", 1)[1] not in result.stdout + result.stderr


def test_the_github_actions_recipe_publishes_with_the_action_and_no_secret(box, ci_checkout):
    ci_side, _ = ci_checkout
    job, step = github_workflow()
    assert job["permissions"]["id-token"] == "write"
    uses = [s["uses"] for s in job["steps"] if "uses" in s]
    assert uses == ["actions/checkout@v4", step["uses"]]  # GitHub's own, and this repository's
    assert re.fullmatch(r"OWNER/buildshelf@v1", step["uses"])
    assert "secrets." not in json.dumps(job)  # no secret stored anywhere
    assert step["with"]["url"] == PUBLIC_URL and step["with"]["file"] == JAR
    with github_actions_box(box, ci_checkout) as (proxy, endpoint, environment, sleeps):
        github = {"run_number": "154", "event.before": ci_side["commits"][2]}
        inputs = dict(step["with"], url=proxy.url)  # the public URL, in front as nginx is
        result = run_action(inputs, github, environment, cwd=ci_side["checkout"])
    assert_published_by_github(box, ci_checkout, result, proxy, endpoint, sleeps)
    assert served(box)["tinplate"].build(154).channel == step["with"]["channel"]


def test_the_github_actions_recipe_without_the_action_runs_its_script(box, ci_checkout):
    ci_side, _ = ci_checkout
    text = section("### GitHub Actions: trusted publishing")
    block = code_block(text, ("**Without the action.**", "```yaml"), "yaml")
    [step] = yaml.safe_load(block)
    [script] = re.fullmatch(r"bash (\S+)", step["run"]).groups()
    os.makedirs(os.path.join(ci_side["checkout"], os.path.dirname(script)))
    shutil.copy(
        os.path.join(REPO, "action", "publish.sh"), os.path.join(ci_side["checkout"], script)
    )
    assert step["env"]["BUILDSHELF_URL"] == PUBLIC_URL
    with github_actions_box(box, ci_checkout) as (proxy, endpoint, environment, sleeps):
        github = {"event.before": ci_side["commits"][2]}
        env = {k: expanded(v, {"github": github}) for k, v in step["env"].items()}
        result = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            cwd=ci_side["checkout"], env={**environment, **env, "BUILDSHELF_URL": proxy.url},
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert_published_by_github(box, ci_checkout, result, proxy, endpoint, sleeps)


def test_the_jenkins_recipe_publishes_with_a_token_it_never_shows(box, ci_checkout):
    ci_side, content = ci_checkout
    pipeline = code_block(section("### Jenkins"), "```groovy", "groovy")
    [variable] = re.findall(
        r"withCredentials\(\[string\(credentialsId: '[\w-]+', variable: '(\w+)'\)\]\)", pipeline
    )
    script = sh_step(pipeline)
    assert script.startswith("#!/bin/bash -e\nset +x")
    token = new_token(box)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    head, _, first = ci_side["commits"]
    environment = dict(PATH="/usr/bin:/bin", HOME=ci_side["home"], BUILD_NUMBER="155",
                       BUILD_URL=JOB_URL + "155/", GIT_COMMIT=head,
                       GIT_PREVIOUS_SUCCESSFUL_COMMIT=first, **{variable: token})  # fmt: skip
    path = os.path.join(box, "jenkins-step.sh")
    with open(path, "w") as f:
        f.write(script.replace(PUBLIC_URL, url))
    os.chmod(path, 0o755)
    with service(box, port, url) as log:
        # As Jenkins runs it (the script itself, by its #! line); then as a script without
        # one is run, `sh -xe`: traced, but for what follows `set +x`.
        runs = [
            subprocess.run(argv, cwd=ci_side["checkout"], env=environment, capture_output=True,
                           text=True, timeout=120)
            for argv in ([path], ["bash", "-xe", path])
        ]  # fmt: skip
        with open(log) as f:
            logged = f.read()
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    assert json.loads(runs[0].stdout)["buildNumber"] == 155
    assert json.loads(runs[1].stdout) == json.loads(runs[0].stdout)  # the retry: the same build
    secret = token.split("_", 2)[2]
    for shown in (logged, *(r.stdout + r.stderr for r in runs)):
        assert secret not in shown
    build = assert_kept(box, 155, content)
    assert build.url == JOB_URL + "155/"
    assert [c.message for c in build.commits] == ["Fix the spawn chunk", "Update upstream"]


def test_the_generic_curl_recipe_publishes_and_says_what_went_wrong(box, ci_checkout):
    ci_side, content = ci_checkout
    command = code_block(section("### Any other CI"), "```sh", "sh")
    token = new_token(box)
    port = free_port()
    url = f"http://127.0.0.1:{port}"

    def run(command, token=token):
        return subprocess.run(
            ["bash", "-eo", "pipefail", "-c", command.replace(PUBLIC_URL, url)],
            cwd=ci_side["checkout"], capture_output=True, text=True, timeout=120,
            env=dict(PATH="/usr/bin:/bin", HOME=ci_side["home"], BUILDSHELF_TOKEN=token),
        )  # fmt: skip

    with service(box, port, url):
        first, again = run(command), run(command)
        assert (first.returncode, again.returncode) == (0, 0), (first.stderr, again.stderr)
        assert json.loads(first.stdout)["buildNumber"] == 154
        assert json.loads(again.stdout) == json.loads(first.stdout)
        assert_kept(box, 154, content)
        # Another file under the same number: curl exits 22 and prints Buildshelf's answer.
        with open(os.path.join(ci_side["checkout"], JAR), "ab") as f:
            f.write(b"more")
        refused = run(command)
        assert refused.returncode == 22
        assert json.loads(refused.stdout)["code"] == "build_exists"
        other = new_token(box, "waystone")
        assert json.loads(run(command, other).stdout)["code"] == "forbidden"
        revoked = token.split("_")[1]
        as_root_on_the_box(box, "token", "revoke", revoked)
        assert json.loads(run(command).stdout)["code"] == "unauthorized"
    assert_kept(box, 154, content)  # as it was


def test_the_extra_files_curl_recipe_keeps_each_file_and_names_the_one_elsewhere(box, ci_checkout):
    ci_side, content = ci_checkout
    command = code_block(section("### Extra files over HTTPS"), "```sh", "sh")
    extras = {}
    for key, name in (("server:mojmap", "mojmap"), ("dev:bundle", "bundle")):
        path = os.path.join(ci_side["checkout"], JAR.replace(".jar", f"-{name}.jar"))
        extras[key] = random.Random(name).randbytes(1 << 20)
        with open(path, "wb") as f:
            f.write(extras[key])
    token = new_token(box)
    port = free_port()
    url = f"http://127.0.0.1:{port}"

    def run():
        return subprocess.run(
            ["bash", "-eo", "pipefail", "-c", command.replace(PUBLIC_URL, url)],
            cwd=ci_side["checkout"], capture_output=True, text=True, timeout=120,
            env=dict(PATH="/usr/bin:/bin", HOME=ci_side["home"], BUILDSHELF_TOKEN=token),
        )  # fmt: skip

    with service(box, port, url, PYTHONPATH=REPO):  # this checkout's code, whatever is installed
        first, again = run(), run()
    assert (first.returncode, again.returncode) == (0, 0), (first.stdout, again.stdout)
    assert json.loads(again.stdout) == json.loads(first.stdout)  # the retry: 200, the same
    build = assert_kept(box, 155, content)
    assert {key: extra.file_name for key, extra in build.downloads.items()} == {
        "dev:bundle": "tinplate-1.21.4-bundle.jar",
        "docs:javadoc": "tinplate-1.21.4-155-javadoc.jar",
        "server:mojmap": "tinplate-1.21.4-mojmap.jar",
    }
    assert [extra.hosted for extra in build.downloads.values()] == [True, False, True]
    for key, data in extras.items():
        sha = hashlib.sha256(data).hexdigest()
        assert build.downloads[key].sha256 == sha
        with open(f"{box}/srv/buildshelf/data/artifacts/{sha[:2]}/{sha}", "rb") as f:
            assert f.read() == data


# --- backing up and restoring ---


def as_root(box, script):
    """A block of docs/running.md run as root would run it on the box: paths moved under
    `box`, as whoever runs the tests (no chown, no sudo), with the box's command first on the
    PATH."""
    script = "\n".join(
        line.replace("sudo -u deploy ", "")
        for line in moved(script, box).splitlines()
        if not line.startswith("chown ")
    )
    result = subprocess.run(["bash", "-e", "-c", script], capture_output=True, text=True,
                            env=dict(PATH=f"{box}/usr/local/bin:/usr/bin:/bin"), timeout=120)  # fmt: skip
    assert result.returncode == 0, (script, result.stderr)
    return result.stdout


def get(url):
    """(status, body) of a GET."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.request("GET", parts.path + ("?" + parts.query if parts.query else ""))
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_a_backup_taken_while_serving_restores_the_builds_files_and_tokens(box, ci_checkout):
    if shutil.which("sqlite3") is None:
        pytest.fail("the backup needs sqlite3: as root, apt-get install -y sqlite3")
    running = read("docs", "running.md")
    backup = code_block(running, ("## Backing up and restoring", "A backup, as root"), "sh")
    restore = code_block(running, ("## Backing up and restoring", "The restore drill"), "sh")
    ci_side, content = ci_checkout
    command = code_block(section("### Any other CI"), "```sh", "sh")
    token = new_token(box)
    as_root_on_the_box(box, "trust", "tinplate", "--github", "acme/tinplate")
    # A webhook target, whose URL and secret live in the state directory only (issue 38).
    targets = box + "/srv/buildshelf/data/.buildshelf/webhooks.json"
    with open(os.open(targets, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        json.dump(
            {"targets": [{"url": "https://discord.example/api/webhooks/1/x", "format": "discord"}]},
            f,
        )
    port, again = free_port(), free_port()
    url, restored_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{again}"

    def publish(url):
        return subprocess.run(
            ["bash", "-eo", "pipefail", "-c", command.replace(PUBLIC_URL, url)],
            cwd=ci_side["checkout"], capture_output=True, text=True, timeout=120,
            env=dict(PATH="/usr/bin:/bin", HOME=ci_side["home"], BUILDSHELF_TOKEN=token),
        )  # fmt: skip

    builds = "/api/v2/builds?project=tinplate"
    with service(box, port, url):
        assert publish(url).returncode == 0
        kept = assert_kept(box, 154, content)
        live = get(url + builds)
        assert live[0] == 200
        as_root(box, backup)  # while the service runs, its databases open
    listed = as_root(box, restore)
    assert token.split("_")[1] in listed
    restored = box + "/srv/buildshelf/restored"
    assert sorted(os.listdir(restored + "/.buildshelf")) == [
        "tokens.sqlite3", "trust.sqlite3", "webhooks.json", "webhooks.sqlite3"
    ]  # fmt: skip
    assert os.stat(restored + "/.buildshelf").st_mode & 0o777 == 0o700
    assert os.stat(restored + "/.buildshelf/webhooks.json").st_mode & 0o777 == 0o600
    assert "webhooks: 1 target (discord.example)" in listed  # the drill's check sees it
    with service(box, again, restored_url, "--data", restored):
        status, body = get(restored_url + builds)
        assert (status, body.replace(restored_url.encode(), url.encode())) == live
        [build] = [b for b in json.loads(body) if b["buildNumber"] == 154]
        assert get(build["downloadUrl"]) == (200, content)
        assert get(build["downloadUrl"] + ".sha256")[1].startswith(kept.sha256.encode())
        # The token of the backup still publishes: the same file again is the same build.
        done = publish(restored_url)
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["buildNumber"] == 154
        health = get(restored_url + "/healthz")
        assert health[0] == 200, health
