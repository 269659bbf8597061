"""Kept files as the commands put them: the --max-file-mb option of those that keep one
(publish --file, import-jenkins --mirror), and the line that says one was deleted, or would
be (check --prune; a publish or an import that left one unused), and what a writer gone left
(check --prune).
"""

from buildshelf import settings
from buildshelf.text import printable, size


def max_file_mb(parser, what):
    parser.add_argument(
        "--max-file-mb",
        type=settings.number_in(1, 1 << 20),
        default=settings.setting("max_file_mb").default,
        metavar="MB",
        help=f"the largest {what}, in MiB (default: %(default)s)",
    )


def deleted(removed):
    print(f"deleted {printable(removed.path)} ({size(removed.size)}), no build uses it")


def would_delete(removed):
    print(f"would delete {printable(removed.path)} ({size(removed.size)}), no build uses it")


def left_behind(what, dry_run):
    """The line of what a writer gone left in the store (`what`, as ArtifactStore.remove_stale
    says it), deleted by check --prune, or that would be."""
    print(f"{'would delete' if dry_run else 'deleted'} {what}, left by a writer that is gone")
