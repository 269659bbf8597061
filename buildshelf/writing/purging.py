"""`purge`'s deletions: the kept files (primary and extra) of the builds yanked long enough ago
that no other build uses, each said once while its object is there and never again once it
is gone (`purge`); and, for a dry run with nothing due, the yanked builds whose files wait
(`time_until_due`)."""

import os
import time
from contextlib import nullcontext
from dataclasses import dataclass

from buildshelf.kept import objects, stores
from buildshelf.writing.objects_in_use import distinct_objects, readable_projects, used_objects
from buildshelf.writing.refusals import NoBuild, NotYanked
from buildshelf.writing.rewrite import locked, project_path
from buildshelf.writing.writer import no_project

DAY_MILLIS = 86_400_000


@dataclass(frozen=True)
class Purged:
    """A kept file of a yanked build that a purge found in the store (its primary, or an
    extra: `key` says which): its object deleted (`removed`), or kept, because another build
    uses it (`shared`) or because the store would not delete it."""

    slug: str
    number: int
    key: str
    file: str
    sha256: str
    removed: objects.Removed | None
    shared: bool = False


def _yanked(directory, slug, number=None):
    """(slug, Build) of every yanked build of project `slug` (else of every project; with
    `number`, its yanked build of that number: NoBuild if it has none, NotYanked if it is
    served); Refused while a data file cannot be read, or when project `slug` is not there."""
    if slug is not None and not os.path.exists(project_path(directory, slug)):
        raise no_project(directory, slug)
    projects = [
        project for _, project in readable_projects(directory) if slug in (None, project.slug)
    ]
    if number is not None and projects[0].yanked_build(number) is None:
        if projects[0].build(number) is None:
            raise NoBuild(f"project {slug!r} has no build {number}: nothing purged")
        raise NotYanked(f"build {number} of {slug} is served: yank it first (nothing purged)")
    return [
        (project.slug, build)
        for project in projects
        for build in project.yanked
        if number in (None, build.number)
    ]


def _due_before(older_than_days):
    """The yank time (epoch milliseconds) at or before which a build is due."""
    return time.time_ns() // 1_000_000 - older_than_days * DAY_MILLIS


def purge(
    directory: str,
    store_dir: str,
    slug: str | None = None,
    older_than_days: float | None = 30,
    dry_run: bool = False,
    number: int | None = None,
) -> list[Purged]:
    """Delete the objects of the files (primary and extra) of the builds yanked at least
    `older_than_days` ago (None: whenever, even at a time ahead of this clock) (of project
    `slug`, else of every project; with `number`, of its build of that number only, see
    _yanked) that no other build uses; with `dry_run`,
    delete nothing and say what would go. A file whose object is not
    in the store (purged before, or lost: `check` says so) is left out, so that a build
    purged once is never spoken of again. Refused while a data file cannot be read."""
    before = None if older_than_days is None else _due_before(older_than_days)
    with nullcontext() if dry_run else locked(directory):
        due = [
            (name, build.number, key, file)
            for name, build in _yanked(directory, slug, number)
            if before is None or build.yanked_at <= before
            for key, file in distinct_objects(build)
        ]
        used = used_objects(directory, {(name, number) for name, number, _, _ in due})
        store = stores.opened(store_dir)
        unused = {file.sha256 for _, _, _, file in due} - used
        removed = {r.path: r for r in store.remove(unused, dry_run)}
    purged = []
    for name, number, key, file in due:
        gone = removed.get(store.name(file.sha256))
        if gone is not None or store.verify(file.sha256, file.size) != objects.MISSING:
            shared = file.sha256 in used
            purged.append(Purged(name, number, key, file.file, file.sha256, gone, shared))
    return purged


def time_until_due(
    directory: str, store_dir: str, slug: str | None = None, older_than_days: float = 30
) -> list[int]:
    """The milliseconds until each yanked build not yet due (of project `slug`, else of
    every project) is, soonest first: those that keep a file whose object is in the store
    (a build with none, or purged at its yank, has nothing to wait for). Reads only."""
    before, store = _due_before(older_than_days), stores.opened(store_dir)
    return sorted(
        build.yanked_at - before
        for _, build in _yanked(directory, slug)
        if build.yanked_at > before
        and any(
            store.verify(file.sha256, file.size) != objects.MISSING
            for _, file in distinct_objects(build)
        )
    )
