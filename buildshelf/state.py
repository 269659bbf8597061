"""The state directory: what Buildshelf keeps that is not hand-edited data (token hashes,
trusted publishers, and later download counts and webhook deliveries), private to the
service's user. Each concern keeps its own SQLite database there, opened through `connect`.
"""

import os
import sqlite3
import stat
import threading
from contextlib import closing, contextmanager

IN_DATA_DIRECTORY = ".buildshelf"  # the default place: the data directory is one backup
DIRECTORY_MODE = 0o700
FILE_MODE = 0o600
BUSY_SECONDS = 5  # how long a write waits for another process's write to finish


def default_state(data: str) -> str:
    """The state directory inside the data directory `data`."""
    return os.path.join(data, IN_DATA_DIRECTORY)


def ensure(path: str) -> str:
    """`path`, created mode 0700 if missing (its parents as needed), and made 0700 if it was
    laxer: what it holds is for the service's user alone."""
    os.makedirs(path, mode=DIRECTORY_MODE, exist_ok=True)
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(f"{path} is not a directory")
    if stat.S_IMODE(st.st_mode) != DIRECTORY_MODE:
        os.chmod(path, DIRECTORY_MODE)
    return path


def connect(state_dir: str, name: str) -> sqlite3.Connection:
    """The SQLite database `name`.sqlite3 in `state_dir` (created 0600, in WAL mode, whose
    side files SQLite gives the same mode), in autocommit mode: a caller's `with connection:`
    is one transaction. The caller closes it."""
    path = os.path.join(ensure(state_dir), name + ".sqlite3")
    # Created here with its mode, before SQLite would create it with the umask's.
    os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE))
    connection = sqlite3.connect(path, timeout=BUSY_SECONDS, check_same_thread=False)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
    except BaseException:
        connection.close()
        raise
    return connection


class Databases:
    """The databases of the state directory `state_dir` as a long-lived process (the server)
    keeps them: each opened at its first use, its schema made then, and kept open, so that no
    request pays for opening a file. One thread at a time uses each (a lock of its own): a
    database that is locked or slow holds up only the calls waiting on it."""

    def __init__(self, state_dir: str):
        self.state_dir = state_dir
        self._opened = {}  # name -> connection
        self._locks = {}  # name -> the lock of its connection
        self._lock = threading.Lock()  # guards the two dicts

    @contextmanager
    def opened(self, name: str, schema: str):
        with self._lock:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            connection = self._opened.get(name)
            if connection is None:  # not yet, or its opening failed: tried again
                connection = connect(self.state_dir, name)
                try:
                    connection.executescript(schema)
                except BaseException:
                    connection.close()
                    raise
                self._opened[name] = connection
            yield connection


# Where a database is: a state directory's path (a command's, opened for one call), or the
# Databases a server keeps open.
Where = str | Databases


@contextmanager
def opened(where: Where, name: str, schema: str):
    """A connection to the database `name` (made by `schema` if need be) of `where`: the path
    of a state directory, for a command that runs once (opened for the block, closed after),
    or the Databases a server keeps open."""
    if isinstance(where, Databases):
        with where.opened(name, schema) as connection:
            yield connection
        return
    with closing(connect(where, name)) as connection:
        connection.executescript(schema)
        yield connection
