"""The data directory checked, for `buildshelf check`: every problem of its files and of the
kept files their builds name in the artifact store, the objects no build uses, and the room
the yanked builds' files still take. The server's own reading of the directory is store.py's.
"""

import logging

from buildshelf.datafiles.datafile import DataError
from buildshelf.kept import stores
from buildshelf.store import read_projects
from buildshelf.text import counted, printable, size

log = logging.getLogger(__name__)


def check_directory(
    directory: str,
    store_dir: str | None = None,
    rehash: bool = False,
    used: set | None = None,
    yanked: list | None = None,
) -> list[DataError]:
    """Every DataError in `directory`, in file order, then the problems of the kept files its
    builds name in the artifact store `store_dir` (see ArtifactStore.problems): the check command.
    The objects named, by a build's primary or an extra file, are added to `used`, yanked
    builds' too (their files stay until purged); (Project, Build, kept file) of each kept
    file of a yanked build to `yanked`."""
    problems, projects, used = [], [], set() if used is None else used
    for path, project in read_projects(directory):
        if isinstance(project, DataError):
            problems.append(project)
        else:
            projects.append((path, project))
            used.update(file.sha256 for build in project.hosted_builds for file in build.kept_files)
            for build in project.yanked:
                for file in build.kept_files:
                    used.add(file.sha256)
                    if yanked is not None:
                        yanked.append((project, build, file))
    if store_dir is not None:
        kept = (
            (path, build, file)
            for path, project in projects
            for build in project.hosted_builds
            for file in build.kept_files
        )
        for path, build, file, problem in stores.opened(store_dir).problems(kept, rehash):
            where = f"build {build.number}, file {file.file}"
            problems.append(DataError(path, f"its object {problem}", where=where))
    return problems


def check(
    directory: str,
    store_dir: str | None = None,
    rehash: bool = False,
    list_unused: bool = True,
    verbose: bool = False,
) -> int:
    """Print every problem of the files in `directory` and the kept files they name: the exit
    status of `buildshelf check`, 0 when all are as they should be and 1 otherwise. With
    `verbose`, what is no problem too: the objects no build uses (with `list_unused`), which
    cost nothing but space, and the yanked builds' files kept. All well is silence: the
    weekly cron job mails whatever it prints."""
    used, yanked = set(), []
    problems = check_directory(directory, store_dir, rehash, used, yanked)
    unused, store = [], None if store_dir is None else stores.opened(store_dir)
    if verbose and list_unused and store is not None and store.exists() and not problems:
        unused = sorted(store.objects().keys() - used)
    for problem in problems:
        print("\n".join(problem.lines()))
    for sha256 in unused:
        path = store.name(sha256)
        print(f"{path}: unused (no build names it; 'check --prune' deletes it)")
    if verbose:
        _list_yanked(store_dir, yanked)
    if problems or unused:
        log.info(
            "checked %s: %s, %s",
            directory,
            counted(sum(problem.count for problem in problems), "problem"),
            counted(len(unused), "unused object"),
        )
    return 1 if problems else 0


def _list_yanked(store_dir, yanked):
    """Print the yanked builds whose files are kept, and the room they take: information,
    not a problem ('buildshelf purge' deletes them once yanked long enough)."""
    if store_dir is None:
        return
    room, store = {}, stores.opened(store_dir)
    for project, build, file in yanked:
        path = store.name(file.sha256)
        if store.verify(file.sha256, file.size) is None:  # not purged
            room[file.sha256] = file.size
            print(f"yanked build {build.number} of {project.slug} keeps {printable(path)} "
                  f"({size(file.size)})")  # fmt: skip
    if room:
        print(
            f"{counted(len(room), 'yanked build file')} kept: {size(sum(room.values()))} "
            "('buildshelf purge' deletes those yanked 30 days ago or more)"
        )
