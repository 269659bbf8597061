"""GitHub Actions OIDC tokens verified (with PyJWT): RS256 only, by a key of the configured
issuer's JWKS, for this service's audience, within their times, with GitHub's claims.

The keys are found through ISSUER/.well-known/openid-configuration and its `jwks_uri`, and
cached. A kid not in the cache refreshes them at most once a minute (REFRESH_SECONDS), and
the cache is refreshed when a token comes after an hour (KEYS_MAX_AGE), keeping the old keys
if the issuer cannot answer then. When keys are needed and cannot be had, `Unreachable`.

The fetches (http_client's) need none of jenkins/fetch.py's guards against internal addresses: the
URLs are the operator's (the configured issuer, and the jwks_uri it names), never a
request's: a token's `iss`, `jku` or `x5u` never chooses where to fetch; so they may follow
redirects and go through the environment's proxy. They are bounded in time (TIMEOUT for
both, so that a request thread is not held long) and in size (MAX_BYTES).
"""

import json
import re
import threading
import time
from collections.abc import Callable

from buildshelf import http_client

# PyJWT is imported by the functions that use it, at the first JWT a server sees: with the
# cryptography it loads, it was 20 MB of every server's memory, which a server that no
# GitHub token ever reaches never needs (issue 34).

ALGORITHM = "RS256"  # GitHub's; HS256 (keyed with the public key) and none never
LEEWAY = 60  # seconds of clock difference allowed on exp, nbf and iat
TIMEOUT = 5.0  # seconds for the discovery document and the keys, together
REFRESH_SECONDS = 60  # the keys fetched at most once a minute, for unknown kids
KEYS_MAX_AGE = 3600  # and again after an hour, so that a key the issuer withdrew goes
MAX_BYTES = 1 << 20  # the largest discovery document or JWKS read
MAX_TOKEN_BYTES = 16 << 10  # GitHub's are about 1.5 KiB
# What trust.py matches, and what a token must have besides; GitHub's tokens have them all.
REQUIRED_CLAIMS = (
    "iss",
    "aud",
    "exp",
    "nbf",
    "iat",
    "jti",
    "sub",
    "repository",
    "repository_id",
    "repository_owner_id",
    "job_workflow_ref",
)
STRING_CLAIMS = ("jti", "sub", "repository", "job_workflow_ref")
OPTIONAL_STRING_CLAIMS = ("ref",)  # strings when there: trust.py matches --ref against it
TIME_CLAIMS = ("exp", "nbf", "iat")
LATEST_TIME = 253402300799  # 9999-12-31 23:59:59 UTC: a time past it is no NumericDate of ours
ID_CLAIMS = ("repository_id", "repository_owner_id")  # strings of digits in GitHub's tokens
_JWT = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
_DIGITS = re.compile(r"[0-9]{1,20}")


class Invalid(Exception):
    """The token is not a valid one: the message says why, never quoting the token."""


class Unreachable(Exception):
    """The keys are needed and the issuer cannot give them now: the message says why."""


def looks_like_jwt(bearer: str) -> bool:
    """Whether a bearer credential is shaped as a JWT (three base64url parts, the signature
    maybe empty, so that an unsigned token is refused as such)."""
    return _JWT.fullmatch(bearer) is not None


def _check_times(claims):
    """Invalid raised, naming the claim, for a time that is not RFC 7519's NumericDate as
    GitHub sends it: a JSON number (not true or false) of seconds since 1970, to the year 9999
    (NaN and Infinity, which Python's json reads, are neither). A time left out is
    decode()'s to name."""
    for claim in TIME_CLAIMS:
        value = claims.get(claim)
        if claim in claims and not (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and 0 <= value <= LATEST_TIME  # False for NaN
        ):
            raise Invalid(
                f"the token's claim {claim} is not a time (a number of seconds since 1970, "
                "up to the year 9999)"
            )


class Verifier:
    """Tokens that `issuer` signed for `audience`; `clock` (monotonic seconds) paces the
    fetches of the keys, each given up after `timeout` seconds."""

    def __init__(
        self,
        issuer: str,
        audience: str,
        timeout: float = TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.issuer, self.audience, self.timeout, self.clock = issuer, audience, timeout, clock
        self._lock = threading.Lock()  # one fetch at a time; the others wait for its keys
        self._keys = {}  # kid -> jwt.PyJWK
        self._fetched = None  # when the keys were last fetched, by `clock`
        self._tried = None  # when a fetch was last tried
        self._failure = None  # why the last fetch failed, or None

    def verify(self, token: str) -> dict:
        """The token's claims, or Invalid or Unreachable raised."""
        kid = self.precheck(token)
        return self._decode(token, self._key(kid))

    def precheck(self, token: str) -> str:
        """The key id of a token that may be valid, or Invalid raised: everything verify
        checks but the signature, with no key needed, so no fetch, ever."""
        if len(token) > MAX_TOKEN_BYTES or not looks_like_jwt(token):
            raise Invalid("the bearer token is not a JWT")
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            raise Invalid("the bearer token is not a well-formed JWT") from None
        if header.get("alg") != ALGORITHM:
            raise Invalid(f"the token must be signed with {ALGORITHM}")
        kid = header.get("kid")
        if not isinstance(kid, str):
            raise Invalid("the token names no key (kid)")
        # Checked before the keys are looked for: a token that cannot be valid needs no issuer.
        self._decode(token, None)
        return kid

    def _decode(self, token, key):
        """The claims, checked; their signature too unless `key` is None."""
        import jwt

        try:
            # The times first, as sent: PyJWT takes int() of each, so a string of digits passed
            # its checks (and then `exp + LEEWAY` failed), as did 1e300 and 2**70 (too large
            # for SQLite, which keeps the jti until exp), and Infinity raised OverflowError.
            # Once, by precheck: verify() prechecks the same token before it asks the key.
            if key is None:
                _check_times(jwt.decode(token, options={"verify_signature": False}))
            claims = jwt.decode(
                token,
                key,
                algorithms=[ALGORITHM],
                audience=self.audience,
                issuer=self.issuer,
                leeway=LEEWAY,
                options={
                    "verify_signature": key is not None,
                    # Named: PyJWT checks none of these when it does not check the signature.
                    "verify_exp": True,
                    "verify_nbf": True,
                    "verify_iat": True,
                    "verify_aud": True,
                    "verify_iss": True,
                    "require": list(REQUIRED_CLAIMS),
                    "verify_sub": False,  # checked below, naming the claim
                    "verify_jti": False,
                },
            )
        except jwt.ExpiredSignatureError:
            raise Invalid("the token has expired: request a fresh one") from None
        except jwt.ImmatureSignatureError:
            raise Invalid("the token is not valid yet (nbf or iat in the future)") from None
        except jwt.InvalidAudienceError:
            raise Invalid(
                f"the token is for another audience: request it for {self.audience}"
            ) from None
        except jwt.InvalidIssuerError:
            raise Invalid(f"the token is from another issuer than {self.issuer}") from None
        except jwt.MissingRequiredClaimError as error:
            raise Invalid(f"the token has no claim {error.claim}") from None
        except jwt.InvalidSignatureError:
            raise Invalid("the token's signature is not the issuer's") from None
        except jwt.InvalidAlgorithmError:
            raise Invalid(f"the token must be signed with {ALGORITHM}") from None
        except jwt.InvalidTokenError as error:  # a claim of the wrong type, a bad segment
            raise Invalid(f"the token is not valid: {error}") from None
        for claim in STRING_CLAIMS + tuple(c for c in OPTIONAL_STRING_CLAIMS if c in claims):
            if not isinstance(claims[claim], str):
                raise Invalid(f"the token's claim {claim} is not a string")
            try:  # JSON's \ud800 is a lone surrogate, which SQLite (the jti) cannot store
                claims[claim].encode()
            except UnicodeEncodeError:
                raise Invalid(f"the token's claim {claim} holds a lone surrogate") from None
        for claim in ID_CLAIMS:
            value = claims[claim]
            if isinstance(value, int) and not isinstance(value, bool):
                claims[claim] = value = str(value)
            if not (isinstance(value, str) and _DIGITS.fullmatch(value)):
                raise Invalid(f"the token's claim {claim} is not a number")
        return claims

    def _fresh_key(self, kid, now):
        keys, fetched = self._keys, self._fetched  # replaced together, under the lock
        if kid in keys and fetched is not None and now - fetched < KEYS_MAX_AGE:
            return keys[kid]
        return None

    def _key(self, kid):
        # A known key needs no lock: a fetch for another kid does not hold its token up.
        if key := self._fresh_key(kid, self.clock()):
            return key
        with self._lock:
            now = self.clock()
            if key := self._fresh_key(kid, now):  # fetched while this waited
                return key
            if self._tried is None or now - self._tried >= REFRESH_SECONDS:
                self._tried = now
                try:
                    self._keys, self._fetched, self._failure = self._fetch(), now, None
                except Unreachable as error:
                    self._failure = str(error)
            if kid in self._keys:  # maybe from before a failed refresh
                return self._keys[kid]
            if self._failure is not None:
                raise Unreachable(self._failure)
            raise Invalid("the token is signed by a key (kid) that the issuer does not list")

    def _fetch(self):
        """The issuer's RS256 keys by kid."""
        deadline = http_client.Deadline(self.timeout)
        discovery_url = self.issuer + "/.well-known/openid-configuration"
        discovery = self._get(discovery_url, deadline)
        issuer = discovery.get("issuer") if isinstance(discovery, dict) else None
        if issuer != self.issuer:
            raise Unreachable(
                f"{discovery_url} names the issuer {str(issuer)[:200]!r}, not {self.issuer}"
            )
        jwks_uri = discovery.get("jwks_uri")
        if not isinstance(jwks_uri, str) or not jwks_uri.startswith(
            ("https://",) if self.issuer.startswith("https://") else ("https://", "http://")
        ):
            raise Unreachable(f"{discovery_url} names no jwks_uri of the issuer's scheme")
        jwks = self._get(jwks_uri, deadline)
        import jwt

        try:
            found = jwt.PyJWKSet.from_dict(jwks).keys if isinstance(jwks, dict) else []
        except jwt.PyJWKSetError:
            found = []
        keys = {
            key.key_id: key
            for key in found
            if key.key_type == "RSA"
            and key.key_id
            and key.public_key_use in (None, "sig")
            and key.algorithm_name == ALGORITHM
        }
        if not keys:
            raise Unreachable(f"the issuer's keys at {jwks_uri} are not a JWK set of RS256 keys")
        return keys

    def _get(self, url, deadline):
        """The JSON document at `url`, whole by `deadline`."""
        headers = {"Accept": "application/json", "User-Agent": "buildshelf"}
        try:
            with http_client.request(url, deadline, headers=headers, proxies=True) as answer:
                body = answer.read(MAX_BYTES)
        except http_client.HttpError as error:
            raise Unreachable(str(error)) from None
        try:
            return json.loads(body)
        except (ValueError, RecursionError):
            raise Unreachable(f"{url} does not answer JSON") from None
