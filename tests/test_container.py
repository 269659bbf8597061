"""The Containerfile, built and run for real with podman (issue 37): on a Debian base made
with mmdebstrap from Debian's packages, so that no registry is needed. The image's size,
labels and contents; a container on a fresh volume made healthy by the docs' first step, a
build published with a token made inside it and downloaded whole, a slow download that
SIGTERM lets finish, the data kept in the volume for the next container; and compose.yaml's
nginx in front, as far as it can be read without compose; and the answers that let
docker-minecraft-server skip a download it has.

The base's tarball and the image are kept between runs outside the checkout (CACHE), keyed by
what they are made of; a cold run makes both (about 80 s here), a warm one neither.
"""

import contextlib
import email.utils
import fcntl
import hashlib
import http.client
import json
import os
import random
import re
import shutil
import socket
import sqlite3
import subprocess
import tarfile
import threading
import time

import pytest

from buildshelf import cli, server, settings
from buildshelf import store as store_module
from helpers import ROOT, eventually, free_port, refreshing_client
from test_recipes import code_block

CACHE = os.path.join(
    os.environ.get("XDG_CACHE_HOME") or "/var/tmp", "buildshelf-test-cache"
)  # fmt: skip
# The base: Debian's python3 and venv, as the Containerfile asks of one; no docs, manuals or
# translations, and merged /usr made by mmdebstrap's hook rather than usrmerge (which would
# bring perl).
MMDEBSTRAP = [
    "--quiet",
    "--variant=minbase",
    "--include=python3,python3-venv,ca-certificates",
    "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
    "--dpkgopt=path-exclude=/usr/share/man/*",
    "--dpkgopt=path-exclude=/usr/share/locale/*",
    "--dpkgopt=path-include=/usr/share/locale/locale.alias",
    "--dpkgopt=path-exclude=/usr/share/doc/*",
    "--dpkgopt=path-include=/usr/share/doc/*/copyright",
    "--dpkgopt=path-exclude=/usr/share/info/*",
    "bookworm",
]
BASE_IMAGE = "localhost/buildshelf-test-base"
IMAGE = "localhost/buildshelf-test"
# What the build sends (.dockerignore admits these and no other).
CONTEXT = ["Containerfile", ".dockerignore", "setup.cfg", "pyproject.toml", "README.md", "LICENSE"]
HOST_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"  # the host's, with its proxy's CA
MAX_IMAGE_BYTES = 300 * 1000 * 1000
STOP_SECONDS = 5


def read(*path):
    with open(os.path.join(ROOT, *path), encoding="utf-8") as f:
        return f.read()


def documented_uid():
    """The uid docs/container.md gives the server's user."""
    return int(re.search(r"uid `(\d+)`", read("docs", "container.md"))[1])


# --- what docker-minecraft-server asks (no container needed) ---------------------------------


def test_the_latest_build_answers_as_docker_minecraft_server_needs_to_skip_it(data_dir):
    """mc-image-helper's `install-paper --url` (docker-minecraft-server's PAPER_DOWNLOAD_URL)
    sends HEAD to the URL, following redirects, names the file by Content-Disposition, and
    skips the download when its copy's mtime is not older than Last-Modified; else it sends
    GET to where the redirects led, with If-Modified-Since: its copy's mtime, and keeps its
    copy on a 304. Its copy's mtime is when it downloaded it."""
    content = random.Random(37).randbytes(1000)
    jar = data_dir.parent / "alpha-9.jar"
    jar.write_bytes(content)
    built = 1700000000
    assert cli.main(["publish", "alpha", "--data", str(data_dir), "--build", "9", "--channel",
                     "1.21", "--timestamp", f"{built}000", "--file", str(jar)]) == 0  # fmt: skip
    store = store_module.Store(data_dir, check_interval=0)
    client = refreshing_client(server.make_app(store), store)

    redirect = client.head("/downloads/latest?project=alpha", status=302)
    target = redirect.location.removeprefix("http://127.0.0.1:8080")
    head = client.head(target, status=200)
    assert head.headers["Content-Disposition"] == 'attachment; filename="alpha-9.jar"'
    modified = email.utils.parsedate_to_datetime(head.headers["Last-Modified"]).timestamp()
    assert modified == built  # not the time of the answer: a copy made since is newer
    downloaded = built + 60
    since = email.utils.formatdate(downloaded, usegmt=True)
    assert client.get(target, headers={"If-Modified-Since": since}, status=304).body == b""
    older = email.utils.formatdate(built - 60, usegmt=True)
    assert client.get(target, headers={"If-Modified-Since": older}, status=200).body == content

    newer = jar.with_name("alpha-10.jar")
    newer.write_bytes(content[::-1])
    assert cli.main(["publish", "alpha", "--data", str(data_dir), "--build", "10", "--channel",
                     "1.21", "--file", str(newer)]) == 0  # fmt: skip
    moved = client.head("/downloads/latest?project=alpha", status=302).location
    head = client.head(moved.removeprefix("http://127.0.0.1:8080"), status=200)
    assert head.headers["Content-Disposition"] == 'attachment; filename="alpha-10.jar"'
    # A new build, a new name: no copy of it to skip for, whatever the dates.
    assert email.utils.parsedate_to_datetime(head.headers["Last-Modified"]).timestamp() > built


def test_the_documented_uid_is_the_images_user():
    uid = documented_uid()
    assert re.search(rf"^USER {uid}:{uid}$", read("Containerfile"), re.M)
    assert f"--uid {uid} --gid {uid}" in read("Containerfile")


def test_compose_runs_the_image_behind_deploy_nginx_conf():
    """compose.yaml (no compose here to run it): nginx shares Buildshelf's network, so that
    deploy/nginx.conf's upstream and trusted proxy (127.0.0.1) hold; it reads the kept files
    from the volume where deploy/nginx.conf's /_objects/ looks for them; and every variable
    it sets is a setting."""
    compose = read("compose.yaml")
    assert 'network_mode: "service:buildshelf"' in compose
    assert "./deploy/nginx.conf:/etc/nginx/conf.d/default.conf:ro" in compose
    alias = re.search(r"alias (/\S+)/artifacts/;", read("deploy", "nginx.conf"))[1]
    assert f"buildshelf-data:{alias}:ro" in compose
    assert "buildshelf-data:/data" in compose
    variables = {s.variable for s in settings.SETTINGS if s.variable}
    named = set(re.findall(r"^\s+(BUILDSHELF_\w+):", compose, re.M))
    assert named and named <= variables, named - variables
    environment = dict(re.findall(r"^\s+(BUILDSHELF_\w+): (\S+)", compose, re.M))
    assert environment["BUILDSHELF_HOST"] == "127.0.0.1"
    assert environment["BUILDSHELF_TRUSTED_PROXY"] == "127.0.0.1"
    assert environment["BUILDSHELF_ACCEL_REDIRECT"] == "/_objects"


# --- podman ------------------------------------------------------------------------------------


def podman(conf, *args, timeout=120, check=True):
    """`podman ARGS` with the test's containers.conf: the completed process, text."""
    done = subprocess.run(
        ["podman", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, CONTAINERS_CONF=conf),
    )
    if check and done.returncode != 0:
        pytest.fail(f"podman {' '.join(args)}: exit {done.returncode}\n{done.stderr}")
    return done


@contextlib.contextmanager
def locked(name):
    """The cache's lock `name`, held: two runs make one base, one image."""
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(CACHE, name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def digest(*parts):
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def base_image(conf, timings):
    """The Debian base, imported into podman: made by mmdebstrap once, its tarball cached."""
    tag = f"{BASE_IMAGE}:{digest(MMDEBSTRAP)}"
    tarball = os.path.join(CACHE, f"base-{digest(MMDEBSTRAP)}.tar")
    with locked("base"):
        if podman(conf, "image", "exists", tag, check=False).returncode == 0:
            return tag
        if not os.path.exists(tarball):
            started = time.monotonic()
            partial = tarball.replace(".tar", ".partial.tar")  # mmdebstrap reads the suffix
            done = subprocess.run(
                ["mmdebstrap", *MMDEBSTRAP, partial], capture_output=True, text=True, timeout=900
            )
            assert done.returncode == 0, done.stderr
            os.replace(partial, tarball)
            timings["mmdebstrap"] = time.monotonic() - started
        started = time.monotonic()
        podman(conf, "import", tarball, tag)
        timings["import"] = time.monotonic() - started
    return tag


def context_digest(*more):
    """A hash of the build's context (what .dockerignore admits) and of `more`."""
    sha = hashlib.sha256(json.dumps(more).encode())
    paths = CONTEXT + sorted(
        os.path.relpath(os.path.join(folder, name), ROOT)
        for folder, dirs, names in os.walk(os.path.join(ROOT, "buildshelf"))
        if "__pycache__" not in folder
        for name in names
        if not name.endswith(".pyc")
    )
    for path in paths:
        sha.update(path.encode() + b"\0")
        with open(os.path.join(ROOT, path), "rb") as f:
            sha.update(hashlib.sha256(f.read()).digest())
    return sha.hexdigest()[:16]


def version():
    return re.search(r"^version = (\S+)$", read("setup.cfg"), re.M)[1]


def revision():
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else "unknown"


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    """(podman's containers.conf, the image's tag, the build's args, timings): built from the
    checkout on the Debian base as docs/container.md says, or found from an earlier run."""
    missing = [tool for tool in ("podman", "mmdebstrap", "curl") if shutil.which(tool) is None]
    if missing:
        message = f"missing {', '.join(missing)}: as root, apt-get install -y podman mmdebstrap"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail("CI must build and run the image: " + message)
        pytest.skip(message)
    # What this machine needs of podman (docs/container.md): no default ulimits (they may not
    # be raised here), and runc where there is one (crun refuses hybrid cgroups).
    conf = tmp_path_factory.mktemp("podman") / "containers.conf"
    runtime = '\n[engine]\nruntime = "runc"\n' if shutil.which("runc") else ""
    conf.write_text("[containers]\ndefault_ulimits = []\n" + runtime)
    conf = str(conf)
    timings = {}
    base = base_image(conf, timings)
    args = {
        "BASE": base,
        "VERSION": version(),
        "REVISION": revision(),
        "SOURCE": "https://example.org/buildshelf.git",
    }
    tag = f"{IMAGE}:{context_digest(args)}"
    with locked("image"):
        if podman(conf, "image", "exists", tag, check=False).returncode != 0:
            started = time.monotonic()
            build = ["build", "--format", "docker", "--layers=false", "-t", tag, "-f",
                     "Containerfile", "-v", f"{HOST_BUNDLE}:{HOST_BUNDLE}:ro"]  # fmt: skip
            for name, value in args.items():
                build += ["--build-arg", f"{name}={value}"]
            podman(conf, *build, ROOT, timeout=900)
            timings["build"] = time.monotonic() - started
        # The images of earlier checkouts go: one image of this test at a time.
        listed = podman(conf, "images", "--format", "{{.Repository}}:{{.Tag}}", IMAGE).stdout
        for old in set(listed.split()) - {tag}:
            podman(conf, "rmi", old, check=False)
    print(f"image {tag}; made: {timings or 'nothing (cached)'}")
    return conf, tag, args, timings


def inspected(conf, tag):
    return json.loads(podman(conf, "image", "inspect", tag).stdout)[0]


@pytest.mark.system
def test_the_image_is_small_labelled_and_holds_nothing_it_does_not_run(image):
    conf, tag, args, _ = image
    found = inspected(conf, tag)
    assert found["Size"] <= MAX_IMAGE_BYTES, found["Size"]
    config = found["Config"]
    assert {k: v for k, v in config["Labels"].items() if k.startswith("org.opencontainers.")} == {
        "org.opencontainers.image.title": "Buildshelf",
        "org.opencontainers.image.version": args["VERSION"],
        "org.opencontainers.image.revision": args["REVISION"],
        "org.opencontainers.image.source": args["SOURCE"],
        "org.opencontainers.image.licenses": re.search(
            r"^license = (.+)$", read("setup.cfg"), re.M
        )[1],
    }
    uid = documented_uid()
    assert config["User"] == f"{uid}:{uid}"
    assert list(config["Volumes"]) == ["/data"] and list(config["ExposedPorts"]) == ["8080/tcp"]
    assert "/healthz" in " ".join(found["Healthcheck"]["Test"])  # kept: --format docker
    assert config["Entrypoint"] == ["buildshelf"] and config["Cmd"] == ["serve"]
    assert {"BUILDSHELF_DATA=/data", "BUILDSHELF_HOST=0.0.0.0", "BUILDSHELF_PORT=8080"} <= set(
        config["Env"]
    )
    # No compiler, no test dependency, no cache; the S3 extra's requirements installed (none
    # until the S3 store's extra is in setup.cfg).
    probe = """
import importlib.metadata, os, re, shutil, sys
compilers = [tool for tool in ("gcc", "cc", "c++", "g++", "clang") if shutil.which(tool)]
requires = importlib.metadata.requires("buildshelf") or []
def names(requirements):
    return {re.match(r"[\\w.-]+", r)[0].lower().replace("_", "-") for r in requirements}
s3 = names(r for r in requires if 'extra == "s3"' in r)
test = names(r for r in requires if 'extra == "test"' in r)
installed = names(d.metadata["Name"] for d in importlib.metadata.distributions())
caches = [p for p in ("/root/.cache", "/data/.cache", "/var/cache/apt/pkgcache.bin")
          if os.path.exists(p)]
caches += [n for n in os.listdir("/var/lib/apt/lists") if n not in ("lock", "partial")]
print(compilers, sorted(s3 - installed), sorted((test - s3) & installed), caches, bool(test))
"""
    done = podman(conf, "run", "--rm", "--read-only", "--entrypoint", "python3", tag, "-c", probe)
    assert done.stdout.strip() == "[] [] [] [] True", done.stdout + done.stderr


def inspected_container(conf, name):
    return json.loads(podman(conf, "container", "inspect", name).stdout)[0]


class Container:
    """A container of the image over a named volume, its port published on 127.0.0.1."""

    def __init__(self, conf, tag, volume):
        self.conf, self.tag, self.volume = conf, tag, volume
        self.port = free_port()
        self.name = f"buildshelf-test-{os.getpid()}-{self.port}"
        self.started = None

    def run(self):
        self.started = time.monotonic()
        podman(self.conf, "run", "--detach", "--name", self.name, "--read-only",
               "--volume", f"{self.volume}:/data", "--publish", f"127.0.0.1:{self.port}:8080",
               "--env", f"BUILDSHELF_PUBLIC_URL=http://127.0.0.1:{self.port}",
               "--stop-timeout", "15", self.tag)  # fmt: skip
        return self

    def exec(self, *argv):
        return podman(self.conf, "exec", self.name, *argv).stdout

    def request(self, method, target, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, target, headers=headers or {})
            resp = conn.getresponse()
            return resp, resp.read()
        finally:
            conn.close()

    def answers(self):
        """Whether /healthz answers (whatever it says)."""
        try:
            return self.request("GET", "/healthz")[0].status
        except OSError:
            return None

    def healthy(self):
        """What the image's HEALTHCHECK says now."""
        return podman(self.conf, "healthcheck", "run", self.name, check=False).returncode == 0

    def logs(self):
        return podman(self.conf, "logs", self.name, check=False).stderr

    def remove(self):
        podman(self.conf, "rm", "--force", "--time", "0", self.name, check=False)


@pytest.fixture
def volume(image):
    conf = image[0]
    name = f"buildshelf-test-{os.getpid()}-{free_port()}"
    podman(conf, "volume", "create", name)
    yield name
    podman(conf, "volume", "rm", "--force", name, check=False)


def backed_up(conf, volume, backup):
    """Run docs/running.md's backup with docs/container.md's data= line (podman's), and
    check the copy: the data file, the kept file, the token's database."""
    recipe = code_block(read("docs", "running.md"), ("## Backing up", "A backup, as root"), "sh")
    data = code_block(read("docs", "container.md"), ("## Backing up", "line replaced by"), "sh")
    data = data.strip().replace("docker ", "podman ").replace("buildshelf-data", volume)
    recipe = re.sub(r"^data=.*$", lambda _: data, recipe, count=1, flags=re.M)
    recipe = re.sub(r"^backup=.*$", f"backup={backup}", recipe, count=1, flags=re.M)
    done = subprocess.run(["bash", "-euc", recipe], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, CONTAINERS_CONF=conf))  # fmt: skip
    assert done.returncode == 0, done.stderr
    with tarfile.open(backup / "data.tar") as tar:
        assert "./alpha.json" in tar.getnames()
    with tarfile.open(backup / "artifacts.tar") as tar:
        assert len([m for m in tar.getmembers() if m.isfile()]) == 1
    with contextlib.closing(sqlite3.connect(backup / "state" / "tokens.sqlite3")) as db:
        assert db.execute("SELECT count(*) FROM tokens").fetchone() == (1,)


def slow_read(port, target, seconds_per_mib, got, halfway):
    """GET `target` and read the answer at a slow client's pace into `got` (a dict); set
    `halfway` after the first MiB."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 10)
        sock.settimeout(10)
        sock.connect(("127.0.0.1", port))
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, body = data.split(b"\r\n\r\n", 1)
        got["head"] = head.decode()
        length = int(re.search(r"Content-Length: (\d+)", got["head"])[1])
        try:
            while len(body) < length:
                chunk = sock.recv(16 << 10)
                if not chunk:
                    break
                body += chunk
                time.sleep(seconds_per_mib / 64)
                if len(body) > 1 << 20:
                    halfway.set()
        except OSError as error:  # a network gone says nothing: the read times out
            got["error"] = error
        got["body"] = body


@pytest.mark.system
def test_a_container_serves_publishes_stops_cleanly_and_keeps_its_data(image, volume, tmp_path):
    conf, tag, _, _ = image
    first = Container(conf, tag, volume).run()
    try:
        assert eventually(first.answers, 30) == 503  # a fresh volume: nothing to serve yet
        answering = time.monotonic() - first.started
        assert not first.healthy()
        # The first step docs/container.md gives makes it healthy.
        first.exec("buildshelf", "add-project", "alpha", "--ci-job", "Alpha",
                   "--ci-job-url", "https://ci.example.org/job/Alpha/")  # fmt: skip
        assert eventually(lambda: first.answers() == 200, 10)
        assert first.healthy()

        # The server is PID 1, as the documented user; what it writes in /data is theirs.
        uid = documented_uid()
        status = first.exec("cat", "/proc/1/status")
        assert re.search(rf"^Uid:\t{uid}\t{uid}\t{uid}\t{uid}$", status, re.M), status
        assert "buildshelf" in first.exec("cat", "/proc/1/cmdline")

        # A token made inside it; a build published with it, and downloaded whole.
        token = re.search(r"bs_\w+_[\w-]+", first.exec("buildshelf", "token", "create", "alpha"))[0]
        content = random.Random(37).randbytes(5 << 20)
        sha = hashlib.sha256(content).hexdigest()
        (tmp_path / "alpha-1.jar").write_bytes(content)
        put = subprocess.run(
            ["curl", "--fail-with-body", "-sS", "-H", "@-", "-X", "PUT",
             "-F", 'build={"channelVersion": "1.21.4"};type=application/json',
             "-F", f"file=@{tmp_path / 'alpha-1.jar'}",
             f"http://127.0.0.1:{first.port}/api/v2/projects/alpha/builds/1"],
            input=f"Authorization: Bearer {token}\n", capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert put.returncode == 0, put.stdout + put.stderr
        assert json.loads(put.stdout)["sha256"] == sha
        resp, _ = first.request("GET", "/downloads/latest?project=alpha")
        assert resp.status == 302
        target = resp.getheader("Location").removeprefix(f"http://127.0.0.1:{first.port}")
        resp, body = first.request("GET", target)
        assert resp.status == 200 and hashlib.sha256(body).hexdigest() == sha
        since = resp.getheader("Last-Modified")
        assert first.request("GET", target, {"If-Modified-Since": since})[0].status == 304

        # SIGTERM while a slow client downloads: it gets every byte, and the server exits 0.
        got, halfway = {}, threading.Event()
        reader = threading.Thread(target=slow_read, args=(first.port, target, 0.5, got, halfway))
        reader.start()
        assert halfway.wait(10)
        stopping = time.monotonic()
        podman(conf, "stop", first.name)
        stopped = time.monotonic() - stopping
        reader.join(10)
        received = f"{len(got['body'])} of {len(content)} bytes, then {got.get('error')}"
        assert " 200 " in got["head"] and hashlib.sha256(got["body"]).hexdigest() == sha, received
        state = inspected_container(conf, first.name)["State"]
        assert state["ExitCode"] == 0 and stopped < STOP_SECONDS, (state, stopped, first.logs())
        assert "finishing the requests in flight" in first.logs()

        mountpoint = json.loads(podman(conf, "volume", "inspect", volume).stdout)[0]["Mountpoint"]
        for name in ("alpha.json", "artifacts", ".buildshelf"):
            assert os.stat(os.path.join(mountpoint, name)).st_uid == uid, name
        backed_up(conf, volume, tmp_path / "backup")
    finally:
        first.remove()

    # The data outlives the container: the next one serves the build, and knows the token.
    second = Container(conf, tag, volume).run()
    try:
        assert eventually(lambda: second.answers() == 200, 30)
        resp, body = second.request("GET", target)
        assert resp.status == 200 and hashlib.sha256(body).hexdigest() == sha
        assert token.split("_")[1] in second.exec("buildshelf", "token", "list")
    finally:
        second.remove()
    print(f"answering {answering:.2f} s after podman run; stopped {stopped:.2f} s after SIGTERM")
