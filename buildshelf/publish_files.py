"""The files `buildshelf publish` gives a build, on its command line: the primary (`--file`,
kept, or `--download-url`, with `--name`, `--sha256`, `--size`) and the extra files by key
(`--extra-file KEY=PATH`, kept, and `--extra-url KEY=URL`, with `--extra-sha256 KEY=HEX` and
`--extra-size KEY=BYTES`): their arguments, their rules together (`usage_problem`), and what
they give the writer (`given`): the build's file keys and its extra files elsewhere, the
files to keep, and the progress lines of their copies.
"""

import argparse
import contextlib
import os
from dataclasses import dataclass, field

from buildshelf import progress
from buildshelf.kept import keeping, kept_files
from buildshelf.model import download_key_problem, sha256_hex, whole_number
from buildshelf.text import printable


def sha256(value):
    if (digest := sha256_hex(value)) is None:
        raise argparse.ArgumentTypeError(f"{value!r} is not a SHA-256 (64 hexadecimal digits)")
    return digest


def size(value):
    if (number := whole_number(value)) is None:
        raise argparse.ArgumentTypeError(f"{value!r} is not a size in bytes (a whole number)")
    return number


def keyed(what, convert=str):
    """An argparse type of KEY=VALUE, the key an extra file's (kind:variant, not the
    primary's), the value converted by `convert` (`what` says what it is): (key, value)."""

    def parse(text):
        key, equals, value = text.partition("=")
        if not equals or not value:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not KEY={what}: give the extra file's key, such as "
                f"server:mojmap, then = and its {what}"
            )
        if problem := download_key_problem(key):
            raise argparse.ArgumentTypeError(f"{text!r}: the key {key!r} {problem}")
        return key, convert(value)

    return parse


def arguments(sub):
    """publish's arguments of the build's files."""
    artifact = sub.add_mutually_exclusive_group(required=True)
    artifact.add_argument(
        "--file",
        metavar="PATH",
        help="its artifact, kept in the artifact store (see --artifacts); '-': read from "
        "standard input, named by --name",
    )
    artifact.add_argument("--download-url", metavar="URL", help="address of its artifact")
    sub.add_argument("--name", metavar="FILE", help="the artifact's file name, with --file -")
    sub.add_argument(
        "--sha256",
        type=sha256,
        metavar="HEX",
        help="the artifact's SHA-256: with --file, what it must hash to; with --download-url, "
        "recorded with --size",
    )
    sub.add_argument(
        "--size", type=size, metavar="BYTES", help="the artifact's size, with --download-url"
    )
    extra = "an extra file of the build, under its key (kind:variant, such as server:mojmap)"
    sub.add_argument(
        "--extra-file",
        type=keyed("PATH"),
        action="append",
        default=[],
        metavar="KEY=PATH",
        help=f"{extra}, kept in the artifact store as --file is; repeat for more",
    )
    sub.add_argument(
        "--extra-url",
        type=keyed("URL"),
        action="append",
        default=[],
        metavar="KEY=URL",
        help=f"{extra}, kept elsewhere, at this address; repeat for more",
    )
    sub.add_argument(
        "--extra-sha256",
        type=keyed("HEX", sha256),
        action="append",
        default=[],
        metavar="KEY=HEX",
        help="an extra file's SHA-256, as --sha256 is the artifact's: with --extra-file, what "
        "it must hash to; with --extra-url, recorded with --extra-size",
    )
    sub.add_argument(
        "--extra-size",
        type=keyed("BYTES", size),
        action="append",
        default=[],
        metavar="KEY=BYTES",
        help="an --extra-url's size, with its --extra-sha256",
    )
    kept_files.max_file_mb(sub, "--file or --extra-file kept")


def usage_problem(args):
    """What is wrong with publish's file arguments together, or None."""
    if args.file == keeping.STDIN and args.name is None:
        return "--file - needs --name: the name of the file read from standard input"
    if args.name is not None and args.file != keeping.STDIN:
        return "--name goes with --file -: a file's own name is its artifact's"
    if args.size is not None and args.file is not None:
        return "--size goes with --download-url: a kept file's size is measured"
    if args.file is None and (args.sha256 is None) != (args.size is None):
        return "--sha256 and --size go together with --download-url: both or neither"
    kept, elsewhere = dict(args.extra_file), dict(args.extra_url)
    keys = [key for key, _ in args.extra_file + args.extra_url]
    if twice := next((key for key in keys if keys.count(key) > 1), None):
        return f"the extra file {twice} is given twice: give each key once"
    if keeping.STDIN in kept.values():
        return "--extra-file KEY=- is not taken: only --file reads standard input"
    for flag, pairs in (("--extra-sha256", args.extra_sha256), ("--extra-size", args.extra_size)):
        given = [key for key, _ in pairs]
        if twice := next((key for key in given if given.count(key) > 1), None):
            return f"{flag} {twice} is given twice: give it once"
        if unknown := next((key for key in given if key not in keys), None):
            return f"{flag} {unknown}: no --extra-file or --extra-url gives the file {unknown}"
    sizes = dict(args.extra_size)
    if kept.keys() & sizes.keys():
        return "--extra-size goes with --extra-url: a kept file's size is measured"
    hashes = dict(args.extra_sha256)
    if lone := next((key for key in elsewhere if (key in hashes) != (key in sizes)), None):
        return f"--extra-sha256 and --extra-size go together for {lone}: both or neither"
    return None


@dataclass
class Given:
    """What publish's file arguments give the writer: the build's own keys of its files (its
    `sha256` and `size`, when kept elsewhere; its `downloads`, the extra files elsewhere), the
    primary file to keep (`keep`), the extra files to keep (`extras`, by key), and the
    progress lines of their copies (`meters`, to enter around the write)."""

    fields: dict = field(default_factory=dict)
    keep: keeping.Keep | None = None
    extras: dict = field(default_factory=dict)
    meters: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)


def given(args) -> Given:
    """The build's files as publish's arguments (checked by usage_problem) give them."""
    files = Given()
    if args.file is None and args.sha256 is not None:
        files.fields.update(sha256=args.sha256, size=args.size)
    hashes, sizes = dict(args.extra_sha256), dict(args.extra_size)
    elsewhere = {key: {"downloadUrl": url} for key, url in args.extra_url}
    for key, extra in elsewhere.items():
        if key in sizes:
            extra.update(sha256=hashes[key], size=sizes[key])
    if elsewhere:
        files.fields["downloads"] = elsewhere
    if args.file is not None:
        files.keep = _keep(files, args, args.file, args.name, args.sha256)
    for key, path in args.extra_file:
        files.extras[key] = _keep(files, args, path, None, hashes.get(key))
    return files


def _keep(files, args, path, name, expected):
    """The Keep of the file at `path`, its copy shown by a progress line of its own."""
    shown = printable(name or os.path.basename(path))
    meter = files.meters.enter_context(progress.Meter(f"storing {shown}"))
    return keeping.Keep(path, args.max_file_mb << 20, expected, name=name, progress=meter)
