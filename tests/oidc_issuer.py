"""A GitHub Actions OIDC issuer for tests: a real HTTP server on 127.0.0.1 (a thread) serving
the discovery document and the JWKS of an RSA key made for the test, and tokens minted with
GitHub's claims.

    with OidcIssuer(audience="https://builds.example.org") as issuer:
        issuer.url                        # http://127.0.0.1:PORT: --github-oidc-issuer
        issuer.token()                    # a valid token of octo-org/octo-repo's release.yml
        issuer.token(repository="o/r", environment="release")   # claims overridden
        issuer.token(exp=time.time() - 120)                     # expired
        issuer.token(job_workflow_ref=None)                     # None: the claim left out
        issuer.token(kid="nobody")        # a kid the JWKS does not list
        issuer.token(key=new_key())       # signed by a key not published, under its kid
        issuer.token(alg="none")          # unsigned; alg="HS256": HMAC keyed with the
                                          # public key's PEM (the key-confusion attack)
        issuer.add_key()                  # a new key published; tokens now signed with it
        issuer.mode = "down"              # "ok", "down" (connection closed, no answer),
                                          # "slow" (no answer until "ok" or the end),
                                          # "garbage" (200, not JSON), "error" (500)
        issuer.discovery["issuer"] = ...  # the discovery document, to tamper with
        issuer.fetches                    # the paths asked for, in order

Every claim has a GitHub-like default; `repository` also sets the default `sub`,
`repository_owner` and `job_workflow_ref`, and `workflow` (a file name) the default
`job_workflow_ref`. Times are whole seconds since the epoch.
"""

import base64
import hashlib
import hmac
import http.server
import json
import threading
import time
import uuid

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

AUDIENCE = "https://builds.example.org"


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


# An issuer's first, second... key, made once for every issuer: a 2048-bit key takes about
# 40 ms to make, and a test starts an issuer of its own. new_key() is never one of them.
_ISSUER_KEYS = []


def _issuer_key(n: int) -> rsa.RSAPrivateKey:
    while len(_ISSUER_KEYS) <= n:
        _ISSUER_KEYS.append(new_key())
    return _ISSUER_KEYS[n]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class OidcIssuer:
    def __init__(self, audience: str = AUDIENCE):
        self.audience = audience
        self.keys = {}  # kid -> private key, all published
        self.kid = None  # the kid tokens are signed with by default
        self.add_key()
        self.mode = "ok"
        self.fetches = []
        self._released = threading.Event()
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                issuer.fetches.append(self.path)
                if issuer.mode == "slow":
                    while issuer.mode == "slow" and not issuer._released.wait(0.05):
                        pass
                if issuer.mode == "down":
                    self.close_connection = True
                    return
                body = {
                    "/.well-known/openid-configuration": issuer.discovery,
                    "/.well-known/jwks": issuer.jwks(),
                }.get(self.path)
                status = 404 if body is None else 500 if issuer.mode == "error" else 200
                data = b"<html>not json" if issuer.mode == "garbage" else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.discovery = {
            "issuer": self.url,
            "jwks_uri": self.url + "/.well-known/jwks",
            "subject_types_supported": ["public", "pairwise"],
            "response_types_supported": ["id_token"],
            "id_token_signing_alg_values_supported": ["RS256"],
        }
        # Polled every 10 ms, so that a shutdown is quick.
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.01,))
        self._thread.daemon = True

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._released.set()
        self.server.shutdown()
        self.server.server_close()

    def add_key(self) -> str:
        """A new key, published beside the others; tokens are signed with it from now on."""
        self.kid = uuid.uuid4().hex
        self.keys[self.kid] = _issuer_key(len(self.keys))
        return self.kid

    def jwks(self) -> dict:
        keys = []
        for kid, key in self.keys.items():
            jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
            keys.append({**jwk, "kid": kid, "use": "sig", "alg": "RS256"})
        return {"keys": keys}

    def claims(self, **overrides) -> dict:
        """GitHub's claims for a push to main running .github/workflows/release.yml."""
        now = int(time.time())
        repository = overrides.get("repository")
        if not isinstance(repository, str):  # left out or of another type: defaults from this
            repository = "octo-org/octo-repo"
        workflow = overrides.pop("workflow", "release.yml")
        claims = {
            "jti": str(uuid.uuid4()),
            "sub": f"repo:{repository}:ref:refs/heads/main",
            "aud": self.audience,
            "ref": "refs/heads/main",
            "sha": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4",
            "repository": repository,
            "repository_owner": repository.partition("/")[0],
            "repository_owner_id": "65",
            "repository_id": "74",
            "repository_visibility": "public",
            "run_id": "2",
            "run_number": "1",
            "run_attempt": "1",
            "runner_environment": "github-hosted",
            "actor": "octocat",
            "actor_id": "12",
            "workflow": "Release",
            "workflow_ref": f"{repository}/.github/workflows/{workflow}@refs/heads/main",
            "job_workflow_ref": f"{repository}/.github/workflows/{workflow}@refs/heads/main",
            "event_name": "push",
            "ref_type": "branch",
            "iss": self.url,
            "nbf": now - 5,
            "iat": now,
            "exp": now + 300,
        }
        claims.update(overrides)
        return {name: value for name, value in claims.items() if value is not None}

    def token(self, *, kid=None, key=None, alg="RS256", headers=None, **overrides) -> str:
        """A token of `claims(**overrides)`, signed by `key` (default: the key of `kid`, by
        default the current one) under the header kid `kid` with `alg`."""
        kid = kid or self.kid
        claims = self.claims(**overrides)
        header = {"kid": kid, **(headers or {})}
        if alg in ("none", "HS256"):  # the attacks, which PyJWT would not sign
            return self._forged(claims, {"alg": alg, "typ": "JWT", **header})
        key = key or self.keys.get(kid) or self.keys[self.kid]
        return jwt.encode(claims, key, algorithm=alg, headers=header)

    def _forged(self, claims, header) -> str:
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        if header["alg"] == "none":
            return signing_input + "."
        public_key = self.keys[self.kid].public_key()
        public_pem = public_key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        mac = hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()
        return f"{signing_input}.{_b64(mac)}"
