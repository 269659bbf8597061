"""The routes of the files Buildshelf keeps: a build's files (its primary, its extra files)
each at its download URL, and the `sha256sum -c` line beside it.

The URL names the project, the build, the file's SHA-256 and its name; only a URL whose every
part is the data's own reaches a file, and the file's path comes from the data, never from the
request. How the bytes go out (validators, ranges) is downloads.py's business. A download of
an extra file counts for its build, as its primary's does.
"""

import functools
import logging

import bottle

from buildshelf.kept import stores
from buildshelf.kept.artifacts import LocalStore, object_path
from buildshelf.model import epoch_seconds, whole_number
from buildshelf.web import downloads, query
from buildshelf.web.query import ApiError
from buildshelf.web.shapes import DOWNLOADS, SIDECAR

log = logging.getLogger(__name__)

# X-Buildshelf-Accel: 1, which deploy/nginx.conf sets (replacing any value a client sent).
FROM_NGINX = "HTTP_X_BUILDSHELF_ACCEL"


def download(service, project, build, sha256, file):
    """A kept file, or its checksum line (FILE.sha256), of `service`'s store's artifact store;
    `service.counter` (None: not counted) counts each GET answered with the file from its
    first byte, by nginx too (downloads.from_first_byte).

    With `service.accel_redirect` (an nginx location's prefix) a download's bytes are nginx's
    to send (see downloads.handed_over), but only for a request that says it came through
    nginx (FROM_NGINX): any other client would get the headers and no body, an empty jar.
    Forging the header without nginx in front gets the forger that empty answer, nothing
    more."""
    query.parse()
    store = service.store
    try:
        return _answered(service, store.snapshot(), project, build, sha256, file)
    except _Unavailable:
        # A yank or a replace rewrites the project file, then deletes the object no build
        # uses any more, and the watcher reads the file up to a second later: data read
        # now that no longer names the object answers 404, as it would a moment later.
        pass
    try:
        return _answered(service, store.refreshed(), project, build, sha256, file)
    except _Unavailable as unavailable:
        log.error("%s", unavailable)
        raise ApiError(
            503,
            "artifact_unavailable",
            f"the file of build {unavailable.number} of {unavailable.slug!r} is "
            "unavailable on this server; try again later",
        ) from None


ROUTES = ((DOWNLOADS + "/<project>/<build>/<sha256>/<file>", "GET", download),)


def _answered(service, snapshot, slug, number, sha256, name):
    """The answer to a download as `snapshot` names it: ApiError 404 when it names no
    such file, _Unavailable when its object is not as recorded."""
    project = snapshot.project(slug)
    number = whole_number(number)
    build = project.build(number) if project and number is not None else None
    if build is None and project and number is not None:
        _gone_if_yanked(service.shapes, project, project.yanked_build(number), sha256, name)
    file = _kept_file(build, sha256, name)
    if file is None:
        raise ApiError(404, "not_found", f"no such file: see {query.API}/builds")
    store = stores.opened(service.store.artifacts)
    wanted = downloads.Download(
        store.name(sha256),
        file.file,
        sha256,
        file.size,
        int(epoch_seconds(build.timestamp)),
    )
    if name != file.file:
        return _sent(*downloads.checksum_answer(wanted, bottle.request.environ))
    # bottle wraps a file it is handed in the server's wsgi.file_wrapper itself, so that
    # waitress sends it from its loop thread: hand it the open file. Without one, the
    # chunks downloads.py makes stop at the range's end, where bottle's would not.
    environ = bottle.request.environ
    if "wsgi.file_wrapper" in environ:
        environ = dict(environ, **{"wsgi.file_wrapper": _the_file})
    try:
        if not isinstance(store, LocalStore):
            status, headers, body = _from_the_store(service, store, wanted, environ)
        elif service.accel_redirect is None or not _from_nginx(service, environ):
            status, headers, body = downloads.answer(wanted, environ)
        else:  # the store's own layout, under nginx's internal location
            uri = object_path(service.accel_redirect, sha256)
            status, headers, body = downloads.handed_over(wanted, environ, uri)
    except downloads.Unavailable as problem:
        where = f"{wanted.path} (build {build.number} of {project.slug})"
        raise _Unavailable(project.slug, build.number, f"{where}: {problem}") from None
    counter = service.counter
    if (
        counter is not None
        and environ["REQUEST_METHOD"] == "GET"
        and downloads.from_first_byte(wanted, environ)
    ):
        counter.count(project.slug, build.number, sha256, environ.get("REMOTE_ADDR"))
    return _sent(status, headers, body)


def _from_the_store(service, store, wanted, environ):
    """The answer to a download of a file kept in object storage, as --artifacts-downloads
    says: a 302 to a presigned GET (redirect) or to the public copy (public), unless the last
    check found it unavailable; or its bytes, streamed (proxy)."""
    if service.artifacts_downloads == stores.PROXY:

        def check():
            if problem := store.verify(wanted.sha256, wanted.size):
                raise downloads.Unavailable(problem)

        chunks = functools.partial(store.chunks, wanted.sha256)
        return downloads.streamed(wanted, environ, check, chunks)
    for _, _, file, problem in service.store.unavailable():
        if file.sha256 == wanted.sha256:
            raise downloads.Unavailable(problem)
    if service.artifacts_downloads == stores.PUBLIC:
        location = service.shapes.object_url(wanted.sha256)
    else:
        location = store.presigned(wanted.sha256, wanted.name, downloads.content_type(wanted.name))
    # A presigned URL lives minutes: no cache may keep the way to it.
    return "302 Found", [("Location", location), ("Cache-Control", "no-store")], b""


def _from_nginx(service, environ):
    if environ.get(FROM_NGINX) == "1":
        return True
    if not service.accel_warned.is_set():
        service.accel_warned.set()
        log.warning(
            "--accel-redirect (BUILDSHELF_ACCEL_REDIRECT) is %s, but a download came "
            "without the header "
            "X-Buildshelf-Accel: 1 that deploy/nginx.conf sets: Buildshelf sends the bytes "
            "of such downloads itself. Is nginx in front? (warned once)",
            service.accel_redirect,
        )
    return False


def _kept_file(build, sha256, name):
    """The file of `build` (None: no build) that Buildshelf keeps with this sha256 and this
    name, or whose checksum line (SIDECAR) has this name: its primary or an extra; or None."""
    for file in build.kept_files if build is not None else ():
        if file.sha256 == sha256 and name in (file.file, file.file + SIDECAR):
            return file
    return None


def _gone_if_yanked(shapes, project, build, sha256, name):
    """BuildYanked if this URL was the download of a file of `build`, yanked (purged or
    not)."""
    if _kept_file(build, sha256, name) is not None:
        raise BuildYanked(shapes, project, build)


class BuildYanked(ApiError):
    """410 build_yanked: the download of a yanked build's file (or its checksum line), with
    its reason and the project's latest build, so that a client can move on. The project,
    the build and the latest build (None: none served) are kept for the page a browser gets
    instead (pages.gone)."""

    def __init__(self, shapes, project, build):
        latest = project.latest()
        super().__init__(
            410,
            "build_yanked",
            f"build {build.number} of {project.slug!r} was yanked: see {query.API}/builds/latest"
            f"?project={project.slug}",
            fields={
                "reason": build.yank_reason,
                "latest": None if latest is None else shapes.build_json(project, latest),
            },
        )
        self.project, self.build, self.latest = project, build, latest


class _Unavailable(Exception):
    """A download's object is not as its snapshot records it; str() is the line to log."""

    def __init__(self, slug, number, line):
        super().__init__(line)
        self.slug = slug
        self.number = number


def _sent(status, headers, body):
    bottle.response.status = status
    for header, value in headers:
        bottle.response.set_header(header, value)
    return body


def _the_file(file, block_size=None):
    return file
