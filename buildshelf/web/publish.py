"""The write routes: `PUT /api/v2/projects/{slug}/builds/{number}` publishes a build,
`DELETE` of the same yanks it (for the reason its JSON body may give), and a `POST` to its
`/unyank` and `/purge` serves a yanked build again or deletes its kept files (yank_requests.py
reads and answers what is theirs), for a bearer credential of the project (credentials.py),
each a function of the Service (service.py) listed in ROUTES; `screen`, which refuses a
request on its headers alone, before its body is read, and defers a write's credential to
`prove`, which the server runs off its loop thread before it reads the body; and `consume`,
which gives the server the Upload that takes a publish's body as it arrives. make_app hands
the server the last two, bound to its Service.

A publish goes through writer.publish, as `buildshelf publish` does: the same lock, rules and
messages. The body is a build's JSON, or multipart/form-data with a part `build` (that JSON),
a part `file`, the artifact, and a part `download:KEY` for each extra file, parsed as a
stream while it arrives (upload.py): each file's bytes go straight into a staging file
inside the artifact store, hashed on the way, which the writer then renames into place under
the lock. Whatever happens, no staging file
outlives its request. The build it gives is checked by the data files' rules
(given_build.py). Once written, the store is read again before the answer, so that the
client's next GET shows the write.
"""

import logging
import re
from contextlib import contextmanager

import bottle

from buildshelf.datafiles import datafile
from buildshelf.model import whole_number
from buildshelf.publishing.credentials import (
    Forbidden,
    NoRoom,
    Publisher,
    Unauthorized,
    Unavailable,
)
from buildshelf.text import closest, counted, printable
from buildshelf.web import yank_requests
from buildshelf.web.answers import JSON, encode
from buildshelf.web.contract import PROVEN, Deferred
from buildshelf.web.given_build import build_of
from buildshelf.web.query import API, ApiError, parse
from buildshelf.web.service import Service
from buildshelf.web.upload import (
    BUILD_BYTES,
    MULTIPART,
    Upload,
    chunks,
    fed_whole,
    invalid,
    parse_build,
    refused_by_the_store,
    too_large,
)
from buildshelf.writing import purging, refusals, writer
from buildshelf.writing.objects_in_use import distinct_objects

log = logging.getLogger(__name__)

RULE = API + "/projects/<slug>/builds/<number>"
PATH = re.compile(re.escape(API) + r"/projects/([^/]+)/builds/[^/]+\Z")
METHODS = frozenset({"PUT", "DELETE"})
ALLOWED = "PUT, DELETE"
BODY_BYTES = 1024  # the body any other request may have (DELETE's too)
# Room in a multipart body for what is not the file: the part `build`, and the parts'
# headers and boundaries (a few hundred bytes).
FRAMING_BYTES = BUILD_BYTES + (64 << 10)
BEARER = {"WWW-Authenticate": "Bearer"}


def max_body_bytes(max_file_bytes: int) -> int:
    """The largest body a request may have: a file of `max_file_bytes` and its framing."""
    return max_file_bytes + FRAMING_BYTES


def screen(service: Service, environ) -> ApiError | Deferred | None:
    """The refusal of a request that its headers (`environ` without a body) earn, or
    None: for the writes (_written_path) 429, 401 for a credential whose text shows that it
    cannot be valid (Credentials.precheck), 415 (a DELETE's body too, which is JSON), 413 by
    Content-Length, and else Deferred(the credential proven, by prove()); a body sent to a
    build's URL, its /unyank or its /purge with another method, 405; for every other route
    413 for a body of more than BODY_BYTES. Cheap: the server calls it on its loop thread
    for every request, and no file or network is touched here."""
    if not _written_path(environ):
        # Most requests have no body: let through here, without the call (every request).
        if environ.get("CONTENT_LENGTH", "0") == "0" and "HTTP_TRANSFER_ENCODING" not in environ:
            return None
        if PATH.match(environ["PATH_INFO"]):  # a body sent to a build with another method
            return _not_a_write(environ["REQUEST_METHOD"])
        if yank_requests.ACTION_PATH.match(environ["PATH_INFO"]):
            return yank_requests.not_an_action()
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
    elif environ["REQUEST_METHOD"] == "DELETE" and environ.get("CONTENT_LENGTH", "0") != "0":
        if (kind := _media_type(environ)) != JSON:  # its size first, as before the reason
            too_big = _over_the_body_limit(environ, BODY_BYTES, service.max_file_bytes)
            return too_big or yank_requests.not_json(kind)
    # No upload is held, and no byte of it read past the server's first read, before its
    # credential is proven: an attacker with no secret cannot fill the disk.
    return _over_the_body_limit(environ, most, service.max_file_bytes) or Deferred(
        lambda: prove(service, environ)
    )


def _over_the_body_limit(environ, most, max_file_bytes):
    """The 413 of a body over `most` bytes by its Content-Length, or chunked (a size no
    header says) where BODY_BYTES are taken at most; None if it is within."""
    length = environ.get("CONTENT_LENGTH")
    chunked = most == BODY_BYTES and "HTTP_TRANSFER_ENCODING" in environ and ", not chunked"
    if not (chunked or (length and _over(length, most))):
        return None
    if most > BUILD_BYTES:
        return too_large(
            f"the body is larger than this server takes: a file of "
            f"{max_file_bytes / (1 << 20):g} MiB at most (the server's --max-file-mb; the "
            f"extra files of a publish count with it), and {FRAMING_BYTES} bytes for the "
            "part 'build' and the framing"
        )
    return too_large(f"this request may have a body of {most} bytes at most{chunked or ''}")


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
    snapshot = service.store.snapshot()
    found = snapshot.project(slug)
    if found is None:  # a publisher's typo is worth a search of the slugs (not a reader's)
        near = closest(slug.lower(), snapshot.projects)
        hint = f"did you mean {near}?" if near else f"see {API}/projects for the projects"
        raise ApiError(404, "unknown_project", f"no project {printable(slug)!r}: {hint}")
    return found


def put_build(service: Service, slug, number):
    """Publish a build: 201 added, 200 a retry or a replace."""
    environ = bottle.request.environ
    publisher, found = _authorized(service, environ, slug)
    slug = found.slug
    number = whole_number(number)
    if number is None:
        raise invalid("the path's build number must be a whole number, 0 or more")
    replace = dict(parse()).get("replace", "").lower() == "true"
    with _received(environ, service.store.artifacts, service.max_file_bytes) as received:
        given, file, extras = received
        build, keep, kept = build_of(given, file, number, found.ci_job_url, extras)
        try:
            published = writer.publish(
                service.store.directory,
                slug,
                build,
                replace=replace,
                any_timestamp="timestamp" not in given,
                keep=keep,
                store_dir=service.store.artifacts,
                extras=kept,
            )
        except refusals.Refused as refused:
            raise _answer(refused, slug, number) from None
    written = datafile.checked_build(build)  # the writer put in the extras kept
    if published.outcome == "unchanged":  # a retry may match whatever the time there
        shown, served = _read_back(service, found, number, lambda served: served is not None)
    else:
        shown, served = _read_back(service, found, number, lambda served: served == written)
    _logged(published.outcome, number, slug, f" (sha256 {build.get('sha256', '-')})", publisher)
    bottle.response.status = 201 if published.outcome == "added" else 200
    bottle.response.content_type = JSON
    return encode(service.shapes.build_json(shown, served or written))


def delete_build(service: Service, slug, number):
    """Yank a build, for the reason its body may give: 204."""
    environ = bottle.request.environ
    publisher, found = _authorized(service, environ, slug)
    slug = found.slug
    reason = yank_requests.reason_given(_body(environ, BODY_BYTES, "a yank's body"), parse())
    number = yank_requests.build_number(slug, number)
    try:
        yanked = writer.yank(
            service.store.directory, slug, number, service.store.artifacts, reason=reason
        )
    except refusals.Refused as refused:
        raise _answer(refused, slug, number) from None
    _read_back(service, found, number, lambda build: build is None)
    why = f", reason: {printable(reason)}" if reason else ""
    _logged("yanked", number, slug, f" (sha256 {yanked.get('sha256', '-')}{why})", publisher)
    bottle.response.status = 204
    return b""


def unyank_build(service: Service, slug, number):
    """Serve a yanked build again (or one served already): 204."""
    environ = bottle.request.environ
    publisher, found = _authorized(service, environ, slug)
    slug = found.slug
    parse()
    number = yank_requests.build_number(slug, number)
    already = ""
    try:
        writer.unyank(service.store.directory, slug, number, service.store.artifacts)
    except refusals.NotYanked:  # a retry whose answer was lost: served, as it asks
        already = " (served already)"
    except refusals.Refused as refused:
        raise _answer(refused, slug, number) from None
    _read_back(service, found, number, lambda build: build is not None)
    _logged("unyanked", number, slug, already, publisher)
    bottle.response.status = 204
    return b""


def purge_build(service: Service, slug, number):
    """Delete a yanked build's kept files no other build uses: 200, what became of each."""
    environ = bottle.request.environ
    publisher, found = _authorized(service, environ, slug)
    slug = found.slug
    parse()
    number = yank_requests.build_number(slug, number)
    store_dir = service.store.artifacts
    try:
        purged = purging.purge(service.store.directory, store_dir, slug, None, number=number)
    except refusals.Refused as refused:
        raise _answer(refused, slug, number) from None
    project = service.store.refreshed().project(slug)
    build = project and project.yanked_build(number)  # None: edited away meanwhile
    answer = yank_requests.purge_answer(purged, distinct_objects(build) if build else [])
    deleted = counted(sum(1 for each in purged if each.removed is not None), "file")
    _logged("purged", number, slug, f" ({deleted} deleted)", publisher)
    bottle.response.content_type = JSON
    return encode(answer)


def _logged(done, number, slug, detail, publisher):
    """The one log line of a write: what was done, by whom, from where; never a secret."""
    address = bottle.request.environ.get("REMOTE_ADDR", "-")
    log.info(
        "%s build %d of %s%s by %s from %s", done, number, slug, detail, publisher.who, address
    )


def other_method(service: Service, slug, number):
    raise _not_a_write(bottle.request.method)


def not_an_action(service: Service, slug, number):
    raise yank_requests.not_an_action()


def _written_path(environ) -> bool:
    """Whether a request is one of the writes: PUT or DELETE on a build's URL, POST on its
    /unyank or /purge."""
    method, path = environ["REQUEST_METHOD"], environ["PATH_INFO"]
    if method == "POST":
        return yank_requests.ACTION_PATH.match(path) is not None
    return method in METHODS and PATH.match(path) is not None


def _not_a_write(method):
    """The 405 of a build's URL asked with another method than PUT and DELETE; for a POST,
    what curl sends for -F without -X PUT, the fix."""
    fix = " (curl -F sends a POST: add -X PUT)" if method == "POST" else ""
    return ApiError(
        405,
        "method_not_allowed",
        f"PUT publishes a build here and DELETE yanks it: nothing else{fix}",
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
    (RULE + "/unyank", "POST", unyank_build),
    (RULE + "/purge", "POST", purge_build),
    *((RULE + f"/{action}", "ANY", not_an_action) for action in yank_requests.ACTIONS),
)


NO_WRITES = "this server takes no credential: it takes no writes"


def _slug(path_info):
    """The slug of a write's PATH_INFO, as bottle reads it: WSGI's latin-1 string as UTF-8."""
    raw = (PATH.match(path_info) or yank_requests.ACTION_PATH.match(path_info)).group(1)
    return raw.encode("latin-1", "replace").decode("utf-8", "replace")


def _over(length, most):
    """Whether a Content-Length (digits, as the server checked) says more than `most`."""
    return not length.isdigit() or len(length) > 18 or int(length) > most


def _media_type(environ):
    return environ.get("CONTENT_TYPE", "").partition(";")[0].strip().lower()


def _answer(refused, slug, number):
    """The HTTP answer to a writer's refusal."""
    if isinstance(refused, refusals.NoProject):
        return ApiError(404, "unknown_project", f"no project {slug!r}")
    if isinstance(refused, refusals.NoBuild):
        return ApiError(404, "unknown_build", f"project {slug!r} has no build {number}")
    if isinstance(refused, refusals.NotYanked | refusals.FilesPurged):
        return yank_requests.not_undone(refused, slug, number)
    if isinstance(refused, refusals.Exists):
        return ApiError(
            409,
            "build_exists",
            f"build {number} of {slug!r} is already there with another "
            f"{', '.join(refused.fields)}: PUT it with ?replace=true to replace it (nothing "
            "written)",
        )
    if isinstance(refused, refusals.FileInvalid):  # a hand's to fix: no retry will do
        return ApiError(409, "project_file_invalid", str(refused))
    if isinstance(refused, refusals.Invalid):
        return invalid(str(refused))
    return refused_by_the_store(refused)


@contextmanager
def _received(environ, store_dir, max_file_bytes):
    """(the build's JSON, the file received or None, the extra files received by key) of a
    publish's body; the files received into `store_dir` (`max_file_bytes` each at most) are
    removed at the end of the block, unless the writer placed them."""
    upload = None
    try:
        if _media_type(environ) == MULTIPART:
            upload = fed_whole(environ, store_dir, max_file_bytes)
            yield upload.result()
        else:
            yield parse_build(_body(environ, BUILD_BYTES, "a build's JSON"), "the body"), None, {}
    finally:
        if upload is not None:
            upload.discard()


def _body(environ, most, what):
    data = bytearray()
    for chunk in chunks(environ):
        data += chunk
        if len(data) > most:
            raise too_large(f"{what} may have {most} bytes at most")
    return bytes(data)
