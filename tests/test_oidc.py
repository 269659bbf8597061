"""Trusted publishing: GitHub Actions OIDC tokens checked (oidc.py) against the trusted
publishers of a project (trust.py) by Credentials.authenticate, and `buildshelf trust`;
against a real issuer on 127.0.0.1 with keys made here (oidc_issuer.py)."""

import math
import os
import sqlite3
import stat
import threading
import time
from contextlib import closing

import jwt
import pytest

from buildshelf import cli, state
from buildshelf.publishing import oidc, trust
from buildshelf.publishing.credentials import (
    Credentials,
    Forbidden,
    Publisher,
    Unauthorized,
    Unavailable,
)
from oidc_issuer import AUDIENCE, OidcIssuer, new_key

REPOSITORY = "octo-org/octo-repo"  # the issuer's default
RELEASE = ".github/workflows/release.yml"


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


@pytest.fixture
def state_dir(data_dir):
    return str(data_dir / ".buildshelf")


@pytest.fixture
def creds(issuer, state_dir):
    return Credentials(state_dir, issuer.url, AUDIENCE)


def bearer(token):
    return f"Bearer {token}"


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
    "claim",
    ["repository", "repository_id", "repository_owner_id", "job_workflow_ref", "jti", "ref"],
)
def test_a_claim_of_another_type_is_refused(issuer, verifier, claim):
    assert claim in refused(verifier.verify, issuer.token(**{claim: ["x"]}))


# Values that json.loads gives and that are no NumericDate (RFC 7519: a JSON number of seconds
# since 1970): PyJWT takes int() of each time, so a string of digits passed it (and then made
# a TypeError), as did 1e300 and 2**70 (too large for SQLite, where a jti is kept until exp).
NOT_TIMES = {
    "digits": "99999999999",
    "text": "soon",
    "true": True,
    "list": [1700000000],
    "1e300": 1e300,
    "Infinity": math.inf,
    "-Infinity": -math.inf,
    "NaN": math.nan,
    "2**70": 2**70,
    "-1": -1,
    "after 9999": 253402300800,
}


@pytest.mark.parametrize("value", NOT_TIMES.values(), ids=NOT_TIMES.keys())
@pytest.mark.parametrize("claim", ["exp", "nbf", "iat"])
def test_a_time_claim_that_is_not_a_time_is_refused_naming_it(issuer, verifier, claim, value):
    token = issuer.token(**{claim: value})
    for check in (verifier.precheck, verifier.verify):
        assert f"the token's claim {claim} is not a time" in refused(check, token)


def test_a_time_is_seconds_since_1970_fractions_too_up_to_the_year_9999(issuer, creds, state_dir):
    trust.add(state_dir, "alpha", REPOSITORY)
    now = time.time()
    creds.authenticate(bearer(issuer.token(exp=now + 300.5, nbf=now - 0.5, iat=now)), "alpha")
    creds.authenticate(bearer(issuer.token(exp=253402300799)), "alpha")  # 9999-12-31 23:59:59
    with pytest.raises(Unauthorized, match="claim exp is not a time"):
        creds.authenticate(bearer(issuer.token(exp=253402300800)), "alpha")


@pytest.mark.parametrize("claim", oidc.STRING_CLAIMS)
def test_a_string_claim_with_a_lone_surrogate_is_refused(issuer, verifier, claim):
    """JSON's \\ud800 decodes to a lone surrogate, which no UTF-8 can hold: SQLite could not
    store such a jti (a UnicodeEncodeError, a 500)."""
    sent = issuer.claims()
    token = issuer.token(**{"sub": sent["sub"], claim: sent[claim] + "\ud800"})
    for check in (verifier.precheck, verifier.verify):
        assert f"the token's claim {claim} holds a lone surrogate" in refused(check, token)


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


def test_a_known_key_does_not_wait_for_a_fetch(issuer, verifier, clock):
    verifier.verify(issuer.token())
    clock.now += oidc.REFRESH_SECONDS
    issuer.mode = "slow"
    fetching = threading.Thread(target=refused, args=(verifier.verify, issuer.token(kid="x")))
    fetching.start()
    while "/.well-known/openid-configuration" not in issuer.fetches[1:]:
        time.sleep(0.01)
    started = time.monotonic()
    verifier.verify(issuer.token())
    assert time.monotonic() - started < 0.5
    issuer.mode = "ok"
    fetching.join(10)


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


# --- trusted publishers: matching, pinning, the jti once ---------------------------------------


def test_a_trusted_repository_publishes(issuer, creds, state_dir):
    trust.add(state_dir, "alpha", REPOSITORY)
    who = creds.authenticate(bearer(issuer.token()), "alpha")
    assert who == Publisher(f"github {REPOSITORY} ({RELEASE})")


def test_the_repository_is_matched_whatever_its_case(issuer, creds, state_dir):
    trust.add(state_dir, "alpha", "Octo-Org/Octo-Repo")
    creds.authenticate(bearer(issuer.token()), "alpha")


@pytest.mark.parametrize(
    "slug, repository",
    [
        ("alpha", "octo-org/other-repo"),  # another repository
        ("alpha", "octo-org/octo-rep"),  # a prefix of it
        ("beta", REPOSITORY),  # trusted by another project
        ("gamma", REPOSITORY),  # a project that is not there: the route answers 404
    ],
)
def test_a_valid_token_of_a_repository_not_trusted_is_forbidden(
    issuer, creds, state_dir, slug, repository
):
    trust.add(state_dir, "alpha", repository)
    with pytest.raises(Forbidden, match=REPOSITORY):
        creds.authenticate(bearer(issuer.token()), slug)


@pytest.mark.parametrize(
    "job_workflow_ref",
    [
        f"{REPOSITORY}/.github/workflows/release.yaml@refs/heads/main",
        f"{REPOSITORY}/.github/workflows/prerelease.yml@refs/heads/main",
        f"{REPOSITORY}/.github/workflows/release.yml.bak@refs/heads/main",
        f"{REPOSITORY}/.github/workflows/x/release.yml@refs/heads/main",
        f"{REPOSITORY}/github/workflows/release.yml@refs/heads/main",
        "octo-org/other/.github/workflows/release.yml@refs/heads/main",  # a reusable one
        "octo-org/octo-rep0/.github/workflows/release.yml@refs/heads/main",  # as long
        f"{REPOSITORY}/.github/workflows/release.yml",
    ],
)
def test_a_workflow_set_must_be_the_jobs(issuer, creds, state_dir, job_workflow_ref):
    trust.add(state_dir, "alpha", REPOSITORY, workflow="release.yml")
    with pytest.raises(Forbidden, match="release.yml"):
        creds.authenticate(bearer(issuer.token(job_workflow_ref=job_workflow_ref)), "alpha")


def test_the_workflow_is_matched_at_any_ref(issuer, creds, state_dir):
    trust.add(state_dir, "alpha", REPOSITORY, workflow="release.yml")
    for ref in ("refs/heads/main", "refs/tags/v1.0", "refs/pull/3/merge"):
        job = f"{REPOSITORY.upper()}/{RELEASE}@{ref}"
        creds.authenticate(bearer(issuer.token(job_workflow_ref=job)), "alpha")


@pytest.mark.parametrize("environment", [None, "", "staging", "release-2"])
def test_an_environment_set_must_be_the_jobs(issuer, creds, state_dir, environment):
    trust.add(state_dir, "alpha", REPOSITORY, environment="release")
    with pytest.raises(Forbidden, match="environment"):
        creds.authenticate(bearer(issuer.token(environment=environment)), "alpha")


def test_environments_are_matched_whatever_their_case(issuer, creds, state_dir):
    # GitHub's environment names are not case-sensitive.
    trust.add(state_dir, "alpha", REPOSITORY, environment="Release")
    creds.authenticate(bearer(issuer.token(environment="release")), "alpha")


def test_without_an_environment_set_any_environment_publishes(issuer, creds, state_dir):
    trust.add(state_dir, "alpha", REPOSITORY, workflow="release.yml")
    creds.authenticate(bearer(issuer.token(environment="whatever")), "alpha")


def test_any_of_several_publishers_may_match(issuer, creds, state_dir):
    trust.add(state_dir, "alpha", REPOSITORY, workflow="nightly.yml")
    trust.add(state_dir, "alpha", REPOSITORY, workflow="release.yml", environment="release")
    creds.authenticate(bearer(issuer.token(environment="release")), "alpha")
    with pytest.raises(Forbidden):
        creds.authenticate(bearer(issuer.token()), "alpha")


# --- a ref pattern (--ref): the branches or tags a publisher may publish from -------------------


@pytest.mark.parametrize(
    "pattern, ref, matches",
    [
        ("refs/heads/main", "refs/heads/main", True),
        ("refs/heads/main", "refs/heads/main2", False),
        ("refs/heads/main", "refs/heads/Main", False),  # git's refs are case-sensitive
        ("refs/heads/main", "refs/pull/3/merge", False),  # a pull request's
        ("refs/heads/main", None, False),  # a token without the claim
        ("refs/heads/v1.0", "refs/heads/v1x0", False),  # a dot is a dot
        ("refs/tags/v*", "refs/tags/v1.21.4", True),
        ("refs/tags/v*", "refs/tags/v", True),
        ("refs/tags/v*", "refs/tags/x1", False),
        ("refs/tags/v*", "refs/tags/v1/x", False),  # * stops at a /
        ("refs/tags/v*", "refs/heads/v1", False),
        ("refs/heads/release/*", "refs/heads/release/1.21", True),
        ("refs/heads/release/*", "refs/heads/release/1.21/x", False),
        ("refs/heads/release/**", "refs/heads/release/1.21/x", True),  # ** does not
        ("refs/heads/release/**", "refs/heads/release", False),
        ("refs/*/main", "refs/tags/main", True),
    ],
)
def test_a_ref_pattern_limits_publishing_to_the_refs_it_matches(
    issuer, creds, state_dir, pattern, ref, matches
):
    trust.add(state_dir, "alpha", REPOSITORY, ref=pattern)
    token = issuer.token(ref=ref)
    if matches:
        creds.authenticate(bearer(token), "alpha")
    else:
        with pytest.raises(Forbidden, match="ref"):
            creds.authenticate(bearer(token), "alpha")


@pytest.mark.parametrize(
    "pattern, ref, matches",
    [
        ("refs/heads/***", "refs/heads/a/b", True),  # ** then *
        ("refs/heads/*/**", "refs/heads/a", False),
        ("refs/heads/*/**", "refs/heads/a/", True),
        ("refs/heads/**/x", "refs/heads/a/b/x", True),
        ("refs/heads/**", "refs/heads/", True),
        ("refs/heads/a*b*c", "refs/heads/aXbYbZc", True),
        ("refs/heads/a*b*c", "refs/heads/aXbYbZ/c", False),
        ("refs/heads/a.b+c(d)$", "refs/heads/a.b+c(d)$", True),  # no regular expression
        ("refs/heads/a.b+c(d)$", "refs/heads/aXbbc(d)", False),
        ("refs/heads/*", "refs/heads/é", True),
    ],
)
def test_a_ref_pattern_matches_by_its_wildcards_alone(pattern, ref, matches):
    assert trust.ref_matches(pattern, ref) is matches


def test_a_ref_pattern_of_many_wildcards_is_decided_at_once():
    """A ref comes in a token, its branch or tag named by whoever may push to the repository:
    a pattern of a few `*` and a long ref that it does not match must not take the match
    (under the trust database's lock) minutes, as a backtracking regular expression does."""
    pattern, ref = "refs/heads/" + "*a" * 8 + "*b", "refs/heads/" + "a" * 250
    started = time.monotonic()
    assert not trust.ref_matches(pattern, ref)
    assert trust.ref_matches(pattern, ref + "b")
    assert time.monotonic() - started < 1


def test_a_ref_refused_names_the_ref_presented_and_the_pattern_trusted(issuer, creds, state_dir):
    trust.add(state_dir, "alpha", REPOSITORY, workflow="release.yml", ref="refs/tags/v*")
    with pytest.raises(Forbidden) as refusal:
        creds.authenticate(bearer(issuer.token(ref="refs/heads/feature\nx")), "alpha")
    assert str(refusal.value) == (
        f"{REPOSITORY} is trusted for alpha as workflow release.yml, any environment, "
        f"ref refs/tags/v*, and this job runs {RELEASE} in no environment on ref "
        "refs/heads/feature\\nx"
    )
    with pytest.raises(Forbidden, match="on no ref$"):
        creds.authenticate(bearer(issuer.token(ref=None)), "alpha")


def test_a_publisher_of_another_ref_may_match(issuer, creds, state_dir):
    trust.add(state_dir, "alpha", REPOSITORY, ref="refs/heads/main")
    trust.add(state_dir, "alpha", REPOSITORY, ref="refs/tags/v*")
    for ref in ("refs/heads/main", "refs/tags/v2"):
        creds.authenticate(bearer(issuer.token(ref=ref)), "alpha")
    with pytest.raises(Forbidden, match="ref refs/heads/main; any workflow"):
        creds.authenticate(bearer(issuer.token(ref="refs/heads/dev")), "alpha")


@pytest.mark.parametrize(
    "overrides, command",
    [
        ({}, f"buildshelf trust alpha --github {REPOSITORY} --workflow release.yml"),
        (
            {"environment": "release"},
            f"buildshelf trust alpha --github {REPOSITORY} --workflow release.yml "
            "--environment release",
        ),
        (
            {"environment": "pre release"},
            f"buildshelf trust alpha --github {REPOSITORY} --workflow release.yml "
            "--environment 'pre release'",
        ),
        (  # a reusable workflow of another repository: no --workflow says it
            {"job_workflow_ref": "octo-org/shared/.github/workflows/publish.yml@refs/heads/main"},
            f"buildshelf trust alpha --github {REPOSITORY}",
        ),
        (  # a workflow name --workflow refuses: none said
            {"job_workflow_ref": f"{REPOSITORY}/.github/workflows/a b.yml@refs/heads/main"},
            f"buildshelf trust alpha --github {REPOSITORY}",
        ),
    ],
)
def test_a_repository_not_trusted_is_told_the_command_that_would_trust_it(
    issuer, creds, state_dir, overrides, command
):
    trust.add(state_dir, "alpha", "octo-org/other")
    with pytest.raises(Forbidden) as refusal:
        creds.authenticate(bearer(issuer.token(**overrides)), "alpha")
    assert str(refusal.value) == (
        f"{REPOSITORY} is not a trusted publisher of alpha (on the server, this would trust "
        f"it: {command})"
    )


def test_a_slug_in_another_case_finds_its_publishers_and_names_the_project(
    issuer, creds, state_dir
):
    trust.add(state_dir, "alpha", REPOSITORY, environment="release")
    creds.authenticate(bearer(issuer.token(environment="release")), "Alpha")
    with pytest.raises(Forbidden, match="trusted for alpha as"):
        creds.authenticate(bearer(issuer.token()), "ALPHA")
    with pytest.raises(Forbidden, match="it: buildshelf trust beta --github"):
        creds.authenticate(bearer(issuer.token()), "Beta")


@pytest.mark.parametrize("claim", ["repository_owner_id", "repository_id"])
def test_the_ids_are_pinned_on_first_use(issuer, creds, state_dir, claim):
    trust.add(state_dir, "alpha", REPOSITORY, workflow="release.yml")
    trust.add(state_dir, "alpha", REPOSITORY, workflow="nightly.yml")
    assert [(t.owner_id, t.repository_id) for t in trust.listed(state_dir, "alpha")] == [
        (None, None),
        (None, None),
    ]
    creds.authenticate(bearer(issuer.token()), "alpha")
    assert [(t.owner_id, t.repository_id) for t in trust.listed(state_dir, "alpha")] == [
        ("65", "74"),
        ("65", "74"),  # one repository, one pair of ids, whichever workflow came first
    ]
    # The repository deleted and made again under the same name: other ids.
    for workflow in ("release.yml", "nightly.yml"):
        with pytest.raises(Forbidden, match="ids"):
            creds.authenticate(bearer(issuer.token(workflow=workflow, **{claim: "999"})), "alpha")
    creds.authenticate(bearer(issuer.token()), "alpha")  # the first still publishes
    # Removed and added again, it pins the new ids.
    trust.remove(state_dir, "alpha", 2)
    trust.remove(state_dir, "alpha", 1)
    trust.add(state_dir, "alpha", REPOSITORY)
    creds.authenticate(bearer(issuer.token(**{claim: "999"})), "alpha")
    with pytest.raises(Forbidden, match="ids"):
        creds.authenticate(bearer(issuer.token()), "alpha")


def test_a_refused_token_pins_nothing(issuer, creds, state_dir):
    trust.add(state_dir, "alpha", REPOSITORY, environment="release")
    with pytest.raises(Forbidden):
        creds.authenticate(bearer(issuer.token(repository_id="999")), "alpha")
    creds.authenticate(bearer(issuer.token(environment="release")), "alpha")


def test_a_token_is_accepted_once(issuer, creds, state_dir):
    trust.add(state_dir, "alpha", REPOSITORY)
    token = issuer.token()
    creds.authenticate(bearer(token), "alpha")
    with pytest.raises(Unauthorized, match="used already: request a fresh one"):
        creds.authenticate(bearer(token), "alpha")
    creds.authenticate(bearer(issuer.token()), "alpha")


def test_a_forbidden_token_is_spent_too(issuer, creds, state_dir):
    token = issuer.token()
    with pytest.raises(Forbidden):
        creds.authenticate(bearer(token), "alpha")
    trust.add(state_dir, "alpha", REPOSITORY)
    with pytest.raises(Unauthorized, match="used already"):
        creds.authenticate(bearer(token), "alpha")


def test_an_invalid_token_spends_nothing(issuer, creds, state_dir):
    trust.add(state_dir, "alpha", REPOSITORY)
    jti = "5d41402a-bc4b-2a76-b971-9d911017c592"
    with pytest.raises(Unauthorized, match="audience"):
        creds.authenticate(bearer(issuer.token(jti=jti, aud="x")), "alpha")
    creds.authenticate(bearer(issuer.token(jti=jti)), "alpha")


def test_spent_jtis_are_forgotten_once_their_token_expired(state_dir):
    now = 2_000_000_000
    assert trust.spend(state_dir, "a", now + 10, now=now)
    assert trust.spend(state_dir, "b", now + 1000, now=now)
    assert not trust.spend(state_dir, "a", now + 10, now=now + 5)
    assert trust.spend(state_dir, "c", now + 1000, now=now + 11)  # "a" forgotten now
    with sqlite3.connect(os.path.join(state_dir, "trust.sqlite3")) as db:
        assert sorted(row[0] for row in db.execute("SELECT jti FROM spent")) == ["b", "c"]


def test_the_verifier_is_given_the_expiry_with_its_leeway(issuer, creds, state_dir, monkeypatch):
    spent = []
    monkeypatch.setattr(trust, "spend", lambda state, jti, until: spent.append(until) or True)
    trust.add(state_dir, "alpha", REPOSITORY)
    exp = int(time.time()) + 100
    creds.authenticate(bearer(issuer.token(exp=exp)), "alpha")
    assert spent == [exp + oidc.LEEWAY]


def test_credentials_refuse_an_invalid_token_as_unauthorized(issuer, creds, state_dir):
    trust.add(state_dir, "alpha", REPOSITORY)
    for token, why in [
        (issuer.token(exp=int(time.time()) - 100), "expired"),
        (issuer.token(aud="https://other.example.org"), "audience"),
        (issuer.token(key=new_key()), "signature"),
        (issuer.token(alg="none"), "RS256"),
    ]:
        with pytest.raises(Unauthorized, match=why):
            creds.authenticate(bearer(token), "alpha")


def test_credentials_answer_unavailable_within_the_timeout(issuer, creds):
    assert creds.verifier.timeout == oidc.TIMEOUT  # the default, shortened here for speed
    creds.verifier.timeout = 1.0
    issuer.mode = "slow"
    started = time.monotonic()
    with pytest.raises(Unavailable, match="try again"):
        creds.authenticate(bearer(issuer.token()), "alpha")
    assert time.monotonic() - started < 1.0 + 1
    # Another kind of credential never waits for the issuer.
    issuer.fetches.clear()
    started = time.monotonic()
    with pytest.raises(Unauthorized):
        creds.authenticate("Bearer bs_3f9a0c1d2b7e_" + "A" * 43, "alpha")
    assert time.monotonic() - started < 0.5 and issuer.fetches == []


def test_a_locked_trust_database_is_unavailable(issuer, creds, state_dir, monkeypatch):
    trust.add(state_dir, "alpha", REPOSITORY)
    monkeypatch.setattr(state, "BUSY_SECONDS", 0.1)
    with closing(state.connect(state_dir, "trust")) as other:
        other.execute("BEGIN EXCLUSIVE")
        with pytest.raises(Unavailable, match="locked"):
            creds.authenticate(bearer(issuer.token()), "alpha")
        other.rollback()
    creds.authenticate(bearer(issuer.token()), "alpha")


def test_the_workflow_and_environment_are_named_on_one_printable_line(issuer, creds, state_dir):
    trust.add(state_dir, "alpha", REPOSITORY)
    job = f"{REPOSITORY}/.github/workflows/a\nb.yml@refs/heads/main"
    who = creds.authenticate(bearer(issuer.token(job_workflow_ref=job)), "alpha").who
    assert who == f"github {REPOSITORY} (.github/workflows/a\\nb.yml)"
    trust.add(state_dir, "beta", REPOSITORY, environment="release")
    with pytest.raises(Forbidden) as refusal:
        creds.authenticate(bearer(issuer.token(job_workflow_ref=job, environment="x\ny")), "beta")
    assert "a\\nb.yml in environment x\\ny" in str(refusal.value)


def test_the_audience_is_the_public_url_without_its_slash(issuer, state_dir):
    trust.add(state_dir, "alpha", REPOSITORY)
    creds = Credentials(state_dir, issuer.url, AUDIENCE + "/")
    creds.authenticate(bearer(issuer.token()), "alpha")


def test_the_trust_database_is_private(issuer, creds, state_dir):
    trust.add(state_dir, "alpha", REPOSITORY)
    creds.authenticate(bearer(issuer.token()), "alpha")
    assert stat.S_IMODE(os.stat(state_dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(os.path.join(state_dir, "trust.sqlite3")).st_mode) == 0o600


# --- buildshelf trust ---------------------------------------------------------------------------


def run(capsys, *argv):
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_trust_adds_lists_and_removes(data_dir, capsys):
    data = ("--data", str(data_dir))
    assert run(capsys, "trust", "alpha", "--github", "o/r", *data) == (
        0,
        "alpha trusts github o/r, any workflow, any environment, any ref (1)\n",
        "",
    )
    status, out, _ = run(
        capsys, "trust", "alpha", "--github", "o/r", "--workflow", "release.yml",
        "--environment", "release", *data,
    )  # fmt: skip
    assert status == 0 and out.endswith("(2)\n")
    run(capsys, "trust", "alpha", "--github", "Octo-Org/Octo-Repo", *data)
    run(capsys, "trust", "beta", "--github", "b/b", *data)
    assert run(capsys, "trust", "alpha", "--list", *data) == (
        0,
        "1. github o/r, any workflow, any environment, any ref\n"
        "2. github o/r, workflow release.yml, environment release, any ref\n"
        "3. github Octo-Org/Octo-Repo, any workflow, any environment, any ref\n",
        "",
    )
    assert run(capsys, "trust", "alpha", "--remove", "2", *data) == (
        0,
        "alpha no longer trusts github o/r, workflow release.yml, environment release, any ref\n",
        "",
    )
    _, out, _ = run(capsys, "trust", "alpha", "--list", *data)
    assert out.splitlines() == [
        "1. github o/r, any workflow, any environment, any ref",
        "2. github Octo-Org/Octo-Repo, any workflow, any environment, any ref",
    ]


def test_trust_again_changes_nothing(data_dir, capsys):
    data = ("--data", str(data_dir))
    run(capsys, "trust", "alpha", "--github", "o/r", "--workflow", "r.yml", *data)
    assert run(capsys, "trust", "alpha", "--github", "O/R", "--workflow", "r.yml", *data) == (
        0,
        "alpha trusts github o/r, workflow r.yml, any environment, any ref already (1): "
        "nothing changed\n",
        "",
    )


def test_trust_list_shows_the_pinned_ids(issuer, data_dir, capsys):
    state_dir = str(data_dir / ".buildshelf")
    run(capsys, "trust", "alpha", "--github", REPOSITORY, "--data", str(data_dir))
    Credentials(state_dir, issuer.url, AUDIENCE).authenticate(bearer(issuer.token()), "alpha")
    assert run(capsys, "trust", "alpha", "--list", "--data", str(data_dir))[1] == (
        f"1. github {REPOSITORY}, any workflow, any environment, any ref "
        "(pinned: owner id 65, repository id 74)\n"
    )


def test_trust_with_a_ref_pattern_adds_lists_and_matches_it(issuer, data_dir, capsys):
    data = ("--data", str(data_dir))
    assert run(
        capsys, "trust", "alpha", "--github", REPOSITORY, "--ref", "refs/tags/v*", *data
    ) == (
        0,
        f"alpha trusts github {REPOSITORY}, any workflow, any environment, ref refs/tags/v* (1)\n",
        "",
    )
    _, out, _ = run(
        capsys, "trust", "alpha", "--github", REPOSITORY, "--ref", "refs/tags/v*", *data
    )
    assert out.endswith("already (1): nothing changed\n")
    _, out, _ = run(capsys, "trust", "alpha", "--github", REPOSITORY, "--ref", "refs/heads/main",
                    "--workflow", "release.yml", *data)  # fmt: skip
    assert out.endswith(", ref refs/heads/main (2)\n")
    assert run(capsys, "trust", "alpha", "--list", *data)[1] == (
        f"1. github {REPOSITORY}, any workflow, any environment, ref refs/tags/v*\n"
        f"2. github {REPOSITORY}, workflow release.yml, any environment, ref refs/heads/main\n"
    )
    assert [t.ref for t in trust.listed(str(data_dir / ".buildshelf"), "alpha")] == [
        "refs/tags/v*",
        "refs/heads/main",
    ]
    creds = Credentials(str(data_dir / ".buildshelf"), issuer.url, AUDIENCE)
    creds.authenticate(bearer(issuer.token(ref="refs/tags/v1.0")), "alpha")
    with pytest.raises(Forbidden, match="on ref refs/heads/dev"):
        creds.authenticate(bearer(issuer.token(ref="refs/heads/dev")), "alpha")


def test_trust_follows_the_state_flag(data_dir, tmp_path, capsys):
    state_dir = tmp_path / "state"
    places = ("--data", str(data_dir), "--state", str(state_dir))
    run(capsys, "trust", "alpha", "--github", "o/r", *places)
    assert [t.repository for t in trust.listed(str(state_dir), "alpha")] == ["o/r"]
    assert not (data_dir / ".buildshelf").exists()


def test_trust_list_of_none(data_dir, capsys):
    assert run(capsys, "trust", "alpha", "--list", "--data", str(data_dir)) == (
        0,
        "alpha trusts no publisher: add one with --github OWNER/REPO\n",
        "",
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["trust", "gamma", "--github", "o/r"], "no project 'gamma'"),
        (["trust", "alpha", "--remove", "1"], "alpha has no trusted publisher 1 (--list"),
    ],
)
def test_trust_refusals_are_one_line_and_exit_1(data_dir, capsys, argv, message):
    status, out, err = run(capsys, *argv, "--data", str(data_dir))
    assert status == 1 and out == "" and err.count("\n") == 1
    assert err.startswith("buildshelf trust: ") and message in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--github", "o"], "'o' is not a GitHub repository (OWNER/REPO"),
        (["--github", "o/r/x"], "is not a GitHub repository"),
        (["--github", "o/.."], "is not a GitHub repository"),
        (["--github", "_o/r"], "is not a GitHub repository"),
        (["--github", "https://github.com/o/r"], "is not a GitHub repository"),
        (["--github", "o/r", "--workflow", ".github/workflows/r.yml"], "is not a workflow file"),
        (["--github", "o/r", "--workflow", "r.json"], "is not a workflow file"),
        (["--github", "o/r", "--environment", ""], "is not an environment name"),
        (["--github", "o/r", "--environment", "a\nb"], "is not an environment name"),
        (["--list", "--workflow", "r.yml"], "--workflow, --environment and --ref go with --github"),
        (["--list", "--ref", "refs/heads/main"], "go with --github"),
        (
            ["--github", "o/r", "--ref", "main"],
            "'main' is not a ref pattern: did you mean refs/heads/main?",
        ),
        (
            ["--github", "o/r", "--ref", "v*"],
            "'v*' is not a ref pattern: did you mean refs/heads/v* or refs/tags/v*?",
        ),
        (["--github", "o/r", "--ref", "refs/heads/a b"], "'refs/heads/a b' is not a ref pattern"),
        (["--github", "o/r", "--ref", "refs/heads/[ab]"], "is not a ref pattern (refs/heads/NAME"),
        (["--github", "o/r", "--ref", "refs/heads/a?"], "is not a ref pattern"),
        (["--github", "o/r", "--ref", "refs/"], "is not a ref pattern"),
        (["--github", "o/r", "--ref", "refs/heads/a\nb"], "is not a ref pattern"),
        (["--remove", "1", "--environment", "e"], "go with --github"),
        (["--remove", "0"], "is not a number from --list"),
        ([], "one of the arguments --github --list --remove is required"),
        (["--list", "--remove", "1"], "not allowed with argument"),
    ],
)
def test_trust_bad_usage_exits_2(data_dir, capsys, argv, message):
    with pytest.raises(SystemExit) as exited:
        cli.main(["trust", "alpha", *argv, "--data", str(data_dir)])
    assert exited.value.code == 2 and message in capsys.readouterr().err


def test_the_precheck_refuses_what_cannot_be_valid_without_a_fetch_or_a_spend(
    issuer, creds, state_dir
):
    """Credentials.precheck, which the server runs before an upload's body is read: a token
    expired, for another audience or unsigned is refused with no fetch; a valid one passes,
    unspent, and publishes once after it."""
    trust.add(state_dir, "alpha", REPOSITORY)
    for token in (
        issuer.token(exp=int(time.time()) - 3600),
        issuer.token(aud="https://elsewhere.example.org"),
        issuer.token(alg="none"),
        "not.a.jwt",
    ):
        with pytest.raises(Unauthorized):
            creds.precheck(bearer(token))
    assert issuer.fetches == []
    token = issuer.token()
    creds.precheck(bearer(token))
    creds.precheck(bearer(token))  # nothing spent
    assert creds.authenticate(bearer(token), "alpha").who.startswith(f"github {REPOSITORY}")
