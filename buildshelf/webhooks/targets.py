"""The webhook targets: `webhooks.json` read strictly into `Target`s, or refused with every
problem and its place (`TargetsError`, told as a data file's problems are); the projects they
name that are not there (`unknown_projects`, each with its "did you mean").

The file is a secret (a Discord or Slack webhook URL is a credential): it is refused unless
only its owner may read it, and no message here ever holds a URL or a secret. A target is
named by its index and its host only (`host`).
"""

import base64
import binascii
import json
import os
import re
import stat
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from buildshelf import files
from buildshelf.datafiles import strictjson
from buildshelf.datafiles.datafile import DataError
from buildshelf.datafiles.dataformat import URL_RULE
from buildshelf.model import SLUG_PATTERN, URL_PATTERN
from buildshelf.text import closest

FORMATS = ("discord", "slack", "json")
PUBLISHED, YANKED, UNYANKED = "build.published", "build.yanked", "build.unyanked"
EVENTS = (PUBLISHED, YANKED, UNYANKED)
KEYS = ("url", "format", "projects", "events", "secret")
SECRET_PREFIX = "whsec_"
# Standard Webhooks: keys SHOULD be 24 to 64 bytes. Fewer is refused: an HMAC key that short
# is guessable offline from one signed request.
MIN_SECRET_BYTES = 24
SECRET_RULE = (
    f"'secret' must be {SECRET_PREFIX!r} and a key of at least {MIN_SECRET_BYTES} bytes in "
    "base64 (Standard Webhooks' form), e.g. the output of: python3 -c \"import base64, secrets; "
    f"print('{SECRET_PREFIX}' + base64.b64encode(secrets.token_bytes(32)).decode())\""
)
# A file this large is a mistake (a log or a data file named by --webhooks): not read whole.
MAX_BYTES = 1024 * 1024
# Group and other: any of their bits and the file is refused.
NOT_OWNER_BITS = 0o077


class TargetsError(DataError):
    """webhooks.json refused: its problems (as DataError holds them, with `located()` and
    `lines()`), none of which quotes a URL or a secret."""


class NoTargetsFile(TargetsError):
    """There is no webhooks.json: no webhooks, unless the file was named on purpose."""


@dataclass(frozen=True)
class Target:
    """One receiver of events. `url` and `secret` are left out of the repr: a target may be
    logged by mistake, and its URL may be a credential."""

    index: int  # its place in the file's "targets", from 0
    url: str = field(repr=False)
    format: str  # one of FORMATS
    projects: frozenset | None  # the slugs it hears about; None: every project
    events: frozenset  # a subset of EVENTS, never empty
    secret: bytes | None = field(repr=False)  # the HMAC key (json only), base64-decoded

    @property
    def host(self) -> str:
        return host(self.url)

    def wants(self, event_type: str, project: str) -> bool:
        """Whether this target hears about an event of `event_type` for `project`."""
        return event_type in self.events and (self.projects is None or project in self.projects)


def host(url) -> str:
    """The host (and port, if given) of `url`, for logs and health: never the path, query or
    user information, where webhook tokens live. '' when there is none."""
    try:
        parts = urlsplit(url)
        name, port = parts.hostname, parts.port
    except (TypeError, ValueError, AttributeError):
        return ""
    if not name:
        return ""
    if ":" in name:  # IPv6, as a URL writes it
        name = f"[{name}]"
    return f"{name}:{port}" if port is not None else name


@dataclass(frozen=True)
class UnknownProject:
    """A slug a target's `projects` names that is no project: the target hears nothing of
    it. `near` is the project it most likely meant, or None."""

    target: Target
    project: str
    near: str | None

    def message(self) -> str:
        """What check, the log and /healthz's readers are told (never the URL)."""
        hint = (
            f"did you mean {self.near!r}?"
            if self.near
            else "it hears nothing of it until a project so named is added"
        )
        return (
            f"targets[{self.target.index}] ({self.target.host}): 'projects' names "
            f"{self.project!r}, which is no project: {hint}"
        )


def unknown_projects(targets, projects) -> list[UnknownProject]:
    """Each slug the targets' `projects` name that is none of `projects` (the slugs of the
    data directory), in the file's order, with the project it most likely meant."""
    return [
        UnknownProject(target, slug, closest(slug, projects))
        for target in targets
        for slug in sorted(target.projects or ())
        if slug not in projects
    ]


def read_targets(path) -> tuple[Target, ...]:
    """The targets of the file at `path`, or TargetsError (NoTargetsFile if there is none)
    with every problem, each placed by line and column where the file has a place for it."""
    try:
        fd, st = files.open_regular(path)
    except FileNotFoundError:
        raise NoTargetsFile(path, "no such file") from None
    except files.NotRegular as error:
        raise TargetsError(path, f"is {error.kind}, not a file") from None
    except OSError as error:
        raise TargetsError(path, f"cannot be read: {error.strerror}") from None
    with os.fdopen(fd, "rb") as file:
        if st.st_mode & NOT_OWNER_BITS:
            # Checked on the file opened, so a file swapped in after the check is not read.
            raise TargetsError(
                path,
                f"its mode is {stat.S_IMODE(st.st_mode):04o}, but it holds credentials (webhook "
                "URLs and secrets): it must be readable by its owner only (mode 0600 or "
                "stricter: chmod 600)",
            )
        try:
            data = file.read(MAX_BYTES + 1)
        except OSError as error:
            raise TargetsError(path, f"cannot be read: {error.strerror}") from None
    if len(data) > MAX_BYTES:
        raise TargetsError(path, f"is over {MAX_BYTES // 1024} KiB: it cannot be a list of targets")
    return parse_targets(path, data)


def parse_targets(path, data: bytes) -> tuple[Target, ...]:
    """The targets in `data`, the bytes of the file at `path`; TargetsError if refused."""
    try:
        text = strictjson.text_of(data)
        doc = strictjson.loads(text)
    except strictjson.Invalid as error:
        message = error.message
        if error.key is not None:  # a key is not quoted here: it may be a pasted URL
            message = f"key {_shown(error.key)} appears twice in one object"
        raise TargetsError(path, message, error.line, error.column) from None
    places = _places(text)

    def problem(message, *where):
        index = places.get(where, places.get(where[:-1], 0)) if where else 0
        return TargetsError(path, message, *strictjson.position(text, index))

    if type(doc) is not dict or doc.keys() != {"targets"} or type(doc["targets"]) is not list:
        unknown = sorted(doc.keys() - {"targets"}) if type(doc) is dict else ()
        where = ("{" + unknown[0],) if unknown else ("targets",)
        raise problem(
            'the file must hold one object, {"targets": [...]}, its array of targets'
            + (f": unknown key {_shown(unknown[0])}" if unknown else ""),
            *where,
        )
    targets, problems = [], []
    for index, value in enumerate(doc["targets"]):
        place = ("targets", index)
        name = f"targets[{index}]"
        if type(value) is dict and (shown_host := host(value.get("url"))):
            name += f" ({shown_host})"
        if type(value) is not dict:
            problems.append(problem(f"{name}: must be an object with 'url' and 'format'", *place))
            continue
        try:
            targets.append(_target(index, value))
        except _Invalid as invalid:
            key = invalid.key
            # An unknown key is placed at its name, a bad value at the value.
            where = place + ("{" + key,) if invalid.at_name else place + (key,)
            problems.append(problem(f"{name}: {invalid}", *(where if key else place)))
    if problems:
        raise TargetsError.of_all(problems)
    return tuple(targets)


class _Invalid(Exception):
    """A problem in one target, about `key` (None: the target as a whole)."""

    def __init__(self, message, key=None, at_name=False):
        super().__init__(message)
        self.key, self.at_name = key, at_name


def _shown(key: str) -> str:
    """A key as a message may quote it: a key of a dozen letters, or not at all (someone may
    have pasted a URL or secret where a key goes)."""
    return repr(key) if re.fullmatch(r"[A-Za-z_]{1,20}", key) else "(not shown)"


def _target(index, value) -> Target:
    unknown = sorted(value.keys() - set(KEYS))
    if unknown:
        near = closest(unknown[0].lower(), KEYS)
        hint = f": did you mean {near!r}?" if near else f": the keys are {', '.join(KEYS)}"
        raise _Invalid(f"unknown key {_shown(unknown[0])}{hint}", unknown[0], at_name=True)
    for key in ("url", "format"):
        if key not in value:
            raise _Invalid(f"missing key {key!r}")
    url, kind = value["url"], value["format"]
    if not (type(url) is str and url.isascii() and URL_PATTERN.match(url)):
        raise _Invalid(f"'url' {URL_RULE}, with no user name or password", "url")
    if _port(url) not in range(1, 65536):  # URL_PATTERN allows 0 and 65536..99999
        raise _Invalid("'url' names a port outside 1..65535", "url")
    if kind not in FORMATS:  # the value is not quoted: a URL may have been put there
        near = closest(kind, FORMATS) if type(kind) is str else None
        hint = f": did you mean {near!r}?" if near else ""
        raise _Invalid(f"'format' must be one of {', '.join(map(repr, FORMATS))}{hint}", "format")
    projects = None
    if "projects" in value:
        projects = value["projects"]
        if not (
            type(projects) is list
            and projects
            and all(type(slug) is str and SLUG_PATTERN.match(slug) for slug in projects)
        ):
            raise _Invalid(
                "'projects' must be a non-empty array of project slugs (leave it out for "
                "every project)",
                "projects",
            )
        projects = frozenset(projects)
    events = value.get("events", list(EVENTS))
    if not (type(events) is list and events and all(e in EVENTS for e in events)):
        raise _Invalid(
            f"'events' must be a non-empty array of {', '.join(map(repr, EVENTS))} (leave it "
            "out for every event)",
            "events",
        )
    secret = None
    if kind == "json":
        if "secret" not in value:
            raise _Invalid(
                f"missing key 'secret': a json target's requests are signed. {SECRET_RULE}"
            )
        secret = _key(value["secret"])
    elif "secret" in value:
        # Refused rather than ignored: whoever wrote it expects signed requests.
        raise _Invalid(
            f"'secret' is only for format 'json': {kind} requests are not signed", "secret"
        )
    return Target(index, url, kind, projects, frozenset(events), secret)


def _port(url) -> int:
    """The port `url` connects to (443 or 80 if it names none); -1 if it is none."""
    try:
        port = urlsplit(url).port
    except ValueError:  # beyond 65535
        return -1
    return port if port is not None else 443 if url[:5].lower() == "https" else 80


def _key(secret) -> bytes:
    """The HMAC key of a `whsec_` secret; _Invalid (never quoting it) if it is not one."""
    if type(secret) is str and secret.startswith(SECRET_PREFIX) and secret.isascii():
        try:
            key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
        except binascii.Error:
            pass
        else:
            if len(key) >= MIN_SECRET_BYTES:
                return key
    raise _Invalid(SECRET_RULE, "secret")


PLACED_DEPTH = 3  # places kept down to a target's keys: ("targets", 2, "url")


def _places(text) -> dict[tuple, int]:
    """Where values start in `text`, by path (("targets", 0, "url"): the index of its value),
    and where a key's name starts (("targets", 0, "{url")), down to PLACED_DEPTH."""
    places, frames = {(): 0}, []  # frames: [path, key or index, expecting a key]
    for match in strictjson.TOKEN.finditer(text):
        string, mark, _ = match.groups()
        start = match.start(match.lastindex)
        if mark in ("}", "]"):
            frames.pop()
        elif mark == ",":
            frame = frames[-1]
            if frame[2] is None:  # an array
                frame[1] += 1
            else:
                frame[2] = True
        elif mark == ":":
            pass
        elif frames and frames[-1][2]:  # an object's key
            frame = frames[-1]
            frame[1], frame[2] = json.loads(string), False
            if len(frame[0]) < PLACED_DEPTH:
                places[frame[0] + ("{" + frame[1],)] = start
        else:  # a value
            path = frames[-1][0] + (frames[-1][1],) if frames else ()
            if len(path) <= PLACED_DEPTH:
                places[path] = start
            if mark == "{":
                frames.append([path, None, True])
            elif mark == "[":
                frames.append([path, 0, None])
    return places
