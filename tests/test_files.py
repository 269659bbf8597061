"""files.py: opening a regular file without blocking, syncing a directory."""

import os

import pytest

from buildshelf import files
from buildshelf.kept import artifacts
from buildshelf.writing import writer


@pytest.fixture
def no_fd_leaked():
    before = sorted(os.listdir("/proc/self/fd"))
    yield
    assert sorted(os.listdir("/proc/self/fd")) == before


@pytest.mark.parametrize("follow_symlinks", [True, False])
def test_a_regular_file_is_opened_read_only_and_not_inherited(tmp_path, follow_symlinks):
    path = tmp_path / "a.json"
    path.write_bytes(b"{}")
    fd, st = files.open_regular(path, follow_symlinks)
    try:
        assert (os.read(fd, 10), st.st_size, os.get_inheritable(fd)) == (b"{}", 2, False)
        with pytest.raises(OSError):
            os.write(fd, b"x")
    finally:
        os.close(fd)


def make_fifo(path):
    os.mkfifo(path)


@pytest.mark.parametrize(
    "make, kind",
    [(os.mkdir, "a directory"), (make_fifo, "a FIFO")],
)
@pytest.mark.parametrize("follow_symlinks", [True, False])
def test_anything_else_is_refused_without_blocking(
    tmp_path, make, kind, follow_symlinks, no_fd_leaked
):
    path = tmp_path / "x"
    make(path)
    # A FIFO without a writer would block a plain open for ever.
    with pytest.raises(files.NotRegular) as refused:
        files.open_regular(path, follow_symlinks)
    assert (refused.value.kind, refused.value.strerror) == (kind, "not a regular file")


def test_a_device_is_refused(no_fd_leaked):
    with pytest.raises(files.NotRegular) as refused:
        files.open_regular("/dev/null")
    assert refused.value.kind == "a character device"


def test_a_symbolic_link_is_followed_or_refused(tmp_path, no_fd_leaked):
    (tmp_path / "real").write_bytes(b"x")
    os.symlink(tmp_path / "real", tmp_path / "link")
    fd, st = files.open_regular(tmp_path / "link")
    os.close(fd)
    assert st.st_size == 1
    with pytest.raises(files.NotRegular) as refused:
        files.open_regular(tmp_path / "link", follow_symlinks=False)
    assert refused.value.kind == "a symbolic link"
    os.symlink(tmp_path / "fifo", tmp_path / "to-fifo")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(files.NotRegular) as refused:
        files.open_regular(tmp_path / "to-fifo")
    assert refused.value.kind == "a FIFO"


def test_a_missing_file_raises_the_open_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        files.open_regular(tmp_path / "nothing")


def test_a_directory_is_synced(tmp_path, monkeypatch, no_fd_leaked):
    synced = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    files.fsync_directory(tmp_path)
    assert synced == [str(tmp_path)]


@pytest.mark.parametrize(
    "name, error", [("missing", FileNotFoundError), ("file", NotADirectoryError)]
)
def test_only_a_directory_is_synced(tmp_path, name, error, no_fd_leaked):
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(error):
        files.fsync_directory(tmp_path / name)


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield
    os.umask(old)


@pytest.mark.system
def test_the_umask_is_read_without_changing_it(umask_027, monkeypatch):
    def refused(mask):
        raise AssertionError(f"os.umask({mask:o}) called: it sets the umask to read it")

    monkeypatch.setattr(files.os, "umask", refused)
    assert files.umask() == 0o027
    assert files.new_file_mode(0o666) == 0o640


def test_new_files_and_objects_follow_the_umask_of_the_moment(tmp_path, umask_027):
    # The umask is the one in force when the file is made, not the one at import.
    data = tmp_path / "data"
    data.mkdir()
    writer.add_project(
        str(data), "gamma", "G", "https://ci.example.org/", "https://jd.example.org/"
    )
    source = tmp_path / "a.jar"
    source.write_bytes(b"PK")
    stored = artifacts.store_file(str(tmp_path / "store"), str(source))
    modes = [os.stat(path).st_mode & 0o7777 for path in (data / "gamma.json", stored.path)]
    assert modes == [0o640, 0o440]
