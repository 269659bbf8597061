"""Builds from the JSON of a Jenkins job's remote API, read in the upstream Canvas site's
conventions: the channel and the experimental flag come from the display name
(`#123 - 1.21.4`, experimental when it ends in `(...)`), the download from an artifact, the
commits from the change sets (`changeSet` for freestyle jobs, `changeSets` for pipelines).
"""

import json
import re
from typing import NamedTuple
from urllib.parse import quote, urlsplit

from buildshelf import http_client
from buildshelf.datafiles import datafile
from buildshelf.jenkins import fetch

# What a build's JSON must tell: Jenkins' remote API says only what the tree= asks for.
BUILD_TREE = {
    "number": "",
    "url": "",
    "displayName": "",
    "result": "",
    "timestamp": "",
    "building": "",
    "artifacts": "[relativePath,fileName]",
    "changeSet": "[items[msg,commitId]]",  # a freestyle job's
    "changeSets": "[items[msg,commitId]]",  # a pipeline's
}
TREE = "allBuilds[" + ",".join(name + tree for name, tree in BUILD_TREE.items()) + "]"
OPTIONAL = ("building", "changeSet", "changeSets")
MAX_BYTES = 256 * 1024 * 1024  # a job of 10,000 builds with change sets is tens of MB
DISPLAY_NAME = re.compile(r"#\d+\s*-\s*(?P<channel>.*?)\s*(?:\([^)]*\))?\s*\Z", re.DOTALL)
DEFAULT_ARTIFACT = re.compile(r"(?<!-sources)(?<!-javadoc)\.jar\Z")
DEFAULT_ARTIFACT_RULE = "the first .jar that is not -sources or -javadoc"


class JenkinsError(Exception):
    """The job's JSON could not be had or read: the message says why."""


class Selection(NamedTuple):
    added: list  # build objects, in the data files' shape
    failed: list  # (which build, why it could not be added): someone should look
    skipped: list  # (which build, why it is not for the project): the job's business
    present: int  # builds already in the project's file, kept as they are


def api_url(job_url):
    """The remote API address of a job's builds, from the job's address."""
    if "/api/json" in job_url:
        return job_url
    return job_url.rstrip("/") + "/api/json?tree=" + quote(TREE, safe="")


def fetch_job(job_url, timeout, allowed_hosts=()):
    """The job's JSON from Jenkins, as bytes, as fetch.open_url fetches."""
    url = api_url(job_url)
    if urlsplit(url).scheme not in http_client.SCHEMES:
        raise JenkinsError(f"--job-url must be an http:// or https:// address, not {job_url!r}")
    try:
        with fetch.open_url(
            url, timeout, allowed_hosts, headers={"Accept": "application/json"}
        ) as answer:
            return answer.read(MAX_BYTES)
    except http_client.HttpError as error:
        raise JenkinsError(str(error)) from None


def read_job_file(path):
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as error:
        raise JenkinsError(f"cannot read {path}: {error.strerror}") from None
    if len(data) > MAX_BYTES:
        raise JenkinsError(f"{path} is larger than {MAX_BYTES >> 20} MiB")
    return data


def parse_job(data, source):
    """The list of builds in a job's JSON."""
    try:
        job = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise JenkinsError(f"{source} is not UTF-8 JSON") from None
    except json.JSONDecodeError as error:
        raise JenkinsError(
            f"{source} is not JSON: line {error.lineno}, column {error.colno}: {error.msg}"
        ) from None
    except (ValueError, RecursionError) as error:
        raise JenkinsError(f"{source} is not JSON Buildshelf can read: {error}") from None
    builds = job.get("allBuilds", job.get("builds")) if isinstance(job, dict) else None
    if not isinstance(builds, list):
        raise JenkinsError(
            f"{source} has no 'allBuilds' array: is it the remote API JSON of "
            f"a job (.../job/NAME/api/json?tree={TREE})?"
        )
    told = set().union(*(build.keys() for build in builds if isinstance(build, dict)))
    missing = [name for name in BUILD_TREE if name not in told and name not in OPTIONAL]
    if builds and missing:  # the plain api/json lists a build's number and url only
        url = next((b["url"] for b in builds if isinstance(b, dict) and "url" in b), None)
        job_url = re.sub(r"[0-9]+/?\Z", "", url) if isinstance(url, str) else ".../job/NAME/"
        raise JenkinsError(
            f"{source} tells no build's {', '.join(missing)}: save the job's JSON with the "
            f"fields Buildshelf reads: curl -fsS '{api_url(job_url)}' -o job.json"
        )
    return builds


def _artifact(artifacts, pattern, taken=()):
    """The relativePath of the first of `artifacts` that `pattern` matches (None: the default
    rule) and that is not `taken` (by an extra file), or None."""
    for artifact in artifacts if isinstance(artifacts, list) else ():
        path = artifact.get("relativePath") if isinstance(artifact, dict) else None
        if (
            isinstance(path, str)
            and path not in taken
            and (
                pattern.search(path)
                if pattern
                else DEFAULT_ARTIFACT.search(path.rsplit("/", 1)[-1])
            )
        ):
            return path
    return None


def _extras(artifacts, extras):
    """The relativePath of each extra file's artifact, by key: the first its pattern matches
    that no other extra file took. A key none matches is left out: that build has no such
    file (an older build, made before the job made it)."""
    found = {}
    for key, pattern in extras:
        path = _artifact(artifacts, pattern, found.values())
        if path is not None:
            found[key] = path
    return found


def _commits(build):
    change_sets = [build.get("changeSet")]
    if isinstance(build.get("changeSets"), list):
        change_sets += build["changeSets"]
    items = [
        item
        for change_set in change_sets
        if isinstance(change_set, dict) and isinstance(change_set.get("items"), list)
        for item in change_set["items"]
    ]
    # Jenkins lists a change set oldest first; builds list their commits newest first.
    return [
        {"message": item.get("msg"), "hash": item.get("commitId")}
        if isinstance(item, dict)
        else item
        for item in reversed(items)
    ]


def to_build(build, artifact=None, experimental=None, extras=()):
    """One Jenkins build as a data-file build, or a string: why it is skipped. `extras`, (key,
    pattern) pairs, pick the artifacts of its extra files, before the primary is picked."""
    if build.get("building") is not False and build.get("building") is not None:
        return "still building"
    if build.get("result") != "SUCCESS":
        result = build.get("result")
        return f"result {result}" if isinstance(result, str) else "no result"
    name = build.get("displayName")
    match = DISPLAY_NAME.match(name) if isinstance(name, str) else None
    if not match:
        return f"display name {name!r} does not name a channel as '#N - VERSION'"
    url = build.get("url")
    if not isinstance(url, str):
        return "no url"
    url = url if url.endswith("/") else url + "/"
    found = _extras(build.get("artifacts"), extras)
    path = _artifact(build.get("artifacts"), artifact, found.values())
    if path is None:
        return (
            "no artifact matching "
            + (repr(artifact.pattern) if artifact else DEFAULT_ARTIFACT_RULE)
            + (" that no --extra-artifact took" if found else "")
        )
    downloads = {key: {"downloadUrl": _artifact_url(url, found[key])} for key in sorted(found)}
    return datafile.build_document(
        build["number"],
        match["channel"],
        build.get("timestamp"),
        bool(experimental.search(name)) if experimental else name.endswith(")"),
        _commits(build),
        url=url,
        download_url=_artifact_url(url, path),
        **({"downloads": downloads} if downloads else {}),
    )


def _artifact_url(run_url, path):
    """Where Jenkins serves the artifact at `path` of the run at `run_url`."""
    return run_url + "artifact/" + quote(path, safe="/+")


def _problem(doc, slug, build):
    """The server's objection to `build` in this project, or None."""
    candidate = json.dumps(dict(doc, builds=[build])).encode()
    try:
        datafile.parse_project(slug + ".json", slug, candidate)
    except datafile.DataError as error:
        return error.message
    except (ValueError, TypeError, RecursionError) as error:  # what validation did not foresee
        return f"not a valid build ({error.__class__.__name__}: {error})"
    return None


def select(builds, doc, slug, artifact=None, experimental=None, extras=()):
    """Which of the job's `builds` to add to the project `doc`, and why the others are not;
    `extras`, (key, pattern) pairs, pick the artifacts of their extra files."""
    present = {build["buildNumber"] for build in doc["builds"]}
    selection = Selection([], [], [], 0)
    for index, build in enumerate(builds):
        number = build.get("number") if isinstance(build, dict) else None
        if not (type(number) is int and number >= 0):
            selection.skipped.append((f"allBuilds[{index}]", "no build number"))
        elif number in present:
            selection = selection._replace(present=selection.present + 1)
        else:
            new = to_build(build, artifact, experimental, extras)
            if isinstance(new, str):
                selection.skipped.append((f"build {number}", new))
            elif problem := _problem(doc, slug, new):
                selection.failed.append((f"build {number}", problem))
            else:
                selection.added.append(new)
                present.add(number)
    return selection
