"""Who may write: the bearer credential of an HTTP write checked, as a scoped token
(tokens.py) or as a GitHub Actions OIDC token of a trusted publisher (oidc.py, trust.py).

`Credentials.authenticate(authorization, slug)` answers with the `Publisher` or raises the
refusal: `Unauthorized` (401), `Forbidden` (403), `Unavailable` (503), `NoRoom` (507). No
message or `who` ever holds a secret.
"""

import logging
import shutil
import sqlite3
from dataclasses import dataclass

from buildshelf import state
from buildshelf.publishing import oidc, tokens, trust
from buildshelf.text import printable

log = logging.getLogger(__name__)

UNKNOWN_TOKEN = "unknown, expired or revoked token"
UNKNOWN_CREDENTIAL = "unknown credential: a token (bs_...) or a GitHub Actions OIDC token"


class Unauthorized(Exception):
    """401: no credential, or one that is not valid now (unknown, expired, revoked, forged).
    The message says which, for the client, without echoing the credential."""


class Forbidden(Exception):
    """403: a valid credential that may not write to this project."""


class Unavailable(Exception):
    """503: the credential cannot be checked now (the OIDC issuer's keys cannot be fetched,
    the state cannot be read)."""


class NoRoom(Unavailable):
    """507: the state cannot be read because its disk is full (SQLite cannot make its WAL
    files there)."""


@dataclass(frozen=True)
class Publisher:
    """A credential found valid for one project: `who` names it in the log, never a secret
    ("token 3f9a0c1d2b7e", "github owner/repo (.github/workflows/release.yml)")."""

    who: str


def _bearer(authorization):
    """The bearer credential of an Authorization header's value (or None), or Unauthorized."""
    scheme, _, bearer = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not bearer.strip():
        raise Unauthorized(
            "send Authorization: Bearer TOKEN (a token, or a GitHub Actions OIDC token)"
        )
    return bearer.strip()


class Credentials:
    """The credentials kept in the state directory `state_dir`; GitHub OIDC tokens are those
    `issuer` signs for `audience` (the service's public URL)."""

    def __init__(self, state_dir: str, issuer: str, audience: str):
        self.state_dir, self.issuer, self.audience = state_dir, issuer, audience.rstrip("/")
        self.verifier = oidc.Verifier(issuer, self.audience)
        # Opened once, at the first check, and kept: no write pays for opening a file.
        self.databases = state.Databases(state_dir)

    def precheck(self, authorization: str | None) -> None:
        """Unauthorized raised for a credential that its text alone shows cannot be valid, for
        any project: no bearer, neither a token's form nor a JWT's, a GitHub token expired or
        for another audience... No file, no network, nothing recorded: the server's loop
        thread calls it for every write; authenticate() then checks it all."""
        bearer = _bearer(authorization)
        if bearer.startswith(tokens.PREFIX):
            if not tokens.FORM.match(bearer):
                raise Unauthorized(UNKNOWN_TOKEN)
        elif oidc.looks_like_jwt(bearer):
            try:
                self.verifier.precheck(bearer)
            except oidc.Invalid as invalid:
                raise Unauthorized(str(invalid)) from None
        else:
            raise Unauthorized(UNKNOWN_CREDENTIAL)

    def authenticate(self, authorization: str | None, slug: str) -> Publisher:
        """The publisher `authorization` (an Authorization header's value, or None) proves
        for project `slug`, or the refusal raised. A valid credential for another project is
        Forbidden, so that the caller can answer 404 for a project that does not exist."""
        bearer = _bearer(authorization)
        try:
            if bearer.startswith(tokens.PREFIX):
                return self._token(bearer, slug)
            if oidc.looks_like_jwt(bearer):
                return self._github(bearer, slug)
        except (sqlite3.Error, OSError) as error:  # locked past state.BUSY_SECONDS, disk full
            raise self._unreadable(error) from None
        raise Unauthorized(UNKNOWN_CREDENTIAL)

    def _unreadable(self, error):
        """The refusal of a write whose credential the state could not check: `error`."""
        log.error("cannot read the credentials in %s: %s", self.state_dir, error)
        try:
            full = shutil.disk_usage(self.state_dir).free == 0
        except OSError:
            full = False
        if full or getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
            return NoRoom(
                "the server's disk is full: nothing was written; try again once it has room"
            )
        said = getattr(error, "strerror", None) or error
        return Unavailable(f"the credentials cannot be read now ({said}): try again in a minute")

    def _token(self, text: str, slug: str) -> Publisher:
        token = tokens.verdict(self.databases, text)
        if isinstance(token, tokens.Refusal):
            # Its id and why, for whoever runs the server; the client learns no more.
            log.warning("a write's token %s refused: %s", token.token_id, token.reason)
            raise Unauthorized(UNKNOWN_TOKEN)
        # Slugs are lower case; the API finds a project whatever the case of its URL.
        if token.project not in (slug.lower(), tokens.EVERY_PROJECT):
            raise Forbidden(
                f"token {token.id} may publish to {token.project} only, not {printable(slug)}"
            )
        return Publisher(f"token {token.id}")

    def _github(self, token: str, slug: str) -> Publisher:
        """A GitHub Actions OIDC token: verified, then its jti spent (whatever the publish
        then answers: a retry requests a fresh token), then matched to a trusted publisher."""
        try:
            claims = self.verifier.verify(token)
        except oidc.Invalid as invalid:
            raise Unauthorized(str(invalid)) from None
        except oidc.Unreachable as unreachable:
            raise Unavailable(
                f"the GitHub OIDC token cannot be checked now ({unreachable}): try again in a "
                "minute"
            ) from None
        try:
            if not trust.spend(self.databases, claims["jti"], claims["exp"] + oidc.LEEWAY):
                raise Unauthorized("this token was used already: request a fresh one")
            # Slugs are lower case; the API finds a project whatever the case of its URL.
            trust.match(self.databases, slug.lower(), claims)
        except trust.NotTrusted as not_trusted:
            raise Forbidden(str(not_trusted)) from None
        return Publisher(f"github {claims['repository']} ({trust.workflow_of(claims)})")
