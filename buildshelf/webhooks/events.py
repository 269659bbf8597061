"""The webhook events a change of the store's snapshot makes: a build new to a project is
`build.published`, one whose content changed too, with `replaced`, one gone from a project
still served `build.yanked` (with the yank's reason, when it stays in its file marked), and
a yanked build served again as it was `build.unyanked`.
"""

import uuid
from collections.abc import Callable

import msgspec

from buildshelf.model import Build, Project
from buildshelf.store import Snapshot
from buildshelf.webhooks.formats import Event
from buildshelf.webhooks.targets import PUBLISHED, UNYANKED, YANKED


def events_between(
    old: Snapshot, new: Snapshot, build_json: Callable, project_url: Callable, now: float
) -> list[Event]:
    """The events that turn `old` into `new`: per project in slug order, its builds in number
    order. A project that was not served before announces nothing: a file read late at start
    (too slow for the first check, or broken until fixed) holds builds that were already
    there. A project no longer served (its file removed) yanks nothing."""
    events = []
    for slug, project in new.projects.items():
        before = old.projects.get(slug)
        if before is None:
            continue
        then = {b.number: b for b in before.builds}
        served = {b.number: b for b in project.builds}
        for number in sorted(then.keys() | served.keys()):
            build, was = served.get(number), then.get(number)
            if build == was:
                continue
            reason = ""
            if build is None:  # the yank mark, if it was yanked rather than deleted
                kind, shown, in_project = YANKED, was, before
                reason = getattr(project.yanked_build(number), "yank_reason", "")
            else:
                kind = UNYANKED if _unyanked(before, build) else PUBLISHED
                shown, in_project = build, project
            events.append(
                Event(
                    id=f"msg_{uuid.uuid4().hex}",
                    type=kind,
                    timestamp=now,
                    project=slug,
                    project_url=project_url(slug),
                    build=build_json(in_project, shown),
                    replaced=build is not None and was is not None,
                    reason=reason,
                )
            )
    return events


def _unyanked(before: Project, build: Build) -> bool:
    """Whether `build`, served now, is a build `before` held yanked, as it was: an unyank,
    not a new build published under a yanked number."""
    yanked = before.yanked_build(build.number)
    unmarked = yanked and msgspec.structs.replace(yanked, yanked_at=msgspec.UNSET, yank_reason="")
    return unmarked == build
