"""deploy/: the systemd unit and the nginx site agree with the server and with each other.

bench/nginx.py runs them for real (nginx -t, systemd-analyze verify, a load test); these
tests need neither tool and catch the drift: a port changed in one place, a drain longer
than systemd waits, a README pointing elsewhere.
"""

import os
import re
import shutil
import sys

import pytest

from buildshelf import cli, server, settings
from buildshelf import store as store_module
from buildshelf.serving import server as serving
from buildshelf.web.shapes import DOWNLOADS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import nginx as nginx_bench  # noqa: E402


def read(*path):
    with open(os.path.join(ROOT, *path), encoding="utf-8") as f:
        return f.read()


def unit_settings():
    """[(key, value)] of deploy/buildshelf.service: systemd allows a key more than once."""
    return [
        tuple(line.split("=", 1))
        for line in read("deploy", "buildshelf.service").split("\n")
        if re.match(r"^[A-Za-z]+=", line)
    ]


def unit_value(key):
    values = [value for name, value in unit_settings() if name == key]
    assert len(values) == 1, (key, values)
    return values[0]


def unit_environment():
    """The settings the unit runs with: its EnvironmentFile, deploy/buildshelf.env."""
    assert unit_value("EnvironmentFile") == "/etc/buildshelf/buildshelf.env"
    lines = read("deploy", "buildshelf.env").splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def test_systemd_waits_longer_than_the_server_drains():
    assert unit_value("KillSignal") == "SIGTERM"
    assert int(unit_value("TimeoutStopSec")) > serving.DRAIN_SECONDS


def test_the_unit_allows_every_connection_the_server_accepts():
    assert int(unit_value("LimitNOFILE")) >= serving.MAX_CONNECTIONS + serving.SPARE_FILES


def test_the_unit_restarts_on_failure():
    assert unit_value("Restart") == "on-failure"


def box_settings(tmp_path):
    """The settings the unit's environment gives the service, its data directory and the
    places derived from it moved to `tmp_path` (the box's is not on this machine)."""
    return cli.parse_args([], environ=dict(unit_environment(), BUILDSHELF_DATA=str(tmp_path)))


def test_the_unit_may_write_the_data_the_store_and_the_state_and_nothing_else(tmp_path):
    args = box_settings(tmp_path)
    assert unit_value("ReadWritePaths").split() == [unit_environment()["BUILDSHELF_DATA"]]
    for place in (args.artifacts, args.state):
        assert os.path.commonpath([str(tmp_path), place]) == str(tmp_path), place
    assert unit_value("ProtectSystem") == "strict"  # the rest of the tree: read-only
    assert unit_value("ProtectHome") == "yes" and unit_value("PrivateTmp") == "yes"
    assert [name for name, _ in unit_settings() if name in ("ReadOnlyPaths", "DynamicUser")] == []


def test_the_unit_runs_as_the_user_who_owns_the_data_as_cron_does():
    user = unit_value("User")
    assert unit_value("Group") == user
    setup = read("docs", "running.md").split("## Deploying", 1)[1]
    assert re.search(rf"^adduser .* {user}$", setup, re.M)
    data = unit_environment()["BUILDSHELF_DATA"]
    assert re.search(rf"^install -d -o {user} -g {user} .* {re.escape(data)}$", setup, re.M)
    cron = [line.split()[5] for line in read("deploy", "buildshelf.cron").splitlines()
            if re.match(r"^[\d*]", line)]  # fmt: skip
    assert cron and set(cron) == {user}


def test_the_unit_s_umask_lets_nginx_read_what_it_stores():
    assert unit_value("UMask") == "0022"


@pytest.mark.system
def test_systemd_analyze_verify_has_nothing_to_say_about_the_unit(tmp_path):
    if shutil.which("systemd-analyze") is None:
        message = "missing systemd-analyze: as root, apt-get install -y systemd"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail("CI must verify the unit: " + message)
        pytest.skip(message)
    returncode, said = nginx_bench.verify_unit(str(tmp_path))
    assert (returncode, said) == (0, "")


@pytest.mark.system
def test_systemd_analyze_verify_finds_a_misspelt_key(tmp_path, monkeypatch):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("missing systemd-analyze")
    unit = tmp_path / "buildshelf.service"
    unit.write_text(read("deploy", "buildshelf.service").replace("ProtectSystem=", "ProtectSytem="))
    monkeypatch.setattr(nginx_bench, "UNIT", str(unit))
    returncode, said = nginx_bench.verify_unit(str(tmp_path / "work"))
    assert "ProtectSytem" in said


def test_the_unit_runs_the_installed_command():
    assert unit_value("ExecStart") == "/opt/buildshelf/.venv/bin/buildshelf"
    assert "buildshelf = buildshelf.cli:main" in read("setup.cfg")


def test_nginx_sends_to_the_address_the_unit_serves(tmp_path):
    environment = dict(unit_environment(), BUILDSHELF_DATA=str(tmp_path))
    args = cli.parse_args([], environ=environment)
    upstream = re.search(r"upstream buildshelf \{\s*server (\S+);", read("deploy", "nginx.conf"))[1]
    assert upstream == f"{args.host}:{args.port}"


def site_location(pattern):
    """The body of the site's location whose line matches `pattern` (one level of braces)."""
    site = read("deploy", "nginx.conf")
    found = re.findall(r"^    location " + pattern + r" \{\n(.*?)^    \}", site, re.M | re.S)
    assert len(found) == 1, pattern
    return found[0]


def test_nginx_sends_kept_files_from_the_store_the_unit_hands_them_over_from(tmp_path):
    unit = unit_environment()
    args = cli.parse_args([], environ=dict(unit, BUILDSHELF_DATA=str(tmp_path)))
    store = os.path.join(unit["BUILDSHELF_DATA"], os.path.relpath(args.artifacts, tmp_path))
    objects = site_location(re.escape(args.accel_redirect + "/"))
    assert re.search(r"^\s*internal;", objects, re.M)
    assert f"alias {store}/;" in objects


def test_the_unit_names_the_site_in_download_urls():
    server_name = re.search(r"^\s*server_name (\S+);", read("deploy", "nginx.conf"), re.M)[1]
    assert unit_environment()["BUILDSHELF_PUBLIC_URL"] == f"https://{server_name}"


def regex_location(matching):
    """(pattern, body) of the site's one regular-expression location that matches `matching`."""
    found = [
        (pattern, body)
        for pattern, body in re.findall(
            r'^    location ~ "([^"]+)" \{\n(.*?)^    \}', read("deploy", "nginx.conf"), re.M | re.S
        )
        if re.search(pattern, matching)
    ]
    assert len(found) == 1, matching
    return found[0]


def directives(body):
    """{name: [arguments, ...]} of a location's directives."""
    found = {}
    for name, value in re.findall(r"^\s*(\w+)\s+([^;]*);", body, re.M):
        found.setdefault(name, []).append(value)
    return found


WRITE_ROUTE = "/api/v2/projects/alpha/builds/7"


def test_only_kept_files_and_their_sha256_lines_go_past_nginx_s_cache():
    kept = f"{DOWNLOADS}/alpha/7/{'0123456789abcdef' * 4}/alpha-7.jar"
    pattern, body = regex_location(kept)
    assert re.search(pattern, kept + ".sha256")  # a yanked build's is a 410 at once too
    for cached in (DOWNLOADS + "/latest", "/api/v2/builds", "/", WRITE_ROUTE):
        assert not re.search(pattern, cached), cached
    assert "proxy_pass http://buildshelf;" in body and "proxy_cache" not in body


def test_the_benchmark_runs_the_site_on_loopback_without_tls_and_limits(tmp_path):
    site = nginx_bench.render_site(read("deploy", "nginx.conf"), str(tmp_path), 5000, 6000)
    assert re.findall(r"^\s*listen\s+([^;]*);", site, re.M) == ["127.0.0.1:6000"]
    assert "server 127.0.0.1:5000;" in site
    assert f"proxy_cache_path {tmp_path}/cache " in site
    assert f"alias {tmp_path}/artifacts/;" in site
    assert not re.search(r"^\s*(ssl_certificate|limit_req |limit_conn )", site, re.M)
    assert "proxy_cache_revalidate on;" in site


def test_nginx_t_sees_the_site_with_tls_and_limits(tmp_path):
    site = nginx_bench.render_site(
        read("deploy", "nginx.conf"), str(tmp_path), 5000, 6000, cert=("/tmp/c.pem", "/tmp/k.pem")
    )
    assert re.findall(r"^\s*listen\s+([^;]*);", site, re.M) == ["127.0.0.1:6000 ssl http2"]
    assert "ssl_certificate     /tmp/c.pem;" in site
    assert "limit_req  zone=buildshelf burst=40 nodelay;" in site


def test_a_changed_site_stops_the_benchmark_rather_than_half_testing_it(tmp_path):
    changed = read("deploy", "nginx.conf").replace("listen 443 ssl http2;", "listen 443 ssl;")
    with pytest.raises(SystemExit, match="expected 'listen 443 ssl http2;' once, found it 0"):
        nginx_bench.render_site(changed, str(tmp_path), 5000, 6000)


def test_the_readme_points_to_the_deploy_files_instead_of_copying_them():
    readme = read("README.md")
    assert "deploy/nginx.conf" in readme and "deploy/buildshelf.service" in readme
    assert "proxy_cache_path" not in readme


def test_nginx_passes_uploads_to_the_write_route_unbuffered_and_uncached():
    pattern, body = regex_location(WRITE_ROUTE)
    said = directives(body)
    assert said["proxy_pass"] == ["http://buildshelf"]
    assert said["proxy_request_buffering"] == ["off"]
    assert not [name for name in said if name.startswith("proxy_cache")]
    # Every route that reads stays on the cached location, with its 1k limit on bodies.
    for read_route in ("/api/v2/projects", "/api/v2/projects/alpha", "/api/v2/builds/latest",
                       "/api/v2/projects/alpha/builds", "/api/v2/projects/alpha/builds/7/x"):  # fmt: skip
        assert not re.search(pattern, read_route), read_route
    assert re.search(r"^    client_max_body_size 1k;", read("deploy", "nginx.conf"), re.M)


def test_nginx_s_upload_limit_agrees_with_the_server_s(tmp_path, data_dir):
    [limit] = directives(regex_location(WRITE_ROUTE)[1])["client_max_body_size"]
    args = box_settings(tmp_path)
    assert args.max_file_mb == settings.setting("max_file_mb").default
    assert re.fullmatch(r"\d+m", limit)
    # Just above the body Buildshelf takes (the file and its framing): a larger one gets
    # Buildshelf's JSON 413, and only one larger still nginx's own.
    app = server.make_app(
        store_module.Store(data_dir, check_interval=0), max_file_mb=args.max_file_mb
    )
    assert app.max_body_bytes < int(limit[:-1]) << 20 <= app.max_body_bytes + (1 << 20)


def test_nginx_waits_for_a_large_upload_longer_than_its_defaults():
    said = directives(regex_location(WRITE_ROUTE)[1])
    for timeout in ("proxy_send_timeout", "proxy_read_timeout"):
        assert int(said[timeout][0].rstrip("s")) >= 300, timeout


def test_nginx_passes_the_authorization_header_and_logs_no_header():
    """nginx passes every request header on unless told otherwise (a location with a
    proxy_set_header of its own would also drop the server's); its default access log format,
    `combined`, logs none. The site must keep both so."""
    site = re.sub(r"#.*", "", read("deploy", "nginx.conf"))  # the directives alone
    assert "proxy_set_header" not in regex_location(WRITE_ROUTE)[1]
    assert not re.search(
        r"authorization|proxy_pass_request_headers|log_format|access_log", site, re.I
    )
