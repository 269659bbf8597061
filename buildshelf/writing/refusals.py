"""Why a change to the data files was not made: `Refused`, and the kinds of it that a caller
answers differently (the HTTP routes)."""


class Refused(Exception):
    """A change not made: the message says why and what to do. Nothing was written."""


# What a refusal was, for a caller that answers each differently (the HTTP routes); the
# message is the same for every caller.
class NoProject(Refused):
    """The project has no file."""


class NoBuild(Refused):
    """The project has no build of that number."""


class Invalid(Refused):
    """The build given breaks a rule of the data files, or its file cannot be kept."""


class Exists(Refused):
    """A different build of that number is there; `fields` are the keys that differ."""

    def __init__(self, message: str, fields: list[str]):
        super().__init__(message)
        self.fields = fields


class NotYanked(Refused):
    """The build is served, not yanked: there is nothing to restore, and nothing to purge."""


class FilesPurged(Refused):
    """A yanked build's kept file was purged: it cannot be served again, only published.
    `purged` says which files; the message adds the store they were purged from and
    `remedy`, the command's way to publish it again. An HTTP client is told `purged` alone
    with its own remedy: the store's path or bucket is the server's."""

    def __init__(self, purged: str, store: str, remedy: str):
        super().__init__(f"{purged} from {store}. {remedy}")
        self.purged = purged


class FileInvalid(Refused):
    """The project's file, as it is on disk, is no valid project file (a hand-edit error):
    nothing is written until it is fixed by hand."""


class NoSpace(Refused):
    """The disk (or the quota) is full."""


class StoreUnavailable(Refused):
    """The artifact store cannot be reached, or refuses the server's credentials."""
