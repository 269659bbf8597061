"""A build's extra files kept (issue 35): their objects count as used, `check` and the store's
look at the kept files take them, and a yank, an unyank and a purge act on the whole build."""

import hashlib
import json
import re

import webtest

from buildshelf import cli, server
from buildshelf import store as store_module
from buildshelf.kept import artifacts
from helpers import build_in_file, make_build, make_project, objects, write_file

API = "/api/v2"
PRIMARY, MOJMAP, BUNDLE = b"the server jar " * 50, b"the mojmap jar " * 40, b"the bundle " * 30


def sha(data):
    return hashlib.sha256(data).hexdigest()


def object_path(data_dir, data):
    return data_dir / "artifacts" / sha(data)[:2] / sha(data)


def kept(data_dir, data, name):
    """A kept file's keys, its bytes stored in data_dir's artifact store."""
    stored = artifacts.store_stream(str(data_dir / "artifacts"), iter([data, b""]).__next__, name)
    return {"sha256": stored.sha256, "size": stored.size, "file": name}


def build_with_extras(data_dir, number, primary=PRIMARY, **fields):
    """Build `number` of alpha, its primary and two extras kept, a third file elsewhere."""
    build = make_build(number, **kept(data_dir, primary, f"alpha-{number}.jar"), **fields)
    del build["downloadUrl"]
    build["downloads"] = {
        "dev:bundle": kept(data_dir, BUNDLE, f"alpha-{number}-bundle.jar"),
        "server:mojmap": kept(data_dir, MOJMAP, f"alpha-{number}-mojmap.jar"),
        "x:y": {"downloadUrl": f"https://cdn.example.org/alpha-{number}-x.jar"},
    }
    return build


def write_builds(data_dir, *builds):
    write_file(data_dir / "alpha.json", make_project([make_build(1), *builds]))


def run(data_dir, *argv):
    return cli.main([*argv, "--data", str(data_dir)])


def test_check_checks_the_kept_extras_and_counts_their_objects_used(data_dir, capsys):
    write_builds(data_dir, build_with_extras(data_dir, 9))
    assert run(data_dir, "check", "--verify") == 0
    assert capsys.readouterr().out == ""  # no object unused: the extras name theirs
    object_path(data_dir, MOJMAP).unlink()
    path = object_path(data_dir, BUNDLE)
    path.chmod(0o644)
    path.write_bytes(BUNDLE[::-1])  # damaged: the same size, other bytes
    assert run(data_dir, "check") == 1
    assert capsys.readouterr().out == (
        f"{data_dir / 'alpha.json'}: build 9, file alpha-9-mojmap.jar: its object is missing\n"
    )
    assert run(data_dir, "check", "--verify") == 1
    assert "build 9, file alpha-9-bundle.jar: its object holds other bytes" in (
        capsys.readouterr().out
    )


def test_check_prune_keeps_an_object_that_only_an_extra_names(data_dir, capsys):
    write_builds(data_dir, build_with_extras(data_dir, 9))
    kept(data_dir, b"no build names these", "stray.jar")
    assert run(data_dir, "check", "--prune") == 0
    assert capsys.readouterr().out.count("deleted ") == 1
    assert objects(data_dir) == sorted(sha(data) for data in (PRIMARY, MOJMAP, BUNDLE))


def test_the_store_and_healthz_name_a_kept_extra_whose_object_is_missing(data_dir):
    build = make_build(9)  # its primary elsewhere: only its extra is kept
    build["downloads"] = {"server:mojmap": kept(data_dir, MOJMAP, "alpha-9-mojmap.jar")}
    write_builds(data_dir, build)
    store = store_module.Store(data_dir, check_interval=0)
    client = webtest.TestApp(server.make_app(store))
    assert store.unavailable() == () and client.get("/healthz").json["status"] == "ok"
    object_path(data_dir, MOJMAP).unlink()
    store.refresh()
    [(slug, served, file, problem)] = store.unavailable()
    assert (slug, served.number, file.file) == ("alpha", 9, "alpha-9-mojmap.jar")
    assert client.get("/healthz").json["unavailableFiles"] == [
        {
            "project": "alpha",
            "build": 9,
            "file": "alpha-9-mojmap.jar",
            "problem": f"{object_path(data_dir, MOJMAP)} is missing",
        }
    ]


def test_a_yank_keeps_every_file_and_an_unyank_serves_the_build_again(data_dir, capsys):
    write_builds(data_dir, build_with_extras(data_dir, 9))
    before = build_in_file(data_dir, 9)
    assert run(data_dir, "yank", "alpha", "9") == 0
    paths = ", ".join(str(object_path(data_dir, data)) for data in (PRIMARY, BUNDLE, MOJMAP))
    assert capsys.readouterr().out == (
        f"yanked build 9 of alpha: kept its files {paths}; 'buildshelf unyank alpha 9' "
        "restores it\n"
    )
    assert len(objects(data_dir)) == 3
    assert run(data_dir, "unyank", "alpha", "9") == 0
    assert build_in_file(data_dir, 9) == before


def test_a_yank_purge_deletes_every_file_of_the_build_no_other_build_uses(data_dir, capsys):
    other = make_build(10)  # served, and names the bundle's bytes as its own extra
    other["downloads"] = {"dev:bundle": kept(data_dir, BUNDLE, "alpha-10-bundle.jar")}
    write_builds(data_dir, build_with_extras(data_dir, 9), other)
    assert run(data_dir, "yank", "alpha", "9", "--purge") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        f"yanked build 9 of alpha: kept its file {object_path(data_dir, BUNDLE)}, which a "
        "build served uses"
    )
    assert sorted(line.split(" (")[0] for line in out[1:]) == sorted(
        f"deleted {object_path(data_dir, data)}" for data in (PRIMARY, MOJMAP)
    )
    assert objects(data_dir) == [sha(BUNDLE)]
    assert run(data_dir, "unyank", "alpha", "9") == 1
    assert capsys.readouterr().err == (
        "buildshelf unyank: build 9 of alpha cannot be served again: its files alpha-9.jar, "
        f"alpha-9-mojmap.jar were purged from {data_dir / 'artifacts'}. Publish it again: "
        "'buildshelf publish alpha --build 9 --file alpha-9.jar --extra-file "
        "dev:bundle=alpha-9-bundle.jar --extra-file server:mojmap=alpha-9-mojmap.jar "
        "--extra-url x:y=https://cdn.example.org/alpha-9-x.jar --replace' (with its channel "
        "and timestamp)\n"
    )


def test_an_unyank_refuses_a_build_whose_kept_extra_alone_was_purged(data_dir, capsys):
    build = make_build(9, yankedAt=1700000500000)
    build["downloads"] = {"server:mojmap": kept(data_dir, MOJMAP, "alpha-9-mojmap.jar")}
    write_builds(data_dir, build)
    object_path(data_dir, MOJMAP).unlink()
    assert run(data_dir, "unyank", "alpha", "9") == 1
    err = capsys.readouterr().err
    assert "its file alpha-9-mojmap.jar was purged" in err
    assert "--download-url https://ci.example.org/job/Alpha/9/artifact/alpha-9.jar" in err


def test_purge_deletes_each_kept_file_of_a_build_yanked_long_ago_and_says_which(data_dir, capsys):
    yanked = build_with_extras(data_dir, 9, yankedAt=1700000500000)  # in 2023
    yanked["downloads"]["x:z"] = kept(data_dir, PRIMARY, "same-bytes-as-the-primary.jar")
    other = make_build(10)
    other["downloads"] = {"dev:bundle": kept(data_dir, BUNDLE, "alpha-10-bundle.jar")}
    write_builds(data_dir, yanked, other)
    assert run(data_dir, "check") == 0
    out = capsys.readouterr().out
    assert "3 yanked build files kept: " in out  # three objects: two files share the bytes
    assert f"yanked build 9 of alpha keeps {object_path(data_dir, MOJMAP)} (" in out
    assert run(data_dir, "purge") == 0
    lines = re.sub(r" \([0-9.]+ (bytes|KiB)\)", "", capsys.readouterr().out).splitlines()
    assert lines == [
        f"deleted {object_path(data_dir, PRIMARY)}, the file of yanked build 9 of alpha",
        f"kept {object_path(data_dir, BUNDLE)}, the dev:bundle file of yanked build 9 of alpha: "
        "another build uses it",
        f"deleted {object_path(data_dir, MOJMAP)}, the server:mojmap file of yanked build 9 of "
        "alpha",
    ]
    assert objects(data_dir) == [sha(BUNDLE)]
    assert json.loads((data_dir / "alpha.json").read_text())["builds"][1] == yanked
