"""The webhook events a change of the store's snapshot makes: a build new to a project is
`build.published`, one whose content changed too, with `replaced`, one gone from a project
still served `build.yanked`.
"""

import uuid
from collections.abc import Callable

from buildshelf.store import Snapshot
from buildshelf.webhooks.formats import Event
from buildshelf.webhooks.targets import EVENTS

PUBLISHED, YANKED = EVENTS


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
            kind = PUBLISHED if build is not None else YANKED
            shown, in_project = (build, project) if build is not None else (was, before)
            events.append(
                Event(
                    id=f"msg_{uuid.uuid4().hex}",
                    type=kind,
                    timestamp=now,
                    project=slug,
                    project_url=project_url(slug),
                    build=build_json(in_project, shown),
                    replaced=build is not None and was is not None,
                )
            )
    return events
