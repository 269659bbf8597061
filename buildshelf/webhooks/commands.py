"""`buildshelf webhook test`: a sample event sent to each target of the webhooks file
(delivery.send_samples), each answer printed; its arguments. The sample names a project of
the data directory the target hears of, and links it where the server serves it
(BUILDSHELF_PUBLIC_URL, which the box's settings file gives the server and every command).
Its log lines go to stderr as a server's do: cli.main sets that up (only the modules that
start the server import the serving side, where the log format is).
"""

import sys

from buildshelf import settings
from buildshelf.store import data_files
from buildshelf.text import counted, printable
from buildshelf.webhooks import delivery
from buildshelf.webhooks.targets import TargetsError, read_targets


def webhook_parsers(commands):
    webhook = commands.group(
        "webhook",
        help="try the webhook targets",
        description="Try the webhook targets of the webhooks file (--webhooks; see "
        "docs/webhooks.md).",
    )
    sub = webhook.add(
        "test",
        webhook_test,
        "send a sample event to each target, one after the other, and print each answer "
        "(index, host, status or error; never a URL or secret): exit 1 unless all are 2xx",
        [settings.options(serve=False, only=("data", "state", "webhooks"))],
    )
    sub.set_defaults(server_settings=("public_url",))  # BUILDSHELF_PUBLIC_URL, read
    sub.add_argument(
        "--target",
        type=settings.number_in(0, 1 << 20),
        metavar="N",
        help="only the target of index N (from 0, in the file's order)",
    )


def webhook_test(args):
    try:
        targets = read_targets(args.webhooks)
    except TargetsError as error:
        print("\n".join(error.lines()), file=sys.stderr)
        return 1
    if args.target is not None and not any(t.index == args.target for t in targets):
        print(
            f"buildshelf webhook test: no target {args.target}: the file has "
            f"{counted(len(targets), 'target')} (numbered from 0)",
            file=sys.stderr,
        )
        return 1
    if not targets:
        print(
            f"buildshelf webhook test: {printable(args.webhooks)} has no targets", file=sys.stderr
        )
        return 1
    try:
        projects = sorted(data_files(args.data))
    except OSError:  # no data directory: the sample names a made-up project
        projects = []
    public_url = args.public_url or settings.DEFAULT_PUBLIC_URL
    status = 0
    for target, code, said in delivery.send_samples(targets, public_url, args.target, projects):
        print(f"target {target.index} ({target.host}, {target.format}): {said}", flush=True)
        if code is None or not 200 <= code < 300:
            status = 1
    return status
