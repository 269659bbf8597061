"""The artifact store a setting names (`--artifacts`), opened once per process (`opened`): a
directory (artifacts.LocalStore), or `s3://BUCKET[/PREFIX]` (s3.S3Store, whose client costs
tens of milliseconds to make and is shared by every thread); the values of `--artifacts` and
`--artifacts-downloads` checked, alone and together.
"""

import argparse
import importlib.util
import os
import threading

from buildshelf.kept import artifacts, s3
from buildshelf.kept.objects import ArtifactStore

# How a kept file's download reaches clients from an s3:// store (docs/storage.md).
REDIRECT, PUBLIC, PROXY = "redirect", "public", "proxy"
DOWNLOADS = (REDIRECT, PUBLIC, PROXY)
DEFAULT_DOWNLOADS = REDIRECT

_opened: dict = {}
_opening = threading.Lock()


def opened(where: "str | ArtifactStore") -> ArtifactStore:
    """The store at `where` (a directory, or an s3:// URL), or `where` if it is a store. An
    s3:// store is made once for its URL and the AWS_* variables in force; Refused, saying
    how to install it, without boto3."""
    if not isinstance(where, str):
        return where
    if not s3.is_location(where):
        return artifacts.LocalStore(where)
    # A test, or a command run again in one process, may point the same URL elsewhere.
    key = where, tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_")))
    with _opening:
        if key not in _opened:
            _opened[key] = s3.S3Store(where)
        return _opened[key]


def location(value: str) -> str:
    """--artifacts's value: a directory's path (made when the first file is kept), or
    s3://BUCKET[/PREFIX], checked."""
    if s3.is_location(value):
        try:
            s3.location(value)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    return value


def downloads_mode(value: str) -> str:
    """--artifacts-downloads's value, one of DOWNLOADS."""
    if value not in DOWNLOADS:
        raise argparse.ArgumentTypeError(f"{value!r} is not one of {', '.join(DOWNLOADS)}")
    return value


def missing_client(where: str) -> str | None:
    """What `where` needs that is not installed (boto3 for s3://), as one line; else None."""
    if s3.is_location(where) and importlib.util.find_spec("boto3") is None:
        return f"--artifacts {where} needs boto3, which is not installed: {s3.INSTALL}"
    return None


def downloads_problem(where: str, mode: str | None, public_url: str | None) -> str | None:
    """What is wrong with --artifacts-downloads `mode` and --artifacts-public-url for the
    store at `where`, as one line; else None."""
    if not s3.is_location(where):
        if mode is not None or public_url is not None:
            return (
                "--artifacts-downloads and --artifacts-public-url go with an s3:// store: a "
                "directory's files are sent by Buildshelf (or nginx, --accel-redirect)"
            )
        return None
    if (mode == PUBLIC) != (public_url is not None):
        return "--artifacts-downloads public and --artifacts-public-url go together"
    return None
