"""Progress of long work shown in a terminal: one line on stderr, rewritten in place (`\r`) at
most a few times a second and cleared at the end; nothing at all when stderr is not a
terminal (cron, a pipe, a CI log), nor for work done before the first line is due."""

import os
import sys
import time

from buildshelf.text import size, sizes

FIRST_AFTER = 0.5  # seconds: quick work shows nothing
EVERY = 0.25  # seconds between two lines at least
WIDTH = 80  # a terminal's width, when it does not say
NUMBERS = len("1,023.9 MiB of 1,023.9 MiB (100%)")  # the room kept for them


class Meter:
    """`meter(done, total)` notes the bytes done of `total` (None: not known); a line
    '`label`: 12.0 MiB of 300.0 MiB (4%)' shows it. Used as a context manager, which clears
    the line at the end, whatever happened."""

    def __init__(self, label: str, stream=None, clock=time.monotonic):
        self.label, self.clock = label, clock
        self.stream = sys.stderr if stream is None else stream
        try:
            self.shown = self.stream.isatty()
        except (AttributeError, ValueError):  # no stream, or a closed one
            self.shown = False
        self.due = clock() + FIRST_AFTER
        self.width = 0  # of the line on the terminal

    def __call__(self, done: int, total: int | None = None) -> None:
        now = self.clock()
        if not self.shown or now < self.due:
            return
        self.due = now + EVERY
        if total:
            said = "{} of {}".format(*sizes(done, total)) + f" ({done * 100 // total}%)"
        else:
            said = size(done)
        # Never the last column (no wrap), and the same room whatever the numbers' length.
        room = _columns(self.stream) - 1 - max(len(said), NUMBERS) - 2
        label = self.label
        if len(label) > room:  # cut in the middle: a URL's host and file name stay
            head = max(room - 3, 0) // 2
            label = label[:head] + "..." + label[len(label) - (max(room - 3, 0) - head) :]
        line = f"{label}: {said}"
        self._write("\r" + line.ljust(self.width))
        self.width = len(line)

    def _write(self, text):
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: the work goes on
            self.shown = False

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        if self.shown and self.width:
            self._write("\r" + " " * self.width + "\r")


def _columns(stream):
    try:
        return os.get_terminal_size(stream.fileno()).columns or WIDTH
    except (AttributeError, ValueError, OSError):
        return WIDTH
