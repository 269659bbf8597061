"""The state directory: what Buildshelf keeps that is not hand-edited data (token hashes,
trusted publishers, download counts and webhook deliveries), private to the service's user.
Each concern keeps its own SQLite database there, declared as a `Schema` (its name, pragmas
and numbered migrations) and opened through `open_database`: in WAL mode, its pragmas set,
migrated to this release's version (`PRAGMA user_version`). A command opens one for a call
(`opened` with a path); a server keeps each open (`Databases`).
"""

import errno
import os
import sqlite3
import stat
import threading
from contextlib import closing, contextmanager
from dataclasses import dataclass

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


def database_path(state_dir: str, name: str) -> str:
    """Where the database `name` of `state_dir` is, made or not."""
    return os.path.join(state_dir, name + ".sqlite3")


def connect(state_dir: str, name: str) -> sqlite3.Connection:
    """The SQLite database `name`.sqlite3 in `state_dir` (created 0600, in WAL mode, whose
    side files SQLite gives the same mode), in autocommit mode: a caller's `with connection:`
    is one transaction. The caller closes it."""
    path = database_path(ensure(state_dir), name)
    # Created here with its mode, before SQLite would create it with the umask's. Only if it
    # is not there: closing a descriptor of a database this process has open elsewhere (a
    # server's second connection) drops every POSIX lock the process holds on it, and another
    # process's close would then delete the WAL under the open connection.
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE))
    except FileExistsError:
        # Said as the file system says it (SQLite would say "unable to open database file").
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), path) from None
    connection = sqlite3.connect(path, timeout=BUSY_SECONDS, check_same_thread=False)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
    except BaseException:
        connection.close()
        raise
    return connection


@dataclass(frozen=True)
class Schema:
    """A database of the state directory: its `name` (the file is NAME.sqlite3), the
    `pragmas` set on each connection, and its `migrations`, in order: the SQL that takes it
    from version N (PRAGMA user_version) to N + 1 is migrations[N], so a database is at the
    version of the number it has had. The first makes the tables with IF NOT EXISTS, so
    that a database made before versions were kept (at 0, its tables there) takes it as it
    is. A release adds a migration; it never changes one that has shipped."""

    name: str
    migrations: tuple[str, ...]
    pragmas: tuple[str, ...] = ()

    @property
    def version(self) -> int:
        return len(self.migrations)


class Unusable(sqlite3.DatabaseError):
    """A database that could not be opened and migrated, said in one line that names it: a
    command prints it as it is."""


class NewerDatabase(Unusable):
    """A database at a version this release does not know: a later release wrote it."""


def open_database(state_dir: str, schema: Schema) -> sqlite3.Connection:
    """The database `schema` of `state_dir`, opened (connect), its pragmas set and migrated
    to `schema.version`; the caller closes it. Unusable when it cannot be."""
    named = f"the {schema.name} database {database_path(state_dir, schema.name)}"
    try:
        connection = connect(state_dir, schema.name)
    except sqlite3.Error as error:
        raise _unusable(named, error) from error
    try:
        for pragma in schema.pragmas:
            connection.execute(f"PRAGMA {pragma}")
        migrate(connection, schema, named)
    except BaseException:
        connection.close()
        raise
    return connection


def _unusable(named, error):
    if isinstance(error, sqlite3.OperationalError):  # locked, unreadable: may pass
        return Unusable(f"{named} cannot be opened: {error}")
    return Unusable(  # "file is not a database", "database disk image is malformed"
        f"{named} is damaged ({error}): restore it from a backup (docs/running.md, "
        '"Backing up and restoring")'
    )


def migrate(connection: sqlite3.Connection, schema: Schema, named: str) -> None:
    """Apply the migrations `connection`'s database has not had, in one transaction (another
    process that migrates it meanwhile waits, then finds nothing left to do). `named` says
    which database it is in a refusal."""
    if _version(connection) == schema.version:
        return
    with connection:
        connection.execute("BEGIN IMMEDIATE")
        version = _version(connection)
        if version > schema.version:
            raise NewerDatabase(
                f"{named} is at version {version}, and this release knows "
                f"{schema.version} at most: a later release wrote it (run that one, or restore "
                "a backup made by this one)"
            )
        for migration in schema.migrations[version:]:
            for statement in _statements(migration):
                connection.execute(statement)
        connection.execute(f"PRAGMA user_version = {schema.version}")


def _version(connection):
    return connection.execute("PRAGMA user_version").fetchone()[0]


def _statements(sql):
    """The statements of `sql`, one at a time: executescript() would commit the migration's
    transaction."""
    statement = ""
    for line in sql.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            yield statement
            statement = ""
    if statement.strip():
        yield statement


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
    def opened(self, schema: Schema):
        with self._lock:
            lock = self._locks.setdefault(schema.name, threading.Lock())
        with lock:
            connection = self._opened.get(schema.name)
            if connection is None:  # not yet, or its opening failed: tried again
                connection = open_database(self.state_dir, schema)
                self._opened[schema.name] = connection
            yield connection


# Where a database is: a state directory's path (a command's, opened for one call), or the
# Databases a server keeps open.
Where = str | Databases


@contextmanager
def opened(where: Where, schema: Schema):
    """A connection to the database `schema` of `where`: the path of a state directory, for
    a command that runs once (opened for the block, closed after), or the Databases a server
    keeps open."""
    if isinstance(where, Databases):
        with where.opened(schema) as connection:
            yield connection
        return
    with closing(open_database(where, schema)) as connection:
        yield connection
