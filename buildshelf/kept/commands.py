"""`artifacts copy`: every object of one artifact store copied into another (a directory or
an s3:// URL each), the move between stores (docs/storage.md). Each object is hashed on its
way in and kept only if it hashes to its name; one already there is skipped, so that a copy
interrupted is run again to finish it. Its arguments and what it prints.
"""

from buildshelf import progress
from buildshelf.kept import stores
from buildshelf.kept.artifacts import LocalStore
from buildshelf.kept.objects import ArtifactStore, Refused
from buildshelf.text import counted, printable, size


def artifacts_parsers(commands):
    group = commands.group(
        "artifacts",
        help="work on the artifact store itself: copy it into another",
        description="Work on the artifact store itself (see docs/storage.md).",
    )
    sub = group.add(
        "copy",
        copy,
        "copy every kept object from one store into another, each verified by its sha256; "
        "those already there are skipped, so a copy interrupted is run again to finish it",
    )
    for flag, what in (("--from", "the store copied"), ("--to", "the store copied into")):
        sub.add_argument(
            flag,
            required=True,
            type=stores.location,
            metavar="DIR|URL",
            help=f"{what}: a directory, or s3://BUCKET[/PREFIX]",
        )


def copy(args) -> int:
    source, target = stores.opened(getattr(args, "from")), stores.opened(args.to)
    if source.where == target.where:
        raise Refused(f"--from and --to are the same store, {printable(source.where)}")
    copied, skipped, failed = copy_objects(source, target)
    print(
        f"copied {counted(copied, 'object')} from {printable(source.where)} to "
        f"{printable(target.where)}; {counted(skipped, 'object')} already there"
        + (f"; {counted(failed, 'object')} not copied (above)" if failed else "")
    )
    return 1 if failed else 0


def copy_objects(source: ArtifactStore, target: ArtifactStore) -> tuple[int, int, int]:
    """(copied, skipped, failed): each object of `source` that `target` does not hold as it
    should copied, hashed on its way and kept only under its own sha256; each failure
    printed on a line of its own."""
    there, copied, skipped, failed = target.objects(), 0, 0, 0
    for sha256, length in source.objects().items():
        if there.get(sha256) == length and target.verify(sha256, length) is None:
            skipped += 1
            continue
        name = source.name(sha256)
        try:
            with progress.Meter(f"copying {printable(name)} ({size(length)})") as meter:
                _copy_one(source, target, sha256, length, meter)
        except Refused as refused:
            print(f"{printable(name)}: not copied: {refused}")
            failed += 1
        else:
            copied += 1
    return copied, skipped, failed


def _copy_one(source, target, sha256, length, meter):
    if isinstance(source, LocalStore):
        target.store_file(source.name(sha256), length, sha256, meter)
        return
    chunks = source.chunks(sha256, 0, length)
    target.store_stream(
        lambda: next(chunks, b""), source.name(sha256), length, length, meter, sha256
    )
