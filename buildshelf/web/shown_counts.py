"""The downloads counted as the pages show them: a `Showing` (one snapshot, one tally of
the counter's, one UTC day), under which the representation cache keeps the pages that show
counts, so that they go with it; `Showings`, the current one, made anew when the snapshot,
the tally or the day changes; each project's downloads per build and the chart of its last
CHART_DAYS days (the geometry and words of an inline SVG), worked out once per Showing.
"""

import datetime
import threading
import time
import weakref
from types import SimpleNamespace

from buildshelf import counts
from buildshelf.text import counted

CHART_DAYS = 90  # a project page's chart: the last 90 days, UTC, today included
# The chart's height and where it draws, in CSS pixels: its width is the page's, so that the
# labels keep their size at 375 px; the bars' x and width are percentages of it.
CHART_HEIGHT = 168
CHART_TOP = 24  # the top gridline; its label above it
CHART_BASE = 140  # the baseline; the dates below it
CHART_BAR = 0.8  # a bar's share of its day's width: the rest is the gap between bars

EPOCH = datetime.date(1970, 1, 1)


def utc_day():
    """Today (UTC) as a number of days since 1970-01-01: asked before every answer from
    memory, so the cheapest there is (datetime.now(UTC).date() took 2 us)."""
    return int(time.time() // 86400)


class Showing:
    """What a page shows when downloads are counted: one snapshot, one tally, one UTC day.
    The representation cache keeps such pages under it, so they go with it. What each
    project's pages show of the counts is worked out once (all its pages and filters show
    the same), when first asked for.

    The tally is held weakly: the counter's thread that replaces it frees it (a large one
    takes milliseconds to free), never the loop thread that finds this Showing out of date.
    """

    __slots__ = (
        "snapshot",
        "tally",
        "day",
        "today",
        "since",
        "_downloads",
        "_charts",
        "__weakref__",
    )

    def __init__(self, snapshot, tally: counts.Tally, day: int):
        self.snapshot, self.tally, self.day = snapshot, weakref.ref(tally), day
        self.today = EPOCH + datetime.timedelta(days=day)
        # Last-Modified: later than the data and the counts it shows (Representation.of).
        self.since = time.time()
        self._downloads, self._charts = {}, {}  # by slug; threads may race: both agree


class ShownCounts:
    """The counts a request's page shows: its Showing, and the tally, held while the page is
    made."""

    __slots__ = ("showing", "tally")

    def __init__(self, showing: Showing, tally: counts.Tally):
        self.showing, self.tally = showing, tally

    def downloads(self, project):
        """Build number -> its downloads, for the builds served (build_downloads)."""
        memo = self.showing._downloads
        found = memo.get(project.slug)
        if found is None:
            found = memo[project.slug] = build_downloads(self.tally, project)
        return found

    def chart(self, project):
        memo = self.showing._charts
        found = memo.get(project.slug)
        if found is None:
            found = memo[project.slug] = chart_view(
                project, self.tally, self.showing.today, self.downloads(project)
            )
        return found


class Showings:
    """The current Showing of a counter's tallies: a new one when the snapshot, the tally or
    the day changes. Only the current one is held, so the cache drops the pages of the
    others as soon as no request uses them."""

    def __init__(self, counter):
        self.counter = counter
        self._current = None
        self._lock = threading.Lock()

    def current(self, snapshot) -> ShownCounts:
        tally = self.counter.tally()
        return ShownCounts(self.showing(snapshot, tally), tally)

    def showing(self, snapshot, tally) -> Showing:
        """The current Showing, made current: on the loop thread before every answer from
        memory too, so a few identity checks unless it changes."""
        day, showing = utc_day(), self._current
        if not _shows(showing, snapshot, tally, day):
            with self._lock:  # one Showing per version, however many threads see it first
                showing = self._current
                if not _shows(showing, snapshot, tally, day):
                    showing = self._current = Showing(snapshot, tally, day)
        return showing


def _shows(showing, snapshot, tally, day):
    return (
        showing is not None
        and showing.snapshot is snapshot
        and showing.tally() is tally
        and showing.day == day
    )


def served_days(tally, project):
    """(build number, {day: downloads}) of the project's builds served and counted: a build
    no longer served, or yanked, is in no count shown, as in the API's totals."""
    return [
        (number, days)
        for number, days in tally.builds(project.slug).items()
        if project.build(number) is not None
    ]


def build_downloads(tally, project):
    """Build number -> its downloads (every file, every day), for the builds served."""
    return {number: sum(days.values()) for number, days in served_days(tally, project)}


def daily_downloads(project, tally, today):
    """[(day, downloads)] of the served builds, one per day of the last CHART_DAYS days
    ending `today` (UTC), oldest first, zeros included."""
    first = today - datetime.timedelta(days=CHART_DAYS - 1)
    window = {(first + datetime.timedelta(days=i)).isoformat(): 0 for i in range(CHART_DAYS)}
    for _, days in served_days(tally, project):
        for day, downloads in days.items():
            if day in window:
                window[day] += downloads
    return list(window.items())


def nice_ceiling(number):
    """The scale's top: the least round number not below `number` (1 to 6, 8 or 10 times a
    power of ten), so that the tallest bar fills more than half of the chart's height."""
    power = 10 ** (len(str(number)) - 1)
    return next(step * power for step in (1, 2, 3, 4, 5, 6, 8, 10) if step * power >= number)


def chart_view(project, tally, today, downloads):
    """The project's total, and the chart of its downloads per day (geometry and words)."""
    series = daily_downloads(project, tally, today)
    total = sum(downloads.values())
    recent = sum(n for _, n in series)
    peak_day, peak = max(reversed(series), key=lambda day: day[1])  # the latest of the most
    first, last = series[0][0], series[-1][0]
    top = nice_ceiling(peak) if peak else 1
    slot = 100 / len(series)
    height = CHART_BASE - CHART_TOP
    bars = [
        SimpleNamespace(
            x=f"{(i + (1 - CHART_BAR) / 2) * slot:.3f}",
            width=f"{slot * CHART_BAR:.3f}",
            # at least a pixel: one download on a busy chart still shows
            y=f"{CHART_BASE - max(n / top * height, 1):.2f}",
            height=f"{max(n / top * height, 1):.2f}",
            title=f"{day}: {counted(n, 'download')}",
        )
        for i, (day, n) in enumerate(series)
        if n
    ]
    # (text, is a day): a day is never broken at its hyphens on a narrow screen
    summary = [
        (f"{counted(total, 'download')} in all; {f'{recent:,}' if recent else 'none'} "
         f"in the last {CHART_DAYS} days, ", False),
        (first, True), (" to ", False), (last, True), (" (UTC).", False),
    ]  # fmt: skip
    if recent:
        summary += [(f" The most in one day: {peak:,}, on ", False), (peak_day, True), (".", False)]
    return SimpleNamespace(
        summary=summary,
        title=f"{project.ci_job}: downloads per day, the last {CHART_DAYS} days",
        description=(
            f"A bar for each day: {counted(recent, 'download')} from {first} to {last}"
            + (f", the most on {peak_day} ({peak:,})." if recent else ".")
        ),
        days=[(day, f"{n:,}") for day, n in series],
        bars=bars,
        height=CHART_HEIGHT,
        top=CHART_TOP,
        base=CHART_BASE,
        top_label=f"{top:,}" if peak else None,
        labels=[
            (first, "0", "start"),
            (series[len(series) // 2][0], "50%", "middle"),
            (last, "100%", "end"),
        ],
    )
