"""`buildshelf import-jenkins`: a Jenkins job's successful builds that a project lacks added
(remote_api.py reads the job, mirror.py keeps their artifacts with --mirror); its arguments
and what it prints.
"""

import argparse
import ipaddress
import re
from urllib.parse import urlsplit

from buildshelf import publish_files
from buildshelf.jenkins import mirror, remote_api
from buildshelf.kept import kept_files
from buildshelf.model import MAX_PUBLISHED_EXTRAS
from buildshelf.text import counted
from buildshelf.writing import writer

# --- values ------------------------------------------------------------------------------------


def _seconds(value):
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0
    if not 0 < seconds <= 3600:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds from 0 to 3600")
    return seconds


HOST_NAME = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?")


def _host(value):
    """A host name or address as URLs give it (lower case, an IPv6 address unbracketed)."""
    host = value.lower().removeprefix("[").removesuffix("]")
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        if HOST_NAME.fullmatch(host):
            return host
    raise argparse.ArgumentTypeError(f"{value!r} is not a host name or address (no scheme or port)")


def _regex(value):
    try:
        return re.compile(value)
    except re.error as error:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a regular expression: {error}"
        ) from None


# --- the parser --------------------------------------------------------------------------------


def import_jenkins_parser(commands):
    sub = commands.add(
        "import-jenkins",
        import_jenkins,
        "add a Jenkins job's successful builds that the project lacks (a second run adds nothing)",
    )
    sub.set_defaults(usage_problem=_usage_problem)
    sub.add_argument("slug", metavar="SLUG")
    source = sub.add_mutually_exclusive_group(required=True)
    source.add_argument("--job-json", metavar="FILE", help="the job's remote API JSON, saved")
    source.add_argument(
        "--job-url",
        metavar="URL",
        help="the job's address (https://ci.example.org/job/NAME/); its api/json is fetched",
    )
    sub.add_argument(
        "--artifact",
        type=_regex,
        metavar="REGEX",
        help="the artifact whose "
        f"relativePath this matches (default: {remote_api.DEFAULT_ARTIFACT_RULE})",
    )
    sub.add_argument(
        "--extra-artifact",
        type=publish_files.keyed("REGEX", _regex),
        action="append",
        default=[],
        metavar="KEY=REGEX",
        help="an extra file of each build, under its key (kind:variant, such as "
        "server:mojmap): the first artifact whose relativePath this matches, picked before "
        "--artifact's; kept with --mirror, else linked; repeat for more",
    )
    sub.add_argument(
        "--experimental-pattern",
        type=_regex,
        metavar="REGEX",
        help="a build is experimental when this matches its display name "
        "(default: the display name ends in '(...)')",
    )
    _import_jenkins_fetch_arguments(sub)
    sub.add_argument(
        "--verbose",
        action="store_true",
        help="also list the builds skipped (unfinished, unsuccessful, not matching) and why, "
        "and the counts; without it, a run that adds nothing and fails nothing prints nothing",
    )
    sub.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would be added (and downloaded) and skipped, and why; write nothing",
    )


def _import_jenkins_fetch_arguments(sub):
    """import-jenkins's arguments of fetching: from Jenkins, and the artifacts --mirror keeps."""
    sub.add_argument(
        "--timeout",
        type=_seconds,
        default=30.0,
        metavar="S",
        help="seconds Jenkins may take for an answer's status line and headers, and stay "
        "silent in its body, which must also come at 1 MiB each S at least (default: 30)",
    )
    sub.add_argument(
        "--mirror",
        action="store_true",
        help="download each build added into the artifact store (see --artifacts), so that "
        "it outlives Jenkins' retention; a build whose download fails is not added (failed)",
    )
    sub.add_argument(
        "--allow-host",
        type=_host,
        action="append",
        default=[],
        metavar="HOST",
        help="a host that a redirect may lead to although its address is internal (loopback, "
        "private, link-local...); repeat for more (the job URL's and the artifacts' own hosts "
        "need none)",
    )
    kept_files.max_file_mb(sub, "artifact --mirror keeps")


def _usage_problem(args):
    keys = [key for key, _ in args.extra_artifact]
    if twice := next((key for key in keys if keys.count(key) > 1), None):
        return f"--extra-artifact {twice} is given twice: give each key once"
    if len(keys) > MAX_PUBLISHED_EXTRAS:
        return f"{len(keys)} --extra-artifact: a build takes {MAX_PUBLISHED_EXTRAS} at most"
    return None


# --- the command -------------------------------------------------------------------------------


def _job_host(job_url):
    """The job URL's host, if there is one: a redirect may lead there whatever its address."""
    host = urlsplit(job_url).hostname if job_url else None
    return [host] if host else []


def import_jenkins(args):
    if args.job_json is not None:
        data, source = remote_api.read_job_file(args.job_json), args.job_json
    else:  # fetched before the lock is taken: other writers need not wait for Jenkins
        data, source = (
            remote_api.fetch_job(args.job_url, args.timeout, args.allow_host),
            remote_api.api_url(args.job_url),
        )
    builds = remote_api.parse_job(data, source)

    def select(doc):
        return remote_api.select(
            builds, doc, args.slug, args.artifact, args.experimental_pattern, args.extra_artifact
        )

    if args.mirror:
        selection = mirror.add_builds(
            args.data,
            args.slug,
            select,
            args.artifacts,
            args.max_file_mb << 20,
            args.timeout,
            dry_run=args.dry_run,
            report=kept_files.deleted,
            # Jenkins may send its artifacts' downloads to its own host: any port, any address.
            allowed_hosts=[*args.allow_host, *_job_host(args.job_url)],
        )
    else:
        selection = writer.add_builds(args.data, args.slug, select, dry_run=args.dry_run)
    added, failed, skipped, present = selection
    # cron mails what a job prints: a run that finds nothing new prints nothing.
    verbose = args.verbose or args.dry_run
    add, fail, skip = ("would add", "would fail", "would skip") if args.dry_run else (
        "added", "failed", "skipped")  # fmt: skip
    for build in added:
        print(
            f"{add} build {build['buildNumber']}: channel {build['channelVersion']}"
            + (", experimental" if build["isExperimental"] else "")
            + (
                f", kept as {build['file']} ({counted(build['size'], 'byte')})"
                if "file" in build
                else ""
            )
            + (f", downloading {build['downloadUrl']}" if args.mirror and args.dry_run else "")
            + "".join(
                _extra_file(key, file, args.mirror and args.dry_run)
                for key, file in build.get("downloads", {}).items()
            )
        )
    for which, reason in failed:
        print(f"{fail} {which}: {reason}")
    if verbose:
        for which, reason in skipped:
            print(f"{skip} {which}: {reason}")
        print(
            f"{args.slug}: {add} {len(added)}, {fail} {len(failed)}, {skip} {len(skipped)}, "
            f"{present} already there"
        )
    elif skipped and not (added or failed or present):
        print(f"{args.slug}: none of the job's builds is for it: --verbose says why of each")
    return 0


def _extra_file(key, file, downloading):
    """What an added line says of an extra file: its key, and as what it is kept, or from
    where it would be downloaded."""
    if "file" in file:
        return f", {key} kept as {file['file']} ({counted(file['size'], 'byte')})"
    return f", {key}" + (f" downloading {file['downloadUrl']}" if downloading else "")
