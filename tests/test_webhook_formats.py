"""What a webhook request carries: Discord embeds and Slack blocks within the receivers'
documented limits, no mention a commit message could make, and the json format's Standard
Webhooks signature verified as the Standard Webhooks libraries verify it."""

import base64
import dataclasses
import hashlib
import hmac
import json
import re
from datetime import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from buildshelf.webhooks.formats import Event, render, sample_event
from buildshelf.webhooks.targets import EVENTS, Target

KEY = bytes(range(32))
SECRET = "whsec_" + base64.b64encode(KEY).decode()
NOW = 1_780_000_000
PUBLIC = "https://builds.example.org"  # a server's --public-url


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
    body, headers = render(target(kind), sample_event(PUBLIC))
    assert headers == {"Content-Type": "application/json"}
    assert isinstance(json.loads(body), dict)


def test_discord_never_parses_mentions():
    body, _ = render(target("discord"), event())
    assert json.loads(body)["allowed_mentions"] == {"parse": []}


def test_a_receiver_takes_any_of_several_signatures():
    """The verifier above is the libraries': a key rotated makes two signatures."""
    body, headers = render(target("json", KEY), event(), now=NOW)
    rotated = {**headers, "webhook-signature": "v1,bm90IGl0 " + headers["webhook-signature"]}
    assert verify(SECRET, rotated, body)
    assert not verify(SECRET, {**headers, "webhook-signature": "v1,bm90IGl0"}, body)
    assert not verify(SECRET, {**headers, "webhook-id": "msg_2"}, body)


def test_the_signature_is_made_at_each_attempt_with_the_same_id():
    first = render(target("json", KEY), event(), now=NOW)
    later = render(target("json", KEY), event(), now=NOW + 3600)
    assert first[0] == later[0]  # the same body: the event's time, not the attempt's
    assert first[1]["webhook-id"] == later[1]["webhook-id"] == "msg_1"
    assert later[1]["webhook-timestamp"] == str(NOW + 3600)
    assert first[1]["webhook-signature"] != later[1]["webhook-signature"]
    assert verify(SECRET, later[1], later[0], now=NOW + 3600)


def test_json_says_a_replaced_build_and_a_yank_with_its_reason():
    replaced = dataclasses.replace(event(), replaced=True)
    assert json.loads(render(target("json", KEY), replaced, now=NOW)[0])["data"]["replaced"]
    yanked = dataclasses.replace(event(), type="build.yanked", reason="wrong jar")
    sent = json.loads(render(target("json", KEY), yanked, now=NOW)[0])
    assert sent == {
        "type": "build.yanked",
        "timestamp": "2026-05-28T20:26:35.000Z",
        "data": {"project": "alpha", "build": event().build, "replaced": False,
                 "reason": "wrong jar"},
    }  # fmt: skip
    unexplained = dataclasses.replace(event(), type="build.yanked")
    assert json.loads(render(target("json", KEY), unexplained)[0])["data"]["reason"] == ""


def test_json_says_an_unyank_as_such_with_no_reason():
    unyanked = dataclasses.replace(event(), type="build.unyanked")
    sent = json.loads(render(target("json", KEY), unyanked, now=NOW)[0])
    assert sent["type"] == "build.unyanked"
    assert sent["data"] == {"project": "alpha", "build": event().build, "replaced": False}


def test_what_cannot_be_rendered_is_refused():
    with pytest.raises(ValueError):
        render(target("xml"), event())
    with pytest.raises(ValueError):
        render(target("discord"), dataclasses.replace(event(), type="build.deleted"))


def test_sample_events_render_in_every_format_each_with_its_own_id():
    first, second = sample_event(PUBLIC), sample_event(PUBLIC)
    assert first.id != second.id and first.id.startswith("msg_")
    for kind in ("discord", "slack"):
        assert json.loads(render(target(kind), first)[0])
    body, headers = render(target("json", KEY), first)
    assert json.loads(body)["data"]["project"] == "example"
    assert verify(SECRET, headers, body, now=int(headers["webhook-timestamp"]))


# --- Discord ------------------------------------------------------------------------------
# https://discord.com/developers/docs/resources/webhook#execute-webhook (the JSON params),
# https://discord.com/developers/docs/resources/message#embed-object and its embed limits,
# #allowed-mentions-object. Written from the documentation, not from the code.
DISCORD_PARAMS = {
    "content", "username", "avatar_url", "tts", "embeds", "allowed_mentions", "components",
    "payload_json", "attachments", "flags", "thread_name", "applied_tags", "poll",
}  # fmt: skip
EMBED_KEYS = {
    "title", "type", "description", "url", "timestamp", "color", "footer", "image",
    "thumbnail", "video", "provider", "author", "fields",
}  # fmt: skip
FOOTER_KEYS = {"text", "icon_url", "proxy_icon_url"}
AUTHOR_KEYS = {"name", "url", "icon_url", "proxy_icon_url"}
FIELD_KEYS = {"name", "value", "inline"}
ALLOWED_MENTIONS_KEYS = {"parse", "roles", "users", "replied_user"}


def js_length(text):
    """Characters as Discord and Slack count them: UTF-16 code units (JavaScript's length)."""
    return len(text.encode("utf-16-le")) // 2


def check_discord(payload):
    """Every documented limit and name of an execute-webhook body with embeds."""
    assert payload.keys() <= DISCORD_PARAMS
    assert js_length(payload.get("content") or "") <= 2000
    assert payload["allowed_mentions"] == {"parse": []}
    assert payload["allowed_mentions"].keys() <= ALLOWED_MENTIONS_KEYS
    embeds = payload["embeds"]
    assert 1 <= len(embeds) <= 10
    total = 0
    for embed in embeds:
        assert embed.keys() <= EMBED_KEYS
        assert 0 < js_length(embed["title"]) <= 256
        assert 0 < js_length(embed["description"]) <= 4096
        assert embed["url"].startswith(("http://", "https://"))
        assert type(embed["color"]) is int and 0 <= embed["color"] <= 0xFFFFFF
        datetime.fromisoformat(embed["timestamp"])  # ISO 8601
        assert len(embed["fields"]) <= 25
        for field in embed["fields"]:
            assert field.keys() <= FIELD_KEYS and {"name", "value"} <= field.keys()
            assert 0 < js_length(field["name"]) <= 256
            assert 0 < js_length(field["value"]) <= 1024
            assert type(field.get("inline", False)) is bool
            total += js_length(field["name"]) + js_length(field["value"])
        assert embed["footer"].keys() <= FOOTER_KEYS
        assert 0 < js_length(embed["footer"]["text"]) <= 2048
        if "author" in embed:
            assert embed["author"].keys() <= AUTHOR_KEYS
            assert 0 < js_length(embed["author"]["name"]) <= 256
            total += js_length(embed["author"]["name"])
        total += js_length(embed["title"]) + js_length(embed["description"])
        total += js_length(embed["footer"]["text"])
    assert total <= 6000


def discord(an_event):
    body, headers = render(target("discord"), an_event)
    assert headers == {"Content-Type": "application/json"}
    payload = json.loads(body)
    check_discord(payload)
    return payload


def discord_shown(text):
    """What Discord shows of markdown text with escapes: a backslash before punctuation
    shows the punctuation alone."""
    return re.sub(r"\\([^0-9A-Za-z\s])", r"\1", text)


def test_discord_says_the_build():
    embed = discord(event(sha256="ab" * 32, size=10))["embeds"][0]
    assert embed["title"] == "alpha #7"
    assert embed["url"] == "https://b.example/projects/alpha"
    assert embed["timestamp"] == "2023-11-14T22:13:20.000Z"  # the build's time
    assert embed["fields"] == [
        {"name": "Channel", "value": "1.21", "inline": True},
        {"name": "Experimental", "value": "no", "inline": True},
        {
            "name": "Download",
            "value": "[alpha-7.jar](https://ci.example.org/job/alpha/7/artifact/alpha-7.jar)",
            "inline": False,
        },
        {"name": "SHA-256", "value": f"`{'ab' * 32}`", "inline": False},
    ]
    assert embed["description"] == "`abcdef0` Fix the thing — Ana"


def test_discord_tells_an_experimental_a_replaced_and_a_yanked_build_apart():
    experimental = discord(event(isExperimental=True))["embeds"][0]
    plain = discord(event())["embeds"][0]
    assert experimental["fields"][1] == {"name": "Experimental", "value": "yes", "inline": True}
    assert experimental["color"] != plain["color"]
    replaced = discord(dataclasses.replace(event(), replaced=True))["embeds"][0]
    assert replaced["title"] == "alpha #7 replaced"
    yanked = discord(dataclasses.replace(event(), type="build.yanked", reason="broken"))["embeds"][
        0
    ]
    assert yanked["title"] == "alpha #7 yanked"
    assert yanked["description"].startswith("**Yanked**: broken\n")
    assert "Download" not in [field["name"] for field in yanked["fields"]]
    unexplained = discord(dataclasses.replace(event(), type="build.yanked"))["embeds"][0]
    assert unexplained["description"].startswith("**Yanked**\n")


def test_discord_says_an_unyank_as_a_restore_not_a_release():
    embed = discord(dataclasses.replace(event(), type="build.unyanked"))["embeds"][0]
    assert embed["title"] == "alpha #7 unyanked"
    assert embed["description"].startswith("**Unyanked**: served again\n")
    assert embed["color"] not in (discord(event())["embeds"][0]["color"], 0xE74C3C)
    assert "Download" in [field["name"] for field in embed["fields"]]  # served again


def test_no_commit_message_can_mention_or_format_in_discord():
    message = "@everyone <@123> <@&456> <#789> @here **bold** [x](https://evil.example) `a` ||s||"
    embed = discord(event(commits=[{"message": message, "hash": "ab", "author": "@here"}]))[
        "embeds"
    ][0]
    assert discord_shown(embed["description"]) == f"`ab` {message} — @here"
    unescaped = re.sub(r"\\.", "", embed["description"])
    for special in "@<>*[]()|":
        assert special not in unescaped
    assert unescaped.count("`") == 2  # the hash's own


def test_nothing_but_a_hash_goes_in_a_code_span():
    commits = [{"message": "m", "hash": "ab`@everyone`cd"}]
    embed = discord(event(commits=commits, sha256="`@everyone`"))["embeds"][0]
    assert embed["description"] == "`abeeecd` m"  # its hexadecimal digits only
    assert "SHA-256" not in [field["name"] for field in embed["fields"]]
    no_hash = discord(event(commits=[{"message": "m", "hash": "`"}]))["embeds"][0]
    assert no_hash["description"] == "m"


def test_discord_shows_each_commit_s_first_line():
    commits = [
        {"message": "Subject\n\nBody that is long", "hash": "1" * 40},
        {"message": "  Other\r\nmore", "hash": "2" * 40, "author": "Bo"},
    ]
    assert discord(event(commits=commits))["embeds"][0]["description"] == (
        "`1111111` Subject\n`2222222` Other — Bo"
    )
    assert discord(event(commits=[]))["embeds"][0]["description"] == "No commits."


def test_discord_says_how_many_commits_did_not_fit():
    commits = [{"message": "x" * 200, "hash": f"{i:040x}"} for i in range(500)]
    description = discord(event(commits=commits))["embeds"][0]["description"]
    lines = description.split("\n")
    assert lines[-1] == f"… and {500 - len(lines) + 1} more commits"
    assert len(lines) > 10


# Text with every character that formats or mentions, astral characters (two units each),
# line breaks, and the rest of Unicode but lone surrogates (the data files have none).
SPECIAL = st.sampled_from(list("@<>&*_~`|[]()#:\\!\n\r\t -") + ["😀", "\u2028", "é", "𝕏"])
TEXT = st.text(
    alphabet=st.one_of(SPECIAL, st.characters(blacklist_categories=("Cs",))), max_size=40
)


@st.composite
def huge_text(draw, at_most=20_000):
    """Text up to `at_most` characters long, made of a drawn piece repeated."""
    piece = draw(TEXT)
    return (piece * draw(st.integers(1, at_most)))[: draw(st.integers(0, at_most))] or piece


@st.composite
def huge_events(draw):
    commits = draw(
        st.lists(
            st.fixed_dictionaries(
                {"message": huge_text(), "hash": st.text("0123456789abcdef", min_size=1)},
                optional={"author": huge_text(2000)},
            ),
            max_size=draw(st.sampled_from([3, 40, 400])),
        )
    )
    slug = draw(st.sampled_from(["a", "canvas", "a_b_c" * 200]))
    channel = draw(st.sampled_from(["1.21", "x" * 3000, "_*~" * 50]))
    path = draw(st.sampled_from(["a-7.jar", "a_(b).jar", "x" * 960, "x" * 3000, "%40e"]))
    build = {
        "buildNumber": draw(st.integers(0, 10**30)),
        "url": "https://ci.example.org/job/x/7/",
        "downloadUrl": "https://ci.example.org/artifact/" + path,
        "channelVersion": channel,
        "timestamp": draw(st.integers(0, 253402300799999)),
        "isExperimental": draw(st.booleans()),
        "commits": commits,
    }
    if draw(st.booleans()):
        build["sha256"], build["size"] = "0" * 64, 1
    kind = draw(st.sampled_from(EVENTS))
    reason = draw(huge_text()) if kind == "build.yanked" and draw(st.booleans()) else ""
    return Event("msg_x", kind, NOW, slug, f"https://b.example/projects/{slug}", build,
                 draw(st.booleans()), reason)  # fmt: skip


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(huge_events())
def test_discord_keeps_every_limit_whatever_the_build(an_event):
    payload = discord(an_event)
    embed = payload["embeds"][0]
    for text in [embed["title"], embed["description"]]:
        assert "@" not in re.sub(r"\\.", "", text)
        assert "<" not in re.sub(r"\\.", "", text)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(huge_events())
def test_slack_keeps_every_limit_whatever_the_build(an_event):
    slack(an_event)


@pytest.mark.parametrize("kind", EVENTS)
@pytest.mark.parametrize("url_length", [900, 990, 1100, 5000])
def test_the_limits_hold_at_their_edges(kind, url_length):
    """The longest commits and texts: the description takes what the 6,000 leave, no more."""
    commits = [{"message": "😀" * 5000, "hash": "f" * 40, "author": "@" * 5000}] * 1000
    huge = dataclasses.replace(
        event(
            commits=commits,
            channelVersion="_" * 5000,
            downloadUrl="https://x.org/" + "a" * (url_length - 20) + "/f.jar",
            sha256="0" * 64,
        ),
        type=kind,
        project="p" * 5000,
        reason="<@1>" * 5000 if kind == "build.yanked" else "",
    )
    embed = discord(huge)["embeds"][0]
    fields = sum(js_length(f["name"]) + js_length(f["value"]) for f in embed["fields"])
    said = js_length(embed["title"]) + fields + js_length(embed["footer"]["text"])
    # Filled, not merely short: short of its limit by less than a commit's line at most.
    limit = min(6000, said + 4096)
    assert limit - 820 < said + js_length(embed["description"]) <= limit
    slack(huge)


# --- Slack --------------------------------------------------------------------------------
# https://docs.slack.dev/reference/block-kit/blocks/ (header, section, context),
# .../composition-objects/text-object, and chat.postMessage's arguments that incoming
# webhooks take. Written from the documentation.
SLACK_ARGUMENTS = {
    "text", "blocks", "attachments", "thread_ts", "mrkdwn", "unfurl_links", "unfurl_media",
    "username", "icon_emoji", "icon_url",
}  # fmt: skip
BLOCK_KEYS = {
    "header": {"type", "text", "block_id"},
    "section": {"type", "text", "block_id", "fields", "accessory", "expand"},
    "context": {"type", "elements", "block_id"},
}
TEXT_KEYS = {"plain_text": {"type", "text", "emoji"}, "mrkdwn": {"type", "text", "verbatim"}}
# Our own links, <url|text>: everything else in mrkdwn has its & < > escaped.
OWN_LINK = re.compile(r"<(?:https?://[^<>|\s]+|!date\^\d+\^[^<>|]+)\|[^<>]*>")


def check_text(obj, limit, kinds=("plain_text", "mrkdwn")):
    assert obj["type"] in kinds
    assert obj.keys() <= TEXT_KEYS[obj["type"]]
    assert 0 < js_length(obj["text"]) <= limit
    if obj["type"] == "mrkdwn":
        assert obj.get("verbatim") is True  # no mention parsed that was not written <...>
        bare = OWN_LINK.sub("", obj["text"])
        assert "<" not in bare and ">" not in bare
        assert not re.search(r"&(?!amp;|lt;|gt;)", bare)


def check_slack(payload):
    assert payload.keys() <= SLACK_ARGUMENTS
    assert 0 < js_length(payload["text"]) <= 4000  # the notification's text: Slack advises
    assert not re.search(r"<|>|&(?!amp;|lt;|gt;)", payload["text"])
    blocks = payload["blocks"]
    assert 0 < len(blocks) <= 50
    for block in blocks:
        assert block.keys() <= BLOCK_KEYS[block["type"]]
        if block["type"] == "header":
            check_text(block["text"], 150, kinds=("plain_text",))
        elif block["type"] == "section":
            assert "text" in block or "fields" in block
            if "text" in block:
                check_text(block["text"], 3000)
            assert len(block.get("fields", ())) <= 10
            for field in block.get("fields", ()):
                check_text(field, 2000)
        else:
            assert 0 < len(block["elements"]) <= 10
            for element in block["elements"]:
                check_text(element, 3000)


def slack(an_event):
    body, headers = render(target("slack"), an_event)
    assert headers == {"Content-Type": "application/json"}
    payload = json.loads(body)
    check_slack(payload)
    return payload


def test_slack_says_the_build():
    payload = slack(event(sha256="ab" * 32, size=10))
    assert payload["text"] == "alpha #7"
    header, summary, commits, context = payload["blocks"]
    assert header == {"type": "header", "text": {"type": "plain_text", "text": "alpha #7"}}
    assert summary["text"]["text"] == "*<https://b.example/projects/alpha|alpha #7>* was published"
    assert [field["text"] for field in summary["fields"]] == [
        "*Channel*\n1.21",
        "*Experimental*\nno",
        "*Download*\n<https://ci.example.org/job/alpha/7/artifact/alpha-7.jar|alpha-7.jar>",
        f"*SHA-256*\n`{'ab' * 32}`",
    ]
    assert commits["text"]["text"] == "`abcdef0` Fix the thing — Ana"
    assert context["elements"][0]["text"] == (
        "<!date^1700000000^{date_short_pretty} at {time}|2023-11-14T22:13:20.000Z>"
    )


def test_slack_tells_a_yanked_build_and_why():
    payload = slack(
        dataclasses.replace(event(), type="build.yanked", reason="<!channel> bad\nworse")
    )
    assert payload["text"] == "alpha #7 yanked"
    assert payload["blocks"][1]["text"]["text"] == (
        "*<https://b.example/projects/alpha|alpha #7 yanked>* was yanked: &lt;!channel&gt; bad "
        "worse"
    )


def test_slack_says_an_unyank_as_a_restore_not_a_release():
    payload = slack(dataclasses.replace(event(), type="build.unyanked"))
    assert payload["text"] == "alpha #7 unyanked"
    assert payload["blocks"][1]["text"]["text"] == (
        "*<https://b.example/projects/alpha|alpha #7 unyanked>* was unyanked: it is served again"
    )
    assert payload["blocks"][1]["fields"][2]["text"].startswith("*Download*\n")


def test_no_commit_message_can_mention_in_slack():
    message = "<!channel> <!here> <@U123> <#C1> & <https://evil.example|click> @channel"
    payload = slack(event(commits=[{"message": message, "hash": "ab", "author": "<!everyone>"}]))
    assert payload["blocks"][2]["text"] == {
        "type": "mrkdwn",
        "text": "`ab` &lt;!channel&gt; &lt;!here&gt; &lt;@U123&gt; &lt;#C1&gt; &amp; "
        "&lt;https://evil.example|click&gt; @channel — &lt;!everyone&gt;",
        "verbatim": True,
    }
