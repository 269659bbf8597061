"""The commands of the data directory: `check` (its files, the kept files they name, the
webhooks file and the tokens to replace; `--prune`), and those that change it through
writer.py: `add-project`, `publish`, `yank`, `unyank` and `purge`; their arguments and what
they print. check's log lines (the store's) go to stderr as a server's do: cli.main sets
that up.
"""

import argparse
import os
import re
import subprocess
import sys
import time

from buildshelf import publish_files, settings
from buildshelf.datafiles import checking, datafile
from buildshelf.datafiles.dataformat import published_timestamp_problem
from buildshelf.kept import kept_files, stores
from buildshelf.model import PRIMARY_KEY, whole_number
from buildshelf.publishing.commands import check_tokens
from buildshelf.store import data_files
from buildshelf.text import counted, printable, size
from buildshelf.webhooks import outbox
from buildshelf.webhooks.targets import (
    NoTargetsFile,
    TargetsError,
    read_targets,
    unknown_projects,
)
from buildshelf.writing import purging, refusals, rewrite, writer
from buildshelf.writing.objects_in_use import kept_file_documents

GIT_TIMEOUT = 60
GITHUB_RUN = "$GITHUB_SERVER_URL/$GITHUB_REPOSITORY/actions/runs/$GITHUB_RUN_ID"  # a run's URL


# --- values ------------------------------------------------------------------------------------


def _integer(value, pattern=re.compile(r"-?[0-9]{1,30}\Z")):
    if not pattern.match(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number")
    return int(value)


def _millis(value):
    millis = _integer(value)
    if problem := published_timestamp_problem(millis):
        raise argparse.ArgumentTypeError(f"{value!r} {problem}")
    return millis


def _build_number(value):
    if (number := whole_number(value)) is None:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a build number (a whole number, 0 or more)"
        )
    return number


def _days(text):
    days = whole_number(text)
    if days is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of days")
    return days


# --- the parsers -------------------------------------------------------------------------------


def check_parser(commands):
    sub = commands.add(
        "check",
        check,
        "validate every data file and the kept files they name, print each problem, exit 0 if "
        "all are valid and 1 otherwise; say which tokens to replace (one expired while still "
        "in use is a problem)",
    )
    sub.set_defaults(usage_problem=_check_usage_problem)
    sub.add_argument(
        "--verify", action="store_true", help="hash every kept file again: its bytes unchanged"
    )
    sub.add_argument(
        "--prune",
        action="store_true",
        help="delete the kept files' objects that no build names, printing each and its size "
        "(none while a data file cannot be read)",
    )
    sub.add_argument(
        "--dry-run", action="store_true", help="with --prune: print what it would delete"
    )
    sub.add_argument(
        "--verbose",
        action="store_true",
        help="print what is no problem too: the objects no build uses, the yanked builds' "
        "files kept, the webhook targets (without it, all well prints nothing)",
    )


def _check_usage_problem(args):
    if args.dry_run and not args.prune:
        return "--dry-run goes with --prune: it prints what --prune would delete"
    return None


def add_project_parser(commands):
    sub = commands.add(
        "add-project",
        add_project,
        "add a project with no builds (and the data directory, if it is not there)",
        [settings.options(serve=False, makes_data=True)],
    )
    sub.add_argument("slug", metavar="SLUG", help="the project's slug: its file is SLUG.json")
    sub.add_argument("--ci-job", required=True, metavar="NAME", help="the CI job's name")
    sub.add_argument("--ci-job-url", required=True, metavar="URL", help="the CI job's address")
    sub.add_argument(
        "--javadoc-base-url",
        default="",
        metavar="URL",
        help="base address of the project's javadoc pages (default: none, /jd answers 404)",
    )


def publish_parser(commands):
    sub = commands.add(
        "publish", publish, "add a build to a project (a retry of the same build changes nothing)"
    )
    sub.set_defaults(usage_problem=publish_files.usage_problem)
    sub.add_argument("slug", metavar="SLUG")
    sub.add_argument(
        "--build", required=True, type=_build_number, metavar="N", help="the build number"
    )
    sub.add_argument("--channel", required=True, metavar="VERSION", help="its channel version")
    publish_files.arguments(sub)
    sub.add_argument(
        "--url",
        metavar="URL",
        help="address of its CI run (default, for a Jenkins job only: the project's ciJobUrl + N/)",
    )
    sub.add_argument("--experimental", action="store_true", help="mark it experimental")
    sub.add_argument(
        "--timestamp",
        type=_millis,
        metavar="MILLIS",
        help="its time in epoch milliseconds (default: now; a retry without it "
        "matches the build already there whatever its time)",
    )
    commits = sub.add_mutually_exclusive_group()
    commits.add_argument(
        "--commit",
        nargs=2,
        action="append",
        default=[],
        metavar=("HASH", "MESSAGE"),
        help="a commit in it, newest first; repeat for more",
    )
    commits.add_argument(
        "--git",
        metavar="RANGE",
        help="its commits from 'git log RANGE' "
        "(such as A..B) in the current directory, newest first",
    )
    sub.add_argument(
        "--replace", action="store_true", help="replace a different build of the same number"
    )


def yank_parser(commands):
    sub = commands.add(
        "yank",
        yank,
        "stop serving a build: it stays in its file, marked yanked, and its kept file stays "
        "until purged ('unyank' restores it; its number may be published again)",
    )
    sub.add_argument("slug", metavar="SLUG")
    sub.add_argument("number", type=_build_number, metavar="N", help="the build number")
    sub.add_argument("--reason", metavar="TEXT", default="", help="why, kept in the mark")
    sub.add_argument(
        "--purge",
        action="store_true",
        help="delete its kept file at once (a takedown), unless a build served uses it",
    )
    sub.add_argument("--dry-run", action="store_true", help="print what it would do; write nothing")


def unyank_parser(commands):
    sub = commands.add(
        "unyank", unyank, "serve a yanked build again, if its kept file is still there"
    )
    sub.add_argument("slug", metavar="SLUG")
    sub.add_argument("number", type=_build_number, metavar="N", help="the build number")


def purge_parser(commands):
    sub = commands.add(
        "purge",
        purge,
        "delete the kept files of builds yanked at least DAYS ago, printing each and its size "
        "(never one a build served uses)",
    )
    sub.add_argument("slug", metavar="SLUG", nargs="?", help="only this project's builds")
    sub.add_argument(
        "--older-than",
        type=_days,
        default=30,
        metavar="DAYS",
        help="yanked at least this many days ago (default: 30; 0: every yanked build)",
    )
    sub.add_argument("--dry-run", action="store_true", help="print what it would delete")


# --- check -------------------------------------------------------------------------------------


def _check_webhooks(state_dir, path, data_dir, verbose):
    """What is wrong with the webhook targets, a project they name that is not in
    `data_dir` too (1), or, `verbose`, them said in a line (a restore drill sees them there)
    (0)."""
    try:
        targets = read_targets(path)
    except NoTargetsFile:
        left = outbox.left_without_targets(state_dir, path)
        if left:
            print(f"webhooks: {left}")
        return 1 if left else 0
    except TargetsError as error:
        print("\n".join(error.lines()))
        return 1
    try:
        unknown = unknown_projects(targets, data_files(data_dir))
    except OSError:  # no data directory: checking.check said so
        unknown = []
    for project in unknown:
        print(f"{printable(path)}: {project.message()}")
    if unknown:
        return 1
    if verbose:
        hosts = ", ".join(t.host for t in targets)
        print(f"webhooks: {counted(len(targets), 'target')} ({hosts})")
    return 0


def check(args):
    status = checking.check(
        args.data, args.artifacts, args.verify, not args.prune, verbose=args.verbose
    )
    status = max(status, _check_webhooks(args.state, args.webhooks, args.data, args.verbose))
    status = max(status, check_tokens(args.state))
    if args.prune:
        say = kept_files.would_delete if args.dry_run else kept_files.deleted
        writer.prune(args.data, args.artifacts, args.dry_run, say)
        for what in stores.opened(args.artifacts).remove_stale(args.dry_run):
            kept_files.left_behind(what, args.dry_run)
    return status


# --- the commands that write -------------------------------------------------------------------


def add_project(args):
    if not os.path.isdir(args.data):
        shown = printable(args.data)
        print(f"buildshelf add-project: {shown} does not exist: creating it", file=sys.stderr)
        try:
            os.makedirs(args.data, exist_ok=True)
        except OSError as error:
            raise refusals.Refused(f"cannot create {shown}: {error.strerror}") from None
    created = writer.add_project(
        args.data, args.slug, args.ci_job, args.ci_job_url, args.javadoc_base_url
    )
    print(
        f"added project {args.slug} ({rewrite.project_path(args.data, args.slug)})"
        if created
        else f"project {args.slug} is already there as given: nothing changed"
    )
    return 0


def git_commits(revision_range):
    """The commits of `git log RANGE` in the current directory, newest first."""
    if revision_range.startswith("-"):
        raise refusals.Refused(f"--git {revision_range!r} is not a revision range (such as A..B)")
    try:
        done = subprocess.run(
            ["git", "log", "--no-color", "--format=%H %s", revision_range, "--"],
            capture_output=True,
            timeout=GIT_TIMEOUT,
        )
    except FileNotFoundError:
        raise refusals.Refused("--git needs the git command, which is not installed") from None
    except subprocess.TimeoutExpired:
        raise refusals.Refused(f"git log {revision_range} took over {GIT_TIMEOUT} s") from None
    if done.returncode:
        reason = done.stderr.decode(errors="replace").strip().splitlines() or ["no reason"]
        raise refusals.Refused(f"git log {revision_range} failed: {reason[0]}")
    lines = done.stdout.decode(errors="replace").splitlines()
    return [
        {"message": subject, "hash": commit}
        for commit, _, subject in (line.partition(" ") for line in lines)
    ]


def publish(args):
    commits = (
        git_commits(args.git)
        if args.git is not None
        else [{"message": message, "hash": commit} for commit, message in args.commit]
    )
    files = publish_files.given(args)
    build = datafile.build_document(
        args.build,
        args.channel,
        time.time_ns() // 1_000_000 if args.timestamp is None else args.timestamp,
        args.experimental,
        commits,
        url=args.url,
        download_url=args.download_url,
        **files.fields,
    )
    deleted = []  # said after what happened to the build, or before a refusal
    try:
        with files.meters:  # the lines cleared before anything else is said
            published = writer.publish(
                args.data,
                args.slug,
                build,
                replace=args.replace,
                any_timestamp=args.timestamp is None,
                keep=files.keep,
                store_dir=args.artifacts,
                report=deleted.append,
                extras=files.extras,
            )
        said = {
            "added": f"published build {args.build} of {args.slug}",
            "replaced": f"replaced build {args.build} of {args.slug}",
            "unchanged": f"build {args.build} of {args.slug} is already there as given",
        }[published.outcome]
        notes = []  # of each kept file's object, the primary's first
        for stored in filter(None, (published.stored, *published.extras.values())):
            if stored.repaired:
                notes.append(
                    f"repaired {printable(stored.path)}, found damaged (it {stored.repaired})"
                )
            elif stored.created and published.outcome == "unchanged":
                # The build there names these bytes, and the store had no object of them.
                notes.append(f"restored its missing file {printable(stored.path)}")
        if notes:
            said += ": " + "; ".join(notes)
        elif published.outcome == "unchanged":
            said += ": nothing changed"
        print(said)
    except writer.NoRunUrl as refused:
        raise refusals.Refused(f"{refused} with --url (on GitHub Actions: {GITHUB_RUN})") from None
    finally:
        for removed in deleted:
            kept_files.deleted(removed)
    return 0


def yank(args):
    would = args.dry_run
    deleted = []
    build = writer.yank(
        args.data, args.slug, args.number, args.artifacts, deleted.append,
        args.reason, args.purge, args.dry_run,
    )  # fmt: skip
    said = f"build {args.number} of {args.slug}"
    if "yankedAt" in build:
        print(f"{said} is already yanked: nothing changed")
        return 0
    line = f"{'would yank' if would else 'yanked'} {said}"
    if args.reason:
        line += f" (reason: {printable(args.reason)})"
    gone = {removed.path for removed in deleted}
    store = stores.opened(args.artifacts)
    paths = [store.name(file["sha256"]) for _, file in kept_file_documents(build)]
    kept = [printable(path) for path in dict.fromkeys(paths) if path not in gone]
    if kept:  # its primary's object first, then its extras', each once
        one = len(kept) == 1
        line += f": {'would keep' if would else 'kept'} its file{'' if one else 's'} "
        line += ", ".join(kept)
        if args.purge:
            line += ", which a build served uses" if one else ", which builds served use"
    if not deleted:
        line += f"; 'buildshelf unyank {args.slug} {args.number}' restores it"
    print(line)
    for removed in deleted:
        print(f"{'would delete' if would else 'deleted'} {printable(removed.path)} "
              f"({size(removed.size)}), its file")  # fmt: skip
    return 0


def unyank(args):
    writer.unyank(args.data, args.slug, args.number, args.artifacts)
    print(f"unyanked build {args.number} of {args.slug}: it is served again")
    return 0


def purge(args):
    would = args.dry_run
    purged = purging.purge(args.data, args.artifacts, args.slug, args.older_than, would)
    for file in purged:
        build = f"yanked build {file.number} of {file.slug}"
        # the primary's the file of a build, as before it had extras; an extra's by its key
        whose = "the file" if file.key == PRIMARY_KEY else f"the {file.key} file"
        path = printable(stores.opened(args.artifacts).name(file.sha256))
        if file.removed is not None:
            print(f"{'would delete' if would else 'deleted'} {printable(file.removed.path)} "
                  f"({size(file.removed.size)}), {whose} of {build}")  # fmt: skip
        elif file.shared:
            print(f"{'would keep' if would else 'kept'} {path}, {whose} of {build}: another "
                  "build uses it")  # fmt: skip
        else:  # a store that refused (read-only): `check` lists the object as unused
            print(f"could not delete {path}, {whose} of {build}")
    if would and not purged:  # a purge run by cron with nothing due stays quiet
        print(_nothing_due(args))
    return 0


def _nothing_due(args):
    """What a dry run with nothing due says: the yanked builds not due yet, and when the
    first is."""
    waits = purging.time_until_due(args.data, args.artifacts, args.slug, args.older_than)
    of = f" of {args.slug}" if args.slug else ""
    if not waits:
        return f"nothing to purge: no yanked build{of} keeps a file"
    days = -(-waits[0] // purging.DAY_MILLIS)  # rounded up: not due before then
    return (
        f"nothing to purge: {counted(len(waits), 'yanked build')}{of} "
        f"keep{'s' if len(waits) == 1 else ''} files, yanked less than "
        f"{counted(args.older_than, 'day')} ago (the first is due in {counted(days, 'day')})"
    )
