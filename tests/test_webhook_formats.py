"""What a webhook request carries: Discord embeds and Slack blocks within the receivers'
documented limits, no mention a commit message could make, and the json format's Standard
Webhooks signature verified as the Standard Webhooks libraries verify it."""

import base64
import hashlib
import hmac
import json

import pytest

from buildshelf.webhook_formats import Event, render, sample_event
from buildshelf.webhook_targets import EVENTS, Target

KEY = bytes(range(32))
SECRET = "whsec_" + base64.b64encode(KEY).decode()
NOW = 1_780_000_000


def target(kind, secret=None):
    return Target(0, "http://127.0.0.1:9/hook", kind, None, frozenset(EVENTS), secret)


def event(**build_fields):
    build = {
        "buildNumber": 7,
        "url": "https://ci.example.org/job/alpha/7/",
        "downloadUrl": "https://ci.example.org/job/alpha/7/artifact/alpha-7.jar",
        "channelVersion": "1.21",
        "timestamp": 1_700_000_000_000,
        "isExperimental": False,
        "commits": [{"message": "Fix the thing", "hash": "abcdef0123", "author": "Ana"}],
        **build_fields,
    }
    return Event(
        "msg_1", "build.published", NOW - 5, "alpha", "https://b.example/projects/alpha", build
    )


def verify(secret: str, headers: dict, body: bytes, tolerance=300, now=NOW) -> bool:
    """A receiver's check, as the Standard Webhooks libraries make it (their spec): the key
    is the secret without `whsec_`, base64-decoded; the signed content `id.timestamp.body`;
    any of the space-separated `v1,` signatures matches, compared in constant time; the
    timestamp within the tolerance of now."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    message_id, stamp = headers["webhook-id"], headers["webhook-timestamp"]
    if abs(now - int(stamp)) > tolerance:
        return False
    signed = f"{message_id}.{stamp}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest())
    return any(
        version == "v1" and hmac.compare_digest(expected, signature.encode())
        for version, _, signature in (
            part.partition(",") for part in headers["webhook-signature"].split(" ")
        )
    )


def test_json_is_the_event_signed_the_standard_webhooks_way():
    body, headers = render(target("json", KEY), event(), now=NOW)
    assert json.loads(body) == {
        "type": "build.published",
        "timestamp": "2026-05-28T20:26:35.000Z",
        "data": {"project": "alpha", "build": event().build, "replaced": False},
    }
    assert headers["Content-Type"] == "application/json"
    assert headers["webhook-id"] == "msg_1"
    assert headers["webhook-timestamp"] == str(NOW)
    assert headers["webhook-signature"].startswith("v1,")
    assert verify(SECRET, headers, body)
    assert not verify(SECRET, headers, body + b" ")
    assert not verify("whsec_" + base64.b64encode(b"x" * 32).decode(), headers, body)
    assert not verify(SECRET, headers, body, now=NOW + 301)


def test_the_standard_webhooks_library_verifies_it_too():
    standardwebhooks = pytest.importorskip("standardwebhooks")
    body, headers = render(target("json", KEY), event())  # the library checks against now
    assert standardwebhooks.Webhook(SECRET).verify(body, headers) == json.loads(body)


@pytest.mark.parametrize("kind", ["discord", "slack"])
def test_the_chat_formats_are_json(kind):
    body, headers = render(target(kind), sample_event())
    assert headers == {"Content-Type": "application/json"}
    assert isinstance(json.loads(body), dict)


def test_discord_never_parses_mentions():
    body, _ = render(target("discord"), event())
    assert json.loads(body)["allowed_mentions"] == {"parse": []}
