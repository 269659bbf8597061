"""Integrity data in the API: sha256 and size after the spec's seven fields, in both modes, and
a kept file's downloadUrl on --public-url."""

import pytest
import webtest

from buildshelf import server
from buildshelf import store as store_module
from helpers import make_build, make_project, write_file

SHA = "4c7b68ce5c0be31b0767eb687d1cbee97723d7b74c7b68ce5c0be31b0767eb68"
API = "/api/v2"


@pytest.fixture
def integrity_dir(tmp_path):
    directory = tmp_path / "data"
    directory.mkdir()
    kept = make_build(3, sha256=SHA, size=1234, file="alpha-3.jar")
    del kept["downloadUrl"]
    write_file(
        directory / "alpha.json",
        make_project([make_build(1), make_build(2, sha256=SHA, size=99), kept]),
    )
    return directory


def app_of(directory, **options):
    return webtest.TestApp(
        server.make_app(store_module.Store(directory, check_interval=0), **options)
    )


def test_integrity_data_follows_the_seven_fields_and_only_where_given(integrity_dir):
    builds = app_of(integrity_dir).get(API + "/builds?project=alpha").json
    assert list(builds[0]) == [
        "buildNumber", "url", "downloadUrl", "channelVersion", "timestamp", "isExperimental",
        "commits",
    ]  # fmt: skip
    assert list(builds[1])[7:] == ["sha256", "size"]
    assert (builds[1]["sha256"], builds[1]["size"]) == (SHA, 99)
    assert builds[1]["downloadUrl"] == "https://ci.example.org/job/Alpha/2/artifact/alpha-2.jar"


def test_a_kept_file_is_downloaded_from_the_public_url(integrity_dir):
    client = app_of(integrity_dir, public_url="https://builds.example.org/bs")
    latest = client.get(API + "/builds/latest?project=alpha").json
    assert (
        latest["downloadUrl"]
        == f"https://builds.example.org/bs/downloads/alpha/3/{SHA}/alpha-3.jar"
    )
    assert (latest["sha256"], latest["size"]) == (SHA, 1234)
    assert "file" not in latest
    redirect = client.get("/downloads/latest?project=alpha", status=302)
    assert redirect.location == latest["downloadUrl"]


def test_the_default_public_url_is_the_default_listener(integrity_dir):
    latest = app_of(integrity_dir).get(API + "/builds/latest?project=alpha").json
    assert latest["downloadUrl"] == f"http://127.0.0.1:8080/downloads/alpha/3/{SHA}/alpha-3.jar"


def test_the_upstream_mode_carries_integrity_data_too(integrity_dir):
    client = app_of(integrity_dir, compat="upstream", public_url="http://h:1")
    build = client.get(API + "/builds/latest?project=alpha").json
    assert list(build)[0] == "result" and list(build)[-2:] == ["sha256", "size"]
    assert build["downloadUrl"] == f"http://h:1/downloads/alpha/3/{SHA}/alpha-3.jar"


@pytest.mark.parametrize(
    "value", ["ftp://x.example/", "https://x.example/?q", "/relative", "https://x.example/#f"]
)
def test_a_bad_public_url_is_bad_usage(integrity_dir, value, capsys):
    from buildshelf import cli

    with pytest.raises(SystemExit) as raised:
        cli.parse_args(["--data", str(integrity_dir), "--public-url", value])
    assert raised.value.code == 2
    assert "--public-url" in capsys.readouterr().err


def test_the_project_page_shows_size_and_sha256_and_downloads_from_buildshelf(integrity_dir):
    page = app_of(integrity_dir, public_url="http://h:1").get("/projects/alpha").text
    assert f'1.2 KiB, SHA-256 <code class="sha256">{SHA}</code>' in page
    assert f'href="http://h:1/downloads/alpha/3/{SHA}/alpha-3.jar"' in page
    assert "99 bytes, SHA-256" in page  # a file kept elsewhere, with its integrity data


def test_feed_entries_with_a_size_carry_an_enclosure(integrity_dir):
    feed = app_of(integrity_dir, public_url="http://h:1").get(API + "/feed?project=alpha").text
    assert (
        f'<link rel="enclosure" href="http://h:1/downloads/alpha/3/{SHA}/alpha-3.jar" '
        'length="1234" />' in feed
    )
    assert 'length="99"' in feed and feed.count('rel="enclosure"') == 2
