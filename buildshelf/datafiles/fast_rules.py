"""The fast path's rules of a build's files (datafile.py's `_fast_project`), each checked over
every build of a file at once, in C where it can be: the primary's integrity data and kept
file (`integrity_holds`), and the extra files of the builds' `downloads` (`extras_hold`).
Each says only whether a rule visibly holds: on any doubt the file is read build by build,
by dataformat.py's rules, which say what is wrong.
"""

from itertools import chain, compress, repeat
from operator import attrgetter, gt, is_not, not_
from typing import NamedTuple

import msgspec

from buildshelf.model import DOWNLOAD_KEY_PATTERN, FILE_NAME_PATTERN, PRIMARY_KEY, SHA256_DIGITS

LOWER_HEX_BYTES = SHA256_DIGITS.encode()
_sha256, _size, _file = attrgetter("sha256"), attrgetter("size"), attrgetter("file")
_download_url, _file_name = attrgetter("download_url"), attrgetter("file_name")


def given(values: list) -> list[bool]:
    """For each of `values`, whether the file gave it (a key absent from the file is UNSET)."""
    return list(map(is_not, values, repeat(msgspec.UNSET)))


def integrity_holds(with_integrity, sha256s, sizes, files, kept, download_urls) -> bool:
    """Whether the files' sha256s, sizes and names (in order, UNSET where absent) visibly
    follow the rules of integrity data (dataformat._integrity); `with_integrity` says which
    files have a sha256, `kept` which have a name, a file kept (None: none)."""
    if not any(with_integrity):  # nearly every file: no integrity data, so no kept file
        return sizes.count(msgspec.UNSET) == len(sizes) and kept is None
    if given(sizes) != with_integrity:  # sha256 and size go together
        return False
    if not all(with_integrity):  # a file only with them; check those that have them
        if kept is not None and any(map(gt, kept, with_integrity)):
            return False
        sha256s = list(compress(sha256s, with_integrity))
        sizes = list(compress(sizes, with_integrity))
    all_sha256s = "".join(sha256s)
    return (
        min(sizes) >= 0
        and set(map(len, sha256s)) == {64}
        and all_sha256s.isascii()
        and not all_sha256s.encode().translate(None, LOWER_HEX_BYTES)
        and (
            kept is None
            or (
                all(map(FILE_NAME_PATTERN.match, compress(files, kept)))
                and not any(compress(download_urls, kept))  # no downloadUrl beside a file
            )
        )
    )


class Extras(NamedTuple):
    """The extra files of a file's builds, as the fast path counts them: the download URLs
    of those elsewhere (checked as every URL is), and the keys read and ':' written in
    strings, for the count that finds a key written twice."""

    urls: list
    keys: int
    colons: int


NO_EXTRAS = Extras([], 0, 0)


def extras_hold(builds, downloads) -> Extras | None:
    """The Extras of `builds`, whose `downloads` are given in build order (UNSET where
    none), if they visibly follow the rules (dataformat.valid_downloads); else None."""
    with_extras = given(downloads)
    if not any(with_extras):  # nearly every file
        return NO_EXTRAS
    maps = list(compress(downloads, with_extras))
    keys = list(chain.from_iterable(maps))
    entries = list(chain.from_iterable(map(dict.values, maps)))
    if not (all(maps) and all(map(DOWNLOAD_KEY_PATTERN.match, keys)) and PRIMARY_KEY not in keys):
        return None
    sha256s, sizes, files, urls = (
        list(map(get, entries)) for get in (_sha256, _size, _file, _download_url)
    )
    with_integrity = given(sha256s)
    kept = None if files.count(msgspec.UNSET) == len(files) else given(files)
    if not integrity_holds(with_integrity, sha256s, sizes, files, kept, urls):
        return None
    # Each file of a build has its own name; a URL that gives none ('') has none to share.
    for build, extras in zip(compress(builds, with_extras), maps):
        names = [build.file_name, *map(_file_name, extras.values())]
        names = [name for name in names if name]
        if len(set(names)) != len(names):
            return None
    return Extras(
        urls if kept is None else list(compress(urls, map(not_, kept))),
        # 'downloads'; each file's key and its downloadUrl or file; its sha256 and size
        len(maps) + 2 * len(entries) + 2 * with_integrity.count(True),
        len(entries),  # the one ':' of each key, kind:variant
    )
