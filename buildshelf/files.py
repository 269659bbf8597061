"""Facts about files on disk that several modules rely on, written once: how a file is opened
without blocking and known to be a regular file, how a directory is synced to disk, which
mode a new file gets, and how all of some bytes are written to a descriptor."""

import errno
import os
import stat

# What a file that is not a regular one is, as a message names it. (A socket is not here:
# opening one fails with ENXIO before any fstat.)
_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFLNK: "a symbolic link",
}


class NotRegular(OSError):
    """The path names something other than a regular file: `kind` says what ("a FIFO")."""

    def __init__(self, kind: str):
        super().__init__(errno.EINVAL, "not a regular file")
        self.kind = kind


def open_regular(path, follow_symlinks: bool = True) -> tuple[int, os.stat_result]:
    """A read-only descriptor on the regular file at `path` (close-on-exec), and its stat.

    Opened without blocking: opening a FIFO put in a file's place would otherwise wait for a
    writer forever (and a device may block too). Raises NotRegular for anything but a regular
    file (and, unless `follow_symlinks`, for a symbolic link), or the OSError of the open.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as error:
        if error.errno == errno.ELOOP and not follow_symlinks:
            raise NotRegular(_KINDS[stat.S_IFLNK]) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(_KINDS.get(stat.S_IFMT(st.st_mode), "something else"))
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def fsync_directory(path) -> None:
    """Flush the directory at `path` to disk, so that a rename or a new entry in it survives a
    crash, as the file it names does once fsynced."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def umask() -> int:
    """The process's umask, in force now.

    Read from /proc/self/status where Linux gives it (4.7 and later): os.umask() can only read
    it by setting it, and files other threads create meanwhile would get the value set. Only
    where there is no other way is it set, to the strictest mask, and put back.
    """
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def new_file_mode(permissions: int) -> int:
    """The mode a file created now with `permissions` would get from open(): what the umask
    leaves of them. For files made private (by mkstemp) and given their mode once written."""
    return permissions & ~umask()


def write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to the descriptor `fd` (os.write may write part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
