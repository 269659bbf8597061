"""The build a publish gives: its JSON (the data files' keys, less those the route makes)
and the files received (the part `file`, the parts `download:KEY`), checked by the data
files' rules into the build's document and the writer's Keeps; 400 invalid_build for the
first problem. A kept file's sha256 and size, when the client gives them (an extra's, under
its key in `downloads`), are held against the bytes received.
"""

import json
import time

from buildshelf.datafiles import datafile
from buildshelf.datafiles.dataformat import published_timestamp_problem
from buildshelf.kept import keeping
from buildshelf.model import sha256_hex
from buildshelf.web.upload import EXTRA_PART, invalid
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
    "downloads",  # the extra files elsewhere; of those received, their sha256 and size
    "buildNumber",  # the path's number, if given
)
CLAIMS = {"sha256", "size"}  # what the JSON may say of a file received


def build_of(given, file, number, ci_job_url, extras=None):
    """(the build's document, keeping.Keep or None, the Keeps of the extra files) of a
    publish's JSON `given`, its `file` and its `extras` received (by key), checked by the
    data files' rules; 400 invalid_build for the first problem."""
    extras = extras or {}
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
        keep = keeping.Keep(file.staged.path, staged=file.staged, name=file.name)
        integrity = keep.fields(file.staged)
    elif "downloadUrl" not in given:
        raise invalid("missing key 'downloadUrl' (or a part 'file', for a file Buildshelf keeps)")
    elsewhere, kept = _extra_files(given.get("downloads", {}), extras)
    if "downloads" in given and (elsewhere or not kept):  # the rules say what {} is
        integrity["downloads"] = elsewhere
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
        raise invalid(f"{problem} as 'url'") from None  # as `publish` adds "with --url"
    if problem := keeping.extra_files_problem(build, keep, kept):  # as `publish` says it
        raise invalid(problem)
    whole = dict(build, url=url)  # every file as the data file will hold it
    if kept:
        received = {key: extra.fields(extra.staged) for key, extra in kept.items()}
        whole["downloads"] = build.get("downloads", {}) | received
    try:
        datafile.checked_build(whole)
    except datafile.InvalidBuild as problem:
        raise invalid(str(problem)) from None
    return build, keep, kept


def _extra_files(downloads, extras):
    """(the extra files elsewhere, as the JSON gives them; the Keeps of those received, by
    key) of the JSON's `downloads` and the files received as parts `download:KEY`, whose
    sha256 and size, if `downloads` gives them under their key, must be the bytes'."""
    if type(downloads) is not dict:
        return downloads, {}
    for key, file in downloads.items():
        if key not in extras and type(file) is dict and "file" in file:
            raise invalid(
                f"downloads[{json.dumps(key)}]: a file Buildshelf keeps is sent as the part "
                f"'{EXTRA_PART}{key}', its filename the file's name, not named by 'file'"
            )
    kept = {}
    for key, file in extras.items():
        claims = downloads.get(key, {})
        if type(claims) is not dict or not claims.keys() <= CLAIMS:
            raise invalid(
                f"downloads[{json.dumps(key)}] is the part '{EXTRA_PART}{key}': give it only "
                "'sha256' and 'size', which the bytes received must match"
            )
        _check_received(claims, file.staged, f"downloads[{json.dumps(key)}]: ")
        kept[key] = keeping.Keep(file.staged.path, staged=file.staged, name=file.name)
    return {key: file for key, file in downloads.items() if key not in extras}, kept


def _check_received(given, staged, where=""):
    """The sha256 and size the client gave of a kept file (`where` says which, if an extra)
    against the bytes received."""
    if "sha256" in given:
        claimed = given["sha256"]
        digest = sha256_hex(claimed) if type(claimed) is str else None
        if digest is None:
            raise invalid(f"{where}'sha256' must be 64 hexadecimal digits")
        if digest != staged.sha256:
            raise invalid(
                f"{where}sha256 mismatch: the file received hashes to {staged.sha256}, "
                f"'sha256' says {digest} (nothing written)"
            )
    if "size" in given:
        size = given["size"]
        if not (type(size) is int and size >= 0):
            raise invalid(f"{where}'size' must be a whole number of bytes, 0 or more")
        if size != staged.size:
            raise invalid(
                f"{where}'size' is {size}, but the file received is {staged.size} bytes "
                "(nothing written)"
            )
