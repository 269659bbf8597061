"""A build's extra files kept (issue 35): their objects count as used, `check` and the store's
look at the kept files take them, and a yank, an unyank and a purge act on the whole build."""

import hashlib
import json
import re
import xml.etree.ElementTree as ET

import pytest
import webtest

from buildshelf import cli, counts, server
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
    assert run(data_dir, "check", "--verbose") == 0  # the yanked files' room: asked for
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


# --- publish --extra-file, --extra-url ----------------------------------------------------------


def files(tmp_path, **contents):
    """Files in tmp_path named by the keywords (their '_' written '-'), with these bytes."""
    paths = {}
    for name, data in contents.items():
        paths[name] = tmp_path / (name.replace("_", "-") + ".jar")
        paths[name].write_bytes(data)
    return paths


def publish(data_dir, number, *flags):
    return cli.main(["publish", "alpha", "--data", str(data_dir), "--build", str(number),
                     "--channel", "1.21", "--timestamp", "1700000000000", *flags])  # fmt: skip


def extra_flags(paths):
    return [
        "--file", str(paths["alpha_9"]),
        "--extra-file", f"server:mojmap={paths['alpha_9_mojmap']}",
        "--extra-file", f"dev:bundle={paths['alpha_9_bundle']}",
        "--extra-url", "x:y=https://cdn.example.org/alpha-9-x.jar",
        "--extra-sha256", f"x:y={'AB' * 32}", "--extra-size", "x:y=12",
    ]  # fmt: skip


def test_publish_keeps_every_file_and_writes_the_extras_by_key(data_dir, tmp_path, capsys):
    paths = files(tmp_path, alpha_9=PRIMARY, alpha_9_mojmap=MOJMAP, alpha_9_bundle=BUNDLE)
    assert publish(data_dir, 9, *extra_flags(paths)) == 0
    assert capsys.readouterr().out == "published build 9 of alpha\n"
    written = build_in_file(data_dir, 9)
    assert (written["file"], written["sha256"]) == ("alpha-9.jar", sha(PRIMARY))
    assert written["downloads"] == {
        "dev:bundle": {"sha256": sha(BUNDLE), "size": len(BUNDLE), "file": "alpha-9-bundle.jar"},
        "server:mojmap": {"sha256": sha(MOJMAP), "size": len(MOJMAP), "file": "alpha-9-mojmap.jar"},
        "x:y": {
            "downloadUrl": "https://cdn.example.org/alpha-9-x.jar",
            "sha256": "ab" * 32,
            "size": 12,
        },
    }
    assert list(written["downloads"]) == ["dev:bundle", "server:mojmap", "x:y"]
    assert objects(data_dir) == sorted(sha(data) for data in (PRIMARY, MOJMAP, BUNDLE))
    store = store_module.Store(data_dir, check_interval=0)
    served = store.snapshot().project("alpha").build(9)
    assert [key for key, _ in served.files] == [
        "server:default",
        "dev:bundle",
        "server:mojmap",
        "x:y",
    ]


def test_an_identical_retry_writes_nothing_and_one_with_other_files_needs_replace(
    data_dir, tmp_path, capsys
):
    paths = files(tmp_path, alpha_9=PRIMARY, alpha_9_mojmap=MOJMAP, alpha_9_bundle=BUNDLE)
    assert publish(data_dir, 9, *extra_flags(paths)) == 0
    path = data_dir / "alpha.json"
    before, stat = path.read_bytes(), path.stat()
    capsys.readouterr()
    assert publish(data_dir, 9, *extra_flags(paths)) == 0
    assert (
        capsys.readouterr().out == "build 9 of alpha is already there as given: nothing changed\n"
    )
    assert path.read_bytes() == before and path.stat().st_mtime_ns == stat.st_mtime_ns
    object_path(data_dir, MOJMAP).unlink()  # a retry puts back an extra's missing object
    assert publish(data_dir, 9, *extra_flags(paths)) == 0
    assert capsys.readouterr().out == (
        "build 9 of alpha is already there as given: restored its missing file "
        f"{object_path(data_dir, MOJMAP)}\n"
    )
    paths["alpha_9_bundle"].write_bytes(b"another bundle")
    assert publish(data_dir, 9, *extra_flags(paths)) == 1
    assert "build 9 is already there with another downloads: give --replace" in (
        capsys.readouterr().err
    )
    assert path.read_bytes() == before  # and the object stored for it is gone:
    assert objects(data_dir) == sorted(sha(data) for data in (PRIMARY, MOJMAP, BUNDLE))
    assert publish(data_dir, 9, *extra_flags(paths), "--replace") == 0
    out = capsys.readouterr().out
    assert out.startswith("replaced build 9 of alpha\n")
    assert f"deleted {object_path(data_dir, BUNDLE)} (" in out  # the old bundle, unused now
    assert build_in_file(data_dir, 9)["downloads"]["dev:bundle"]["sha256"] == sha(b"another bundle")


def test_a_failure_anywhere_publishes_nothing_and_leaves_no_object(data_dir, tmp_path, capsys):
    paths = files(tmp_path, alpha_9=PRIMARY, alpha_9_mojmap=MOJMAP, alpha_9_bundle=BUNDLE)
    before = (data_dir / "alpha.json").read_bytes()
    paths["alpha_9_bundle"].unlink()  # the last file copied is not there
    assert publish(data_dir, 9, *extra_flags(paths)) == 1
    assert "alpha-9-bundle.jar: No such file or directory" in capsys.readouterr().err
    assert (data_dir / "alpha.json").read_bytes() == before and objects(data_dir) == []
    paths = files(tmp_path, alpha_9_bundle=BUNDLE)
    flags = extra_flags(files(tmp_path, alpha_9=PRIMARY, alpha_9_mojmap=MOJMAP) | paths)
    assert publish(data_dir, 9, *flags, "--extra-sha256", f"dev:bundle={'0' * 64}") == 1
    assert "sha256 mismatch" in capsys.readouterr().err
    assert (data_dir / "alpha.json").read_bytes() == before and objects(data_dir) == []


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--extra-file", "dev:bundle=x/alpha-9.jar"],
            "build 9: downloads[\"dev:bundle\"]: its file name 'alpha-9.jar' is also the primary "
            "file's: each file of a build has a name of its own",
        ),
        (
            [
                "--extra-url",
                "a:b=https://a.example/x.jar",
                "--extra-url",
                "c:d=https://b.example/x.jar",
            ],
            'build 9: downloads["c:d"]: its file name \'x.jar\' is also downloads["a:b"]\'s: each '
            "file of a build has a name of its own",
        ),
        (
            ["--extra-url", "a:b=ftp://a.example/x.jar"],
            "build 9: downloads[\"a:b\"]: 'downloadUrl' must be an absolute http(s) URL",
        ),
        (
            [arg for n in range(17) for arg in ("--extra-url", f"a:b{n}=https://a.example/{n}")],
            "build 9: it has 17 extra files: a publish takes 16 at most",
        ),
    ],
)
def test_extra_files_breaking_a_rule_are_refused_before_a_byte_is_stored(
    data_dir, tmp_path, capsys, flags, message
):
    paths = files(tmp_path, alpha_9=PRIMARY)
    before = (data_dir / "alpha.json").read_bytes()
    assert publish(data_dir, 9, "--file", str(paths["alpha_9"]), *flags) == 1
    assert message in capsys.readouterr().err
    assert (data_dir / "alpha.json").read_bytes() == before and objects(data_dir) == []


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--extra-file", "server:mojmap"],
            "argument --extra-file: 'server:mojmap' is not KEY=PATH",
        ),
        (
            ["--extra-url", "mojmap=https://a.example/m.jar"],
            "the key 'mojmap' must be kind:variant",
        ),
        (["--extra-file", "Server:Mojmap=m.jar"], "the key 'Server:Mojmap' must be kind:variant"),
        (
            ["--extra-file", "server:default=m.jar"],
            "the key 'server:default' is the primary file's: the build's own downloadUrl or "
            "file is that file",
        ),
        (
            ["--extra-file", "a:b=m.jar", "--extra-url", "a:b=https://a.example/m.jar"],
            "the extra file a:b is given twice: give each key once",
        ),
        (["--extra-file", "a:b=-"], "--extra-file KEY=- is not taken: only --file reads standard"),
        (
            ["--extra-sha256", f"a:b={'0' * 64}"],
            "--extra-sha256 a:b: no --extra-file or --extra-url",
        ),
        (["--extra-sha256", "a:b=00"], "argument --extra-sha256: '00' is not a SHA-256"),
        (
            ["--extra-file", "a:b=m.jar", "--extra-size", "a:b=3"],
            "--extra-size goes with --extra-url: a kept file's size is measured",
        ),
        (
            ["--extra-url", "a:b=https://a.example/m.jar", "--extra-size", "a:b=3"],
            "--extra-sha256 and --extra-size go together for a:b: both or neither",
        ),
    ],
)
def test_bad_extra_file_arguments_are_bad_usage(data_dir, capsys, flags, message):
    with pytest.raises(SystemExit) as exited:
        publish(data_dir, 9, "--download-url", "https://a.example/9.jar", *flags)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err.splitlines()[-1]


# --- a kept extra file served at its own URL (issue 35, point 2) --------------------------------


def extra_url(data_dir, number=9, data=MOJMAP, name="alpha-9-mojmap.jar"):
    return f"/downloads/alpha/{number}/{sha(data)}/{name}"


def serving(data_dir, tmp_path):
    """(a client of an app over data_dir counting downloads, its counter)."""
    counter = counts.Counter(str(tmp_path / "state"))
    store = store_module.Store(data_dir, check_interval=0)
    app = server.make_app(store, counter=counter)
    return webtest.TestApp(app, extra_environ={"REMOTE_ADDR": "198.51.100.7"}), counter


def test_a_kept_extra_file_is_served_as_the_primary_is(data_dir, tmp_path):
    write_builds(data_dir, build_with_extras(data_dir, 9))
    client, counter = serving(data_dir, tmp_path)
    url = extra_url(data_dir)
    got = client.get(url)
    assert got.body == MOJMAP and got.headers["ETag"] == f'"{sha(MOJMAP)}"'
    assert got.headers["Content-Disposition"] == 'attachment; filename="alpha-9-mojmap.jar"'
    part = client.get(url, headers={"Range": "bytes=10-19"}, status=206)
    assert part.body == MOJMAP[10:20]
    assert client.get(url, headers={"If-None-Match": f'"{sha(MOJMAP)}"'}, status=304)
    assert client.get(url + ".sha256").text == f"{sha(MOJMAP)}  alpha-9-mojmap.jar\n"
    assert client.get(extra_url(data_dir, name="alpha-9-bundle.jar"), status=404)
    bundle = extra_url(data_dir, data=BUNDLE, name="alpha-9-bundle.jar")
    assert client.get(bundle).body == BUNDLE  # the build counted once for this client, and
    assert client.get(bundle, extra_environ={"REMOTE_ADDR": "203.0.113.9"}).body == BUNDLE
    # a download of an extra file counts for its build, under its own bytes
    counter.flush()
    rows = {(s, n, key): c for (s, n, key, _), c in counter.tally().rows.items()}
    assert rows == {("alpha", 9, sha(MOJMAP)): 1, ("alpha", 9, sha(BUNDLE)): 1}


def test_a_yanked_build_s_extra_file_is_gone_and_one_elsewhere_has_no_url_here(data_dir, tmp_path):
    write_builds(data_dir, build_with_extras(data_dir, 9, yankedAt=1700000500000))
    client, _ = serving(data_dir, tmp_path)
    gone = client.get(extra_url(data_dir), status=410)
    assert gone.json["code"] == "build_yanked" and gone.json["latest"]["buildNumber"] == 1
    assert client.get(extra_url(data_dir) + ".sha256", status=410)
    assert client.get("/downloads/alpha/9/" + "ab" * 32 + "/alpha-9-x.jar", status=404)


# --- the v2 `downloads` map (issue 35, point 2) -------------------------------------------------


def test_a_build_with_extra_files_is_served_with_its_files_by_key_in_fill_s_shape(
    data_dir, tmp_path
):
    from test_openapi import validate  # the OpenAPI document's Build schema, strictly

    write_builds(data_dir, build_with_extras(data_dir, 9))
    client, _ = serving(data_dir, tmp_path)
    served = client.get(API + "/builds/latest?project=alpha").json
    plain = client.get(API + "/builds?project=alpha").json[0]
    base = "http://127.0.0.1:8080"
    assert list(served) == list(plain) + ["sha256", "size", "downloads"]  # the spec's, then
    assert served["downloads"] == {
        "server:default": {
            "name": "alpha-9.jar",
            "checksums": {"sha256": sha(PRIMARY)},
            "size": len(PRIMARY),
            "url": served["downloadUrl"],
        },
        "dev:bundle": {
            "name": "alpha-9-bundle.jar",
            "checksums": {"sha256": sha(BUNDLE)},
            "size": len(BUNDLE),
            "url": base + extra_url(data_dir, data=BUNDLE, name="alpha-9-bundle.jar"),
        },
        "server:mojmap": {
            "name": "alpha-9-mojmap.jar",
            "checksums": {"sha256": sha(MOJMAP)},
            "size": len(MOJMAP),
            "url": base + extra_url(data_dir),
        },
        # kept elsewhere, its data file giving no sha256 nor size: none is made up
        "x:y": {"name": "alpha-9-x.jar", "url": "https://cdn.example.org/alpha-9-x.jar"},
    }
    assert "downloads" not in plain  # a build without extra files, as before
    validate(served, "#/components/schemas/Build")
    for name, file in served["downloads"].items():
        if name != "x:y":
            assert client.get(file["url"].removeprefix(base)).body in (PRIMARY, MOJMAP, BUNDLE)


def test_the_upstream_mode_never_serves_the_map(data_dir):
    write_builds(data_dir, build_with_extras(data_dir, 9))
    store = store_module.Store(data_dir, check_interval=0)
    upstream = webtest.TestApp(server.make_app(store, compat="upstream"))
    served = upstream.get(API + "/builds/latest?project=alpha").json
    assert served["buildNumber"] == 9 and "downloads" not in served


# --- /downloads/latest?download=KEY -------------------------------------------------------------


def test_downloads_latest_picks_a_file_by_its_key_the_primary_by_default(data_dir, tmp_path):
    write_builds(data_dir, build_with_extras(data_dir, 9))
    client, counter = serving(data_dir, tmp_path)
    base, latest = "http://127.0.0.1:8080", "/downloads/latest?project=alpha"
    primary = client.get(latest, status=302).location
    assert primary == base + f"/downloads/alpha/9/{sha(PRIMARY)}/alpha-9.jar"
    assert client.get(latest + "&download=server:default", status=302).location == primary
    assert client.get(latest + "&download=", status=302).location == primary
    mojmap = client.get(latest + "&download=server:mojmap", status=302,
                        extra_environ={"REMOTE_ADDR": "203.0.113.9"})  # fmt: skip
    assert mojmap.location == base + extra_url(data_dir)
    elsewhere = client.get(latest + "&download=x:y", status=302)
    assert elsewhere.location == "https://cdn.example.org/alpha-9-x.jar"
    unknown = client.get(latest + "&download=dev:nope", status=404)
    assert unknown.json == {
        "error": "build 9 of 'alpha' has no file 'dev:nope': its files are server:default, "
        "dev:bundle, server:mojmap, x:y",
        "code": "unknown_download",
    }
    assert client.get(latest + "&download=a:b&download=c:d", status=400).json["code"] == (
        "repeated_parameter"
    )
    # each redirect counts for the build, under the file it leads to
    counter.flush()
    rows = {(s, n, key): c for (s, n, key, _), c in counter.tally().rows.items()}
    assert rows == {("alpha", 9, sha(PRIMARY)): 1, ("alpha", 9, sha(MOJMAP)): 1}


def test_a_build_without_extra_files_has_only_its_primary_to_pick(data_dir, tmp_path):
    client, _ = serving(data_dir, tmp_path)
    latest = "/downloads/latest?project=alpha&channel=1.21"
    assert client.get(latest + "&download=server:default", status=302)
    unknown = client.get(latest + "&download=server:mojmap", status=404).json["error"]
    assert unknown.endswith("has no file 'server:mojmap': its files are server:default")


# --- the update check by any file's sha256 ------------------------------------------------------


def test_the_update_check_finds_a_build_by_the_sha256_of_any_of_its_files(data_dir, tmp_path):
    write_builds(data_dir, build_with_extras(data_dir, 9), make_build(10))
    client, _ = serving(data_dir, tmp_path)
    check = API + "/builds/check?project=alpha&sha256="
    for data in (PRIMARY, MOJMAP, BUNDLE):
        answer = client.get(check + sha(data)).json
        assert (answer["status"], answer["behind"]) == ("outdated", 1)
        assert answer["latest"]["buildNumber"] == 10
    unknown = client.get(check + "ef" * 32, status=404).json
    assert (unknown["code"], unknown["status"]) == ("unknown_artifact", "unknown")
    write_builds(data_dir, build_with_extras(data_dir, 9, yankedAt=1700000500000))
    client, _ = serving(data_dir, tmp_path)
    assert client.get(check + sha(MOJMAP)).json["status"] == "yanked"


# --- the pages and the feed ---------------------------------------------------------------------


def test_the_project_page_lists_each_extra_file_with_its_size_and_sha256(data_dir, tmp_path):
    write_builds(data_dir, build_with_extras(data_dir, 9))
    client, _ = serving(data_dir, tmp_path)
    page = client.get("/projects/alpha").html
    [extras] = page.select("#build-9")[0].find_parent("article").select("ul.extras")
    items = extras.select("li")
    assert [item.select_one(".key").text for item in items] == [
        "dev:bundle",
        "server:mojmap",
        "x:y",
    ]
    mojmap = items[1]
    assert mojmap.select_one("a").text == "alpha-9-mojmap.jar"
    assert mojmap.select_one("a")["href"].endswith(extra_url(data_dir))
    assert mojmap.select_one("code.sha256").text == sha(MOJMAP)
    assert mojmap.select("a")[-1]["href"].endswith(extra_url(data_dir) + ".sha256")
    assert items[2].select_one("a")["href"] == "https://cdn.example.org/alpha-9-x.jar"
    assert items[2].select_one("code") is None  # no sha256 known: none shown
    assert not page.select("#build-1")[0].find_parent("article").select("ul.extras")


def test_the_feed_links_each_extra_file_as_an_enclosure(data_dir, tmp_path):
    write_builds(data_dir, build_with_extras(data_dir, 9))
    client, _ = serving(data_dir, tmp_path)
    feed = ET.fromstring(client.get(API + "/feed?project=alpha").body)
    atom = "{http://www.w3.org/2005/Atom}"
    [entry] = [e for e in feed.iter(atom + "entry") if e.find(atom + "id").text.endswith("/9")]
    enclosures = [
        link.attrib for link in entry.iter(atom + "link") if link.get("rel") == "enclosure"
    ]
    assert [link.get("title") for link in enclosures] == [
        None,  # the primary's, as before
        "dev:bundle: alpha-9-bundle.jar",
        "server:mojmap: alpha-9-mojmap.jar",
        "x:y: alpha-9-x.jar",
    ]
    assert enclosures[2]["length"] == str(len(MOJMAP)) and "length" not in enclosures[3]
    assert enclosures[3]["href"] == "https://cdn.example.org/alpha-9-x.jar"
