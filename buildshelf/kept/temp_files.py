"""The artifact store's temporary files: a writer copies each object to a hidden file in the
store (`.incoming-<random>.tmp`, made by artifacts.Staging) and holds it locked until it is
placed or discarded, the mark of a live writer that the kernel drops when its process dies.
Those of writers that are gone (killed before their rename) are removed: those no process
holds locked, or, where files cannot be locked, those an hour old. (An S3 store keeps no temp
files, but the incomplete multipart uploads of its writers gone, which s3.py aborts after
the same hour, STALE_TEMP_SECONDS, without a part written.)
"""

import fcntl
import os
import time
from contextlib import suppress

TEMP_PREFIX = ".incoming-"
TEMP_SUFFIX = ".tmp"
# A temporary file this old belongs to a writer that was killed: a live one writes it
# at least once a chunk, and younger ones may belong to a writer still copying.
STALE_TEMP_SECONDS = 3600  # a temp file this old goes where files cannot be locked
LOCKING_SECONDS = 2  # a temp file younger may be its writer's before it has its lock


def remove_stale_temp_files(store: str, dry_run: bool = False) -> list[str]:
    """Remove the temporary files of writers that are gone (killed before their rename): those
    that no process holds locked (see artifacts.Staging); where files cannot be locked, those
    an hour old. Their paths, removed (with `dry_run`, that would be)."""
    now, removed = time.time(), []
    try:
        entries = list(os.scandir(store))
    except OSError:  # no store yet: nothing to remove
        return removed
    for entry in entries:
        if entry.name.startswith(TEMP_PREFIX) and entry.name.endswith(TEMP_SUFFIX):
            # A read-only store, or another writer removing it first, is no reason to refuse.
            with suppress(OSError):
                age = now - entry.stat(follow_symlinks=False).st_mtime
                if age >= LOCKING_SECONDS and _unheld(entry.path, age):
                    if not dry_run:
                        os.unlink(entry.path)
                    removed.append(entry.path)
    return removed


def _unheld(path, age):
    """Whether no live writer holds the temp file at `path` (`age` seconds old): its lock is
    free; or, on a filesystem without locks, it is STALE_TEMP_SECONDS old."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # a live writer's
        return False
    except OSError:  # no locks here: the age must tell
        return age >= STALE_TEMP_SECONDS
    finally:
        os.close(fd)
    return True
