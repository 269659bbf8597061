"""The only code that writes data files: the changes the commands and the HTTP writes make
(a project added; a build published, yanked, unyanked; builds added), each one project file
changed whole by `rewrite.update`, under the lock; and the objects of the artifact store that
a change made unused deleted, and, for `check --prune`, every object no build uses (`purge`,
the files of builds yanked long ago, is purging.py's).
"""

import os
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import urlsplit

from buildshelf import store
from buildshelf.datafiles import datafile, dataformat
from buildshelf.kept import objects, stores
from buildshelf.kept.keeping import Keep, extra_files_problem
from buildshelf.model import PRIMARY_KEY
from buildshelf.text import closest, printable
from buildshelf.writing.objects_in_use import (
    kept_file_documents,
    kept_objects,
    used_objects,
)
from buildshelf.writing.refusals import (
    Exists,
    FilesPurged,
    Invalid,
    NoBuild,
    NoProject,
    NoSpace,
    NotYanked,
    Refused,
    StoreUnavailable,
)
from buildshelf.writing.rewrite import locked, project_path, read, update

Selected = TypeVar("Selected")  # a selection of builds, whose `added` are to be added


def add_project(
    directory: str, slug: str, ci_job: str, ci_job_url: str, javadoc_base_url: str = ""
) -> bool:
    """Create project `slug` with no builds; True if created, False if already there as given.
    Without `javadoc_base_url`, the project has no javadoc: its file has no javadocBaseUrl."""
    fields = {"ciJob": ci_job, "ciJobUrl": ci_job_url, "javadocBaseUrl": javadoc_base_url}

    def change(doc):
        if doc is None:
            new = dict(fields, builds=[])
            if not javadoc_base_url:
                del new["javadocBaseUrl"]
            return new, True
        differing = [key for key, value in fields.items() if doc.get(key, "") != value]
        if not differing:
            return None, False
        key = differing[0]
        raise Refused(
            f"project {slug!r} exists with {key} {doc.get(key, '')!r}, not "
            f"{fields[key]!r}: edit {project_path(directory, slug)} to change it"
        )

    return update(directory, slug, change)


def no_project(directory: str, slug: str, note: str = "") -> NoProject:
    """The refusal of a project `directory` lacks: the closest slug there (a typo), else how
    to add it; then, with `note`, how to name a project of another data directory."""
    try:
        near = closest(slug, store.data_files(directory))
    except OSError:
        near = None
    hint = (
        f"did you mean {near}?"
        if near
        else f"add it with 'buildshelf add-project {slug} --ci-job ... --ci-job-url ...'"
    )
    note = f"{note}; " if note else ""
    return NoProject(
        f"no project {slug!r} in {printable(directory)}: {hint} ({note}a project of another "
        "data directory: give --data DIR or set BUILDSHELF_DATA)"
    )


def _existing_project(doc, directory, slug):
    if doc is None:
        raise no_project(directory, slug)
    return doc


class NoRunUrl(Invalid):
    """A build without url for a project whose ciJobUrl is no Jenkins job's: the message
    says so whoever asked; each caller adds how its user gives the url."""


def job_run_url(ci_job_url: str, number: int) -> str:
    """A Jenkins job run's address: the job's, then the number. Only a Jenkins job's URL
    (/job/ in its path) makes one: other CIs (GitHub's runs) number their runs otherwise."""
    if "/job/" not in urlsplit(ci_job_url).path:
        raise NoRunUrl(
            f"the build has no url, and ciJobUrl {ci_job_url} is not a Jenkins job's (its path "
            "has no /job/) to make one from: give the address of the build's CI run"
        )
    return ci_job_url.rstrip("/") + f"/{number}/"


@dataclass(frozen=True)
class Published:
    """What a publish did: "added", "replaced" or "unchanged"; the primary's object, if it
    keeps its file, and those of its extra files kept, by key."""

    outcome: str
    stored: objects.Stored | None = None
    extras: dict[str, objects.Stored] = field(default_factory=dict)


Report = Callable[[objects.Removed], None]  # told of each object a command deletes


def unreported(removed: objects.Removed) -> None:
    """A caller that does not tell anyone of the objects deleted (a test's)."""


def publish(
    directory: str,
    slug: str,
    build: dict,
    replace: bool = False,
    any_timestamp: bool = False,
    keep: Keep | None = None,
    store_dir: str | None = None,
    report: Report = unreported,
    extras: dict[str, Keep] | None = None,
) -> Published:
    """Add `build` (a build object; a None 'url' means the job run's) to project `slug`.

    The outcome is "added", "replaced" or "unchanged" (the same build is already there:
    with `any_timestamp`, whatever its timestamp, so that a retry without --timestamp
    matches). With `keep`, its file is stored first in the artifact store `store_dir`, under
    the lock, so that the project file never names an object that is not there (a damaged
    one is repaired); so is each of `extras`, its extra files to keep, by key (its extra
    files elsewhere are the build's `downloads`). Their keys and names are checked by the
    data files' rules before a byte is stored. The objects of a replaced build, or those
    stored for a build refused, are then deleted if no build uses them (remove_if_unused).
    """
    extras = extras or {}
    if problem := extra_files_problem(build, keep, extras):
        raise Invalid(f"{project_path(directory, slug)}: build {build['buildNumber']}: {problem}")
    stored, made_unused = {}, set()  # by key, the primary's as PRIMARY_KEY

    def change(doc):
        doc = _existing_project(doc, directory, slug)
        if build["url"] is None:  # before a file is kept: its copy may be long
            build["url"] = job_run_url(doc["ciJobUrl"], build["buildNumber"])
        # Again on a retry: it puts back an object missing or damaged.
        for key, kept in ((PRIMARY_KEY, keep), *extras.items()):
            if kept is not None:
                stored[key] = _stored(kept, store_dir)
        if keep is not None:
            build.update(keep.fields(stored[PRIMARY_KEY]))
        if extras:
            build["downloads"] = dict(build.get("downloads", {})) | {
                key: kept.fields(stored[key]) for key, kept in extras.items()
            }
        same = [b for b in doc["builds"] if b.get("buildNumber") == build["buildNumber"]]
        others = [b for b in doc["builds"] if b.get("buildNumber") != build["buildNumber"]]
        new = dict(doc, builds=others + [build])
        if not same:
            return new, "added"
        if "yankedAt" in same[0]:  # a yanked build's number may be published again
            made_unused.update(kept_objects(same))
            return new, "replaced"
        compared = dict(build, timestamp=same[0].get("timestamp")) if any_timestamp else build
        if same[0] == compared:
            return None, "unchanged"
        if not replace:
            try:  # the build's own faults first
                datafile.checked_build(build)
            except datafile.InvalidBuild as problem:
                where = f"{project_path(directory, slug)}: build {build['buildNumber']}"
                raise Invalid(f"{where}: {problem}") from None
            keys = same[0].keys() | compared.keys()
            fields = [
                k
                for k in dataformat.WRITTEN_BUILD_KEYS
                if k in keys and same[0].get(k) != compared.get(k)
            ]
            raise Exists(
                f"{project_path(directory, slug)}: build {build['buildNumber']} is already "
                f"there with another {', '.join(fields)}: give --replace to replace it "
                "(nothing written)",
                fields,
            )
        made_unused.update(kept_objects(same))
        return new, "replaced"

    try:
        outcome = update(
            directory,
            slug,
            change,
            then=lambda _: remove_if_unused(directory, store_dir, made_unused, report),
        )
    except Refused:
        # The objects stored for the build refused, if this command made them (identical
        # bytes already there may be a build's that is not readable now) and no build uses
        # them.
        created = {each.sha256 for each in stored.values() if each.created}
        if created:
            with locked(directory):
                remove_if_unused(directory, store_dir, created, report)
        raise
    primary = stored.pop(PRIMARY_KEY, None)
    return Published(outcome, primary, stored)


def _stored(keep, store_dir):
    """`keep`'s file as an object of `store_dir`, or the refusal: NoSpace,
    StoreUnavailable, Invalid."""
    try:
        return keep.stored(store_dir)
    except objects.NoSpace as refused:
        raise NoSpace(str(refused)) from None
    except objects.Unavailable as refused:
        raise StoreUnavailable(str(refused)) from None
    except objects.Refused as refused:
        raise Invalid(str(refused)) from None


def yank(
    directory: str,
    slug: str,
    number: int,
    store_dir: str | None = None,
    report: Report = unreported,
    reason: str = "",
    purge: bool = False,
    dry_run: bool = False,
) -> dict:
    """Mark build `number` of project `slug` yanked (now, for `reason`): it stays in its file,
    served nowhere, and its kept file stays in `store_dir`, so that `unyank` can restore it.
    With `purge`, its object is deleted at once unless a build not yanked uses it (see
    remove_if_unused). Returns the build's document as it was: with a yankedAt, it was
    yanked already and nothing changed."""

    def change(doc):
        build = _the_build(doc, directory, slug, number, "nothing yanked")
        if "yankedAt" in build:
            return None, build
        marked = dict(build, yankedAt=time.time_ns() // 1_000_000)
        if reason:
            marked["yankReason"] = reason
        return dict(doc, builds=[marked if b is build else b for b in doc["builds"]]), build

    def purged(build):
        if purge:
            objects = kept_objects([build])
            remove_if_unused(directory, store_dir, objects, report, {(slug, number)}, dry_run)

    build = update(directory, slug, change, dry_run, then=purged)
    if dry_run:  # nothing was written, so `then` did not run: say what it would delete
        purged(build)
    return build


def _the_build(doc, directory, slug, number, nothing):
    """The document of build `number` in project `slug`'s `doc`; NoBuild if none."""
    for build in _existing_project(doc, directory, slug)["builds"]:
        if build.get("buildNumber") == number:
            return build
    raise NoBuild(f"project {slug!r} has no build {number}: {nothing}")


YANK_KEYS = ("yankedAt", "yankReason")


def unyank(directory: str, slug: str, number: int, store_dir: str | None = None) -> dict:
    """Serve yanked build `number` of project `slug` again; NotYanked when it is served, or
    FilesPurged when a file it keeps (its primary, an extra) is no longer in `store_dir`: it
    must be published again."""

    def change(doc):
        build = _the_build(doc, directory, slug, number, "nothing unyanked")
        if "yankedAt" not in build:
            raise NotYanked(f"build {number} of {slug} is not yanked: nothing to restore")
        store = None if store_dir is None else stores.opened(store_dir)
        purged = [
            file["file"]
            for _, file in ([] if store is None else kept_file_documents(build))
            if store.verify(file["sha256"], file["size"]) is not None
        ]
        if purged:
            raise FilesPurged(
                f"build {number} of {slug} cannot be served again: its "
                f"{'file' if len(purged) == 1 else 'files'} {', '.join(purged)} "
                f"{'was' if len(purged) == 1 else 'were'} purged",
                printable(store_dir),
                f"Publish it again: 'buildshelf publish {slug} --build {number} "
                f"{_files_given(build)} --replace' (with its channel and timestamp)",
            )
        restored = {key: value for key, value in build.items() if key not in YANK_KEYS}
        return dict(doc, builds=[restored if b is build else b for b in doc["builds"]]), build

    return update(directory, slug, change)


def _files_given(build):
    """The flags of `publish` that give a build document's files again."""
    flags = [
        f"--file {build['file']}" if "file" in build else f"--download-url {build['downloadUrl']}"
    ]
    for key, extra in build.get("downloads", {}).items():
        given = f"--extra-file {key}={extra['file']}" if "file" in extra else None
        flags.append(given or f"--extra-url {key}={extra['downloadUrl']}")
    return " ".join(flags)


def remove_if_unused(
    directory: str,
    store_dir: str | None,
    sha256s: set[str],
    report: Report,
    ignoring: frozenset = frozenset(),
    dry_run: bool = False,
) -> None:
    """Delete the objects of `store_dir` with these sha256s that no build of `directory`
    uses, telling `report` of each; the caller holds the lock. Only the objects a write made
    unused are given: one that no build names for another reason (its project file away for
    a moment) stays, for `check --prune` to delete. Nothing is deleted while a data file
    cannot be read."""
    if store_dir is None or not sha256s:
        return
    try:
        used = used_objects(directory, ignoring)
    except Refused:  # the write is done: an object left costs only space, `check` lists it
        return
    for removed in stores.opened(store_dir).remove(sha256s - used, dry_run):
        report(removed)


def prune(
    directory: str, store_dir: str, dry_run: bool = False, report: Report = unreported
) -> None:
    """Delete every object of `store_dir` that no build of `directory` uses, telling
    `report` of each (with `dry_run`, of each it would delete); Refused, deleting nothing,
    while a data file cannot be read."""
    # A dry run deletes nothing, so it needs no lock (nor write access).
    with nullcontext() if dry_run else locked(directory):
        store = stores.opened(store_dir)
        unused = store.objects().keys() - used_objects(directory)
        for removed in store.remove(unused, dry_run):
            report(removed)


def add_builds(
    directory: str, slug: str, select: Callable[[dict], Selected], dry_run: bool = False
) -> Selected:
    """Add the builds `select(doc)` picks (its `added`) to project `slug`'s document; the
    builds already there stay exactly as they are. Returns the selection made under the lock."""

    def change(doc):
        selection = select(_existing_project(doc, directory, slug))
        added = selection.added
        return (dict(doc, builds=doc["builds"] + added) if added else None), selection

    return update(directory, slug, change, dry_run)


def selected(directory: str, slug: str, select: Callable[[dict], Selected]) -> Selected:
    """What `select(doc)` picks from project `slug`'s document as it is now: no lock taken,
    nothing validated or written."""
    known, _ = read(os.path.realpath(project_path(directory, slug)), slug)
    return select(_existing_project(known and known.doc, directory, slug))
