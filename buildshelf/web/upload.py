"""A publish's multipart body, parsed as it arrives (`Upload`): the part `build` kept, the
build's JSON; the part `file` and each part `download:KEY` (an extra file) received into the
artifact store by a Staging of the store each, hashed on the way. The server feeds it the body
through the app's `consume` (publish.py) as the body arrives, and keeps no copy; under a server that does not (a test's), `fed_whole`
feeds it from wsgi.input. What the body earns is an ApiError, the first found: 400
invalid_build, 413 too_large; a store that cannot take the file (full, or not writable) is
answered at once (`refused_by_the_store`, which the route's answers to the writer share), so
that the log says what happened even when the client is gone before the answer.
"""

import logging

import multipart

from buildshelf.datafiles import datafile
from buildshelf.kept import artifacts, objects, stores
from buildshelf.model import MAX_PUBLISHED_EXTRAS, download_key_problem
from buildshelf.web.contract import CONSUMED
from buildshelf.web.query import ApiError
from buildshelf.writing import refusals

log = logging.getLogger(__name__)

MULTIPART = "multipart/form-data"
BUILD_BYTES = 1 << 20  # a build's JSON: a JSON body, or the part `build`
PART_HEADER_BYTES = 4096  # a header line of a part
PART_HEADER_LINES = 8
PARTS = ("build", "file")
EXTRA_PART = "download:"  # then an extra file's key: the part of that extra file
MAX_PARTS = len(PARTS) + MAX_PUBLISHED_EXTRAS
PARTS_TAKEN = (
    f"a publish has a part 'build', a part 'file' and a part '{EXTRA_PART}KEY' for each extra "
    f"file ({MAX_PUBLISHED_EXTRAS} at most)"
)
READ_BYTES = objects.CHUNK_BYTES
# The multipart parser's messages, by how they begin, said as a curl user can act on them:
# its own words ("segment", "parser closed", "option") name its insides. One not here is
# passed on as it is.
_NO_NAME = (
    f"a part of the {MULTIPART} body has no name: each part is a form field, as curl -F "
    "NAME=VALUE sends it"
)
_IN_OUR_WORDS = (
    (
        "Unexpected end of multipart stream",
        f"the {MULTIPART} body ends before its last boundary: it was cut short (the client "
        "stopped sending), and nothing was kept",
    ),
    ("Missing Content-Disposition", _NO_NAME),
    ("Invalid Content-Disposition", _NO_NAME),
    (
        "Malformed segment header",
        f"a header line of a part of the {MULTIPART} body is not NAME: VALUE",
    ),
    ("Maximum segment count", f"the {MULTIPART} body has over {MAX_PARTS} parts: {PARTS_TAKEN}"),
    (
        "Maximum segment header length",
        f"a header line of a part of the {MULTIPART} body has over {PART_HEADER_BYTES} bytes",
    ),
    (
        "Maximum segment header count",
        f"a part of the {MULTIPART} body has over {PART_HEADER_LINES} header lines",
    ),
)


def too_large(message):
    """A 413: a body, or a part of it, over its limit."""
    return ApiError(413, "too_large", message)


def invalid(message):
    """A 400: a publish's body, or the build it gives, not as the route takes it."""
    return ApiError(400, "invalid_build", message)


def malformed(error) -> ApiError:
    """The 400 of a body the multipart parser refused, in a curl user's words."""
    text = str(error)
    for start, said in _IN_OUR_WORDS:
        if text.startswith(start):
            return invalid(said)
    return invalid(f"the {MULTIPART} body is malformed: {text}")


def refused_by_the_store(refused) -> ApiError:
    """The answer to a write refused for a cause of the server's own (a refusals.Refused or
    an objects.Refused): 507 for a full disk, 503 for an artifact store out of reach, else
    500; logged at once."""
    log.error("a write was refused: %s", refused)
    if isinstance(refused, refusals.StoreUnavailable | objects.Unavailable):
        return ApiError(
            503,
            "artifact_store_unavailable",
            "the artifact store is unavailable: nothing was written; try again later",
        )
    if isinstance(refused, refusals.NoSpace | objects.NoSpace):
        return ApiError(
            507,
            "insufficient_storage",
            "the server's disk is full: nothing was written; try again once it has room",
        )
    return ApiError(500, "internal_error", "internal error: the cause is in the server's log")


class _File:
    """A file of a publish (the part `file`, or a part `download:KEY`): its name, and the
    bytes received (Staged)."""

    def __init__(self, name, staged):
        self.name, self.staged = name, staged


def parse_build(data, what):
    """The build's JSON `data`, decoded strictly; 400 if it is not JSON, `what` naming it."""
    try:
        return datafile.parse_json("build", data)
    except datafile.DataError as error:
        raise invalid(f"{what} is not a JSON build: {error.located()}") from None


def chunks(environ):
    """The body, chunk by chunk, as the request's Content-Length gives it."""
    body, left = environ["wsgi.input"], int(environ.get("CONTENT_LENGTH") or 0)
    while left > 0:
        chunk = body.read(min(READ_BYTES, left))
        if not chunk:
            return  # the client left: the parser says what is missing
        left -= len(chunk)
        yield chunk


class Upload:
    """A publish's multipart body, parsed as it arrives: the part 'build' kept (BUILD_BYTES
    at most), the part 'file' and each part 'download:KEY' received into `store_dir` by an
    Staging of the store each, hashed on the way. feed() each chunk, then b"" at the end;
    result() is (the part 'build' as JSON, the part 'file' as a _File or None, the extra
    files as _File by key), or raises the ApiError the body earned, the first found;
    discard() removes the files received, at any point."""

    def __init__(self, boundary, store_dir, max_file_bytes):
        self.store_dir, self.max_file_bytes = store_dir, max_file_bytes
        try:
            self.parser = multipart.PushMultipartParser(
                boundary,
                max_header_size=PART_HEADER_BYTES,
                max_header_count=PART_HEADER_LINES,
                max_segment_count=MAX_PARTS,
                strict=True,
            )
        except multipart.MultipartError as error:  # a boundary of over 1,024 characters
            raise malformed(error) from None
        self.build, self.seen, self.part, self.error = bytearray(), set(), None, None
        # By the name of their part, in the order received: the files' names, their stagings.
        self.names, self.stagings, self.staged = {}, {}, {}

    @classmethod
    def of(cls, environ, store_dir, max_file_bytes):
        """The Upload of a request's body; 400 if its Content-Type names no boundary."""
        _, options = multipart.parse_options_header(environ.get("CONTENT_TYPE", ""))
        if not options.get("boundary"):
            raise invalid(f"a {MULTIPART} body needs a boundary in its Content-Type")
        return cls(options["boundary"], store_dir, max_file_bytes)

    def feed(self, chunk):
        if self.error is not None:
            return
        try:
            self._parse(chunk)
        except ApiError as error:
            self.error = error

    def result(self):
        if self.error is not None:
            raise self.error
        if "build" not in self.seen:
            raise invalid("the part 'build' is missing: it holds the build's JSON")
        given = parse_build(bytes(self.build), "the part 'build'")
        files = {part: _File(self.names[part], self.staged[part]) for part in self.staged}
        extras = {part.removeprefix(EXTRA_PART): file for part, file in files.items()}
        return given, extras.pop("file", None), extras

    def discard(self):
        for staging in self.stagings.values():
            staging.discard()

    def _parse(self, chunk):
        try:
            for event in self.parser.parse(chunk):
                if isinstance(event, multipart.MultipartSegment):
                    self.part = _part(event, self.seen)
                    if self.part != "build":
                        name = self.names[self.part] = _file_name(event, self.part)
                        self.stagings[self.part] = stores.opened(self.store_dir).staging(
                            name, self.max_file_bytes
                        )
                elif event is None:
                    self.part = None
                elif self.part == "build":
                    self.build += event
                    if len(self.build) > BUILD_BYTES:
                        raise invalid(f"the part 'build' may have {BUILD_BYTES} bytes at most")
                else:
                    self.stagings[self.part].write(event)
            if not chunk:  # the end
                for part, staging in self.stagings.items():
                    self.staged[part] = staging.finish()
        except multipart.MultipartError as error:  # ParserLimitReached too
            raise malformed(error) from None
        except objects.TooLarge:
            raise too_large(
                f"the file may have {self.max_file_bytes / (1 << 20):g} MiB at most (the "
                "server's --max-file-mb)"
            ) from None
        except objects.Refused as error:  # the store cannot take it: full, or not writable
            raise refused_by_the_store(error) from None


def fed_whole(environ, store_dir, max_file_bytes):
    """The Upload of a publish's multipart body, fed whole: by the server as the body
    arrived (contract.CONSUMED), or here from wsgi.input (a server that does not consume
    bodies, a test's)."""
    consumed = environ.get(CONSUMED)
    if consumed is not None:
        upload = consumed()
    else:
        upload = Upload.of(environ, store_dir, max_file_bytes)
        for chunk in chunks(environ):
            upload.feed(chunk)
            if upload.error is not None:  # the rest is not read
                break
    upload.feed(b"")  # the end, which the body must have reached
    return upload


def _part(segment, seen):
    """The name of the part `segment` begins, once it is known to be one of PARTS or a part
    of an extra file whose key is one, once."""
    name = segment.name
    if name.startswith(EXTRA_PART):
        if problem := download_key_problem(name.removeprefix(EXTRA_PART)):
            raise invalid(f"the part {name!r}: its key {problem}")
    elif name not in PARTS:
        raise invalid(f"unknown part {name!r}: {PARTS_TAKEN}")
    if name in seen:
        raise invalid(f"the part {name!r} is given twice: give it once")
    if name != "build" and (segment.content_type or "").lower().startswith("multipart/"):
        raise invalid(
            f"the part {name!r} holds several files (as curl -F '{name}=@A,B' sends them): "
            "give one file a part, -F file=@NAME for the build's file and -F "
            f"{EXTRA_PART}KEY=@NAME for each extra file"
        )
    seen.add(name)
    return name


def _file_name(segment, part):
    """The name of the file the part `part` holds, its filename: checked as a kept file's
    name is, never cut down to its last segment."""
    # The parser drops a Windows path from a filename: read the header as it was sent.
    _, raw = multipart.parse_options_header(
        segment.header("Content-Disposition", ""), unquote=lambda value, filename: value
    )
    sent = raw.get("filename")
    if sent is None:
        raise invalid(f"the part {part!r} needs a filename: the file's name")
    if "/" in sent or "\\" in sent:
        raise invalid(
            f"the part {part!r}'s filename {sent.strip(chr(34))!r} holds a path: give the "
            "file's name alone"
        )
    try:
        return artifacts.check_name(segment.filename or "")
    except objects.Refused as refused:
        raise invalid(str(refused)) from None
