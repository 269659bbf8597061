"""The build a publish gives: its JSON (the data files' keys, less those the route makes)
and the file received, checked by the data files' rules into the build's document and the
writer's Keep; 400 invalid_build for the first problem. A kept file's sha256 and size, when
the client gives them, are held against the bytes received.
"""

import time

from buildshelf.datafiles import datafile
from buildshelf.kept import keeping
from buildshelf.model import published_timestamp_problem, sha256_hex
from buildshelf.web.upload import invalid
from buildshelf.writing import writer

# What a build's JSON may hold: the data files' keys, less those the route makes.
BUILD_KEYS = (
    "channelVersion",
    "url",
    "timestamp",
    "isExperimental",
    "commits",
    "downloadUrl",
    "sha256",
    "size",
    "buildNumber",  # the path's number, if given
)


def build_of(given, file, number, ci_job_url):
    """(the build's document, keeping.Keep or None) of a publish's JSON `given` and `file`,
    checked by the data files' rules; 400 invalid_build for the first problem."""
    if type(given) is not dict:
        raise invalid('the build must be a JSON object, such as {"channelVersion": "1.21"}')
    unknown = [key for key in given if key not in BUILD_KEYS]
    if unknown:
        raise invalid(
            f"unknown key {unknown[0]!r}: a build takes {', '.join(BUILD_KEYS[:-1])}"
            + (" (the file's name is the part 'file''s filename)" if unknown[0] == "file" else "")
        )
    if given.get("buildNumber", number) != number:
        raise invalid(f"'buildNumber' is {given['buildNumber']!r}, but the path says {number}")
    if "channelVersion" not in given:
        raise invalid("missing key 'channelVersion'")
    timestamp = given.get("timestamp", time.time_ns() // 1_000_000)
    if type(timestamp) is int and (problem := published_timestamp_problem(timestamp)):
        raise invalid(f"'timestamp' {timestamp} {problem}")
    keep, integrity = None, {key: given[key] for key in ("sha256", "size") if key in given}
    if file is not None:
        if "downloadUrl" in given:
            raise invalid(
                "give 'downloadUrl' or a part 'file', not both: the server makes a kept "
                "file's address"
            )
        _check_received(given, file.staged)
        integrity = dict(sha256=file.staged.sha256, size=file.staged.size, file=file.name)
        keep = keeping.Keep(file.staged.path, staged=file.staged, name=file.name)
    elif "downloadUrl" not in given:
        raise invalid("missing key 'downloadUrl' (or a part 'file', for a file Buildshelf keeps)")
    build = datafile.build_document(
        number,
        given["channelVersion"],
        timestamp,
        given.get("isExperimental", False),
        given.get("commits", []),
        url=given.get("url"),  # None: the job run's, made under the lock
        download_url=given.get("downloadUrl"),
        **integrity,
    )
    try:
        url = build["url"] or writer.job_run_url(ci_job_url, number)
    except writer.NoRunUrl as problem:
        raise invalid(f"{problem}: give it as 'url'") from None
    try:
        datafile.checked_build(dict(build, url=url))
    except datafile.InvalidBuild as problem:
        raise invalid(str(problem)) from None
    return build, keep


def _check_received(given, staged):
    """The sha256 and size the client gave of a kept file against the bytes received."""
    if "sha256" in given:
        claimed = given["sha256"]
        digest = sha256_hex(claimed) if type(claimed) is str else None
        if digest is None:
            raise invalid("'sha256' must be 64 hexadecimal digits")
        if digest != staged.sha256:
            raise invalid(
                f"sha256 mismatch: the file received hashes to {staged.sha256}, 'sha256' says "
                f"{digest} (nothing written)"
            )
    if "size" in given:
        size = given["size"]
        if not (type(size) is int and size >= 0):
            raise invalid("'size' must be a whole number of bytes, 0 or more")
        if size != staged.size:
            raise invalid(
                f"'size' is {size}, but the file received is {staged.size} bytes (nothing written)"
            )
