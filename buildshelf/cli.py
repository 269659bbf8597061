"""The `buildshelf` command line: the top parser, which serves, with every command's parser,
and main(), which runs the command given and says why it refused; the settings' options made
by settings.py. Each command's parser and function are made beside what it works on: those of
the data directory (check, add-project, publish, yank, unyank, purge) in commands.py; those
of HTTP publishing, which keep their records in the state directory (token
create|list|revoke, trust), in publishing/commands.py; import-jenkins in
jenkins/commands.py; webhook test in webhooks/commands.py.

`buildshelf [flags]` with no command serves, as `python server.py [flags]` does. Exit status:
0 done, 1 refused (one line on stderr saying why), 2 bad usage (argparse's own).
"""

import argparse
import os
import sys

from buildshelf import server, settings, state
from buildshelf.commands import (
    add_project_parser,
    check_parser,
    publish_parser,
    purge_parser,
    unyank_parser,
    yank_parser,
)
from buildshelf.jenkins import remote_api
from buildshelf.jenkins.commands import import_jenkins_parser
from buildshelf.kept import objects
from buildshelf.kept.commands import artifacts_parsers
from buildshelf.publishing import tokens
from buildshelf.publishing.commands import token_parsers, trust_parser
from buildshelf.serving import accesslog
from buildshelf.text import printable
from buildshelf.webhooks.commands import webhook_parsers
from buildshelf.writing import refusals


class _Commands:
    """Makes commands' parsers under `under` (the top parser's commands, or a group's: token,
    webhook), each kept in the top parser's `commands` by its full name ('token create')."""

    def __init__(self, parser, under, parents, prefix=""):
        self.parser, self.under, self.parents, self.prefix = parser, under, parents, prefix

    def add(self, name, func, help, parents=None):
        """A command that runs `func`, with the options of `parents` (default: --data and
        the other directories)."""
        parents = self.parents if parents is None else parents
        sub = self.under.add_parser(name, parents=parents, help=help, description=help)
        sub.set_defaults(func=func, command=self.prefix + name)
        self.parser.commands[self.prefix + name] = sub
        return sub

    def group(self, name, help, description):
        """A command of commands (token create, ...), which the _Commands returned makes."""
        group = self.under.add_parser(name, help=help, description=description)
        self.parser.commands[self.prefix + name] = group
        actions = group.add_subparsers(title="commands", metavar="ACTION", required=True)
        return _Commands(self.parser, actions, self.parents, f"{self.prefix}{name} ")


def make_parser():
    """The top parser, which serves, with every command's parser, each made by a function
    of its command's module (in the order --help lists them) and kept in `parser.commands`
    by its name."""
    serve_options = settings.options(serve=True)
    parser = argparse.ArgumentParser(
        prog="buildshelf",
        parents=[serve_options],
        # No abbreviations: a command's own flag (import-jenkins --artifact) is not the prefix
        # of several serve flags (--artifacts, --artifacts-downloads...) to this parser.
        allow_abbrev=False,
        description="Serve the build-distribution API (v2) over the JSON files of a data "
        "directory, reloading them when they change (the default command, with the flags "
        "below), or change those files safely.",
        epilog="Each serve flag's default may also come from the environment variable named "
        "in its help; a flag on the command line wins. Exit status: 0 done, 1 refused (the "
        "message says why), 2 bad usage. 'buildshelf COMMAND --help' explains a command.",
    )
    parser.set_defaults(func=server.serve, command=None)
    parser.commands = {}  # each command's parser, by name
    commands = _Commands(
        parser,
        parser.add_subparsers(title="commands", metavar="COMMAND"),
        [settings.options(serve=False)],
    )
    commands.add("serve", server.serve, "serve the API (the same as no command)", [serve_options])
    for add_parser in (
        check_parser,
        add_project_parser,
        publish_parser,
        yank_parser,
        unyank_parser,
        purge_parser,
        import_jenkins_parser,
        token_parsers,
        trust_parser,
        webhook_parsers,
        artifacts_parsers,
    ):
        add_parser(commands)
    return parser


def parse_args(argv=None, environ=os.environ):
    parser = make_parser()
    args = parser.parse_args(argv)
    serving = args.func is server.serve
    if not serving:
        # A command's own option may share a serve flag's name (publish --max-file-mb).
        own = parser.commands[args.command].get_default
        given = [
            s.flag
            for s in settings.SETTINGS
            if s.serve_only and s.name in vars(args) and own(s.name) is None
        ]
        if given:
            parser.error(f"{given[0]} is a serve flag: it does not go with '{args.command}'")
    # A command's rule of its arguments together, which argparse cannot say (publish: --file -
    # needs --name): the function its parser gives as the default `usage_problem` says what
    # is wrong, or None.
    usage_problem = getattr(args, "usage_problem", None)
    if usage_problem is not None and (problem := usage_problem(args)) is not None:
        parser.error(problem)
    # Said by a command that writes: otherwise it would change a checkout's data/ unseen.
    args.data_defaulted = "data" not in vars(args) and "BUILDSHELF_DATA" not in environ
    # The serve settings a command reads too, from their variables (its parser's default
    # `server_settings`): webhook test links the public URL the server is given.
    also = () if serving else parser.commands[args.command].get_default("server_settings")
    settings.settle(
        parser, args, environ, serving, makes_data=args.command == "add-project", also=also or ()
    )
    return args


# The commands that change the data directory: its files, the kept files or the state.
WRITING = (
    "add-project",
    "publish",
    "yank",
    "unyank",
    "purge",
    "import-jenkins",
    "token create",
    "token revoke",
)


# The commands whose work logs (check's problems, webhook test's deliveries): their lines go to
# stderr as a server's do. Set up here: only the modules that start the server import the
# serving side.
LOGGING = ("check", "webhook test")


def _writes(args):
    if args.command == "check":
        return args.prune
    if args.command == "trust":
        return not args.list
    return args.command in WRITING


def main(argv=None):
    args = parse_args(argv)
    if args.command is not None and args.data_defaulted and _writes(args):
        print(
            f"buildshelf {args.command}: using the data directory {printable(args.data)} (no "
            "--data or BUILDSHELF_DATA given)",
            file=sys.stderr,
        )
    try:
        if args.command in LOGGING:
            accesslog.log_to_stderr()
        return args.func(args)
    except (
        refusals.Refused,
        objects.Refused,
        remote_api.JenkinsError,
        tokens.TokenError,
        state.Unusable,
    ) as refused:
        print(f"buildshelf {args.command}: {refused}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"buildshelf {args.command}: interrupted", file=sys.stderr)
        return 130
