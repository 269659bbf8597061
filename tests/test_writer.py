"""Writing data files: add-project, publish and yank through the command line and writer.py.

Locking, validation before the rename, idempotent retries, stable output, permissions, and
writers that fail or are killed half-way.
"""

import difflib
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from buildshelf import cli, commands, settings
from buildshelf import store as store_module
from buildshelf.datafiles import checking, datafile, dataformat
from buildshelf.kept import keeping
from buildshelf.writing import refusals, rewrite, writer
from helpers import ALPHA_BUILDS, assert_same_values, make_build, make_project, write_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOWNLOAD = "https://ci.example.org/job/Alpha/{}/artifact/alpha.jar"


def publish_argv(data_dir, number, *extra, slug="alpha"):
    return [
        "publish",
        slug,
        "--build",
        str(number),
        "--channel",
        "1.21",
        "--download-url",
        DOWNLOAD.format(number),
        "--timestamp",
        "1700000000999",
        "--data",
        str(data_dir),
        *extra,
    ]


def builds_in(path):
    return {b["buildNumber"]: b for b in json.loads(path.read_bytes())["builds"]}


def state(path):
    st = os.stat(path)
    return path.read_bytes(), st.st_mtime_ns, st.st_ino


@pytest.fixture
def canonical(data_dir):
    """alpha.json as the tool writes it."""
    path = data_dir / "alpha.json"
    path.write_bytes(rewrite.encode(json.loads(path.read_bytes())))
    return path


# --- publish ------------------------------------------------------------------------------------


def test_publish_adds_the_build_with_the_defaults(data_dir, capsys, monkeypatch):
    monkeypatch.setattr(commands.time, "time_ns", lambda: 1_712_000_000_123_456_789)
    assert (
        cli.main(
            [
                "publish",
                "alpha",
                "--build",
                "9",
                "--channel",
                "1.22",
                "--download-url",
                DOWNLOAD.format(9),
                "--data",
                str(data_dir),
            ]
        )
        == 0
    )
    assert capsys.readouterr().out == "published build 9 of alpha\n"
    assert builds_in(data_dir / "alpha.json")[9] == {
        "buildNumber": 9,
        "url": "https://ci.example.org/job/Alpha/9/",
        "downloadUrl": DOWNLOAD.format(9),
        "channelVersion": "1.22",
        "timestamp": 1712000000123,
        "isExperimental": False,
        "commits": [],
    }
    project = store_module.Store(data_dir, check_interval=0).snapshot().project("alpha")
    assert project.latest("1.22").number == 9


def test_publish_takes_every_field(data_dir):
    assert (
        cli.main(
            publish_argv(
                data_dir,
                9,
                "--url",
                "https://ci.example.org/run/9/",
                "--experimental",
                "--commit",
                "abc1",
                "Newest",
                "--commit",
                "abc0",
                "Older",
            )
        )
        == 0
    )
    assert builds_in(data_dir / "alpha.json")[9] == {
        "buildNumber": 9,
        "url": "https://ci.example.org/run/9/",
        "downloadUrl": DOWNLOAD.format(9),
        "channelVersion": "1.21",
        "timestamp": 1700000000999,
        "isExperimental": True,
        "commits": [{"message": "Newest", "hash": "abc1"}, {"message": "Older", "hash": "abc0"}],
    }


@pytest.mark.system
def test_publish_takes_commits_from_git_newest_first(data_dir, tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = [
        "git",
        "-c",
        "user.name=T",
        "-c",
        "user.email=t@example.org",
        "-c",
        "commit.gpgsign=false",
    ]
    subprocess.run(git + ["init", "-q"], cwd=repo, check=True)
    for message in ("First", "Second", "Third: with a colon"):
        subprocess.run(git + ["commit", "-q", "--allow-empty", "-m", message], cwd=repo, check=True)
    hashes = subprocess.run(
        ["git", "log", "--format=%H"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.split()
    monkeypatch.chdir(repo)
    assert cli.main(publish_argv(data_dir, 9, "--git", "HEAD~2..HEAD")) == 0
    assert builds_in(data_dir / "alpha.json")[9]["commits"] == [
        {"message": "Third: with a colon", "hash": hashes[0]},
        {"message": "Second", "hash": hashes[1]},
    ]


@pytest.mark.system
@pytest.mark.parametrize(
    "revision_range, message",
    [
        ("no-such..HEAD", "git log no-such..HEAD failed: fatal: "),
        ("--all", "--git '--all' is not a revision range (such as A..B)"),  # given as --git=--all
    ],
)
def test_a_bad_git_range_is_refused(
    data_dir, tmp_path, monkeypatch, capsys, revision_range, message
):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    monkeypatch.chdir(tmp_path)
    before = state(data_dir / "alpha.json")
    assert cli.main(publish_argv(data_dir, 9, f"--git={revision_range}")) == 1
    assert capsys.readouterr().err.startswith(f"buildshelf publish: {message}")
    assert state(data_dir / "alpha.json") == before


def test_a_retry_changes_nothing_not_even_the_mtime(data_dir, capsys):
    path = data_dir / "alpha.json"  # hand-formatted: a retry must not even reformat it
    argv = publish_argv(data_dir, 9, "--commit", "abc1", "Fix")
    assert cli.main(argv) == 0
    before = state(path)
    assert cli.main(argv) == 0
    # Without --timestamp the retry's "now" differs: it still matches the build there.
    assert cli.main([a for a in argv if a not in ("--timestamp", "1700000000999")]) == 0
    assert state(path) == before
    assert (
        capsys.readouterr().out.splitlines()[1:]
        == ["build 9 of alpha is already there as given: nothing changed"] * 2
    )


def test_the_same_number_with_other_fields_needs_replace(data_dir, capsys):
    path = data_dir / "alpha.json"
    before = state(path)
    assert cli.main(publish_argv(data_dir, 5, "--experimental")) == 1
    assert capsys.readouterr().err == (
        f"buildshelf publish: {path}: build 5 is already there with another downloadUrl, "
        "timestamp, isExperimental, commits: give --replace to replace it (nothing written)\n"
    )
    assert state(path) == before
    assert cli.main(publish_argv(data_dir, 5, "--experimental", "--replace")) == 0
    assert capsys.readouterr().out == "replaced build 5 of alpha\n"
    assert builds_in(path)[5]["isExperimental"] is True
    assert sorted(builds_in(path)) == [1, 2, 3, 5, 7, 8]


@pytest.mark.parametrize(
    "change, message",
    [
        (
            ["--channel", "1.21/../x"],
            "build 9 (builds[6]): 'channelVersion' must be a non-empty "
            "string of letters, digits and . _ + -",
        ),
        (
            ["--download-url", "ftp://x/"],
            "build 9 (builds[6]): 'downloadUrl' must be an absolute "
            "http(s) URL of ASCII letters, digits and URL punctuation",
        ),
        (
            ["--url", "https://ci.example.org/a b/"],
            "build 9 (builds[6]): 'url' must be an absolute "
            "http(s) URL of ASCII letters, digits and URL punctuation",
        ),
        (
            ["--commit", "not-hex", "Fix"],
            "build 9 (builds[6]): commits[0]: 'hash' must be a string of hexadecimal digits",
        ),
    ],
)
def test_an_invalid_build_gets_the_servers_message_and_nothing_changes(
    data_dir, capsys, change, message
):
    path = data_dir / "alpha.json"
    before = state(path)
    argv = publish_argv(data_dir, 9)
    for i in range(0, len(change), 3 if change[0] == "--commit" else 2):
        if change[i] in argv:
            argv[argv.index(change[i]) + 1] = change[i + 1]
        else:
            argv += change[i : i + (3 if change[i] == "--commit" else 2)]
    assert cli.main(argv) == 1
    assert capsys.readouterr().err == f"buildshelf publish: {path}: {message}\n"
    assert state(path) == before
    assert sorted(os.listdir(data_dir)) == [".buildshelf.lock", "alpha.json", "beta.json"]


def test_an_invalid_file_is_never_repaired(data_dir, capsys):
    path = write_file(data_dir / "alpha.json", make_project([make_build(1, "1.20/x")]))
    before = state(path)
    assert cli.main(publish_argv(data_dir, 9)) == 1
    assert capsys.readouterr().err == (
        f"buildshelf publish: {path}: build 1 (builds[0]): 'channelVersion' must be a non-empty "
        "string of letters, digits and . _ + - (it is left as it is: fix it by hand first)\n"
    )
    write_file(path, '{"ciJob": "Alpha",')
    before = state(path)
    assert cli.main(["yank", "alpha", "1", "--data", str(data_dir)]) == 1
    assert capsys.readouterr().err.startswith(f"buildshelf yank: {path}:1:19: ")
    assert state(path) == before


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["publish", "nope", "--build", "1", "--channel", "1", "--download-url", "https://x/"],
            "no project 'nope' in {data}: add it with 'buildshelf add-project nope --ci-job ... "
            "--ci-job-url ...' (a project of another data directory: give --data DIR or set "
            "BUILDSHELF_DATA)",
        ),
        (
            [
                "publish",
                "../alpha",
                "--build",
                "1",
                "--channel",
                "1",
                "--download-url",
                "https://x/",
            ],
            "'../alpha' is not a project slug: use a-z, 0-9, '.', '_' and '-', starting with a-z or "
            "0-9",
        ),
        (["yank", "alpha", "4"], "project 'alpha' has no build 4: nothing yanked"),
        (
            [
                "publish",
                "alpha",
                "--build",
                "9",
                "--channel",
                "1",
                "--download-url",
                "https://x/",
                "--commit",
                "abc",
                "caf\udce9",
            ],
            "the text holds characters that are not valid Unicode "
            "(such as bytes that are not UTF-8): give it as UTF-8",
        ),
    ],
)
def test_refusals_are_one_line_and_exit_1(data_dir, capsys, argv, message):
    before = state(data_dir / "alpha.json")
    assert cli.main(argv + ["--data", str(data_dir)]) == 1
    command = argv[0]
    assert capsys.readouterr().err == f"buildshelf {command}: {message.format(data=data_dir)}\n"
    assert state(data_dir / "alpha.json") == before


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["publish", "alpha", "--build", "x1", "--channel", "1", "--download-url", "https://x/"],
            "argument --build: 'x1' is not a build number (a whole number, 0 or more)",
        ),
        (
            ["publish", "alpha", "--build", "-1", "--channel", "1", "--download-url", "https://x/"],
            "argument --build: '-1' is not a build number (a whole number, 0 or more)",
        ),
        (
            ["publish", "alpha", "--channel", "1", "--download-url", "https://x/"],
            "the following arguments are required: --build",
        ),
        (
            [
                "publish",
                "alpha",
                "--build",
                "1",
                "--channel",
                "1",
                "--download-url",
                "https://x/",
                "--timestamp",
                "soon",
            ],
            "argument --timestamp: 'soon' is not a whole number",
        ),
        (
            [
                "publish",
                "alpha",
                "--build",
                "1",
                "--channel",
                "1",
                "--download-url",
                "https://x/",
                "--commit",
                "abc",
                "Fix",
                "--git",
                "A..B",
            ],
            "argument --git: not allowed with argument --commit",
        ),
        (["yank", "alpha"], "the following arguments are required: N"),
        (
            ["add-project", "gamma", "--ci-job", "G"],
            "the following arguments are required: --ci-job-url",
        ),
        (["import-jenkins", "alpha"], "one of the arguments --job-json --job-url is required"),
        (
            [
                "publish",
                "alpha",
                "--build",
                "1",
                "--channel",
                "1",
                "--download-url",
                "https://x/",
                "--data",
                "/no/such/dir",
            ],
            "argument --data: '/no/such/dir' is not a directory",
        ),
    ],
)
def test_bad_usage_exits_2(data_dir, capsys, argv, message):
    with pytest.raises(SystemExit) as exited:
        cli.main(argv + ([] if "--data" in argv else ["--data", str(data_dir)]))
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(f"error: {message}")


def test_data_defaults_to_the_variable(data_dir, monkeypatch):
    monkeypatch.setenv("BUILDSHELF_DATA", str(data_dir))
    assert cli.main(publish_argv(data_dir, 9)[:-2]) == 0
    assert 9 in builds_in(data_dir / "alpha.json")


JOB_JSON = os.path.join(ROOT, "tests", "jenkins_jobs", "freestyle.json")
USED = "buildshelf {}: using the data directory {} (no --data or BUILDSHELF_DATA given)"


@pytest.mark.parametrize(
    "argv",
    [
        [
            "publish",
            "alpha",
            "--build",
            "9",
            "--channel",
            "1",
            "--download-url",
            DOWNLOAD.format(9),
        ],
        ["yank", "alpha", "5"],
        ["add-project", "gamma", "--ci-job", "G", "--ci-job-url", "https://ci.example.org/job/G/"],
        ["import-jenkins", "alpha", "--job-json", JOB_JSON, "--dry-run"],
        ["check", "--prune"],
        ["token", "create", "alpha"],
        ["trust", "alpha", "--github", "octo/alpha"],
    ],
)
def test_a_writing_command_names_the_default_data_directory_first(
    data_dir, monkeypatch, capsys, argv
):
    """Run from another checkout or with the variable unset, a command would write where
    nobody looks: without --data or BUILDSHELF_DATA, its first line says where it writes."""
    monkeypatch.delenv("BUILDSHELF_DATA", raising=False)
    monkeypatch.setattr(settings, "default_data_dir", lambda module_dir: str(data_dir))
    cli.main(argv)
    command = argv[0] if argv[0] != "token" else "token create"
    assert capsys.readouterr().err.splitlines()[0] == USED.format(command, data_dir)
    # Given either way, the directory is the one the user named: no line.
    cli.main(argv + ["--data", str(data_dir)])
    assert "using the data directory" not in capsys.readouterr().err
    monkeypatch.setenv("BUILDSHELF_DATA", str(data_dir))
    cli.main(argv)
    assert "using the data directory" not in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["check"], ["token", "list"], ["trust", "alpha", "--list"]])
def test_a_command_that_writes_nothing_does_not_name_it(data_dir, monkeypatch, capsys, argv):
    monkeypatch.delenv("BUILDSHELF_DATA", raising=False)
    monkeypatch.setattr(settings, "default_data_dir", lambda module_dir: str(data_dir))
    cli.main(argv)
    assert "using the data directory" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        [
            "publish",
            "alpah",
            "--build",
            "9",
            "--channel",
            "1",
            "--download-url",
            DOWNLOAD.format(9),
        ],
        ["yank", "alpah", "5"],
        ["import-jenkins", "alpah", "--job-json", JOB_JSON],
        ["token", "create", "alpah"],
        ["trust", "alpah", "--github", "octo/alpha"],
    ],
)
def test_an_unknown_slug_suggests_the_closest_and_another_directory(data_dir, capsys, argv):
    before = state(data_dir / "alpha.json")
    assert cli.main(argv + ["--data", str(data_dir)]) == 1
    command = "token create" if argv[0] == "token" else argv[0]
    assert capsys.readouterr().err == (
        f"buildshelf {command}: no project 'alpah' in {data_dir}: did you mean alpha? ("
        + ("'*' is every project; " if command == "token create" else "")
        + "a project of another data directory: give --data DIR or set BUILDSHELF_DATA)\n"
    )
    assert state(data_dir / "alpha.json") == before


# --- yank and add-project -----------------------------------------------------------------------


def test_yank_marks_a_build_whose_number_may_come_back(data_dir, capsys):
    path = data_dir / "alpha.json"
    assert cli.main(["yank", "alpha", "5", "--data", str(data_dir)]) == 0
    assert "yankedAt" in builds_in(path)[5]
    assert cli.main(publish_argv(data_dir, 5)) == 0
    assert builds_in(path)[5]["downloadUrl"] == DOWNLOAD.format(5)
    assert "yankedAt" not in builds_in(path)[5]
    assert capsys.readouterr().out.splitlines() == [
        "yanked build 5 of alpha; 'buildshelf unyank alpha 5' restores it",
        "replaced build 5 of alpha",
    ]


def test_add_project_creates_an_empty_project_once(data_dir, capsys):
    argv = [
        "add-project",
        "gamma",
        "--ci-job",
        "Gamma",
        "--ci-job-url",
        "https://ci.example.org/job/Gamma/",
        "--javadoc-base-url",
        "https://jd.example.org/gamma/",
        "--data",
        str(data_dir),
    ]
    assert cli.main(argv) == 0
    path = data_dir / "gamma.json"
    assert path.read_text() == textwrap.dedent("""\
        {
          "ciJob": "Gamma",
          "ciJobUrl": "https://ci.example.org/job/Gamma/",
          "javadocBaseUrl": "https://jd.example.org/gamma/",
          "builds": []
        }
        """)
    before = state(path)
    assert cli.main(argv) == 0
    assert state(path) == before
    argv[argv.index("--ci-job") + 1] = "Gamma2"
    assert cli.main(argv) == 1
    assert capsys.readouterr() == (
        f"added project gamma ({path})\nproject gamma is already there as given: nothing changed\n",
        f"buildshelf add-project: project 'gamma' exists with ciJob 'Gamma', not "
        f"'Gamma2': edit {path} to change it\n",
    )
    assert cli.main(publish_argv(data_dir, 1, slug="gamma")) == 0
    assert builds_in(path)[1]["url"] == "https://ci.example.org/job/Gamma/1/"


def test_add_project_without_javadoc(data_dir, capsys):
    argv = ["add-project", "gamma", "--ci-job", "Gamma", "--data", str(data_dir)]
    argv += ["--ci-job-url", "https://ci.example.org/job/Gamma/"]
    assert cli.main(argv) == 0
    path = data_dir / "gamma.json"
    assert json.loads(path.read_bytes()) == {
        "ciJob": "Gamma",
        "ciJobUrl": "https://ci.example.org/job/Gamma/",
        "builds": [],
    }
    assert cli.main(argv) == 0  # a retry changes nothing
    assert cli.main(argv + ["--javadoc-base-url", "https://jd.example.org/gamma/"]) == 1
    assert capsys.readouterr() == (
        f"added project gamma ({path})\nproject gamma is already there as given: nothing changed\n",
        f"buildshelf add-project: project 'gamma' exists with javadocBaseUrl '', not "
        f"'https://jd.example.org/gamma/': edit {path} to change it\n",
    )


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_add_project_makes_a_missing_data_directory_saying_so(tmp_path, monkeypatch, capsys, how):
    data = tmp_path / "srv" / "data"
    argv = ["add-project", "gamma", "--ci-job", "G", "--ci-job-url", "https://ci.example.org/G"]
    if how == "flag":
        argv += ["--data", str(data)]
    else:
        monkeypatch.setenv("BUILDSHELF_DATA", str(data))
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    assert err == f"buildshelf add-project: {data} does not exist: creating it\n"
    assert out == f"added project gamma ({data / 'gamma.json'})\n"
    assert json.loads((data / "gamma.json").read_bytes())["ciJob"] == "G"
    # Every other command still refuses a data directory that is not there.
    (tmp_path / "other").mkdir()
    with pytest.raises(SystemExit) as exited:
        cli.main(publish_argv(tmp_path / "other" / "data", 1))
    assert exited.value.code == 2


def test_add_project_refuses_a_data_directory_that_is_a_file(tmp_path, capsys):
    (tmp_path / "data").write_text("")
    argv = ["add-project", "gamma", "--ci-job", "G", "--ci-job-url", "https://ci.example.org/G"]
    with pytest.raises(SystemExit) as exited:
        cli.main(argv + ["--data", str(tmp_path / "data")])
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(
        f"error: argument --data: '{tmp_path / 'data'}' is not a directory\n"
    )


@pytest.mark.parametrize(
    "job_url, run_url",
    [
        ("https://ci.example.org/job/Gamma/", "https://ci.example.org/job/Gamma/4/"),
        (
            "https://ci.example.org/job/folder/job/Gamma",
            "https://ci.example.org/job/folder/job/Gamma/4/",
        ),
        ("https://github.com/octo/gamma", None),
        ("https://github.com/octo/job", None),  # a 'job' that is no path segment of its own
        ("https://ci.example.org/jobs/Gamma/", None),
        ("https://ci.example.org/?/job/Gamma/", None),  # not in the path
    ],
)
def test_a_run_url_is_made_only_from_a_jenkins_job_url(job_url, run_url):
    if run_url is not None:
        assert writer.job_run_url(job_url, 4) == run_url
        return
    with pytest.raises(writer.NoRunUrl) as refused:
        writer.job_run_url(job_url, 4)
    assert str(refused.value) == (
        f"the build has no url, and ciJobUrl {job_url} is not a Jenkins job's (its path has "
        "no /job/) to make one from: give the address of the build's CI run"
    )


def test_publish_to_a_project_not_on_jenkins_needs_url(data_dir, tmp_path, capsys):
    github = "https://github.com/octo/gamma"
    assert cli.main(["add-project", "gamma", "--ci-job", "Gamma", "--ci-job-url", github,
                     "--data", str(data_dir)]) == 0  # fmt: skip
    path = data_dir / "gamma.json"
    before = state(path)
    jar = tmp_path / "gamma-4.jar"
    jar.write_bytes(b"PK a jar")
    argv = ["publish", "gamma", "--build", "4", "--channel", "1.0", "--data", str(data_dir)]
    for artifact in (["--download-url", DOWNLOAD.format(4)], ["--file", str(jar)]):
        assert cli.main(argv + artifact) == 1
        assert capsys.readouterr().err == (
            f"buildshelf publish: the build has no url, and ciJobUrl {github} is not a Jenkins "
            "job's (its path has no /job/) to make one from: give the address of the build's "
            "CI run with --url (on GitHub Actions: "
            "$GITHUB_SERVER_URL/$GITHUB_REPOSITORY/actions/runs/$GITHUB_RUN_ID)\n"
        )
        assert state(path) == before
    assert not (data_dir / "artifacts").exists()  # refused before the file was kept
    run = "https://github.com/octo/gamma/actions/runs/123"
    assert cli.main(argv + ["--download-url", DOWNLOAD.format(4), "--url", run]) == 0
    assert builds_in(path)[4]["url"] == run


def test_add_project_refuses_bad_urls_with_the_servers_message(data_dir, capsys):
    assert (
        cli.main(
            [
                "add-project",
                "gamma",
                "--ci-job",
                "G",
                "--ci-job-url",
                "ci.example.org",
                "--javadoc-base-url",
                "https://jd.example.org/",
                "--data",
                str(data_dir),
            ]
        )
        == 1
    )
    assert capsys.readouterr().err == (
        f"buildshelf add-project: {data_dir / 'gamma.json'}: 'ciJobUrl' must be an absolute "
        "http(s) URL of ASCII letters, digits and URL punctuation\n"
    )
    assert not (data_dir / "gamma.json").exists()


# --- the file's format --------------------------------------------------------------------------


def test_publish_keeps_every_key_of_the_file_in_the_documented_order(data_dir):
    """A Reposilite project's javadocPagePrefix stays right after javadocBaseUrl, and the
    optional slug first, the versions block before the builds, each version's keys in their
    order: the order of dataformat.PROJECT_KEYS and VERSION_KEYS, which the docs give."""
    path = data_dir / "alpha.json"
    doc = json.loads(path.read_text())
    versions = {"1.21": {"java": 21, "support": "DEPRECATED", "family": "1"}, "1.20": {}}
    write_file(
        path,
        {"builds": doc.pop("builds"), "versions": versions, "javadocPagePrefix": ".cache/unpack",
         "slug": "alpha", **doc},
    )  # fmt: skip
    assert cli.main(publish_argv(data_dir, 9)) == 0
    written = json.loads(path.read_text())
    assert list(written) == [
        "slug",
        "ciJob",
        "ciJobUrl",
        "javadocBaseUrl",
        "javadocPagePrefix",
        "versions",
        "builds",
    ]
    assert list(written) == list(dataformat.PROJECT_KEYS)
    assert written["javadocPagePrefix"] == ".cache/unpack"
    assert written["versions"] == versions and list(written["versions"]) == ["1.21", "1.20"]
    assert list(written["versions"]["1.21"]) == ["family", "support", "java"]
    assert list(dataformat.VERSION_KEYS) == [
        "family", "support", "supportEnd", "java", "javaFlags", "experimentalChannel"
    ]  # fmt: skip


def test_the_first_write_reformats_and_sorts_then_a_publish_only_adds_lines(data_dir):
    path = data_dir / "alpha.json"
    path.write_text(json.dumps(json.loads(path.read_text()), indent=4))  # hand-formatted
    assert cli.main(publish_argv(data_dir, 9)) == 0
    doc = json.loads(path.read_text())
    assert path.read_bytes() == (json.dumps(doc, indent=2) + "\n").encode()
    assert list(doc) == ["ciJob", "ciJobUrl", "javadocBaseUrl", "builds"]
    assert [b["buildNumber"] for b in doc["builds"]] == [1, 2, 3, 5, 7, 8, 9]
    assert all(list(b) == list(dataformat.PLAIN_BUILD_KEYS) for b in doc["builds"])
    before = path.read_text().splitlines()
    assert cli.main(publish_argv(data_dir, 10, "--commit", "abc", "Fix")) == 0
    diff = list(difflib.unified_diff(before, path.read_text().splitlines(), lineterm="", n=0))
    assert [line[0] for line in diff[3:]] == ["+"] * 14


def test_keys_are_put_in_the_specs_order_and_nothing_is_dropped(data_dir):
    build = make_build(4, commit=[{"message": "legacy", "hash": "ab"}])
    shuffled = {key: build[key] for key in reversed(list(build))}
    shuffled["commits"] = [{"hash": "ab", "message": "m"}]
    doc = {
        "builds": [shuffled],
        "javadocBaseUrl": "https://jd.example.org/alpha/",
        "ciJobUrl": "https://ci.example.org/job/Alpha/",
        "ciJob": "Alpha",
        "slug": "alpha",
    }
    write_file(data_dir / "alpha.json", doc)
    assert cli.main(publish_argv(data_dir, 9)) == 0
    written = json.loads((data_dir / "alpha.json").read_text())
    assert list(written) == ["slug", "ciJob", "ciJobUrl", "javadocBaseUrl", "builds"]
    assert list(written["builds"][0]) == list(
        dataformat.PLAIN_BUILD_KEYS + dataformat.LEGACY_BUILD_KEYS
    )
    assert written["builds"][0]["commit"] == [{"message": "legacy", "hash": "ab"}]
    assert list(written["builds"][0]["commits"][0]) == ["message", "hash"]


def test_extra_files_are_written_last_by_key_each_with_its_keys_in_order(data_dir):
    sha = "ab" * 32
    build = make_build(4)
    build["downloads"] = {  # as a hand edit may write them
        "server:mojmap": {"file": "alpha-4-m.jar", "size": 3, "sha256": sha},
        "dev:bundle": {"size": 1, "sha256": sha, "downloadUrl": "https://a.example/b.jar"},
    }
    shuffled = {key: build[key] for key in reversed(list(build))}
    write_file(data_dir / "alpha.json", make_project([shuffled]))
    assert cli.main(publish_argv(data_dir, 9)) == 0
    [written, _] = json.loads((data_dir / "alpha.json").read_text())["builds"]
    assert list(written) == list(dataformat.PLAIN_BUILD_KEYS) + ["downloads"]
    assert dataformat.BUILD_KEYS[-1] == "downloads"
    assert written["downloads"] == {
        "dev:bundle": {"downloadUrl": "https://a.example/b.jar", "sha256": sha, "size": 1},
        "server:mojmap": {"sha256": sha, "size": 3, "file": "alpha-4-m.jar"},
    }
    assert [list(extra) for extra in written["downloads"].values()] == [
        ["downloadUrl", "sha256", "size"],
        ["sha256", "size", "file"],
    ]
    assert list(written["downloads"]) == ["dev:bundle", "server:mojmap"]


def test_non_ascii_text_is_written_as_utf8(canonical):
    assert cli.main(publish_argv(canonical.parent, 9, "--commit", "abc", "Réparer ✓")) == 0
    assert '"message": "Réparer ✓"' in canonical.read_text(encoding="utf-8")


def test_permissions_and_symlinks_are_kept(data_dir, tmp_path):
    os.chmod(data_dir / "alpha.json", 0o640)
    assert cli.main(publish_argv(data_dir, 9)) == 0
    assert os.stat(data_dir / "alpha.json").st_mode & 0o7777 == 0o640
    real = tmp_path / "elsewhere.json"
    os.replace(data_dir / "alpha.json", real)
    os.symlink(real, data_dir / "alpha.json")
    assert cli.main(publish_argv(data_dir, 10)) == 0
    assert os.path.islink(data_dir / "alpha.json") and 10 in builds_in(real)


def test_a_new_file_gets_the_umask_mode(data_dir):
    old = os.umask(0o027)
    try:
        writer.add_project(
            str(data_dir), "gamma", "G", "https://ci.example.org/", "https://jd.example.org/"
        )
    finally:
        os.umask(old)
    assert os.stat(data_dir / "gamma.json").st_mode & 0o7777 == 0o640


# --- failures half-way --------------------------------------------------------------------------


class Boom(OSError):
    pass


def failing(real, when):
    calls = []

    def call(*args, **kwargs):
        calls.append(args)
        if len(calls) == when:
            raise Boom(28, "No space left on device")
        return real(*args, **kwargs)

    return call


@pytest.mark.parametrize(
    "step, when, lands",
    [
        ("fchmod", 1, False),  # after the temp file is written
        ("fsync", 1, False),  # the temp file's fsync
        ("replace", 1, False),  # the rename
        ("fsync", 2, True),  # the directory's fsync, after the rename
    ],
)
def test_a_writer_failing_at_any_step_leaves_the_old_file_or_the_new(
    data_dir, monkeypatch, step, when, lands
):
    path = data_dir / "alpha.json"
    old = path.read_bytes()
    monkeypatch.setattr(rewrite.os, step, failing(getattr(os, step), when))
    with pytest.raises(
        refusals.Refused,
        match="may not survive a crash"
        if lands
        else r"No space left on device \(the file is as it was\)",
    ):
        writer.publish(str(data_dir), "alpha", {**make_build(9), "url": None})
    monkeypatch.undo()
    assert sorted(os.listdir(data_dir)) == [".buildshelf.lock", "alpha.json", "beta.json"]
    if lands:
        assert 9 in builds_in(path)
    else:
        assert path.read_bytes() == old
    assert checking.check_directory(data_dir) == []


KILLED_WRITER = """
import os, signal, sys
sys.path.insert(0, {root!r})
from buildshelf import cli
from buildshelf.writing import rewrite
real_replace = os.replace
def replace(src, dst):
    if dst.endswith("alpha.json"):
        os.kill(os.getpid(), signal.SIGKILL)  # killed between the temp file and the rename
    real_replace(src, dst)
rewrite.os.replace = replace
cli.main({argv!r})
"""


@pytest.mark.system
def test_a_writer_killed_before_the_rename_leaves_the_old_file(data_dir):
    path = data_dir / "alpha.json"
    old = path.read_bytes()
    script = KILLED_WRITER.format(root=ROOT, argv=publish_argv(data_dir, 9))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert done.returncode == -signal.SIGKILL
    assert path.read_bytes() == old
    [leftover] = [name for name in os.listdir(data_dir) if name.endswith(".tmp")]
    assert leftover.startswith(".alpha.json.")  # hidden: the server ignores it
    assert 9 in builds_in(data_dir / leftover)  # it was complete, just not renamed
    assert checking.check_directory(data_dir) == []
    # The dead writer's lock died with it, and the next writer clears its leftover.
    assert cli.main(publish_argv(data_dir, 10)) == 0
    assert sorted(os.listdir(data_dir)) == [".buildshelf.lock", "alpha.json", "beta.json"]
    assert 10 in builds_in(path) and 9 not in builds_in(path)


# --- concurrency --------------------------------------------------------------------------------


@pytest.mark.system
def test_twenty_publishers_at_once_lose_nothing(data_dir):
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "buildshelf",
                *publish_argv(data_dir, 100 + n, "--commit", f"{n:x}", f"Change {n}"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for n in range(20)
    ]
    results = [(proc.wait(timeout=120), proc.communicate()) for proc in procs]
    assert [(code, err) for code, (_, err) in results] == [(0, b"")] * 20
    path = data_dir / "alpha.json"
    assert checking.check_directory(data_dir) == []
    assert sorted(builds_in(path)) == [1, 2, 3, 5, 7, 8] + list(range(100, 120))
    assert all(
        builds_in(path)[100 + n]["commits"] == [{"message": f"Change {n}", "hash": f"{n:x}"}]
        for n in range(20)
    )


def test_what_is_not_a_regular_file_is_refused_without_hanging(data_dir, capsys):
    os.unlink(data_dir / "alpha.json")
    os.mkfifo(data_dir / "alpha.json")  # opening it for reading would wait for a writer
    assert cli.main(publish_argv(data_dir, 9)) == 1
    assert capsys.readouterr().err == (
        f"buildshelf publish: {data_dir / 'alpha.json'} is not a "
        "regular file: it is left as it is\n"
    )


# --- a file received into the store (an HTTP upload) -----------------------------------------


def staged(store_dir, data):
    from buildshelf.kept import artifacts

    staging = artifacts.Staging(store_dir, "upload")
    staging.write(data)
    return staging.finish()


def test_a_staged_file_is_renamed_into_place_never_copied(data_dir):
    from buildshelf.kept import artifacts

    store_dir = str(data_dir / "artifacts")
    received = staged(store_dir, b"jar bytes")
    inode = os.stat(received.path).st_ino
    build = make_build(9)
    del build["downloadUrl"]
    keep = keeping.Keep(received.path, staged=received, name="alpha-9.jar")
    published = writer.publish(str(data_dir), "alpha", build, keep=keep, store_dir=store_dir)
    assert published.outcome == "added" and published.stored.created
    assert os.stat(published.stored.path).st_ino == inode  # the same file: no second copy
    assert not os.path.exists(received.path)
    assert artifacts.objects(store_dir) == {received.sha256: 9}
    doc = json.loads((data_dir / "alpha.json").read_text())
    assert doc["builds"][-1]["file"] == "alpha-9.jar"


def test_a_staged_file_of_bytes_already_stored_is_removed(data_dir):
    store_dir = str(data_dir / "artifacts")
    first = staged(store_dir, b"jar bytes")
    build = make_build(9)
    del build["downloadUrl"]
    keep = keeping.Keep(first.path, staged=first, name="alpha-9.jar")
    writer.publish(str(data_dir), "alpha", dict(build), keep=keep, store_dir=store_dir)
    again = staged(store_dir, b"jar bytes")
    keep = keeping.Keep(again.path, staged=again, name="alpha-9.jar")
    published = writer.publish(str(data_dir), "alpha", dict(build), keep=keep, store_dir=store_dir)
    assert published.outcome == "unchanged" and not published.stored.created
    assert not os.path.exists(again.path)


def test_the_writers_refusals_say_what_they_are(data_dir):
    with pytest.raises(refusals.NoProject):
        writer.yank(str(data_dir), "gamma", 1)
    with pytest.raises(refusals.NoBuild):
        writer.yank(str(data_dir), "alpha", 99)
    with pytest.raises(refusals.Exists) as exists:
        writer.publish(str(data_dir), "alpha", make_build(1, "9.9"))
    assert exists.value.fields == ["channelVersion"]
    with pytest.raises(refusals.Invalid):
        writer.publish(str(data_dir), "alpha", make_build(99, "bad/channel"))


# --- the stable format ----------------------------------------------------------------------

_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)))
_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(10**30), 10**30), _TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_TEXT, inner, max_size=4)),
    max_leaves=20,
)


@given(extra=st.dictionaries(_TEXT, _VALUES, max_size=4), commit=_VALUES)
def test_the_stable_format_is_json_dumps_indented_by_2(extra, commit):
    """encode() writes what json.dumps(indent=2, ensure_ascii=False) writes, faster: every
    file written before keeps its bytes."""
    doc = make_project([make_build(2, commits=[{"message": commit, "hash": "ab"}]), make_build(1)])
    doc.update((key, value) for key, value in extra.items() if key not in doc)
    ordered = rewrite._ordered(doc, dataformat.PROJECT_KEYS)
    ordered["builds"] = sorted(ordered["builds"], key=lambda b: b["buildNumber"])
    expected = json.dumps(ordered, indent=2, ensure_ascii=False) + "\n"
    assert rewrite.encode(doc) == expected.encode()


# --- what a write remembers for the next (issue 24: a publish over HTTP decoded, encoded and
# checked the whole file, holding the interpreter lock that every request waited for) -----------


def assert_written_as_read(path, slug="alpha"):
    """The file's bytes are the stable format of what they decode to (json.dumps, not the
    writer's own encoder), and the Project the writer noted for them is the one a fresh parse
    of them makes."""
    data = path.read_bytes()
    assert data.decode() == json.dumps(json.loads(data), indent=2, ensure_ascii=False) + "\n"
    noted = datafile.parse_project(str(path), slug, data)
    assert_same_values(noted, datafile.parse_project(str(path), slug, data, quick=False))


WRITES = [  # each a command line, after --data DIR
    ["publish", "alpha", "--build", "200", "--channel", "1.21", "--download-url",
     DOWNLOAD.format(200), "--commit", "a" * 40, "fix: x", "--commit", "b" * 40, "feat: y"],
    ["publish", "alpha", "--build", "150", "--channel", "1.21", "--download-url",
     DOWNLOAD.format(150), "--experimental"],  # not the highest: sorted in
    ["yank", "alpha", "150", "--reason", "broken"],
    ["unyank", "alpha", "150"],
    ["publish", "alpha", "--build", "200", "--channel", "1.21.1", "--download-url",
     DOWNLOAD.format(200), "--replace"],
    ["yank", "alpha", "1"],
]  # fmt: skip


def test_each_write_leaves_the_stable_format_and_notes_the_project_it_parses_to(data_dir, capsys):
    target = os.path.realpath(data_dir / "alpha.json")
    for argv in WRITES:
        assert cli.main([*argv, "--data", str(data_dir)]) == 0, capsys.readouterr().err
        assert_written_as_read(data_dir / "alpha.json")
        remembered = rewrite._KNOWN[target].doc
        # Equal, and in the same order: the next write encodes it to the same bytes.
        assert json.dumps(remembered) == json.dumps(
            json.loads((data_dir / "alpha.json").read_bytes())
        )


def test_a_write_checks_and_encodes_only_the_builds_it_changes(data_dir, capsys, monkeypatch):
    assert cli.main([*WRITES[0], "--data", str(data_dir)]) == 0  # the file now written here
    checked, encoded = [], []
    check, encode = datafile.valid_build, rewrite._build_bytes
    monkeypatch.setattr(
        datafile, "valid_build", lambda value, *a: checked.append(value) or check(value, *a)
    )
    monkeypatch.setattr(
        rewrite, "_build_bytes", lambda value: encoded.append(value) or encode(value)
    )
    monkeypatch.setattr(datafile, "_fast_project", None)  # no parse of the whole file either
    for argv, number in [(WRITES[1], 150), (WRITES[2], 150), (WRITES[4], 200)]:
        checked.clear(), encoded.clear()
        assert cli.main([*argv, "--data", str(data_dir)]) == 0, capsys.readouterr().err
        assert [b["buildNumber"] for b in checked] == [number]
        assert [b["buildNumber"] for b in encoded] == [number]
    # A build refused for another of the same number is checked alone, and nothing encoded.
    checked.clear(), encoded.clear()
    refused = [arg.replace("1.21.1", "1.22") for arg in WRITES[4] if arg != "--replace"]
    assert cli.main([*refused, "--data", str(data_dir)]) == 1
    assert "build 200 is already there with another channelVersion" in capsys.readouterr().err
    assert ([b["buildNumber"] for b in checked], encoded) == ([200], [])
    monkeypatch.undo()
    assert_written_as_read(data_dir / "alpha.json")


def test_a_build_given_and_changed_after_its_write_changes_nothing_known(data_dir):
    target = os.path.realpath(data_dir / "alpha.json")
    given = make_build(200)
    writer.publish(str(data_dir), "alpha", given)
    given["channelVersion"], given["commits"][0]["message"] = "9.9", "changed"
    writer.publish(str(data_dir), "alpha", make_build(201))
    written = builds_in(data_dir / "alpha.json")[200]
    assert (written["channelVersion"], written["commits"][0]["message"]) == ("1.21", "Change 200.0")
    assert json.dumps(rewrite._KNOWN[target].doc) == json.dumps(
        json.loads((data_dir / "alpha.json").read_bytes())
    )
    assert_written_as_read(data_dir / "alpha.json")


OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["publish", "keep", "replace", "yank", "unyank"]),
        st.integers(0, 9),  # ALPHA_BUILDS' numbers among them
        st.sampled_from(["1.20", "1.21", "2.0-rc.1"]),
    ),
    min_size=1,
    max_size=8,
)


@given(operations=OPERATIONS)
def test_any_writes_leave_the_stable_format_and_the_project_a_fresh_parse_makes(
    operations, tmp_path_factory
):
    directory = tmp_path_factory.mktemp("data")
    path = directory / "alpha.json"
    write_file(path, make_project(ALPHA_BUILDS))  # out of order, as by hand
    by_hand = path.read_bytes()
    jar = directory / "alpha.jar"
    store_dir = str(directory / "artifacts")
    for what, number, channel in operations:
        build = make_build(number, channel, experimental=number % 2 == 1)
        keep = None
        if what == "keep":
            del build["downloadUrl"]
            jar.write_bytes(f"{number} {channel}".encode())
            keep = keeping.Keep(str(jar))
        try:
            if what in ("publish", "keep", "replace"):
                replace = what == "replace"
                writer.publish(
                    str(directory), "alpha", build, replace, keep=keep, store_dir=store_dir
                )
            else:
                getattr(writer, what)(str(directory), "alpha", number, store_dir)
        except refusals.Refused:  # no such build, another one there, not yanked: nothing written
            pass
        if path.read_bytes() != by_hand:
            assert_written_as_read(path)


def test_a_file_changed_by_hand_is_read_again(data_dir, capsys):
    assert cli.main(publish_argv(data_dir, 200)) == 0
    path = data_dir / "alpha.json"
    doc = json.loads(path.read_bytes())
    doc["builds"][0]["channelVersion"] = "1.21.4"  # an edit the writer has not seen
    write_file(path, json.dumps(doc, indent=2))
    assert cli.main(publish_argv(data_dir, 201)) == 0
    assert builds_in(path)[doc["builds"][0]["buildNumber"]]["channelVersion"] == "1.21.4"
    assert 201 in builds_in(path)


def test_a_project_is_parsed_once_for_the_same_bytes(data_dir):
    data = (data_dir / "alpha.json").read_bytes()
    first = datafile.parse_project("alpha.json", "alpha", data)
    assert datafile.parse_project("alpha.json", "alpha", data) is first
    # Other bytes are parsed, and so are the same bytes when the fast path is not wanted.
    other = datafile.parse_project("alpha.json", "alpha", data.replace(b"\n", b"\n "))
    assert other is not first and other.builds == first.builds
    assert datafile.parse_project("alpha.json", "alpha", data, quick=False) is not first
    # The same bytes under another slug are another project.
    assert datafile.parse_project("beta.json", "beta", data).slug == "beta"
