"""The objects of the artifact store that the data directory's builds use: those of every
build's kept files, its primary's and its extras' (yanked builds' too: their files stay until
purged), read from every data file, and none known while a file cannot be read, since it may
use any of them; a build's kept files one for each object (`distinct_objects`)."""

from itertools import chain

from buildshelf import store
from buildshelf.datafiles import datafile
from buildshelf.model import PRIMARY_KEY
from buildshelf.writing.refusals import FileInvalid


def kept_file_documents(build: dict) -> list[tuple[str, dict]]:
    """(key, document) of each file a build document keeps, with its `file`, `sha256` and
    `size`: its primary (the build itself, under PRIMARY_KEY) first, then its extras."""
    files = chain(((PRIMARY_KEY, build),), build.get("downloads", {}).items())
    return [(key, file) for key, file in files if "file" in file]


def kept_objects(builds):
    """The sha256s of the objects whose files these build documents keep: their primary's,
    and their extras' (`downloads`)."""
    return {file["sha256"] for build in builds for _, file in kept_file_documents(build)}


def readable_projects(directory):
    """(path, Project) of every data file; FileInvalid while one cannot be read, since it
    may use any object."""
    read = list(store.read_projects(directory))
    for path, project in read:
        if isinstance(project, datafile.DataError):
            raise FileInvalid(
                f"{path} cannot be read as a project file: it may use objects, so none was deleted"
            )
    return read


def used_objects(directory: str, ignoring: frozenset = frozenset()) -> set[str]:
    """The sha256s of the objects the builds of `directory` use, yanked ones too (their files
    stay until purged) but those `ignoring` names as (slug, number); Refused while a data
    file cannot be read, since it may use any of them."""
    used = set()
    for _, project in readable_projects(directory):
        for build in chain(project.hosted_builds, project.yanked):
            if (project.slug, build.number) not in ignoring:
                used.update(file.sha256 for file in build.kept_files)
    return used


def distinct_objects(build) -> list:
    """(key, kept file) of a build's kept files, one for each object: two of its files with
    the same bytes are one object, deleted once."""
    seen, distinct = set(), []
    for key, file in build.files:
        if file.hosted and file.sha256 not in seen:
            seen.add(file.sha256)
            distinct.append((key, file))
    return distinct
