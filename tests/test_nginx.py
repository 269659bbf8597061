"""Kept files sent by nginx in front: downloads.handed_over and --accel-redirect through the
app."""

import hashlib
import os

import pytest
import webtest

import cli
import downloads
import server
import settings
import store as store_module
from test_downloads import CONTENT, MODIFIED_DATE, body_bytes, request, stored, whole_headers

URI = "/_objects/ab/abcdef"


@pytest.fixture
def download(tmp_path):
    return stored(tmp_path)


def handed_over_headers(download, ranges_too=False):
    """What Buildshelf answers nginx: the 200's headers for no body, X-Accel-Redirect first;
    Accept-Ranges only for a range nginx is to answer (nginx adds one to a 200 itself)."""
    headers = [
        h for h in whole_headers(download, length=0) if h[0] != "Accept-Ranges" or ranges_too
    ]
    return [("X-Accel-Redirect", URI), *headers]


def answered_itself(download, environ):
    """Whether handed_over answered as answer() does, bytes and all."""
    status, headers, body = downloads.handed_over(download, environ, URI)
    expected = downloads.answer(download, environ)
    return (status, headers, body_bytes(body)) == (
        expected[0],
        expected[1],
        body_bytes(expected[2]),
    )


# --- downloads.handed_over ---


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_download_is_handed_over_with_every_header_and_no_body(download, method):
    status, headers, body = downloads.handed_over(download, request(method), URI)
    assert (status, headers, body) == ("200 OK", handed_over_headers(download), [])


@pytest.mark.parametrize(
    "headers",
    [
        {"range": "bytes=0-99"},
        {"range": "bytes=9000-"},
        {"range": "bytes=-100"},
        {"range": "bytes=5-9", "if_range": MODIFIED_DATE},
        {"range": "bytes=5-9", "if_range": '"{tag}"'},
    ],
)
def test_a_plain_range_is_left_to_nginx(download, headers):
    headers = {name: value.format(tag=download.sha256) for name, value in headers.items()}
    status, answered, body = downloads.handed_over(download, request(**headers), URI)
    assert (status, answered, body) == ("200 OK", handed_over_headers(download, True), [])


def test_a_range_whose_if_range_fails_is_handed_over_whole(download):
    environ = request(range="bytes=0-9", if_range='"another"')
    assert downloads.handed_over(download, environ, URI)[:2] == (
        "200 OK",
        handed_over_headers(download),
    )


def test_304_and_416_are_answered_without_nginx(download):
    for environ in (request(if_none_match=f'"{download.sha256}"'), request(range="bytes=10000-")):
        answered = downloads.handed_over(download, environ, URI)
        assert answered == downloads.answer(download, environ)
        assert answered[0][:3] in ("304", "416") and "X-Accel-Redirect" not in dict(answered[1])


@pytest.mark.parametrize(
    "headers",
    [
        {"if_match": '"0123"'},  # nginx compares If-Match with its own ETag: 412
        {"if_unmodified_since": "Tue, 14 Nov 2000 22:13:20 GMT"},  # and the file's time
        {"range": "bytes=0-1,5-6"},  # ignored here
        {"range": "items=0-1"},
        {"range": "bytes=5-1"},  # nginx would answer 416 to these
        {"range": "bytes=abc"},
        {"range": "Bytes = 5-7 "},
        {"range": "bytes=0-1,"},
        {"range": "bytes=0-" + "9" * 19},  # past nginx's 63-bit offsets
    ],
)
def test_what_nginx_would_judge_otherwise_is_answered_here(download, headers):
    assert answered_itself(download, request(**headers))


def test_a_missing_file_is_unavailable_before_anything_is_handed_over(download):
    os.remove(download.path)
    for environ in (request(), request(if_none_match="*"), request(range="bytes=0-1")):
        with pytest.raises(downloads.Unavailable, match="^missing$"):
            downloads.handed_over(download, environ, URI)


def test_a_link_is_not_handed_over(tmp_path, download):
    os.rename(download.path, tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", download.path)
    with pytest.raises(downloads.Unavailable, match="^is a symbolic link, not a regular file$"):
        downloads.handed_over(download, request(), URI)


# --- --accel-redirect ---


@pytest.fixture
def kept(data_dir, tmp_path):
    """Build 9 of alpha, its file kept: (its download path, the file's bytes)."""
    jar = tmp_path / "alpha-9.jar"
    jar.write_bytes(CONTENT)
    assert cli.main(["publish", "alpha", "--data", str(data_dir), "--build", "9", "--channel",
                     "1.21", "--timestamp", "1700000000000", "--file", str(jar)]) == 0  # fmt: skip
    sha = hashlib.sha256(CONTENT).hexdigest()
    return f"/downloads/alpha/9/{sha}/alpha-9.jar", sha


def test_the_app_hands_kept_files_to_the_location_named(data_dir, kept):
    path, sha = kept
    app = server.make_app(store_module.Store(data_dir, check_interval=0), accel_redirect="/_o")
    client = webtest.TestApp(app)
    resp = client.get(path)
    assert resp.headers["X-Accel-Redirect"] == f"/_o/{sha[:2]}/{sha}"
    assert (resp.headers["Content-Length"], resp.body) == ("0", b"")
    assert client.get(path + ".sha256").text == f"{sha}  alpha-9.jar\n"
    assert "X-Accel-Redirect" not in client.get(path + ".sha256").headers
    os.unlink(data_dir / "artifacts" / sha[:2] / sha)
    assert client.get(path, status=503).json["code"] == "artifact_unavailable"


def test_without_the_setting_buildshelf_sends_the_bytes(data_dir, kept):
    client = webtest.TestApp(server.make_app(store_module.Store(data_dir, check_interval=0)))
    resp = client.get(kept[0])
    assert "X-Accel-Redirect" not in resp.headers and resp.body == CONTENT


@pytest.mark.parametrize("value, taken", [("/_objects", "/_objects"), ("/a/b_c/", "/a/b_c")])
def test_the_prefix_is_a_plain_path(value, taken):
    assert settings.location_prefix(value) == taken


@pytest.mark.parametrize(
    "value", ["_objects", "/", "/a/../b", "/..", "/a/.", "//a", "/a b", "/%2e", "/a?b", ""]
)
def test_another_prefix_is_bad_usage_naming_the_flag_or_variable(data_dir, value, capsys):
    for argv, environ, named in (
        (["--accel-redirect", value], {}, "--accel-redirect"),
        ([], {"BUILDSHELF_ACCEL_REDIRECT": value}, "BUILDSHELF_ACCEL_REDIRECT"),
    ):
        with pytest.raises(SystemExit) as raised:
            cli.parse_args(["--data", str(data_dir), *argv], environ=environ)
        assert raised.value.code == 2
        assert named in capsys.readouterr().err
