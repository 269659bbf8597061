"""Request bodies on their way to the app: each held in memory up to BODY_IN_MEMORY bytes,
then in an anonymous file (BodyBuffer), or fed as it arrives to the app's consumer; the files
written and the consumers fed by a thread of their own (BodyWriter), never the loop; a body
held in a file read back by the app (SpilledBody).

The connection that receives them is connection.py's.
"""

import functools
import io
import logging
import queue
import tempfile
import threading
from contextlib import suppress

from buildshelf import files
from buildshelf.web.answers import no_room

log = logging.getLogger(__name__)

# A request body is held in memory up to this size, then in an anonymous file (BodyBuffer):
# JSON bodies stay in memory, and uploads cost each connection this much memory at most, and
# BACKLOG_BYTES in all on their way to their files.
BODY_IN_MEMORY = 64 << 10
# What the bodies on their way to their files (BodyWriter) may hold in memory, in all: past it,
# the connections sending bodies are not read until the writer catches up.
BACKLOG_BYTES = 1 << 20


class BodyWriter:
    """Writes the bodies held in files (BodyBuffer) on a thread of its own, each write in the
    order it came. The loop thread answers every request, and a write to a file can wait for
    the disk, behind a publish's fsync say: beside 4 uploads the API's p99 was 2.5 times its
    p99 alone, and 1.04 times with the bodies on tmpfs (issue 24). `wake()` is called when
    the writer has caught up with a backlog, so that the loop reads those connections again."""

    def __init__(self, wake):
        self.wake, self.pending, self.lock = wake, 0, threading.Lock()
        self.queue = queue.SimpleQueue()  # (a call, the bytes it writes)
        self.thread = threading.Thread(target=self._run, name="buildshelf-bodies", daemon=True)
        self.thread.start()

    @property
    def backlogged(self) -> bool:
        return self.pending > BACKLOG_BYTES

    def write(self, body, data):
        """body.write(data), in its turn."""
        with self.lock:
            self.pending += len(data)
        self.queue.put((functools.partial(body.write, data), len(data)))

    def then(self, call):
        """call() once what is queued before it is done."""
        self.queue.put((call, 0))

    def stop(self):
        """Stop once what is queued is done."""
        self.queue.put(None)

    def _run(self):
        while (item := self.queue.get()) is not None:
            call, size = item
            try:
                call()
            except Exception:  # a bug: this thread must go on, or every upload would wait
                log.exception("writing a request body failed")
            with self.lock:
                caught_up = self.backlogged and self.pending - size <= BACKLOG_BYTES
                self.pending -= size
            if caught_up:
                self.wake()


class BodyBuffer:
    """A request body as it arrives: in memory up to BODY_IN_MEMORY bytes, then in an
    anonymous file in `directory` (O_TMPFILE where the filesystem has it: a file with no name,
    which nothing, not even a killed process, can leave behind), written by `writer` (the
    server's BodyWriter). waitress's own buffer spills to $TMPDIR, which may be RAM. The file is unbuffered: each write is done or failed when it returns, and no later
    flush can fail. A write that fails (a full disk) is kept as `error` and the rest of the
    body is dropped; a body read meanwhile is refused (SpilledBody)."""

    error = None
    file = None  # once the body is over BODY_IN_MEMORY: made by its first write
    consumer = None  # what takes the body as it arrives instead of a file: see consume_with
    closed = False

    def __init__(self, directory, writer):
        self.directory, self.writer = directory or tempfile.gettempdir(), writer
        self.size, self.memory = 0, io.BytesIO()

    def __len__(self):
        return self.size

    def append(self, data):
        if self.error is not None or self.closed:
            return
        self.size += len(data)
        if self.memory is not None:
            if self.size <= BODY_IN_MEMORY:
                self.memory.write(data)
                return
            data, self.memory = self.memory.getvalue() + data, None
        self.writer.write(self, data)

    def consume_with(self, consumer):
        """Hand the body to `consumer` as it arrives, chunk by chunk, instead of keeping it:
        consumer.feed(data) on the writer's thread, consumer.discard() once the body is
        dropped. The app gets it through consumed()."""
        self.consumer, self.memory = consumer, None

    def write(self, data):
        """Write `data` to the file, made at the first write, or feed it to the consumer (the
        writer's thread)."""
        if self.error is not None or self.closed:
            return
        if self.consumer is not None:
            self.consumer.feed(data)
            return
        try:
            if self.file is None:
                self.file = tempfile.TemporaryFile(dir=self.directory, buffering=0)
            files.write_all(self.file.fileno(), data)
        except OSError as error:
            self.error = error
            self._close()

    def getfile(self):
        if self.consumer is not None:
            return io.BytesIO()  # the body is the consumer's
        if self.memory is not None:
            self.memory.seek(0)
            return self.memory
        return SpilledBody(self)

    def consumed(self):
        """The consumer, once it has been fed all that arrived of the body: waited for, on
        the thread that asks (never the loop's)."""
        self._wait_for_the_writer()
        return self.consumer

    def written(self):
        """The file from its start, once what was queued of it is written: waited for, on
        the thread that reads the body (never the loop's)."""
        self._wait_for_the_writer()
        if self.error is not None:
            raise self.refusal()
        self.file.seek(0)
        self.file = io.BufferedReader(self.file)  # read in big chunks, closed with it
        return self.file

    def _wait_for_the_writer(self):
        done = threading.Event()
        self.writer.then(done.set)
        done.wait()

    def refusal(self):
        """The answer to a body that could not be kept (`error`), logged."""
        log.error("cannot keep a request body in %s: %s", self.directory, self.error.strerror)
        return no_room()

    def close(self):
        """Drop the body: at once, on any thread; its file is closed once no write of it is
        under way."""
        self.closed = True
        if self.memory is not None:
            self.memory.close()
        else:
            self.writer.then(self._close)

    def _close(self):
        if self.consumer is not None:
            self.consumer.discard()
        if self.file is not None:
            with suppress(OSError):
                self.file.close()


class SpilledBody:
    """A body held in a file, as the app reads it (wsgi.input): its first read waits until
    the body is written whole, and a body that could not be is refused 507."""

    def __init__(self, buffer):
        self.buffer, self.file = buffer, None

    def _file(self):
        if self.file is None:
            self.file = self.buffer.written()
        return self.file

    def read(self, size=-1):
        return self._file().read(size)

    def readline(self, size=-1):
        return self._file().readline(size)

    def readlines(self, hint=-1):
        return self._file().readlines(hint)

    def __iter__(self):
        return iter(self._file())
