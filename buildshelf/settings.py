"""The settings of the server and of the commands, each declared once: its flag, environment
variable, default, converter and help. The argparse options, the lookup in the environment and
the table in docs/running.md are all made from `SETTINGS`.
"""

import argparse
import configparser
import importlib.metadata
import ipaddress
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from buildshelf import state
from buildshelf.kept import artifacts, objects, stores
from buildshelf.model import URL_PATTERN
from buildshelf.web import upstream

# The directory that holds the package: a checkout (with data/ and setup.cfg), or site-packages.
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENVIRONMENT_PREFIX = "BUILDSHELF_"
COMPAT_MODES = (None, upstream.MODE)


def directory(value: str) -> str:
    if not os.path.isdir(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a directory")
    return value


def directory_to_make(value: str) -> str:
    """A directory, or a path where there is none yet, for a command that makes it."""
    if os.path.lexists(value):
        return directory(value)
    return value


def number_in(low: int, high: int) -> Callable[[str], int]:
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


def compat_mode(value: str) -> str | None:
    value = value or None  # BUILDSHELF_COMPAT= (empty) is the default
    if value not in COMPAT_MODES:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a compat mode (the one mode is {upstream.MODE!r})"
        )
    return value


def on_or_off(value: str) -> str:
    if value.strip().lower() not in ("on", "off"):
        raise argparse.ArgumentTypeError(f"{value!r} is neither 'on' nor 'off'")
    return value.strip().lower()


@dataclass(frozen=True)
class Setting:
    """One setting. A flag on the command line wins over its environment variable, which
    wins over the default."""

    name: str  # the argparse dest: --max-age is max_age
    help: str
    default: object = None
    convert: Callable[[str], object] | None = None
    metavar: str | None = None
    shown_default: str | None = None  # the default as the help and the docs say it
    more: str = ""  # said in the docs' table only (Markdown)
    from_environment: bool = True  # False for a switch (--quiet, --check)
    serve_only: bool = True  # False: every command takes it (--data)

    def taken(self, serve: bool) -> bool:
        """Whether a command takes this setting: serving takes all, the others --data only."""
        return serve or not self.serve_only

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def variable(self) -> str | None:
        return ENVIRONMENT_PREFIX + self.name.upper() if self.from_environment else None

    @property
    def default_text(self) -> str:
        if self.shown_default is not None:
            return self.shown_default
        return "off" if self.default is None else str(self.default)

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        if not self.from_environment:
            parser.add_argument(self.flag, action="store_true", help=self.help)
            return
        parser.add_argument(
            self.flag,
            type=self.convert,
            metavar=self.metavar,
            help=f"{self.help} ({self.variable}; default: {self.default_text})",
        )


WEBHOOKS_FILE = "webhooks.json"
# With more clients than threads, 8 cost less CPU a request than 4, and the same as 16
# (docs/performance.md).
DEFAULT_THREADS = 8
DEFAULT_MAX_AGE = 60
DEFAULT_CACHE_MB = 256
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
# The address a server started with no flag names itself (its --public-url unset), which a
# command that links the server without being told its public URL links too.
DEFAULT_PUBLIC_URL = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"
# What X-Accel-Redirect may name: plain segments, nothing nginx would decode or resolve.
_LOCATION_PREFIX = re.compile(r"(/(?!\.\.?(/|$))[A-Za-z0-9._-]+)+/?")


def public_url(value: str) -> str:
    """An absolute http(s) URL, maybe with a path prefix, without a trailing '/'."""
    if not (URL_PATTERN.match(value) and "?" not in value and "#" not in value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an absolute http:// or https:// URL without ?query or #fragment"
        )
    return value.rstrip("/")


def ip_address(value: str) -> str:
    """An IPv4 or IPv6 address, as written."""
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an IP address (such as 127.0.0.1 or ::1)"
        ) from None


def location_prefix(value: str) -> str:
    """A URL path of plain segments, as an nginx location names it, without a trailing '/'."""
    if not _LOCATION_PREFIX.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a path of segments of letters, digits and . _ - (not . or ..), "
            "each after a '/', e.g. /_objects"
        )
    return value.rstrip("/")


SETTINGS = (
    Setting(
        "data",
        "directory of the project files, SLUG.json",
        convert=directory,
        metavar="DIR",
        shown_default="the data/ directory beside the code, in a checkout",
        serve_only=False,
    ),
    Setting(
        "host", "address to listen on; 0.0.0.0 or :: for every interface", DEFAULT_HOST, str, "HOST"
    ),
    Setting("port", "TCP port", DEFAULT_PORT, number_in(1, 65535), "PORT"),
    Setting(
        "public_url",
        "absolute base of the kept files' downloadUrl, path prefix allowed (never taken from "
        "a request's Host)",
        None,
        public_url,
        "URL",
        shown_default="the listener's own address, http://HOST:PORT",
    ),
    Setting(
        "artifacts",
        "the artifact store (the files Buildshelf keeps): a directory, or s3://BUCKET[/PREFIX] "
        "in S3-compatible object storage (the endpoint and credentials: AWS_ENDPOINT_URL, "
        "AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY or a profile)",
        None,
        stores.location,  # a directory is made when the first file is kept
        "DIR",
        shown_default=f"{artifacts.IN_DATA_DIRECTORY}/ inside the data directory",
        more="see [storage.md](storage.md)",
        serve_only=False,
    ),
    Setting(
        "artifacts_downloads",
        "how an s3:// store's files reach clients: 'redirect' (302 to a presigned GET that "
        "lives 5 minutes), 'public' (the builds name --artifacts-public-url's copy) or "
        "'proxy' (Buildshelf sends the bytes)",
        None,
        stores.downloads_mode,
        "MODE",
        shown_default=f"{stores.DEFAULT_DOWNLOADS} for an s3:// store",
        more="see [storage.md](storage.md#downloads)",
    ),
    Setting(
        "artifacts_public_url",
        "with --artifacts-downloads public: the bucket's public (or CDN) URL, to which each "
        "object's key is added",
        None,
        public_url,
        "URL",
        shown_default="none",
    ),
    Setting(
        "state",
        "directory of what is not hand-edited data: token hashes, trusted publishers "
        "(private: mode 0700)",
        None,
        str,  # made when first needed
        "DIR",
        shown_default=f"{state.IN_DATA_DIRECTORY}/ inside the data directory",
        serve_only=False,
    ),
    Setting(
        "webhooks",
        "the file of webhook targets (see docs/webhooks.md; mode 0600: it holds credentials), "
        "read on start and again when it changes",
        None,
        str,  # a missing file is no targets
        "FILE",
        shown_default=f"{WEBHOOKS_FILE} in the state directory",
        more="see [webhooks.md](webhooks.md)",
        serve_only=False,
    ),
    Setting(
        "max_file_mb",
        "the largest upload an HTTP publish takes, in MiB: a larger Content-Length is "
        "answered 413 before its body is read",
        objects.MAX_BYTES_DEFAULT >> 20,
        number_in(1, 1 << 20),
        "MB",
        more="the same default as `publish --max-file-mb`",
    ),
    Setting(
        "github_oidc_issuer",
        "the issuer of the GitHub Actions OIDC tokens that trusted publishing accepts",
        "https://token.actions.githubusercontent.com",
        public_url,
        "URL",
        more="another for GitHub Enterprise Server, or a test's own issuer",
    ),
    Setting(
        "accel_redirect",
        "for nginx in front: answer a kept file's download with its headers and "
        "X-Accel-Redirect: PREFIX/aa/SHA256 instead of its bytes, which nginx sends from the "
        "store; only for a request with X-Buildshelf-Accel: 1, which deploy/nginx.conf sets",
        None,
        location_prefix,
        "PREFIX",
        shown_default="off: Buildshelf sends the bytes",
        more="see [Downloads behind nginx](#downloads-behind-nginx)",
    ),
    Setting(
        "trusted_proxy",
        "the address of the reverse proxy in front (nginx): a request from it comes from the "
        "client its X-Forwarded-For names, as the access log and the limit of failed "
        "authentications see it; from any other peer that header is ignored",
        None,
        ip_address,
        "ADDR",
        shown_default="off: the peer is the client",
    ),
    Setting(
        "count_downloads",
        "'off': count no downloads, and create no counts database; 'on': one per client "
        "network and build a day, kept in the state directory",
        "on",
        on_or_off,
        "{on,off}",
        more="see [downloads.md](downloads.md)",
    ),
    Setting(
        "threads",
        "worker threads",
        DEFAULT_THREADS,
        number_in(1, 256),
        "N",
        more="why 8: see [performance.md](performance.md#threads)",
    ),
    Setting(
        "max_age",
        "seconds clients and proxies may cache a JSON success",
        DEFAULT_MAX_AGE,
        number_in(0, 31536000),
        "S",
    ),
    Setting(
        "cache_mb",
        "MiB of encoded responses kept in memory, least recently used dropped first",
        DEFAULT_CACHE_MB,
        number_in(1, 1 << 20),
        "MB",
        more="it holds JSON, pages and feeds; answers that show the same thing share one entry",
    ),
    Setting(
        "compat",
        "'upstream': serve the upstream Canvas API's build shapes, for its official client",
        None,
        compat_mode,
        "MODE",
        shown_default="the spec's shapes",
        more="see [upstream.md](upstream.md)",
    ),
    Setting(
        "metrics",
        "'off': no /metrics, and nothing tallied for it; 'on': GET /metrics answers the "
        "Prometheus text format (keep it off the public site: deploy/nginx.conf does)",
        "on",
        on_or_off,
        "on|off",
        more="see [metrics.md](metrics.md)",
    ),
    Setting("quiet", "no access log line per request", False, from_environment=False),
    Setting(
        "check",
        "validate every data file, print each problem, exit 0 if all are valid and 1 "
        "otherwise, without serving",
        False,
        from_environment=False,
    ),
)


def setting(name: str) -> Setting:
    """The setting whose argparse dest is `name`."""
    return next(s for s in SETTINGS if s.name == name)


def _settings(makes_data: bool) -> tuple[Setting, ...]:
    """SETTINGS, for a command that makes its data directory (`makes_data`) one whose --data
    and BUILDSHELF_DATA may name a path where there is none yet."""
    if not makes_data:
        return SETTINGS
    return tuple(replace(s, convert=directory_to_make) if s.name == "data" else s for s in SETTINGS)


def options(
    serve: bool, only: tuple[str, ...] | None = None, makes_data: bool = False
) -> argparse.ArgumentParser:
    """A parent parser with the settings a command takes: all of them to serve, else --data
    and the other directories (or those of them named in `only`). An option not given stays
    out of the namespace, so that its variable may apply."""
    parser = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    for setting in _settings(makes_data):
        if setting.taken(serve) and (only is None or setting.name in only):
            setting.add_to(parser)
    if serve:
        parser.add_argument("--version", action=_Version, nargs=0, help="print the version")
    return parser


class _Version(argparse.Action):
    """--version, the version looked up only when asked: the lookup costs 30 ms a start."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"buildshelf {version()}")
        parser.exit()


def version(module_dir: str = HERE) -> str:
    """The version installed, or in a checkout not installed, the one setup.cfg gives."""
    try:
        return importlib.metadata.version("buildshelf")
    except importlib.metadata.PackageNotFoundError:
        config = configparser.ConfigParser()
        config.read(os.path.join(module_dir, "setup.cfg"), encoding="utf-8")
        return config.get("metadata", "version", fallback="(version unknown)")


def default_data_dir(module_dir: str = HERE) -> str | None:
    """data/ beside the code, which a checkout (or an editable install) has and an installed
    copy in site-packages has not; None when it is not there."""
    path = os.path.join(module_dir, "data")
    return path if os.path.isdir(path) else None


def settle(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    environ: dict,
    serve: bool,
    module_dir: str = HERE,
    makes_data: bool = False,
    also: tuple[str, ...] = (),
) -> None:
    """Fill each setting of the command not given as a flag from its variable, then its
    default; a bad value is parser.error() naming the variable. `also` names the serve
    settings a command reads too, from their variables only (webhook test's public URL)."""
    for setting in _settings(makes_data):
        if setting.name in vars(args) or not (setting.taken(serve) or setting.name in also):
            continue
        value = setting.default
        if setting.variable is not None and setting.variable in environ:
            try:
                value = setting.convert(environ[setting.variable])
            except argparse.ArgumentTypeError as error:
                parser.error(f"environment variable {setting.variable}: {error}")
        elif setting.name == "data":
            value = default_data_dir(module_dir)
            if value is None:
                parser.error(
                    f"no data directory: none given and no data/ beside {module_dir} (an "
                    "installed copy has none): pass --data DIR or set BUILDSHELF_DATA"
                )
        setattr(args, setting.name, value)
    if getattr(args, "artifacts", False) is None:
        args.artifacts = artifacts.default_store(args.data)
    _check_store(parser, args)
    if getattr(args, "state", False) is None:
        args.state = state.default_state(args.data)
    if getattr(args, "webhooks", False) is None:
        args.webhooks = os.path.join(args.state, WEBHOOKS_FILE)


def _check_store(parser, args):
    """A store that cannot work as set ends the command in one line, before it does anything."""
    if not hasattr(args, "artifacts"):
        return
    if problem := stores.missing_client(args.artifacts):
        parser.exit(1, f"{parser.prog}: {problem}\n")
    if hasattr(args, "artifacts_downloads"):
        given = args.artifacts_downloads, args.artifacts_public_url
        if problem := stores.downloads_problem(args.artifacts, *given):
            parser.error(problem)


def docs_table() -> str:
    """The Markdown table of the settings, as docs/running.md has it."""
    rows = ["| flag | environment | default | what it does |", "|---|---|---|---|"]
    for setting in SETTINGS:
        flag = f"`{setting.flag} {setting.metavar}`" if setting.metavar else f"`{setting.flag}`"
        variable = f"`{setting.variable}`" if setting.variable else ""
        default = f"`{setting.default_text}`" if setting.from_environment else ""
        more = f"; {setting.more}" if setting.more else ""
        # A '|' ends a table's cell even in backquotes (on|off): escaped, it is shown.
        flag = flag.replace("|", "\\|")
        rows.append(f"| {flag} | {variable} | {default} | {setting.help}{more} |")
    return "\n".join(rows) + "\n"
