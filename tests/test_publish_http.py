"""Publishing and yanking over HTTP (web/publish.py), through webtest: every answer of the
write routes, the body parsed as a stream into the artifact store with nothing left behind,
read-your-writes, the rate limit, the log line, CORS, and `screen` called directly as the
server calls it once a request's headers are in."""

import errno
import hashlib
import json
import logging
import math
import os
import re
import shutil
import signal
import socket
import sqlite3
import struct
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

import pytest
import webob
import webtest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from buildshelf import cli, files, server
from buildshelf.kept import artifacts
from buildshelf.publishing import credentials, oidc, tokens, trust
from buildshelf.publishing.credentials import Credentials
from buildshelf.web import given_build, publish
from buildshelf.web.contract import Deferred
from buildshelf.web.query import ApiError
from buildshelf.web.ratelimit import FailureLimit
from buildshelf.writing import rewrite
from helpers import (
    ALPHA_TOKEN,
    ANY_TOKEN,
    FakeCredentials,
    eventually,
    free_port,
    real_server,
    server_argv,
    wait_for_port,
)
from oidc_issuer import OidcIssuer, new_key

API = "/api/v2"
SECRETS = ("s" * 43, "t" * 43)  # of ALPHA_TOKEN and ANY_TOKEN
JAR = b"PK\x03\x04 a jar's bytes\n" * 100
JAR_SHA = hashlib.sha256(JAR).hexdigest()


@pytest.fixture
def app(store):
    return server.make_app(store, credentials=FakeCredentials(), max_file_mb=1)


@pytest.fixture
def web(app):
    """A client that never refreshes the store itself (no watcher runs): a GET shows a write
    only if the write made the store read it."""
    return webtest.TestApp(app, extra_environ={"REMOTE_ADDR": "192.0.2.1"})


def auth(token=ALPHA_TOKEN):
    return {"Authorization": f"Bearer {token}"}


BOUNDARY = "----buildshelf-test-boundary"


def form(*parts, boundary=BOUNDARY, end=True):
    """A multipart/form-data body of `parts`: (name, bytes) or (name, bytes, filename), or
    raw bytes as they are; (content type, body)."""
    body = b""
    for part in parts:
        if isinstance(part, bytes):
            body += part
            continue
        name, value, *filename = part
        disposition = f'form-data; name="{name}"'
        if filename:
            disposition += f'; filename="{filename[0]}"'
        body += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n".encode()
        body += (json.dumps(value).encode() if not isinstance(value, bytes) else value) + b"\r\n"
    if end:
        body += f"--{boundary}--\r\n".encode()
    return f"multipart/form-data; boundary={boundary}", body


def put(web, number, *parts, slug="alpha", token=ALPHA_TOKEN, query="", end=True, **kw):
    content_type, body = form(*parts, end=end)
    return web.put(
        f"{API}/projects/{slug}/builds/{number}{query}",
        body,
        headers={**auth(token), "Content-Type": content_type},
        expect_errors=True,
        **kw,
    )


def put_json(web, number, build, slug="alpha", token=ALPHA_TOKEN, query=""):
    return web.put(
        f"{API}/projects/{slug}/builds/{number}{query}",
        json.dumps(build).encode(),
        headers={**auth(token), "Content-Type": "application/json"},
        expect_errors=True,
    )


def error(resp, status, code):
    assert resp.status_int == status, resp.body
    assert resp.content_type == "application/json"
    assert set(resp.json) == {"error", "code"}
    assert resp.json["code"] == code
    return resp.json["error"]


def leftovers(data_dir):
    """Every file in the artifact store that is not an object."""
    store = data_dir / "artifacts"
    if not store.exists():
        return []
    return sorted(
        str(p.relative_to(store))
        for p in store.rglob("*")
        if p.is_file() and p.name not in artifacts.objects(str(store))
    )


def latest(web, slug="alpha"):
    return web.get(f"{API}/builds?project={slug}&experimental=true").json[-1]


KEPT = ({"channelVersion": "1.21", "timestamp": 1700000009000}, JAR, "alpha-9.jar")


def kept(number=9, build=None, data=JAR, name="alpha-9.jar"):
    return (("build", build or dict(KEPT[0])), ("file", data, name))


# --- publishing a kept file ---------------------------------------------------------------------


def test_a_kept_file_is_published_201_and_read_at_once(web, data_dir):
    before = latest(web)  # remembered: a repeat would be answered from memory
    resp = put(web, 9, *kept())
    assert resp.status_int == 201, resp.body
    url = f"http://127.0.0.1:8080/downloads/alpha/9/{JAR_SHA}/alpha-9.jar"
    assert resp.json == {
        "buildNumber": 9,
        "url": "https://ci.example.org/job/Alpha/9/",
        "downloadUrl": url,
        "channelVersion": "1.21",
        "timestamp": 1700000009000,
        "isExperimental": False,
        "commits": [],
        "sha256": JAR_SHA,
        "size": len(JAR),
    }
    assert resp.headers["Cache-Control"] == "no-store"
    # Read your writes: the very next GET shows it, with no watcher and no wait.
    assert latest(web) == resp.json != before
    assert web.get(f"{API}/builds/latest?project=alpha").json == resp.json
    assert web.get(url.removeprefix("http://127.0.0.1:8080")).body == JAR
    assert (data_dir / "artifacts" / JAR_SHA[:2] / JAR_SHA).read_bytes() == JAR
    assert leftovers(data_dir) == []
    doc = json.loads((data_dir / "alpha.json").read_text())
    assert doc["builds"][-1]["file"] == "alpha-9.jar"


def test_an_identical_retry_is_200_and_changes_nothing(web, data_dir):
    first = put(web, 9, *kept())
    assert first.status_int == 201
    before = os.stat(data_dir / "alpha.json")
    again = put(web, 9, *kept())
    assert again.status_int == 200 and again.json == first.json
    assert os.stat(data_dir / "alpha.json").st_ino == before.st_ino
    assert leftovers(data_dir) == []


def test_a_retry_without_a_timestamp_matches_whatever_the_time(web, caplog, monkeypatch):
    build = {"channelVersion": "1.21"}
    first = put(web, 9, *kept(build=build))
    assert first.status_int == 201
    later = given_build.time.time_ns() + 60 * 10**9
    monkeypatch.setattr(given_build.time, "time_ns", lambda: later)
    again = put(web, 9, *kept(build=build))
    assert again.status_int == 200
    assert again.json == first.json  # the build there, with its own time
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_another_build_of_the_same_number_is_409_naming_the_fields(web, data_dir):
    assert put(web, 9, *kept()).status_int == 201
    other = dict(KEPT[0], channelVersion="1.22", isExperimental=True)
    message = error(put(web, 9, *kept(build=other)), 409, "build_exists")
    assert "channelVersion, isExperimental" in message and "?replace=true" in message
    assert str(data_dir) not in message
    assert latest(web)["channelVersion"] == "1.21"
    assert leftovers(data_dir) == []
    # ?replace=true: 200, and the new build, served at once
    resp = put(web, 9, *kept(build=other, data=b"other bytes"), query="?replace=true")
    assert resp.status_int == 200
    assert resp.json["channelVersion"] == "1.22" and resp.json["isExperimental"] is True
    assert latest(web) == resp.json
    # the replaced build's object went, as with `publish --replace`
    assert not (data_dir / "artifacts" / JAR_SHA[:2] / JAR_SHA).exists()
    assert leftovers(data_dir) == []


def test_a_409_for_other_bytes_leaves_no_object(web, data_dir):
    assert put(web, 9, *kept()).status_int == 201
    error(put(web, 9, *kept(data=b"other bytes")), 409, "build_exists")
    assert artifacts.objects(str(data_dir / "artifacts")) == {JAR_SHA: len(JAR)}
    assert leftovers(data_dir) == []


def test_sha256_and_size_given_are_checked_against_the_bytes(web, data_dir):
    build = dict(KEPT[0], sha256=JAR_SHA.upper(), size=len(JAR))
    assert put(web, 9, *kept(build=build)).status_int == 201
    wrong = dict(KEPT[0], sha256="0" * 64)
    message = error(put(web, 10, *kept(10, build=wrong)), 400, "invalid_build")
    assert f"hashes to {JAR_SHA}" in message
    message = error(put(web, 10, *kept(10, build=dict(KEPT[0], size=1))), 400, "invalid_build")
    assert f"the file received is {len(JAR)} bytes" in message
    assert leftovers(data_dir) == []
    assert 10 not in [b["buildNumber"] for b in web.get(f"{API}/builds?project=alpha").json]


def test_url_commits_and_experimental_are_taken(web):
    build = {
        "channelVersion": "1.21",
        "url": "https://ci.example.org/job/Alpha/9/console",
        "isExperimental": True,
        "commits": [{"message": "Fix it", "hash": "abc123"}],
    }
    resp = put(web, 9, *kept(build=build))
    assert resp.status_int == 201
    assert {k: resp.json[k] for k in build} == build


def test_a_project_not_on_jenkins_needs_a_url_400(web, data_dir, store):
    doc = json.loads((data_dir / "alpha.json").read_text())
    doc["ciJobUrl"] = "https://github.com/example/alpha"  # no /job/: no run URL to make
    (data_dir / "alpha.json").write_text(json.dumps(doc))
    store.refresh()
    message = error(put(web, 9, *kept()), 400, "invalid_build")
    assert message == (  # said once, in the API's word for it
        "the build has no url, and ciJobUrl https://github.com/example/alpha is not a Jenkins "
        "job's (its path has no /job/) to make one from: give the address of the build's CI "
        "run as 'url'"
    )
    assert leftovers(data_dir) == []
    build = {"channelVersion": "1.21", "url": "https://github.com/example/alpha/actions/runs/7"}
    assert put(web, 9, *kept(build=build)).status_int == 201


# --- publishing a file kept elsewhere -----------------------------------------------------------


def test_a_json_build_is_published_201(web, data_dir):
    build = {
        "channelVersion": "1.21",
        "downloadUrl": "https://cdn.example.org/alpha-9.jar",
        "sha256": JAR_SHA,
        "size": 12,
    }
    resp = put_json(web, 9, build)
    assert resp.status_int == 201, resp.body
    assert {k: resp.json[k] for k in build} == build
    assert latest(web) == resp.json
    assert put_json(web, 9, build).status_int == 200
    assert not (data_dir / "artifacts").exists()


def test_a_multipart_build_without_a_file_is_kept_elsewhere(web):
    build = {"channelVersion": "1.21", "downloadUrl": "https://cdn.example.org/a.jar"}
    assert put(web, 9, ("build", build)).status_int == 201


# --- 400: the data files' and publish's rules, and a body that is not one -----------------------

FILE = ("file", JAR, "alpha-9.jar")
BAD_BODIES = {
    "no channelVersion": (
        [("build", {"timestamp": 1700000009000}), FILE],
        "missing key 'channelVersion'",
    ),
    "bad channel": (
        [("build", {"channelVersion": "1.21/x"}), FILE],
        "'channelVersion' must be a non-empty string of letters, digits and . _ + -",
    ),
    "bad url": (
        [("build", {"channelVersion": "1.21", "url": "ftp://x"}), FILE],
        "'url' must be an absolute http(s) URL",
    ),
    "timestamp in seconds": (
        [("build", {"channelVersion": "1.21", "timestamp": 1700000000}), FILE],
        "'timestamp' 1700000000 looks like seconds, not milliseconds: give 1700000000000",
    ),
    "timestamp not a number": (
        [("build", {"channelVersion": "1.21", "timestamp": "now"}), FILE],
        "'timestamp' must be an integer",
    ),
    "experimental not a boolean": (
        [("build", {"channelVersion": "1.21", "isExperimental": "yes"}), FILE],
        "'isExperimental' must be true or false",
    ),
    "bad commit": (
        [("build", {"channelVersion": "1.21", "commits": [{"message": "m", "hash": "xyz"}]}), FILE],
        "commits[0]: 'hash' must be a string of hexadecimal digits",
    ),
    "unknown key": (
        [("build", {"channelVersion": "1.21", "gameVersion": "1.21"}), FILE],
        "unknown key 'gameVersion'",
    ),
    "file key": (
        [("build", {"channelVersion": "1.21", "file": "a.jar"}), FILE],
        "the part 'file''s filename",
    ),
    "another build number": (
        [("build", {"channelVersion": "1.21", "buildNumber": 8}), FILE],
        "'buildNumber' is 8, but the path says 9",
    ),
    "downloadUrl beside a file": (
        [("build", {"channelVersion": "1.21", "downloadUrl": "https://x.org/a.jar"}), FILE],
        "give 'downloadUrl' or a part 'file', not both",
    ),
    "no file and no downloadUrl": (
        [("build", {"channelVersion": "1.21"})],
        "missing key 'downloadUrl' (or a part 'file'",
    ),
    "bad sha256": (
        [("build", {"channelVersion": "1.21", "sha256": "abc"}), FILE],
        "'sha256' must be 64 hexadecimal digits",
    ),
    "bad file name": (
        [("build", {"channelVersion": "1.21"}), ("file", JAR, ".hidden.jar")],
        "'.hidden.jar' is not a valid file name: a file name must be ASCII letters",
    ),
    "filename with a path": (
        [("build", {"channelVersion": "1.21"}), ("file", JAR, "../alpha-9.jar")],
        "holds a path: give the file's name alone",
    ),
    "filename with a Windows path": (
        [("build", {"channelVersion": "1.21"}), ("file", JAR, "C:\\\\ci\\\\alpha-9.jar")],
        "holds a path",
    ),
    "filename with a directory": (
        [("build", {"channelVersion": "1.21"}), ("file", JAR, "out/alpha-9.jar")],
        "holds a path",
    ),
    "file part with no filename": (
        [("build", {"channelVersion": "1.21"}), ("file", JAR)],
        "the part 'file' needs a filename",
    ),
    "no build part": ([FILE], "the part 'build' is missing"),
    "unknown part": (
        [("build", {"channelVersion": "1.21"}), ("notes", b"hello")],
        "unknown part 'notes'",
    ),
    "repeated part": (
        [("build", {"channelVersion": "1.21"}), ("build", {"channelVersion": "1.21"})],
        "the part 'build' is given twice",
    ),
    "repeated file part": ([FILE, FILE], "the part 'file' is given twice"),
    "too many parts": (  # 'build', 'file' and 16 extra files at most
        [("build", {"channelVersion": "1.21"}), FILE]
        + [(f"download:a:{n}", b"x", f"{n}.jar") for n in range(17)],
        "the multipart/form-data body has over 18 parts: a publish has a part 'build'",
    ),
    "build part not an object": ([("build", ["1.21"]), FILE], "the build must be a JSON object"),
    "build part a string": ([("build", "1.21"), FILE], "the build must be a JSON object"),
    "build part not JSON": (
        [("build", b"{channelVersion: 1.21}"), FILE],
        "the part 'build' is not a JSON build: line 1, column 2",
    ),
    "build part with a key twice": (
        [("build", b'{"channelVersion": "1", "channelVersion": "2"}'), FILE],
        "the part 'build' is not a JSON build",
    ),
    "build part too large": (
        [("build", {"channelVersion": "1.21", "url": "https://x.org/" + "a" * (1 << 20)}), FILE],
        "the part 'build' may have 1048576 bytes at most",
    ),
    "part header too large": (
        [
            b"--" + BOUNDARY.encode() + b'\r\nContent-Disposition: form-data; name="build"\r\n'
            b"X-Padding: " + b"p" * 5000 + b"\r\n\r\n{}\r\n"
        ],
        "a header line of a part of the multipart/form-data body has over 4096 bytes",
    ),
    "part with no Content-Disposition": (
        [b"--" + BOUNDARY.encode() + b"\r\nContent-Type: text/plain\r\n\r\n{}\r\n"],
        "a part of the multipart/form-data body has no name: each part is a form field, "
        "as curl -F NAME=VALUE sends it",
    ),
    "part without a name": (
        [
            b"--" + BOUNDARY.encode() + b'\r\nContent-Disposition: form-data; filename="a.jar"'
            b"\r\n\r\nx\r\n"
        ],  # fmt: skip
        "a part of the multipart/form-data body has no name",
    ),
    "part that is no form field": (
        [
            b"--" + BOUNDARY.encode() + b'\r\nContent-Disposition: attachment; name="file"'
            b"\r\n\r\nx\r\n"
        ],  # fmt: skip
        "a part of the multipart/form-data body has no name",
    ),
    "part header without a colon": (
        [
            b"--" + BOUNDARY.encode() + b'\r\nContent-Disposition form-data; name="build"'
            b"\r\n\r\n{}\r\n"
        ],  # fmt: skip
        "a header line of a part of the multipart/form-data body is not NAME: VALUE",
    ),
    # curl -F 'file=@a.jar,b.jar' sends both files in one part, as a multipart/mixed
    "two files in the part file": (
        [
            ("build", {"channelVersion": "1.21"}),
            b"--" + BOUNDARY.encode() + b'\r\nContent-Disposition: form-data; name="file"\r\n'
            b"Content-Type: multipart/mixed; boundary=inner\r\n\r\n--inner\r\n"
            b'Content-Disposition: attachment; filename="a.jar"\r\n\r\naaa\r\n--inner\r\n'
            b'Content-Disposition: attachment; filename="b.jar"\r\n\r\nbbb\r\n--inner--\r\n'
            b"\r\n",
        ],  # fmt: skip
        "the part 'file' holds several files (as curl -F 'file=@A,B' sends them): give one "
        "file a part, -F file=@NAME for the build's file and -F download:KEY=@NAME for each "
        "extra file",
    ),
}

# The multipart parser's own words, which a curl user cannot act on.
LIBRARY_WORDS = ("segment", "parser", "stream", "Content-Disposition", "option", "Wrong type")


@pytest.mark.parametrize("parts, said", BAD_BODIES.values(), ids=BAD_BODIES.keys())
def test_a_bad_body_is_400_naming_the_problem_and_leaves_nothing(web, data_dir, parts, said):
    before = (data_dir / "alpha.json").read_bytes()
    message = error(put(web, 9, *parts), 400, "invalid_build")
    assert said in message
    assert not [word for word in LIBRARY_WORDS if word in message]
    assert (data_dir / "alpha.json").read_bytes() == before
    assert leftovers(data_dir) == []
    assert artifacts.objects(str(data_dir / "artifacts")) == {}


def test_a_body_with_no_end_is_400(web, data_dir):
    message = error(put(web, 9, *kept(), end=False), 400, "invalid_build")
    assert message == (
        "the multipart/form-data body ends before its last boundary: it was cut short (the "
        "client stopped sending), and nothing was kept"
    )
    assert leftovers(data_dir) == [] and artifacts.objects(str(data_dir / "artifacts")) == {}


def test_a_body_cut_short_of_its_content_length_is_400(app, data_dir):
    content_type, body = form(*kept())
    request = webob.Request.blank(
        f"{API}/projects/alpha/builds/9",
        method="PUT",
        headers={**auth(), "Content-Type": content_type},
        body=body[: len(body) // 2],
    )
    request.environ["CONTENT_LENGTH"] = str(len(body))  # the client left halfway
    resp = request.get_response(app)
    assert resp.status_int == 400 and resp.json["code"] == "invalid_build"
    assert leftovers(data_dir) == [] and artifacts.objects(str(data_dir / "artifacts")) == {}


def test_a_multipart_body_without_a_boundary_is_400(web):
    resp = web.put(
        f"{API}/projects/alpha/builds/9",
        b"x",
        headers={**auth(), "Content-Type": "multipart/form-data"},
        expect_errors=True,
    )
    assert "boundary" in error(resp, 400, "invalid_build")


@pytest.mark.parametrize(
    "body, said",
    [
        (b"[]", "the build must be a JSON object"),
        (b'"1.21"', "the build must be a JSON object"),
        (b"{", "the body is not a JSON build"),
        (b'{"channelVersion": NaN}', "the body is not a JSON build"),
    ],
)
def test_a_bad_json_body_is_400(web, body, said):
    resp = web.put(
        f"{API}/projects/alpha/builds/9",
        body,
        headers={**auth(), "Content-Type": "application/json"},
        expect_errors=True,
    )
    assert said in error(resp, 400, "invalid_build")


def test_a_build_number_that_is_not_one_is_400(web):
    message = error(put(web, "x9", *kept()), 400, "invalid_build")
    assert "whole number" in message


# --- who may write -------------------------------------------------------------------------------


def test_no_credential_is_401_with_www_authenticate(web):
    content_type, body = form(*kept())
    resp = web.put(
        f"{API}/projects/alpha/builds/9",
        body,
        headers={"Content-Type": content_type},
        expect_errors=True,
    )
    error(resp, 401, "unauthorized")
    assert resp.headers["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize("token", ["nope", "bs_alpha1_wrong", ""])
def test_an_unknown_credential_is_401(web, data_dir, token):
    resp = put(web, 9, *kept(), token=token)
    error(resp, 401, "unauthorized")
    assert resp.headers["WWW-Authenticate"] == "Bearer"
    assert leftovers(data_dir) == [] and artifacts.objects(str(data_dir / "artifacts")) == {}


def test_a_credential_of_another_project_is_403(web, data_dir):
    before = (data_dir / "beta.json").read_bytes()
    error(put(web, 11, *kept(), slug="beta"), 403, "forbidden")
    assert (data_dir / "beta.json").read_bytes() == before
    assert leftovers(data_dir) == [] and artifacts.objects(str(data_dir / "artifacts")) == {}


def test_a_slug_typo_is_told_the_project_it_may_mean(web, data_dir, capsys):
    # As the command line says it (writer.no_project): CI's log shows the fix.
    message = error(put(web, 9, *kept(), slug="alpah", token=ANY_TOKEN), 404, "unknown_project")
    assert "did you mean alpha?" in message
    assert cli.main(["yank", "alpah", "1", "--data", str(data_dir)]) == 1
    assert "did you mean alpha?" in capsys.readouterr().err
    far = error(put(web, 9, *kept(), slug="zzzzzz", token=ANY_TOKEN), 404, "unknown_project")
    assert "did you mean" not in far


@pytest.mark.parametrize("token", [ALPHA_TOKEN, ANY_TOKEN])
def test_a_project_that_does_not_exist_is_404_for_any_valid_credential(web, data_dir, token):
    error(put(web, 1, *kept(), slug="gamma", token=token), 404, "unknown_project")
    assert not (data_dir / "gamma.json").exists()
    assert leftovers(data_dir) == []


def test_a_slug_in_any_letter_case_names_the_project_as_reads_do(web, data_dir):
    assert put(web, 9, *kept(), slug="Alpha").status_int == 201
    assert latest(web)["buildNumber"] == 9
    assert not (data_dir / "Alpha.json").exists()
    resp = web.delete(f"{API}/projects/ALPHA/builds/9", headers=auth())
    assert resp.status_int == 204


def test_an_unreachable_issuer_is_503(web):
    error(put(web, 9, *kept(), token="down"), 503, "credentials_unavailable")


def test_a_token_for_every_project_publishes_to_any(web):
    assert put(web, 11, *kept(11), slug="beta", token=ANY_TOKEN).status_int == 201


def test_an_app_without_credentials_refuses_every_write_401(store):
    web = webtest.TestApp(server.make_app(store))
    error(put(web, 9, *kept()), 401, "unauthorized")


# --- 413, 415 -----------------------------------------------------------------------------------


def test_a_file_over_max_file_mb_is_413(web, data_dir):
    # The body fits the framing room (max-file-mb plus the part 'build'), the file does not.
    message = error(put(web, 9, *kept(data=b"x" * ((1 << 20) + 1))), 413, "too_large")
    assert "1 MiB" in message
    assert leftovers(data_dir) == [] and artifacts.objects(str(data_dir / "artifacts")) == {}


def test_a_file_of_max_file_mb_is_taken(web):
    assert put(web, 9, *kept(data=b"x" * (1 << 20))).status_int == 201


def test_a_content_length_over_the_limit_is_413_before_the_body(web, data_dir):
    content_type, body = form(*kept())
    resp = web.put(
        f"{API}/projects/alpha/builds/9",
        body + b"x" * publish.max_body_bytes(1 << 20),
        headers={**auth(), "Content-Type": content_type},
        expect_errors=True,
    )
    error(resp, 413, "too_large")
    assert leftovers(data_dir) == []


@pytest.mark.parametrize("content_type", ["text/plain", "application/octet-stream", ""])
def test_another_media_type_is_415(web, content_type):
    resp = web.put(
        f"{API}/projects/alpha/builds/9",
        b"{}",
        headers={**auth(), "Content-Type": content_type},
        expect_errors=True,
    )
    error(resp, 415, "unsupported_media_type")


# --- 507 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_full_disk_while_receiving_the_file_is_507(web, data_dir, monkeypatch, code):
    written = []

    def full(fd, chunk):
        if written:
            raise OSError(code, os.strerror(code))
        written.append(os.write(fd, chunk))

    monkeypatch.setattr(files, "write_all", full)
    before = (data_dir / "alpha.json").read_bytes()
    resp = put(web, 9, *kept(data=b"x" * (1 << 20)))  # read in two chunks
    error(resp, 507, "insufficient_storage")
    assert written  # it failed mid-file
    assert (data_dir / "alpha.json").read_bytes() == before
    assert leftovers(data_dir) == [] and artifacts.objects(str(data_dir / "artifacts")) == {}


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_full_disk_while_writing_the_project_file_is_507(web, data_dir, monkeypatch, code):
    def full(path, data, mode):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(rewrite, "replace_file", full)
    before = (data_dir / "alpha.json").read_bytes()
    error(put(web, 9, *kept()), 507, "insufficient_storage")
    assert (data_dir / "alpha.json").read_bytes() == before
    assert leftovers(data_dir) == [] and artifacts.objects(str(data_dir / "artifacts")) == {}


# --- DELETE -------------------------------------------------------------------------------------


def test_delete_yanks_204_marks_the_build_and_keeps_its_file(web, data_dir):
    assert put(web, 9, *kept()).status_int == 201
    assert latest(web)["buildNumber"] == 9
    resp = web.delete(f"{API}/projects/alpha/builds/9", headers=auth())
    assert resp.status_int == 204 and resp.body == b""
    assert 9 not in [b["buildNumber"] for b in web.get(f"{API}/builds?project=alpha").json]
    gone = web.get(f"/downloads/alpha/9/{JAR_SHA}/alpha-9.jar", status=410)
    assert gone.json["code"] == "build_yanked" and gone.headers["Cache-Control"] == "no-store"
    assert list(artifacts.objects(str(data_dir / "artifacts"))) == [JAR_SHA]
    doc = json.loads((data_dir / "alpha.json").read_text())
    assert "yankedAt" in next(b for b in doc["builds"] if b["buildNumber"] == 9)
    # a second DELETE finds it yanked: nothing changes
    assert web.delete(f"{API}/projects/alpha/builds/9", headers=auth()).status_int == 204
    # its number may be published again: the new build replaces the yanked one
    assert put(web, 9, *kept()).status_int in (200, 201)
    assert latest(web)["buildNumber"] == 9


def yank(web, number=9, body=None, slug="alpha", query="", content_type="application/json"):
    """A DELETE of build `number`, with `body` (a value to send as JSON, or bytes as they
    are)."""
    headers = auth()
    if body is not None:
        body = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
        headers["Content-Type"] = content_type
    return web.delete(f"{API}/projects/{slug}/builds/{number}{query}", body or "",
                      headers=headers, expect_errors=True)  # fmt: skip


def in_file(data_dir, number):
    doc = json.loads((data_dir / "alpha.json").read_text())
    return next(b for b in doc["builds"] if b["buildNumber"] == number)


def test_delete_takes_a_reason_in_a_json_body(web, data_dir, caplog):
    caplog.set_level(logging.INFO)
    assert put(web, 9, *kept()).status_int == 201
    resp = yank(web, 9, {"reason": "crashes on start — see #12"})
    assert resp.status_int == 204 and resp.body == b""
    assert in_file(data_dir, 9)["yankReason"] == "crashes on start — see #12"
    gone = web.get(f"/downloads/alpha/9/{JAR_SHA}/alpha-9.jar", status=410)
    assert gone.json["reason"] == "crashes on start — see #12"
    said = [r.getMessage() for r in caplog.records if r.name == publish.log.name]
    assert said[-1] == (
        f"yanked build 9 of alpha (sha256 {JAR_SHA}, reason: crashes on start — see #12) by "
        "token alpha1 from 192.0.2.1"
    )
    assert yank(web, 1, {"reason": "two\nlines,\ta tab"}).status_int == 204  # kept as text
    assert in_file(data_dir, 1)["yankReason"] == "two\nlines,\ta tab"
    said = [r.getMessage() for r in caplog.records if r.name == publish.log.name]
    assert said[-1].endswith("reason: two\\nlines,\\ta tab) by token alpha1 from 192.0.2.1")
    # Already yanked: the mark stays as it was, reason and all.
    assert yank(web, 9, {"reason": "another"}).status_int == 204
    assert in_file(data_dir, 9)["yankReason"] == "crashes on start — see #12"
    for number, none in ((5, {}), (7, {"reason": ""}), (8, b"")):  # no reason
        assert yank(web, number, none).status_int == 204
        assert "yankedAt" in in_file(data_dir, number)
        assert "yankReason" not in in_file(data_dir, number)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"wrong jar", "the body is not JSON: "),
        (b'{"reason": "a", "reason": "b"}', "the body is not JSON: "),
        (b"\xff\xfe", "the body is not JSON: "),
        (["wrong jar"], 'the body must be a JSON object: {"reason": "..."}'),
        ("wrong jar", 'the body must be a JSON object: {"reason": "..."}'),
        ({"reason": "x", "purge": True}, "the body has 'purge': it takes 'reason' only"),
        ({"why": "x"}, "the body has 'why': it takes 'reason' only"),
        ({"reason": 3}, "'reason' must be a string"),
        ({"reason": None}, "'reason' must be a string"),
        ({"reason": "wrong\x1b[2Jjar"},
         "'reason' holds a control character (\\x1b at character 6): a reason is text, tabs and "
         "line breaks its only control characters"),
        ({"reason": "\x00"}, "'reason' holds a control character (\\x00 at character 1)"),
        (b'{"reason": "x\\ud800"}', "'reason' holds a lone surrogate"),
    ],
)  # fmt: skip
def test_a_bad_reason_is_400_and_yanks_nothing(web, data_dir, body, said):
    before = (data_dir / "alpha.json").read_bytes()
    message = error(yank(web, 5, body), 400, "invalid_reason")
    assert said in message
    assert (data_dir / "alpha.json").read_bytes() == before


def test_a_reason_in_the_query_is_400_never_dropped(web, data_dir):
    before = (data_dir / "alpha.json").read_bytes()
    message = error(yank(web, 5, query="?reason=wrong%20jar"), 400, "invalid_reason")
    assert 'give the reason in a JSON body: {"reason": "..."}' in message
    assert (data_dir / "alpha.json").read_bytes() == before


def test_a_reason_of_another_type_or_too_big_is_refused_on_its_head(web, data_dir):
    resp = yank(web, 5, b"reason=wrong+jar", content_type="application/x-www-form-urlencoded")
    message = error(resp, 415, "unsupported_media_type")
    assert "Content-Type: application/json" in message  # what curl -d alone misses
    resp = yank(web, 5, {"reason": "x" * 1100})
    assert "1024 bytes at most" in error(resp, 413, "too_large")
    assert "yankedAt" not in in_file(data_dir, 5)
    assert yank(web, 5, {"reason": "é" * 400}).status_int == 204  # 800 bytes of UTF-8


# --- unyank and purge over HTTP -----------------------------------------------------------------


def unyank(web, number=9, slug="alpha", token=ALPHA_TOKEN, **kw):
    return web.post(f"{API}/projects/{slug}/builds/{number}/unyank", headers=auth(token),
                    expect_errors=True, **kw)  # fmt: skip


def purge(web, number=9, slug="alpha", token=ALPHA_TOKEN, **kw):
    return web.post(f"{API}/projects/{slug}/builds/{number}/purge", headers=auth(token),
                    expect_errors=True, **kw)  # fmt: skip


def test_unyank_serves_the_build_again_204_and_a_retry_changes_nothing(web, data_dir, caplog):
    caplog.set_level(logging.INFO)
    published = put(web, 9, *kept()).json
    before = in_file(data_dir, 9)
    assert yank(web, 9, {"reason": "oops"}).status_int == 204
    resp = unyank(web)
    assert resp.status_int == 204 and resp.body == b""
    assert in_file(data_dir, 9) == before
    assert latest(web)["buildNumber"] == 9  # read back: the next GET shows it
    web.get(f"/downloads/alpha/9/{JAR_SHA}/alpha-9.jar", status=200)
    assert latest(web) == published
    again = unyank(web)  # a retry (its answer lost): the build is served, as asked
    assert again.status_int == 204
    said = [r.getMessage() for r in caplog.records if r.name == publish.log.name]
    assert said[-2:] == [
        "unyanked build 9 of alpha by token alpha1 from 192.0.2.1",
        "unyanked build 9 of alpha (served already) by token alpha1 from 192.0.2.1",
    ]


def test_unyank_of_a_purged_build_is_409_and_of_none_404(web, data_dir):
    assert put(web, 9, *kept()).status_int == 201
    assert yank(web, 9).status_int == 204 and purge(web).status_int == 200
    message = error(unyank(web), 409, "build_purged")
    assert "alpha-9.jar" in message and "PUT it again" in message
    assert "buildshelf publish" not in message  # the command's remedy is not an API client's
    assert str(data_dir) not in message  # nor the store's path, the server's own
    assert "yankedAt" in in_file(data_dir, 9)
    error(unyank(web, 99), 404, "unknown_build")
    error(unyank(web, "x"), 404, "unknown_build")


def test_purge_deletes_a_yanked_build_s_file_once_and_says_so(web, data_dir, caplog):
    caplog.set_level(logging.INFO)
    assert put(web, 9, *kept()).status_int == 201
    assert yank(web, 9).status_int == 204
    resp = purge(web)
    assert resp.status_int == 200 and resp.headers["Cache-Control"] == "no-store"
    file = {"key": "server:default", "file": "alpha-9.jar", "sha256": JAR_SHA}
    assert resp.json == {"files": [{**file, "status": "deleted"}]}
    assert artifacts.objects(str(data_dir / "artifacts")) == {}
    assert "yankedAt" in in_file(data_dir, 9)  # still yanked: its URL answers 410
    web.get(f"/downloads/alpha/9/{JAR_SHA}/alpha-9.jar", status=410)
    assert purge(web).json == {"files": [{**file, "status": "gone"}]}  # a retry
    said = [r.getMessage() for r in caplog.records if r.name == publish.log.name]
    assert said[-2:] == [
        "purged build 9 of alpha (1 file deleted) by token alpha1 from 192.0.2.1",
        "purged build 9 of alpha (0 files deleted) by token alpha1 from 192.0.2.1",
    ]


@pytest.mark.parametrize("number", [2**53, 2**64, 10**29])
def test_a_build_number_over_2_53_is_refused_and_nothing_written(web, data_dir, number):
    """A number no JSON reader keeps exactly, nor the download counts' SQLite past 2**63."""
    before = (data_dir / "alpha.json").read_text()
    message = error(put(web, number, *kept()), 400, "invalid_build")
    assert "is over 9007199254740991" in message
    assert (data_dir / "alpha.json").read_text() == before
    assert artifacts.objects(str(data_dir / "artifacts")) == {}


def test_purge_deletes_a_file_yanked_later_than_the_server_s_clock(web, data_dir):
    """A purge over HTTP is of one build, now, whatever its yank time: one ahead of this
    server's clock (a clock stepped back since, another instance's) is not "not due", and
    never answered "gone" for a file still served from the store."""
    assert put(web, 9, *kept()).status_int == 201 and yank(web, 9).status_int == 204
    path = data_dir / "alpha.json"
    doc = json.loads(path.read_text())
    for build in doc["builds"]:
        if build["buildNumber"] == 9:
            build["yankedAt"] = time.time_ns() // 1_000_000 + 3_600_000  # in an hour
    path.write_text(json.dumps(doc))
    assert purge(web).json["files"][0]["status"] == "deleted"
    assert artifacts.objects(str(data_dir / "artifacts")) == {}


def test_purge_keeps_a_file_another_build_uses_and_only_this_build_s(web, data_dir):
    assert put(web, 9, *kept()).status_int == 201
    assert put(web, 10, *kept(build={**KEPT[0], "timestamp": 1700000010000})).status_int == 201
    other = b"other bytes"
    assert put(web, 11, *kept(data=other, name="alpha-11.jar")).status_int == 201
    for number in (9, 11):
        assert yank(web, number).status_int == 204
    resp = purge(web, 9)
    assert resp.json["files"] == [
        {"key": "server:default", "file": "alpha-9.jar", "sha256": JAR_SHA, "status": "kept"}
    ]
    assert set(artifacts.objects(str(data_dir / "artifacts"))) == {
        JAR_SHA,
        hashlib.sha256(other).hexdigest(),  # 11 is yanked, but not purged: not asked
    }


def test_purge_of_a_build_served_is_409_of_one_elsewhere_empty(web, data_dir):
    assert put(web, 9, *kept()).status_int == 201
    message = error(purge(web), 409, "build_not_yanked")
    assert "yank it first" in message
    assert list(artifacts.objects(str(data_dir / "artifacts"))) == [JAR_SHA]
    assert yank(web, 5).status_int == 204
    assert purge(web, 5).json == {"files": []}  # its file is elsewhere: nothing kept here
    error(purge(web, 99), 404, "unknown_build")


def test_purge_while_a_data_file_cannot_be_read_is_409_and_deletes_nothing(web, data_dir):
    assert put(web, 9, *kept()).status_int == 201 and yank(web, 9).status_int == 204
    (data_dir / "beta.json").write_text('{"ciJob": ')
    message = error(purge(web), 409, "project_file_invalid")
    assert "beta.json cannot be read as a project file" in message
    assert list(artifacts.objects(str(data_dir / "artifacts"))) == [JAR_SHA]


@pytest.mark.parametrize("action", [unyank, purge])
def test_unyank_and_purge_need_the_same_credential(web, data_dir, action):
    resp = web.post(f"{API}/projects/alpha/builds/1/{action.__name__}", expect_errors=True)
    error(resp, 401, "unauthorized")
    error(action(web, 10, slug="beta"), 403, "forbidden")
    message = error(action(web, 1, slug="alpah"), 404, "unknown_project")
    assert "did you mean alpha?" in message
    assert action(web, 1, slug="ALPHA").status_int in (204, 409)  # any letter case
    assert action(web, 10, slug="beta", token=ANY_TOKEN).status_int in (204, 409)


@pytest.mark.parametrize("action", ["unyank", "purge"])
def test_other_methods_on_unyank_and_purge_are_405(web, action):
    for method in ("GET", "PUT", "DELETE"):
        resp = web.request(f"{API}/projects/alpha/builds/1/{action}", method=method,
                           headers=auth(), expect_errors=True)  # fmt: skip
        error(resp, 405, "method_not_allowed")
        assert resp.headers["Allow"] == "POST"


def test_delete_of_a_build_that_is_not_there_is_404(web):
    resp = web.delete(f"{API}/projects/alpha/builds/99", headers=auth(), expect_errors=True)
    error(resp, 404, "unknown_build")
    resp = web.delete(f"{API}/projects/alpha/builds/x", headers=auth(), expect_errors=True)
    error(resp, 404, "unknown_build")


def test_delete_needs_the_same_credential(web, data_dir):
    resp = web.delete(f"{API}/projects/alpha/builds/1", expect_errors=True)
    error(resp, 401, "unauthorized")
    resp = web.delete(f"{API}/projects/beta/builds/10", headers=auth(), expect_errors=True)
    error(resp, 403, "forbidden")
    resp = web.delete(f"{API}/projects/gamma/builds/1", headers=auth(), expect_errors=True)
    error(resp, 404, "unknown_project")
    assert 1 in [b["buildNumber"] for b in web.get(f"{API}/builds?project=alpha").json]


@pytest.mark.parametrize("write", ["publish", "yank"])
def test_a_project_file_with_a_hand_edit_error_is_a_409_with_the_commands_message(
    web, data_dir, capsys, write
):
    # A 500 told CI to try again (curl --retry does), when only a hand can fix the file.
    path = data_dir / "alpha.json"
    path.write_text(path.read_text().replace('"ciJob"', '"ciJob" ', 1).replace("[", "[,", 1))
    if write == "publish":
        resp = put(web, 9, *kept())
        argv = ["publish", "alpha", "--build", "9", "--url", "https://ci.example.org/job/Alpha/9/"]
        argv += ["--download-url", "https://ci.example.org/alpha-9.jar", "--channel", "1.21"]
    else:
        resp = web.delete(f"{API}/projects/alpha/builds/1", headers=auth(), expect_errors=True)
        argv = ["yank", "alpha", "1"]
    message = error(resp, 409, "project_file_invalid")
    assert cli.main([*argv, "--data", str(data_dir)]) == 1
    assert message in capsys.readouterr().err
    assert "fix it by hand" in message and "alpha.json" in message


def test_other_methods_on_a_build_are_405(web):
    resp = web.get(f"{API}/projects/alpha/builds/1", expect_errors=True)
    error(resp, 405, "method_not_allowed")
    assert resp.headers["Allow"] == "PUT, DELETE"
    resp = web.post(f"{API}/projects/alpha/builds/1", expect_errors=True)
    assert "-X PUT" in error(resp, 405, "method_not_allowed")  # curl -F alone sends a POST
    assert resp.headers["Allow"] == "PUT, DELETE"


# --- at once: two publishes of one number ------------------------------------------------------


def test_two_publishes_of_one_number_at_once_end_whole(app, data_dir):
    web = webtest.TestApp(app)
    results, start = [], threading.Barrier(2)

    def publish_one(data):
        start.wait()
        results.append(put(web, 9, *kept(data=data)).status_int)

    threads = [threading.Thread(target=publish_one, args=(d,)) for d in (JAR, b"other" * 9999)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [201, 409]
    shown = latest(web)
    assert web.get(shown["downloadUrl"].removeprefix("http://127.0.0.1:8080")).status_int == 200
    assert list(artifacts.objects(str(data_dir / "artifacts"))) == [shown["sha256"]]
    assert leftovers(data_dir) == []


# --- the rate limit ------------------------------------------------------------------------------


def test_the_11th_failed_authentication_in_a_minute_is_429_even_with_a_valid_one(web):
    for _ in range(10):
        error(put(web, 9, *kept(), token="nope"), 401, "unauthorized")
    resp = put(web, 9, *kept(), token="nope")
    error(resp, 429, "too_many_requests")
    assert 50 <= int(resp.headers["Retry-After"]) <= 60
    error(put(web, 9, *kept()), 429, "too_many_requests")  # a valid credential too
    resp = web.delete(f"{API}/projects/alpha/builds/1", headers=auth(), expect_errors=True)
    error(resp, 429, "too_many_requests")
    # reads are never limited; other addresses are unaffected
    web.get(f"{API}/builds/latest?project=alpha")
    other = put(web, 9, *kept(), extra_environ={"REMOTE_ADDR": "192.0.2.2"})
    assert other.status_int == 201


def test_missing_credentials_count_as_failures(web):
    for _ in range(10):
        resp = web.delete(f"{API}/projects/alpha/builds/1", expect_errors=True)
        error(resp, 401, "unauthorized")
    error(put(web, 9, *kept()), 429, "too_many_requests")


def test_the_limit_lasts_until_the_minute_has_passed():
    now = [1000.0]
    limit = FailureLimit(clock=lambda: now[0])
    for _ in range(9):
        limit.failed("a")
    assert limit.retry_after("a") is None  # 9 failures: the 10th may still be tried
    limit.failed("a")
    assert limit.retry_after("a") == 60
    now[0] += 59.5
    assert limit.retry_after("a") == 1
    assert limit.retry_after("b") is None
    now[0] += 0.5
    assert limit.retry_after("a") is None
    limit.failed("a")  # a new window: one failure
    assert limit.retry_after("a") is None


def test_the_limit_keeps_bounded_memory_under_a_flood_of_addresses():
    now = [0.0]
    limit = FailureLimit(max_addresses=100, clock=lambda: now[0])
    for _ in range(10):
        limit.failed("attacker")
    for n in range(10_000):
        limit.failed(f"10.0.{n // 256}.{n % 256}")
        assert len(limit._windows) <= 100
    now[0] += 61
    for n in range(50):
        limit.failed(f"10.1.0.{n}")
    assert len(limit._windows) <= 100


@pytest.mark.parametrize(
    "one, other",
    [
        ("2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff"),  # one IPv6 /64
        ("2001:DB8:1:2::1", "2001:db8:1:2:0:0:0:1"),  # one address, written otherwise
        ("fe80::1%eth0", "fe80::2"),  # a zone names the interface, not the address
        ("::ffff:192.0.2.7", "192.0.2.7"),  # IPv4-mapped IPv6 is IPv4
        ("192.0.2.7", "::FFFF:c000:207"),
    ],
)
def test_failures_from_one_client_network_share_one_window(one, other):
    """As the download counter groups clients, but an IPv4 client is its own address: an
    IPv6 client given a /64 has every address in it, an IPv4 /24 is 256 clients."""
    limit = FailureLimit()
    for _ in range(10):
        limit.failed(one)
    assert limit.retry_after(other) == 60


@pytest.mark.parametrize(
    "one, other",
    [
        ("192.0.2.7", "192.0.2.8"),  # an IPv4 /24 is not one client
        ("2001:db8:1:2::1", "2001:db8:1:3::1"),
        ("0:0:0:c000::1", "192.0.0.0"),  # an IPv6 /64 is never an IPv4 address
        ("::c000:207", "192.0.2.7"),  # IPv4-compatible is not IPv4-mapped
        ("unix", "unix:"),  # what is not an address is keyed as itself
    ],
)
def test_failures_from_other_clients_do_not_limit_one(one, other):
    limit = FailureLimit()
    for _ in range(10):
        limit.failed(one)
    assert limit.retry_after(one) == 60
    assert limit.retry_after(other) is None


def test_a_flood_of_new_addresses_cannot_let_a_refused_one_in_early():
    now = [0.0]
    limit = FailureLimit(max_addresses=100, clock=lambda: now[0])
    for _ in range(10):
        limit.failed("192.0.2.66")
    for n in range(10_000):
        limit.failed(f"10.0.{n // 256}.{n % 256}")
        assert len(limit._windows) <= 100
    assert limit.retry_after("192.0.2.66") == 60
    now[0] += 60
    assert limit.retry_after("192.0.2.66") is None


def test_when_every_window_remembered_refuses_a_new_address_is_not_remembered():
    now = [0.0]
    limit = FailureLimit(limit=2, max_addresses=4, clock=lambda: now[0])
    refused = [f"192.0.2.{n}" for n in range(4)]
    for address in refused * 2:
        limit.failed(address)
    for _ in range(5):
        limit.failed("198.51.100.1")
    assert limit.retry_after("198.51.100.1") is None
    assert all(limit.retry_after(address) == 60 for address in refused)
    now[0] += 30
    limit.failed("192.0.2.0")  # a refused window: counted on, not opened anew
    now[0] += 30  # every window over: room again
    for _ in range(2):
        limit.failed("198.51.100.1")
    assert limit.retry_after("198.51.100.1") == 60
    assert len(limit._windows) <= 4


# --- screen: refused on the headers alone --------------------------------------------------------


def environ(method="GET", path=f"{API}/builds/latest", **more):
    return {"REQUEST_METHOD": method, "PATH_INFO": path, "REMOTE_ADDR": "192.0.2.9", **more}


WRITE = f"{API}/projects/alpha/builds/9"
MULTIPART = "multipart/form-data; boundary=x"


def test_screen_lets_reads_and_small_bodies_through(app):
    assert app.screen(environ()) is None
    assert app.screen(environ(CONTENT_LENGTH="1024")) is None
    assert app.screen(environ("POST", CONTENT_LENGTH="0")) is None


@pytest.mark.parametrize("length", ["1", "1025", str(1 << 31)])
def test_screen_answers_a_post_to_a_build_405_whatever_its_body(app, length):
    # curl -F without -X PUT: told what to do on the head, not 413 for the file's size.
    refused = app.screen(environ("POST", WRITE, CONTENT_LENGTH=length, CONTENT_TYPE=MULTIPART))
    assert (refused.status_code, refused.code) == (405, "method_not_allowed")
    assert refused.headers["Allow"] == "PUT, DELETE" and "-X PUT" in refused.body
    chunked = app.screen(environ("POST", WRITE, HTTP_TRANSFER_ENCODING="chunked"))
    assert (chunked.status_code, chunked.code) == (405, "method_not_allowed")


def test_screen_refuses_a_body_over_1_kib_on_any_other_route(app):
    refused = app.screen(environ(CONTENT_LENGTH="1025"))
    assert (refused.status_code, refused.code) == (413, "too_large")
    refused = app.screen(environ("PUT", f"{API}/builds", CONTENT_LENGTH="99999"))
    assert (refused.status_code, refused.code) == (413, "too_large")
    refused = app.screen(environ(HTTP_TRANSFER_ENCODING="chunked"))
    assert refused.status_code == 413


def proven(verdict):
    """What a screen's verdict proves: it defers the credential's proof to the server's
    deciding threads."""
    assert isinstance(verdict, Deferred), verdict
    return verdict.decide()


def test_screen_of_a_write(app):
    ok = dict(HTTP_AUTHORIZATION=f"Bearer {ALPHA_TOKEN}", CONTENT_TYPE=MULTIPART)
    most = app.max_body_bytes
    assert most == (1 << 20) + publish.FRAMING_BYTES
    assert proven(app.screen(environ("PUT", WRITE, CONTENT_LENGTH=str(most), **ok))).who
    refused = app.screen(environ("PUT", WRITE, CONTENT_LENGTH=str(most + 1), **ok))
    assert (refused.status_code, refused.code) == (413, "too_large")
    assert "a file of 1 MiB at most (the server's --max-file-mb; the extra files of a " in (
        refused.body
    )
    json_ok = dict(ok, CONTENT_TYPE="application/json; charset=utf-8")
    assert proven(app.screen(environ("PUT", WRITE, CONTENT_LENGTH=str(1 << 20), **json_ok)))
    refused = app.screen(environ("PUT", WRITE, CONTENT_LENGTH=str((1 << 20) + 1), **json_ok))
    assert refused.status_code == 413
    refused = app.screen(
        environ("PUT", WRITE, CONTENT_LENGTH="10", **dict(ok, CONTENT_TYPE="text/plain"))
    )
    assert (refused.status_code, refused.code) == (415, "unsupported_media_type")
    refused = app.screen(environ("DELETE", WRITE, CONTENT_LENGTH="2000", **ok))
    assert refused.status_code == 413
    assert proven(app.screen(environ("DELETE", WRITE, HTTP_AUTHORIZATION=ok["HTTP_AUTHORIZATION"])))
    # No credential, or one that cannot be valid: refused before the body is buffered.
    for authorization in ({}, {"HTTP_AUTHORIZATION": "Bearer x"}):
        refused = app.screen(
            environ("PUT", WRITE, CONTENT_TYPE=MULTIPART, CONTENT_LENGTH="10", **authorization)
        )
        assert (refused.status_code, refused.code) == (401, "unauthorized")
        assert dict(refused.headers.items()) == {"Www-Authenticate": "Bearer"}


def test_screen_answers_429_with_retry_after_while_an_address_is_limited(app):
    for _ in range(10):
        assert app.screen(environ("DELETE", WRITE)).status_code == 401
    refused = app.screen(environ("PUT", WRITE, HTTP_AUTHORIZATION="Bearer x"))
    assert (refused.status_code, refused.code) == (429, "too_many_requests")
    assert 59 <= int(refused.headers["Retry-After"]) <= 60
    assert app.screen(environ()) is None  # reads are never limited
    other = dict(REMOTE_ADDR="192.0.2.10", HTTP_AUTHORIZATION=f"Bearer {ALPHA_TOKEN}")
    assert proven(app.screen(environ("DELETE", WRITE, **other)))


def test_writes_let_through_at_once_are_decided_one_by_one_by_the_limit(store, tmp_path):
    """The limit is asked again when each credential is proven: writes sent together, all
    let through by their heads, get ten 401s and then 429s, as writes sent one by one do."""
    creds = Credentials(str(tmp_path / "state"), "https://issuer.invalid", AUDIENCE)
    app = server.make_app(store, credentials=creds)
    bad = dict(HTTP_AUTHORIZATION="Bearer bs_000000000000_" + "A" * 43, CONTENT_LENGTH="10",
               CONTENT_TYPE="application/json")  # fmt: skip
    verdicts = [app.screen(environ("DELETE", WRITE, **bad)) for _ in range(15)]
    statuses = []
    for verdict in verdicts:
        with pytest.raises(ApiError) as refused:
            proven(verdict)
        statuses.append(refused.value.status_code)
    assert statuses == [401] * 10 + [429] * 5


@pytest.mark.parametrize("action", ["unyank", "purge"])
def test_screen_of_an_unyank_and_a_purge(app, action):
    path = f"{WRITE}/{action}"
    ok = dict(HTTP_AUTHORIZATION=f"Bearer {ALPHA_TOKEN}")
    assert proven(app.screen(environ("POST", path, **ok))).who == "token alpha1"
    refused = app.screen(environ("POST", path))
    assert (refused.status_code, refused.code) == (401, "unauthorized")
    refused = app.screen(environ("POST", path, CONTENT_LENGTH="2000", **ok))
    assert (refused.status_code, refused.code) == (413, "too_large")
    refused = app.screen(environ("PUT", path, CONTENT_LENGTH="10", **ok))  # not a write
    assert (refused.status_code, refused.code) == (405, "method_not_allowed")
    assert refused.headers["Allow"] == "POST"
    assert app.screen(environ("GET", path)) is None  # the route answers 405


def test_screen_of_a_delete_with_a_reason(app):
    ok = dict(HTTP_AUTHORIZATION=f"Bearer {ALPHA_TOKEN}", CONTENT_LENGTH="30")
    json_ok = dict(ok, CONTENT_TYPE="application/json; charset=utf-8")
    assert proven(app.screen(environ("DELETE", WRITE, **json_ok)))
    refused = app.screen(environ("DELETE", WRITE, **dict(ok, CONTENT_TYPE="text/plain")))
    assert (refused.status_code, refused.code) == (415, "unsupported_media_type")
    refused = app.screen(environ("DELETE", WRITE, **ok))  # a body of no Content-Type
    assert (refused.status_code, refused.code) == (415, "unsupported_media_type")
    assert proven(app.screen(environ("DELETE", WRITE, **dict(ok, CONTENT_LENGTH="0"))))


def test_a_chunked_delete_is_refused_on_its_head(app):
    """A DELETE takes 1 KiB at most: a chunked body, whose size no header says, is 413."""
    ok = dict(HTTP_AUTHORIZATION=f"Bearer {ALPHA_TOKEN}", HTTP_TRANSFER_ENCODING="chunked")
    refused = app.screen(environ("DELETE", WRITE, **ok))
    assert (refused.status_code, refused.code) == (413, "too_large")
    # Said so: a reason of 20 bytes is not "over 1024 bytes".
    assert refused.body == "this request may have a body of 1024 bytes at most, not chunked"


# --- the log line, and no secret anywhere --------------------------------------------------------


def test_each_write_is_one_log_line_and_no_secret_is_anywhere(web, data_dir, caplog):
    caplog.set_level(logging.INFO)
    assert put(web, 9, *kept()).status_int == 201
    put(web, 9, *kept(), token="bs_alpha1_" + "s" * 43 + "x")  # a failure, secret-like
    assert web.delete(f"{API}/projects/alpha/builds/9", headers=auth()).status_int == 204
    lines = [r.getMessage() for r in caplog.records if r.name == publish.log.name]
    assert lines == [
        f"added build 9 of alpha (sha256 {JAR_SHA}) by token alpha1 from 192.0.2.1",
        f"yanked build 9 of alpha (sha256 {JAR_SHA}) by token alpha1 from 192.0.2.1",
    ]
    for record in caplog.records:
        assert not any(secret in record.getMessage() for secret in SECRETS)
    for path in data_dir.rglob("*"):
        if path.is_file():
            assert not any(secret.encode() in path.read_bytes() for secret in SECRETS)


# --- CORS ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", [WRITE, f"{WRITE}/unyank", f"{WRITE}/purge", f"{API}/builds/latest", f"{API}/projects"]
)
@pytest.mark.parametrize("method", ["PUT", "DELETE", "POST"])
def test_the_preflight_never_allows_writes_or_authorization(web, path, method):
    resp = web.options(
        path,
        headers={
            "Origin": "https://elsewhere.example",
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": "authorization, content-type",
        },
        expect_errors=True,
    )
    allowed_methods = resp.headers.get("Access-Control-Allow-Methods", "")
    allowed_headers = resp.headers.get("Access-Control-Allow-Headers", "")
    assert method not in allowed_methods.upper()
    assert "AUTHORIZATION" not in allowed_headers.upper()
    assert resp.status_int in (204, 405)


# --- the store that a write reads back ---------------------------------------------------------


def test_a_write_is_read_back_even_when_a_check_holds_the_store(app, store, data_dir):
    """refreshed() gives up after read_wait when another check holds the store: the write
    then waits for it, and still answers from the new data."""
    web = webtest.TestApp(app)
    store.read_wait = 0.01
    with store._reload_lock:
        result = []
        thread = threading.Thread(target=lambda: result.append(put(web, 9, *kept())))
        thread.start()
        thread.join(0.1)
        assert thread.is_alive()  # waiting for the lock this test holds
    thread.join(10)
    assert result[0].status_int == 201
    assert latest(web)["buildNumber"] == 9


# --- end to end: real tokens, a real server ------------------------------------------------------


@pytest.fixture
def state(tmp_path):
    return str(tmp_path / "state")


@pytest.fixture
def real(store, state):
    """A client of the app with the real credentials of the state directory `state`."""
    credentials = Credentials(state, "https://issuer.invalid", "http://127.0.0.1:8080")
    app = server.make_app(store, credentials=credentials, max_file_mb=1)
    return webtest.TestApp(app, extra_environ={"REMOTE_ADDR": "192.0.2.7"})


@pytest.mark.parametrize(
    "free, status, code",
    [(0, 507, "insufficient_storage"), (1 << 30, 503, "credentials_unavailable")],
)
def test_a_token_store_that_cannot_be_opened_is_507_or_503_not_500(
    real, state, data_dir, monkeypatch, free, status, code
):
    """On a full disk SQLite cannot make the tokens' WAL files: 'disk I/O error' as the
    token is checked. That is the full disk's 507 (or 503 if the disk has room), never a
    500 with a traceback."""
    _, text = tokens.create(state, "alpha", 90, "ci")

    def cannot(state_dir, name):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(tokens.state, "connect", cannot)
    monkeypatch.setattr(
        credentials.shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(1, 1, free)
    )
    before = (data_dir / "alpha.json").read_bytes()
    error(put(real, 9, *kept(), token=text), status, code)
    resp = real.delete(f"{API}/projects/alpha/builds/1", headers=auth(text), expect_errors=True)
    error(resp, status, code)
    assert (data_dir / "alpha.json").read_bytes() == before


def test_real_tokens_publish_and_yank_within_their_project(real, state, data_dir):
    alpha, alpha_text = tokens.create(state, "alpha", 90, "ci")
    _, beta_text = tokens.create(state, "beta", 90, "ci")
    _, every_text = tokens.create(state, "*", 90, "ops")
    assert put(real, 9, *kept(), token=alpha_text).status_int == 201
    assert latest(real)["buildNumber"] == 9
    error(put(real, 10, *kept(10), token=beta_text), 403, "forbidden")
    error(put(real, 1, *kept(1), slug="gamma", token=beta_text), 404, "unknown_project")
    error(put(real, 1, *kept(1), slug="gamma", token=every_text), 404, "unknown_project")
    secret_changed = alpha_text[:-1] + ("A" if alpha_text[-1] != "A" else "B")
    error(put(real, 10, *kept(10), token=secret_changed), 401, "unauthorized")
    resp = real.delete(f"{API}/projects/alpha/builds/9", headers=auth(every_text))
    assert resp.status_int == 204
    tokens.revoke(state, alpha.id)  # at once, no restart
    error(put(real, 9, *kept(), token=alpha_text), 401, "unauthorized")
    for path in [*data_dir.rglob("*"), *Path(state).rglob("*")]:
        if path.is_file():
            data = path.read_bytes()
            assert not any(t.split("_")[2].encode() in data for t in (alpha_text, beta_text))


class Running(NamedTuple):
    port: int
    token: tokens.Token
    text: str  # the token, bs_<id>_<secret>
    log: Path  # the server's stderr: its log and its access log


@pytest.fixture
def running(data_dir, state, tmp_path):
    """`python server.py --max-file-mb 4` over the sample data, with a token for alpha."""
    token, text = tokens.create(state, "alpha", 90, "ci")
    port, log_path = free_port(), tmp_path / "server.log"
    with open(log_path, "w") as log_file:
        argv = server_argv(data_dir, "--port", str(port), "--state", state, "--max-file-mb", "4")
        proc = subprocess.Popen(argv, stderr=log_file)
        try:
            if not wait_for_port(port, proc):
                proc.kill()
                pytest.fail("the server did not start")
            yield Running(port, token, text, log_path)
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:  # a server that does not stop: killed, failed
                proc.kill()
                proc.wait()
                raise


@pytest.mark.system
def test_a_publish_through_a_real_server(running, data_dir, state, tmp_path):
    """curl -F to `python server.py`: 201, the GET that follows shows it, the log has one line
    naming the token's id and not its secret, nor does the access log or any file."""
    jar = tmp_path / "alpha-9.jar"
    data = os.urandom(3 << 20)  # far over the 1 KiB that other requests may send
    jar.write_bytes(data)
    base = f"http://127.0.0.1:{running.port}"
    url = f"{base}{API}/projects/alpha/builds/9"
    published = curl(
        "-X", "PUT", "-H", f"Authorization: Bearer {running.text}",
        "-F", 'build={"channelVersion": "1.21"};type=application/json',
        "-F", f"file=@{jar}", url,
    )  # fmt: skip
    assert published.splitlines()[-1] == "201", published
    shown = json.loads(curl(f"{base}{API}/builds/latest?project=alpha").splitlines()[0])
    assert shown["buildNumber"] == 9 and shown["size"] == len(data)
    download = subprocess.run(
        [
            "curl",
            "-fsS",
            shown["downloadUrl"].replace("127.0.0.1:8080", f"127.0.0.1:{running.port}"),
        ],
        capture_output=True,
        timeout=30,
    )
    assert download.stdout == data
    wrong = curl("-X", "PUT", "-H", f"Authorization: Bearer {running.text}x", "-F", "a=b", url)
    assert wrong.splitlines()[-1] == "401"
    assert leftovers(data_dir) == []
    # The access log is written by a thread of its own, in batches: the 401's line is last.
    log_text = eventually(lambda: (text := running.log.read_text()).count(" 401 ") and text)
    sha = hashlib.sha256(data).hexdigest()
    lines = [line for line in log_text.splitlines() if "buildshelf.web.publish" in line]
    assert len(lines) == 1, log_text
    who = f"token {running.token.id} from 127.0.0.1"
    assert f"added build 9 of alpha (sha256 {sha}) by {who}" in lines[0]
    assert f"PUT {API}/projects/alpha/builds/9" in log_text  # the access log is there too
    secret = running.text.split("_")[2]
    assert secret not in log_text
    for path in [*data_dir.rglob("*"), *Path(state).rglob("*")]:
        if path.is_file():
            assert secret.encode() not in path.read_bytes()


@pytest.mark.system
def test_a_yank_with_its_reason_an_unyank_and_a_purge_through_a_real_server(
    running, data_dir, tmp_path
):
    """The recipes of publishing.md, with curl against `python server.py`: the credential
    proven before the body, as for a publish (issue 38)."""
    jar = tmp_path / "alpha-9.jar"
    jar.write_bytes(JAR)
    base = f"http://127.0.0.1:{running.port}"
    url = f"{base}{API}/projects/alpha/builds/9"
    bearer = ("-H", f"Authorization: Bearer {running.text}")
    published = curl("-X", "PUT", *bearer, "-F", 'build={"channelVersion": "1.21"}',
                     "-F", f"file=@{jar}", url)  # fmt: skip
    assert published.splitlines()[-1] == "201", published
    assert curl("-X", "DELETE", *bearer, "--json", '{"reason": "wrong jar"}', url) == "\n204"
    checked = curl(f"{base}{API}/builds/check?project=alpha&build=9").splitlines()
    assert json.loads(checked[0])["reason"] == "wrong jar"
    refused = curl("-X", "DELETE", *bearer, "-d", '{"reason": "x"}', url).splitlines()
    assert refused[-1] == "415" and "curl --json" in json.loads(refused[0])["error"]
    assert curl("-X", "POST", *bearer, url + "/unyank") == "\n204"
    assert curl(f"{base}{API}/builds/latest?project=alpha").startswith('{"buildNumber":9,')
    assert curl("-X", "DELETE", *bearer, url) == "\n204"
    purged = curl("-X", "POST", *bearer, url + "/purge").splitlines()
    assert purged[-1] == "200" and json.loads(purged[0])["files"][0]["status"] == "deleted"
    assert curl("-X", "POST", url + "/purge").splitlines()[-1] == "401"
    assert artifacts.objects(str(data_dir / "artifacts")) == {}
    # The log's lines are written by a thread of their own: the purge's is the last.
    eventually(lambda: "purged build 9 of alpha" in running.log.read_text())
    lines = [line for line in running.log.read_text().splitlines() if "web.publish" in line]
    who = f"by token {running.token.id} from 127.0.0.1"
    assert [line.partition("buildshelf.web.publish: ")[2] for line in lines] == [
        f"added build 9 of alpha (sha256 {JAR_SHA}) {who}",
        f"yanked build 9 of alpha (sha256 {JAR_SHA}, reason: wrong jar) {who}",
        f"unyanked build 9 of alpha {who}",
        f"yanked build 9 of alpha (sha256 {JAR_SHA}) {who}",
        f"purged build 9 of alpha (1 file deleted) {who}",
    ]


@pytest.mark.system
def test_a_real_server_streams_each_extra_file_into_the_store(running, data_dir, tmp_path):
    """curl -F to `python server.py`: the parts download:KEY are received by the server's
    upload as it arrives (web/upload.py fed through `consume`), as the part `file` is."""
    files = {"file": os.urandom(1 << 20), "download:server:mojmap": os.urandom(2 << 20)}
    flags = []
    for part, data in files.items():
        path = tmp_path / f"alpha-9{part.removeprefix('download:server')}.jar".replace(":", "-")
        path.write_bytes(data)
        flags += ["-F", f"{part}=@{path}"]
    url = f"http://127.0.0.1:{running.port}{API}/projects/alpha/builds/9"
    build = (
        '{"channelVersion": "1.21", "downloads": {"x:y": {"downloadUrl": "https://a.example/x"}}}'
    )
    published = curl(
        "-X", "PUT", "-H", f"Authorization: Bearer {running.text}",
        "-F", f"build={build};type=application/json", *flags, url,
    )  # fmt: skip
    assert published.splitlines()[-1] == "201", published
    doc = json.loads((data_dir / "alpha.json").read_text())
    [written] = [b for b in doc["builds"] if b["buildNumber"] == 9]
    assert written["downloads"]["server:mojmap"] == {
        "sha256": hashlib.sha256(files["download:server:mojmap"]).hexdigest(),
        "size": 2 << 20,
        "file": "alpha-9-mojmap.jar",
    }
    assert written["downloads"]["x:y"] == {"downloadUrl": "https://a.example/x"}
    assert sorted(artifacts.objects(str(data_dir / "artifacts"))) == sorted(
        hashlib.sha256(data).hexdigest() for data in files.values()
    )
    assert leftovers(data_dir) == []


def head_of_put(
    running, length, token=None, content_type=f"multipart/form-data; boundary={BOUNDARY}"
):
    authorization = f"Authorization: Bearer {token or running.text}\r\n" if token != "" else ""
    return (
        f"PUT {API}/projects/alpha/builds/9 HTTP/1.1\r\nHost: x\r\n{authorization}"
        f"Content-Type: {content_type}\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def answer_to(port, data, close=False):
    """The status line, headers and JSON body answered to `data` sent on a new connection;
    with `close`, the connection is shut for writing once sent (a client that leaves)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        if close:
            sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, json.loads(body) if body else None


@contextmanager
def half_an_upload(running):
    """A connection that has sent a publish of 2 MiB of random bytes up to half its file:
    (the socket, the rest of the body, the file's bytes)."""
    data = os.urandom(2 << 20)
    content_type, body = form(("build", {"channelVersion": "1.21"}), ("file", data, "alpha-9.jar"))
    half = body.index(data) + len(data) // 2
    with socket.create_connection(("127.0.0.1", running.port), timeout=10) as sock:
        sock.sendall(head_of_put(running, len(body), content_type=content_type) + body[:half])
        yield sock, body[half:], data


def staged_bytes(data_dir):
    """What the store holds that is no object yet: the bytes of the files being received."""
    return sum(os.path.getsize(data_dir / "artifacts" / name) for name in leftovers(data_dir))


@pytest.mark.system
def test_a_real_server_stores_the_file_as_it_arrives(running, data_dir):
    """The file part is hashed and written into the store while it is sent, not once the
    body is all in: half sent, half of it is there (issue 24: the work of four uploads done
    at their end took both cores for a second)."""
    with half_an_upload(running) as (sock, rest, data):
        eventually(lambda: staged_bytes(data_dir) >= len(data) // 2, seconds=5)
        sock.sendall(rest)
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 201 ")
    assert artifacts.objects(str(data_dir / "artifacts")) == {
        hashlib.sha256(data).hexdigest(): len(data)
    }
    assert leftovers(data_dir) == []


@pytest.mark.system
def test_a_client_cut_off_mid_upload_leaves_nothing_in_the_store(running, data_dir):
    """The file received so far, in the store as it came, goes with the connection."""
    with half_an_upload(running):
        eventually(lambda: leftovers(data_dir), seconds=5)  # received into the store as it came
    eventually(lambda: not leftovers(data_dir), seconds=5)
    assert artifacts.objects(str(data_dir / "artifacts")) == {}
    assert "alpha-9" not in curl(
        f"http://127.0.0.1:{running.port}{API}/builds/latest?project=alpha"
    )


@pytest.mark.system
def test_a_body_behind_an_answer_never_read_is_removed_with_its_connection(running, data_dir):
    """A publish pipelined behind a download whose client reads nothing has its file received
    into the store, and waits: once the client goes, the file goes too."""
    big = os.urandom(4 << 20)
    jar = data_dir.parent / "alpha-40.jar"
    jar.write_bytes(big)
    url = f"http://127.0.0.1:{running.port}{API}/projects/alpha/builds/40"
    published = curl("-X", "PUT", "-H", f"Authorization: Bearer {running.text}",
                     "-F", 'build={"channelVersion": "1.21"};type=application/json',
                     "-F", f"file=@{jar}", url)  # fmt: skip
    assert published.splitlines()[-1] == "201", published
    download = urlsplit(json.loads(published.rsplit("\n", 1)[0])["downloadUrl"]).path
    content_type, body = form(
        ("build", {"channelVersion": "1.21"}), ("file", os.urandom(30_000), "alpha-9.jar")
    )
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", running.port))
    sock.sendall(
        f"GET {download} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        + head_of_put(running, len(body), content_type=content_type)
        + body
    )
    eventually(lambda: leftovers(data_dir), seconds=5)  # received, behind the download
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()  # a reset: the download's next send fails
    eventually(lambda: not leftovers(data_dir), seconds=5)


def test_a_boundary_too_long_is_a_400(web):
    boundary = "b" * 1100
    content_type, body = form(*kept(), boundary=boundary)
    resp = web.put(
        f"{API}/projects/alpha/builds/9",
        body,
        headers={**auth(), "Content-Type": content_type},
        expect_errors=True,
    )
    error(resp, 400, "invalid_build")
    assert "Boundary too long" in resp.json["error"]


@pytest.mark.system
def test_a_real_server_answers_413_on_the_head_alone(running, data_dir):
    """The body is never sent: the answer comes at once, in JSON, and the connection closes."""
    over = (4 << 20) + publish.FRAMING_BYTES + 1
    status, headers, body = answer_to(running.port, head_of_put(running, over))
    assert (status, body["code"]) == (413, "too_large")
    assert "4 MiB" in body["error"] and headers["connection"] == "close"
    assert leftovers(data_dir) == []


@pytest.mark.system
def test_a_real_server_answers_a_post_of_a_large_file_405_on_the_head_alone(running, data_dir):
    """curl -F without -X PUT sends a POST: told so at once, not 413 for the file's size."""
    head = head_of_put(running, 2 << 30).replace(b"PUT ", b"POST ", 1)
    status, headers, body = answer_to(running.port, head)
    assert (status, body["code"]) == (405, "method_not_allowed")
    assert headers["allow"] == "PUT, DELETE" and "-X PUT" in body["error"]
    assert headers["connection"] == "close" and leftovers(data_dir) == []


@pytest.mark.system
def test_a_real_server_answers_401_and_then_429_on_the_head_alone(running):
    for _ in range(10):
        status, headers, body = answer_to(running.port, head_of_put(running, 10 << 20, token=""))
        assert (status, headers["www-authenticate"]) == (401, "Bearer")
    status, headers, body = answer_to(running.port, head_of_put(running, 10 << 20))
    assert (status, body["code"]) == (429, "too_many_requests")
    assert 50 <= int(headers["retry-after"]) <= 60


def head_from(client, running):
    """A PUT's head with no credential, as a proxy passes on `client`'s."""
    head = head_of_put(running, 10, token="")
    return head.replace(b"Host: x\r\n", f"Host: x\r\nX-Forwarded-For: {client}\r\n".encode())


@pytest.mark.system
@pytest.mark.parametrize("trusted", [False, True])
def test_the_limit_counts_a_trusted_proxy_s_clients_apart(data_dir, state, trusted):
    """Behind a trusted proxy, the failures of one client (X-Forwarded-For) do not limit
    another; from any other peer, the header is ignored and the peer is the client."""
    flags = ["--state", state] + (["--trusted-proxy", "127.0.0.1"] if trusted else [])
    with real_server(data_dir, *flags) as (port, _):
        running = Running(port, None, "", None)
        for _ in range(10):
            assert answer_to(port, head_from("192.0.2.1", running))[0] == 401
        assert answer_to(port, head_from("192.0.2.1", running))[0] == 429
        assert answer_to(port, head_from("192.0.2.2", running))[0] == (401 if trusted else 429)


@pytest.mark.system
@pytest.mark.parametrize(
    "one, other",
    [
        ("::ffff:203.0.113.7", "::ffff:203.0.113.8"),  # a dual-stack nginx's IPv4 clients
        ("2001:db8:1::7", "2001:db8:2::7"),
        ("[2001:db8:1::7]", "[2001:db8:2::7]"),
        ("203.0.113.7", "203.0.113.8"),
    ],
)
def test_a_trusted_proxy_s_client_is_its_whole_address(data_dir, state, one, other):
    """waitress reads an unbracketed X-Forwarded-For hop with a dot in it as address:port:
    ::ffff:203.0.113.7 was the address ::ffff, port 203.0.113.7, so every IPv4 client of a
    dual-stack nginx was one client to the failure limit, and to the access log ::ffff."""
    with real_server(data_dir, "--state", state, "--trusted-proxy", "127.0.0.1") as (port, proc):
        running = Running(port, None, "", None)
        for _ in range(10):
            assert answer_to(port, head_from(one, running))[0] == 401
        status, _, body = answer_to(port, head_from(one, running))
        whole = one.strip("[]")
        assert status == 429 and f"too many failed authentications from {whole}:" in body["error"]
        assert answer_to(port, head_from(other, running))[0] == 401
        proc.send_signal(signal.SIGINT)
        log = proc.communicate(timeout=30)[1]
    assert log.count(f" buildshelf.access: {whole} PUT ") == 11, log
    assert log.count(f" buildshelf.access: {other.strip('[]')} PUT ") == 1, log


@pytest.mark.system
def test_a_real_server_refuses_a_credential_that_cannot_be_valid_on_the_head_alone(running):
    """An unknown token, a revoked one or an expired GitHub token never get a body buffered."""
    unknown = "bs_000000000000_" + "A" * 43
    for token in (unknown, running.text + "x"):
        status, headers, body = answer_to(running.port, head_of_put(running, 3 << 20, token))
        assert (status, body["code"], headers["connection"]) == (401, "unauthorized", "close")


# --- the credential proven on the head, before a byte of the body (issue 33) ---------------------


AUDIENCE = "http://127.0.0.1:8080"


@pytest.fixture
def issuing(data_dir, state):
    """A real server that trusts octo-org/octo-repo to publish alpha with the test issuer's
    tokens, and has a token for alpha: (Running, the issuer)."""
    token, text = tokens.create(state, "alpha", 90, "ci")
    trust.add(state, "alpha", "octo-org/octo-repo")
    with OidcIssuer(audience=AUDIENCE) as issuer:
        flags = ("--state", state, "--max-file-mb", "4", "--public-url", AUDIENCE,
                 "--github-oidc-issuer", issuer.url)  # fmt: skip
        with real_server(data_dir, *flags) as (port, _):
            yield Running(port, token, text, None), issuer


def first_answer(sock, seconds=5):
    """The status line of the first answer on `sock`, and what followed it; None if none came
    within `seconds` (the server is reading the body)."""
    sock.settimeout(seconds)
    received = b""
    try:
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    except TimeoutError:
        return None, received
    line, _, rest = received.partition(b"\r\n")
    return line.decode("latin-1"), rest


@pytest.mark.system
def test_a_forged_github_token_gets_a_401_before_a_byte_of_its_body_is_kept(issuing, data_dir):
    """A token with the issuer's claims and a signature of another key: refused on its head,
    while its body is still on its way, with nothing staged; each refusal counts at once."""
    running, issuer = issuing
    for _ in range(10):
        forged = issuer.token(key=new_key())
        with socket.create_connection(("127.0.0.1", running.port)) as sock:
            sock.sendall(head_of_put(running, 3 << 20, token=forged) + b"x" * (60 << 10))
            line, rest = first_answer(sock)
            assert line is not None and line.startswith("HTTP/1.1 401 "), rest
            while chunk := sock.recv(65536):  # the answer's body, then the server closes
                rest += chunk
            assert b"signature is not the issuer's" in rest and b"Connection: close" in rest
            assert leftovers(data_dir) == []
    status, _, body = answer_to(running.port, head_of_put(running, 10, token=issuer.token()))
    assert (status, body["code"]) == (429, "too_many_requests")


@pytest.mark.system
@pytest.mark.parametrize("credential", ["github", "token"])
def test_a_100_continue_is_sent_only_once_the_credential_is_proven(issuing, credential):
    running, issuer = issuing
    valid = issuer.token() if credential == "github" else running.text
    invalid = (
        issuer.token(key=new_key())
        if credential == "github"
        else running.text[:-1] + ("1" if running.text.endswith("0") else "0")
    )
    content_type, body = form(*kept())
    with socket.create_connection(("127.0.0.1", running.port)) as sock:
        head = head_of_put(running, len(body), token=invalid, content_type=content_type)
        sock.sendall(head.replace(b"\r\n\r\n", b"\r\nExpect: 100-continue\r\n\r\n"))
        line, _ = first_answer(sock)
        assert line is not None and line.startswith("HTTP/1.1 401 ")
    with socket.create_connection(("127.0.0.1", running.port)) as sock:
        head = head_of_put(running, len(body), token=valid, content_type=content_type)
        sock.sendall(head.replace(b"\r\n\r\n", b"\r\nExpect: 100-continue\r\n\r\n"))
        assert first_answer(sock)[0] == "HTTP/1.1 100 Continue"
        sock.sendall(body)
        line, _ = first_answer(sock)
        assert line.startswith("HTTP/1.1 201 ")


@pytest.mark.system
def test_a_github_token_valid_on_the_head_is_not_refused_when_it_expires_mid_upload(issuing):
    """The credential is decided once, on the head: a long upload may outlive its token."""
    running, issuer = issuing
    expires_soon = issuer.token(exp=int(time.time()) - oidc.LEEWAY + 4)
    content_type, body = form(*kept())
    with socket.create_connection(("127.0.0.1", running.port)) as sock:
        sock.sendall(
            head_of_put(running, len(body), token=expires_soon, content_type=content_type)
            + body[:100]
        )
        time.sleep(5)  # the token is now expired, even with the leeway
        sock.sendall(body[100:])
        line, _ = first_answer(sock)
    assert line.startswith("HTTP/1.1 201 ")


@pytest.mark.system
def test_a_delete_and_what_is_pipelined_after_it_wait_for_its_credential(running):
    """A request with no body awaits its verdict too; what follows it on the connection is
    answered after it, in order."""
    content_type, body = form(*kept())
    with socket.create_connection(("127.0.0.1", running.port), timeout=10) as sock:
        sock.sendall(head_of_put(running, len(body), content_type=content_type) + body)
        assert first_answer(sock)[0].startswith("HTTP/1.1 201 ")
    delete = f"DELETE {API}/projects/alpha/builds/9 HTTP/1.1\r\nHost: x\r\n"
    get = f"GET {API}/builds/latest?project=alpha HTTP/1.1\r\nHost: x\r\n"
    with socket.create_connection(("127.0.0.1", running.port), timeout=10) as sock:
        sock.sendall(
            f"{delete}Authorization: Bearer {running.text}\r\n\r\n{get}\r\n".encode()
            + f"{delete}Authorization: Bearer bs_000000000000_{'A' * 43}\r\n\r\n".encode()
        )
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", received)
    assert statuses == [b"204", b"200", b"401"], received
    assert b'"buildNumber":9' not in received


@pytest.mark.system
@pytest.mark.system
def test_many_writes_pipelined_are_each_decided_and_the_server_stops(running):
    """Each verdict comes back to the loop thread through waitress's trigger, whose thunks
    run under its lock: a write parsed there, from what was pipelined, whose verdict was
    decided at once, called the trigger again under that lock, and the loop thread hung."""
    head = f"Authorization: Bearer {running.text}\r\n\r\n"
    deletes = "".join(
        f"DELETE {API}/projects/alpha/builds/{900 + n} HTTP/1.1\r\nHost: x\r\n{head}"
        for n in range(50)
    )
    with socket.create_connection(("127.0.0.1", running.port), timeout=10) as sock:
        sock.sendall(
            deletes.encode() + b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    assert re.findall(rb"HTTP/1\.1 (\d{3}) ", received) == [b"404"] * 50 + [b"200"]


@pytest.mark.system
def test_a_locked_tokens_database_holds_up_no_read(running, state):
    """The tokens' database is read on a thread of the server's own, never its loop: while
    another process holds it locked, a write waits, and every read is answered at once."""
    locker = sqlite3.connect(os.path.join(state, "tokens.sqlite3"), isolation_level=None)
    locker.execute("PRAGMA locking_mode=EXCLUSIVE")
    locker.execute("BEGIN EXCLUSIVE")
    unknown = "bs_000000000000_" + "A" * 43
    with socket.create_connection(("127.0.0.1", running.port)) as sock:
        sock.sendall(head_of_put(running, 1 << 20, token=unknown))
        time.sleep(0.2)  # the server is waiting for the database
        started = time.monotonic()
        status, _, _ = answer_to(
            running.port,
            f"GET {API}/projects HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode(),
        )
        assert status == 200 and time.monotonic() - started < 1
        locker.execute("COMMIT")
        locker.close()
        line, rest = first_answer(sock, seconds=10)
    assert line.startswith("HTTP/1.1 401 "), rest


@pytest.mark.system
def test_a_client_that_leaves_mid_upload_leaves_nothing(running, data_dir):
    content_type, body = form(*kept(data=os.urandom(2 << 20)))
    head = head_of_put(running, len(body), content_type=content_type)
    with socket.create_connection(("127.0.0.1", running.port), timeout=10) as sock:
        sock.sendall(head + body[: len(body) // 2])
    time.sleep(0.5)
    status, _, shown = answer_to(
        running.port,
        f"GET {API}/builds/latest?project=alpha HTTP/1.1\r\nHost: x\r\n"
        "Connection: close\r\n\r\n".encode(),
    )
    assert status == 200 and shown["buildNumber"] != 9
    assert leftovers(data_dir) == [] and artifacts.objects(str(data_dir / "artifacts")) == {}


def curl(*args):
    """curl's body and then its status code, on the last line."""
    done = subprocess.run(
        ["curl", "-sS", "-w", "\n%{http_code}", *args], capture_output=True, text=True, timeout=30
    )
    return done.stdout


# --- any body: never a 500, never anything left ---------------------------------------------------


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cuts=st.lists(st.tuples(st.integers(0, 600), st.integers(0, 40)), max_size=3),
    inserts=st.lists(st.tuples(st.integers(0, 600), st.binary(max_size=40)), max_size=3),
)
def test_a_mangled_body_is_a_clear_4xx_and_leaves_nothing(web, data_dir, cuts, inserts):
    content_type, body = form(*kept(data=b"jar" * 100))
    for at, length in cuts:
        body = body[:at] + body[at + length :]
    for at, data in inserts:
        body = body[:at] + data + body[at:]
    resp = web.put(
        f"{API}/projects/alpha/builds/9",
        body,
        headers={**auth(), "Content-Type": content_type},
        expect_errors=True,
    )
    assert resp.status_int in (200, 201, 400, 409), resp.body
    assert resp.content_type == "application/json"
    assert leftovers(data_dir) == []


def test_a_github_oidc_token_of_a_trusted_repository_publishes(store, state, caplog):
    """The test issuer's tokens, end to end: a trusted repository's publishes (and names the
    repository and workflow in the log); the same token again, another repository, a project
    that is not there, and an issuer that cannot be reached are each refused as the issue
    says."""
    caplog.set_level(logging.INFO)
    audience = "http://127.0.0.1:8080"
    with OidcIssuer(audience=audience) as issuer:
        trust.add(state, "alpha", "octo-org/octo-repo")

        def client():
            credentials = Credentials(state, issuer.url, audience)
            app = server.make_app(store, credentials=credentials, max_file_mb=1)
            return webtest.TestApp(app, extra_environ={"REMOTE_ADDR": "192.0.2.8"})

        web = client()
        token = issuer.token()
        assert put(web, 9, *kept(), token=token).status_int == 201
        assert latest(web)["buildNumber"] == 9
        error(put(web, 9, *kept(), token=token), 401, "unauthorized")  # its jti is spent
        other = issuer.token(repository="someone/else")
        error(put(web, 10, *kept(10), token=other), 403, "forbidden")
        error(put(web, 1, *kept(1), slug="gamma", token=issuer.token()), 404, "unknown_project")
        assert web.delete(f"{API}/projects/alpha/builds/9", headers=auth(issuer.token()))
        issuer.mode = "down"  # a server that has no keys yet must fetch them
        error(put(client(), 9, *kept(), token=issuer.token()), 503, "credentials_unavailable")
    lines = [r.getMessage() for r in caplog.records if r.name == publish.log.name]
    who = "github octo-org/octo-repo (.github/workflows/release.yml) from 192.0.2.8"
    assert lines == [
        f"added build 9 of alpha (sha256 {JAR_SHA}) by {who}",
        f"yanked build 9 of alpha (sha256 {JAR_SHA}) by {who}",
    ]


# Claims of tokens the issuer signed that the checks before gave a 500: a time that PyJWT's
# int() takes but that is no time (then exp + 60 failed, or SQLite could not store it), a jti
# that UTF-8 cannot hold; and, beside them, others that were refused already.
ODD_CLAIMS = {
    "exp digits": ("exp", "99999999999"),
    "exp 1e300": ("exp", 1e300),
    "exp 2**70": ("exp", 2**70),
    "exp Infinity": ("exp", math.inf),
    "nbf NaN": ("nbf", math.nan),
    "nbf digits": ("nbf", "1700000000"),
    "iat 2**70": ("iat", 2**70),
    "iat true": ("iat", True),
    "jti lone surrogate": ("jti", "\ud800"),
    "jti number": ("jti", 7),
    "repository_id 2**70": ("repository_id", 2**70),
    "repository_owner_id list": ("repository_owner_id", [65]),
    "job_workflow_ref lone surrogate": ("job_workflow_ref", "o/r/.github/workflows/a.yml@\udfff"),
}


@pytest.mark.parametrize("claim, value", ODD_CLAIMS.values(), ids=ODD_CLAIMS.keys())
def test_a_github_token_of_odd_content_is_401_naming_the_claim_never_500(
    store, state, claim, value
):
    """Through the write route and through the screen, as the server calls it on the head."""
    audience = "http://127.0.0.1:8080"
    with OidcIssuer(audience=audience) as issuer:
        trust.add(state, "alpha", "octo-org/octo-repo")
        credentials = Credentials(state, issuer.url, audience)
        app = server.make_app(store, credentials=credentials, max_file_mb=1)
        web = webtest.TestApp(app, extra_environ={"REMOTE_ADDR": "192.0.2.8"})
        token = issuer.token(**{claim: value})
        assert claim in error(put(web, 9, *kept(), token=token), 401, "unauthorized")
        head = dict(HTTP_AUTHORIZATION=f"Bearer {token}", CONTENT_TYPE=MULTIPART)
        refused = app.screen(environ("PUT", WRITE, CONTENT_LENGTH="10", **head))
        assert refused.status_code == 401 and claim in refused.body
        assert put(web, 9, *kept(), token=issuer.token()).status_int == 201  # the issuer's own


def test_a_github_token_s_odd_claims_that_are_valid_publish(store, state):
    """A jti as long as a token may hold, times with fractions, an environment of another
    type than a string: a publish, once."""
    audience = "http://127.0.0.1:8080"
    with OidcIssuer(audience=audience) as issuer:
        trust.add(state, "alpha", "octo-org/octo-repo")
        app = server.make_app(
            store, credentials=Credentials(state, issuer.url, audience), max_file_mb=1
        )
        web = webtest.TestApp(app, extra_environ={"REMOTE_ADDR": "192.0.2.8"})
        now = time.time()
        for number, claims in enumerate(
            [
                {"jti": "j" * 10_000},
                {"exp": now + 300.5, "nbf": now - 0.25, "iat": now - 0.5},
                {"environment": {"name": ["release"]}},
            ],
            9,
        ):
            token = issuer.token(**claims)
            assert put(web, number, *kept(number), token=token).status_int == 201
            error(put(web, number, *kept(number), token=token), 401, "unauthorized")
