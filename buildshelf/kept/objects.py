"""What every artifact store is: the interface the local directory (artifacts.py) and S3
(s3.py) both give (`ArtifactStore`), and the values and refusals that cross it (`Stored`,
`Staged`, `Removed`; `Refused` and its kinds, and the refusals every store words alike:
`too_large`, `check_expected`). An object is named by its sha256, so that the
same bytes are stored once and an object, once written, never changes.
"""

import errno
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

CHUNK_BYTES = 1 << 20
MAX_BYTES_DEFAULT = 1 << 30
MISSING = "is missing"  # what verify and rehash say of an object that is not there
FULL = (errno.ENOSPC, errno.EDQUOT)

Progress = Callable[[int, int | None], None]  # told the bytes done, of a size if known


class Refused(Exception):
    """A file not stored: the one-line message says what is wrong and what to do."""


class TooLarge(Refused):
    """A file over the limit it was given."""


class NoSpace(Refused):
    """The store's file system is full (ENOSPC), or its user's quota (EDQUOT) is."""


class Unavailable(Refused):
    """The store cannot be reached, or refuses this process's credentials: nothing was
    stored, and a try later may succeed. `reason` is the message without what was done."""

    def __init__(self, message: str, reason: str = ""):
        super().__init__(message)
        self.reason = reason or message


def too_large(source: str, max_bytes: int) -> TooLarge:
    """The refusal of `source`, a file over `max_bytes`."""
    return TooLarge(
        f"{source} is larger than {max_bytes / (1 << 20):g} MiB: give --max-file-mb "
        "to raise the limit (nothing was stored)"
    )


def check_expected(sha256: str, expected: str | None) -> None:
    """Refused unless a file that hashes to `sha256` is the one --sha256 `expected` (None:
    no --sha256) names."""
    if expected is not None and sha256 != expected:
        raise Refused(f"sha256 mismatch: the file hashes to {sha256}, --sha256 says {expected}")


@dataclass(frozen=True)
class Stored:
    """An object in the store; `created` is False when identical bytes were already there.
    `repaired` says what was wrong with an object of that sha256 that this one replaced (of
    another size, or holding other bytes), as verify says it. `path` names the object in
    messages (a file's path, an s3:// URL)."""

    sha256: str
    size: int
    path: str
    created: bool
    repaired: str | None = None


@dataclass(frozen=True)
class Staged:
    """A whole file received by a store's staging, hashed and fsynced: `place` makes it an
    object. `path` is the temporary file's (None for an anonymous one, `file`)."""

    path: str | None
    sha256: str
    size: int
    file: object = None  # an open binary file, for a store that stages anonymously


@dataclass(frozen=True)
class Removed:
    """An object deleted from the store (or that a dry run would delete)."""

    path: str
    size: int


class Staging(Protocol):
    """A file being received into a store chunk by chunk, hashed on the way and held to its
    limit (TooLarge): `finish()` gives the Staged file for the store's `place`, `discard()`
    removes what is left of it, at any point, any number of times."""

    def write(self, chunk: bytes) -> None: ...
    def finish(self) -> Staged: ...
    def discard(self) -> None: ...


class ArtifactStore(Protocol):
    """A content-addressed store of files. Every method that stores is Refused (nothing left
    behind) when the bytes or the store are not as they should be; `verify` and `rehash` say
    what is wrong with an object as a sentence without its subject (MISSING), or None."""

    where: str  # the store as its setting names it (a directory, s3://BUCKET/PREFIX)

    def name(self, sha256: str) -> str:
        """The object of this sha256 as messages name it."""

    def store_file(
        self, source: str, max_bytes: int, expected_sha256: str | None, progress: Progress | None
    ) -> Stored: ...

    def store_stream(
        self,
        read: Callable[[], bytes],
        source: str,
        max_bytes: int,
        size: int | None,
        progress: Progress | None,
        expected_sha256: str | None,
    ) -> Stored: ...

    def staging(self, source: str, max_bytes: int) -> Staging: ...
    def place(self, staged: Staged, source: str) -> Stored: ...
    def verify(self, sha256: str, size: int) -> str | None: ...
    def rehash(self, sha256: str) -> str | None: ...

    def problems(
        self, kept: Iterable[tuple[str, object, object]], hash_again: bool = False
    ) -> Iterator[tuple[str, object, object, str]]:
        """(name, build, file, problem) for each (name, build, file) of `kept` whose file's
        object (by its `sha256` and `size`: a build's primary or an extra, Build.kept_files)
        is missing, of another size or, with `hash_again`, holds other bytes; one object
        looked at once."""

    def objects(self) -> dict[str, int]:
        """Every object: sha256 -> size."""

    def remove(self, sha256s: Iterable[str], dry_run: bool = False) -> list[Removed]: ...

    def remove_stale(self, dry_run: bool = False) -> list[str]:
        """Remove what writers that are gone (killed mid-write) left in the store, and say
        each, as "the temporary file PATH" or "the incomplete upload s3://..." (with
        `dry_run`, what it would remove); never Refused (what is left costs only space)."""

    def exists(self) -> bool:
        """Whether the store is there to list (a directory made by the first file kept)."""
