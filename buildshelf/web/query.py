"""What a request asks for: its query string parsed and checked, and the project, filters
and build it names; whether its Accept header prefers a page to JSON (`prefers_html`). Every
refusal is an `ApiError`, which the app answers as JSON.

The JSON routes (server.py) and the pages and feed (pages.py) read their parameters here, so
that both refuse and accept the same queries.
"""

import calendar
from operator import attrgetter
from urllib.parse import unquote_to_bytes

import bottle
import msgspec

from buildshelf import javadoc
from buildshelf.model import PRIMARY_KEY, Build, Project, sha256_hex, whole_number

API = "/api/v2"
FILL_API = "/v3"  # the Fill v3 API (web/fill.py), whose errors are in Fill's shape
BUILD_PARAMETERS = ("project", "channel", "experimental")
JAVADOC_PARAMETERS = BUILD_PARAMETERS + ("redirect",)
CHECK_PARAMETERS = BUILD_PARAMETERS + ("build", "sha256")
DOWNLOADS_PARAMETERS = BUILD_PARAMETERS + ("date",)
LATEST_PARAMETERS = BUILD_PARAMETERS + ("download",)  # /downloads/latest
STATS_PARAMETERS = BUILD_PARAMETERS + ("days",)
# /downloads/stats: the days of its daily series, as the upstream bounds them.
STATS_DAYS = range(7, 731)
DEFAULT_STATS_DAYS = 90
SUPERSEDED_PARAMETERS = ("game_version", "version", "minecraft_version")
MAX_QUERY_FIELDS = 50
MAX_MEDIA_RANGES = 64  # of an Accept header: browsers send about ten; the rest is not read


class ApiError(bottle.HTTPError):
    """An error response: `code` is the machine-readable snake_case name of the problem.
    `headers` ({name: value}) go out with it (Retry-After, WWW-Authenticate): bottle's own
    `error.headers`, which the server reads too for a request refused before its body.
    `fields` ({key: value}) are more of its JSON body."""

    def __init__(self, status, code, message, headers=None, fields=None):
        super().__init__(status, message, **(headers or {}))
        self.code = code
        self.fields = fields or {}  # more of the body, after "error" and "code"


def in_fill_api(path: str) -> bool:
    """Whether `path` is under FILL_API, where every answer is in Fill's shapes."""
    return path == FILL_API or path.startswith(FILL_API + "/")


def prefers_html(accept: str | None) -> bool:
    """Whether an Accept header ranks text/html above application/json, as a browser's
    navigation does (`text/html,...,*/*;q=0.8`). A missing or empty header, curl's and wget's
    `*/*`, a tie, or an unreadable header: no, the API's JSON (RFC 9110, 12.5.1)."""
    parts = (accept or "").split(",", MAX_MEDIA_RANGES)[:MAX_MEDIA_RANGES]
    ranges = [_media_range(part) for part in parts]
    return _quality(ranges, "text", "html") > _quality(ranges, "application", "json")


def _media_range(text):
    """(type, subtype, q) of one media range of an Accept header; q 0 when unreadable."""
    media, *parameters = text.split(";")
    kind, slash, subtype = media.strip().lower().partition("/")
    quality = 1.0
    for parameter in parameters:
        name, _, value = parameter.strip().partition("=")
        if name.strip().lower() == "q":
            try:
                quality = float(value.strip())
            except ValueError:
                quality = 0.0
    readable = slash and kind and subtype and 0 <= quality <= 1
    return (kind, subtype, quality) if readable else ("", "", 0.0)


def _quality(ranges, kind, subtype):
    """The q of `kind/subtype` by the most specific range naming it (type/subtype, then
    type/*, then */*); 0 when none does."""
    best = {}
    for range_kind, range_subtype, quality in ranges:
        if range_kind == kind and range_subtype == subtype:
            rank = 2
        elif range_kind == kind and range_subtype == "*":
            rank = 1
        elif (range_kind, range_subtype) == ("*", "*"):
            rank = 0
        else:
            continue
        best[rank] = max(best.get(rank, 0.0), quality)
    return best[max(best)] if best else 0.0


def shown(text, limit=100):
    """A client's value quoted for an error message, cut so a message stays readable."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _decode(field):
    # '+' stays a plus sign: no value here holds a space, and real clients send the '+' of a
    # channel such as 1.0.0+71 unencoded.
    return unquote_to_bytes(field).decode()


def parse() -> list[tuple[str, str]]:
    """The query as (name, value) pairs, refusing bytes and characters no client means."""
    # WSGI hands over the raw bytes as latin-1; percent-decode those bytes, then read UTF-8.
    fields = [f for f in bottle.request.query_string.encode("latin-1").split(b"&") if f]
    if len(fields) > MAX_QUERY_FIELDS:
        raise ApiError(
            400, "invalid_query", f"too many query parameters (at most {MAX_QUERY_FIELDS})"
        )
    try:
        pairs = [
            (_decode(name), _decode(value))
            for name, _, value in (f.partition(b"=") for f in fields)
        ]
    except UnicodeError:
        raise ApiError(
            400, "invalid_query", "the query string is not valid UTF-8 once percent-decoded"
        ) from None
    for name, value in pairs:
        if not (name + value).isprintable():
            raise ApiError(
                400,
                "invalid_query",
                f"parameter {shown(name)} holds a control or "
                "invisible character (such as NUL, CR, LF or a zero-width space)",
            )
    return pairs


def build_query(once: tuple[str, ...] = BUILD_PARAMETERS) -> dict[str, str]:
    """The parameters of a builds request as {name: value}; those in `once` given once."""
    params = {}
    for name, value in parse():
        if name in SUPERSEDED_PARAMETERS:
            raise ApiError(
                400,
                "superseded_parameter",
                f"parameter {name!r} was replaced: use 'channel' instead",
            )
        if name in params and name in once:
            raise ApiError(
                400,
                "repeated_parameter",
                f"parameter {name!r} is given more than once: give it once",
            )
        params.setdefault(name, value)
    return params


def required(params, name):
    value = params.get(name, "")
    if not value:
        raise ApiError(
            400,
            "missing_parameter",
            f"the query parameter {name!r} is required, "
            f"e.g. ?{name}=... (see {API}/projects for the projects)",
        )
    return value


def download_url(served: dict) -> tuple:
    """What /download?url=[&project=] names: the (project, build) of `served[url]`, where
    `served` maps each downloadUrl served to {project slug: (project, build)}; the project's
    when `project` is given (the pages' buttons give it: builds of two projects may share a
    URL), else the first by slug. A URL not served (by that project) is refused
    (invalid_download_url), never followed."""
    params = build_query(("url", "project"))
    url = required(params, "url")
    slug = params.get("project", "")
    by_project = served.get(url, {})
    if slug:  # as Snapshot.project finds it: any letter case, and no non-ASCII lowered
        found = by_project.get(slug.lower()) if slug.isascii() else None
    else:
        found = next(iter(by_project.values()), None)
    if found is None:
        of = f" of project {shown(slug)!r}" if slug else ""
        raise ApiError(
            400,
            "invalid_download_url",
            f"{shown(url)} is not the downloadUrl of a build{of} served here: see {API}/builds",
        )
    return found


def flag(params, name):
    """True only for the value 'true' in any letter case: anything else means false."""
    return params.get(name, "").lower() == "true"


def filters(params: dict[str, str]) -> tuple[str | None, bool]:
    """The channel (None for all) and the experimental flag a request names."""
    return params.get("channel") or None, flag(params, "experimental")


def build_filter(snapshot, params: dict[str, str]) -> tuple[Project, str | None, bool]:
    """The project, channel (None for all) and experimental flag a builds request names."""
    slug = required(params, "project")
    project = snapshot.project(slug)
    if project is None:
        raise ApiError(
            404,
            "unknown_project",
            f"no project {shown(slug)}: see {API}/projects for the projects served",
        )
    return project, *filters(params)


def latest(snapshot, params: dict[str, str]) -> tuple[Project, str | None, bool, Build]:
    """The project, filters and latest build a request names; 404 when no build passes."""
    project, channel, experimental = build_filter(snapshot, params)
    build = project.latest(channel, experimental)
    if build is None:
        which = "build" if experimental else "stable build"
        where = f" in channel {shown(channel)}" if channel else ""
        hint = "" if experimental else " (add experimental=true to include experimental builds)"
        raise ApiError(
            404, "no_matching_build", f"project {project.slug!r} has no {which}{where}{hint}"
        )
    return project, channel, experimental, build


def asked_file(project: Project, build: Build, params: dict[str, str]):
    """The file of `build` the parameter `download` names by its key (the primary, the
    build itself, when none or empty); 404 unknown_download naming the keys there are."""
    key = params.get("download") or PRIMARY_KEY
    file = dict(build.files).get(key)
    if file is None:
        raise ApiError(
            404,
            "unknown_download",
            f"build {build.number} of {project.slug!r} has no file {shown(key)}: its files "
            f"are {', '.join(key for key, _ in build.files)}",
        )
    return file


def asked_build(params: dict[str, str]) -> tuple[str, int | str]:
    """What an update check names: ("build", its number) or ("sha256", a file's hash)."""
    given = [name for name in ("build", "sha256") if params.get(name)]
    if len(given) != 1:
        raise ApiError(
            400,
            "invalid_check",
            "give either 'build' (the build number you run) or 'sha256' (your file's hash), once",
        )
    value = params[given[0]]
    if given == ["build"]:
        if (number := whole_number(value)) is None:
            raise ApiError(400, "invalid_check", f"'build' {shown(value)} is not a whole number")
        return "build", number
    if (digest := sha256_hex(value)) is None:
        raise ApiError(
            400, "invalid_check", f"'sha256' {shown(value)} is not 64 hexadecimal digits"
        )
    return "sha256", digest


def checked(
    project: Project, asked: tuple[str, int | str], latest: Build
) -> tuple[str, int, str | None]:
    """What an update check names, as (status, number, the yank's reason): "served" and the
    number of the highest build served with the same bytes (several builds may share one
    file), "yanked" and the same (or its own number, when no build served has its bytes)
    with the reason of the highest yanked build named ("" for none), or "ahead" for a number
    above `latest` that no build has; the reason None but for "yanked". ApiError 404 (with
    "status": "unknown") for a number or a hash never there."""
    kind, value = asked
    if kind == "build":
        found = project.build(value) or project.yanked_build(value)
        if found is None and value > latest.number:
            return "ahead", value, None
        named = [found] if found is not None else []
    else:  # any file's hash counts, kept or not: a build's primary's, or an extra's
        named = [b for b in (*project.builds, *project.yanked) if value in _hashes(b)]
    if not named:
        raise ApiError(
            404,
            "unknown_build" if kind == "build" else "unknown_artifact",
            f"project {project.slug!r} never had build {value}"
            if kind == "build"
            else f"no build of project {project.slug!r} has the sha256 {value}",
            fields={"status": "unknown"},
        )
    # The bytes asked about: a build's primary file's, or the file whose hash was given.
    sha256s = {value} if kind == "sha256" else {b.sha256 for b in named} - {msgspec.UNSET}
    same = [b.number for b in project.builds if b in named or b.sha256 in sha256s]
    number = max(same, default=max(b.number for b in named))
    if any(not b.yanked for b in named):
        return "served", number, None
    return "yanked", number, max(named, key=attrgetter("number")).yank_reason


def _hashes(build: Build) -> tuple | set:
    """The sha256s of `build`'s files, its primary's and its extras' (UNSET for a file
    without one)."""
    if build.downloads is msgspec.UNSET:  # nearly every build: no set made
        return (build.sha256,)
    return {file.sha256 for _, file in build.files}


def javadoc_base(project: Project) -> str:
    """The project's javadocBaseUrl; 404 for a project without javadoc."""
    if not project.javadoc_base_url:
        raise ApiError(
            404,
            "no_javadoc",
            f"project {project.slug!r} has no javadoc (its data file gives no javadocBaseUrl)",
        )
    return project.javadoc_base_url


def javadoc_page(params: dict[str, str]) -> str | None:
    """The page `redirect` names, checked; None without one (the channel's root)."""
    page = params.get("redirect", "")
    problem = javadoc.page_problem(page) if page else None
    if problem is not None:
        raise ApiError(
            400,
            "invalid_redirect",
            f"parameter 'redirect' {problem}: give a page "
            f"path relative to the javadoc root, e.g. {javadoc.EXAMPLE}",
        )
    return page or None


def counts_of(counter):
    """What `counter` has counted (its `tally()`); 404 when downloads are not counted
    (`--count-downloads off`: None)."""
    if counter is None:
        raise ApiError(
            404,
            "downloads_not_counted",
            "this server does not count downloads (it runs with --count-downloads off)",
        )
    return counter.tally()


def counted_day(params: dict[str, str]) -> str | None:
    """The UTC day `date` names as DDMMYY (the upstream's form, years 2000 to 2099), as
    'YYYY-MM-DD'; None without one."""
    text = params.get("date", "")
    if not text:
        return None
    if len(text) == 6 and (whole_number(text) is not None):
        day, month, year = int(text[:2]), int(text[2:4]), 2000 + int(text[4:])
        if 1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1]:
            return f"{year:04d}-{month:02d}-{day:02d}"
    raise ApiError(
        400,
        "invalid_date",
        f"parameter 'date' {shown(text)} is not a day written DDMMYY (UTC), e.g. 260426 "
        "for 26 April 2026",
    )


def stats_days(params: dict[str, str]) -> int:
    """How many days the daily series covers: `days`, a whole number, brought into
    STATS_DAYS; DEFAULT_STATS_DAYS without one."""
    text = params.get("days", "")
    if not text:
        return DEFAULT_STATS_DAYS
    days = whole_number(text)
    if days is None:
        raise ApiError(
            400,
            "invalid_days",
            f"parameter 'days' {shown(text)} is not a whole number (it is brought into "
            f"{STATS_DAYS.start}..{STATS_DAYS.stop - 1})",
        )
    return min(max(days, STATS_DAYS.start), STATS_DAYS.stop - 1)


def counted_projects(snapshot, params: dict[str, str]) -> tuple[Project, ...]:
    """The projects a /downloads request names: `project`'s (404 when unknown), or every
    project served when it names none (or an empty one)."""
    if not params.get("project"):
        return tuple(snapshot.projects.values())
    return (build_filter(snapshot, params)[0],)
