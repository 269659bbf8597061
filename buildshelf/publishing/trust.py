"""Trusted publishers: the GitHub repositories (and maybe one workflow, one environment, one
pattern of refs) whose Actions jobs may publish to a project with their OIDC token, kept in
the state directory's `trust` database; the token claims that match one; the ids of a
repository pinned on its first accepted token; and the tokens' `jti`s spent, each accepted
once.
"""

import re
import shlex
import sqlite3
import time
from dataclasses import dataclass

from buildshelf import state
from buildshelf.text import printable

# GitHub's names: an owner of letters, digits and '-', a repository of letters, digits and
# . _ - (not . or ..). They are compared whatever their case, as GitHub's are.
REPOSITORY = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/(?!\.\.?\Z)[A-Za-z0-9._-]{1,100}\Z")
WORKFLOW = re.compile(r"[A-Za-z0-9._-]+\.ya?ml\Z")  # a file name in .github/workflows/
ENVIRONMENT = re.compile(r"(?=.*\S)[^\x00-\x1f\x7f]{1,255}\Z")
WORKFLOWS = ".github/workflows/"
# A ref pattern (--ref): a full ref, refs/heads/NAME or refs/tags/NAME, where `*` stands for
# any characters but '/' and `**` for any characters, as in GitHub's branch and tag filters;
# every other character stands for itself. Its characters are those git allows in a ref
# (git check-ref-format), and `*`: no space, control character, ~ ^ : ? [ or backslash.
REF_PATTERN = re.compile(r"refs/[^\x00-\x20\x7f~^:?\[\\]+\Z")

SCHEMA = state.Schema(
    "trust",
    migrations=(
        """
CREATE TABLE IF NOT EXISTS publishers (
    id INTEGER PRIMARY KEY,  -- the order of adding, which --list numbers them in
    project TEXT NOT NULL,
    repository TEXT NOT NULL,  -- OWNER/REPO as given
    workflow TEXT,  -- a file name in .github/workflows/; NULL: any
    environment TEXT,  -- NULL: any, or none
    owner_id TEXT,  -- repository_owner_id and repository_id, pinned on first use
    repository_id TEXT
);
CREATE INDEX IF NOT EXISTS publishers_project ON publishers (project);
CREATE TABLE IF NOT EXISTS spent (
    jti TEXT PRIMARY KEY,
    until INTEGER NOT NULL  -- after this the token is refused as expired: the jti may go
);
CREATE INDEX IF NOT EXISTS spent_until ON spent (until);
""",
        # --ref: the refs (a REF_PATTERN) a publisher's jobs may publish from; NULL: any.
        "ALTER TABLE publishers ADD COLUMN ref TEXT",
    ),
)


class NotTrusted(Exception):
    """A valid token that no trusted publisher of the project matches: the message says how
    it differs from them."""


@dataclass(frozen=True)
class Trusted:
    """A trusted publisher: `number` is its place in `listed`, from 1."""

    number: int
    repository: str
    workflow: str | None
    environment: str | None
    owner_id: str | None
    repository_id: str | None
    id: int  # the row's
    ref: str | None = None  # a REF_PATTERN

    def __str__(self):
        return (
            f"github {self.repository}, "
            + (f"workflow {self.workflow}" if self.workflow else "any workflow")
            + ", "
            + (f"environment {self.environment}" if self.environment else "any environment")
            + ", "
            + (f"ref {self.ref}" if self.ref else "any ref")
        )


def _opened(where: state.Where):
    """The trust database of `where`: a state directory, or a server's state.Databases."""
    return state.opened(where, SCHEMA)


def _listed(connection, project):
    rows = connection.execute(
        "SELECT id, repository, workflow, environment, owner_id, repository_id, ref "
        "FROM publishers WHERE project = ? ORDER BY id",
        (project,),
    )
    return [Trusted(number, *row[1:6], id=row[0], ref=row[6]) for number, row in enumerate(rows, 1)]


def ref_matches(pattern: str, ref: str) -> bool:
    """Whether the ref `ref` is one that the REF_PATTERN `pattern` stands for. Decided by
    the places in `ref` that each part of `pattern` may end at, a part after the other: at
    most len(pattern) x len(ref) steps, where a regular expression would backtrack through
    every way the `*` could split a ref that does not match (minutes for 5 of them)."""
    ends = {0}
    for part in re.split(r"(\*\*|\*)", pattern):
        if part == "**":
            ends = set(range(min(ends), len(ref) + 1)) if ends else ends
        elif part == "*":
            reached, start = set(), 0
            for end in sorted(ends):  # each up to the next '/': the spans merge
                start = max(start, end)
                stop = ref.find("/", end)
                stop = len(ref) if stop < 0 else stop
                reached.update(range(start, stop + 1))
                start = stop + 1
            ends = reached
        else:
            ends = {end + len(part) for end in ends if ref.startswith(part, end)}
    return len(ref) in ends


def listed(state_dir: str, project: str) -> list[Trusted]:
    """The trusted publishers of `project`, in the order they were added."""
    with _opened(state_dir) as connection:
        return _listed(connection, project)


def add(
    state_dir: str,
    project: str,
    repository: str,
    workflow: str | None = None,
    environment: str | None = None,
    ref: str | None = None,
) -> tuple[Trusted, bool]:
    """The publisher trusted for `project`, and whether it was added (False: it was there)."""
    shapes = (
        (repository, REPOSITORY),
        (workflow, WORKFLOW),
        (environment, ENVIRONMENT),
        (ref, REF_PATTERN),
    )
    for value, pattern in shapes:
        if value is not None and not pattern.match(value):
            raise ValueError(f"{value!r} does not match {pattern.pattern}")
    with _opened(state_dir) as connection, connection:
        connection.execute("BEGIN IMMEDIATE")
        for trusted in _listed(connection, project):
            if (trusted.repository.lower(), trusted.workflow, trusted.environment, trusted.ref) == (
                repository.lower(),
                workflow,
                environment,
                ref,
            ):
                return trusted, False
        connection.execute(
            "INSERT INTO publishers (project, repository, workflow, environment, ref) "
            "VALUES (?, ?, ?, ?, ?)",
            (project, repository, workflow, environment, ref),
        )
        return _listed(connection, project)[-1], True


def remove(state_dir: str, project: str, number: int) -> Trusted | None:
    """The publisher that `listed` numbers `number`, no longer trusted; None if none is."""
    with _opened(state_dir) as connection, connection:
        connection.execute("BEGIN IMMEDIATE")
        found = [t for t in _listed(connection, project) if t.number == number]
        if found:
            connection.execute("DELETE FROM publishers WHERE id = ?", (found[0].id,))
        return found[0] if found else None


def spend(where: state.Where, jti: str, until: float, now: float | None = None) -> bool:
    """Whether `jti` was not spent yet in the state of `where`, now spent until `until` (epoch
    seconds: when its token can no longer be accepted). The jtis spent until before `now` are
    forgotten."""
    now = time.time() if now is None else now
    with _opened(where) as connection, connection:
        connection.execute("DELETE FROM spent WHERE until < ?", (int(now),))
        try:
            connection.execute("INSERT INTO spent (jti, until) VALUES (?, ?)", (jti, int(until)))
        except sqlite3.IntegrityError:
            return False
        return True


def workflow_of(claims: dict) -> str:
    """The workflow the job runs, from `job_workflow_ref` without its @ref: its path in the
    repository (.github/workflows/release.yml), or with its repository in front for a
    workflow of another repository."""
    path = claims["job_workflow_ref"].rpartition("@")[0] or claims["job_workflow_ref"]
    prefix = claims["repository"] + "/"
    # Said in messages and the log: on one printable line, whatever GitHub allows in a name.
    return printable(path[len(prefix) :] if path.lower().startswith(prefix.lower()) else path)


def _runs(trusted, claims):
    """Whether the job of `claims` runs the workflow and environment, on a ref, that `trusted`
    names."""
    if trusted.workflow is not None:
        prefix = claims["repository"] + "/"
        ref = claims["job_workflow_ref"]
        if not (
            ref[: len(prefix)].lower() == prefix.lower()
            and ref[len(prefix) :].startswith(f"{WORKFLOWS}{trusted.workflow}@")
        ):
            return False
    if trusted.environment is not None:
        # GitHub's environment names are not case-sensitive.
        if str(claims.get("environment") or "").lower() != trusted.environment.lower():
            return False
    if trusted.ref is not None:
        ref = claims.get("ref")  # a string when there: oidc.py checked it
        if ref is None or not ref_matches(trusted.ref, ref):
            return False
    return True


def trust_command(project: str, claims: dict) -> str:
    """The `buildshelf trust` command that would trust the job of `claims` for `project`: its
    repository, and its workflow file and environment where the command can say them."""
    words = ["buildshelf", "trust", project, "--github", claims["repository"]]
    prefix = f"{claims['repository']}/{WORKFLOWS}".lower()
    path = claims["job_workflow_ref"].rpartition("@")[0]
    if path.lower().startswith(prefix) and WORKFLOW.match(path[len(prefix) :]):
        words += ["--workflow", path[len(prefix) :]]
    environment = claims.get("environment")
    if isinstance(environment, str) and ENVIRONMENT.match(environment):
        words += ["--environment", environment]
    return shlex.join(words)


def match(where: state.Where, project: str, claims: dict) -> Trusted:
    """The trusted publisher of `project` in the state of `where` that the verified token
    `claims` matches, with the repository's ids pinned if they were not; NotTrusted if none
    does."""
    repository = claims["repository"]
    ids = (claims["repository_owner_id"], claims["repository_id"])
    if not REPOSITORY.match(repository):  # GitHub's never: compared as ASCII below
        raise NotTrusted(f"{repository!r} is not a GitHub repository name")
    with _opened(where) as connection, connection:
        connection.execute("BEGIN IMMEDIATE")  # the ids read and pinned in one transaction
        listed = _listed(connection, project)
        same = [t for t in listed if t.repository.lower() == repository.lower()]
        if not same:
            raise NotTrusted(
                f"{repository} is not a trusted publisher of {project} (on the server, this "
                f"would trust it: {trust_command(project, claims)})"
            )
        for trusted in same:
            if trusted.owner_id is not None and (trusted.owner_id, trusted.repository_id) != ids:
                raise NotTrusted(
                    f"{repository} has other ids (owner {ids[0]}, repository {ids[1]}) than "
                    f"when it first published to {project} (owner {trusted.owner_id}, "
                    f"repository {trusted.repository_id}): a repository deleted and made again "
                    "under its name is not trusted (if it is yours, 'buildshelf trust "
                    f"{project} --remove N' and add it again)"
                )
        found = next((t for t in same if _runs(t, claims)), None)
        if found is None:
            environment, ref = claims.get("environment"), claims.get("ref")
            raise NotTrusted(
                f"{repository} is trusted for {project} as "
                + "; ".join(str(t).removeprefix(f"github {t.repository}, ") for t in same)
                + f", and this job runs {workflow_of(claims)} in "
                + (
                    f"environment {printable(str(environment))}"
                    if environment
                    else "no environment"
                )
                + (f" on ref {printable(ref)}" if ref else " on no ref")
            )
        # One repository, one pair of ids: pinned on every publisher naming it.
        connection.executemany(
            "UPDATE publishers SET owner_id = ?, repository_id = ? WHERE id = ?",
            [(*ids, t.id) for t in same if t.owner_id is None],
        )
        return found
