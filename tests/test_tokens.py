"""Scoped tokens: their form and entropy, only hashes kept, the state directory's modes,
`buildshelf token create|list|revoke`, expiry and revocation effective at once, and the token
branch of `Credentials.authenticate`."""

import contextlib
import io
import json
import os
import re
import signal
import sqlite3
import stat
import time
import urllib.request

import pytest

from buildshelf import cli, state
from buildshelf.publishing import credentials, tokens
from buildshelf.publishing.commands import utc_minute
from helpers import real_server

TOKEN = re.compile(r"bs_([0-9a-f]{12})_([0-9A-Za-z]{43})\Z")
DAY = 86_400_000  # milliseconds
NOW = 1_790_000_000_000  # 2026-09-21, epoch milliseconds as the data files keep time


def create(data_dir, *argv):
    """`buildshelf token create ARGV --data DATA_DIR`: (status, stdout, stderr)."""
    return run(["token", "create", *argv, "--data", str(data_dir)])


def run(argv):
    """`buildshelf ARGV`: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = cli.main(argv)
        except SystemExit as exit:
            status = exit.code
    return status, out.getvalue(), err.getvalue()


def made(data_dir, slug="alpha", *argv):
    """A token created for `slug`: its text, after checking the command's output."""
    status, out, err = create(data_dir, slug, *argv)
    assert status == 0, err
    return out.strip()


def state_of(data_dir):
    return str(data_dir / ".buildshelf")


# --- the form --------------------------------------------------------------------------------


def test_a_token_is_printed_alone_on_one_line_of_stdout_in_its_form(data_dir):
    status, out, err = create(data_dir, "alpha")
    assert status == 0
    assert out.endswith("\n") and out.count("\n") == 1
    assert TOKEN.match(out.strip()), out
    token_id = TOKEN.match(out.strip())[1]
    assert token_id in err  # what `revoke` takes is said beside it, on stderr


def test_the_secret_has_256_random_bits_in_characters_a_double_click_selects():
    texts = [tokens.new_text("abcdef012345")[1] for _ in range(2000)]
    secrets_ = [TOKEN.match(text)[2] for text in texts]
    assert len(set(secrets_)) == len(secrets_)
    # 43 letters and digits hold 256 bits; each one decodes to a number below 2**256 and, over
    # 2000 secrets, every one of the 256 bits is seen both set and clear.
    numbers = [tokens.secret_number(secret) for secret in secrets_]
    assert all(number < 2**256 for number in numbers)
    ones = 0
    zeros = 0
    for number in numbers:
        ones |= number
        zeros |= ~number & (2**256 - 1)
    assert ones == zeros == 2**256 - 1
    assert len(tokens.ALPHABET) ** 43 >= 2**256
    assert re.fullmatch(r"\w+", tokens.ALPHABET, re.ASCII) and "_" not in tokens.ALPHABET


def test_ids_are_distinct_and_hold_no_underscore(data_dir):
    texts = [made(data_dir) for _ in range(20)]
    ids = [TOKEN.match(text)[1] for text in texts]
    assert len(set(ids)) == 20 and not any("_" in i for i in ids)


# --- what is kept ----------------------------------------------------------------------------


def held_open(data_dir):
    """The tokens database opened and read, as a server holds it: its -wal and -shm files
    stay (the last connection to close removes them)."""
    connection = state.connect(state_of(data_dir), "tokens")
    connection.execute("SELECT count(*) FROM sqlite_master").fetchall()
    return connection


def every_file(directory):
    for root, _, names in os.walk(directory):
        for name in names:
            yield os.path.join(root, name)


def test_only_a_hash_of_the_secret_is_written_anywhere(data_dir):
    keep_open = held_open(data_dir)
    try:
        status, out, err = create(data_dir, "alpha", "--note", "ci")
        text = out.strip()
        secret = TOKEN.match(text)[2]
        assert tokens.list_tokens(state_of(data_dir))  # read it back: it is there
        files = list(every_file(data_dir))
        assert any(name.endswith("-wal") for name in files)
        for path in files:
            with open(path, "rb") as f:
                content = f.read()
            assert secret.encode() not in content, path
            assert secret[:16].encode() not in content, path
        assert secret not in err and secret[:16] not in err
    finally:
        keep_open.close()


def test_the_state_directory_is_0700_and_its_databases_0600(data_dir):
    os.umask(old := os.umask(0o022))
    try:
        keep_open = held_open(data_dir)
        made(data_dir)
        assert stat.S_IMODE(os.stat(state_of(data_dir)).st_mode) == 0o700
        names = sorted(os.listdir(state_of(data_dir)))
        assert names == ["tokens.sqlite3", "tokens.sqlite3-shm", "tokens.sqlite3-wal"]
        for name in names:
            mode = stat.S_IMODE(os.stat(os.path.join(state_of(data_dir), name)).st_mode)
            assert mode == 0o600, name
        keep_open.close()
    finally:
        os.umask(old)


# --- create, list, revoke, authenticate --------------------------------------------------------


def test_authenticate_finds_a_token_and_refuses_the_rest(tmp_path):
    where = str(tmp_path / "state")
    token, text = tokens.create(where, "alpha", 90, "ci", now=NOW)
    assert token == tokens.Token(
        id=TOKEN.match(text)[1],
        project="alpha",
        created=NOW,
        expires=NOW + 90 * DAY,
        last_used=None,
        note="ci",
        revoked=None,
    )
    assert tokens.authenticate(where, text, now=NOW + 1).id == token.id
    other_id = "0123456789ab" if token.id != "0123456789ab" else "ba9876543210"
    for wrong in (
        "",
        "bs_",
        text[:-1],
        text + "x",
        text[:-1] + ("A" if text[-1] != "A" else "B"),  # another secret
        text.replace(token.id, other_id),  # an unknown id
        text.replace("bs_", "BS_"),
        text.replace("_", "-"),
        " " + text,
    ):
        assert tokens.authenticate(where, wrong, now=NOW + 1) is None, wrong


def test_a_token_expires_at_its_time_and_one_without_expiry_does_not(tmp_path):
    where = str(tmp_path / "state")
    token, text = tokens.create(where, "alpha", 1, "", now=NOW)
    assert tokens.authenticate(where, text, now=NOW + DAY - 1) is not None
    assert tokens.authenticate(where, text, now=NOW + DAY) is None
    forever, text = tokens.create(where, "*", None, "", now=NOW)
    assert forever.expires is None
    assert tokens.authenticate(where, text, now=NOW + 100 * 365 * DAY) is not None


def test_a_revoked_token_is_refused_and_a_revoke_again_changes_nothing(tmp_path):
    where = str(tmp_path / "state")
    token, text = tokens.create(where, "alpha", 90, "", now=NOW)
    revoked, changed = tokens.revoke(where, token.id, now=NOW + 5)
    assert changed and revoked.revoked == NOW + 5
    assert tokens.authenticate(where, text, now=NOW + 6) is None
    again, changed = tokens.revoke(where, token.id, now=NOW + 10)
    assert not changed and again.revoked == NOW + 5
    with pytest.raises(tokens.TokenError, match="no token 0123456789ab"):
        tokens.revoke(where, "0123456789ab")


def test_last_used_is_written_at_most_once_a_minute(tmp_path):
    where = str(tmp_path / "state")
    token, text = tokens.create(where, "alpha", 90, "", now=NOW)

    def last_used():
        [found] = tokens.list_tokens(where)
        return found.last_used

    wrong = text[:-1] + ("1" if text.endswith("0") else "0")  # never the token itself
    tokens.authenticate(where, wrong, now=NOW + 1)  # refused: not a use
    assert last_used() is None
    tokens.authenticate(where, text, now=NOW + 1000)
    assert last_used() == NOW + 1000
    tokens.authenticate(where, text, now=NOW + 60_999)
    assert last_used() == NOW + 1000
    tokens.authenticate(where, text, now=NOW + 61_000)
    assert last_used() == NOW + 61_000


def test_an_unknown_id_costs_a_hash_and_a_comparison_too(tmp_path, monkeypatch):
    where = str(tmp_path / "state")
    token, text = tokens.create(where, "alpha", 90, "", now=NOW)
    calls = []
    compare = tokens.hmac.compare_digest
    monkeypatch.setattr(
        tokens.hmac, "compare_digest", lambda a, b: calls.append(len(a)) or compare(a, b)
    )
    assert tokens.authenticate(where, text, now=NOW) is not None
    assert tokens.authenticate(where, text.replace(token.id, "0" * 12), now=NOW) is None
    assert calls == [32, 32]


def test_list_shows_every_token_oldest_first(tmp_path):
    where = str(tmp_path / "state")
    assert tokens.list_tokens(where) == []
    first, _ = tokens.create(where, "alpha", 90, "one", now=NOW)
    second, _ = tokens.create(where, "*", None, "two", now=NOW + 1)
    assert tokens.list_tokens(where) == [first, second]


# --- the command line ------------------------------------------------------------------------


def test_create_says_the_expiry_on_stderr_and_defaults_to_90_days(data_dir):
    status, out, err = create(data_dir, "alpha", "--note", "jenkins release job")
    [token] = tokens.list_tokens(state_of(data_dir))
    assert token.expires - token.created == 90 * DAY
    assert token.note == "jenkins release job" and token.project == "alpha"
    assert "expires" in err and utc_minute(token.expires) in err
    assert "every project" not in err
    status, out, err = create(data_dir, "beta", "--expires", "7")
    token = tokens.list_tokens(state_of(data_dir))[-1]
    assert token.expires - token.created == 7 * DAY
    status, out, err = create(data_dir, "beta", "--no-expiry")
    assert status == 0 and tokens.list_tokens(state_of(data_dir))[-1].expires is None
    assert "never expires" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["--expires", "7", "--no-expiry"],
        ["--expires", "0"],
        ["--expires", "x"],
        ["--note", "two\nlines"],
    ],
)
def test_create_refuses_bad_usage(data_dir, argv):
    status, out, err = create(data_dir, "alpha", *argv)
    assert status == 2 and out == ""
    assert not os.path.exists(state_of(data_dir))


def test_create_refuses_a_project_that_is_not_there(data_dir):
    status, out, err = create(data_dir, "alhpa")
    assert (status, out) == (1, "")
    assert err.count("\n") == 1
    assert err.startswith("buildshelf token create: no project 'alhpa' in ")
    assert "alpha" in err  # the name meant
    assert not os.path.exists(state_of(data_dir)) or tokens.list_tokens(state_of(data_dir)) == []
    status, out, err = create(data_dir, "../alpha")
    assert status == 1 and out == "" and err.count("\n") == 1


def test_create_for_every_project_warns(data_dir):
    status, out, err = create(data_dir, "*")
    assert status == 0 and TOKEN.match(out.strip())
    assert "warning" in err and "every project" in err
    assert tokens.list_tokens(state_of(data_dir))[0].project == "*"


def test_list_shows_a_table_and_never_a_secret(data_dir):
    text = made(data_dir, "alpha", "--note", "release job")
    made(data_dir, "*", "--no-expiry")
    status, out, err = run(["token", "list", "--data", str(data_dir)])
    assert status == 0
    lines = out.splitlines()
    assert lines[0].split() == [
        "ID",
        "PROJECT",
        "CREATED",
        "EXPIRES",
        "LEFT",
        "LAST",
        "USED",
        "REVOKED",
        "NOTE",
    ]
    assert len(lines) == 3
    assert lines[1].startswith(TOKEN.match(text)[1]) and lines[1].endswith("release job")
    assert "never" in lines[2]
    assert TOKEN.match(text)[2] not in out + err


def test_list_json_is_an_array_of_the_tokens(data_dir):
    status, out, err = run(["token", "list", "--json", "--data", str(data_dir)])
    assert (status, json.loads(out)) == (0, [])
    text = made(data_dir, "alpha", "--note", "ci")
    [token] = tokens.list_tokens(state_of(data_dir))
    status, out, err = run(["token", "list", "--json", "--data", str(data_dir)])
    assert json.loads(out) == [
        {
            "id": TOKEN.match(text)[1],
            "project": "alpha",
            "created": token.created,
            "expires": token.expires,
            "lastUsed": None,
            "note": "ci",
            "revoked": None,
            "refusedExpired": None,
            "status": "active",
        }
    ]


def test_revoke_by_id(data_dir):
    text = made(data_dir)
    token_id = TOKEN.match(text)[1]
    status, out, err = run(["token", "revoke", token_id, "--data", str(data_dir)])
    assert status == 0 and f"revoked token {token_id}" in out
    assert tokens.authenticate(state_of(data_dir), text) is None
    status, out, err = run(["token", "revoke", token_id, "--data", str(data_dir)])
    assert status == 0 and "already revoked" in out
    status, out, err = run(["token", "list", "--json", "--data", str(data_dir)])
    assert json.loads(out)[0]["status"] == "revoked"
    status, out, err = run(["token", "revoke", "0123456789ab", "--data", str(data_dir)])
    assert (status, out) == (1, "")
    assert err == "buildshelf token revoke: no token 0123456789ab: 'token list' lists them\n"
    status, out, err = run(["token", "revoke", text, "--data", str(data_dir)])
    assert status == 1 and TOKEN.match(text)[2] not in err  # a whole token given: not echoed


def test_the_state_flag_puts_the_tokens_elsewhere(data_dir, tmp_path):
    elsewhere = tmp_path / "state"
    status, out, err = create(data_dir, "alpha", "--state", str(elsewhere))
    assert status == 0
    assert tokens.list_tokens(str(elsewhere)) and not os.path.exists(state_of(data_dir))


# --- Credentials ---------------------------------------------------------------------------


def checker(data_dir):
    return credentials.Credentials(state_of(data_dir), "https://issuer.invalid", "https://bs")


def test_credentials_take_a_token_for_its_project_or_every_project(data_dir):
    text = made(data_dir, "alpha")
    everywhere = made(data_dir, "*")
    check = checker(data_dir)
    token_id = TOKEN.match(text)[1]
    assert check.authenticate(f"Bearer {text}", "alpha") == credentials.Publisher(
        f"token {token_id}"
    )
    assert check.authenticate(f"bearer {text}", "alpha").who == f"token {token_id}"
    assert check.authenticate(f"Bearer {text}", "Alpha").who == f"token {token_id}"
    assert check.authenticate(f"Bearer {everywhere}", "beta").who.startswith("token ")
    # A project that does not exist: the caller answers 404 for a valid credential.
    assert check.authenticate(f"Bearer {everywhere}", "nope").who.startswith("token ")
    with pytest.raises(credentials.Forbidden) as refused:
        check.authenticate(f"Bearer {text}", "beta")
    assert token_id in str(refused.value) and TOKEN.match(text)[2] not in str(refused.value)


def test_credentials_refuse_an_unknown_expired_revoked_or_malformed_token(data_dir, monkeypatch):
    text = made(data_dir, "alpha", "--expires", "1")
    check = checker(data_dir)
    for wrong in (text[:-1] + ("x" if text[-1] != "x" else "y"), "bs_x", "bs_" + "a" * 80):
        with pytest.raises(credentials.Unauthorized) as refused:
            check.authenticate(f"Bearer {wrong}", "alpha")
        assert "unknown, expired or revoked token" in str(refused.value)
        assert wrong not in str(refused.value)
    later = tokens.now_ms() + 1 * DAY
    monkeypatch.setattr(tokens, "now_ms", lambda: later)
    with pytest.raises(credentials.Unauthorized, match="unknown, expired or revoked token"):
        check.authenticate(f"Bearer {text}", "alpha")


def test_a_refused_token_is_logged_with_its_id_and_why_never_its_secret(
    data_dir, monkeypatch, caplog
):
    # Whoever runs the server sees which token CI sent and why it failed (issue 38).
    text = made(data_dir, "alpha", "--expires", "1")
    token_id, secret = TOKEN.match(text)[1], TOKEN.match(text)[2]
    check = checker(data_dir)
    wrong_secret = text[:-1] + ("x" if text[-1] != "x" else "y")
    unknown = text.replace(token_id, "0" * len(token_id))
    later = tokens.now_ms() + 1 * DAY
    cases = [(wrong_secret, token_id, "its secret does not match")]
    cases += [(unknown, "0" * len(token_id), "unknown")]
    for bearer, shown, why in cases:
        caplog.clear()
        with pytest.raises(credentials.Unauthorized):
            check.authenticate(f"Bearer {bearer}", "alpha")
        assert f"token {shown} refused: {why}" in caplog.text
    monkeypatch.setattr(tokens, "now_ms", lambda: later)
    caplog.clear()
    with pytest.raises(credentials.Unauthorized):
        check.authenticate(f"Bearer {text}", "alpha")
    assert f"token {token_id} refused: expired" in caplog.text
    assert run(["token", "revoke", token_id, "--data", str(data_dir)])[0] == 0
    caplog.clear()
    with pytest.raises(credentials.Unauthorized):
        check.authenticate(f"Bearer {text}", "alpha")
    assert f"token {token_id} refused: revoked" in caplog.text
    assert secret not in caplog.text and secret[:-1] not in caplog.text


def test_a_revoke_takes_effect_at_once_in_a_running_checker(data_dir):
    text = made(data_dir, "alpha")
    check = checker(data_dir)
    assert check.authenticate(f"Bearer {text}", "alpha")
    status, out, err = run(["token", "revoke", TOKEN.match(text)[1], "--data", str(data_dir)])
    assert status == 0
    with pytest.raises(credentials.Unauthorized, match="unknown, expired or revoked token"):
        check.authenticate(f"Bearer {text}", "alpha")


def test_credentials_refuse_no_bearer(data_dir):
    check = checker(data_dir)
    for authorization in (None, "", "Basic dXNlcjpwYXNz", "Bearer", "Bearer  "):
        with pytest.raises(credentials.Unauthorized):
            check.authenticate(authorization, "alpha")


# --- the watcher ---------------------------------------------------------------------------


@pytest.mark.system
def test_the_server_never_reads_the_state_directory_as_a_project(data_dir):
    made(data_dir, "alpha")
    keep_open = held_open(data_dir)
    (data_dir / ".buildshelf" / "decoy.json").write_text("{not json")
    try:
        with real_server(data_dir) as (port, proc):
            base = f"http://127.0.0.1:{port}"
            time.sleep(1.5)  # the watcher has checked the directory again since the start
            with urllib.request.urlopen(base + "/api/v2/projects") as answer:
                slugs = sorted(p["slug"] for p in json.load(answer)["projects"])
            with urllib.request.urlopen(base + "/healthz") as answer:
                health = json.load(answer)
            proc.send_signal(signal.SIGINT)
            log = proc.communicate(timeout=10)[1]
        assert slugs == ["alpha", "beta"]
        assert (health["status"], health["projects"]) == ("ok", 2), health
        assert ".buildshelf" not in log and "decoy" not in log
    finally:
        keep_open.close()
    status, out, err = run(["check", "--data", str(data_dir)])
    assert (status, err) == (0, "")


def test_credentials_open_each_database_once(tmp_path, monkeypatch):
    """A server's checks reuse the connection its first one opened."""
    state_dir = str(tmp_path / "state")
    _, text = tokens.create(state_dir, "alpha", 90, "ci")
    opened = []
    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **kw: opened.append(a) or connect(*a, **kw))
    creds = credentials.Credentials(state_dir, "https://issuer.invalid", "http://127.0.0.1:8080")
    for _ in range(3):
        assert creds.authenticate(f"Bearer {text}", "alpha").who.startswith("token ")
        with pytest.raises(credentials.Unauthorized):
            creds.authenticate("Bearer bs_000000000000_" + "A" * 43, "alpha")
    assert len(opened) == 1
