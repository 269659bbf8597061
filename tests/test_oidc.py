"""Trusted publishing: GitHub Actions OIDC tokens checked (oidc.py), against a real issuer on
127.0.0.1 with keys made here (oidc_issuer.py)."""

import threading
import time

import jwt
import pytest

from buildshelf import oidc
from oidc_issuer import AUDIENCE, OidcIssuer, new_key


@pytest.fixture
def issuer():
    with OidcIssuer() as issuer:
        yield issuer


class Clock:
    """A monotonic clock that moves only when told."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def verifier(issuer, clock):
    return oidc.Verifier(issuer.url, AUDIENCE, timeout=2.0, clock=clock)


def refused(call, *args):
    """The message of the oidc.Invalid that call(*args) raises."""
    with pytest.raises(oidc.Invalid) as raised:
        call(*args)
    return str(raised.value)


# --- the token: signature, algorithm, times, issuer, audience, claims --------------------------


def test_a_valid_token_gives_its_claims(issuer, verifier):
    claims = verifier.verify(issuer.token(repository="o/r", environment="release"))
    assert claims["repository"] == "o/r" and claims["environment"] == "release"
    assert claims["aud"] == AUDIENCE and claims["iss"] == issuer.url


def test_an_unsigned_token_is_refused(issuer, verifier):
    assert "RS256" in refused(verifier.verify, issuer.token(alg="none"))


def test_hs256_keyed_with_the_public_key_is_refused(issuer, verifier):
    # The key-confusion attack: the public key's PEM (public, in the JWKS) as an HMAC secret.
    assert "RS256" in refused(verifier.verify, issuer.token(alg="HS256"))


@pytest.mark.parametrize("alg", ["RS512", "PS256"])
def test_other_rsa_algorithms_are_refused(issuer, verifier, alg):
    assert "RS256" in refused(verifier.verify, issuer.token(alg=alg))


def test_a_token_signed_by_another_key_is_refused(issuer, verifier):
    assert "signature" in refused(verifier.verify, issuer.token(key=new_key()))


def test_a_token_whose_claims_were_changed_is_refused(issuer, verifier):
    header, claims, signature = issuer.token().split(".")
    other = issuer.token(repository="evil/repo").split(".")[1]
    assert "signature" in refused(verifier.verify, f"{header}.{other}.{signature}")


@pytest.mark.parametrize("token", ["", "a.b.c", "eyJhbGciOiJSUzI1NiJ9.e30", "x" * 5000])
def test_what_is_not_a_jwt_is_refused(verifier, token):
    refused(verifier.verify, token)


def test_another_issuer_is_refused(issuer, verifier):
    assert "issuer" in refused(verifier.verify, issuer.token(iss="https://evil.example.org"))


@pytest.mark.parametrize("aud", ["https://other.example.org", AUDIENCE + "/", [AUDIENCE + "/x"]])
def test_another_audience_is_refused_naming_the_right_one(issuer, verifier, aud):
    assert AUDIENCE in refused(verifier.verify, issuer.token(aud=aud))


@pytest.mark.parametrize(
    "claims, word",
    [
        ({"exp": -61}, "expired"),
        ({"nbf": 61}, "not valid yet"),
        ({"iat": 61}, "not valid yet"),
    ],
)
def test_times_beyond_60_seconds_of_leeway_are_refused(issuer, verifier, claims, word):
    now = int(time.time())
    assert word in refused(verifier.verify, issuer.token(**{k: now + v for k, v in claims.items()}))


def test_times_within_the_leeway_are_accepted(issuer, verifier):
    now = int(time.time())
    verifier.verify(issuer.token(exp=now - 50, nbf=now + 50, iat=now + 50))


@pytest.mark.parametrize("claim", oidc.REQUIRED_CLAIMS)
def test_each_required_claim_must_be_there(issuer, verifier, claim):
    assert claim in refused(verifier.verify, issuer.token(**{claim: None}))


@pytest.mark.parametrize(
    "claim", ["repository", "repository_id", "repository_owner_id", "job_workflow_ref", "jti"]
)
def test_a_claim_of_another_type_is_refused(issuer, verifier, claim):
    assert claim in refused(verifier.verify, issuer.token(**{claim: ["x"]}))


def test_no_message_echoes_the_token(issuer, verifier):
    for token in (
        issuer.token(exp=int(time.time()) - 100),
        issuer.token(aud="x"),
        issuer.token(key=new_key()),
        issuer.token(alg="none"),
    ):
        message = refused(verifier.verify, token)
        assert all(part not in message for part in token.split(".") if part)


# --- the keys: discovery, cache, refresh, an issuer out of reach --------------------------------


def key_fetches(issuer):
    return issuer.fetches.count("/.well-known/jwks")


def test_keys_are_found_through_discovery_and_cached(issuer, verifier):
    verifier.verify(issuer.token())
    verifier.verify(issuer.token())
    assert issuer.fetches == ["/.well-known/openid-configuration", "/.well-known/jwks"]
    issuer.mode = "down"
    verifier.verify(issuer.token())  # a known key needs no issuer


def test_the_discovery_must_name_the_configured_issuer(issuer, verifier):
    issuer.discovery["issuer"] = "https://evil.example.org"
    with pytest.raises(oidc.Unreachable, match="evil.example.org"):
        verifier.verify(issuer.token())


def test_an_unknown_kid_refreshes_the_keys_at_most_once_a_minute(issuer, verifier, clock):
    verifier.verify(issuer.token())
    assert key_fetches(issuer) == 1
    refused(verifier.verify, issuer.token(kid="nobody"))  # the keys are a second old
    assert key_fetches(issuer) == 1
    clock.now += oidc.REFRESH_SECONDS
    assert "kid" in refused(verifier.verify, issuer.token(kid="nobody"))
    assert key_fetches(issuer) == 2
    for _ in range(5):
        refused(verifier.verify, issuer.token(kid="somebody"))
    issuer.add_key()
    clock.now += oidc.REFRESH_SECONDS - 1
    refused(verifier.verify, issuer.token())  # the new key is not seen yet
    assert key_fetches(issuer) == 2
    clock.now += 1
    verifier.verify(issuer.token())
    assert key_fetches(issuer) == 3


def test_a_new_key_is_found_a_minute_after_the_last_fetch(issuer, verifier, clock):
    verifier.verify(issuer.token())
    issuer.add_key()
    clock.now += oidc.REFRESH_SECONDS
    verifier.verify(issuer.token())


def test_a_rotated_key_set_is_refetched_after_an_hour(issuer, verifier, clock):
    verifier.verify(issuer.token())
    old = issuer.kid
    issuer.add_key()
    del issuer.keys[old]  # the issuer withdrew it
    clock.now += oidc.KEYS_MAX_AGE
    assert "kid" in refused(verifier.verify, issuer.token(kid=old, key=new_key()))


def test_the_cached_keys_serve_when_the_hourly_refresh_fails(issuer, verifier, clock):
    verifier.verify(issuer.token())
    issuer.mode = "down"
    clock.now += oidc.KEYS_MAX_AGE
    verifier.verify(issuer.token())


@pytest.mark.parametrize("mode", ["down", "garbage", "error"])
def test_an_issuer_that_cannot_give_keys_is_unavailable(issuer, verifier, clock, mode):
    issuer.mode = mode
    with pytest.raises(oidc.Unreachable):
        verifier.verify(issuer.token())
    issuer.mode = "ok"
    with pytest.raises(oidc.Unreachable):  # not asked again within the minute
        verifier.verify(issuer.token())
    clock.now += oidc.REFRESH_SECONDS
    verifier.verify(issuer.token())


def test_a_jwks_that_is_not_one_is_unavailable(issuer, verifier):
    issuer.discovery["jwks_uri"] = issuer.url + "/.well-known/openid-configuration"
    with pytest.raises(oidc.Unreachable, match="keys"):
        verifier.verify(issuer.token())


def test_a_huge_answer_is_not_read_whole(issuer, verifier):
    issuer.discovery["padding"] = "x" * oidc.MAX_BYTES
    with pytest.raises(oidc.Unreachable, match="MiB"):
        verifier.verify(issuer.token())


def test_an_issuer_that_refuses_connections_is_unavailable(clock):
    with OidcIssuer() as issuer:
        token = issuer.token()
    verifier = oidc.Verifier(issuer.url, AUDIENCE, timeout=2.0, clock=clock)
    started = time.monotonic()
    with pytest.raises(oidc.Unreachable, match="cannot reach"):
        verifier.verify(token)
    assert time.monotonic() - started < 1


def test_a_silent_issuer_is_given_up_within_the_timeout(issuer, verifier):
    issuer.mode = "slow"
    started = time.monotonic()
    with pytest.raises(oidc.Unreachable, match="2 s"):
        verifier.verify(issuer.token())
    assert 1.9 < time.monotonic() - started < 3


def test_concurrent_requests_fetch_the_keys_once(issuer, verifier):
    issuer.mode = "slow"
    tokens = [issuer.token() for _ in range(8)]
    outcomes = []

    def verify(token):
        try:
            outcomes.append(verifier.verify(token)["jti"])
        except Exception as error:  # noqa: BLE001 (collected, then asserted on)
            outcomes.append(error)

    threads = [threading.Thread(target=verify, args=(token,)) for token in tokens]
    for thread in threads:
        thread.start()
    time.sleep(0.3)
    issuer.mode = "ok"
    for thread in threads:
        thread.join(10)
    jtis = [jwt.decode(t, options={"verify_signature": False})["jti"] for t in tokens]
    assert sorted(map(str, outcomes)) == sorted(jtis)
    assert issuer.fetches == ["/.well-known/openid-configuration", "/.well-known/jwks"]


@pytest.mark.parametrize(
    "bearer, jwt_like",
    [
        ("eyJhbGciOiJSUzI1NiJ9.eyJ4IjoxfQ.c2ln", True),
        ("eyJhbGciOiJub25lIn0.eyJ4IjoxfQ.", True),
        ("bs_3f9a0c1d2b7e_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ", False),
        ("a.b", False),
        ("a b.c.d", False),
    ],
)
def test_what_looks_like_a_jwt(bearer, jwt_like):
    assert oidc.looks_like_jwt(bearer) is jwt_like
