"""import-jenkins --mirror: each new build's artifact downloaded from Jenkins into the artifact
store, so that the build outlives Jenkins' retention, and the build then kept as
`publish --file` keeps one (its file's name, sha256 and size instead of a downloadUrl); so are
its extra files' (`--extra-artifact`), as `publish --extra-file` keeps them.

Downloads happen before the data directory's lock is taken, as the job's JSON is fetched:
other writers need not wait for Jenkins. A download that fails is that build's reason to be
skipped, and leaves nothing in the store (artifacts.store_stream).
"""

from collections.abc import Callable, Iterable

from buildshelf import progress
from buildshelf.http_client import HttpError
from buildshelf.jenkins import fetch, remote_api
from buildshelf.kept import artifacts, objects, stores
from buildshelf.kept.objects import Refused
from buildshelf.model import PRIMARY_KEY, file_name_in_url
from buildshelf.writing import rewrite, writer
from buildshelf.writing.objects_in_use import kept_objects

HTML_NAMES = (".html", ".htm")


def _files(build: dict) -> list[tuple[str, dict]]:
    """(key, document) of each file of a build `remote_api` made: its primary (the build
    itself, as PRIMARY_KEY) and its extras, each with its Jenkins downloadUrl."""
    return [(PRIMARY_KEY, build), *build.get("downloads", {}).items()]


def named(selection: remote_api.Selection) -> remote_api.Selection:
    """The selection without the builds a file name of which may not be kept (skipped, with
    the rule): nothing is downloaded for them."""
    added, skipped = [], list(selection.skipped)
    for build in selection.added:
        try:
            for _, file in _files(build):
                artifacts.check_name(file_name_in_url(file["downloadUrl"]))
        except Refused as refused:
            skipped.append((f"build {build['buildNumber']}", str(refused)))
        else:
            added.append(build)
    return selection._replace(added=added, skipped=skipped)


def download(
    url: str, store: str, max_bytes: int, timeout: float, allowed_hosts: Iterable[str] = ()
) -> objects.Stored:
    """The file at `url` stored in `store`, fetched as fetch.open_url fetches; Refused
    (nothing left behind) when it cannot be had whole within the limits, or what came is not
    the file."""
    try:
        response = fetch.open_url(url, timeout, allowed_hosts)
    except HttpError as error:
        raise Refused(str(error)) from None
    with response:
        encoding = response.headers.get("Content-Encoding", "identity")
        if encoding.strip().lower() != "identity":  # the bytes kept must be the file's
            raise Refused(f"{url} sent its file encoded ({encoding}), not as it is")
        kind = response.headers.get_content_type()
        if kind == "text/html" and not file_name_in_url(url).lower().endswith(HTML_NAMES):
            # What Jenkins behind single sign-on answers an anonymous request with.
            raise Refused(
                f"{url} answered an HTML page ({kind}), not the file: it looks like a login "
                "page (may anonymous users read the job's artifacts?)"
            )
        read = _refused(response.chunk)
        with progress.Meter(f"downloading {url}") as meter:
            return stores.opened(store).store_stream(read, url, max_bytes, response.length, meter)


def _refused(read):
    """`read`, saying HttpError as store_stream hears a reason to give up: Refused."""

    def refusing():
        try:
            return read()
        except HttpError as error:
            raise Refused(str(error)) from None

    return refusing


def hosted(selection: remote_api.Selection, downloads: dict, store: str) -> remote_api.Selection:
    """The selection's builds kept as `publish --file` keeps them, each of their files from
    `downloads` (by build number and key); under the lock. A build a download of which
    failed, did not happen or is gone failed, saying why: a build is added whole or not."""
    added, failed = [], list(selection.failed)
    for build in selection.added:
        kept = {}
        for key, file in _files(build):
            got = downloads.get((build["buildNumber"], key))
            if isinstance(got, objects.Stored):
                gone = stores.opened(store).verify(got.sha256, got.size)
                got = f"its downloaded file {gone}: run again" if gone else got
            if got is None:
                got = "not downloaded (the project's file changed meanwhile): run again"
            if isinstance(got, str):
                failed.append((f"build {build['buildNumber']}", got))
                break
            name = file_name_in_url(file["downloadUrl"])
            kept[key] = {"sha256": got.sha256, "size": got.size, "file": name}
        else:
            primary = {key: value for key, value in build.items() if key != "downloadUrl"}
            primary.update(kept.pop(PRIMARY_KEY))
            added.append(dict(primary, downloads=kept) if kept else primary)
    return selection._replace(added=added, failed=failed)


def add_builds(
    directory: str,
    slug: str,
    select: Callable[[dict], remote_api.Selection],
    store: str,
    max_bytes: int,
    timeout: float,
    dry_run: bool = False,
    report: writer.Report = writer.unreported,
    allowed_hosts: Iterable[str] = (),
) -> remote_api.Selection:
    """writer.add_builds for the builds `select(doc)` adds to project `slug`, kept: each one's
    file downloaded into `store` first, without the lock, then the builds added under it.
    Objects the downloads made that no build uses at the end (a write refused, a download
    interrupted, a build another writer added meanwhile) are deleted, telling `report` of
    each. Returns the selection made under the lock; with `dry_run`, what would be
    downloaded, downloading nothing."""
    # Picked without the lock, so that other writers need not wait for the downloads.
    wanted = writer.selected(directory, slug, lambda doc: named(select(doc)))
    if dry_run:
        return wanted
    downloads, used = {}, []  # by (build number, key of the file)
    try:
        for build in wanted.added:
            for key, file in _files(build):
                try:
                    got = download(file["downloadUrl"], store, max_bytes, timeout, allowed_hosts)
                except Refused as refused:
                    got = str(refused)
                downloads[build["buildNumber"], key] = got
                if isinstance(got, str):  # the build fails: its other files are not needed
                    break
        selection = writer.add_builds(
            directory, slug, lambda doc: hosted(named(select(doc)), downloads, store)
        )
        used = selection.added
    finally:
        # Identical bytes already there are not this run's to delete: they may be a build's
        # whose project file is not readable now.
        made = {
            got.sha256
            for got in downloads.values()
            if isinstance(got, objects.Stored) and got.created
        }
        if leftovers := made - kept_objects(used):
            with rewrite.locked(directory):
                writer.remove_if_unused(directory, store, leftovers, report)
    return selection
