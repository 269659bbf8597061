"""webhooks.json: the targets read from it, every refusal and its message, which never holds a
URL or a secret."""

import base64
import json
import os

import pytest

from buildshelf.datafiles import datafile
from buildshelf.webhooks.targets import (
    EVENTS,
    SECRET_RULE,
    NoTargetsFile,
    Target,
    TargetsError,
    read_targets,
    unknown_projects,
)
from buildshelf.webhooks.targets import host as address_shown

KEY = bytes(range(32))
SECRET = "whsec_" + base64.b64encode(KEY).decode()
DISCORD = "https://discord.com/api/webhooks/123456/TOKEN-discord"
SLACK = "https://hooks.slack.com/services/T000/B000/TOKEN-slack"
HOOK = "https://ci.example.org:8443/hook?token=TOKEN-json"
# What no message may hold: each target's credentials, and every part of a URL but its host.
NEVER_SHOWN = ("TOKEN", "123456", "/api/webhooks", "services", "hook?", SECRET[6:20])


def write(tmp_path, content, mode=0o600, name="webhooks.json"):
    path = tmp_path / name
    text = content if isinstance(content, (str, bytes)) else json.dumps(content, indent=2)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    os.chmod(path, mode)
    return str(path)


def refusal(tmp_path, content, mode=0o600) -> TargetsError:
    path = write(tmp_path, content, mode)
    with pytest.raises(TargetsError) as raised:
        read_targets(path)
    error = raised.value
    for line in error.lines() + error.lines(located=True) + [str(error), repr(error)]:
        for secret in NEVER_SHOWN:
            assert secret not in line
    return error


def test_the_issue_example_is_read(tmp_path):
    path = write(
        tmp_path,
        {
            "targets": [
                {"url": DISCORD, "format": "discord", "projects": ["canvas"]},
                {"url": SLACK, "format": "slack", "events": ["build.yanked"]},
                {"url": HOOK, "format": "json", "secret": SECRET},
            ]
        },
    )
    assert read_targets(path) == (
        Target(0, DISCORD, "discord", frozenset({"canvas"}), frozenset(EVENTS), None),
        Target(1, SLACK, "slack", None, frozenset({"build.yanked"}), None),
        Target(2, HOOK, "json", None, frozenset(EVENTS), KEY),
    )


def test_a_target_may_ask_for_unyanks_and_gets_them_by_default(tmp_path):
    path = write(tmp_path, {"targets": [{"url": SLACK, "format": "slack",
                                         "events": ["build.unyanked", "build.yanked"]},
                                        {"url": DISCORD, "format": "discord"}]})  # fmt: skip
    chosen, default = read_targets(path)
    assert chosen.events == frozenset({"build.unyanked", "build.yanked"})
    assert default.events == frozenset({"build.published", "build.yanked", "build.unyanked"})


def test_a_target_shows_neither_its_url_nor_its_secret(tmp_path):
    target = Target(2, HOOK, "json", None, frozenset(EVENTS), KEY)
    assert repr(target) == (
        f"Target(index=2, format='json', projects=None, events={frozenset(EVENTS)!r})"
    )
    assert target.host == "ci.example.org:8443"


@pytest.mark.parametrize(
    "url, host",
    [
        (DISCORD, "discord.com"),
        ("http://127.0.0.1:8080/x", "127.0.0.1:8080"),
        ("https://user:pass@Example.ORG/x", "example.org"),
        ("http://[::1]:9/x", "[::1]:9"),
        ("https://example.org:99999/", ""),
        ("not a url", ""),
        (None, ""),
        (42, ""),
    ],
)
def test_host_is_all_a_log_is_told(url, host):
    assert address_shown(url) == host


def test_a_url_may_point_anywhere_whatever_the_format(tmp_path):
    path = write(tmp_path, {"targets": [{"url": "http://127.0.0.1:9/x", "format": "discord"}]})
    assert read_targets(path)[0].url == "http://127.0.0.1:9/x"


def test_a_target_hears_only_its_projects_and_events():
    target = Target(0, DISCORD, "discord", frozenset({"a"}), frozenset({"build.yanked"}), None)
    assert target.wants("build.yanked", "a")
    assert not target.wants("build.published", "a")
    assert not target.wants("build.yanked", "b")
    assert Target(0, DISCORD, "slack", None, frozenset(EVENTS), None).wants("build.yanked", "z")


def test_a_project_a_target_names_that_is_not_there_is_told_with_what_it_meant():
    hears = Target(
        0, DISCORD, "discord", frozenset({"alpah", "gamma", "beta"}), frozenset(EVENTS), None
    )
    every = Target(1, SLACK, "slack", None, frozenset(EVENTS), None)
    unknown = unknown_projects((hears, every), {"alpha", "beta"})
    assert [(u.target.index, u.project, u.near) for u in unknown] == [
        (0, "alpah", "alpha"),
        (0, "gamma", None),
    ]
    assert [u.message() for u in unknown] == [
        "targets[0] (discord.com): 'projects' names 'alpah', which is no project: did you mean "
        "'alpha'?",
        "targets[0] (discord.com): 'projects' names 'gamma', which is no project: it hears "
        "nothing of it until a project so named is added",
    ]
    assert unknown_projects((hears,), {"alpah", "gamma", "beta"}) == []


def test_no_file_is_its_own_refusal(tmp_path):
    with pytest.raises(NoTargetsFile) as raised:
        read_targets(str(tmp_path / "webhooks.json"))
    assert raised.value.lines(located=True) == ["no such file"]


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660, 0o666, 0o610, 0o601, 0o777])
def test_a_file_others_may_read_is_refused(tmp_path, mode):
    error = refusal(tmp_path, {"targets": [{"url": DISCORD, "format": "discord"}]}, mode)
    assert error.lines(located=True) == [
        f"its mode is {mode:04o}, but it holds credentials (webhook URLs and secrets): it must "
        "be readable by its owner only (mode 0600 or stricter: chmod 600)"
    ]
    assert isinstance(error, datafile.DataError)  # told as a data file's problems are


@pytest.mark.parametrize("mode", [0o600, 0o400, 0o700, 0o200 | 0o400])
def test_a_file_only_its_owner_may_read_is_read(tmp_path, mode):
    path = write(tmp_path, {"targets": [{"url": DISCORD, "format": "discord"}]}, mode)
    assert len(read_targets(path)) == 1


def test_no_targets_is_a_file_with_an_empty_array(tmp_path):
    assert read_targets(write(tmp_path, {"targets": []})) == ()


# --- every refusal: where it is, and what it says ---------------------------------------------


def one_target(**fields):
    """A file of one target, one key a line, each key at column 5 of lines 3, 4, ..."""
    body = ",\n".join(f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in fields.items())
    return '{"targets": [\n  {\n' + body + "\n  }\n]}\n"


def problems(tmp_path, content, mode=0o600):
    return refusal(tmp_path, content, mode).lines(located=True)


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"targets": [}', "line 1, column 14: Expecting value"),
        (
            '{"targets": [],}',
            "line 1, column 16: Expecting property name enclosed in double quotes",
        ),
        ('{"targets": [\n  {"url": NaN}]}', "line 2, column 11: NaN is not valid JSON"),
        ('{"targets": [\n  {"url": -Infinity}]}', "line 2, column 11: -Infinity is not valid JSON"),
        (
            '{"targets": [\n  {"url": "x",\n   "url": "y"}]}',
            "line 3, column 4: key 'url' appears twice in one object",
        ),
        (
            '{"targets": [\n  {"https://discord.com/api/webhooks/123456/TOKEN": 1,\n'
            '   "https://discord.com/api/webhooks/123456/TOKEN": 2}]}',
            "line 3, column 4: key (not shown) appears twice in one object",
        ),
        (b'{"targets": [\xff]}', "line 1, column 14: not valid UTF-8"),
        ("", "line 1, column 1: Expecting value"),
    ],
)
def test_text_that_is_not_strict_json_is_placed(tmp_path, text, expected):
    assert problems(tmp_path, text) == [expected]


THE_SHAPE = 'the file must hold one object, {"targets": [...]}, its array of targets'


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[]", f"line 1, column 1: {THE_SHAPE}"),
        ("{}", f"line 1, column 1: {THE_SHAPE}"),
        ('{"targets": {}}', f"line 1, column 13: {THE_SHAPE}"),
        ('{"targets": null}', f"line 1, column 13: {THE_SHAPE}"),
        ('{"targets": [],\n "hooks": []}', f"line 2, column 2: {THE_SHAPE}: unknown key 'hooks'"),
        (
            f'{{"targets": [], "{DISCORD}": 1}}',
            f"line 1, column 17: {THE_SHAPE}: unknown key (not shown)",
        ),
    ],
)
def test_the_file_holds_an_object_of_targets(tmp_path, text, expected):
    assert problems(tmp_path, text) == [expected]


def test_a_target_is_an_object(tmp_path):
    text = '{"targets": [\n  "https://discord.com/api/webhooks/123456/TOKEN",\n  7]}'
    assert problems(tmp_path, text) == [
        "line 2, column 3: targets[0]: must be an object with 'url' and 'format'",
        "line 3, column 3: targets[1]: must be an object with 'url' and 'format'",
    ]


URL_RULE = (
    "'url' must be an absolute http(s) URL of ASCII letters, digits and URL punctuation, "
    "with no user name or password"
)
PORT_RULE = "'url' names a port outside 1..65535"
FORMAT_RULE = "'format' must be one of 'discord', 'slack', 'json'"
PROJECTS_RULE = (
    "'projects' must be a non-empty array of project slugs (leave it out for every project)"
)
EVENTS_RULE = (
    "'events' must be a non-empty array of 'build.published', 'build.yanked', 'build.unyanked' "
    "(leave it out for every event)"
)


@pytest.mark.parametrize(
    "fields, expected",
    [
        ({"format": "discord"}, "line 2, column 3: targets[0]: missing key 'url'"),
        ({"url": DISCORD}, "line 2, column 3: targets[0] (discord.com): missing key 'format'"),
        (
            {"url": "ftp://example.org/x", "format": "discord"},
            f"line 3, column 12: targets[0] (example.org): {URL_RULE}",
        ),
        (
            {"url": "/api/webhooks/1", "format": "discord"},
            f"line 3, column 12: targets[0]: {URL_RULE}",
        ),
        (
            {"url": ["https://x.org/"], "format": "slack"},
            f"line 3, column 12: targets[0]: {URL_RULE}",
        ),
        (
            {"url": "https://user:TOKEN@example.org/x", "format": "slack"},
            f"line 3, column 12: targets[0] (example.org): {URL_RULE}",
        ),
        (
            {"url": "https://example.org/a b", "format": "slack"},
            f"line 3, column 12: targets[0] (example.org): {URL_RULE}",
        ),
        # A port no connection can use: every attempt would fail for a day, its host unnamed.
        (
            {"url": "https://example.org:99999/x", "format": "slack"},
            f"line 3, column 12: targets[0]: {PORT_RULE}",
        ),
        (
            {"url": "http://example.org:0/x", "format": "discord"},
            f"line 3, column 12: targets[0] (example.org:0): {PORT_RULE}",
        ),
        (
            {"url": SLACK, "format": "Slack"},
            f"line 4, column 15: targets[0] (hooks.slack.com): {FORMAT_RULE}: did you mean 'slack'?",
        ),
        (
            {"url": SLACK, "format": DISCORD},
            f"line 4, column 15: targets[0] (hooks.slack.com): {FORMAT_RULE}",
        ),
        (
            {"url": SLACK, "format": 1},
            f"line 4, column 15: targets[0] (hooks.slack.com): {FORMAT_RULE}",
        ),
        (
            {"url": SLACK, "format": "slack", "projects": []},
            f"line 5, column 17: targets[0] (hooks.slack.com): {PROJECTS_RULE}",
        ),
        (
            {"url": SLACK, "format": "slack", "projects": "canvas"},
            f"line 5, column 17: targets[0] (hooks.slack.com): {PROJECTS_RULE}",
        ),
        (
            {"url": SLACK, "format": "slack", "projects": ["Canvas"]},
            f"line 5, column 17: targets[0] (hooks.slack.com): {PROJECTS_RULE}",
        ),
        (
            {"url": SLACK, "format": "slack", "events": []},
            f"line 5, column 15: targets[0] (hooks.slack.com): {EVENTS_RULE}",
        ),
        (
            {"url": SLACK, "format": "slack", "events": ["build.deleted"]},
            f"line 5, column 15: targets[0] (hooks.slack.com): {EVENTS_RULE}",
        ),
        (
            {"url": SLACK, "format": "slack", "events": "build.yanked"},
            f"line 5, column 15: targets[0] (hooks.slack.com): {EVENTS_RULE}",
        ),
        (
            {"url": HOOK, "format": "json"},
            "line 2, column 3: targets[0] (ci.example.org:8443): missing key 'secret': a json "
            f"target's requests are signed. {SECRET_RULE}",
        ),
        (
            {"url": HOOK, "format": "json", "secret": SECRET[6:]},
            f"line 5, column 15: targets[0] (ci.example.org:8443): {SECRET_RULE}",
        ),
        (
            {"url": HOOK, "format": "json", "secret": SECRET + "!"},
            f"line 5, column 15: targets[0] (ci.example.org:8443): {SECRET_RULE}",
        ),
        (
            {"url": HOOK, "format": "json", "secret": SECRET.replace("A", "-").replace("B", "_")},
            f"line 5, column 15: targets[0] (ci.example.org:8443): {SECRET_RULE}",
        ),
        (
            {
                "url": HOOK,
                "format": "json",
                "secret": "whsec_" + base64.b64encode(KEY[:23]).decode(),
            },
            f"line 5, column 15: targets[0] (ci.example.org:8443): {SECRET_RULE}",
        ),
        (
            {"url": HOOK, "format": "json", "secret": KEY.hex()},
            f"line 5, column 15: targets[0] (ci.example.org:8443): {SECRET_RULE}",
        ),
        (
            {"url": HOOK, "format": "json", "secret": 42},
            f"line 5, column 15: targets[0] (ci.example.org:8443): {SECRET_RULE}",
        ),
        (
            {"url": DISCORD, "format": "discord", "secret": SECRET},
            "line 5, column 15: targets[0] (discord.com): 'secret' is only for format 'json': "
            "discord requests are not signed",
        ),
        (
            {"url": DISCORD, "format": "discord", "project": ["canvas"]},
            "line 5, column 5: targets[0] (discord.com): unknown key 'project': did you mean "
            "'projects'?",
        ),
        (
            {"url": DISCORD, "format": "discord", "channel": "x"},
            "line 5, column 5: targets[0] (discord.com): unknown key 'channel': the keys are "
            "url, format, projects, events, secret",
        ),
        (
            {"url": DISCORD, "format": "discord", SLACK: "slack"},
            "line 5, column 5: targets[0] (discord.com): unknown key (not shown): the keys are "
            "url, format, projects, events, secret",
        ),
    ],
)
def test_each_refusal_of_a_target_is_placed_and_says_why(tmp_path, fields, expected):
    assert problems(tmp_path, one_target(**fields)) == [expected]


def test_a_secret_is_the_base64_of_its_key(tmp_path):
    for secret, key in [
        (SECRET, KEY),
        ("whsec_" + base64.b64encode(b"k" * 64).decode(), b"k" * 64),
    ]:
        path = write(tmp_path, one_target(url=HOOK, format="json", secret=secret))
        assert read_targets(path)[0].secret == key


def test_every_target_s_problem_is_told_and_the_good_ones_are_not(tmp_path):
    text = (
        '{"targets": [\n'
        f'  {{"url": "{DISCORD}", "format": "discrod"}},\n'
        f'  {{"url": "{SLACK}", "format": "slack"}},\n'
        f'  {{"url": "{HOOK}", "format": "json", "secret": "whsec_TOKEN"}}\n'
        "]}"
    )
    path = write(tmp_path, text)
    with pytest.raises(TargetsError) as raised:
        read_targets(path)
    assert raised.value.lines() == [
        f"{path}:2:{text.splitlines()[1].index('discrod')}: targets[0] (discord.com): "
        f"{FORMAT_RULE}: did you mean 'discord'?",
        f"{path}:4:{text.splitlines()[3].index('whsec_')}: targets[2] (ci.example.org:8443): "
        f"{SECRET_RULE}",
    ]
    assert raised.value.count == 2


def test_a_problem_in_a_long_file_is_placed_at_its_own_target(tmp_path):
    targets = [{"url": f"https://h{i}.example.org/x", "format": "slack"} for i in range(30)]
    targets[17]["events"] = ["build.published", "build.nope"]
    text = json.dumps({"targets": targets}, indent=1)
    error = refusal(tmp_path, text)
    line = 3 + 17 * 4 + 3  # the targets start on line 3, 4 lines each; events is the 4th
    assert text.splitlines()[line - 1].strip() == '"events": ['
    assert error.lines(located=True) == [
        f"line {line}, column 14: targets[17] (h17.example.org): {EVENTS_RULE}"
    ]


def test_a_file_that_is_not_a_file_is_refused(tmp_path):
    (tmp_path / "webhooks.json").mkdir()
    with pytest.raises(TargetsError) as raised:
        read_targets(str(tmp_path / "webhooks.json"))
    assert raised.value.lines(located=True) == ["is a directory, not a file"]
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(TargetsError) as raised:  # and never waits for a writer
        read_targets(str(fifo))
    assert raised.value.lines(located=True) == ["is a FIFO, not a file"]


def test_a_file_too_large_to_be_targets_is_not_read_whole(tmp_path):
    text = '{"targets": [' + " " * (1024 * 1024) + "]}"
    assert problems(tmp_path, text) == ["is over 1024 KiB: it cannot be a list of targets"]


def test_the_mode_is_that_of_the_file_a_link_names(tmp_path):
    path = write(tmp_path, {"targets": []}, 0o644, name="real.json")
    os.symlink(path, tmp_path / "webhooks.json")
    with pytest.raises(TargetsError, match="its mode is 0644"):
        read_targets(str(tmp_path / "webhooks.json"))
    os.chmod(path, 0o600)
    assert read_targets(str(tmp_path / "webhooks.json")) == ()


def test_a_refused_file_is_told_as_a_data_file_is(tmp_path):
    """check and /healthz print a DataError's lines: a TargetsError gives the same kind."""
    error = refusal(tmp_path, one_target(url=DISCORD, format="nope"))
    assert isinstance(error, datafile.DataError)
    assert error.name == "webhooks.json"
    assert str(error) == error.lines()[0] == f"{error.path}:4:15: {error.message}"
    assert error.located() == f"line 4, column 15: {error.message}"
