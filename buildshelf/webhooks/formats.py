"""What a webhook request carries: an `Event` rendered for its target's format (`render`),
the body and its headers. Discord gets an embed and Slack Block Kit blocks, each within the
receiver's documented limits and with no way for a commit message to mention anyone; `json`
gets the event as data, signed the Standard Webhooks way.

Nothing here sends anything: delivery.py delivers what this makes.
"""

import base64
import hashlib
import hmac
import json
import re
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from buildshelf.model import SHA256_PATTERN, file_name_in_url
from buildshelf.webhooks.targets import EVENTS, PUBLISHED, UNYANKED, YANKED

JSON_TYPE = "application/json"
PRODUCT = "Buildshelf"

# Discord's limits (https://discord.com/developers/docs/resources/message#embed-object-embed-
# limits), counted as Discord counts: in UTF-16 code units, as JavaScript strings do.
DISCORD_TITLE = 256
DISCORD_DESCRIPTION = 4096
DISCORD_FIELDS = 25
DISCORD_FIELD_NAME = 256
DISCORD_FIELD_VALUE = 1024
DISCORD_FOOTER = 2048
DISCORD_AUTHOR = 256
DISCORD_TOTAL = 6000  # title, description, field names and values, footer, author: all embeds
DISCORD_EMBEDS = 10
# Slack's (https://docs.slack.dev/reference/block-kit/blocks/).
SLACK_SECTION_TEXT = 3000
SLACK_SECTION_FIELD = 2000
SLACK_SECTION_FIELDS = 10
SLACK_HEADER = 150
SLACK_BLOCKS = 50
SLACK_CONTEXT_ELEMENTS = 10
SLACK_TEXT = 3000  # the notification's fallback: Slack takes 40,000, no one reads that many

COMMIT_LINE = 300  # a commit's subject line, shown at most this long, so that several show
SHORT_HASH = 7
COLORS = {
    "published": 0x2ECC71,
    "experimental": 0xE67E22,
    "yanked": 0xE74C3C,
    "unyanked": 0x3498DB,
}


@dataclass(frozen=True)
class Event:
    """Something that happened to one build: `type` is one of EVENTS; `timestamp` when it
    happened (epoch seconds); `build` the build as the API serves it (shapes.build_json);
    `replaced` for a build published again over one of the same number; `reason` a yank's
    (its mark's yankReason, which the API does not serve: "" for none)."""

    id: str  # webhook-id: the same on every attempt to deliver this event
    type: str
    timestamp: float
    project: str  # the slug
    project_url: str  # the project's page
    build: dict
    replaced: bool = False
    reason: str = ""


def render(target, event: Event, now: float | None = None) -> tuple[bytes, dict[str, str]]:
    """The body and headers of `event`'s request to `target`. `now` (epoch seconds, default
    the clock) is the signature's time: render again for each attempt, since receivers refuse
    a signature more than a few minutes old."""
    if event.type not in EVENTS:
        raise ValueError(f"unknown event type {event.type!r}")
    if target.format == "discord":
        return _json_body(discord_payload(event)), {"Content-Type": JSON_TYPE}
    if target.format == "slack":
        return _json_body(slack_payload(event)), {"Content-Type": JSON_TYPE}
    if target.format == "json":
        data = {"project": event.project, "build": event.build, "replaced": event.replaced}
        if event.type == YANKED:
            data["reason"] = event.reason
        body = _json_body({"type": event.type, "timestamp": _iso(event.timestamp), "data": data})
        stamp = str(int(time.time() if now is None else now))
        return body, {
            "Content-Type": JSON_TYPE,
            "webhook-id": event.id,
            "webhook-timestamp": stamp,
            "webhook-signature": sign(target.secret, event.id, stamp, body),
        }
    raise ValueError(f"unknown format {target.format!r}")


def sign(key: bytes, message_id: str, timestamp: str, body: bytes) -> str:
    """The Standard Webhooks signature header's value: v1, and the base64 HMAC-SHA256 of
    `id.timestamp.body` under `key`."""
    mac = hmac.new(key, f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def project_page(public_url: str, slug: str) -> str:
    """The address of a project's page, which an event links."""
    return f"{public_url}/projects/{slug}"


def sample_event(public_url: str, project: str = "example") -> Event:
    """An event to try a target with (`buildshelf webhook test`): a made-up build of
    `project`, now, its links on `public_url` (the project's page, its latest download)."""
    now = time.time()
    return Event(
        id="msg_test_" + secrets.token_hex(12),
        type=PUBLISHED,
        timestamp=now,
        project=project,
        project_url=project_page(public_url, project),
        build={
            "buildNumber": 42,
            "url": f"https://ci.example.org/job/{project}/42/",  # its CI's: made up
            "downloadUrl": f"{public_url}/downloads/latest?project={project}",
            "channelVersion": "1.21.4",
            "timestamp": int(now * 1000),
            "isExperimental": False,
            "commits": [
                {
                    "message": "A test from Buildshelf: this target receives its events",
                    "hash": "0123456789abcdef0123456789abcdef01234567",
                    "author": "Buildshelf",
                }
            ],
        },
    )


# --- lengths and escapes -----------------------------------------------------------------


def units(text: str) -> int:
    """The length of `text` as JavaScript counts it (UTF-16 code units): Discord's and
    Slack's limits count these, and an emoji is two."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def cut(text: str, limit: int, escape=str) -> str:
    """`escape(text)` in at most `limit` units: cut between two characters' escapes, ending
    with an ellipsis, when it is longer."""
    head = escape(text[: limit + 1])  # each character is at least one unit
    if len(text) <= limit and units(head) <= limit:
        return head
    pieces, used = [], 0
    for ch in text:
        piece = escape(ch)
        if used + units(piece) > limit - 1:
            break
        pieces.append(piece)
        used += units(piece)
    return "".join(pieces) + "…"


# Discord renders a backslash before any punctuation as the punctuation alone. These are
# the characters that format, link or mention inline (a line's start is never user text).
_DISCORD_SPECIAL = re.compile(r"([\\*_~`|<>\[\]()@])")


def discord_escape(text: str) -> str:
    """`text` shown as it is in a Discord message or embed: no formatting, link or mention."""
    return _DISCORD_SPECIAL.sub(r"\\\1", _one_line(text))


def slack_escape(text: str) -> str:
    """`text` as Slack's mrkdwn shows it: &, < and > escaped, so `<@U123>` or `<!channel>`
    in a commit message is text, not a mention."""
    return _one_line(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")


def _one_line(text):
    return _CONTROL.sub(" ", text)


def _link_target(url: str) -> str:
    """A URL safe inside a markdown link's parentheses (Discord) or <url|text> (Slack)."""
    return url.replace("(", "%28").replace(")", "%29").replace("|", "%7C").replace(" ", "%20")


# --- what is said, for both chat formats --------------------------------------------------


def _title(event) -> str:
    number = event.build.get("buildNumber")
    title = f"{event.project} #{number}"
    if event.type in (YANKED, UNYANKED):
        return f"{title} {event.type.removeprefix('build.')}"
    return title + " replaced" if event.replaced else title


def _color(event) -> int:
    if event.type in (YANKED, UNYANKED):
        return COLORS[event.type.removeprefix("build.")]
    return COLORS["experimental" if event.build.get("isExperimental") else "published"]


def _commit_lines(build, escape, budget):
    """The commits, one line each (short hash, subject, author), within `budget` units,
    ending with how many more there are when they do not all fit."""
    commits = build.get("commits") or []
    lines, used = [], 0
    for index, commit in enumerate(commits):
        subject = (commit.get("message") or "").strip().split("\n", 1)[0].strip()
        # Hexadecimal in the data files; kept so here, or a backtick could end the code span.
        short_hash = _NOT_HEX.sub("", str(commit.get("hash", "")))[:SHORT_HASH]
        line = (f"`{short_hash}` " if short_hash else "") + cut(subject, COMMIT_LINE, escape)
        if commit.get("author"):
            line += " — " + cut(commit["author"], 100, escape)
        rest = len(commits) - index - 1
        more = f"\n{_more(rest)}" if rest else ""
        if used + units(line) + 1 + units(more) > budget:
            lines.append(_more(len(commits) - index))
            break
        lines.append(line)
        used += units(line) + 1
    return "\n".join(lines) if lines else "No commits."


_NOT_HEX = re.compile("[^0-9A-Fa-f]")


def _more(count):
    return f"… and {count} more commit{'s' if count > 1 else ''}"


def _sha256(build) -> bool:
    """Whether the build has a sha256 to show (as the data files have it: 64 hex digits)."""
    return type(build.get("sha256")) is str and SHA256_PATTERN.match(build["sha256"]) is not None


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def _build_seconds(event) -> float:
    stamp = event.build.get("timestamp")
    return stamp / 1000 if type(stamp) is int else event.timestamp


# --- Discord ------------------------------------------------------------------------------


def discord_payload(event: Event) -> dict:
    """An execute-webhook body: one embed, with mentions parsed from nothing."""
    build = event.build
    fields = [
        {
            "name": "Channel",
            "value": cut(
                str(build.get("channelVersion") or "?"), DISCORD_FIELD_VALUE, discord_escape
            ),
            "inline": True,
        },
        {
            "name": "Experimental",
            "value": "yes" if build.get("isExperimental") else "no",
            "inline": True,
        },
    ]
    download = build.get("downloadUrl")
    if download and event.type != YANKED:
        name = cut(file_name_in_url(download) or "download", 200, discord_escape)
        # A link cut short leads nowhere: too long, it is the project page's, or none.
        for url in (download, event.project_url):
            link = f"[{name}]({_link_target(url)})"
            if units(link) <= DISCORD_FIELD_VALUE:
                fields.append({"name": "Download", "value": link, "inline": False})
                break
    if _sha256(build):
        fields.append({"name": "SHA-256", "value": f"`{build['sha256']}`", "inline": False})
    embed = {
        "title": cut(_title(event), DISCORD_TITLE, discord_escape),
        "url": event.project_url,
        "color": _color(event),
        "fields": fields,
        "footer": {"text": PRODUCT},
        "timestamp": _iso(_build_seconds(event)),
    }
    said = units(embed["title"]) + units(PRODUCT)
    said += sum(units(f["name"]) + units(f["value"]) for f in fields)
    budget = min(DISCORD_DESCRIPTION, DISCORD_TOTAL - said)
    header = ""
    if event.type == YANKED:
        reason = event.reason
        header = "**Yanked**" + (": " + cut(reason, 500, discord_escape) if reason else "") + "\n"
    elif event.type == UNYANKED:
        header = "**Unyanked**: served again\n"
    embed["description"] = header + _commit_lines(build, discord_escape, budget - units(header))
    return {"embeds": [embed], "allowed_mentions": {"parse": []}}


# --- Slack --------------------------------------------------------------------------------


def slack_payload(event: Event) -> dict:
    """An incoming-webhook body: Block Kit blocks, and the notification's text."""
    build = event.build
    title = _title(event)
    fields = [
        _mrkdwn(
            "*Channel*\n"
            + cut(str(build.get("channelVersion") or "?"), SLACK_SECTION_FIELD - 20, slack_escape)
        ),
        _mrkdwn("*Experimental*\n" + ("yes" if build.get("isExperimental") else "no")),
    ]
    download = build.get("downloadUrl")
    if download and event.type != YANKED:
        name = cut(file_name_in_url(download) or "download", 200, slack_escape)
        link = f"*Download*\n<{slack_escape(_link_target(download))}|{name}>"
        if units(link) <= SLACK_SECTION_FIELD:  # a link cut short leads nowhere
            fields.append(_mrkdwn(link))
    if _sha256(build):
        fields.append(_mrkdwn(f"*SHA-256*\n`{build['sha256']}`"))
    shown_title = cut(title, 500, slack_escape)
    page = f"<{slack_escape(_link_target(event.project_url))}|{shown_title}>"
    if units(page) > SLACK_SECTION_TEXT // 2:  # a link cut short leads nowhere
        page = shown_title
    said = {YANKED: "yanked", UNYANKED: "unyanked: it is served again"}
    summary = f"*{page}* was " + said.get(event.type, "published")
    if event.type == YANKED and event.reason:
        room = SLACK_SECTION_TEXT - units(summary) - 2
        summary += ": " + cut(event.reason, room, slack_escape)
    blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": cut(title, SLACK_HEADER)}},
        {"type": "section", "text": _mrkdwn(summary), "fields": fields},
        {
            "type": "section",
            "text": _mrkdwn(_commit_lines(build, slack_escape, SLACK_SECTION_TEXT)),
        },
        {
            "type": "context",
            "elements": [_mrkdwn(_slack_date(_build_seconds(event))), _mrkdwn(PRODUCT)],
        },
    ]
    fallback = cut(title, SLACK_TEXT, slack_escape)
    return {"text": fallback, "blocks": blocks, "unfurl_links": False, "unfurl_media": False}


def _mrkdwn(text):
    # verbatim: Slack then links no names and parses no mentions it was not given as <...>.
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def _slack_date(seconds):
    """The build's time, shown in each reader's time zone; the fallback is UTC."""
    return f"<!date^{int(seconds)}^{{date_short_pretty}} at {{time}}|{_iso(seconds)}>"


def _json_body(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
