"""webhooks.json: the targets read from it, every refusal and its message, which never holds a
URL or a secret."""

import base64
import json
import os

import pytest

from buildshelf import datafile, webhook_targets
from buildshelf.webhook_targets import EVENTS, NoTargetsFile, Target, TargetsError, read_targets

KEY = bytes(range(32))
SECRET = "whsec_" + base64.b64encode(KEY).decode()
DISCORD = "https://discord.com/api/webhooks/123456/TOKEN-discord"
SLACK = "https://hooks.slack.com/services/T000/B000/TOKEN-slack"
HOOK = "https://ci.example.org:8443/hook?token=TOKEN-json"
# What no message may hold: each target's credentials, and every part of a URL but its host.
NEVER_SHOWN = ("TOKEN", "123456", "/api/webhooks", "services", "hook?", SECRET[6:20], "whsec_")


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
    assert webhook_targets.host(url) == host


def test_a_url_may_point_anywhere_whatever_the_format(tmp_path):
    path = write(tmp_path, {"targets": [{"url": "http://127.0.0.1:9/x", "format": "discord"}]})
    assert read_targets(path)[0].url == "http://127.0.0.1:9/x"


def test_a_target_hears_only_its_projects_and_events():
    target = Target(0, DISCORD, "discord", frozenset({"a"}), frozenset({"build.yanked"}), None)
    assert target.wants("build.yanked", "a")
    assert not target.wants("build.published", "a")
    assert not target.wants("build.yanked", "b")
    assert Target(0, DISCORD, "slack", None, frozenset(EVENTS), None).wants("build.yanked", "z")


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
