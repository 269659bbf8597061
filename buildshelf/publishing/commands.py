"""The commands of HTTP publishing, which keep their records in the state directory: `token
create|list|revoke` (the tokens of tokens.py) and `trust` (the trusted publishers of
trust.py), their arguments and what they print; `check`'s lines of the tokens to replace
(`check_tokens`).
"""

import argparse
import json
import os
import re
import shlex
import sqlite3
import sys
import time

from buildshelf import settings, state
from buildshelf.publishing import tokens, trust
from buildshelf.text import counted, duration, printable
from buildshelf.writing import refusals, rewrite, writer

TOKEN_DAYS = 90  # token create's default expiry
TOKEN_MAX_DAYS = 3650  # longer is --no-expiry by another name: say that instead
NOTE_LENGTH = 200


# --- values ------------------------------------------------------------------------------------


def _note(value):
    if len(value) > NOTE_LENGTH or not value.isprintable():
        raise argparse.ArgumentTypeError(
            f"{printable(value)!r} is not a note: one line of printable characters, at most "
            f"{NOTE_LENGTH}"
        )
    return value


def _repository(value):
    if not trust.REPOSITORY.match(value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a GitHub repository (OWNER/REPO, such as octo-org/octo-repo)"
        )
    return value


def _workflow(value):
    if not trust.WORKFLOW.match(value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a workflow file: give its name in .github/workflows/, such as "
            "release.yml"
        )
    return value


def _environment(value):
    if not trust.ENVIRONMENT.match(value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an environment name (1 to 255 characters, no control characters)"
        )
    return value


def _ref(value):
    if not trust.REF_PATTERN.match(value):
        hint = (
            f": did you mean refs/heads/{value} or refs/tags/{value}?"
            if "*" in value and trust.REF_PATTERN.match(f"refs/heads/{value}")
            else f": did you mean refs/heads/{value}?"
            if trust.REF_PATTERN.match(f"refs/heads/{value}")
            else ""
        )
        raise argparse.ArgumentTypeError(
            f"{printable(value)!r} is not a ref pattern{hint} (refs/heads/NAME or "
            "refs/tags/NAME, where * stands for any characters but / and ** for any characters, "
            "such as refs/tags/v*)"
        )
    return value


def _listed_number(value, pattern=re.compile(r"[1-9][0-9]{0,8}\Z")):
    if not pattern.match(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a number from --list (1, 2...)")
    return int(value)


# --- the parsers -------------------------------------------------------------------------------


def _state_options():
    """The options of the commands that keep their records in the state directory."""
    return [settings.options(serve=False, only=("data", "state"))]


def token_parsers(commands):
    token = commands.group(
        "token",
        help="create, list and revoke the tokens that HTTP publishes take",
        description="Create, list and revoke the tokens that HTTP publishes take "
        "(Authorization: Bearer bs_ID_SECRET). Only a hash of each secret is kept, in the "
        "state directory (--state).",
    )
    state_options = _state_options()
    _token_create_parser(token, state_options)
    sub = token.add(
        "list",
        token_list,
        "show every token: id, project, created, expires, the time it has left, last used, "
        "revoked, note; never a secret (times UTC)",
        state_options,
    )
    sub.add_argument(
        "--json",
        action="store_true",
        help="a JSON array instead of a table (times in epoch milliseconds, null for none)",
    )
    sub = token.add(
        "revoke", token_revoke, "revoke a token: it stops working at once", state_options
    )
    sub.add_argument("id", metavar="ID", help="the token's id: ID in bs_ID_SECRET")


def _token_create_parser(token, state_options):
    sub = token.add(
        "create",
        token_create,
        "make a token that may publish to one project, or to every project ('*'), and print "
        "it once, alone on stdout",
        state_options,
    )
    sub.add_argument("slug", metavar="SLUG", help="the project, or '*' for every project")
    expiry = sub.add_mutually_exclusive_group()
    expiry.add_argument(
        "--expires",
        type=settings.number_in(1, TOKEN_MAX_DAYS),
        default=TOKEN_DAYS,
        metavar="DAYS",
        help="days until it stops working (default: %(default)s)",
    )
    expiry.add_argument(
        "--no-expiry", action="store_true", help="a token that works until it is revoked"
    )
    sub.add_argument(
        "--note",
        type=_note,
        default="",
        metavar="TEXT",
        help="what it is for, shown by 'token list' (such as the CI job that holds it)",
    )


def trust_parser(commands):
    sub = commands.add(
        "trust",
        trusted_publishers,
        "trust a GitHub repository's Actions jobs to publish to a project over HTTP with their "
        "OIDC token, no secret needed (trusted publishing); list or remove them",
        _state_options(),
    )
    sub.set_defaults(usage_problem=_trust_usage_problem)
    sub.add_argument("slug", metavar="SLUG")
    which = sub.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--github",
        type=_repository,
        metavar="OWNER/REPO",
        help="trust the jobs of this repository (its ids are pinned on its first publish)",
    )
    which.add_argument(
        "--list", action="store_true", help="list the project's trusted publishers, numbered"
    )
    which.add_argument(
        "--remove", type=_listed_number, metavar="N", help="remove the one --list numbers N"
    )
    sub.add_argument(
        "--workflow",
        type=_workflow,
        metavar="FILE.yml",
        help="with --github: only the jobs of the workflow .github/workflows/FILE.yml",
    )
    sub.add_argument(
        "--environment",
        type=_environment,
        metavar="NAME",
        help="with --github: only the jobs in this deployment environment",
    )
    sub.add_argument(
        "--ref",
        type=_ref,
        metavar="PATTERN",
        help="with --github: only the jobs run for a branch or tag this pattern matches (the "
        "token's ref: refs/heads/main, refs/tags/v*; * stops at a /, ** does not)",
    )


def _trust_usage_problem(args):
    if args.github is None and any(
        given is not None for given in (args.workflow, args.environment, args.ref)
    ):
        return "--workflow, --environment and --ref go with --github"
    return None


# --- trust -------------------------------------------------------------------------------------


def trusted_publishers(args):
    if args.list:
        listed = trust.listed(args.state, args.slug)
        if not listed:
            print(f"{args.slug} trusts no publisher: add one with --github OWNER/REPO")
        for trusted in listed:
            pinned = (
                f" (pinned: owner id {trusted.owner_id}, repository id {trusted.repository_id})"
                if trusted.owner_id is not None
                else ""
            )
            print(f"{trusted.number}. {trusted}{pinned}")
    elif args.remove is not None:
        removed = trust.remove(args.state, args.slug, args.remove)
        if removed is None:
            raise refusals.Refused(
                f"{args.slug} has no trusted publisher {args.remove} (--list numbers them)"
            )
        print(f"{args.slug} no longer trusts {removed}")
    else:
        if not os.path.isfile(rewrite.project_path(args.data, args.slug)):
            raise writer.no_project(args.data, args.slug)
        trusted, added = trust.add(
            args.state, args.slug, args.github, args.workflow, args.environment, args.ref
        )
        already = "" if added else " already"
        done = "" if added else ": nothing changed"
        print(f"{args.slug} trusts {trusted}{already} ({trusted.number}){done}")
    return 0


# --- tokens ------------------------------------------------------------------------------------


def utc_minute(millis: int) -> str:
    """A time as the token commands show it: '2026-11-26T10:35Z'."""
    return time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime(millis // 1000))


def token_create(args):
    if args.slug != tokens.EVERY_PROJECT:
        _existing_project(args.data, args.slug)
    token, text = tokens.create(
        args.state, args.slug, None if args.no_expiry else args.expires, args.note
    )
    expiry = (
        "it never expires"
        if token.expires is None
        else f"it expires {utc_minute(token.expires)} (in {counted(args.expires, 'day')})"
    )
    print(text, flush=True)  # stdout: the token alone, for a pipe into a CI's secrets
    print(
        f"created token {token.id} for {_for_what(token)}; {expiry}. It is shown once: store "
        f"it now. 'buildshelf token revoke {token.id}' revokes it.",
        file=sys.stderr,
    )
    if token.project == tokens.EVERY_PROJECT:
        print(
            f"warning: token {token.id} may publish to every project, today's and future "
            "ones: prefer a token per project",
            file=sys.stderr,
        )
    return 0


def _existing_project(data, slug):
    """Refused unless `slug` is a project of the data directory `data`."""
    if not os.path.isfile(rewrite.project_path(data, slug)):  # refuses a name that is no slug
        raise writer.no_project(data, slug, "'*' is every project")


def token_list(args):
    found, now = tokens.list_tokens(args.state), tokens.now_ms()
    if args.json:
        print(json.dumps([_token_json(token, now) for token in found], indent=2))
        return 0
    if not found:
        print("no tokens: 'buildshelf token create SLUG' makes one", file=sys.stderr)
        return 0

    def when(millis, none):
        return none if millis is None else utc_minute(millis)

    rows = [("ID", "PROJECT", "CREATED", "EXPIRES", "LEFT", "LAST USED", "REVOKED", "NOTE")]
    rows += [
        (
            token.id,
            printable(token.project),
            when(token.created, ""),
            when(token.expires, "never"),
            _left(token, now),
            when(token.last_used, "never"),
            when(token.revoked, "no"),
            printable(token.note),
        )
        for token in found
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join([*map(str.ljust, row, widths), row[-1]]).rstrip())
    return 0


def _left(token, now):
    """How long `token` has left at `now`: '13 days', 'expired 2 days ago', 'never' (it
    never expires), 'revoked'."""
    if token.revoked is not None:
        return "revoked"
    if token.expires is None:
        return "never"
    if now >= token.expires:
        return f"expired {duration((now - token.expires) / 1000)} ago"
    return duration((token.expires - now) / 1000)


def _token_json(token, now):
    return {
        "id": token.id,
        "project": token.project,
        "created": token.created,
        "expires": token.expires,
        "lastUsed": token.last_used,
        "note": token.note,
        "revoked": token.revoked,
        "refusedExpired": token.refused_expired,
        "status": token.status(now),
    }


def check_tokens(state_dir: str) -> int:
    """Print a line for each token of `state_dir` that needs attention (Token.attention),
    with the commands that replace it: check's part. 1 when one has expired while in use,
    or the tokens cannot be read; 0 for warnings only (the weekly cron job mails them). No
    tokens database, nothing said, nothing made."""
    if not os.path.exists(state.database_path(state_dir, tokens.SCHEMA.name)):
        return 0
    try:
        found, now = tokens.list_tokens(state_dir), tokens.now_ms()
    except (sqlite3.Error, OSError) as error:
        print(f"tokens: cannot be read in {printable(state_dir)}: {error}")
        return 1
    status = 0
    for token in found:
        attention = token.attention(now)
        if attention is None:
            continue
        signs = "last used " + ("never" if token.last_used is None else utc_minute(token.last_used))
        if token.refused_expired is not None:
            signs += f", refused as expired {utc_minute(token.refused_expired)}"
        if attention == tokens.EXPIRING:
            when = f"expires in {duration((token.expires - now) / 1000)}"
        else:
            when = f"expired {duration((now - token.expires) / 1000)} ago"
            status = 1
        ending = ", and is still in use" * (attention == tokens.EXPIRED_IN_USE)
        successor = shlex.join(
            ["buildshelf", "token", "create", token.project]
            + ["--note", token.note] * bool(token.note)
        )
        print(
            f"token {token.id} for {_for_what(token)} ({signs}) {when}, "
            f'{utc_minute(token.expires)}{ending}: make its successor with "{successor}", '
            f'put that in its place, then "buildshelf token revoke {token.id}"'
        )
    return status


def _for_what(token):
    return "every project" if token.project == tokens.EVERY_PROJECT else token.project


def token_revoke(args):
    if tokens.FORM.match(args.id):
        raise tokens.TokenError("give the token's id, ID in bs_ID_SECRET, not the whole token")
    token, changed = tokens.revoke(args.state, args.id)
    print(
        f"revoked token {token.id} ({token.project})"
        if changed
        else f"token {token.id} was already revoked, {utc_minute(token.revoked)}: nothing changed"
    )
    return 0
