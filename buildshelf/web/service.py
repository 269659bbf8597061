"""What the routes share: `Service`, made once by server.make_app and handed to each group of
routes (reads.py, counted.py, publish.py, hosted.py, health.py, pages.py), as datasette hands its views one app object. It holds the
store, the cache of encoded answers, the shapes, the settings the routes read and the
download counter, and the few things made of them that several routes use: an answer of a
data version made once (`send_json`), a download counted (`count_download`), the counts as
of one moment (`counted_now`), the builds by their served download URL (`served_urls`).
"""

import threading
import time
import weakref
from dataclasses import dataclass, field

import bottle

from buildshelf import counts
from buildshelf.publishing.credentials import Credentials
from buildshelf.publishing.expiry import TokenWatch
from buildshelf.store import Snapshot, Store
from buildshelf.web.answers import send
from buildshelf.web.ratelimit import FailureLimit
from buildshelf.web.representation import Representation, RepresentationCache
from buildshelf.web.shapes import Shapes


class CountedVersion:
    """The downloads counted and the data they are counted against, as of one moment: the
    count routes' answers are cached under it, and go with it once either is replaced."""

    __slots__ = ("tally", "snapshot", "loaded_at", "sums", "__weakref__")

    def __init__(self, tally, snapshot):
        self.tally, self.snapshot, self.loaded_at = tally, snapshot, time.time()
        self.sums = {}  # (slug, id(selection)) -> shapes.SelectionCounts, made on first use


@dataclass(eq=False)
class Service:
    """`store`'s data served: JSON successes may be cached `max_age` seconds, in the shapes
    of `shapes` (compat: None, or "upstream"); `counter` counts the downloads (None: off);
    encoded answers are kept in `cache`. Builds are published and yanked for `credentials`,
    a kept file of `max_file_bytes` at most; kept files are sent by nginx at
    `accel_redirect`; /healthz reports `problems` too."""

    store: Store
    cache: RepresentationCache
    shapes: Shapes
    max_age: int
    compat: str | None
    counter: counts.Counter | None
    openapi_document: Representation  # encoded once: it changes only with the release
    # Publishing (publish.py): who may write (None: nobody), the failed authentications
    # counted, the largest kept file.
    credentials: Credentials | None = None
    limit: FailureLimit = field(default_factory=FailureLimit)
    max_file_bytes: int = 0
    # The kept files (hosted.py): nginx's location that sends their bytes (None: we do), and
    # whether a download that did not come through it was warned of.
    accel_redirect: str | None = None
    accel_warned: threading.Event = field(default_factory=threading.Event)
    # How an s3:// store's files reach clients (kept.stores.DOWNLOADS; None: the default).
    artifacts_downloads: str | None = None
    # /healthz (health.py): the problems of the parts of the service, each a callable.
    problems: tuple = ()
    # /healthz's and /metrics' tokens to replace, as last read (None: none watched).
    tokens: TokenWatch | None = None
    _counted: list = field(default_factory=lambda: [None])  # the current CountedVersion
    _counted_lock: threading.Lock = field(default_factory=threading.Lock)
    _by_url: list = field(default_factory=lambda: [(lambda: None, {})])  # (weakref, index)

    def __post_init__(self):
        # Counts change every FLUSH_SECONDS while the data stays the same: answers are cached
        # for the version they show, but not answered from memory by the loop thread, which
        # knows only the data's version, and clients may keep them no longer than that.
        self.counts_max_age = min(self.max_age, counts.FLUSH_SECONDS)

    def send_json(self, data, view, make_body, shown):
        """The JSON `make_body()` makes of `data`, made once per data version (`view` names
        what it shows), answering a request to which `shown` is the data version."""
        representation = self.cache.get(
            data, view, lambda: Representation.of(make_body(), data.loaded_at)
        )
        return send(representation, self.max_age, shown=shown)

    def send_counts(self, version: CountedVersion, view, make_body):
        """The JSON make_body() makes of the counts' `version`, made once (`view` names what
        it shows)."""
        representation = self.cache.get(
            version, view, lambda: Representation.of(make_body(), version.loaded_at)
        )
        return send(representation, self.counts_max_age)

    def count_download(self, project, build, file=None) -> bool:
        """Whether the request is a download of `build` counted (a GET, counting on), of its
        primary or of `file`, an extra file of it, which counts for the build."""
        environ = bottle.request.environ
        if self.counter is None or environ["REQUEST_METHOD"] != "GET":
            return False
        key = counts.file_key(build if file is None else file)
        self.counter.count(project.slug, build.number, key, environ.get("REMOTE_ADDR"))
        return True

    def counted_now(self, tally) -> CountedVersion:
        """The CountedVersion of `tally` and the store's current snapshot, the same object
        while neither changes."""
        snapshot = self.store.snapshot()
        with self._counted_lock:
            version = self._counted[0]
            if version is None or version.tally is not tally or version.snapshot is not snapshot:
                version = self._counted[0] = CountedVersion(tally, snapshot)
            return version

    def served_urls(self, snapshot: Snapshot) -> dict:
        """{downloadUrl as served: {project slug: (project, build)}} of every build served in
        `snapshot`, made once per snapshot. Builds may share a downloadUrl, in one project
        (the highest-numbered is kept) or across projects (each is kept)."""
        made_for, index = self._by_url[0]
        if made_for() is not snapshot:
            index = {}
            for project in snapshot.projects.values():
                for build in project.builds:  # ascending: the highest number stays
                    url = self.shapes.download_url(project, build)
                    index.setdefault(url, {})[project.slug] = (project, build)
            # One assignment: readers see both or neither.
            self._by_url[0] = weakref.ref(snapshot), index
        return index
