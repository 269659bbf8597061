"""The `buildshelf` command line: serve the API, check the data files, and the commands that
write them (add-project, publish, yank, import-jenkins). All argument parsing lives here.

`buildshelf [flags]` with no command serves, as `python server.py [flags]` does. Exit status:
0 done, 1 refused (one line on stderr saying why), 2 bad usage (argparse's own).
"""

import argparse
import logging
import os
import re
import socket
import subprocess
import sys
import time

import jenkins
import server
import serving
import store as store_module
import upstream
import writer

log = logging.getLogger(__name__)

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DATA = os.path.join(HERE, "data")
GIT_TIMEOUT = 60
ABSENT = argparse.SUPPRESS  # an option not given stays out of the namespace: its variable may apply


# --- values ------------------------------------------------------------------------------------


def _directory(value):
    if not os.path.isdir(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a directory")
    return value


def _number_in(low, high):
    def number(value):
        try:
            n = int(value)
        except ValueError:
            n = None
        if n is None or not low <= n <= high:
            raise argparse.ArgumentTypeError(
                f"{value!r} is not a whole number from {low} to {high}"
            )
        return n

    return number


def _integer(value, pattern=re.compile(r"-?[0-9]{1,30}\Z")):
    if not pattern.match(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number")
    return int(value)


def _build_number(value):
    if not value.isascii() or not value.isdigit() or len(value) > 30:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a build number (a whole number, 0 or more)"
        )
    return int(value)


def _seconds(value):
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0
    if not 0 < seconds <= 3600:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds from 0 to 3600")
    return seconds


def _regex(value):
    try:
        return re.compile(value)
    except re.error as error:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a regular expression: {error}"
        ) from None


def _compat_mode(value):
    value = value or None  # BUILDSHELF_COMPAT= (empty) is the default
    if value not in server.COMPAT_MODES:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a compat mode (the one mode is {upstream.MODE!r})"
        )
    return value


# Measured (README "Performance"): with more clients than threads, 8 cost less CPU a request
# than 4, the same at 1 and 16 clients.
DEFAULT_THREADS = 8


# (option's dest, environment variable, type, default): a flag wins over its variable.
SETTINGS = [
    ("data", "BUILDSHELF_DATA", _directory, None),
    ("host", "BUILDSHELF_HOST", str, "127.0.0.1"),
    ("port", "BUILDSHELF_PORT", _number_in(1, 65535), 8080),
    ("threads", "BUILDSHELF_THREADS", _number_in(1, 256), DEFAULT_THREADS),
    ("max_age", "BUILDSHELF_MAX_AGE", _number_in(0, 31536000), server.DEFAULT_MAX_AGE),
    ("cache_mb", "BUILDSHELF_CACHE_MB", _number_in(1, 1 << 20), server.DEFAULT_CACHE_MB),
    ("compat", "BUILDSHELF_COMPAT", _compat_mode, None),
]
SERVE_ONLY = ("host", "port", "threads", "max_age", "cache_mb", "compat", "quiet", "check")


def default_data_dir(module_dir=HERE):
    """data/ beside the code, which a checkout (or an editable install) has and an installed
    copy in site-packages has not; None when it is not there."""
    path = os.path.join(module_dir, "data")
    return path if os.path.isdir(path) else None


def _settle(parser, args, environ, module_dir=HERE):
    """Fill each setting not given as a flag from its variable, then its default."""
    for dest, variable, convert, default in SETTINGS:
        if dest != "data" and args.func is not serve:
            continue
        if dest in vars(args):
            continue
        if variable in environ:
            try:
                default = convert(environ[variable])
            except argparse.ArgumentTypeError as error:
                parser.error(f"environment variable {variable}: {error}")
        elif dest == "data":
            default = default_data_dir(module_dir)
            if default is None:
                parser.error(
                    f"no data directory: none given and no data/ beside "
                    f"{module_dir} (an installed copy has none): pass --data DIR or "
                    "set BUILDSHELF_DATA"
                )
        setattr(args, dest, default)
    args.quiet, args.check = getattr(args, "quiet", False), getattr(args, "check", False)


# --- the parser ----------------------------------------------------------------------------------

DATA_HELP = (
    "directory of <slug>.json files (BUILDSHELF_DATA; default: the data/ directory "
    "beside the code, in a checkout)"
)


def _data_option():
    options = argparse.ArgumentParser(add_help=False, argument_default=ABSENT)
    options.add_argument("--data", type=_directory, metavar="DIR", help=DATA_HELP)
    return options


def _serve_options():
    options = _data_option()
    options.add_argument(
        "--host", help="address to listen on (BUILDSHELF_HOST; default: 127.0.0.1)"
    )
    options.add_argument(
        "--port", type=_number_in(1, 65535), help="TCP port (BUILDSHELF_PORT; default: 8080)"
    )
    options.add_argument(
        "--threads",
        type=_number_in(1, 256),
        metavar="N",
        help=f"worker threads (BUILDSHELF_THREADS; default: {DEFAULT_THREADS})",
    )
    options.add_argument(
        "--max-age",
        type=_number_in(0, 31536000),
        metavar="S",
        help="seconds clients and proxies may cache a JSON success "
        f"(BUILDSHELF_MAX_AGE; default: {server.DEFAULT_MAX_AGE})",
    )
    options.add_argument(
        "--cache-mb",
        type=_number_in(1, 1 << 20),
        metavar="MB",
        help="MiB of encoded responses kept in memory, least recently used "
        "dropped first (BUILDSHELF_CACHE_MB; default: "
        f"{server.DEFAULT_CACHE_MB})",
    )
    options.add_argument(
        "--compat",
        type=_compat_mode,
        metavar="MODE",
        help="'upstream': serve the upstream Canvas API's build shapes, for "
        "its official client (BUILDSHELF_COMPAT; default: the spec's shapes)",
    )
    options.add_argument("--quiet", action="store_true", help="no access log line per request")
    options.add_argument(
        "--check",
        action="store_true",
        help="validate every data file, print each problem, exit 0 if all are "
        "valid and 1 otherwise, without serving",
    )
    return options


def make_parser():
    serve_options, data_option = _serve_options(), _data_option()
    parser = argparse.ArgumentParser(
        prog="buildshelf",
        parents=[serve_options],
        description="Serve the build-distribution API (v2) over the JSON files of a data "
        "directory, reloading them when they change (the default command, with the flags "
        "below), or change those files safely.",
        epilog="Each serve flag's default may also come from the environment variable named "
        "in its help; a flag on the command line wins. Exit status: 0 done, 1 refused (the "
        "message says why), 2 bad usage. 'buildshelf COMMAND --help' explains a command.",
    )
    parser.set_defaults(func=serve, command=None)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    def command(name, func, help, parents=(data_option,)):
        sub = commands.add_parser(name, parents=list(parents), help=help, description=help)
        sub.set_defaults(func=func, command=name)
        return sub

    command("serve", serve, "serve the API (the same as no command)", [serve_options])
    command(
        "check",
        check,
        "validate every data file, print each problem, exit 0 if all are valid and 1 otherwise",
    )

    sub = command("add-project", add_project, "add a project with no builds")
    sub.add_argument("slug", metavar="SLUG", help="the project's slug: its file is SLUG.json")
    sub.add_argument("--ci-job", required=True, metavar="NAME", help="the CI job's name")
    sub.add_argument("--ci-job-url", required=True, metavar="URL", help="the CI job's address")
    sub.add_argument(
        "--javadoc-base-url",
        required=True,
        metavar="URL",
        help="base address of the project's javadoc pages",
    )

    sub = command(
        "publish", publish, "add a build to a project (a retry of the same build changes nothing)"
    )
    sub.add_argument("slug", metavar="SLUG")
    sub.add_argument(
        "--build", required=True, type=_build_number, metavar="N", help="the build number"
    )
    sub.add_argument("--channel", required=True, metavar="VERSION", help="its channel version")
    sub.add_argument("--download-url", required=True, metavar="URL", help="address of its artifact")
    sub.add_argument(
        "--url", metavar="URL", help="address of its job run (default: the project's ciJobUrl + N/)"
    )
    sub.add_argument("--experimental", action="store_true", help="mark it experimental")
    sub.add_argument(
        "--timestamp",
        type=_integer,
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

    sub = command("yank", yank, "remove a build (its number may be published again)")
    sub.add_argument("slug", metavar="SLUG")
    sub.add_argument("number", type=_build_number, metavar="N", help="the build number")

    sub = command(
        "import-jenkins",
        import_jenkins,
        "add a Jenkins job's successful builds that the project lacks (a second run adds nothing)",
    )
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
        f"relativePath this matches (default: {jenkins.DEFAULT_ARTIFACT_RULE})",
    )
    sub.add_argument(
        "--experimental-pattern",
        type=_regex,
        metavar="REGEX",
        help="a build is experimental when this matches its display name "
        "(default: the display name ends in '(...)')",
    )
    sub.add_argument(
        "--timeout",
        type=_seconds,
        default=30.0,
        metavar="S",
        help="seconds to wait for Jenkins (default: 30)",
    )
    sub.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would be added and skipped, and why; write nothing",
    )
    return parser


def parse_args(argv=None, environ=os.environ):
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.func is not serve:
        given = [name for name in SERVE_ONLY if name in vars(args)]
        if given:
            parser.error(
                f"--{given[0].replace('_', '-')} is a serve flag: it does not go "
                f"with '{args.command}'"
            )
    _settle(parser, args, environ)
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        return args.func(args)
    except (writer.Refused, jenkins.JenkinsError) as refused:
        print(f"buildshelf {args.command}: {refused}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"buildshelf {args.command}: interrupted", file=sys.stderr)
        return 130


# --- serve and check ---------------------------------------------------------------------------


def _log_to_stderr():
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def base_url(host, port):
    """http://host:port, with an IPv6 address in brackets as URLs need."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def check(args):
    _log_to_stderr()
    problems = store_module.check_directory(args.data)
    for problem in problems:
        print(problem)
    log.info("checked %s: %d problem(s)", args.data, len(problems))
    return 1 if problems else 0


def serve(args):
    if args.check:
        return check(args)
    _log_to_stderr()
    try:
        socket.getaddrinfo(args.host, args.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError, ValueError) as error:
        log.error(
            "cannot listen on %s: it is not an address or a known host name (%s)",
            args.host,
            getattr(error, "strerror", None) or error,
        )
        return 1
    data = store_module.Store(args.data)
    data.start()
    app = server.make_app(data, max_age=args.max_age, cache_mb=args.cache_mb, compat=args.compat)

    def listening(waitress_server):
        log.info(
            "serving %d projects from %s on %s%s/projects",
            len(data.snapshot().projects),
            os.path.abspath(args.data),
            base_url(waitress_server.effective_host, waitress_server.effective_port),
            server.API,
        )

    access_log = None if args.quiet else serving.LineWriter(to_line=serving.access_line)
    try:
        serving.serve(
            app,
            args.host,
            args.port,
            args.threads,
            on_listening=listening,
            access_log=access_log,
            recall=app.recall,
        )
    except (OSError, ValueError) as error:  # the address is taken, or not ours to listen on
        log.error(
            "cannot listen on %s port %d: %s",
            args.host,
            args.port,
            getattr(error, "strerror", None) or error,
        )
        return 1
    finally:
        data.stop()
        if access_log:
            access_log.close()
    log.info("stopped")
    return 0


# --- the commands that write -------------------------------------------------------------------


def add_project(args):
    created = writer.add_project(
        args.data, args.slug, args.ci_job, args.ci_job_url, args.javadoc_base_url
    )
    print(
        f"added project {args.slug} ({writer.project_path(args.data, args.slug)})"
        if created
        else f"project {args.slug} is already there as given: nothing changed"
    )
    return 0


def git_commits(revision_range):
    """The commits of `git log RANGE` in the current directory, newest first."""
    if revision_range.startswith("-"):
        raise writer.Refused(f"--git {revision_range!r} is not a revision range (such as A..B)")
    try:
        done = subprocess.run(
            ["git", "log", "--no-color", "--format=%H %s", revision_range, "--"],
            capture_output=True,
            timeout=GIT_TIMEOUT,
        )
    except FileNotFoundError:
        raise writer.Refused("--git needs the git command, which is not installed") from None
    except subprocess.TimeoutExpired:
        raise writer.Refused(f"git log {revision_range} took over {GIT_TIMEOUT} s") from None
    if done.returncode:
        reason = done.stderr.decode(errors="replace").strip().splitlines() or ["no reason"]
        raise writer.Refused(f"git log {revision_range} failed: {reason[0]}")
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
    build = {
        "buildNumber": args.build,
        "url": args.url,
        "downloadUrl": args.download_url,
        "channelVersion": args.channel,
        "timestamp": time.time_ns() // 1_000_000 if args.timestamp is None else args.timestamp,
        "isExperimental": args.experimental,
        "commits": commits,
    }
    outcome = writer.publish(
        args.data, args.slug, build, replace=args.replace, any_timestamp=args.timestamp is None
    )
    print(
        {
            "added": f"published build {args.build} of {args.slug}",
            "replaced": f"replaced build {args.build} of {args.slug}",
            "unchanged": f"build {args.build} of {args.slug} is already there as given: "
            "nothing changed",
        }[outcome]
    )
    return 0


def yank(args):
    writer.yank(args.data, args.slug, args.number)
    print(f"yanked build {args.number} of {args.slug}")
    return 0


def import_jenkins(args):
    if args.job_json is not None:
        data, source = jenkins.read_job_file(args.job_json), args.job_json
    else:  # fetched before the lock is taken: other writers need not wait for Jenkins
        data, source = (
            jenkins.fetch_job(args.job_url, args.timeout),
            jenkins.api_url(args.job_url),
        )
    builds = jenkins.parse_job(data, source)
    selections = []

    def new_builds(doc):
        selections.append(
            jenkins.select(builds, doc, args.slug, args.artifact, args.experimental_pattern)
        )
        return selections[-1].added

    writer.add_builds(args.data, args.slug, new_builds, dry_run=args.dry_run)
    added, skipped, present = selections[-1]
    add, skip = ("would add", "would skip") if args.dry_run else ("added", "skipped")
    for build in added:
        print(
            f"{add} build {build['buildNumber']}: channel {build['channelVersion']}"
            + (", experimental" if build["isExperimental"] else "")
        )
    for which, reason in skipped:
        print(f"{skip} {which}: {reason}")
    print(f"{args.slug}: {add} {len(added)}, {skip} {len(skipped)}, {present} already there")
    return 0


if __name__ == "__main__":
    sys.exit(main())
