"""A build's extra files published over HTTP (issue 35): a part `download:KEY` for each file
kept, streamed into the artifact store as the part `file` is, and the JSON's `downloads` for
the files elsewhere; the rules and messages of `buildshelf publish`."""

import hashlib
import json

import pytest
import webtest

from buildshelf import server
from buildshelf.kept import artifacts
from buildshelf.kept.objects import Refused
from helpers import ALPHA_TOKEN, FakeCredentials, build_in_file, objects
from test_publish_http import error, leftovers, put, put_json

API = "/api/v2"
PRIMARY, MOJMAP, BUNDLE = b"the server jar " * 50, b"the mojmap jar " * 40, b"the bundle " * 30
BUILD = {"channelVersion": "1.21", "timestamp": 1700000000000}
ELSEWHERE = {"x:y": {"downloadUrl": "https://cdn.example.org/alpha-9-x.jar"}}


def sha(data):
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def web(store):
    app = server.make_app(store, credentials=FakeCredentials(), max_file_mb=1)
    return webtest.TestApp(app, extra_environ={"REMOTE_ADDR": "192.0.2.1"})


def parts(build=BUILD, bundle=BUNDLE):
    return [
        ("build", build),
        ("file", PRIMARY, "alpha-9.jar"),
        ("download:server:mojmap", MOJMAP, "alpha-9-mojmap.jar"),
        ("download:dev:bundle", bundle, "alpha-9-bundle.jar"),
    ]


def nothing_left(data_dir, before, objects_before=()):
    assert (data_dir / "alpha.json").read_bytes() == before
    assert leftovers(data_dir) == [] and objects(data_dir) == sorted(objects_before)


def test_each_part_download_key_is_kept_as_the_file_is(web, data_dir):
    claims = {"server:mojmap": {"sha256": sha(MOJMAP).upper(), "size": len(MOJMAP)}}
    resp = put(web, 9, *parts(dict(BUILD, downloads=ELSEWHERE | claims)))
    assert resp.status_int == 201, resp.body
    written = build_in_file(data_dir, 9)
    assert (written["file"], written["sha256"]) == ("alpha-9.jar", sha(PRIMARY))
    assert written["downloads"] == {
        "dev:bundle": {"sha256": sha(BUNDLE), "size": len(BUNDLE), "file": "alpha-9-bundle.jar"},
        "server:mojmap": {"sha256": sha(MOJMAP), "size": len(MOJMAP), "file": "alpha-9-mojmap.jar"},
        "x:y": ELSEWHERE["x:y"],
    }
    assert objects(data_dir) == sorted(sha(data) for data in (PRIMARY, MOJMAP, BUNDLE))
    assert leftovers(data_dir) == []
    # the same build again: 200, and nothing written
    before = (data_dir / "alpha.json").read_bytes()
    mtime = (data_dir / "alpha.json").stat().st_mtime_ns
    assert put(web, 9, *parts(dict(BUILD, downloads=ELSEWHERE | claims))).status_int == 200
    assert (data_dir / "alpha.json").read_bytes() == before
    assert (data_dir / "alpha.json").stat().st_mtime_ns == mtime


def test_a_retry_with_other_files_is_409_unless_replacing(web, data_dir):
    assert put(web, 9, *parts()).status_int == 201
    before, kept = (data_dir / "alpha.json").read_bytes(), objects(data_dir)
    message = error(put(web, 9, *parts(bundle=b"another bundle")), 409, "build_exists")
    assert message == (
        "build 9 of 'alpha' is already there with another downloads: PUT it with "
        "?replace=true to replace it (nothing written)"
    )
    nothing_left(data_dir, before, kept)
    resp = put(web, 9, *parts(bundle=b"another bundle"), query="?replace=true")
    assert resp.status_int == 200
    assert objects(data_dir) == sorted(sha(data) for data in (PRIMARY, MOJMAP, b"another bundle"))


def test_a_json_build_gives_its_extra_files_elsewhere(web, data_dir):
    build = dict(BUILD, downloadUrl="https://cdn.example.org/alpha-9.jar", downloads=ELSEWHERE)
    assert put_json(web, 9, build).status_int == 201
    assert build_in_file(data_dir, 9)["downloads"] == ELSEWHERE


@pytest.mark.parametrize(
    "changed, said",
    [
        (
            {3: ("download:Server:Mojmap", MOJMAP, "m.jar")},
            "the part 'download:Server:Mojmap': its key must be kind:variant, each of "
            "lowercase letters, digits and -, such as server:mojmap",
        ),
        (
            {3: ("download:server:default", MOJMAP, "m.jar")},
            "the part 'download:server:default': its key is the primary file's",
        ),
        (
            {4: ("download:dev:bundle", MOJMAP, "m.jar")},
            "the part 'download:dev:bundle' is given twice",
        ),
        ({3: ("download:a:b", MOJMAP)}, "the part 'download:a:b' needs a filename"),
        (
            {3: ("download:a:b", MOJMAP, "x/m.jar")},
            "the part 'download:a:b''s filename 'x/m.jar' holds a path",
        ),
        ({3: ("download:a:b", MOJMAP, ".m.jar")}, "'.m.jar' is not a valid file name"),
        (
            {3: ("download:a:b", MOJMAP, "alpha-9.jar")},
            "downloads[\"a:b\"]: its file name 'alpha-9.jar' is also the primary file's: each "
            "file of a build has a name of its own",
        ),
        (
            {0: ("build", dict(BUILD, downloads={"dev:bundle": ELSEWHERE["x:y"]}))},
            "downloads[\"dev:bundle\"] is the part 'download:dev:bundle': give it only 'sha256' "
            "and 'size', which the bytes received must match",
        ),
        (
            {0: ("build", dict(BUILD, downloads={"dev:bundle": {"sha256": "0" * 64}}))},
            'downloads["dev:bundle"]: sha256 mismatch: the file received hashes to '
            f"{sha(BUNDLE)}, 'sha256' says {'0' * 64} (nothing written)",
        ),
        (
            {0: ("build", dict(BUILD, downloads={"dev:bundle": {"size": 3}}))},
            f"downloads[\"dev:bundle\"]: 'size' is 3, but the file received is {len(BUNDLE)} bytes",
        ),
        (
            {
                0: (
                    "build",
                    dict(
                        BUILD, downloads={"a:b": {"file": "a.jar", "sha256": "0" * 64, "size": 1}}
                    ),
                )
            },
            "downloads[\"a:b\"]: a file Buildshelf keeps is sent as the part 'download:a:b'",
        ),
        (
            {0: ("build", dict(BUILD, downloads={"a:b": {"downloadUrl": "ftp://a.example/b"}}))},
            "downloads[\"a:b\"]: 'downloadUrl' must be an absolute http(s) URL",
        ),
        (
            {0: ("build", dict(BUILD, downloads=[]))},
            "'downloads' must be an object of the build's extra files by key",
        ),
        (
            {
                0: (
                    "build",
                    dict(
                        BUILD,
                        downloads={
                            f"a:{n}": {"downloadUrl": f"https://a.example/{n}"} for n in range(15)
                        },
                    ),
                )
            },
            "it has 17 extra files: a publish takes 16 at most",
        ),
        (
            {4 + n: (f"download:a:{n}", b"x", f"{n}.jar") for n in range(15)},
            "the multipart/form-data body has over 18 parts: a publish has a part 'build', a "
            "part 'file' and a part 'download:KEY' for each extra file (16 at most)",
        ),
    ],
)
def test_a_bad_extra_file_is_400_naming_it_and_leaves_nothing(web, data_dir, changed, said):
    before = (data_dir / "alpha.json").read_bytes()
    given = parts()
    given += [None] * (max(changed) + 1 - len(given))
    for index, part in changed.items():
        given[index] = part
    message = error(put(web, 9, *filter(None, given)), 400, "invalid_build")
    assert said in message
    nothing_left(data_dir, before)


def test_a_file_the_store_refuses_after_the_upload_publishes_nothing(web, data_dir, monkeypatch):
    before, placed, place = (data_dir / "alpha.json").read_bytes(), [], artifacts.place

    def fails_on_the_third(store, staged, source):  # the disk gone read-only meanwhile
        placed.append(source)
        if len(placed) == 3:
            raise Refused(f"cannot store {source}: Read-only file system")
        return place(store, staged, source)

    monkeypatch.setattr(artifacts, "place", fails_on_the_third)
    message = error(put(web, 9, *parts()), 400, "invalid_build")
    assert message.endswith(": Read-only file system")
    assert len(placed) == 3
    nothing_left(data_dir, before)  # the two objects placed before are deleted


def test_the_token_and_the_limits_are_those_of_any_publish(web, data_dir):
    resp = put(web, 9, *parts(), token=ALPHA_TOKEN.replace("s", "x"))
    assert resp.status_int == 401
    # --max-file-mb holds a whole upload (the files, with room for the part 'build', 1 MiB,
    # and the framing), and each file
    big = [(f"download:a:{n}", b"x" * (3 << 18), f"big-{n}.jar") for n in range(3)]
    message = error(put(web, 9, *parts(), *big), 413, "too_large")
    assert "the extra files of a publish count with it" in message
    big = [("download:a:b", b"x" * ((1 << 20) + 1), "big.jar")]
    message = error(put(web, 9, *parts(), *big), 413, "too_large")
    assert message == "the file may have 1 MiB at most (the server's --max-file-mb)"
    assert leftovers(data_dir) == [] and objects(data_dir) == []
    assert json.loads((data_dir / "alpha.json").read_text())  # untouched, still valid
