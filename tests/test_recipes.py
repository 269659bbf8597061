"""The recipes for the team that runs the box, run as the docs write them: the set-up steps of
docs/running.md in a temporary root, then the CI recipes of docs/publishing.md and the lines of
deploy/buildshelf.cron, each in a clean environment (`env -i` with the PATH that sshd or cron
gives), and what they wrote read back where the service reads."""

import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from buildshelf import store as store_module

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The places the set-up uses: each moves under the temporary root.
BOX_PATHS = ("/etc/buildshelf", "/etc/cron.d", "/etc/systemd/system", "/usr/local/bin",
             "/opt/buildshelf", "/srv/buildshelf")  # fmt: skip
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
    """The first ```language block after the text `after`."""
    start = markdown.index(after)
    match = re.compile(rf"^```{language}\n(.*?)^```", re.M | re.S).search(markdown, start)
    return match[1]


def moved(text, root):
    """`text` with every absolute path of the box moved under `root`."""
    places = "|".join(map(re.escape, BOX_PATHS))
    return re.sub(rf"(?<![\w./-])({places})(?![\w-])", lambda m: root + m[1], text)


@pytest.fixture
def box(tmp_path):
    """A box set up as docs/running.md says, under tmp_path/root; returns that root."""
    root = str(tmp_path / "root")
    for place in ("/etc/cron.d", "/etc/systemd/system", "/usr/local/bin"):  # every Debian has
        os.makedirs(root + place)
    os.makedirs(root + "/opt/buildshelf")
    os.symlink(sys.prefix, root + "/opt/buildshelf/.venv")
    setup = code_block(read("docs", "running.md"), "## Deploying", "sh")
    for line in setup.splitlines():
        if not NOT_RUN.match(line):
            line = re.sub(r" -o \S+ -g \S+", "", line)  # no user deploy here
            subprocess.run(moved(line, root), shell=True, cwd=REPO, check=True)
    for path in ("/etc/buildshelf/buildshelf.env", "/usr/local/bin/buildshelf",
                 "/etc/cron.d/buildshelf"):  # fmt: skip
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


@pytest.fixture
def ci_side(tmp_path, box):
    """A CI job's side: a checkout with three commits, and an `ssh` that runs the remote
    command on the box as sshd would (the login shell, a clean environment, sshd's PATH)."""
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
    ssh.write_text(
        "#!/bin/sh\n"
        "shift  # the host: the rest is the command line sshd hands the login shell\n"
        f"exec env -i HOME=/nonexistent PATH={box}/usr/local/bin:{SSHD_PATH.split(':', 1)[1]} "
        '/bin/bash -c "$*"\n'
    )
    ssh.chmod(0o755)
    home = tmp_path / "ci-home"  # no ~/.ssh: a fresh runner has none
    home.mkdir()
    return dict(checkout=str(checkout), commits=commits, path=f"{bin_dir}:/usr/bin:/bin",
                home=str(home))  # fmt: skip


def test_the_github_actions_recipe_publishes_on_the_box(box, ci_side):
    step = code_block(read("docs", "publishing.md"), "GitHub Actions", "yaml")
    run = textwrap.dedent(step.split("  run: |\n", 1)[1])
    run = re.sub(r"\$\{\{ secrets\.(\w+) \}\}", r"dummy-\1", run)
    head, _, first = ci_side["commits"]
    environment = dict(PATH=ci_side["path"], HOME=ci_side["home"], BEFORE=first,
                       GITHUB_SERVER_URL="https://github.com", GITHUB_REPOSITORY="acme/tinplate",
                       GITHUB_RUN_ID="9001", GITHUB_RUN_NUMBER="154", GITHUB_SHA=head)  # fmt: skip
    # As GitHub runs a `shell: bash` step.
    result = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", run],
                            cwd=ci_side["checkout"], env=environment, capture_output=True,
                            text=True)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == "published build 154 of tinplate\n"
    build = served(box)["tinplate"].build(154)
    assert build.url == "https://github.com/acme/tinplate/actions/runs/9001/"
    assert [c.message for c in build.commits] == ["Fix the spawn chunk", "Update upstream"]


def test_the_jenkins_recipe_publishes_on_the_box(box, ci_side):
    pipeline = code_block(read("docs", "publishing.md"), "Jenkins (declarative pipeline)", "groovy")
    script = textwrap.dedent(pipeline.split("sh '''", 1)[1].split("'''", 1)[0]).lstrip("\n")
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
