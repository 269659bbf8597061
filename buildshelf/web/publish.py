"""The write routes: `PUT /api/v2/projects/{slug}/builds/{number}` publishes a build and
`DELETE` of the same yanks it, for a bearer credential of the project (credentials.py), each
a function of the Service (service.py) listed in ROUTES; `screen`, which refuses a request on
its headers alone, before its body is read, and defers a write's credential to `prove`,
which the server runs off its loop thread before it reads the body; and `consume`, which
gives the server the Upload that takes a publish's body as it arrives. make_app hands the
server the last two, bound to its Service.

A publish goes through writer.publish, as `buildshelf publish` does: the same lock, rules and
messages. The body is a build's JSON, or multipart/form-data with a part `build` (that JSON)
and a part `file`, the artifact, parsed as a stream while it arrives: the file's bytes go
straight into a staging file inside the artifact store, hashed on the way, which the writer
then renames into place under the lock. Whatever happens, no staging file outlives its
request. Once written, the store is read again before the answer, so that the client's next
GET shows the write.
"""

import logging
import re
import time
from contextlib import contextmanager

import bottle
import multipart

from buildshelf import artifacts, datafile, refusals, writer
from buildshelf.model import published_timestamp_problem, sha256_hex, whole_number
from buildshelf.publishing.credentials import (
    Forbidden,
    NoRoom,
    Publisher,
    Unauthorized,
    Unavailable,
)
from buildshelf.text import printable
from buildshelf.web.answers import JSON, encode
from buildshelf.web.contract import CONSUMED, PROVEN, Deferred
from buildshelf.web.query import API, ApiError, parse
from buildshelf.web.service import Service

log = logging.getLogger(__name__)

RULE = API + "/projects/<slug>/builds/<number>"
PATH = re.compile(re.escape(API) + r"/projects/([^/]+)/builds/[^/]+\Z")
METHODS = frozenset({"PUT", "DELETE"})
ALLOWED = "PUT, DELETE"
MULTIPART = "multipart/form-data"
BODY_BYTES = 1024  # the body any other request may have (DELETE's too)
BUILD_BYTES = 1 << 20  # a build's JSON: a JSON body, or the part `build`
# Room in a multipart body for what is not the file: the part `build`, and the parts'
# headers and boundaries (a few hundred bytes).
FRAMING_BYTES = BUILD_BYTES + (64 << 10)
PART_HEADER_BYTES = 4096
PARTS = ("build", "file")
READ_BYTES = artifacts.CHUNK_BYTES
# What a build's JSON may hold: the data files' keys, less those the route makes.
BUILD_KEYS = (
    "channelVersion",
    "url",
    "timestamp",
    "isExperimental",
    "commits",
    "downloadUrl",
    "sha256",
    "size",
    "buildNumber",  # the path's number, if given
)
BEARER = {"WWW-Authenticate": "Bearer"}


def max_body_bytes(max_file_bytes: int) -> int:
    """The largest body a request may have: a file of `max_file_bytes` and its framing."""
    return max_file_bytes + FRAMING_BYTES


def screen(service: Service, environ) -> ApiError | Deferred | None:
    """The refusal of a request that its headers (`environ` without a body) earn, or
    None: for the write routes 429, 401 for a credential whose text shows that it cannot
    be valid (Credentials.precheck), 415, 413 by Content-Length, and else Deferred(the
    credential proven, by prove()); for every other route 413 for a body of more than
    BODY_BYTES. Cheap: the server calls it on its loop thread for every request, and no
    file or network is touched here."""
    if environ["REQUEST_METHOD"] not in METHODS or not PATH.match(environ["PATH_INFO"]):
        # Most requests have no body: let through here, without the call (every request).
        if environ.get("CONTENT_LENGTH", "0") == "0" and "HTTP_TRANSFER_ENCODING" not in environ:
            return None
        return _over_the_body_limit(environ, BODY_BYTES, service.max_file_bytes)
    address = environ.get("REMOTE_ADDR", "")
    refused = _limited(service, address)
    if refused is not None:
        return refused
    try:
        if service.credentials is None:
            raise Unauthorized(NO_WRITES)
        service.credentials.precheck(environ.get("HTTP_AUTHORIZATION"))
    except Unauthorized as error:
        service.limit.failed(address)
        return ApiError(401, "unauthorized", str(error), BEARER)
    most = BODY_BYTES
    if environ["REQUEST_METHOD"] == "PUT":
        kind = _media_type(environ)
        if kind not in (MULTIPART, JSON):
            return ApiError(
                415,
                "unsupported_media_type",
                f"a build is published as {MULTIPART} (a part 'build', the build's JSON, "
                f"and a part 'file', its file) or as {JSON} (the build, for a file kept "
                f"elsewhere), not {printable(kind) or 'a body of no Content-Type'}",
            )
        most = max_body_bytes(service.max_file_bytes) if kind == MULTIPART else BUILD_BYTES
    # No upload is held, and no byte of it read past the server's first read, before its
    # credential is proven: an attacker with no secret cannot fill the disk.
    return _over_the_body_limit(environ, most, service.max_file_bytes) or Deferred(
        lambda: prove(service, environ)
    )


def _over_the_body_limit(environ, most, max_file_bytes):
    """The 413 of a body over `most` bytes by its Content-Length, or chunked (a size no
    header says) where BODY_BYTES are taken at most; None if it is within."""
    length = environ.get("CONTENT_LENGTH")
    chunked = most == BODY_BYTES and "HTTP_TRANSFER_ENCODING" in environ
    if not (chunked or (length and _over(length, most))):
        return None
    if most > BUILD_BYTES:
        return _too_large(
            f"the body is larger than this server takes: a file of "
            f"{max_file_bytes / (1 << 20):g} MiB at most (the server's --max-file-mb), "
            f"and {FRAMING_BYTES} bytes for the part 'build' and the framing"
        )
    return _too_large(f"this request may have a body of {most} bytes at most")


def _limited(service: Service, address):
    """The 429 of an address over the failure limit, or None."""
    wait = service.limit.retry_after(address)
    if wait is None:
        return None
    return ApiError(
        429,
        "too_many_requests",
        f"too many failed authentications from {address}: try again in {wait} s",
        {"Retry-After": str(wait)},
    )


def prove(service: Service, environ) -> Publisher:
    """The publisher that a write's credential proves for the project its path names, or
    the ApiError raised (a 401 counted against the address at once, 403, 404, 503, 507).
    It reads the state's databases and may fetch the issuer's keys: never on the loop
    thread. Decided once, before the body: an upload that outlives a GitHub token's few
    minutes is not refused at its end."""
    address = environ.get("REMOTE_ADDR", "")
    refused = _limited(service, address)  # again: writes sent at once are decided one by one
    if refused is not None:
        raise refused
    slug = _slug(environ["PATH_INFO"])
    try:
        return service.credentials.authenticate(environ.get("HTTP_AUTHORIZATION"), slug)
    except Unauthorized as error:
        service.limit.failed(address)
        raise ApiError(401, "unauthorized", str(error), BEARER) from None
    except Forbidden as error:
        _project(service, slug)  # a valid credential learns that a project does not exist
        raise ApiError(403, "forbidden", str(error)) from None
    except NoRoom as error:
        raise ApiError(507, "insufficient_storage", str(error)) from None
    except Unavailable as error:
        raise ApiError(503, "credentials_unavailable", str(error)) from None


def consume(service: Service, environ) -> "Upload | None":
    """The Upload that takes a publish's multipart body as it arrives (called by the
    server on its loop thread, once screen() let the request through), or None: the
    file is hashed and stored while it is sent, not in a burst once it is all in (issue
    24), and no copy of the body is kept meanwhile."""
    if not (
        environ["REQUEST_METHOD"] == "PUT"
        and PATH.match(environ["PATH_INFO"])
        and _media_type(environ) == MULTIPART
    ):
        return None
    try:
        return Upload.of(environ, service.store.artifacts, service.max_file_bytes)
    except ApiError:  # the route answers it, from the body kept as any other
        return None


def _authorized(service: Service, environ, slug):
    """The publisher and project of a write, or the refusal: the publisher the server
    proved before the body (contract.PROVEN), or, under a server that does not screen (a
    test's), the screen's verdict here."""
    publisher = environ.get(PROVEN)
    if publisher is None:
        verdict = screen(service, environ)
        if isinstance(verdict, ApiError):
            raise verdict
        publisher = verdict.decide()
    return publisher, _project(service, slug)


def _project(service: Service, slug):
    """The project a URL's slug names, in any letter case, as the reads find it."""
    found = service.store.snapshot().project(slug)
    if found is None:
        raise ApiError(
            404,
            "unknown_project",
            f"no project {printable(slug)!r}: see {API}/projects for the projects",
        )
    return found


def put_build(service: Service, slug, number):
    """Publish a build: 201 added, 200 a retry or a replace."""
    environ = bottle.request.environ
    publisher, found = _authorized(service, environ, slug)
    slug = found.slug
    number = whole_number(number)
    if number is None:
        raise _invalid("the path's build number must be a whole number, 0 or more")
    replace = dict(parse()).get("replace", "").lower() == "true"
    with _received(environ, service.store.artifacts, service.max_file_bytes) as (given, file):
        build, keep = _build(given, file, number, found.ci_job_url)
        try:
            published = writer.publish(
                service.store.directory,
                slug,
                build,
                replace=replace,
                any_timestamp="timestamp" not in given,
                keep=keep,
                store_dir=service.store.artifacts,
            )
        except refusals.Refused as refused:
            raise _answer(refused, slug, number) from None
    written = datafile.checked_build(build)
    if published.outcome == "unchanged":  # a retry may match whatever the time there
        shown, served = _read_back(service, found, number, lambda served: served is not None)
    else:
        shown, served = _read_back(service, found, number, lambda served: served == written)
    log.info(
        "%s build %d of %s (sha256 %s) by %s from %s",
        published.outcome,
        number,
        slug,
        build.get("sha256", "-"),
        publisher.who,
        environ.get("REMOTE_ADDR", "-"),
    )
    bottle.response.status = 201 if published.outcome == "added" else 200
    bottle.response.content_type = JSON
    return encode(service.shapes.build_json(shown, served or written))


def delete_build(service: Service, slug, number):
    """Yank a build: 204."""
    environ = bottle.request.environ
    publisher, found = _authorized(service, environ, slug)
    slug = found.slug
    parse()
    given, number = number, whole_number(number)
    if number is None:
        raise ApiError(404, "unknown_build", f"project {slug!r} has no build {printable(given)!r}")
    try:
        yanked = writer.yank(service.store.directory, slug, number, service.store.artifacts)
    except refusals.Refused as refused:
        raise _answer(refused, slug, number) from None
    _read_back(service, found, number, lambda build: build is None)
    log.info(
        "yanked build %d of %s (sha256 %s) by %s from %s",
        number,
        slug,
        yanked.get("sha256", "-"),
        publisher.who,
        environ.get("REMOTE_ADDR", "-"),
    )
    bottle.response.status = 204
    return b""


def other_method(service: Service, slug, number):
    raise ApiError(
        405,
        "method_not_allowed",
        "PUT publishes a build here and DELETE yanks it: nothing else",
        {"Allow": ALLOWED},
    )


def _read_back(service: Service, found, number, shows):
    """(project, build) as the store serves them once `shows(build)` is true of build
    `number` of project `found`: read your own writes. A check begun after the write
    reads the file; if one already under way held the store too long, it is waited for.
    A store that still does not show the write (a hung disk) is logged, and the write
    answered from what was read before."""
    for refreshed in (service.store.refreshed, service.store.refresh):
        shown = refreshed().project(found.slug)
        served = shown.build(number) if shown else None
        if shown is not None and shows(served):
            return shown, served
    log.warning(
        "build %d of %s was written, but the data read back does not show it",
        number,
        found.slug,
    )
    return shown or found, served


ROUTES = (
    (RULE, "PUT", put_build),
    (RULE, "DELETE", delete_build),
    (RULE, "ANY", other_method),
)


NO_WRITES = "this server takes no credential: it takes no writes"


def _slug(path_info):
    """The slug of a write's PATH_INFO, as bottle reads it: WSGI's latin-1 string as UTF-8."""
    raw = PATH.match(path_info).group(1)
    return raw.encode("latin-1", "replace").decode("utf-8", "replace")


def _over(length, most):
    """Whether a Content-Length (digits, as the server checked) says more than `most`."""
    return not length.isdigit() or len(length) > 18 or int(length) > most


def _too_large(message):
    return ApiError(413, "too_large", message)


def _invalid(message):
    return ApiError(400, "invalid_build", message)


def _media_type(environ):
    return environ.get("CONTENT_TYPE", "").partition(";")[0].strip().lower()


def _answer(refused, slug, number):
    """The HTTP answer to a writer's refusal."""
    if isinstance(refused, refusals.NoProject):
        return ApiError(404, "unknown_project", f"no project {slug!r}")
    if isinstance(refused, refusals.NoBuild):
        return ApiError(404, "unknown_build", f"project {slug!r} has no build {number}")
    if isinstance(refused, refusals.Exists):
        return ApiError(
            409,
            "build_exists",
            f"build {number} of {slug!r} is already there with another "
            f"{', '.join(refused.fields)}: PUT it with ?replace=true to replace it (nothing "
            "written)",
        )
    if isinstance(refused, refusals.Invalid):
        return _invalid(str(refused))
    log.error("a write was refused: %s", refused)
    if isinstance(refused, refusals.NoSpace):
        return ApiError(
            507,
            "insufficient_storage",
            "the server's disk is full: nothing was written; try again once it has room",
        )
    return ApiError(500, "internal_error", "internal error: the cause is in the server's log")


class _File:
    """The part `file` of a publish: its name, and the bytes received (Staged)."""

    def __init__(self, name, staged):
        self.name, self.staged = name, staged


def _build(given, file, number, ci_job_url):
    """(the build's document, writer.Keep or None) of a publish's JSON `given` and `file`,
    checked by the data files' rules; 400 invalid_build for the first problem."""
    if type(given) is not dict:
        raise _invalid('the build must be a JSON object, such as {"channelVersion": "1.21"}')
    unknown = [key for key in given if key not in BUILD_KEYS]
    if unknown:
        raise _invalid(
            f"unknown key {unknown[0]!r}: a build takes {', '.join(BUILD_KEYS[:-1])}"
            + (" (the file's name is the part 'file''s filename)" if unknown[0] == "file" else "")
        )
    if given.get("buildNumber", number) != number:
        raise _invalid(f"'buildNumber' is {given['buildNumber']!r}, but the path says {number}")
    if "channelVersion" not in given:
        raise _invalid("missing key 'channelVersion'")
    timestamp = given.get("timestamp", time.time_ns() // 1_000_000)
    if type(timestamp) is int and (problem := published_timestamp_problem(timestamp)):
        raise _invalid(f"'timestamp' {timestamp} {problem}")
    keep, integrity = None, {key: given[key] for key in ("sha256", "size") if key in given}
    if file is not None:
        if "downloadUrl" in given:
            raise _invalid(
                "give 'downloadUrl' or a part 'file', not both: the server makes a kept "
                "file's address"
            )
        _check_received(given, file.staged)
        integrity = dict(sha256=file.staged.sha256, size=file.staged.size, file=file.name)
        keep = writer.Keep(file.staged.path, staged=file.staged, name=file.name)
    elif "downloadUrl" not in given:
        raise _invalid("missing key 'downloadUrl' (or a part 'file', for a file Buildshelf keeps)")
    build = datafile.build_document(
        number,
        given["channelVersion"],
        timestamp,
        given.get("isExperimental", False),
        given.get("commits", []),
        url=given.get("url"),  # None: the job run's, made under the lock
        download_url=given.get("downloadUrl"),
        **integrity,
    )
    try:
        url = build["url"] or writer.job_run_url(ci_job_url, number)
    except writer.NoRunUrl as problem:
        raise _invalid(f"{problem}: give it as 'url'") from None
    try:
        datafile.checked_build(dict(build, url=url))
    except datafile.InvalidBuild as problem:
        raise _invalid(str(problem)) from None
    return build, keep


def _check_received(given, staged):
    """The sha256 and size the client gave of a kept file against the bytes received."""
    if "sha256" in given:
        claimed = given["sha256"]
        digest = sha256_hex(claimed) if type(claimed) is str else None
        if digest is None:
            raise _invalid("'sha256' must be 64 hexadecimal digits")
        if digest != staged.sha256:
            raise _invalid(
                f"sha256 mismatch: the file received hashes to {staged.sha256}, 'sha256' says "
                f"{digest} (nothing written)"
            )
    if "size" in given:
        size = given["size"]
        if not (type(size) is int and size >= 0):
            raise _invalid("'size' must be a whole number of bytes, 0 or more")
        if size != staged.size:
            raise _invalid(
                f"'size' is {size}, but the file received is {staged.size} bytes (nothing written)"
            )


@contextmanager
def _received(environ, store_dir, max_file_bytes):
    """(the build's JSON, _File or None) of a publish's body; the file received into
    `store_dir` (`max_file_bytes` at most) is removed at the end of the block, unless the
    writer placed it."""
    upload = None
    try:
        if _media_type(environ) == MULTIPART:
            upload = _upload(environ, store_dir, max_file_bytes)
            yield upload.result()
        else:
            yield _json(_body(environ, BUILD_BYTES), "the body"), None
    finally:
        if upload is not None:
            upload.discard()


def _json(data, what):
    try:
        return datafile.parse_json("build", data)
    except datafile.DataError as error:
        raise _invalid(f"{what} is not a JSON build: {error.located()}") from None


def _chunks(environ):
    """The body, chunk by chunk, as the request's Content-Length gives it."""
    body, left = environ["wsgi.input"], int(environ.get("CONTENT_LENGTH") or 0)
    while left > 0:
        chunk = body.read(min(READ_BYTES, left))
        if not chunk:
            return  # the client left: the parser says what is missing
        left -= len(chunk)
        yield chunk


def _body(environ, most):
    data = bytearray()
    for chunk in _chunks(environ):
        data += chunk
        if len(data) > most:
            raise _too_large(f"a build's JSON may have {most} bytes at most")
    return bytes(data)


class Upload:
    """A publish's multipart body, parsed as it arrives: the part 'build' kept (BUILD_BYTES
    at most), the part 'file' received into `store_dir` by an artifacts.Staging, hashed on
    the way. feed() each chunk, then b"" at the end; result() is (the part 'build' as JSON,
    _File or None), or raises the ApiError the body earned, the first found; discard()
    removes the file received, at any point."""

    def __init__(self, boundary, store_dir, max_file_bytes):
        self.store_dir, self.max_file_bytes = store_dir, max_file_bytes
        try:
            self.parser = multipart.PushMultipartParser(
                boundary,
                max_header_size=PART_HEADER_BYTES,
                max_segment_count=len(PARTS),
                strict=True,
            )
        except multipart.MultipartError as error:  # a boundary of over 1,024 characters
            raise _invalid(f"the {MULTIPART} body is malformed: {error}") from None
        self.build, self.name, self.seen, self.part = bytearray(), None, set(), None
        self.staging = self.staged = self.error = None

    @classmethod
    def of(cls, environ, store_dir, max_file_bytes):
        """The Upload of a request's body; 400 if its Content-Type names no boundary."""
        _, options = multipart.parse_options_header(environ.get("CONTENT_TYPE", ""))
        if not options.get("boundary"):
            raise _invalid(f"a {MULTIPART} body needs a boundary in its Content-Type")
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
            raise _invalid("the part 'build' is missing: it holds the build's JSON")
        given = _json(bytes(self.build), "the part 'build'")
        return given, (None if self.name is None else _File(self.name, self.staged))

    def discard(self):
        if self.staging is not None:
            self.staging.discard()

    def _parse(self, chunk):
        try:
            for event in self.parser.parse(chunk):
                if isinstance(event, multipart.MultipartSegment):
                    self.part = _part(event, self.seen)
                    if self.part == "file":
                        self.name = _file_name(event)
                        self.staging = artifacts.Staging(
                            self.store_dir, self.name, self.max_file_bytes
                        )
                elif event is None:
                    self.part = None
                elif self.part == "build":
                    self.build += event
                    if len(self.build) > BUILD_BYTES:
                        raise _invalid(f"the part 'build' may have {BUILD_BYTES} bytes at most")
                else:
                    self.staging.write(event)
            if not chunk and self.staging is not None:  # the end
                self.staged = self.staging.finish()
        except multipart.ParserLimitReached as error:
            raise _invalid(
                f"the {MULTIPART} body goes past a limit ({error}): it takes the parts "
                f"{' and '.join(PARTS)}, each with {PART_HEADER_BYTES} bytes of headers at most"
            ) from None
        except multipart.MultipartError as error:
            raise _invalid(f"the {MULTIPART} body is malformed: {error}") from None
        except artifacts.TooLarge:
            raise _too_large(
                f"the file may have {self.max_file_bytes / (1 << 20):g} MiB at most (the "
                "server's --max-file-mb)"
            ) from None
        except artifacts.Refused as error:  # the store cannot take it: full, or not writable
            refusal = refusals.NoSpace if isinstance(error, artifacts.NoSpace) else refusals.Refused
            raise _answer(refusal(str(error)), None, None) from None


def _upload(environ, store_dir, max_file_bytes):
    """The Upload of a publish's multipart body, fed whole: by the server as the body
    arrived (contract.CONSUMED), or here from wsgi.input (a server that does not consume
    bodies, a test's)."""
    consumed = environ.get(CONSUMED)
    if consumed is not None:
        upload = consumed()
    else:
        upload = Upload.of(environ, store_dir, max_file_bytes)
        for chunk in _chunks(environ):
            upload.feed(chunk)
            if upload.error is not None:  # the rest is not read
                break
    upload.feed(b"")  # the end, which the body must have reached
    return upload


def _part(segment, seen):
    """The name of the part `segment` begins, once it is known to be one of PARTS, once."""
    name = segment.name
    if name not in PARTS:
        raise _invalid(f"unknown part {name!r}: a publish has a part 'build' and a part 'file'")
    if name in seen:
        raise _invalid(f"the part {name!r} is given twice: give it once")
    seen.add(name)
    return name


def _file_name(segment):
    """The artifact's name, the part 'file''s filename: checked as a kept file's name is,
    never cut down to its last segment."""
    # The parser drops a Windows path from a filename: read the header as it was sent.
    _, raw = multipart.parse_options_header(
        segment.header("Content-Disposition", ""), unquote=lambda value, filename: value
    )
    sent = raw.get("filename")
    if sent is None:
        raise _invalid("the part 'file' needs a filename: the artifact's name")
    if "/" in sent or "\\" in sent:
        raise _invalid(
            f"the part 'file''s filename {sent.strip(chr(34))!r} holds a path: give the "
            "file's name alone"
        )
    try:
        return artifacts.check_name(segment.filename or "")
    except artifacts.Refused as refused:
        raise _invalid(str(refused)) from None
