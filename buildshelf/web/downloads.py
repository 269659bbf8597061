"""One stored file sent over HTTP, as nginx's static module sends it (RFC 9110).

`answer(download, environ)` gives a GET or HEAD of a `Download` its status line, headers and
body: the validators, a 412 or a 304 to a conditional request, one byte range (206 or 416), and
the open file for the WSGI server to send; `handed_over`, the same answer without the bytes, for nginx
to send. Where files live and which method reaches here is the caller's business;
`Unavailable` tells it the file on disk is not the one recorded.
"""

import base64
import hashlib
import io
import logging
import os
import re
from dataclasses import dataclass
from email.utils import formatdate

from buildshelf import files
from buildshelf.text import sizes
from buildshelf.web.conditional import etag_matches, http_date

log = logging.getLogger(__name__)
CHUNK_BYTES = 64 * 1024
# The most read from the file at a time. waitress's file wrapper asks for as much as the
# socket's send buffer holds (megabytes on loopback), sends what the socket takes, and reads
# the rest again on its next turn: reads of at most this cut the CPU per MiB sent by a third.
READ_BYTES = 1 << 20
# The URL of a stored file names its bytes, which never change: cache it for a year, and do
# not even revalidate it on reload.
CACHE_CONTROL = "public, max-age=31536000, immutable"
# A kept file's Content-Type, by its extension: the one table (the API document's list of
# the types a download is sent as follows from it).
CONTENT_TYPES = {".jar": "application/java-archive"}
DEFAULT_CONTENT_TYPE = "application/octet-stream"
CHECKSUM_CONTENT_TYPE = "text/plain; charset=utf-8"  # of checksum_answer's
_DIGITS = re.compile(r"[0-9]+")  # ASCII only: int() would also take other scripts' digits
_UNSATISFIABLE = "unsatisfiable"
PRECONDITION_FAILED = "412 Precondition Failed"
NOT_MODIFIED = "304 Not Modified"
# One range in a form that nginx reads as _byte_range does: no spaces, numbers well within
# nginx's 63-bit offsets.
_PLAIN_RANGE = re.compile(r"bytes=(?:[0-9]{1,18}-[0-9]{0,18}|-[0-9]{1,18})")


@dataclass(frozen=True)
class Download:
    path: str  # the object's file on disk
    name: str  # the file name clients save it as (ASCII letters, digits, . _ + -)
    sha256: str  # 64 lowercase hex digits: the strong validator
    size: int  # bytes, as recorded when it was stored
    modified: int  # Last-Modified, epoch seconds (the build's timestamp)


class Unavailable(Exception):
    """The file is not there as recorded: the caller answers 503. The message names why."""


class FileShrank(Exception):
    """The file ended before the last byte of an answer whose headers are out (`cp` over an
    object, `rsync --inplace`): the server closes the connection. Logged where it was found."""


def answer(download: Download, environ: dict) -> tuple[str, list[tuple[str, str]], object]:
    """(status line, headers, body) for a GET or HEAD of `download`; body is an iterable for
    WSGI. Raises Unavailable, whatever the answer, when the file is not as recorded."""
    status, headers, start, length = _decided(download, environ)
    fd = _opened(download)  # also for a 304: a broken store should not go unnoticed
    if environ.get("REQUEST_METHOD") == "HEAD" or length == 0:
        os.close(fd)
        return status, headers, []
    file = _File(fd, download.path, start + length)
    file.seek(start)
    wrapper = environ.get("wsgi.file_wrapper")
    if wrapper is not None:
        # waitress's sends from its loop thread, and at most Content-Length bytes from here.
        return status, headers, wrapper(file, CHUNK_BYTES)
    return status, headers, _Chunks(file)


def streamed(download: Download, environ: dict, check, chunks) -> tuple[str, list, object]:
    """answer(), for a file kept elsewhere (an object store): `check()` raises Unavailable
    when it is not there as recorded, for every answer, as answer() opens the file;
    `chunks(start, length)` gives the bytes of the answer, a bounded chunk at a time."""
    status, headers, start, length = _decided(download, environ)
    check()
    if environ.get("REQUEST_METHOD") == "HEAD" or length == 0:
        return status, headers, []
    return status, headers, _Streamed(download.path, chunks(start, length), length)


def handed_over(download: Download, environ: dict, uri: str) -> tuple[str, list, object]:
    """answer(), but with the bytes left to a proxy in front that sends them from the store
    itself (nginx's X-Accel-Redirect to `uri`, deploy/nginx.conf).

    Buildshelf still decides all but the bytes: whether the file is there as recorded
    (Unavailable), a 412, a 304 or a 416, and every header. A 200 or a 206 it hands over, with an
    empty body, when nginx will send the same (it answers Range and If-Range itself, against
    the ETag and Last-Modified given here); the rare request nginx would judge otherwise, it
    answers as answer() does."""
    status, headers, _, _ = _decided(download, environ)
    if status[:3] in ("200", "206") and not _nginx_agrees(download, environ, status):
        return answer(download, environ)
    os.close(_opened(download))
    if status[:3] not in ("200", "206"):
        return status, headers, []
    # nginx sends the Content-Length, and the Accept-Ranges of a 200 (even beside one given
    # here); what is given here has to fit this answer's own empty body.
    headers = [h for h in _headers(download, 0) if h[0] != "Accept-Ranges" or status[:3] == "206"]
    return "200 OK", [("X-Accel-Redirect", uri), *headers], []


def from_first_byte(download: Download, environ: dict) -> bool:
    """Whether answer() (or nginx, handed_over) answers a GET of `download` with the file from
    its first byte: a 200, or a 206 whose range starts at byte 0. A 304, a 412, a 416 and a
    range starting later (a resume) do not."""
    condition, byte_range = _judged(download, environ)
    if condition is not None or byte_range == _UNSATISFIABLE:
        return False
    return byte_range is None or byte_range[0] == 0


def checksum_answer(download: Download, environ: dict) -> tuple[str, list, bytes]:
    """(status line, headers, body) for a GET or HEAD of the download's checksum line. It is
    made from the data, so it answers while the file is missing; it has validators of its
    own (a hash of the line: never the file's ETag, which names other bytes) and answers the
    conditions as the file does, but no range."""
    line = checksum_line(download)
    etag = f'"{hashlib.sha256(line).hexdigest()}"'
    validators = _validators(download, etag)
    condition = _condition(etag, download.modified, environ)
    if condition == PRECONDITION_FAILED:
        return condition, [("Content-Length", "0")], b""
    if condition == NOT_MODIFIED:
        return condition, validators, b""
    return "200 OK", [("Content-Type", CHECKSUM_CONTENT_TYPE), *validators], line


def checksum_line(download: Download) -> bytes:
    """The file's line in a SHA256SUMS file, as `sha256sum -c` reads it."""
    return f"{download.sha256}  {download.name}\n".encode("ascii")


def _opened(download):
    """A descriptor of the download's file, checked to be the regular file recorded."""
    try:
        # Without blocking, so that a FIFO put in the file's place cannot hang a worker. A
        # link is not followed (nginx in front refuses one too, deploy/nginx.conf).
        fd, st = files.open_regular(download.path, follow_symlinks=False)
    except FileNotFoundError:
        raise Unavailable("missing") from None
    except files.NotRegular as error:
        raise Unavailable(f"is {error.kind}, not a regular file") from None
    except OSError as error:
        raise Unavailable(f"cannot be opened: {error.strerror}") from None
    if st.st_size != download.size:
        os.close(fd)
        raise Unavailable("is {}, expected {}".format(*sizes(st.st_size, download.size)))
    return fd


def _nginx_agrees(download, environ, status):
    """Whether nginx's static module, handed this request, sends the `status` (200 or 206)
    decided here. It judges If-Match and If-Unmodified-Since against the file's own
    validators, and answers 416 to a Range value it cannot parse, where answer() ignores it."""
    if "HTTP_IF_MATCH" in environ or "HTTP_IF_UNMODIFIED_SINCE" in environ:
        return False
    range_value = environ.get("HTTP_RANGE")
    if range_value is None or not _if_range_holds(environ.get("HTTP_IF_RANGE"), download):
        return True  # nginx checks If-Range before the range, as answer() does
    return status[:3] == "206" and _PLAIN_RANGE.fullmatch(range_value) is not None


def _judged(download, environ):
    """What a GET or HEAD of `download` is answered with, in RFC 9110's order (13.2.2): the
    conditions (_condition), then If-Range, then Range. (condition, byte range): the
    condition PRECONDITION_FAILED, NOT_MODIFIED or None; the range None (the whole file),
    _UNSATISFIABLE or (first, last), and None when a condition decided."""
    condition = _condition(_etag(download), download.modified, environ)
    if condition is not None:
        return condition, None
    range_value = environ.get("HTTP_RANGE")
    if range_value is not None and _if_range_holds(environ.get("HTTP_IF_RANGE"), download):
        return None, _byte_range(range_value, download.size)
    return None, None


def _decided(download, environ):
    """(status line, headers, first byte, byte count) of the answer (_judged)."""
    condition, byte_range = _judged(download, environ)
    if condition == PRECONDITION_FAILED:
        return condition, [("Content-Length", "0")], 0, 0
    if condition == NOT_MODIFIED:
        return condition, _validators(download), 0, 0
    if byte_range is None:
        return "200 OK", _headers(download, download.size), 0, download.size
    if byte_range == _UNSATISFIABLE:
        headers = [("Content-Range", f"bytes */{download.size}"), ("Content-Length", "0")]
        return "416 Range Not Satisfiable", headers, 0, 0
    start, end = byte_range
    length = end - start + 1
    headers = _headers(download, length)
    headers.append(("Content-Range", f"bytes {start}-{end}/{download.size}"))
    return "206 Partial Content", headers, start, length


def _condition(etag, modified, environ):
    """What the conditional headers of a GET or HEAD decide before any range, in RFC 9110's
    order (13.2.2): PRECONDITION_FAILED when If-Match (strong comparison), or else
    If-Unmodified-Since, fails; NOT_MODIFIED when If-None-Match, or else If-Modified-Since,
    finds the client's copy current; None to answer in full. An invalid date is ignored."""
    if_match = environ.get("HTTP_IF_MATCH")
    if if_match is not None:  # then If-Unmodified-Since is ignored (RFC 9110 13.1.4)
        if not etag_matches(if_match, etag, strong=True):
            return PRECONDITION_FAILED
    else:
        since = http_date(environ.get("HTTP_IF_UNMODIFIED_SINCE"))
        if since is not None and modified > since:
            return PRECONDITION_FAILED
    if_none_match = environ.get("HTTP_IF_NONE_MATCH")
    if if_none_match is not None:  # then If-Modified-Since is ignored (RFC 9110 13.1.3)
        return NOT_MODIFIED if etag_matches(if_none_match, etag) else None
    since = http_date(environ.get("HTTP_IF_MODIFIED_SINCE"))
    return NOT_MODIFIED if since is not None and since >= modified else None


def _if_range_holds(if_range, download):
    """Whether to honour Range: no If-Range, or one naming this very representation."""
    if if_range is None:
        return True
    value = if_range.strip()
    if value.startswith(('"', "W/")):
        return value == _etag(download)  # strong comparison: a weak tag never matches
    return http_date(value) == download.modified


def _byte_range(value, size):
    """(first, last) byte of the one range `value` asks for; _UNSATISFIABLE when none of it
    lies in the file; None when the header is to be ignored (another unit, a malformed value,
    several ranges: for these the whole file is the answer, as RFC 9110 14.2 allows)."""
    unit, equals, ranges = value.partition("=")
    if not equals or unit.strip().lower() != "bytes":
        return None
    specs = [spec.strip() for spec in ranges.split(",") if spec.strip()]
    if len(specs) != 1:
        return None
    first, dash, last = specs[0].partition("-")
    first, last = first.strip(), last.strip()
    if not dash or not all(_DIGITS.fullmatch(n) for n in (first, last) if n) or not (first or last):
        return None
    try:
        first_pos = int(first) if first else None
        last_pos = int(last) if last else None
    except ValueError:  # more digits than int() converts: no file is that large anyway
        return None
    if first_pos is None:  # a suffix: the last `last_pos` bytes
        if last_pos == 0 or size == 0:
            return _UNSATISFIABLE
        return max(size - last_pos, 0), size - 1
    if last_pos is not None and last_pos < first_pos:
        return None  # invalid (RFC 9110 14.1.1), so the header is ignored
    if first_pos >= size:
        return _UNSATISFIABLE
    return first_pos, size - 1 if last_pos is None else min(last_pos, size - 1)


def _headers(download, length):
    """The headers of a 200, a 206 (which adds Content-Range) and a HEAD."""
    name = download.name.replace("\\", "\\\\").replace('"', '\\"')
    digest = base64.b64encode(bytes.fromhex(download.sha256)).decode("ascii")
    return [
        ("Content-Type", content_type(download.name)),
        ("Content-Length", str(length)),
        ("Content-Disposition", f'attachment; filename="{name}"'),
        *_validators(download),
        ("Accept-Ranges", "bytes"),
        # The whole file's digest (RFC 9530), so also on a 206: a client checks what it joined.
        ("Repr-Digest", f"sha-256=:{digest}:"),
        # Stored files are served from the service's own origin: never let a browser run one.
        ("X-Content-Type-Options", "nosniff"),
        ("Content-Security-Policy", "sandbox"),
    ]


def _validators(download, etag=None):
    """The headers a 304 repeats from the 200 it stands for; the file's ETag unless another
    is given."""
    return [
        ("ETag", etag or _etag(download)),
        ("Last-Modified", formatdate(download.modified, usegmt=True)),
        ("Cache-Control", CACHE_CONTROL),
    ]


def _etag(download):
    return f'"{download.sha256}"'


def content_type(name: str) -> str:
    """A kept file's Content-Type, by its name's extension (CONTENT_TYPES)."""
    return CONTENT_TYPES.get(os.path.splitext(name)[1].lower(), DEFAULT_CONTENT_TYPE)


class _File(io.FileIO):
    """The open file as the server reads it: the answer's bytes, which end at `end` whatever
    the file on disk does since it was checked, read at most READ_BYTES at a time. A raw
    file may return fewer bytes than asked; waitress's file wrapper sends what it gets and
    reads on."""

    def __init__(self, fd, path, end):
        super().__init__(fd, "rb")
        self.path, self.end = path, end
        self.found_short = False

    def seek(self, offset, whence=os.SEEK_SET):
        # waitress's file wrapper measures the body by seeking to the end: a file that shrank
        # since the headers were decided made it send a shorter Content-Length than they say,
        # under the whole file's ETag and Repr-Digest.
        if whence == os.SEEK_END:
            return super().seek(self.end + offset)
        return super().seek(offset, whence)

    def read(self, size=-1):
        position = self.tell()
        wanted = self.end - position
        if size is not None and size >= 0:
            wanted = min(size, wanted, READ_BYTES)
        chunk = super().read(max(wanted, 0))
        # A regular file reads short only at its end: it shrank. waitress would ask again on
        # every turn of its loop, at 100% of a core until the connection timed out; and it
        # reads what it sent a second time to skip past it, so a short read then, with the
        # file restored before the next, sent some bytes twice in a body of the right length.
        # A read that ran into a truncation may also have copied the zeros the kernel writes
        # over the cut page: the file's size says so even when the read was whole.
        size = os.fstat(self.fileno()).st_size
        if len(chunk) < wanted or size < self.end:
            self._shrank(size)
        return chunk

    def _shrank(self, size):
        if not self.found_short:  # waitress may ask once more before the connection closes
            self.found_short = True
            log.error(
                "%s shrank while being sent (it is %s, the answer needs %s): the "
                "connection is closed",
                self.path,
                *sizes(size, self.end),
            )
        raise FileShrank(self.path)


class _Chunks:
    """The file's answer, 64 KiB at a time, when the server has no wsgi.file_wrapper. A
    class, not a generator: close() must close the file even when the server closes the body
    without iterating it, where a generator's finally would not run."""

    def __init__(self, file):
        self.file = file

    def __iter__(self):
        while chunk := self.file.read(CHUNK_BYTES):
            yield chunk

    def close(self):
        self.file.close()


class _Streamed:
    """The chunks of an answer from elsewhere, `length` bytes of them: a source that ends
    short (or fails) closes the connection, as a file that shrank does (FileShrank)."""

    def __init__(self, path, chunks, length):
        self.path, self.chunks, self.length = path, chunks, length

    def __iter__(self):
        sent = 0
        try:
            for chunk in self.chunks:
                sent += len(chunk)
                yield chunk
        except Exception as problem:  # the store failed: what was sent cannot be finished
            log.error("%s: %s while being sent: the connection is closed", self.path, problem)
            raise FileShrank(self.path) from None
        if sent != self.length:
            log.error("%s ended after %d of %d bytes: the connection is closed", self.path,
                      sent, self.length)  # fmt: skip
            raise FileShrank(self.path)

    def close(self):
        close = getattr(self.chunks, "close", None)
        if close is not None:
            close()
