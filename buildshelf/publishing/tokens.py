"""Scoped tokens: `bs_<id>_<secret>`, each for one project or for every project ('*'), kept
in the state directory's `tokens` database as a hash of the secret, never the secret.

Every function reads the database, so a revoke or an expiry applies to the next check, in
every process, with no restart. Times are epoch milliseconds, UTC, as the data files keep them.

A token is warned about (`Token.attention`) from WARNING_DAYS before its expiry, and once
expired while it is still in use: used, or refused as expired (which is recorded), within
the last WARNING_DAYS.
"""

import hashlib
import hmac
import re
import secrets
import sqlite3
import time
from dataclasses import astuple, dataclass, fields

from buildshelf import state

PREFIX = "bs_"
EVERY_PROJECT = "*"
# Letters and digits only: a double-click selects the whole token (a '-' would break it), and
# the id holds no '_', so that the token splits at its two underscores.
ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
SECRET_BYTES = 32  # 256 random bits
SECRET_LENGTH = 43  # 62**43 > 2**256: the fewest characters of ALPHABET that hold them
ID_LENGTH = 12  # hexadecimal: 48 bits, short to type and log, drawn again on a clash
FORM = re.compile(rf"bs_([0-9a-f]{{{ID_LENGTH}}})_([0-9A-Za-z]{{{SECRET_LENGTH}}})\Z")
DAY_MS = 86_400_000
LAST_USED_EVERY_MS = 60_000  # `last used` is written at most once a minute per token
# A token this close to its expiry is warned about by `check`, /healthz and /metrics' readers:
# two weekly cron mails of `check` before it stops working. An expired token used (or tried)
# within as long is still in use: its expiry breaks someone's publishing.
WARNING_DAYS = 14
WARNING_MS = WARNING_DAYS * DAY_MS
EXPIRING = "expiring"  # within WARNING_MS of its expiry: a warning
EXPIRED_IN_USE = "expired in use"  # expired, and used or tried since WARNING_MS: a problem
# The latest time a token keeps (epoch milliseconds): the end of the year 9999, the last one
# a date is written for.
LATEST_MS = 253_402_300_799_999
# What an unknown id is compared with, so that it costs what a known one does.
_NO_HASH = bytes(32)

SCHEMA = state.Schema(
    "tokens",
    migrations=(
        """
CREATE TABLE IF NOT EXISTS tokens (
    id TEXT PRIMARY KEY,
    secret_sha256 BLOB NOT NULL,
    project TEXT NOT NULL,
    created INTEGER NOT NULL,
    expires INTEGER,
    last_used INTEGER,
    note TEXT NOT NULL,
    revoked INTEGER
)
""",
        # The last write refused because the token had expired: a sign it is still in use.
        "ALTER TABLE tokens ADD COLUMN refused_expired INTEGER",
    ),
)

_FIELDS = "id, project, created, expires, last_used, note, revoked, refused_expired"


class TokenError(Exception):
    """A token command refused: the message says why."""


class Damaged(state.Unusable):
    """A token's row holding a value that its column cannot (SQLite keeps any type in any
    column): a hand edit, said in one line that names the token, the column and the value."""


@dataclass(frozen=True)
class Token:
    """A token as kept, without its secret. Times in epoch milliseconds; `expires` None is
    never, `last_used` None is never used, `revoked` None is not revoked, `refused_expired`
    the last write refused because it had expired (None: none)."""

    id: str
    project: str  # a slug, or EVERY_PROJECT
    created: int
    expires: int | None
    last_used: int | None
    note: str
    revoked: int | None
    refused_expired: int | None = None

    def status(self, now: int) -> str:
        """'active', 'expired' or 'revoked'."""
        if self.revoked is not None:
            return "revoked"
        return "expired" if self.expires is not None and now >= self.expires else "active"

    def in_use(self, now: int) -> bool:
        """Whether it was used, or refused as expired, within WARNING_MS before `now`."""
        signs = [when for when in (self.last_used, self.refused_expired) if when is not None]
        return bool(signs) and now - max(signs) < WARNING_MS

    def attention(self, now: int) -> str | None:
        """EXPIRING, EXPIRED_IN_USE, or None when there is nothing to say: a token revoked,
        never expiring, far from its expiry, or expired and not in use (nobody relies on
        it; `token list` shows it)."""
        if self.revoked is not None or self.expires is None:
            return None
        if now < self.expires:
            return EXPIRING if self.expires - now <= WARNING_MS else None
        return EXPIRED_IN_USE if self.in_use(now) else None

    def watched(self, now: int) -> bool:
        """Whether /metrics gives its expiry: every token that will expire and still works,
        and one expired while in use; not one revoked or expired unused (its series ends)."""
        return self.expires is not None and (
            self.status(now) == "active" or self.attention(now) == EXPIRED_IN_USE
        )


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def secret_hash(secret: str) -> bytes:
    # A plain SHA-256, no slow KDF: a slow hash protects guessable passwords, and a secret of
    # 256 random bits cannot be guessed, by its hash or otherwise. Fast, it keeps a check
    # cheap for a worker thread, and an unknown id cheap to make cost the same.
    return hashlib.sha256(secret.encode("ascii")).digest()


def new_text(token_id: str) -> tuple[str, str]:
    """(secret, token text) of a new token whose id is `token_id`."""
    number = int.from_bytes(secrets.token_bytes(SECRET_BYTES), "big")
    digits = []
    for _ in range(SECRET_LENGTH):
        number, digit = divmod(number, len(ALPHABET))
        digits.append(ALPHABET[digit])
    secret = "".join(reversed(digits))
    return secret, f"{PREFIX}{token_id}_{secret}"


def secret_number(secret: str) -> int:
    """The number a secret writes in ALPHABET (for tests of its bits)."""
    number = 0
    for char in secret:
        number = number * len(ALPHABET) + ALPHABET.index(char)
    return number


def _opened(where):
    """The tokens' database of `where`: a state directory, or a server's state.Databases."""
    return state.opened(where, SCHEMA)


def _token(row) -> Token:
    """The Token of a row of _FIELDS; Damaged for a value of another type than its field's,
    or a time no date is written for, which would otherwise fail each use of the token far
    from here (a 500 of /healthz, a traceback of `token list`)."""
    for field, value in zip(fields(Token), row):
        if isinstance(value, field.type) and not (type(value) is int and value > LATEST_MS):
            continue
        kind = "text" if field.type is str else f"a time in epoch milliseconds up to {LATEST_MS}"
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:60] + "..."
        raise Damaged(
            f"token {row[0]} in the tokens database has {field.name} = {shown}, not {kind}: set "
            "it right (sqlite3), or restore the database from a backup (docs/running.md, "
            '"Backing up and restoring")'
        )
    return Token(*row)


def create(
    state_dir: str, project: str, expires_days: int | None, note: str, now: int | None = None
) -> tuple[Token, str]:
    """A new token for `project` (a slug, or '*'), expiring `expires_days` days from now
    (None: never): (the Token, its text, to be shown once and never again)."""
    now = now_ms() if now is None else now
    expires = None if expires_days is None else now + expires_days * DAY_MS
    with _opened(state_dir) as connection:
        while True:
            token = Token(
                secrets.token_hex(ID_LENGTH // 2), project, now, expires, None, note, None, None
            )
            secret, text = new_text(token.id)
            try:
                with connection:
                    connection.execute(
                        f"INSERT INTO tokens ({_FIELDS}, secret_sha256) VALUES (?,?,?,?,?,?,?,?,?)",
                        (*astuple(token), secret_hash(secret)),
                    )
            except sqlite3.IntegrityError:  # an id already drawn: draw another
                continue
            return token, text


def list_tokens(where: state.Where) -> list[Token]:
    """Every token, revoked and expired ones too, oldest first, of the state directory
    `where` (or a server's state.Databases)."""
    with _opened(where) as connection:
        rows = connection.execute(f"SELECT {_FIELDS} FROM tokens ORDER BY created, id")
        return [_token(row) for row in rows]


def revoke(state_dir: str, token_id: str, now: int | None = None) -> tuple[Token, bool]:
    """(the token `token_id` revoked, whether this call revoked it: False when it already
    was). An unknown id is a TokenError."""
    now = now_ms() if now is None else now
    with _opened(state_dir) as connection, connection:
        changed = connection.execute(
            "UPDATE tokens SET revoked = ? WHERE id = ? AND revoked IS NULL", (now, token_id)
        ).rowcount
        row = connection.execute(
            f"SELECT {_FIELDS} FROM tokens WHERE id = ?", (token_id,)
        ).fetchone()
    if row is None:
        shown = token_id if re.fullmatch(r"[0-9a-f]{1,40}", token_id) else "with that id"
        raise TokenError(f"no token {shown}: 'token list' lists them")
    return _token(row), bool(changed)


@dataclass(frozen=True)
class Refusal:
    """Why a token's text was refused, for the server's log: the id it names (never its
    secret), and `reason`: 'malformed', 'unknown', 'its secret does not match', 'expired',
    'revoked', or the damage of its row (Damaged)."""

    token_id: str
    reason: str


def verdict(
    where: state.Where, text: str, now: int | None = None, record: bool = True
) -> Token | Refusal:
    """The token `text` is, if valid at `now`, in the state directory `where` (or a server's
    state.Databases), or why not. Its `last used` is recorded (at most once a minute), or, for
    a token that had expired, its `refused_expired`, unless not `record`: a check that only
    reads."""
    form = FORM.match(text)
    if form is None:
        return Refusal("?", "malformed")
    token_id, secret = form.groups()
    now = now_ms() if now is None else now
    with _opened(where) as connection:
        row = connection.execute(
            f"SELECT secret_sha256, {_FIELDS} FROM tokens WHERE id = ?", (token_id,)
        ).fetchone()
        # Hashed and compared in constant time whether the id is known or not.
        matches = hmac.compare_digest(secret_hash(secret), row[0] if row else _NO_HASH)
        if row is None:
            return Refusal(token_id, "unknown")
        if not matches:
            return Refusal(token_id, "its secret does not match")
        try:
            token = _token(row[1:])
        except Damaged as damaged:  # no use of it can be decided: refused
            return Refusal(token_id, str(damaged))
        status = token.status(now)
        if status == "expired" and record and _due(token.refused_expired, now):
            _record(connection, "refused_expired", token.id, now)
        if status != "active":
            return Refusal(token_id, status)
        if record and _due(token.last_used, now):
            _record(connection, "last_used", token.id, now)
        return token


def authenticate(
    where: state.Where, text: str, now: int | None = None, record: bool = True
) -> Token | None:
    """The token `text` is, if valid at `now` (see `verdict`); None for one malformed,
    unknown, expired or revoked."""
    found = verdict(where, text, now, record)
    return found if isinstance(found, Token) else None


def _due(recorded: int | None, now: int) -> bool:
    """Whether a time recorded at `recorded` is to be written again at `now`: a check that
    writes nothing takes no write lock."""
    return recorded is None or now - recorded >= LAST_USED_EVERY_MS


def _record(connection: sqlite3.Connection, column: str, token_id: str, now: int) -> None:
    """`column` (last_used or refused_expired) of the token `token_id` set to `now`, unless it
    was set within LAST_USED_EVERY_MS."""
    # Both are for people (what to revoke, what still uses an expired token): a write a
    # minute is enough, and a state directory that cannot be written (full, read-only) must
    # not stop publishing, nor change a refusal.
    try:
        with connection:
            connection.execute(
                f"UPDATE tokens SET {column} = ? WHERE id = ? AND ({column} IS NULL "
                f"OR {column} <= ?)",
                (now, token_id, now - LAST_USED_EVERY_MS),
            )
    except sqlite3.OperationalError:
        pass
