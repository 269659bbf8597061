"""The state directory's databases: each declared as a state.Schema and migrated to this
release's version when opened; a database written before versions were kept (the fixture
tests/state_before_versions/, written by the code of 2026-11-28: a token, a trusted publisher
and a spent jti, two downloads counted, a webhook delivery owed) opens with everything in it;
one written by a later release is refused with a message that says so."""

import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

from buildshelf import counts, state
from buildshelf.publishing import expiry, tokens, trust
from buildshelf.webhooks import outbox
from helpers import ROOT
from test_tokens import run

BEFORE_VERSIONS = f"{ROOT}/tests/state_before_versions"
# The fixture's token, for alpha, made with no expiry.
TOKEN = "bs_131909971d18_gwHma1XWjMMVDp4ib3pffErhai2dA9NxfSHGrxxlHZY"
SCHEMAS = (tokens.SCHEMA, trust.SCHEMA, counts.SCHEMA, outbox.SCHEMA)


@pytest.fixture
def before_versions(tmp_path):
    """A copy of the fixture: opening a database may write beside it (WAL)."""
    copy = tmp_path / "state"
    shutil.copytree(BEFORE_VERSIONS, copy)
    return str(copy)


def version(state_dir, schema):
    with sqlite3.connect(f"{state_dir}/{schema.name}.sqlite3") as connection:
        return connection.execute("PRAGMA user_version").fetchone()[0]


def test_every_database_is_declared_with_its_version(before_versions):
    assert sorted(schema.name for schema in SCHEMAS) == ["downloads", "tokens", "trust", "webhooks"]
    assert all(schema.version >= 1 for schema in SCHEMAS)
    assert [version(before_versions, schema) for schema in SCHEMAS] == [0, 0, 0, 0]


def test_a_state_from_before_versions_opens_migrated_with_all_it_held(before_versions):
    assert tokens.authenticate(before_versions, TOKEN, record=False).project == "alpha"
    [trusted] = trust.listed(before_versions, "alpha")
    assert (trusted.repository, trusted.workflow) == ("octo-org/octo-repo", "release.yml")
    assert trusted.ref is None  # trusted at any ref, as before --ref was there
    assert not trust.spend(before_versions, "jti-of-a-token-spent", 4_000_000_000, now=0)
    counter = counts.Counter(before_versions)
    counter.flush()
    assert counter.tally().total("alpha") == 2
    box = outbox.Outbox(before_versions)
    try:
        [owed] = box.pending(outbox.target_key("https://example.org/hook", "json"))
        assert (owed.type, owed.project, owed.number) == ("build.published", "alpha", 9)
    finally:
        box.close()
    assert [version(before_versions, schema) for schema in SCHEMAS] == [
        schema.version for schema in SCHEMAS
    ]


def test_the_migrations_run_once_and_in_order(tmp_path):
    schema = state.Schema(
        "things",
        migrations=(
            "CREATE TABLE IF NOT EXISTS things (name TEXT);\nINSERT INTO things VALUES ('one');",
            "INSERT INTO things VALUES ('two')",
        ),
    )
    for _ in range(3):
        with state.opened(str(tmp_path), schema) as connection:
            rows = connection.execute("SELECT name FROM things ORDER BY rowid").fetchall()
    assert rows == [("one",), ("two",)]
    assert version(str(tmp_path), schema) == 2


def test_a_migration_that_fails_leaves_the_database_as_it_was(tmp_path):
    first = state.Schema("things", migrations=("CREATE TABLE things (name TEXT)",))
    with state.opened(str(tmp_path), first):
        pass
    broken = state.Schema(
        "things",
        migrations=(first.migrations[0], "ALTER TABLE things ADD x INTEGER;\nNOT SQL"),
    )
    with pytest.raises(sqlite3.OperationalError):
        state.open_database(str(tmp_path), broken)
    assert version(str(tmp_path), first) == 1
    with sqlite3.connect(f"{tmp_path}/things.sqlite3") as connection:
        assert [row[1] for row in connection.execute("PRAGMA table_info(things)")] == ["name"]


def test_a_database_of_a_later_release_is_refused_saying_so(before_versions):
    with sqlite3.connect(f"{before_versions}/tokens.sqlite3") as connection:
        connection.execute(f"PRAGMA user_version = {tokens.SCHEMA.version + 1}")
    with pytest.raises(state.NewerDatabase, match="a later release wrote it"):
        tokens.list_tokens(before_versions)


def test_a_server_keeps_each_database_open_and_migrates_it_once(before_versions, monkeypatch):
    databases = state.Databases(before_versions)
    opened = []
    connect = state.connect
    monkeypatch.setattr(state, "connect", lambda *args: opened.append(args) or connect(*args))
    for _ in range(3):
        assert tokens.authenticate(databases, TOKEN, record=False) is not None
        assert trust.listed(before_versions, "alpha")
    assert [name for _, name in opened] == ["tokens", "trust", "trust", "trust"]


@pytest.mark.system
def test_a_server_reading_the_tokens_again_sees_what_commands_change(tmp_path):
    """A server keeps the tokens' database open (Databases) and reads it again every minute
    on a connection of its own (TokenWatch). Opening that one must not drop the locks the
    first holds (POSIX locks go with any close of the file in the process): a command's close
    would then find itself the last user, delete the WAL under the server, and leave it on a
    copy of its own: a token revoked still taken, a token made refused (issue 38)."""
    data, state_dir = tmp_path / "data", str(tmp_path / "state")
    data.mkdir()
    old, old_text = tokens.create(state_dir, "alpha", 30, "before the start")
    databases, now = state.Databases(state_dir), tokens.now_ms()
    assert isinstance(tokens.verdict(databases, old_text, now), tokens.Token)
    expiry.TokenWatch(state_dir).refresh()

    def command(*argv):
        return subprocess.run(
            [sys.executable, "-m", "buildshelf", *argv, "--data", data, "--state", state_dir],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    command("token", "create", "*")
    assert os.path.exists(state.database_path(state_dir, "tokens") + "-wal")
    tokens.verdict(databases, old_text, now + 2 * tokens.LAST_USED_EVERY_MS)  # a write
    made = command("token", "create", "*")
    command("token", "revoke", old.id)
    assert isinstance(tokens.verdict(databases, made), tokens.Token)
    assert tokens.verdict(databases, old_text).reason == "revoked"


@pytest.mark.parametrize("damage", ["not a database", "a later release's"])
@pytest.mark.parametrize(
    "command", [["token", "list"], ["token", "create", "alpha"], ["trust", "alpha", "--list"]]
)
def test_a_command_over_a_database_it_cannot_use_says_so_in_one_line(
    before_versions, data_dir, command, damage
):
    """No traceback: the database named, and what to do."""
    schema = trust.SCHEMA if command[0] == "trust" else tokens.SCHEMA
    path = f"{before_versions}/{schema.name}.sqlite3"
    if damage == "not a database":
        with open(path, "wb") as damaged:
            damaged.write(b"garbage " * 512)
    else:
        with sqlite3.connect(path) as connection:
            connection.execute(f"PRAGMA user_version = {schema.version + 1}")
    status, out, err = run([*command, "--data", str(data_dir), "--state", before_versions])
    assert status == 1
    assert out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"buildshelf {command[0]}")
    assert f": the {schema.name} database {path} " in err
    assert ("restore" in err) and ("backup" in err)
