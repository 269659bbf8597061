"""The artifact store in S3-compatible object storage (AWS S3, R2, B2, MinIO, SeaweedFS...):
`S3Store`, the interface of the directory store (objects.ArtifactStore) over one bucket and
key prefix, `s3://BUCKET[/PREFIX]`, through boto3 (the optional extra `buildshelf[s3]`).

An object's key is `PREFIX/<sha256[:2]>/<sha256>`, the directory store's layout, so that a
copy between the two keeps every name. The store checks the bytes itself: an object goes up
with its sha256 (`x-amz-checksum-sha256`, a part's own for each part of a large file) and
`If-None-Match: *`, so that other bytes are refused (BadDigest) and nothing is overwritten.
The endpoint, region and credentials are boto3's (AWS_ENDPOINT_URL, AWS_REGION, the
AWS_ACCESS_KEY_ID pair, profiles); no message names a credential.
"""

import base64
import hashlib
import os
import re
import tempfile
import time
from collections.abc import Iterable, Iterator

from buildshelf import files
from buildshelf.kept import s3_parts
from buildshelf.kept.objects import (
    CHUNK_BYTES,
    MAX_BYTES_DEFAULT,
    MISSING,
    Refused,
    Removed,
    Staged,
    Stored,
    Unavailable,
    check_expected,
    too_large,
)
from buildshelf.kept.temp_files import STALE_TEMP_SECONDS
from buildshelf.model import SHA256_PATTERN, Build, Kept
from buildshelf.text import printable, sizes

SCHEME = "s3://"
INSTALL = "pip install 'buildshelf[s3]'"
# A bucket as S3 names one (3 to 63 lowercase letters, digits, '.' and '-'), then a prefix of
# plain segments.
_LOCATION = re.compile(
    r"s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?P<prefix>(/[A-Za-z0-9._-]+)*)/?"
)
_KEY = re.compile(r"(?:.*/)?(?P<prefix>[0-9a-f]{2})/(?P<sha256>[0-9a-f]{64})")
PRESIGNED_SECONDS = 300  # how long a download's redirect may be followed
LISTING_SECONDS = 30  # how long the watcher trusts a listing for objects found well in it
# What a store answers when it does not know who is asking, or refuses them: a retry with
# the same credentials fails the same way.
_REFUSING = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken",
             "InvalidToken", "NoSuchBucket", "403", "401"}  # fmt: skip


def is_location(where: str) -> bool:
    return where.startswith(SCHEME)


def location(value: str) -> tuple[str, str]:
    """(bucket, prefix without its slashes) of an `s3://BUCKET[/PREFIX]` URL; ValueError
    saying why not."""
    match = _LOCATION.fullmatch(value)
    if match is None or ".." in match["bucket"] or {".", ".."} & set(value.split("/")[3:]):
        raise ValueError(
            f"{value!r} is not s3://BUCKET[/PREFIX]: a bucket of 3 to 63 lowercase letters, "
            "digits, '.' and '-', then path segments of letters, digits and . _ -"
        )
    return match["bucket"], match["prefix"].strip("/")


def _client():
    """A boto3 S3 client as the environment configures one; Refused, saying how to install
    boto3, without it."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise Refused(f"an s3:// artifact store needs boto3: install it with {INSTALL}") from None
    config = Config(
        connect_timeout=5,
        read_timeout=60,
        retries={"mode": "standard", "max_attempts": 3},
        signature_version="s3v4",  # presigned URLs too: SigV2 ones are refused by some stores
        # Sent only where an operation requires one: ours carry their sha256s themselves.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    return boto3.session.Session().client("s3", config=config)


class S3Store:
    """The objects of `where` (s3://BUCKET[/PREFIX]) in S3-compatible object storage, as
    objects.ArtifactStore says; `client` is boto3's (made from the environment by default).
    Streams are received first into an anonymous temporary file in `staging_dir` (the
    system's by default): an object's key is its sha256, known at the end."""

    def __init__(self, where: str, client=None, staging_dir: str | None = None):
        self.bucket, self.prefix = location(where)
        self.where = SCHEME + self.bucket + (f"/{self.prefix}" if self.prefix else "")
        self.client = client if client is not None else _client()
        self.staging_dir = staging_dir
        self._listed = None  # (monotonic time, {sha256: size}) of the last listing

    # --- names ---------------------------------------------------------------------------

    def key(self, sha256: str) -> str:
        if not SHA256_PATTERN.match(sha256):
            raise ValueError(f"{sha256!r} is not a sha256: 64 lowercase hex digits")
        return f"{self.prefix}/{sha256[:2]}/{sha256}".lstrip("/")

    def name(self, sha256: str) -> str:
        return f"{SCHEME}{self.bucket}/{self.key(sha256)}"

    def exists(self) -> bool:
        return True

    # --- looking at objects --------------------------------------------------------------

    def head(self, sha256: str) -> dict | None:
        """The object's HEAD (with its checksum), None if it is not there; Unavailable when
        the store cannot say."""
        try:
            return self.client.head_object(
                Bucket=self.bucket, Key=self.key(sha256), ChecksumMode="ENABLED"
            )
        except Exception as error:
            if s3_parts.code(error) in ("404", "NoSuchKey", "NotFound"):
                return None
            raise self.unavailable(error, f"look at {self.name(sha256)}") from None

    def verify(self, sha256: str, size: int) -> str | None:
        try:
            found = self.head(sha256)
        except Unavailable as error:
            return f"cannot be looked at: {error.reason}"
        return _judged(found, sha256, size)

    def rehash(self, sha256: str) -> str | None:
        """verify's answer, from the store's own sha256 of the whole object when it keeps one,
        else from its bytes, read and hashed."""
        try:
            found = self.head(sha256)
        except Unavailable as error:
            return f"cannot be looked at: {error.reason}"
        if found is None:
            return MISSING
        if _whole_checksum(found) is not None:
            return _judged(found, sha256, found["ContentLength"])
        digest = hashlib.sha256()
        try:
            for chunk in self.chunks(sha256, 0, found["ContentLength"]):
                digest.update(chunk)
        except Unavailable as error:
            return f"cannot be read ({error.reason})"
        actual = digest.hexdigest()
        return None if actual == sha256 else f"holds other bytes: they hash to {actual}"

    def problems(
        self, kept: Iterable[tuple[str, Build, Kept]], hash_again: bool = False
    ) -> Iterator[tuple[str, Build, Kept, str]]:
        """As artifacts.problems: one listing of the bucket (trusted LISTING_SECONDS for the
        objects found in it as recorded), a HEAD for each object it does not show as
        recorded, a read (or the store's checksum) of each with `hash_again`."""
        try:
            listed = self._listing(fresh=hash_again)
        except Unavailable as error:
            listed, down = {}, f"cannot be looked at: {error.reason}"
        else:
            down = None
        found = {}
        for name, build, file in kept:
            key = file.sha256, file.size
            if key not in found:
                if down is not None:
                    found[key] = down
                elif listed.get(file.sha256) == file.size and not hash_again:
                    found[key] = None
                else:
                    found[key] = self.rehash(file.sha256) if hash_again else self.verify(*key)
                    if found[key] is None and hash_again:
                        found[key] = self.verify(*key)
            if found[key] is not None:
                yield name, build, file, found[key]

    def objects(self) -> dict[str, int]:
        return dict(sorted(self._listing(fresh=True).items()))

    def _listing(self, fresh: bool) -> dict[str, int]:
        if not fresh and self._listed and time.monotonic() - self._listed[0] < LISTING_SECONDS:
            return self._listed[1]
        found = {}
        expected_prefix = f"{self.prefix}/" if self.prefix else ""
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=expected_prefix
            )
            for page in pages:
                for item in page.get("Contents", ()):
                    if sha256 := self._sha256_of(item["Key"]):
                        found[sha256] = item["Size"]
        except Exception as error:
            raise self.unavailable(error, f"list {self.where}") from None
        self._listed = time.monotonic(), found
        return found

    def _sha256_of(self, key: str) -> str | None:
        """The sha256 whose object `key` is in this store, None if it is no object's."""
        match = _KEY.fullmatch(key)
        sha256 = match and match["sha256"]
        if sha256 and sha256.startswith(match["prefix"]) and key == self.key(sha256):
            return sha256
        return None

    def remove_stale(self, dry_run: bool = False) -> list[str]:
        """As objects.ArtifactStore says: the incomplete multipart uploads of this store's
        objects that writers gone left (s3_parts.abort_abandoned), with nothing written for
        STALE_TEMP_SECONDS, the rule of a directory's temp files where locks fail."""
        where = f"{self.prefix}/" if self.prefix else ""
        keys = s3_parts.abort_abandoned(self.client, self.bucket, where, self._sha256_of,
                                        STALE_TEMP_SECONDS, time.time(), dry_run)  # fmt: skip
        return [f"the incomplete upload {SCHEME}{self.bucket}/{key}" for key in keys]

    def remove(self, sha256s: Iterable[str], dry_run: bool = False) -> list[Removed]:
        """As artifacts.remove: one not there, or that cannot be deleted, is left out (an
        unused object costs only space, and `check` lists it)."""
        removed = []
        for sha256 in sorted(set(sha256s)):
            try:
                found = self.head(sha256)
                if found is None:
                    continue
                if not dry_run:
                    self.client.delete_object(Bucket=self.bucket, Key=self.key(sha256))
            except Exception:
                continue
            removed.append(Removed(self.name(sha256), found["ContentLength"]))
        if removed and not dry_run:
            self._listed = None
        return removed

    # --- reading -------------------------------------------------------------------------

    def chunks(self, sha256: str, start: int, length: int) -> Iterator[bytes]:
        """The object's bytes from `start`, `length` of them, in chunks: memory stays
        bounded whatever the size; Unavailable when the store fails meanwhile."""
        if length <= 0:
            return
        try:
            answer = self.client.get_object(
                Bucket=self.bucket,
                Key=self.key(sha256),
                Range=f"bytes={start}-{start + length - 1}",
            )
            body = answer["Body"]
            try:
                yield from body.iter_chunks(CHUNK_BYTES)
            finally:
                body.close()
        except Unavailable:
            raise
        except Exception as error:
            raise self.unavailable(error, f"read {self.name(sha256)}") from None

    def presigned(self, sha256: str, file_name: str, content_type: str) -> str:
        """A GET of the object that works PRESIGNED_SECONDS, saved as `file_name`."""
        name = file_name.replace("\\", "\\\\").replace('"', '\\"')
        return self.client.generate_presigned_url(
            "get_object",
            Params={
                "Bucket": self.bucket,
                "Key": self.key(sha256),
                "ResponseContentDisposition": f'attachment; filename="{name}"',
                "ResponseContentType": content_type,
            },
            ExpiresIn=PRESIGNED_SECONDS,
        )

    # --- storing -------------------------------------------------------------------------

    def store_file(self, source, max_bytes=MAX_BYTES_DEFAULT, expected_sha256=None, progress=None):
        """As artifacts.store_file: the file hashed, then sent from the file itself."""
        expected = _expected(expected_sha256)
        try:
            fd, st = files.open_regular(source)
        except files.NotRegular as error:
            raise Refused(f"{source} is {error.kind}, not a regular file: give a file") from None
        except OSError as error:
            raise Refused(f"cannot read {source}: {error.strerror}") from None
        with os.fdopen(fd, "rb") as file:
            if st.st_size > max_bytes:
                raise too_large(source, max_bytes)
            try:
                sha256 = hashlib.file_digest(file, "sha256").hexdigest()
            except OSError as error:
                raise Refused(f"cannot read {source}: {error.strerror}") from None
            check_expected(sha256, expected)
            return self.send(file, sha256, st.st_size, source, progress)

    def store_stream(
        self, read, source, max_bytes=MAX_BYTES_DEFAULT, size=None, progress=None,
        expected_sha256=None,
    ):  # fmt: skip
        """As artifacts.store_stream: received into a staging file, then sent."""
        expected = _expected(expected_sha256)
        if size is not None and size > max_bytes:
            raise too_large(source, max_bytes)
        staging = self.staging(source, max_bytes)
        try:
            done = 0
            while chunk := read():
                staging.write(chunk)
                done += len(chunk)
                if progress is not None:
                    progress(done, size)
            staged = staging.finish()
            check_expected(staged.sha256, expected)
            return self.place(staged, source)
        finally:
            staging.discard()

    def staging(self, source: str, max_bytes: int = MAX_BYTES_DEFAULT) -> "AnonymousStaging":
        return AnonymousStaging(source, max_bytes, self.staging_dir)

    def place(self, staged: Staged, source: str) -> Stored:
        """Send the file `staged` received (see staging) as the object of its sha256."""
        return self.send(staged.file, staged.sha256, staged.size, source)

    def send(self, file, sha256: str, size: int, source: str, progress=None) -> Stored:
        """The open file `file` (`size` bytes hashing to `sha256`) as an object: sent unless
        identical bytes are there already, replacing an object of that key found damaged
        (deleted first: nothing is ever overwritten)."""
        found = self.head(sha256)
        problem = MISSING if found is None else _judged(found, sha256, size)
        if problem is None and _whole_checksum(found) is None:
            # Sent in parts: the store keeps the sha256 of the parts' sha256s.
            if found.get("ChecksumSHA256") not in (None, s3_parts.parts_checksum(file, size)):
                problem = self.rehash(sha256)
        if problem is None:
            return Stored(sha256, size, self.name(sha256), created=False)
        if problem != MISSING:
            try:
                self.client.delete_object(Bucket=self.bucket, Key=self.key(sha256))
            except Exception as error:
                raise self.unavailable(error, f"replace the damaged {self.name(sha256)}") from None
        if size > s3_parts.PART_BYTES:  # an upload in parts begins: first those of writers gone
            self.remove_stale()
        try:
            made = s3_parts.send(
                self.client, self.bucket, self.key(sha256), file, sha256, size, progress
            )
        except s3_parts.Changed:
            raise Refused(f"{source} changed while being stored: nothing was stored") from None
        except OSError as error:
            raise Refused(f"cannot read {source}: {error.strerror} (nothing was stored)") from None
        except Exception as error:
            if s3_parts.code(error) in s3_parts.BAD_DIGEST:
                raise Refused(
                    f"{self.where} refused {source}: the bytes it received do not hash to "
                    f"{sha256} (nothing was stored)"
                ) from None
            raise self.unavailable(error, f"store {source} in {self.where}") from None
        if self._listed is not None:
            self._listed[1][sha256] = size
        repaired = None if problem == MISSING else problem
        return Stored(sha256, size, self.name(sha256), created=made, repaired=repaired)

    def unavailable(self, error: Exception, doing: str) -> Unavailable:
        """The Unavailable of `error` met while trying to do `doing`."""
        reason = _reason(error)
        return Unavailable(f"cannot {doing}: {reason}", reason)


class AnonymousStaging:
    """A file received chunk by chunk into an anonymous temporary file (gone with its
    process, whatever happens), hashed on the way and held to `max_bytes`, as
    artifacts.Staging receives one into the directory store."""

    def __init__(self, source: str, max_bytes: int, directory: str | None = None):
        self.source, self.max_bytes = source, max_bytes
        self.digest, self.size = hashlib.sha256(), 0
        try:
            self.file = tempfile.TemporaryFile(dir=directory)
        except OSError as error:
            raise Refused(f"cannot receive {source}: {error.strerror}") from None

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.max_bytes:
            raise too_large(self.source, self.max_bytes)
        self.digest.update(chunk)
        try:
            self.file.write(chunk)
        except OSError as error:
            raise Refused(f"cannot receive {self.source}: {error.strerror}") from None

    def finish(self) -> Staged:
        try:
            self.file.flush()
        except OSError as error:
            raise Refused(f"cannot receive {self.source}: {error.strerror}") from None
        return Staged(None, self.digest.hexdigest(), self.size, file=self.file)

    def discard(self) -> None:
        self.file.close()


def _judged(found, sha256, size):
    """What is wrong with the object a HEAD `found` (None: missing), as verify says it."""
    if found is None:
        return MISSING
    if found["ContentLength"] != size:
        return "is {}, expected {}".format(*sizes(found["ContentLength"], size))
    whole = _whole_checksum(found)
    if whole is not None and whole != s3_parts.b64(bytes.fromhex(sha256)):
        actual = base64.b64decode(whole).hex()
        return f"holds other bytes: the store's sha256 of them is {actual}"
    return None


def _whole_checksum(found):
    """The store's sha256 of the whole object (base64), if it keeps one: not for an object
    sent in parts, whose checksum is of its parts' ('...-N')."""
    checksum = found.get("ChecksumSHA256")
    if checksum is None or "-" in checksum or found.get("ChecksumType") == "COMPOSITE":
        return None
    return checksum


def _reason(error):
    """What went wrong, as botocore says it: the operation, the store's code and message,
    or the connection's failure; never a credential (botocore names none)."""
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        detail = response.get("Error", {})
        code = detail.get("Code") or response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        message = detail.get("Message") or ""
        said = f"the store answered {code}" + (f" ({message})" if message else "")
        if str(code) in _REFUSING:
            said += ": are the bucket and the credentials right?"
        return printable(said)
    return printable(str(error) or type(error).__name__)


def _expected(sha256):
    if sha256 is not None and not SHA256_PATTERN.match(sha256.lower()):
        raise Refused(f"--sha256 {sha256!r} is not a sha256: give 64 hex digits")
    return None if sha256 is None else sha256.lower()
