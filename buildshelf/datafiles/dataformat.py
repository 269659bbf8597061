"""The data files' format: the keys of each object in the order files are written, and the
rules every value follows, each with the message that says it: a build object's
(`valid_build`; its extra files', `valid_downloads`), a commit's and the project's own fields
(`project_problem`). A broken rule is `RuleBroken`, which datafile.py places in the file.
"""

import datetime
import json
import re

import msgspec

from buildshelf import javadoc
from buildshelf.model import (
    CHANNEL_PATTERN,
    DAY_PATTERN,
    EXPERIMENTAL_CHANNELS,
    FILE_NAME_PATTERN,
    FILE_NAME_RULE,
    HASH_DIGITS,
    LAST_MILLISECOND,
    SECONDS_BELOW,
    SHA256_PATTERN,
    SUPPORT_STATUSES,
    TIMESTAMPS,
    URL_PATTERN,
    Build,
    BuildWithExtras,
    Commit,
    Commits,
    Download,
    Project,
    VersionInfo,
    download_key_problem,
    file_keys,
    file_name_in_url,
)
from buildshelf.text import closest

URL_RULE = "must be an absolute http(s) URL of ASCII letters, digits and URL punctuation"
CHANNEL_TEXT_RULE = "letters, digits and . _ + -"  # CHANNEL_PATTERN in words
# The largest build number: every JSON reader (a launcher's JavaScript) keeps it exactly, and
# SQLite (the download counts) keeps it at all.
MAX_BUILD_NUMBER = 2**53 - 1
HEX_DIGITS = frozenset(HASH_DIGITS)
# The keys of each object, in the order files are written: the model's fields.
PROJECT_KEYS = file_keys(Project)
OPTIONAL_PROJECT_KEYS = ("slug", "javadocBaseUrl", "javadocPagePrefix", "versions")
VERSION_KEYS = file_keys(VersionInfo)  # of each entry of `versions`, every one optional
BUILD_KEYS = file_keys(BuildWithExtras)  # a Build's, then its downloads
LEGACY_BUILD_KEYS = ("commit",)  # accepted and kept in the file, never served
WRITTEN_BUILD_KEYS = BUILD_KEYS + LEGACY_BUILD_KEYS  # every key a build may have, in order
AUTHORED_COMMIT_KEYS = file_keys(Commit)
COMMIT_KEYS = AUTHORED_COMMIT_KEYS[:2]  # 'author' is optional
DOWNLOAD_KEYS = file_keys(Download)  # an extra file's, in a build's `downloads`
# As sets, for the checks on every build.
_PROJECT_KEYS, _REQUIRED_PROJECT_KEYS = (
    set(PROJECT_KEYS),
    set(PROJECT_KEYS) - set(OPTIONAL_PROJECT_KEYS),
)
# The spec's seven: nearly every build has exactly these. The others are integrity data and,
# for a file Buildshelf keeps, its name (which replaces downloadUrl).
PLAIN_BUILD_KEYS = BUILD_KEYS[:7]
_PLAIN_BUILD_KEYS = set(PLAIN_BUILD_KEYS)
_REQUIRED_BUILD_KEYS = _PLAIN_BUILD_KEYS - {"downloadUrl"}
_ALLOWED_BUILD_KEYS = set(WRITTEN_BUILD_KEYS)
_COMMIT_KEYS, _AUTHORED_COMMIT_KEYS = set(COMMIT_KEYS), set(AUTHORED_COMMIT_KEYS)
_VERSION_KEYS = set(VERSION_KEYS)
_DOWNLOAD_KEYS, _NO_KEYS = set(DOWNLOAD_KEYS), set()
# JSON's \ud800 escape decodes to a lone surrogate, which has no UTF-8: it could not be served.
SURROGATE = re.compile("[\ud800-\udfff]")
# A yank's reason is text, shown in a log line, a chat message and a page (in its lines): no
# control character (C0, DEL, C1) but tab and line breaks, no lone surrogate. The fast path
# checks both at once.
CONTROL_CHARACTERS = r"\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"  # a class's, in Python and JSON Schema
YANK_REASON_CONTROL = re.compile(f"[{CONTROL_CHARACTERS}]")
YANK_REASON_REFUSED = re.compile(f"[{CONTROL_CHARACTERS}\ud800-\udfff]")


def _unicode_problem(name, text):
    """Why a string holding a lone surrogate cannot be served, and where it is in it."""
    index = SURROGATE.search(text).start()
    return (
        f"{name!r} holds a lone surrogate ({text[index].encode('unicode_escape').decode()} "
        f"at character {index + 1}): strings must be valid Unicode"
    )


def _is_url(value):
    return type(value) is str and value.isascii() and URL_PATTERN.match(value) is not None


class RuleBroken(Exception):
    """A problem in one build (or in the project's own fields); the caller knows which build
    and raises a DataError."""


def _check_keys(value, allowed, required):
    keys = value.keys()
    if not (required <= keys <= allowed):
        unknown = sorted(keys - allowed)
        if unknown:
            raise RuleBroken(f"unknown key {unknown[0]!r}{_closest(unknown[0], allowed)}")
        raise RuleBroken(f"missing key {sorted(required - keys)[0]!r}")


def _closest(key, allowed):
    """': did you mean KEY?' for the allowed key closest to a misspelt one, or ''. Letter
    case counts for nothing: 'downloadURL' is downloadUrl."""
    by_lower = {name.lower(): name for name in allowed}
    near = closest(key.lower(), by_lower)
    return f": did you mean {by_lower[near]}?" if near else ""


def _commit_problem(value):
    if type(value) is not dict:
        return "must be an object with 'message' and 'hash'"
    try:
        _check_keys(value, _AUTHORED_COMMIT_KEYS, _COMMIT_KEYS)
    except RuleBroken as problem:
        return str(problem)
    if type(value["message"]) is not str:
        return "'message' must be a string"
    if type(value.get("author", "")) is not str:
        return "'author' must be a string"
    for key in ("message", "author"):
        if SURROGATE.search(value.get(key, "")):
            return _unicode_problem(key, value[key])
    return "'hash' must be a string of hexadecimal digits"


def valid_build(value, channels):
    """One build object's Build, every rule checked, or RuleBroken with the rule it breaks;
    `channels` (channel -> the one string kept of it) is shared by a file's builds."""
    # On the path of every build at every load: exact type checks, no work for messages.
    if type(value) is not dict:
        raise RuleBroken("must be an object")
    number = value.get("buildNumber")
    if not (type(number) is int and number >= 0):
        raise RuleBroken("'buildNumber' must be an integer >= 0")
    if number > MAX_BUILD_NUMBER:
        raise RuleBroken(
            f"'buildNumber' is over {MAX_BUILD_NUMBER} (2**53 - 1), the largest that "
            "every JSON reader keeps exactly"
        )
    if "gameVersion" in value:
        raise RuleBroken("'gameVersion' is the old name: rename it to 'channelVersion'")
    integrity = {}
    if value.keys() != _PLAIN_BUILD_KEYS:
        _check_keys(value, _ALLOWED_BUILD_KEYS, _REQUIRED_BUILD_KEYS)
        integrity = _integrity(value)
        if "yankedAt" in value or "yankReason" in value:
            integrity.update(_yank_mark(value))
    url, download_url = value["url"], value.get("downloadUrl", "")
    if not _is_url(url):
        raise RuleBroken(f"'url' {URL_RULE}")
    if "file" not in integrity and not _is_url(download_url):
        raise RuleBroken(f"'downloadUrl' {URL_RULE}")
    channel = value["channelVersion"]
    if type(channel) is not str or channel not in channels:  # a list or dict is unhashable
        if not (type(channel) is str and CHANNEL_PATTERN.match(channel)):
            raise RuleBroken(f"'channelVersion' must be a non-empty string of {CHANNEL_TEXT_RULE}")
        # Thousands of builds share a handful of channels: check each once, store it once.
        channels[channel] = channel
    timestamp = value["timestamp"]
    if type(timestamp) is not int:
        raise RuleBroken("'timestamp' must be an integer")
    if timestamp not in TIMESTAMPS:
        raise RuleBroken(f"'timestamp' {timestamp} {timestamp_problem(timestamp)}")
    if type(value["isExperimental"]) is not bool:
        raise RuleBroken("'isExperimental' must be true or false")
    if type(value["commits"]) is not list:
        raise RuleBroken("'commits' must be an array")
    commits = []
    for commit in value["commits"]:
        if type(commit) is dict and (
            commit.keys() == _COMMIT_KEYS or commit.keys() == _AUTHORED_COMMIT_KEYS
        ):
            message, commit_hash = commit["message"], commit["hash"]
            author = commit.get("author", "")
            if (
                type(message) is str
                and (message.isascii() or not SURROGATE.search(message))
                and type(commit_hash) is str
                and commit_hash
                and HEX_DIGITS.issuperset(commit_hash)
                and type(author) is str
                and (author.isascii() or not SURROGATE.search(author))
            ):
                commits.append(Commit(message, commit_hash, author))
                continue
        raise RuleBroken(f"commits[{len(commits)}]: {_commit_problem(commit)}")
    if integrity and "downloads" in value:  # a plain build has none
        primary = integrity.get("file") or file_name_in_url(download_url)
        integrity["downloads"] = valid_downloads(value["downloads"], primary)
    return (BuildWithExtras if "downloads" in integrity else Build)(
        number=number,
        url=url,
        download_url=download_url,
        channel=channels[channel],
        timestamp=timestamp,
        is_experimental=value["isExperimental"],
        commits=Commits(commits),
        **integrity,
    )


def _integrity(value):
    """A build's sha256, size and file, as Build's keyword arguments, checked."""
    sha256, size = value.get("sha256", msgspec.UNSET), value.get("size", msgspec.UNSET)
    if (sha256 is msgspec.UNSET) != (size is msgspec.UNSET):
        raise RuleBroken("'sha256' and 'size' go together: give both or neither")
    if sha256 is not msgspec.UNSET:
        if not (type(sha256) is str and SHA256_PATTERN.match(sha256)):
            raise RuleBroken("'sha256' must be 64 lowercase hexadecimal digits")
        if not (type(size) is int and size >= 0):
            raise RuleBroken("'size' must be a whole number of bytes, 0 or more")
    checked = {"sha256": sha256, "size": size}
    if "file" in value:
        name = value["file"]
        if not (type(name) is str and FILE_NAME_PATTERN.match(name)):
            raise RuleBroken(f"'file' {FILE_NAME_RULE}")
        if sha256 is msgspec.UNSET:
            raise RuleBroken("'file' needs 'sha256' and 'size': they name its stored object")
        if "downloadUrl" in value:
            raise RuleBroken(
                "give 'downloadUrl' or 'file', not both: the server makes a kept file's address"
            )
        checked["file"] = name
    elif "downloadUrl" not in value:
        raise RuleBroken("missing key 'downloadUrl' (or 'file', for a file Buildshelf keeps)")
    return checked


def valid_downloads(value, primary: str) -> dict[str, Download]:
    """A build's `downloads`, its extra files by key in the file's order, every rule checked
    (`primary` is the name of the build's own file: each file of a build has its own name),
    or RuleBroken with the rule it breaks and the key it is under."""
    if type(value) is not dict or not value:
        raise RuleBroken(
            "'downloads' must be an object of the build's extra files by key, such as "
            '{"server:mojmap": {...}}: leave it out for a build without extra files'
        )
    names = {primary: "the primary file's"} if primary else {}
    downloads = {}
    for key, entry in value.items():
        where = f"downloads[{json.dumps(key)}]"
        if problem := download_key_problem(key):
            raise RuleBroken(f"{where}: the key {problem}")
        try:
            if type(entry) is not dict:
                raise RuleBroken(
                    "must be an object: 'file', 'sha256' and 'size' for a file Buildshelf "
                    "keeps, 'downloadUrl' for one elsewhere"
                )
            _check_keys(entry, _DOWNLOAD_KEYS, _NO_KEYS)
            fields = _integrity(entry)
            if "file" not in fields and not _is_url(entry["downloadUrl"]):
                raise RuleBroken(f"'downloadUrl' {URL_RULE}")
        except RuleBroken as problem:
            raise RuleBroken(f"{where}: {problem}") from None
        download = downloads[key] = Download(download_url=entry.get("downloadUrl", ""), **fields)
        name = download.file_name
        if name in names:
            raise RuleBroken(
                f"{where}: its file name {name!r} is also {names[name]}: each file of a build "
                "has a name of its own"
            )
        if name:  # a URL that gives no name (a path ending in '/') has none to share
            names[name] = f"{where}'s"
    return downloads


YANKED_AT_RULE = "'yankedAt' must be the time of the yank in epoch milliseconds"


def _yank_mark(value):
    """A build's yank mark (yankedAt, yankReason), as Build's keyword arguments, checked."""
    if "yankedAt" not in value:
        raise RuleBroken(
            "'yankReason' needs 'yankedAt': the time of the yank marks the build yanked"
        )
    at, reason = value["yankedAt"], value.get("yankReason", "")
    if not (type(at) is int and at in TIMESTAMPS):
        raise RuleBroken(YANKED_AT_RULE)
    if problem := yank_reason_problem(reason):
        raise RuleBroken(problem)
    return {"yanked_at": at, "yank_reason": reason}


def yank_reason_problem(reason, name: str = "yankReason") -> str | None:
    """What is wrong with a yank's reason, given as `name` (the data files' key, or a
    request's), or None: a string of valid Unicode, its lines and tabs its only controls."""
    if type(reason) is not str:
        return f"{name!r} must be a string"
    if found := YANK_REASON_CONTROL.search(reason):
        return (
            f"{name!r} holds a control character ({found[0].encode('unicode_escape').decode()} "
            f"at character {found.start() + 1}): a reason is text, tabs and line breaks its only "
            "control characters"
        )
    if SURROGATE.search(reason):
        return _unicode_problem(name, reason)
    return None


def project_problem(doc, slug):
    """What is wrong with the file's own fields (its builds aside), or None."""
    if not isinstance(doc, dict):
        return "the file must hold a JSON object"
    try:
        _check_keys(doc, _PROJECT_KEYS, _REQUIRED_PROJECT_KEYS)
    except RuleBroken as problem:
        return str(problem)
    if doc.get("slug", slug) != slug:
        return f"'slug' is {doc['slug']!r} but the file name says {slug!r}"
    if not (isinstance(doc["ciJob"], str) and doc["ciJob"]):
        return "'ciJob' must be a non-empty string"
    if SURROGATE.search(doc["ciJob"]):
        return _unicode_problem("ciJob", doc["ciJob"])
    if not _is_url(doc["ciJobUrl"]):
        return f"'ciJobUrl' {URL_RULE}"
    javadoc_base = doc.get("javadocBaseUrl", "")  # none: the project has no javadoc
    if javadoc_base != "" and not _is_url(javadoc_base):
        return f"'javadocBaseUrl' {URL_RULE}, or \"\" for a project without javadoc"
    if "?" in javadoc_base or "#" in javadoc_base:
        return (
            "'javadocBaseUrl' must have no query or fragment: the channel's page is added "
            "to its path"
        )
    page_prefix = doc.get("javadocPagePrefix", "")
    if not isinstance(page_prefix, str):
        return "'javadocPagePrefix' must be a string, e.g. \".cache/unpack\""
    problem = javadoc.path_problem(page_prefix) if page_prefix else None
    if problem is not None or len(page_prefix) > javadoc.MAX_PAGE_LENGTH:
        return (
            f"'javadocPagePrefix' {problem or 'is too long'}: give a relative path such as "
            '".cache/unpack"'
        )
    if not isinstance(doc["builds"], list):
        return "'builds' must be an array"
    return _versions_problem(doc["versions"]) if "versions" in doc else None


def _quoted_choices(choices):
    quoted = [f'"{choice}"' for choice in choices]
    return ", ".join(quoted[:-1]) + " or " + quoted[-1]


# Each key of a `versions` entry: whether a value follows its rule, and the rule's words.
_VERSION_RULES = {
    "family": (
        lambda value: type(value) is str and CHANNEL_PATTERN.match(value) is not None,
        f"must be a non-empty string of {CHANNEL_TEXT_RULE}",
    ),
    "support": (
        lambda value: type(value) is str and value in SUPPORT_STATUSES,
        f"must be {_quoted_choices(SUPPORT_STATUSES)}",
    ),
    "supportEnd": (
        lambda value: type(value) is str and DAY_PATTERN.match(value) and _is_day(value),
        'must be a day written YYYY-MM-DD, e.g. "2026-02-28"',
    ),
    # 32 bits: run-task reads it as a Kotlin Int.
    "java": (
        lambda value: type(value) is int and 1 <= value < 2**31,
        "must be the whole number of the oldest Java release it runs on, e.g. 21",
    ),
    "javaFlags": (
        # a tuple on the fast path, which checks the VersionInfo it decoded (to_builtins)
        lambda value: (
            type(value) in (list, tuple)
            and all(type(flag) is str and flag and flag.isprintable() for flag in value)
        ),
        'must be an array of JVM flags, e.g. ["-XX:+UseG1GC"]',
    ),
    "experimentalChannel": (
        lambda value: type(value) is str and value in EXPERIMENTAL_CHANNELS,
        f"must be {_quoted_choices(EXPERIMENTAL_CHANNELS)}",
    ),
}
assert set(_VERSION_RULES) == _VERSION_KEYS  # a key of VersionInfo without a rule


def _is_day(text):
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _versions_problem(versions):
    """What is wrong with a project's `versions` block, or None."""
    if type(versions) is not dict:
        return "'versions' must be an object: {channelVersion: {family, support, ...}}"
    for version, entry in versions.items():
        if not CHANNEL_PATTERN.match(version):
            return f"versions: key {version!r} must be a channelVersion: {CHANNEL_TEXT_RULE}"
        where = f"versions[{version!r}]"
        if type(entry) is not dict:
            return f"{where} must be an object"
        try:
            _check_keys(entry, _VERSION_KEYS, set())
        except RuleBroken as problem:
            return f"{where}: {problem}"
        for key, value in entry.items():
            holds, rule = _VERSION_RULES[key]
            if not holds(value):
                return f"{where}: {key!r} {rule}"
    return None


def version_infos(versions) -> dict[str, VersionInfo]:
    """A `versions` block that _versions_problem passed, as the Project holds it."""
    return msgspec.convert(versions, dict[str, VersionInfo])


def timestamp_problem(timestamp: int) -> str | None:
    """Why `timestamp` is not in TIMESTAMPS, to follow the value in a message; or None."""
    if timestamp in TIMESTAMPS:
        return None
    if timestamp < 0:  # no CI ran a build before 1970
        return "is before 1970: give epoch milliseconds (date +%s%3N)"
    # The easy slip beside date +%s%3N: +%s%6N or +%s%N, a date in micro- or nanoseconds.
    smaller = timestamp <= LAST_MILLISECOND * 1_000_000
    return "is after year 9999: give epoch milliseconds (date +%s%3N)" + (
        "; this looks like microseconds or nanoseconds" if smaller else ""
    )


def published_timestamp_problem(millis: int) -> str | None:
    """Why `millis` may not be the timestamp of a build published (`publish --timestamp`, an
    HTTP publish), to follow the value in a message; or None. A data file may hold seconds
    (epoch_seconds): what is published is in milliseconds."""
    if abs(millis) < SECONDS_BELOW:
        return (
            f"looks like seconds, not milliseconds: give {millis}000 (in a shell, date +%s%3N "
            "is now in milliseconds)"
        )
    return timestamp_problem(millis)
