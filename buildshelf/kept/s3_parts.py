"""A file sent to S3 as one object that the store checks (`send`): in one PUT up to a part,
else in parts, each with its own sha256, in bounded memory (IN_FLIGHT parts held); always
with `If-None-Match: *`, so that an object is never overwritten. How S3 sums up the parts'
checksums (`composite`) and the size of the parts (`part_bytes`) are written here once; and
the incomplete uploads of dead writers aborted (`abort_abandoned`).
"""

import base64
import hashlib
from collections import deque
from concurrent.futures import ThreadPoolExecutor

# Files up to a part go up in one PUT, larger ones in parts of PART_BYTES (more when a file
# would have over MAX_PARTS of them, S3's limit). 8 MiB is boto3's own default chunk size.
PART_BYTES = 8 << 20
MAX_PARTS = 10_000
# Parts sent at once, each by a thread of its own, the next read once one is done: hashing a
# part and its request's signature (SigV4 hashes the body again over plain HTTP) overlap with
# the other's time on the wire. Two: at most two parts held, where one at a time took 1.7
# times as long as boto3's upload_file (ten at once).
IN_FLIGHT = 2
# What a store answers a write that If-None-Match: * stops (another writer made the object
# first), and what it answers bytes that do not hash to the sha256 sent.
CONFLICT = {"PreconditionFailed", "ConditionalRequestConflict", "412", "409"}
BAD_DIGEST = {"BadDigest", "XAmzContentSHA256Mismatch", "InvalidDigest"}


class Changed(Exception):
    """The file's bytes are not the ones hashed before (changed while being sent)."""


def b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode("ascii")


def part_bytes(size: int) -> int:
    """The size of each part of a file of `size` bytes (the last may be smaller): whole MiB."""
    needed = -(-size // MAX_PARTS)
    return max(PART_BYTES, -(-needed // (1 << 20)) << 20)


def composite(part_digests: list[bytes]) -> str:
    """The checksum S3 keeps of an object sent in parts: the sha256 of their sha256s, '-N'."""
    return f"{b64(hashlib.sha256(b''.join(part_digests)).digest())}-{len(part_digests)}"


def parts_checksum(file, size: int) -> str:
    """The checksum S3 keeps of the open `file` (`size` bytes) sent in parts by `send`."""
    file.seek(0)
    return composite([hashlib.sha256(part).digest() for part in _parts(file, size, None)])


def code(error: Exception) -> str:
    """The store's error code of a botocore ClientError ('' for any other failure)."""
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code") or "")
    return ""


def send(client, bucket: str, key: str, file, sha256: str, size: int, progress=None) -> bool:
    """Send the open `file` (`size` bytes that hash to `sha256`) as the object `key`: True if
    this made it, False if it was there already (If-None-Match: * refused). A part's bytes
    that differ from what was hashed before raise Changed; the store's refusals, botocore's
    exceptions."""
    file.seek(0)
    try:
        if size <= PART_BYTES:
            body = file.read(size)
            if len(body) != size or hashlib.sha256(body).hexdigest() != sha256:
                raise Changed
            client.put_object(
                Bucket=bucket, Key=key, Body=body,
                ChecksumSHA256=b64(bytes.fromhex(sha256)), IfNoneMatch="*",
            )  # fmt: skip
            if progress is not None:
                progress(size, size)
            return True
        return _in_parts(client, bucket, key, file, sha256, size, progress)
    except Exception as error:
        if code(error) in CONFLICT:
            return False
        raise


def _in_parts(client, bucket, key, file, sha256, size, progress):
    started = client.create_multipart_upload(Bucket=bucket, Key=key, ChecksumAlgorithm="SHA256")
    upload = {"Bucket": bucket, "Key": key, "UploadId": started["UploadId"]}
    whole = hashlib.sha256()
    try:
        sent = _send_parts(client, upload, _parts(file, size, whole), size, progress)
        if whole.hexdigest() != sha256:  # the file changed since it was hashed
            raise Changed
        client.complete_multipart_upload(**upload, MultipartUpload={"Parts": sent}, IfNoneMatch="*")
        return True
    except BaseException:
        try:  # so that the store keeps no parts of it (a lifecycle rule would, later)
            client.abort_multipart_upload(**upload)
        except Exception:
            pass
        raise


def _send_parts(client, upload, parts, size, progress):
    """Send `parts` (read in this thread, in order) to `upload`, IN_FLIGHT at once: each
    part's entry of CompleteMultipartUpload, in order. The first failure is raised, once the
    parts in flight are done."""
    sent, flying, done, number = [], deque(), 0, 0
    with ThreadPoolExecutor(IN_FLIGHT, thread_name_prefix="s3 part") as pool:
        try:
            # Not enumerate(): its result, kept for reuse, would hold each part while the next
            # is read.
            for part in parts:
                number += 1
                flying.append(pool.submit(_send_part, client, upload, number, part))
                del part  # held by its sender alone: let go once sent
                while len(flying) >= IN_FLIGHT or (flying and flying[0].done()):
                    entry, length = flying.popleft().result()
                    sent.append(entry)
                    done += length
                    if progress is not None:
                        progress(done, size)
            for future in flying:
                sent.append(future.result()[0])
        except BaseException:
            for future in flying:
                future.cancel()
            raise
    if progress is not None:
        progress(size, size)
    return sent


def _send_part(client, upload, number, part):
    """Part `number` sent: (its entry of CompleteMultipartUpload, its length)."""
    answer = client.upload_part(
        **upload, PartNumber=number, Body=part, ChecksumSHA256=b64(hashlib.sha256(part).digest())
    )
    entry = {"PartNumber": number, "ETag": answer["ETag"]}
    return entry | {"ChecksumSHA256": answer.get("ChecksumSHA256")}, len(part)


def abort_abandoned(client, bucket, prefix, ours, idle_seconds, now, dry_run=False) -> list:
    """Abort each incomplete multipart upload of `bucket` under `prefix` whose key is `ours`
    (a function of it, true for an object's) that nothing was written to (neither begun nor a
    part sent) for `idle_seconds` before `now`: its writer is gone (killed mid-upload), and
    the store would keep its parts, and charge for them, for ever. Their keys, aborted (with
    `dry_run`, to be). One that cannot be listed or aborted is left, as all are while the
    store cannot be asked: what is left costs only space."""
    aborted = []
    try:
        pages = client.get_paginator("list_multipart_uploads").paginate(
            Bucket=bucket, Prefix=prefix
        )
        uploads = [upload for page in pages for upload in page.get("Uploads", ())]
    except Exception:
        return aborted
    for upload in uploads:
        key, upload_id = upload["Key"], upload["UploadId"]
        written = upload["Initiated"].timestamp()
        if now - written < idle_seconds or not ours(key):
            continue
        try:  # its last part may be recent: a writer alive, sending a large file slowly
            named = {"Bucket": bucket, "Key": key, "UploadId": upload_id}
            for page in client.get_paginator("list_parts").paginate(**named):
                for part in page.get("Parts", ()):
                    written = max(written, part["LastModified"].timestamp())
            if now - written >= idle_seconds:
                if not dry_run:
                    client.abort_multipart_upload(**named)
                aborted.append(key)
        except Exception:
            continue
    return aborted


def _parts(file, size, whole):
    """The file's parts as bytes, one at a time, each also added to the digest `whole`. Each
    is read whole into one buffer (a buffered file's read fills it in place: no chunks to
    join, which held the part twice), and let go before the next is read."""
    step, left = part_bytes(size), size
    while left > 0:
        part = file.read(min(step, left))
        if len(part) != min(step, left):
            raise Changed  # the file is shorter than it was
        left -= len(part)
        if whole is not None:
            whole.update(part)
        yield part
        del part  # else held while the next is read: two parts in memory, not one
