"""What a yank, an unyank and a purge over HTTP ask and what they answer, besides the
writer's work (web/publish.py's routes): the build number of their URLs; a yank's reason,
read from its JSON body by the data files' rule (`reason_given`), and the 415 of a body of
another type; the URLs of an unyank and a purge (`ACTION_PATH`) and the 405 of any other
method there; the 409 of an unyank or a purge the writer refuses (`not_undone`); a purge's
answer, what became of each kept file (`purge_answer`).
"""

import re

from buildshelf.datafiles import datafile, dataformat
from buildshelf.model import whole_number
from buildshelf.text import printable
from buildshelf.web.answers import JSON
from buildshelf.web.query import API, ApiError
from buildshelf.writing import refusals

# What a POST to a build's URL and a verb does to a yanked build (issue 38).
ACTIONS = ("unyank", "purge")
ACTION_PATH = re.compile(
    re.escape(API) + rf"/projects/([^/]+)/builds/[^/]+/(?:{'|'.join(ACTIONS)})\Z"
)
ALLOWED = "POST"
REASON_BODY = '{"reason": "..."}'  # a yank's body, as the messages show it
# What became of a kept file a purge looked at: its object deleted by it; still in the store
# (another build uses the same bytes); deleted before (a purge's retry); or still in the
# store, which refused to delete it (read-only: `check` lists the object as unused).
FATES = ("deleted", "kept", "gone", "refused")


def reason_given(body: bytes, query: list[tuple[str, str]]) -> str:
    """The reason a yank's `body` gives, "" for none: a JSON object with at most the key
    'reason', by the data files' rule of a yankReason; ApiError 400 invalid_reason if not,
    and for a reason in the `query`, which would otherwise be dropped unseen."""
    if any(name == "reason" for name, _ in query):
        raise _invalid(f"give the reason in a JSON body: {REASON_BODY}, not in the query")
    if not body:
        return ""
    try:
        given = datafile.parse_json("body", body)
    except datafile.DataError as error:
        raise _invalid(f"the body is not JSON: {error.located()}") from None
    if type(given) is not dict:
        raise _invalid(f"the body must be a JSON object: {REASON_BODY}")
    if others := sorted(given.keys() - {"reason"}):
        raise _invalid(f"the body has {printable(others[0])!r}: it takes 'reason' only")
    reason = given.get("reason", "")
    if problem := dataformat.yank_reason_problem(reason, "reason"):
        raise _invalid(problem)
    return reason


def _invalid(message):
    return ApiError(400, "invalid_reason", message)


def not_json(kind: str) -> ApiError:
    """The 415 of a yank's body of another type (`kind`) than JSON."""
    return ApiError(
        415,
        "unsupported_media_type",
        f"a yank's body, if any, is {REASON_BODY} as {JSON}: send it with 'Content-Type: "
        f"{JSON}' (curl --json does), not as {printable(kind) or 'a body of no Content-Type'}",
    )


def build_number(slug: str, given: str) -> int:
    """The build number of a yank's, an unyank's or a purge's URL; 404 if it is none."""
    number = whole_number(given)
    if number is None:
        raise ApiError(404, "unknown_build", f"project {slug!r} has no build {printable(given)!r}")
    return number


def not_undone(refused: refusals.Refused, slug: str, number: int) -> ApiError:
    """The 409 of a purge of a build served (refusals.NotYanked), or of an unyank of a
    build whose kept files were purged (refusals.FilesPurged), which only a PUT serves
    again: as the writer names the files, with the PUT in place of its command."""
    if isinstance(refused, refusals.NotYanked):
        return ApiError(
            409,
            "build_not_yanked",
            f"build {number} of {slug!r} is served: yank it first (DELETE); only a yanked "
            "build's files are purged",
        )
    return ApiError(
        409, "build_purged", f"{refused.purged}: PUT it again (?replace=true) to serve it"
    )


def not_an_action() -> ApiError:
    """The 405 of a build's /unyank or /purge asked with another method than POST."""
    return ApiError(
        405,
        "method_not_allowed",
        "POST unyanks or purges a build here: nothing else",
        {"Allow": ALLOWED},
    )


def purge_answer(purged: list, files: list) -> dict:
    """A purge's answer: each of the yanked build's kept `files` ((key, file), one for each
    object: objects_in_use.distinct_objects), with its fate (FATES) as the purge found it
    (purging.Purged); a file it did not find was deleted before (a retry)."""
    found = {each.key: each for each in purged}

    def fate(key):
        each = found.get(key)
        if each is None:
            return "gone"
        if each.removed is not None:
            return "deleted"
        return "kept" if each.shared else "refused"

    return {
        "files": [
            {"key": key, "file": file.file, "sha256": file.sha256, "status": fate(key)}
            for key, file in files
        ]
    }
