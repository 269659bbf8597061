"""downloads.py: one stored file over HTTP, by answer() directly, through webtest, and over a
real waitress server to curl."""

import base64
import gc
import hashlib
import os
import random
import shutil
import subprocess
import threading

import pytest
import waitress
import webtest
from waitress import wasyncore
from waitress.buffers import ReadOnlyFileBasedBuffer

from buildshelf.web import downloads, openapi
from buildshelf.web.downloads import Download, Unavailable
from buildshelf.web.shapes import DOWNLOADS

MODIFIED = 1700000000
MODIFIED_DATE = "Tue, 14 Nov 2023 22:13:20 GMT"
CONTENT = random.Random(1).randbytes(10_000)


def stored(tmp_path, content=CONTENT, name="alpha-1.0.jar"):
    """A Download of `content`, written to a file in tmp_path, as the store records one."""
    path = tmp_path / name
    path.write_bytes(content)
    digest = hashlib.sha256(content).hexdigest()
    return Download(str(path), name, digest, len(content), MODIFIED)


def request(method="GET", **headers):
    """An environ as a WSGI server without a file wrapper makes it: if_range= is If-Range."""
    environ = {"REQUEST_METHOD": method}
    environ.update({"HTTP_" + name.upper(): value for name, value in headers.items()})
    return environ


def body_bytes(body):
    try:
        return b"".join(body)
    finally:
        if hasattr(body, "close"):
            body.close()


def open_fds():
    return sorted(os.listdir("/proc/self/fd"))


@pytest.fixture
def download(tmp_path):
    return stored(tmp_path)


@pytest.fixture
def no_fd_leaked():
    """Fails a test that leaves a descriptor open."""
    gc.collect()  # what earlier tests left to the collector (a kept database) goes first
    before = open_fds()
    yield
    assert open_fds() == before


def whole_headers(download, length=None):
    digest = base64.b64encode(hashlib.sha256(CONTENT).digest()).decode()
    return [
        ("Content-Type", "application/java-archive"),
        ("Content-Length", str(download.size if length is None else length)),
        ("Content-Disposition", 'attachment; filename="alpha-1.0.jar"'),
        ("ETag", f'"{download.sha256}"'),
        ("Last-Modified", MODIFIED_DATE),
        ("Cache-Control", "public, max-age=31536000, immutable"),
        ("Accept-Ranges", "bytes"),
        ("Repr-Digest", f"sha-256=:{digest}:"),
        ("X-Content-Type-Options", "nosniff"),
        ("Content-Security-Policy", "sandbox"),
    ]


def test_get_sends_the_whole_file_with_every_header(download, no_fd_leaked):
    status, headers, body = downloads.answer(download, request())
    assert status == "200 OK"
    assert headers == whole_headers(download)
    assert body_bytes(body) == CONTENT


def test_head_has_the_headers_of_get_and_no_body(download, no_fd_leaked):
    _, get_headers, get_body = downloads.answer(download, request())
    body_bytes(get_body)
    status, headers, body = downloads.answer(download, request("HEAD"))
    assert (status, headers, body) == ("200 OK", get_headers, [])


@pytest.mark.parametrize(
    "name, content_type",
    [
        ("alpha-1.0.jar", "application/java-archive"),
        ("ALPHA.JAR", "application/java-archive"),
        ("alpha-1.0.zip", "application/octet-stream"),
        ("alpha-1.0.tar.gz", "application/octet-stream"),
        ("jar", "application/octet-stream"),
    ],
)
def test_content_type_by_extension(tmp_path, name, content_type):
    _, headers, body = downloads.answer(stored(tmp_path, name=name), request("HEAD"))
    assert dict(headers)["Content-Type"] == content_type


def test_the_api_document_gives_the_types_a_kept_file_is_sent_as():
    path = DOWNLOADS + "/{project}/{build}/{sha256}/{file}"
    responses = openapi.document()["paths"][path]["get"]["responses"]
    sent = {*downloads.CONTENT_TYPES.values(), downloads.DEFAULT_CONTENT_TYPE}
    checksum_line = downloads.CHECKSUM_CONTENT_TYPE.partition(";")[0]
    for status in ("200", "206"):
        assert set(responses[status]["content"]) == sent | {checksum_line}


def test_content_disposition_escapes_quotes_and_backslashes(tmp_path):
    download = stored(tmp_path, name="plain.jar")
    odd = Download(download.path, 'a"b\\c.jar', download.sha256, download.size, MODIFIED)
    _, headers, _ = downloads.answer(odd, request("HEAD"))
    assert dict(headers)["Content-Disposition"] == 'attachment; filename="a\\"b\\\\c.jar"'


def test_repr_digest_is_the_whole_files_sha256_on_200_206_and_head(download):
    expected = "sha-256=:" + base64.b64encode(hashlib.sha256(CONTENT).digest()).decode() + ":"
    for environ in (request(), request(range="bytes=0-9"), request("HEAD")):
        _, headers, body = downloads.answer(download, environ)
        body_bytes(body)
        assert dict(headers)["Repr-Digest"] == expected


# --- Conditional requests ---


def not_modified_headers(download):
    return [
        ("ETag", f'"{download.sha256}"'),
        ("Last-Modified", MODIFIED_DATE),
        ("Cache-Control", "public, max-age=31536000, immutable"),
    ]


@pytest.mark.parametrize(
    "if_none_match",
    [
        '"{tag}"',
        'W/"{tag}"',
        "*",
        ' "0123", W/"{tag}" ',
        '"0123","{tag}"',
    ],
)
def test_if_none_match_that_matches_weakly_answers_304(download, if_none_match, no_fd_leaked):
    environ = request(if_none_match=if_none_match.format(tag=download.sha256))
    status, headers, body = downloads.answer(download, environ)
    assert (status, headers, body) == ("304 Not Modified", not_modified_headers(download), [])


@pytest.mark.parametrize("if_none_match", ['"0123"', 'W/"0123"', '"{tag}x"', "{tag}"])
def test_if_none_match_that_does_not_match_answers_200(download, if_none_match):
    environ = request(if_none_match=if_none_match.format(tag=download.sha256))
    status, headers, body = downloads.answer(download, environ)
    assert status == "200 OK"
    assert body_bytes(body) == CONTENT


def test_if_none_match_wins_over_if_modified_since(download):
    environ = request(if_none_match='"0123"', if_modified_since=MODIFIED_DATE)
    status, _, body = downloads.answer(download, environ)
    body_bytes(body)
    assert status == "200 OK"


@pytest.mark.parametrize(
    "if_modified_since, status",
    [
        (MODIFIED_DATE, "304 Not Modified"),
        ("Tue, 14 Nov 2023 22:13:21 GMT", "304 Not Modified"),
        ("Tue, 14 Nov 2023 22:13:19 GMT", "200 OK"),
        # The obsolete forms recipients must read too (RFC 9110 5.6.7): RFC 850's, asctime's.
        ("Tuesday, 14-Nov-23 22:13:20 GMT", "304 Not Modified"),
        ("Tue Nov 14 22:13:20 2023", "304 Not Modified"),
        ("Tue Nov 14 22:13:19 2023", "200 OK"),
        ("yesterday", "200 OK"),
        ("", "200 OK"),
    ],
)
def test_if_modified_since(download, if_modified_since, status, no_fd_leaked):
    answered, headers, body = downloads.answer(
        download, request(if_modified_since=if_modified_since)
    )
    assert answered == status
    if status == "304 Not Modified":
        assert (headers, body) == (not_modified_headers(download), [])
    else:
        assert body_bytes(body) == CONTENT


def test_not_modified_wins_over_range(download, no_fd_leaked):
    environ = request(if_none_match=f'"{download.sha256}"', range="bytes=0-9")
    assert downloads.answer(download, environ)[0] == "304 Not Modified"


PRECONDITION_FAILED = ("412 Precondition Failed", [("Content-Length", "0")], [])
BEFORE = "Tue, 14 Nov 2023 22:13:19 GMT"  # a second before MODIFIED
AFTER = "Tue, 14 Nov 2023 22:13:21 GMT"


@pytest.mark.parametrize("method", ["GET", "HEAD"])
@pytest.mark.parametrize(
    "conditions",
    [
        {"if_match": '"0123"'},
        {"if_match": 'W/"{tag}"'},  # If-Match compares strongly: a weak tag never matches
        {"if_match": '"{tag}x", "0123"'},
        {"if_match": "{tag}"},  # not an entity tag
        {"if_unmodified_since": BEFORE},
        {"if_unmodified_since": "Tuesday, 14-Nov-23 22:13:19 GMT"},
        # 412 comes before 304, 416 and If-Range (RFC 9110 13.2.2)
        {"if_match": '"0123"', "if_none_match": '"{tag}"'},
        {"if_unmodified_since": BEFORE, "if_modified_since": MODIFIED_DATE},
        {"if_match": '"0123"', "range": "bytes=99999-"},
        {"if_unmodified_since": BEFORE, "range": "bytes=0-9", "if_range": '"{tag}"'},
    ],
)
def test_a_failed_precondition_answers_412(download, conditions, method, no_fd_leaked):
    environ = request(method, **{k: v.format(tag=download.sha256) for k, v in conditions.items()})
    assert downloads.answer(download, environ) == PRECONDITION_FAILED


@pytest.mark.parametrize(
    "conditions, status",
    [
        ({"if_match": '"{tag}"'}, "200 OK"),
        ({"if_match": '"0123", "{tag}"'}, "200 OK"),
        ({"if_match": "*"}, "200 OK"),
        ({"if_unmodified_since": MODIFIED_DATE}, "200 OK"),
        ({"if_unmodified_since": AFTER}, "200 OK"),
        ({"if_unmodified_since": "not a date"}, "200 OK"),  # an invalid date is ignored
        # If-Unmodified-Since is ignored beside If-Match (RFC 9110 13.1.4)
        ({"if_match": '"{tag}"', "if_unmodified_since": BEFORE}, "200 OK"),
        # and when they hold, the rest is answered as without them
        ({"if_match": '"{tag}"', "if_none_match": '"{tag}"'}, "304 Not Modified"),
        ({"if_unmodified_since": AFTER, "if_modified_since": AFTER}, "304 Not Modified"),
        ({"if_match": '"{tag}"', "range": "bytes=0-9"}, "206 Partial Content"),
        ({"if_match": '"{tag}"', "range": "bytes=99999-"}, "416 Range Not Satisfiable"),
    ],
)
def test_a_precondition_that_holds_answers_as_without_it(download, conditions, status):
    environ = request(**{k: v.format(tag=download.sha256) for k, v in conditions.items()})
    answered, _, body = downloads.answer(download, environ)
    body_bytes(body)
    assert answered == status


def test_a_failed_precondition_of_a_missing_file_is_unavailable_too(download, no_fd_leaked):
    os.remove(download.path)
    with pytest.raises(Unavailable, match="^missing$"):
        downloads.answer(download, request(if_match='"0123"'))


# --- Ranges ---


@pytest.mark.parametrize(
    "range_value, first, last",
    [
        ("bytes=0-99", 0, 99),
        ("bytes=10-10", 10, 10),
        ("bytes=9000-", 9000, 9999),
        ("bytes=-100", 9900, 9999),
        ("bytes=9990-20000", 9990, 9999),  # the end clamped to the file's
        ("bytes=-20000", 0, 9999),  # a suffix longer than the file: all of it
        ("bytes=9999-9999", 9999, 9999),
        ("Bytes = 5-7 ", 5, 7),  # the unit is case-insensitive
        ("bytes=0-1,", 0, 1),  # an empty list element is no range
    ],
)
def test_one_range_answers_206(download, range_value, first, last, no_fd_leaked):
    status, headers, body = downloads.answer(download, request(range=range_value))
    assert status == "206 Partial Content"
    assert headers == [
        *whole_headers(download, length=last - first + 1),
        ("Content-Range", f"bytes {first}-{last}/10000"),
    ]
    assert body_bytes(body) == CONTENT[first : last + 1]


def test_head_with_a_range_has_the_206_headers_and_no_body(download, no_fd_leaked):
    _, get_headers, get_body = downloads.answer(download, request(range="bytes=5-9"))
    body_bytes(get_body)
    status, headers, body = downloads.answer(download, request("HEAD", range="bytes=5-9"))
    assert (status, headers, body) == ("206 Partial Content", get_headers, [])


@pytest.mark.parametrize(
    "range_value", ["bytes=10000-", "bytes=10000-10005", "bytes=123456789-", "bytes=-0"]
)
def test_unsatisfiable_range_answers_416(download, range_value, no_fd_leaked):
    status, headers, body = downloads.answer(download, request(range=range_value))
    assert (status, headers, body) == (
        "416 Range Not Satisfiable",
        [("Content-Range", "bytes */10000"), ("Content-Length", "0")],
        [],
    )


@pytest.mark.parametrize(
    "range_value",
    [
        "bytes=0-1,5-6",  # several ranges: the whole file, as nginx answers too
        "bytes=-5,0-1",
        "items=0-1",  # a unit not known
        "0-1",
        "bytes=5-1",  # last before first: invalid
        "bytes=abc",
        "bytes=a-b",
        "bytes=",
        "bytes=-",
        "bytes=+1-2",
        "bytes=0x10-",
        "bytes=1 2-3",
        "bytes=\u0661-\u0662",  # Arabic-Indic digits, which int() would take
        "bytes=1-" + "9" * 5000,  # more digits than int() converts
    ],
)
def test_range_not_understood_is_ignored(download, range_value, no_fd_leaked):
    status, headers, body = downloads.answer(download, request(range=range_value))
    assert (status, headers) == ("200 OK", whole_headers(download))
    assert body_bytes(body) == CONTENT


@pytest.mark.parametrize("range_value", ["bytes=0-", "bytes=0-0", "bytes=-1", "bytes=-0"])
def test_any_range_of_an_empty_file_answers_416(tmp_path, range_value, no_fd_leaked):
    empty = stored(tmp_path, b"")
    status, headers, body = downloads.answer(empty, request(range=range_value))
    assert (status, headers, body) == (
        "416 Range Not Satisfiable",
        [("Content-Range", "bytes */0"), ("Content-Length", "0")],
        [],
    )


def test_an_empty_file_without_range_answers_200(tmp_path, no_fd_leaked):
    empty = stored(tmp_path, b"")
    status, headers, body = downloads.answer(empty, request())
    assert (status, dict(headers)["Content-Length"], body) == ("200 OK", "0", [])


@pytest.mark.parametrize(
    "if_range, status",
    [
        ('"{tag}"', "206 Partial Content"),
        (' "{tag}" ', "206 Partial Content"),
        (MODIFIED_DATE, "206 Partial Content"),
        ('W/"{tag}"', "200 OK"),  # If-Range compares strongly: a weak tag never matches
        ('"0123"', "200 OK"),
        ('"{tag}", "0123"', "200 OK"),  # one tag, not a list
        ("Tue, 14 Nov 2023 22:13:21 GMT", "200 OK"),
        ("Tue, 14 Nov 2023 22:13:19 GMT", "200 OK"),
        ("not a date", "200 OK"),
    ],
)
def test_if_range(download, if_range, status, no_fd_leaked):
    environ = request(range="bytes=5-9", if_range=if_range.format(tag=download.sha256))
    answered, headers, body = downloads.answer(download, environ)
    assert answered == status
    if status == "200 OK":
        assert (headers, body_bytes(body)) == (whole_headers(download), CONTENT)
    else:
        assert (dict(headers)["Content-Range"], body_bytes(body)) == (
            "bytes 5-9/10000",
            CONTENT[5:10],
        )


def test_if_range_without_range_is_ignored(download):
    status, _, body = downloads.answer(download, request(if_range='"0123"'))
    assert (status, body_bytes(body)) == ("200 OK", CONTENT)


# --- The body ---

BIG = random.Random(2).randbytes(3 * 1024 * 1024 + 123)


def test_without_file_wrapper_a_large_range_comes_in_64_kib_chunks(tmp_path, no_fd_leaked):
    big = stored(tmp_path, BIG, "big.jar")
    status, headers, body = downloads.answer(big, request(range="bytes=100000-2200000"))
    assert (status, dict(headers)["Content-Length"]) == ("206 Partial Content", "2100001")
    chunks = list(body)
    body.close()
    assert b"".join(chunks) == BIG[100000:2200001]
    assert {len(chunk) for chunk in chunks[:-1]} == {64 * 1024}


def test_without_file_wrapper_the_whole_large_file(tmp_path, no_fd_leaked):
    big = stored(tmp_path, BIG, "big.jar")
    assert body_bytes(downloads.answer(big, request())[2]) == BIG


def test_a_body_closed_unread_closes_the_file(download, no_fd_leaked):
    downloads.answer(download, request())[2].close()


def test_the_file_wrapper_gets_the_open_file_at_the_ranges_start(download):
    wrapped = []

    def file_wrapper(file, block_size):
        wrapped.append((file.tell(), block_size))
        return file

    environ = request(range="bytes=1000-1999")
    environ["wsgi.file_wrapper"] = file_wrapper
    _, _, body = downloads.answer(download, environ)
    body.close()
    assert wrapped == [(1000, 64 * 1024)]


def test_waitress_file_wrapper_sends_just_the_range(tmp_path, no_fd_leaked):
    big = stored(tmp_path, BIG, "big.jar")
    environ = request(range="bytes=1000-1999")
    environ["wsgi.file_wrapper"] = ReadOnlyFileBasedBuffer
    _, headers, body = downloads.answer(big, environ)
    assert isinstance(body, ReadOnlyFileBasedBuffer)
    # What waitress's task does with it: Content-Length bytes at most, from where it is.
    assert body.prepare(int(dict(headers)["Content-Length"])) == 1000
    assert body.get() == BIG[1000:2000]
    body.close()


def test_waitress_file_wrapper_reads_at_most_read_bytes_at_a_time(tmp_path, no_fd_leaked):
    big = stored(tmp_path, BIG, "big.jar")
    environ = request(range="bytes=100-")
    environ["wsgi.file_wrapper"] = ReadOnlyFileBasedBuffer
    _, headers, body = downloads.answer(big, environ)
    remaining = body.prepare(int(dict(headers)["Content-Length"]))
    chunks = []
    # What waitress's channel does when the socket takes every byte: it asks for a send
    # buffer's worth (megabytes), sends what it gets and skips past it.
    while remaining:
        chunks.append(body.get(4 << 20))
        body.skip(len(chunks[-1]), True)
        remaining -= len(chunks[-1])
    body.close()
    assert b"".join(chunks) == BIG[100:]
    assert [len(chunk) for chunk in chunks] == [downloads.READ_BYTES] * 3 + [
        len(BIG) - 100 - (3 << 20)
    ]


# --- A file not as recorded ---


def test_missing_file_is_unavailable(download, no_fd_leaked):
    os.remove(download.path)
    with pytest.raises(Unavailable, match="^missing$"):
        downloads.answer(download, request())


def test_file_of_another_size_is_unavailable(tmp_path, no_fd_leaked):
    download = stored(tmp_path, b"x" * 20)
    with open(download.path, "wb") as f:
        f.write(b"x" * 10)
    with pytest.raises(Unavailable, match="^is 10 bytes, expected 20 bytes$"):
        downloads.answer(download, request())


def test_directory_is_unavailable(tmp_path, no_fd_leaked):
    (tmp_path / "dir.jar").mkdir()
    download = Download(str(tmp_path / "dir.jar"), "dir.jar", "0" * 64, 4096, MODIFIED)
    with pytest.raises(Unavailable, match="^is a directory, not a regular file$"):
        downloads.answer(download, request())


def test_fifo_is_unavailable_and_opening_it_does_not_block(tmp_path, no_fd_leaked):
    os.mkfifo(tmp_path / "fifo.jar")
    download = Download(str(tmp_path / "fifo.jar"), "fifo.jar", "0" * 64, 0, MODIFIED)
    with pytest.raises(Unavailable, match="^is a FIFO, not a regular file$"):
        downloads.answer(download, request())


def test_a_link_is_unavailable_even_to_a_file_of_the_right_size(tmp_path, no_fd_leaked):
    """A link in the store is not followed out of it (nginx in front refuses one too)."""
    download = stored(tmp_path)
    os.rename(download.path, tmp_path / "elsewhere.jar")
    os.symlink(tmp_path / "elsewhere.jar", download.path)
    with pytest.raises(Unavailable, match="^is a symbolic link, not a regular file$"):
        downloads.answer(download, request())


def test_conditional_request_of_a_missing_file_is_unavailable_too(download, no_fd_leaked):
    os.remove(download.path)
    with pytest.raises(Unavailable, match="^missing$"):
        downloads.answer(download, request(if_none_match="*"))


# --- The checksum line ---


def test_checksum_line(download):
    assert downloads.checksum_line(download) == f"{download.sha256}  alpha-1.0.jar\n".encode()


def test_the_checksum_line_has_validators_of_its_own(download):
    line = downloads.checksum_line(download)
    etag = f'"{hashlib.sha256(line).hexdigest()}"'
    validators = [
        ("ETag", etag),
        ("Last-Modified", MODIFIED_DATE),
        ("Cache-Control", "public, max-age=31536000, immutable"),
    ]
    assert downloads.checksum_answer(download, request()) == (
        "200 OK",
        [("Content-Type", "text/plain; charset=utf-8"), *validators],
        line,
    )
    assert etag != f'"{download.sha256}"'  # the file's tag names other bytes
    for conditions in ({"if_none_match": etag}, {"if_modified_since": MODIFIED_DATE}):
        assert downloads.checksum_answer(download, request(**conditions)) == (
            "304 Not Modified",
            validators,
            b"",
        )
    for if_none_match in (f'"{download.sha256}"', '"0123"'):
        assert downloads.checksum_answer(download, request(if_none_match=if_none_match))[0] == (
            "200 OK"
        )
    for conditions in ({"if_match": f'"{download.sha256}"'}, {"if_unmodified_since": BEFORE}):
        assert downloads.checksum_answer(download, request(**conditions)) == (
            "412 Precondition Failed",
            [("Content-Length", "0")],
            b"",
        )
    assert downloads.checksum_answer(download, request(if_match=etag))[0] == "200 OK"


@pytest.mark.system
@pytest.mark.skipif(shutil.which("sha256sum") is None, reason="needs sha256sum")
def test_sha256sum_checks_the_file_by_its_checksum_line(download, tmp_path):
    (tmp_path / "SHA256SUMS").write_bytes(downloads.checksum_line(download))
    checked = subprocess.run(
        ["sha256sum", "-c", "SHA256SUMS"], cwd=tmp_path, capture_output=True, timeout=30
    )
    assert (checked.returncode, checked.stdout) == (0, b"alpha-1.0.jar: OK\n")


# --- Over WSGI ---


def app_of(download, answered=None):
    def application(environ, start_response):
        status, headers, body = downloads.answer(download, environ)
        if answered is not None:
            answered.append(status)
        start_response(status, headers)
        return body

    return application


@pytest.fixture
def client(download):
    return webtest.TestApp(app_of(download))


def test_webtest_get(client, download):
    resp = client.get("/")
    assert resp.status == "200 OK"
    assert resp.headerlist == whole_headers(download)
    assert resp.body == CONTENT


def test_webtest_head_has_the_headers_of_get(client):
    assert client.head("/").headerlist == client.get("/").headerlist


def test_webtest_range(client, download):
    resp = client.get("/", headers={"Range": "bytes=-10"}, status=206)
    assert resp.headers["Content-Range"] == "bytes 9990-9999/10000"
    assert resp.headers["Content-Length"] == "10"
    assert resp.body == CONTENT[-10:]


def test_webtest_if_range_that_does_not_match_gets_the_whole_file(client):
    resp = client.get("/", headers={"Range": "bytes=0-9", "If-Range": '"0123"'}, status=200)
    assert resp.body == CONTENT


def test_webtest_416(client):
    resp = client.get("/", headers={"Range": "bytes=10000-"}, status=416)
    assert resp.headers["Content-Range"] == "bytes */10000"
    assert resp.body == b""


def test_webtest_412(client):
    resp = client.get("/", headers={"If-Match": '"0123"'}, status=412)
    assert (resp.headers["Content-Length"], resp.body) == ("0", b"")


def test_webtest_304(client, download):
    resp = client.get("/", headers={"If-None-Match": f'"{download.sha256}"'}, status=304)
    assert resp.headerlist == not_modified_headers(download)
    assert resp.body == b""


@pytest.mark.system
@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_curl_resumes_a_cut_download_from_waitress(tmp_path):
    content = random.Random(4).randbytes(4 * 1024 * 1024)
    download = stored(tmp_path, content, "four.jar")
    answered = []
    socket_map = {}
    server = waitress.create_server(
        app_of(download, answered), map=socket_map, host="127.0.0.1", port=0, threads=1
    )
    loop = threading.Thread(target=server.run, daemon=True)
    loop.start()
    try:
        out = tmp_path / "out"
        out.write_bytes(content[: 1024 * 1024])  # a download cut after its first MiB
        url = f"http://127.0.0.1:{server.effective_port}/four.jar"
        curl = subprocess.run(
            ["curl", "-sS", "--noproxy", "*", "--max-time", "60", "-o", str(out), "-C", "-", url],
            capture_output=True,
            timeout=90,
        )
        assert (curl.returncode, curl.stderr) == (0, b"")
        assert answered == ["206 Partial Content"]
        assert out.read_bytes() == content
    finally:
        # Closed from the loop thread itself, which then finds its map empty and returns.
        server.trigger.pull_trigger(lambda: wasyncore.close_all(socket_map))
        loop.join(10)
        server.task_dispatcher.shutdown()
    assert not loop.is_alive()
