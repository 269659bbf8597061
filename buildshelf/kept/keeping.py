"""A file to keep in the artifact store for a build published (`Keep`): a file copied in,
standard input streamed in, or a file already received into the store (an HTTP upload)
renamed into place; what `writer.publish` stores, under the data directory's lock, before it
writes the data file that names it. A publish's extra files checked before a byte is stored
(`extra_files_problem`).
"""

import json
import os
import sys
from dataclasses import KW_ONLY, dataclass

from buildshelf.datafiles import dataformat
from buildshelf.kept import artifacts, objects, stores
from buildshelf.model import MAX_PUBLISHED_EXTRAS, file_name_in_url

STDIN = "-"  # Keep's source, publish --file's PATH: standard input


@dataclass(frozen=True)
class Keep:
    """A file to keep in the artifact store for the build published: the file at `source`,
    copied in; standard input (STDIN, named by `name`), streamed in; or, with `staged`, a
    file already received into the store (an HTTP upload, a store's Staging), renamed into
    place: no second copy. The artifact's name is `name`, by default the source's."""

    source: str
    max_bytes: int = objects.MAX_BYTES_DEFAULT
    sha256: str | None = None  # what the CI job computed: a file that differs is refused
    _: KW_ONLY  # the rest by name: a positional argument once took another's place
    staged: objects.Staged | None = None
    name: str | None = None
    progress: objects.Progress | None = None  # told of the copy as it goes

    @property
    def file_name(self) -> str:
        """The name the file is kept under: `name`, by default the source's."""
        return self.name or os.path.basename(self.source)

    def fields(self, stored: objects.Stored) -> dict:
        """The kept file's keys in a data file, once it is `stored`."""
        return {"sha256": stored.sha256, "size": stored.size, "file": self.file_name}

    def stored(self, store_dir: str) -> objects.Stored:
        """The file as an object of `store_dir` (see Keep); objects.Refused if not."""
        artifacts.check_name(self.file_name)
        store = stores.opened(store_dir)
        if self.staged is not None:
            return store.place(self.staged, self.source)
        if self.source == STDIN:  # publish --file - (what a CI job sends over ssh)
            return store.store_stream(
                _read_stdin,
                f"{self.name} (standard input)",
                self.max_bytes,
                progress=self.progress,
                expected_sha256=self.sha256,
            )
        return store.store_file(self.source, self.max_bytes, self.sha256, self.progress)


def _read_stdin() -> bytes:
    try:
        return sys.stdin.buffer.read1(objects.CHUNK_BYTES)
    except OSError as error:
        raise objects.Refused(
            f"cannot read standard input: {error.strerror} (nothing was stored)"
        ) from None


def extra_files_problem(build: dict, keep: Keep | None, extras: dict[str, Keep]) -> str | None:
    """Why a publish's extra files, elsewhere (the build's `downloads`) and to keep (`extras`),
    are refused, checked before a byte is stored: a data files' rule broken (keys, names),
    more than MAX_PUBLISHED_EXTRAS, a key given twice; or None."""
    files = build.get("downloads", {})
    if not (files or extras):
        return None
    if type(files) is dict:  # else the rule says what it must be
        if twice := sorted(files.keys() & extras.keys()):
            return f"downloads[{json.dumps(twice[0])}] is given twice"
        if len(files) + len(extras) > MAX_PUBLISHED_EXTRAS:
            return (
                f"it has {len(files) + len(extras)} extra files: a publish takes "
                f"{MAX_PUBLISHED_EXTRAS} at most"
            )
        # As they will be once stored: the bytes, which no rule looks at, are not known yet.
        unstored = objects.Stored("0" * 64, 0, "", False)
        files = files | {key: kept.fields(unstored) for key, kept in extras.items()}
    primary = keep.file_name if keep else file_name_in_url(build.get("downloadUrl") or "")
    try:
        dataformat.valid_downloads(files, primary)
    except dataformat.RuleBroken as problem:
        return str(problem)
    return None
