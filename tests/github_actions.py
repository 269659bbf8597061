"""GitHub's runner, stood in for, for the Action (action.yml) and the recipes that publish from
GitHub Actions: the endpoint ACTIONS_ID_TOKEN_REQUEST_URL names, which gives an OIDC token of
tests/oidc_issuer.py for the audience asked (or fails as a test says); a front in front of
Buildshelf, as nginx is, which can fail a request as a proxy would; and a composite action's
steps run as the runner runs them, each `run` by `bash --noprofile --norc -eo pipefail` with
its `env`, the `${{ inputs.* }}` and `${{ github.* }}` in them put in.

    with github_token_endpoint(issuer, "request-token", "acme/tinplate") as endpoint:
        endpoint.url          # ACTIONS_ID_TOKEN_REQUEST_URL
        endpoint.failures     # what the next requests get instead of a token: a status, or
                              # DROP (the connection closed, no answer)
        endpoint.audiences    # the audiences asked, decoded; endpoint.tokens, those given
"""

import http.client
import http.server
import json
import os
import re
import subprocess
import threading
from contextlib import contextmanager
from urllib.parse import parse_qs, urlsplit

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DROP = "drop"  # a connection closed with no answer, as a proxy restarting does
LOST = "lost"  # passed on, then answered 502: the publish went through, its answer was lost


@contextmanager
def http_thread(handler):
    """An HTTP/1.1 server on 127.0.0.1 with `handler`, in a thread: yields its URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class Quiet(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body, headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def fail(self, failure):
        """Answer `failure`: a status, with a body that says whose failure it is and which
        (`Endpoint failure 1 (503)`), or DROP."""
        self.server.failed = getattr(self.server, "failed", 0) + 1
        if failure == DROP:
            self.close_connection = True
            return
        name = type(self).__name__
        self.answer(failure, f"{name} failure {self.server.failed} ({failure})".encode())


class TokenEndpoint:
    def __init__(self, url):
        self.url, self.failures, self.audiences, self.tokens = url, [], [], []


@contextmanager
def github_token_endpoint(issuer, request_token, repository, **claims):
    """A stand-in of the endpoint ACTIONS_ID_TOKEN_REQUEST_URL names: for the job's request
    token (bearer), an OIDC token of `repository`'s release.yml with `claims`, minted by
    `issuer` for the audience asked. Yields a TokenEndpoint."""

    class Endpoint(Quiet):
        def do_GET(self):
            if endpoint.failures:
                return self.fail(endpoint.failures.pop(0))
            query = parse_qs(urlsplit(self.path).query)
            if self.headers.get("Authorization", "").lower() != f"bearer {request_token}":
                return self.answer(401, b'{"message": "Unauthorized"}')
            assert query["api-version"] == ["2.0"]
            [audience] = query["audience"]
            endpoint.audiences.append(audience)
            token = issuer.token(aud=audience, repository=repository, workflow="release.yml",
                                 **claims)  # fmt: skip
            endpoint.tokens.append(token)
            body = json.dumps({"count": 1734, "value": token}).encode()
            self.answer(200, body, [("Content-Type", "application/json")])

    with http_thread(Endpoint) as url:
        endpoint = TokenEndpoint(url + "/idtoken/f00?api-version=2.0")
        yield endpoint


class Front:
    def __init__(self, url, upstream_port):
        self.url, self.upstream_port, self.failures, self.passed = url, upstream_port, [], []


@contextmanager
def front(upstream_port=None, prefix=""):
    """A proxy in front of Buildshelf on 127.0.0.1:`upstream_port` (or, if None, the
    `upstream_port` set on the Front it yields, once Buildshelf runs), as nginx is, serving it
    under the path `prefix`: each write is passed on, but for those `failures` names, in
    order: a status answered without passing it on, DROP, or LOST. `passed` holds the status
    of each write passed on. Yields a Front."""

    class Proxy(Quiet):
        def do_PUT(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            failure = proxy.failures.pop(0) if proxy.failures else None
            if failure not in (None, LOST):
                return self.fail(failure)
            assert self.path.startswith(prefix + "/")
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("expect", "host")}
            upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
            upstream.request(self.command, self.path[len(prefix) :], body, headers)
            answer = upstream.getresponse()
            data, status = answer.read(), answer.status
            upstream.close()
            proxy.passed.append(status)
            if failure == LOST:
                return self.fail(502)
            self.answer(status, data, [("Content-Type", answer.getheader("Content-Type"))])

    with http_thread(Proxy) as url:
        proxy = Front(url + prefix, upstream_port)
        yield proxy


def action():
    """action.yml at the repository's root, read."""
    with open(os.path.join(ROOT, "action.yml"), encoding="utf-8") as f:
        return yaml.safe_load(f)


def expanded(text, contexts):
    """`text` with each `${{ CONTEXT.NAME }}` replaced by contexts[CONTEXT][NAME] (a name
    may have dots: github.event.before); any other expression fails the test."""

    def value(match):
        context, _, name = match[1].partition(".")
        assert context in contexts and name in contexts[context], match[0]
        return str(contexts[context][name])

    return re.sub(r"\$\{\{\s*([\w.-]+)\s*\}\}", value, str(text))


def run_action(inputs, github, environment, cwd, timeout=120):
    """The composite action of action.yml run as GitHub's runner runs it: its inputs (`inputs`,
    else their defaults, which may use `github`), then each step's `run` in `cwd` with
    `environment`, the step's env and GITHUB_ACTION_PATH. The last step's CompletedProcess."""
    declared = action()["inputs"]
    assert set(inputs) <= set(declared), set(inputs) - set(declared)
    values = {}
    for name, spec in declared.items():
        if name in inputs:
            values[name] = str(inputs[name])
        else:
            assert not spec.get("required"), f"the input {name} is required"
            values[name] = expanded(spec.get("default", ""), {"github": github})
    contexts = {"inputs": values, "github": github}
    assert action()["runs"]["using"] == "composite"
    for step in action()["runs"]["steps"]:
        assert step["shell"] == "bash"
        step_env = {k: expanded(v, contexts) for k, v in step.get("env", {}).items()}
        assert "${{" not in step["run"]  # inputs reach the script by env, never by its text
        result = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            cwd=cwd, env={**environment, **step_env, "GITHUB_ACTION_PATH": ROOT},
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        if result.returncode != 0:
            break
    return result
