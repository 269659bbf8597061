"""deploy/: the systemd unit and the nginx site agree with the server and with each other.

bench/nginx.py runs them for real (nginx -t, systemd-analyze verify, a load test); these
tests need neither tool and catch the drift: a port changed in one place, a drain longer
than systemd waits, a README pointing elsewhere.
"""

import os
import re
import sys

import pytest

from buildshelf import cli
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


def test_the_unit_restarts_on_failure_as_a_dynamic_user_reading_its_data():
    assert unit_value("Restart") == "on-failure"
    assert unit_value("DynamicUser") == "yes"
    assert unit_value("ReadOnlyPaths") == unit_environment()["BUILDSHELF_DATA"]


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


def test_only_kept_files_go_past_nginx_s_cache():
    [(pattern, body)] = re.findall(
        r'^    location ~ "([^"]+)" \{\n(.*?)^    \}', read("deploy", "nginx.conf"), re.M | re.S
    )
    kept = f"{DOWNLOADS}/alpha/7/{'0123456789abcdef' * 4}/alpha-7.jar"
    assert re.search(pattern, kept)
    for cached in (kept + ".sha256", DOWNLOADS + "/latest", "/api/v2/builds", "/"):
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
