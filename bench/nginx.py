"""The scale-out path on real nginx: deploy/nginx.conf in front of Buildshelf, on loopback.

    python bench/nginx.py                   # about a minute
    python bench/nginx.py --seconds 10 --server-args "--threads 8"
    python bench/nginx.py --config DIR      # only write the site to try it by hand

`--config DIR` writes into DIR the site as the load runs use it (plain HTTP on
127.0.0.1:--port, Buildshelf on --upstream, kept files from --store) and the main
configuration around it, prints the nginx command that runs it, and exits: docs/running.md,
"Trying the site locally". Only nginx is needed then.

Needs Debian's nginx, wrk, systemd (for systemd-analyze), openssl and curl:
apt-get install nginx wrk systemd openssl curl. Checks, and prints a table of them (exit 1 if
one fails):

1. `nginx -t` on deploy/nginx.conf as shipped but for its paths and port: TLS on with a
   self-signed certificate made with openssl, the per-client limits on.
2. `systemd-analyze verify` on deploy/buildshelf.service, in a scratch root (--root) that
   holds a copy of this machine's system units and a stub at the ExecStart path: a unit it
   finds nothing to say about passes. And `systemd-analyze security --offline` prints its
   exposure score.
3. Buildshelf (server.py with its default flags but --max-age, and as the unit runs it
   behind the site, --accel-redirect and a --public-url on nginx; access log to a file) and
   nginx with the site, listening on 127.0.0.1 only. For the run the site loses TLS (wrk
   speaks plain HTTP) and its per-client limits (every client here is 127.0.0.1, exactly what
   they are there to stop); nothing else changes.
4. Kept files through nginx, at the downloadUrl the API gives: a 64 MiB file byte for byte,
   its bytes sent by nginx (Buildshelf's answer has none); a download cut at 20 MiB and
   resumed with curl -C -; the status, headers and bytes of 11 requests (304, ranges,
   If-Range, 416...) equal to those of a second Buildshelf that sends files itself;
   FILE.sha256 never from nginx's cache; a yanked build's file and its FILE.sha256 a 410
   through nginx (JSON for curl, a page for a browser), a missing object's JSON 503; the
   store's internal location unreachable from outside.
5. Throughput on /builds/latest with 64 clients (wrk -t1 -c64), direct and through nginx,
   taking turns: through nginx must be >= 10x. The server CPU per request of each (nginx
   and Buildshelf) is printed beside it.
6. An edit to a data file, made just after nginx cached the answer (the worst case), is
   served through nginx within max-age + 2 s.
7. nginx revalidates an expired entry with If-None-Match (shown by nginx's debug log of a
   probe connection from 127.0.0.2) and Buildshelf answers 304 (counted in its access log).
8. With Buildshelf stopped, nginx still answers from its (expired) copy: STALE.

Everything is started in a temporary directory and stopped at the end, even on failure.
"""

import argparse
import hashlib
import json
import os
import random
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from urllib.parse import urlsplit

import harness
import synthetic
from harness import ROOT, free_port, wrk

SITE = os.path.join(ROOT, "deploy", "nginx.conf")
UNIT = os.path.join(ROOT, "deploy", "buildshelf.service")
CLI = ["-m", "buildshelf"]  # the command line, after the interpreter
STORE = "/srv/buildshelf/data/artifacts"  # the artifact store as deploy/ places it
LATEST = "/api/v2/builds/latest?project=p10"
PROBED = "/api/v2/projects"
PROBE_ADDRESS = "127.0.0.2"  # loopback too: nginx logs this one connection at debug level
SPEEDUP_GOAL = 10
EDIT_SLACK = 2  # seconds beyond max-age for an edit to show through nginx
KEPT = "kept"  # the project of the kept files the download checks fetch
BIG_BYTES = 64 << 20
CUT_BYTES = 20 << 20  # where the download that is resumed is cut
# What the issue lists for a kept file's 200 (Content-Range joins them on a 206).
DOWNLOAD_HEADERS = (
    "Content-Type",
    "Content-Length",
    "Content-Disposition",
    "ETag",
    "Last-Modified",
    "Cache-Control",
    "Accept-Ranges",
    "Repr-Digest",
    "X-Content-Type-Options",
    "Content-Security-Policy",
)
# Headers of the connection and the software, which nginx and waitress each write their own.
NOT_COMPARED = {"date", "server", "connection", "keep-alive"}

# The main configuration around the site: Debian's /etc/nginx/nginx.conf as it matters here
# (worker_processes auto, 768 connections a worker, sendfile, an access log line a request),
# with every path in the temporary directory.
MAIN_CONF = """\
worker_processes auto;
pid {work}/nginx.pid;
error_log {work}/error.log;
events {{
    worker_connections 768;
    debug_connection {probe};
}}
http {{
    sendfile on;
    tcp_nopush on;
    types_hash_max_size 2048;
    default_type application/octet-stream;
    log_format cache '$remote_addr "$request" $status $upstream_cache_status "$upstream_status"';
    access_log {work}/access.log cache;
    client_body_temp_path {work}/body;
    proxy_temp_path {work}/proxy;
    fastcgi_temp_path {work}/fastcgi;
    uwsgi_temp_path {work}/uwsgi;
    scgi_temp_path {work}/scgi;
    include {work}/site.conf;
}}
"""


def render_site(
    site, work, upstream_port, port, cert=None, store=None, max_file_mb=None, http_port=None
):
    """deploy/nginx.conf with temporary paths, Buildshelf's port, and 127.0.0.1:`port`.

    cert=(certificate, key) keeps TLS and the per-client limits; None drops both. `store` is
    the artifact store nginx sends files from (by default one in `work`). `max_file_mb`, for
    a Buildshelf run with another --max-file-mb, moves the write route's limit with it.
    `http_port` keeps the plain-HTTP server (the redirect to https, certbot's challenges
    served from `work`/acme); None drops it. Each text replaced must be found once, so a
    changed site fails here instead of being half-tested.
    """
    replacements = [
        ("server 127.0.0.1:8080;", f"server 127.0.0.1:{upstream_port};"),
        ("/var/cache/nginx/buildshelf", os.path.join(work, "cache")),
        (f"alias {STORE}/;", f"alias {store or os.path.join(work, 'artifacts')}/;"),
        (
            "listen 443 ssl http2;",
            f"listen 127.0.0.1:{port} ssl http2;" if cert else f"listen 127.0.0.1:{port};",
        ),
    ]
    if max_file_mb is not None:
        # The write route's limit, as far above --max-file-mb as the site puts it.
        [shipped] = re.findall(r"client_max_body_size (\d+)m;", site)
        margin = int(shipped) - int(unit_environment()["BUILDSHELF_MAX_FILE_MB"])
        replacements.append(
            (f"client_max_body_size {shipped}m;", f"client_max_body_size {max_file_mb + margin}m;")
        )
    if cert:
        replacements += [
            ("/etc/letsencrypt/live/builds.example.org/fullchain.pem", cert[0]),
            ("/etc/letsencrypt/live/builds.example.org/privkey.pem", cert[1]),
        ]
    [redirect] = re.findall(r"^server \{\n    listen 80;\n.*?^\}\n\n", site, re.M | re.S)
    if http_port is None:
        site = site.replace(redirect, "")
    else:
        replacements += [
            ("listen 80;", f"listen 127.0.0.1:{http_port};"),
            ("root /var/www/html;", f"root {os.path.join(work, 'acme')};"),
        ]
    for old, new in replacements:
        if site.count(old) != 1:
            raise SystemExit(
                f"{SITE}: expected {old!r} once, found it {site.count(old)} times: "
                "bench/nginx.py must follow the change"
            )
        site = site.replace(old, new)
    if not cert:
        dropped = ("ssl_certificate", "limit_req ", "limit_conn ")
        site = "\n".join(line for line in site.split("\n") if not line.strip().startswith(dropped))
    listens = re.findall(r"^\s*listen\s+(\S+)", site, re.M)
    if not listens or not all(address.startswith("127.0.0.1:") for address in listens):
        raise SystemExit(f"rendered site listens on {listens}: loopback only, please")
    return site


def write_config(work, site):
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "site.conf"), "w") as f:
        f.write(site)
    with open(os.path.join(work, "nginx.conf"), "w") as f:
        f.write(MAIN_CONF.format(work=work, probe=PROBE_ADDRESS))
    return [
        "nginx",
        "-p",
        work,
        "-c",
        os.path.join(work, "nginx.conf"),
        "-e",
        os.path.join(work, "error.log"),
    ]


def self_signed(work):
    cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=builds.example.org",
            "-keyout",
            key,
            "-out",
            cert,
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def check_nginx_syntax(work, site_text, checks):
    test_dir = os.path.join(work, "nginx-t")
    os.makedirs(test_dir)
    site = render_site(site_text, test_dir, 8080, free_port(), self_signed(test_dir))
    out = subprocess.run(
        write_config(test_dir, site) + ["-t"], capture_output=True, text=True, timeout=60
    )
    said = (out.stdout + out.stderr).strip()
    print(
        f"$ nginx -t (deploy/nginx.conf with TLS on a self-signed certificate, limits on)\n{said}\n"
    )
    checks.append(
        ("nginx -t on deploy/nginx.conf", "exit 0", f"exit {out.returncode}", out.returncode == 0)
    )


def verify_unit(work):
    """(exit status, what it said) of systemd-analyze verify on the unit in a scratch root in
    `work`: this machine's units, a stub program."""
    with open(UNIT) as f:
        unit = f.read()
    program = re.search(r"^ExecStart=[-@:+!]*(\S+)", unit, re.M)[1]
    root = os.path.join(work, "systemd-root")
    shutil.copytree(
        "/usr/lib/systemd/system", os.path.join(root, "usr/lib/systemd/system"), symlinks=True
    )
    os.makedirs(os.path.join(root, "etc/systemd/system"))
    shutil.copy(UNIT, os.path.join(root, "etc/systemd/system"))
    os.makedirs(os.path.dirname(root + program))
    with open(root + program, "w") as f:
        f.write("#!/bin/sh\n")
    os.chmod(root + program, 0o755)
    os.makedirs(os.path.join(root, "etc/buildshelf"))  # the unit's EnvironmentFile
    shutil.copy(
        os.path.join(ROOT, "deploy", "buildshelf.env"), os.path.join(root, "etc/buildshelf")
    )
    out = subprocess.run(
        ["systemd-analyze", f"--root={root}", "verify", os.path.basename(UNIT)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out.returncode, (out.stdout + out.stderr).strip()


def check_unit(work, checks):
    returncode, said = verify_unit(work)
    print(
        f"$ systemd-analyze --root=SCRATCH verify buildshelf.service\n"
        f"{said or '(nothing to say)'} [exit {returncode}]"
    )
    checks.append(
        (
            "systemd-analyze verify",
            "exit 0, silent",
            f"exit {returncode}, {len(said.splitlines())} lines",
            returncode == 0 and not said,
        )
    )
    out = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", UNIT],
        capture_output=True,
        text=True,
        timeout=60,
    )
    score = re.search(r"Overall exposure level for \S+: (.*)", out.stdout)
    print(
        f"$ systemd-analyze security --offline=true deploy/buildshelf.service: "
        f"{score[1] if score else (out.stdout + out.stderr).strip()[-300:]}\n"
    )


def listening_addresses(pids):
    """The TCP addresses the processes `pids` listen on, as 'a.b.c.d:port' (or IPv6 hex)."""
    inodes = set()
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        for fd in os.listdir(fd_dir):
            try:
                found = re.fullmatch(r"socket:\[(\d+)\]", os.readlink(f"{fd_dir}/{fd}"))
            except OSError:
                continue
            if found:
                inodes.add(found[1])
    addresses = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in list(f)[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                    host, port = fields[1].split(":")
                    if len(host) == 8:
                        host = ".".join(str(int(host[i : i + 2], 16)) for i in (6, 4, 2, 0))
                    addresses.append(f"{host}:{int(port, 16)}")
    return addresses


def fetch(port, target, source=None, headers=None):
    """(status, {lower-case name: value}, body) of one GET, from address `source` if given,
    with these request `headers`."""
    reply = harness.fetch(port, target, source=source, headers=headers)
    return reply.status, reply.headers, reply.body


def access_lines(log_path, offset):
    """Buildshelf's access log lines after byte `offset`, as (method, target, status)."""
    with open(log_path, "rb") as f:
        f.seek(offset)
        text = f.read().decode("utf-8", "replace")
    return re.findall(r"buildshelf\.access: \S+ (\S+) (\S+) (\d{3}) ", text)


def settled(path, quiet=0.3, limit=10):
    """The size of `path` once nothing was added to it for `quiet` seconds: requests a wrk
    run left queued are still being answered, and logged, after it ends."""
    size, deadline = os.path.getsize(path), time.monotonic() + limit
    while time.monotonic() < deadline:
        time.sleep(quiet)
        size, previous = os.path.getsize(path), size
        if size == previous:
            break
    return size


def cache_statuses(access_log, offset):
    """{'HIT': n, ...} from nginx's access log after byte `offset`."""
    counts = {}
    with open(access_log, "rb") as f:
        f.seek(offset)
        for line in f:
            status = line.split()[-2].decode()
            counts[status] = counts.get(status, 0) + 1
    return counts


def cpu_by_process(pids):
    """{pid: CPU seconds so far}, for those of `pids` still there (nginx's cache loader
    comes and goes)."""
    used = {pid: harness.cpu_seconds(pid) for pid in pids}
    return {pid: seconds for pid, seconds in used.items() if seconds is not None}


def measure_throughput(
    direct_port, nginx_port, server_pids, rounds, seconds, log_path, nginx_log, checks
):
    """wrk on /builds/latest, direct and through nginx. `server_pids`: Buildshelf's, then
    nginx's; the CPU of all of them is what a request costs the machine either way."""
    samples = {"direct": [], "nginx": []}
    cpu = {"direct": [], "nginx": []}
    upstream, statuses = [], {}
    for port in (direct_port, nginx_port):
        wrk(port, LATEST, 1, 64)  # warm up (and fill nginx's cache)
    for r in range(rounds):
        order = ["direct", "nginx"] if r % 2 == 0 else ["nginx", "direct"]
        for label in order:
            offset, nginx_offset = settled(log_path), settled(nginx_log)
            before = cpu_by_process(server_pids)
            load = wrk(direct_port if label == "direct" else nginx_port, LATEST, seconds, 64)
            after = cpu_by_process(server_pids)
            used = sum(after[pid] - before[pid] for pid in after if pid in before)
            if load.errors:
                raise SystemExit(f"errors loading {label}: {load.errors}\n{load.out}")
            samples[label].append(load.requests / load.seconds)
            cpu[label].append(used / load.requests * 1e6)
            if label == "nginx":
                settled(log_path)  # the last requests of the run, logged as they end
                upstream += access_lines(log_path, offset)
                for status, n in cache_statuses(nginx_log, nginx_offset).items():
                    statuses[status] = statuses.get(status, 0) + n
    direct, through = (statistics.median(samples[k]) for k in ("direct", "nginx"))
    print(
        f"/builds/latest, 64 clients, {rounds} x {seconds} s each: direct "
        f"{', '.join(f'{s:.0f}' for s in samples['direct'])} req/s; through nginx "
        f"{', '.join(f'{s:.0f}' for s in samples['nginx'])} req/s"
    )
    # Steadier than req/s on a busy machine, but not the same measure: nginx's workers use
    # every core, Buildshelf about one (the interpreter lock), so this ratio is smaller.
    print(
        f"  server CPU per request (Buildshelf and nginx): direct "
        f"{', '.join(f'{c:.0f}' for c in cpu['direct'])} us; through nginx "
        f"{', '.join(f'{c:.0f}' for c in cpu['nginx'])} us: "
        f"{statistics.median(cpu['direct']) / statistics.median(cpu['nginx']):.1f}x less"
    )
    print(
        f"  nginx's cache, by $upstream_cache_status: "
        f"{', '.join(f'{k} {v}' for k, v in sorted(statuses.items()))}"
    )
    answered = sorted({status for *_, status in upstream})
    print(
        f"  what reached Buildshelf meanwhile: {len(upstream)} requests "
        f"({', '.join(f'{s}: {sum(1 for *_, x in upstream if x == s)}' for s in answered)})"
    )
    checks.append(
        (
            "throughput through nginx, 64 clients",
            f">= {SPEEDUP_GOAL}x direct",
            f"{through / direct:.1f}x ({through:.0f} vs {direct:.0f} req/s)",
            through >= SPEEDUP_GOAL * direct,
        )
    )


def publish_build(data_dir, slug, number):
    """Add build `number` to data/<slug>.json the way a CI job should: write beside, rename."""
    path = os.path.join(data_dir, f"{slug}.json")
    with open(path) as f:
        project = json.load(f)
    project["builds"].append(
        synthetic.build(synthetic.random.Random(number), number, "1.21", False)
    )
    with open(path + ".tmp", "w") as f:
        json.dump(project, f)
    os.replace(path + ".tmp", path)


def measure_edit(data_dir, nginx_port, max_age, checks):
    """The worst case: nginx has just stored a fresh answer when the file changes."""
    deadline = time.monotonic() + max_age + 5
    while True:  # wait for the cached copy to expire, so the next answer is fresh from upstream
        status, headers, _ = fetch(nginx_port, LATEST)
        if headers.get("x-cache-status") in ("MISS", "EXPIRED", "REVALIDATED"):
            break
        if time.monotonic() > deadline:
            raise SystemExit(
                f"nginx kept answering {headers.get('x-cache-status')} for "
                f"{LATEST}: it does not refresh its cache"
            )
        time.sleep(0.05)
    number = 100_000
    publish_build(data_dir, "p10", number)
    edited = time.monotonic()
    while True:
        status, headers, body = fetch(nginx_port, LATEST)
        seen = time.monotonic() - edited
        if status == 200 and json.loads(body)["buildNumber"] == number:
            break
        if seen > max_age + EDIT_SLACK + 10:
            break
        time.sleep(0.05)
    print(
        f"edit of p10.json just after nginx cached {LATEST}: the new build served through "
        f"nginx after {seen:.2f} s (max-age {max_age} s)"
    )
    checks.append(
        (
            "edit visible through nginx",
            f"<= {max_age + EDIT_SLACK} s",
            f"{seen:.2f} s",
            seen <= max_age + EDIT_SLACK,
        )
    )


def measure_revalidation(work, nginx_port, max_age, log_path, checks):
    """A probe from 127.0.0.2 fills an entry, waits for it to expire and asks again."""
    error_log = os.path.join(work, "nginx", "error.log")
    first = fetch(nginx_port, PROBED, source=PROBE_ADDRESS)
    time.sleep(max_age + 1.2)
    log_offset, debug_offset = os.path.getsize(log_path), os.path.getsize(error_log)
    status, headers, _ = fetch(nginx_port, PROBED, source=PROBE_ADDRESS)
    time.sleep(0.2)  # the access line is written as the response ends
    with open(error_log, "rb") as f:
        f.seek(debug_offset)
        debug = f.read().decode("utf-8", "replace")
    # nginx's debug log shows the whole request it sent upstream.
    sent = re.findall(r"^If-None-Match: ([^\r\n]*)", debug, re.M)
    upstream = [
        status for _, target, status in access_lines(log_path, log_offset) if target == PROBED
    ]
    print(
        f"{PROBED} through nginx: {first[0]} {first[1].get('x-cache-status')}, then after "
        f"{max_age + 1.2:.1f} s {status} {headers.get('x-cache-status')}; nginx sent "
        f"{'If-None-Match: ' + sent[0] if sent else 'no If-None-Match'}; Buildshelf "
        f"answered {', '.join(upstream) or 'nothing'}"
    )
    checks.append(
        (
            "nginx revalidates with If-None-Match",
            "sent, 304, REVALIDATED",
            f"{'sent' if sent else 'not sent'}, {'/'.join(upstream) or '-'}, "
            f"{headers.get('x-cache-status')}",
            bool(sent) and upstream == ["304"] and headers.get("x-cache-status") == "REVALIDATED",
        )
    )


def measure_stale(buildshelf, nginx_port, max_age, checks):
    """Buildshelf stopped (a restart, a crash): nginx answers from its expired copy."""
    buildshelf.stop()
    deadline = time.monotonic() + max_age + 2
    while True:
        status, headers, body = fetch(nginx_port, LATEST)
        if headers.get("x-cache-status") != "HIT" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    health = fetch(nginx_port, "/healthz")[0]
    cache_status = headers.get("x-cache-status")
    print(
        f"Buildshelf stopped: {LATEST} through nginx {status} {cache_status}, /healthz "
        f"(never cached) {health}"
    )
    checks.append(
        (
            "Buildshelf down: nginx serves its copy",
            "200 STALE",
            f"{status} {cache_status}",
            status == 200 and cache_status == "STALE",
        )
    )


def count_304s(log_path, checks):
    lines = access_lines(log_path, 0)
    # The download checks send validators, which nginx passes on to Buildshelf: not counted.
    count = sum(
        1 for _, target, status in lines if status == "304" and not target.startswith("/downloads/")
    )
    print(
        f"Buildshelf's access log: {len(lines)} requests, {count} of them answered 304 outside "
        "/downloads/ (no client of this benchmark sends a validator there: every 304 is nginx "
        "revalidating)"
    )
    checks.append(("304s from Buildshelf in its access log", ">= 1", str(count), count >= 1))


def unit_environment():
    """{variable: value} the unit runs with: its EnvironmentFile, deploy/buildshelf.env."""
    with open(os.path.join(ROOT, "deploy", "buildshelf.env")) as f:
        return dict(re.findall(r"^(BUILDSHELF_\w+)=(.*)$", f.read(), re.M))


def buildshelf_command(*argv):
    subprocess.run(
        [sys.executable, *CLI, *argv], check=True, capture_output=True, text=True, timeout=300
    )


def keep_files(data_dir, work):
    """Project `kept`, its builds' files kept by Buildshelf: build 1 of 64 MiB, builds 2 and
    3 of 1,000 bytes (one to yank, one whose object goes missing)."""
    buildshelf_command(
        "add-project", KEPT, "--data", data_dir, "--ci-job", "Kept",
        "--ci-job-url", "https://ci.example.org/job/Kept/",
        "--javadoc-base-url", "https://jd.example.org/kept/",
    )  # fmt: skip
    for number, size in ((1, BIG_BYTES), (2, 1000), (3, 1000)):
        path = os.path.join(work, f"kept-1.0-{number}.jar")
        with open(path, "wb") as f:
            f.write(random.Random(number).randbytes(size))
        buildshelf_command(
            "publish", KEPT, "--data", data_dir, "--build", str(number), "--channel", "1.0",
            "--file", path, "--timestamp", str(1_700_000_000_000 + number * 3_600_000),
        )  # fmt: skip


def download(port, target, headers=None, method="GET"):
    """(status, {lowercase name: value}, sha256 hex of the body, its length), the body hashed
    as it comes; a header sent twice is kept as 'first, second'."""
    reply = harness.fetch(
        port, target, 60, keep_body=False, method=method, headers=headers, hash_body=True
    )
    return reply.status, reply.headers, reply.sha256, reply.size


def downloaded_lines(log_path, offset):
    """(target, status, bytes sent) of Buildshelf's access lines after byte `offset`."""
    with open(log_path, "rb") as f:
        f.seek(offset)
        text = f.read().decode("utf-8", "replace")
    return re.findall(r"buildshelf\.access: \S+ \S+ (\S+) (\d{3}) (\S+) ", text)


def check_whole_download(nginx_port, direct_port, big, log_path, checks):
    """The 64 MiB file through nginx: its bytes exactly, sent by nginx (Buildshelf's answer
    has no body); and, for comparison, from Buildshelf direct."""
    offset = settled(log_path)
    seconds = {}
    for label, port in (("nginx", nginx_port), ("direct", direct_port)):
        started = time.perf_counter()
        status, _, digest, length = download(port, big["path"])
        seconds[label] = time.perf_counter() - started
        if label == "nginx":
            whole = status == 200 and (digest, length) == (big["sha256"], big["size"])
            settled(log_path)
            sent = [b for target, _, b in downloaded_lines(log_path, offset)]
    mib = big["size"] / (1 << 20)
    print(
        f"{big['path']}: {mib:.0f} MiB through nginx in {seconds['nginx']:.2f} s "
        f"({mib / seconds['nginx']:.0f} MiB/s), {'the same bytes' if whole else 'OTHER BYTES'}; "
        f"Buildshelf's access log: {'/'.join(sent) or 'nothing'}; from Buildshelf direct "
        f"{seconds['direct']:.2f} s (one download each: for figures, bench/downloads.py)"
    )
    checks.append(
        (
            "64 MiB through nginx, byte for byte",
            "same sha256, nginx sends",
            f"{'same' if whole else 'other bytes'}, Buildshelf: {'/'.join(sent) or '-'}",
            # What the access log says of a download handed to nginx (docs/running.md, Logs).
            whole and sent == ["handed-over"],
        )
    )


def check_resumed_download(work, nginx_port, big, checks):
    """A download cut at 20 MiB (the connection closed), then resumed with curl -C -."""
    part = os.path.join(work, "resumed.jar")
    with open(part, "wb") as f:
        f.write(harness.fetch(nginx_port, big["path"], 60, limit=CUT_BYTES).body)
    url = f"http://127.0.0.1:{nginx_port}{big['path']}"
    out = subprocess.run(
        ["curl", "-sS", "-f", "-C", "-", "-o", part, "-w", "%{http_code}", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    with open(part, "rb") as f:
        same = hashlib.file_digest(f, "sha256").hexdigest() == big["sha256"]
    print(
        f"cut at {CUT_BYTES >> 20} MiB, resumed with curl -C -: curl exit {out.returncode}, "
        f"HTTP {out.stdout or '-'}, {'the same bytes' if same else 'OTHER BYTES'} "
        f"{out.stderr.strip()}"
    )
    checks.append(
        (
            "cut download resumed (curl -C -)",
            "206, same sha256",
            f"{out.stdout or '-'}, {'same' if same else 'other bytes'}",
            out.returncode == 0 and out.stdout == "206" and same,
        )
    )


def check_download_headers(nginx_port, direct_port, big, checks):
    """Status, headers and body of the same requests through nginx and from a Buildshelf that
    sends the bytes itself: all equal, the issue's headers all there."""
    etag = f'"{big["sha256"]}"'
    requests = [
        ("GET", {}),
        ("HEAD", {}),
        ("GET", {"If-None-Match": etag}),
        ("GET", {"Range": f"bytes={CUT_BYTES}-"}),
        ("HEAD", {"Range": "bytes=-1000"}),
        ("GET", {"Range": "bytes=0-99", "If-Range": etag}),
        ("GET", {"Range": "bytes=0-99", "If-Range": '"another"'}),
        ("GET", {"Range": f"bytes={big['size']}-"}),
        ("GET", {"Range": "bytes=0-0,-1"}),  # several ranges: the whole file, both
        ("GET", {"Range": "bytes=1 - 2"}),  # nginx would refuse it: Buildshelf answers
        ("GET", {"If-Match": etag}),  # nginx would compare its own ETag: Buildshelf answers
    ]
    differences = []
    for method, headers in requests:
        through = download(nginx_port, big["path"], headers, method)
        direct = download(direct_port, big["path"], headers, method)
        if through[0] == 200 and method == "GET" and not headers:
            missing = [h for h in DOWNLOAD_HEADERS if h.lower() not in through[1]]
            differences += [f"GET lacks {h}" for h in missing]
        if (through[0], through[2:]) != (direct[0], direct[2:]):
            differences.append(f"{method} {headers}: {through[0]} vs {direct[0]} or the body")
        for name in sorted((set(through[1]) | set(direct[1])) - NOT_COMPARED):
            if through[1].get(name) != direct[1].get(name):
                differences.append(
                    f"{method} {headers} {name}: {through[1].get(name)!r} through nginx, "
                    f"{direct[1].get(name)!r} direct"
                )
    print(
        f"{len(requests)} requests for it through nginx and to Buildshelf direct (GET, HEAD, "
        f"304, 206, If-Range, 416, several ranges, odd ones): "
        f"{'; '.join(differences) or 'same status, headers and bytes'}"
    )
    checks.append(
        (
            "download headers as Buildshelf's",
            f"equal, {len(requests)} requests",
            f"{len(differences)} differences",
            not differences,
        )
    )


# A browser's Accept when it follows a link (Firefox's): text/html ranked above */*.
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def check_buildshelf_decides(data_dir, nginx_port, builds, checks):
    """Through nginx, Buildshelf still says what exists: a yanked build's file and its
    FILE.sha256 are a 410 (JSON build_yanked for a client such as curl, a page for a
    browser), a missing object a JSON 503, and the store's internal location is not
    reachable from outside, even by an encoded way."""
    buildshelf_command("yank", KEPT, "2", "--data", data_dir)
    gone = builds[3]["sha256"]
    os.unlink(os.path.join(data_dir, "artifacts", gone[:2], gone))
    deadline = time.monotonic() + 10
    while fetch(nginx_port, builds[2]["path"])[0] != 410:
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    yanked = []
    for target in (builds[2]["path"], builds[2]["path"] + ".sha256"):
        status, _, body = fetch(nginx_port, target)
        yanked.append(f"{status} {json.loads(body)['code'] if body.startswith(b'{') else '-'}")
        status, headers, _ = fetch(nginx_port, target, headers={"Accept": BROWSER_ACCEPT})
        yanked.append(f"{status} {headers.get('content-type', '-').partition(';')[0]}")
    status, _, body = fetch(nginx_port, builds[3]["path"])
    missing = f"{status} {json.loads(body)['code'] if body.startswith(b'{') else body[:30]}"
    sha = builds[1]["sha256"]
    inside = f"/_objects/{sha[:2]}/{sha}"
    outside = [
        fetch(nginx_port, target)[0]
        for target in (inside, builds[1]["path"] + "/%2e%2e" * 5 + inside)
    ]
    print(
        f"through nginx: a yanked build's file and FILE.sha256 {', '.join(yanked)}, "
        f"a missing object {missing}, {inside} and an encoded way to it from outside "
        f"{outside[0]} and {outside[1]}\n"
    )
    expected = ["410 build_yanked", "410 text/html"] * 2
    checks += [
        (
            "yanked build through nginx",
            "410 JSON, 410 page, x2",
            "/".join(yanked),
            yanked == expected,
        ),
        (
            "missing object through nginx",
            "503 artifact_unavailable",
            missing,
            missing == "503 artifact_unavailable",
        ),
        ("the store from outside", "404", "/".join(map(str, outside)), outside == [404, 404]),
    ]


def check_checksum_line(nginx_port, big, checks):
    """FILE.sha256 through nginx, twice: the line both times, never from nginx's cache (a
    yanked build's line must be a 410 at once, as its file is)."""
    target = big["path"] + ".sha256"
    answers = [fetch(nginx_port, target) for _ in range(2)]
    line = f"{big['sha256']}  {big['path'].rsplit('/', 1)[1]}\n".encode()
    cached = answers[1][1].get("x-cache-status", "not cached")
    print(f"{target.rsplit('/', 1)[1]} twice through nginx: {answers[0][0]}, then {cached}")
    checks.append(
        (
            "FILE.sha256 through nginx",
            "the line twice, not cached",
            f"{'the line' if answers[1][2] == line else 'other text'}, {cached}",
            all(a[0] == 200 and a[2] == line for a in answers) and cached == "not cached",
        )
    )


def check_downloads(work, data_dir, nginx_port, direct_port, log_path, checks):
    """Kept files through nginx (deploy/nginx.conf's X-Accel-Redirect), on the downloadUrl the
    API gives through nginx."""
    status, _, body = fetch(nginx_port, f"/api/v2/builds?project={KEPT}")
    builds = {}
    for build in json.loads(body):
        url = urlsplit(build["downloadUrl"])
        if url.netloc != f"127.0.0.1:{nginx_port}":
            raise SystemExit(f"downloadUrl {build['downloadUrl']} is not on nginx: --public-url?")
        builds[build["buildNumber"]] = dict(build, path=url.path)
    big = builds[1]
    check_whole_download(nginx_port, direct_port, big, log_path, checks)
    check_resumed_download(work, nginx_port, big, checks)
    check_download_headers(nginx_port, direct_port, big, checks)
    check_checksum_line(nginx_port, big, checks)
    check_buildshelf_decides(data_dir, nginx_port, builds, checks)


def report(checks):
    width = max(len(c[0]) for c in checks)
    print(f"\n{'check':<{width}}  {'goal':<24} {'measured':<34} result")
    for name, goal, measured, ok in checks:
        print(f"{name:<{width}}  {goal:<24} {measured:<34} {'PASS' if ok else 'FAIL'}")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seconds", type=int, default=4, help="length of one wrk run (default: %(default)s)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="wrk runs each, direct and through nginx, taking turns (default: %(default)s)",
    )
    parser.add_argument(
        "--max-age",
        type=int,
        default=5,
        help="server.py --max-age for the run (default: %(default)s)",
    )
    parser.add_argument(
        "--server-args",
        type=shlex.split,
        default=[],
        metavar="ARGS",
        help="extra flags for server.py (default: none)",
    )
    trying = parser.add_argument_group("trying the site by hand")
    trying.add_argument(
        "--config",
        metavar="DIR",
        help="only write the site and its main configuration into DIR, print the nginx "
        "command that runs them, and exit",
    )
    trying.add_argument(
        "--port", type=int, default=8081, help="--config: nginx's port (default: %(default)s)"
    )
    trying.add_argument(
        "--upstream",
        type=int,
        default=8080,
        help="--config: Buildshelf's port (default: %(default)s)",
    )
    trying.add_argument(
        "--store",
        default=os.path.join("data", "artifacts"),
        help="--config: the artifact store nginx sends kept files from (default: %(default)s)",
    )
    return parser.parse_args(argv)


def write_trial(args):
    """--config: the site as the load runs use it, written into args.config; the command
    that runs it printed."""
    work = os.path.abspath(args.config)
    with open(SITE) as f:
        site = render_site(
            f.read(), work, args.upstream, args.port, store=os.path.abspath(args.store)
        )
    print(shlex.join(write_config(work, site)))
    return 0


def main(argv=None):
    args = parse_args(argv)
    if args.config is not None:
        return write_trial(args)
    harness.stop_servers_on_sigterm()
    missing = [
        tool
        for tool in ("nginx", "wrk", "systemd-analyze", "openssl", "curl")
        if shutil.which(tool) is None
    ]
    if missing:
        raise SystemExit(
            f"missing {', '.join(missing)}: apt-get install nginx wrk systemd openssl curl"
        )
    version = subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr.strip()
    print(f"{version}; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}\n")
    checks = []
    with open(SITE) as f:
        site_text = f.read()
    with tempfile.TemporaryDirectory() as work:
        os.chmod(work, 0o755)  # nginx's workers run as nobody when started by root
        check_nginx_syntax(work, site_text, checks)
        check_unit(work, checks)
        data_dir = synthetic.generate(os.path.join(work, "data"), synthetic.TWENTY_SIZES)
        keep_files(data_dir, work)
        nginx_port = free_port()
        # As deploy/buildshelf.service runs it behind the site: nginx sends the kept files.
        common = ["--max-age", str(args.max_age), "--public-url", f"http://127.0.0.1:{nginx_port}"]
        accel = ["--accel-redirect", unit_environment()["BUILDSHELF_ACCEL_REDIRECT"]]
        log_path = os.path.join(work, "buildshelf.log")
        buildshelf = harness.Server.buildshelf(
            data_dir, common + accel + args.server_args, log_path
        )
        port, nginx, plain, pids = buildshelf.port, None, None, [buildshelf.pid]
        try:
            # The same data served without nginx, sending the files itself: what nginx's
            # answers are compared with.
            plain = harness.Server.buildshelf(
                data_dir, common, os.path.join(work, "buildshelf-plain.log")
            )
            plain_port = plain.port
            nginx_dir = os.path.join(work, "nginx")
            site = render_site(
                site_text, nginx_dir, port, nginx_port, store=os.path.join(data_dir, "artifacts")
            )
            nginx = harness.Server.nginx(write_config(nginx_dir, site), nginx_port)
            pids += harness.process_tree(nginx.pid)
            addresses = listening_addresses(pids[1:])
            print(
                f"Buildshelf on 127.0.0.1:{port} (server.py "
                f"{' '.join(common + accel + args.server_args)}), another without "
                f"--accel-redirect on {plain_port}, nginx (pid {nginx.pid}) listening on "
                f"{', '.join(addresses)}\n"
            )
            checks.append(
                (
                    "nginx listens on 127.0.0.1 only",
                    "127.0.0.1:*",
                    ", ".join(addresses),
                    addresses and all(a.startswith("127.0.0.1:") for a in addresses),
                )
            )
            check_downloads(work, data_dir, nginx_port, plain_port, log_path, checks)
            measure_throughput(
                port,
                nginx_port,
                pids,
                args.rounds,
                args.seconds,
                log_path,
                os.path.join(nginx_dir, "access.log"),
                checks,
            )
            measure_edit(data_dir, nginx_port, args.max_age, checks)
            measure_revalidation(work, nginx_port, args.max_age, log_path, checks)
            count_304s(log_path, checks)
            measure_stale(buildshelf, nginx_port, args.max_age, checks)
        finally:
            if nginx is not None:
                nginx.stop()
            if plain is not None:
                plain.stop()
                pids.append(plain.pid)
            buildshelf.stop()
        left = [pid for pid in pids if harness.running(pid)]
        checks.append(("everything stopped", "no process left", f"{len(left)} left", not left))
    report(checks)
    return 0 if all(ok for *_, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
