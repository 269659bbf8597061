"""A file to keep in the artifact store for a build published (`Keep`): a file copied in,
standard input streamed in, or a file already received into the store (an HTTP upload)
renamed into place; what `writer.publish` stores, under the data directory's lock, before it
writes the data file that names it.
"""

import os
import sys
from dataclasses import KW_ONLY, dataclass

from buildshelf.kept import artifacts, objects, stores

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
