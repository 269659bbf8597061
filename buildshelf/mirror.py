"""import-jenkins --mirror: each new build's artifact downloaded from Jenkins into the artifact
store, so that the build outlives Jenkins' retention, and the build then kept as
`publish --file` keeps one (its file's name, sha256 and size instead of a downloadUrl).

Downloads happen before the data directory's lock is taken, as the job's JSON is fetched:
other writers need not wait for Jenkins. A download that fails is that build's reason to be
skipped, and leaves nothing in the store (artifacts.store_stream).
"""

import http.client
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from urllib.parse import urlsplit

from buildshelf import artifacts, jenkins, writer
from buildshelf.artifacts import Refused
from buildshelf.model import file_name_in_url

SCHEMES = ("http", "https")
# A download may take as long as it must, as long as it moves: at least 1 MiB for each
# --timeout seconds on average (30 s: 34 KiB/s), besides --timeout for each read.
PACE_BYTES = 1 << 20


class _HttpOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """urllib follows redirects to ftp:// too: a download follows http(s) ones only."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if urlsplit(newurl).scheme not in SCHEMES:
            fp.close()
            raise Refused(f"{req.full_url} redirects to {newurl!r}, not an http(s) address")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def named(selection: jenkins.Selection) -> jenkins.Selection:
    """The selection without the builds whose file name may not be kept (skipped, with the
    rule): nothing is downloaded for them."""
    added, skipped = [], list(selection.skipped)
    for build in selection.added:
        try:
            artifacts.check_name(file_name_in_url(build["downloadUrl"]))
        except Refused as refused:
            skipped.append((f"build {build['buildNumber']}", str(refused)))
        else:
            added.append(build)
    return selection._replace(added=added, skipped=skipped)


def download(url: str, store: str, max_bytes: int, timeout: float) -> artifacts.Stored:
    """The file at `url` stored in `store`; Refused (nothing left behind) when it cannot be
    had whole within the limits."""
    if urlsplit(url).scheme not in SCHEMES:
        raise Refused(f"{url!r} is not an http:// or https:// address")
    try:
        response = urllib.request.build_opener(_HttpOnlyRedirects).open(url, timeout=timeout)
    except urllib.error.HTTPError as error:
        error.close()
        raise Refused(f"{url} answered {error.code} {error.reason}") from None
    except urllib.error.URLError as error:
        if isinstance(error.reason, TimeoutError):
            raise Refused(f"no answer from {url} within {timeout:g} s") from None
        raise Refused(f"cannot reach {url}: {error.reason}") from None
    except TimeoutError:
        raise Refused(f"no answer from {url} within {timeout:g} s") from None
    except (OSError, ValueError, http.client.HTTPException) as error:
        raise Refused(f"cannot read {url}: {error}") from None
    with response:
        encoding = response.headers.get("Content-Encoding", "identity")
        if encoding.strip().lower() != "identity":  # the bytes kept must be the file's
            raise Refused(f"{url} sent its file encoded ({encoding}), not as it is")
        return artifacts.store_stream(
            store, _reader(response, url, timeout), url, max_bytes, response.length
        )


def _reader(response, url, timeout):
    """`response`'s body a chunk at a time, refusing a stall, a crawl and an early end."""
    length, received, started = response.length, 0, time.monotonic()

    def read():
        nonlocal received
        try:
            # read1: one receive at most, so that the pace is checked however slow the sender.
            chunk = response.read1(artifacts.CHUNK_BYTES)
        except TimeoutError:
            raise Refused(f"{url} sent nothing for {timeout:g} s") from None
        except http.client.IncompleteRead as error:  # a chunked body cut short
            got = received + len(error.partial)
            raise Refused(f"{url} was cut short after {got} bytes") from None
        except (OSError, http.client.HTTPException) as error:
            raise Refused(f"cannot read {url}: {error}") from None
        received += len(chunk)
        if not chunk and length is not None and received < length:
            # http.client ends a body at Content-Length, or earlier without a word if cut.
            raise Refused(f"{url} was cut short: {received} of its {length} bytes came")
        elapsed = time.monotonic() - started
        if chunk and elapsed > timeout * (1 + received / PACE_BYTES):
            raise Refused(
                f"{url} is too slow: {received} bytes in {elapsed:.1f} s (at least "
                f"{PACE_BYTES >> 20} MiB each {timeout:g} s)"
            )
        return chunk

    return read


def hosted(selection: jenkins.Selection, downloads: dict, store: str) -> jenkins.Selection:
    """The selection's builds kept as `publish --file` keeps them, from `downloads`; under the
    lock. A build whose download failed, did not happen or is gone failed, saying why."""
    added, failed = [], list(selection.failed)
    for build in selection.added:
        got = downloads.get(build["buildNumber"])
        if isinstance(got, artifacts.Stored):
            gone = artifacts.verify(store, got.sha256, got.size)
            got = f"its downloaded file {gone}: run again" if gone else got
        if got is None:
            got = "not downloaded (the project's file changed meanwhile): run again"
        if isinstance(got, str):
            failed.append((f"build {build['buildNumber']}", got))
            continue
        kept = {key: value for key, value in build.items() if key != "downloadUrl"}
        name = file_name_in_url(build["downloadUrl"])
        added.append(dict(kept, sha256=got.sha256, size=got.size, file=name))
    return selection._replace(added=added, failed=failed)


def add_builds(
    directory: str,
    slug: str,
    select: Callable[[dict], jenkins.Selection],
    store: str,
    max_bytes: int,
    timeout: float,
    dry_run: bool = False,
    report: writer.Report = writer.unreported,
) -> jenkins.Selection:
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
    downloads, used = {}, []
    try:
        for build in wanted.added:
            try:
                got = download(build["downloadUrl"], store, max_bytes, timeout)
            except Refused as refused:
                got = str(refused)
            downloads[build["buildNumber"]] = got
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
            if isinstance(got, artifacts.Stored) and got.created
        }
        if leftovers := made - {build["sha256"] for build in used}:
            with writer.locked(directory):
                writer.remove_if_unused(directory, store, leftovers, report)
    return selection
