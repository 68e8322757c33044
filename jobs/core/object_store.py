"""Where originals are kept: a directory (`file:///absolute/path`) or an S3-compatible bucket
(`s3://bucket/prefix`), as INTAKE_STORAGE_URL names it (docs/deploying.md, "Originals").

Both are written and read as streams, a piece at a time, so that neither a web process taking
an upload nor a worker reading one holds a file whole in memory.

Why boto3 for S3 (against obstore and fsspec's s3fs): it is the client every S3-compatible store
is tested with, it reads the standard AWS variables (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_DEFAULT_REGION`) as every S3 tool does, and its sockets are plain
Python ones, which the web's gevent workers make cooperative: a 200 MiB upload on its way to the
store leaves the other requests of that web process served. obstore's client runs in Rust and
would hold the event loop for a whole transfer; s3fs runs an asyncio loop in a thread of its
own beside gevent's.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, Protocol
from urllib.parse import unquote, urlparse

from jobs.core.dependencies import PROBE_SECONDS, ProbeFailed, blocking

#: Bytes per piece of a stream, read or written: what a transfer holds in memory at once.
PIECE_BYTES = 8 * 1024 * 1024
#: An S3 store that does not answer: a connection not made in CONNECT seconds, or a request
#: unanswered for READ seconds, is tried ATTEMPTS times in all, then fails (an upload answers
#: 503 storage_unavailable, instead of waiting out botocore's default of five tries of 60 s;
#: a worker's read fails as transient and is retried).
S3_CONNECT_TIMEOUT_SECONDS = 5.0
S3_READ_TIMEOUT_SECONDS = 30.0
S3_ATTEMPTS = 3
#: Health's probe of an S3 store (jobs.core.dependencies): one HeadBucket, one attempt, half of
#: PROBE_SECONDS to connect and half for the answer.
S3_PROBE_TIMEOUT_SECONDS = PROBE_SECONDS / 2


class NotStored(KeyError):
    """No object has that name (never stored, or deleted)."""


class ObjectStore(Protocol):
    """Objects by name (`/`-separated, no leading `/`)."""

    def put(self, name: str, source: BinaryIO) -> int:
        """Store what `source` holds from where it stands, replacing any object of that name
        whole (a reader never sees half of one); returns the bytes stored."""
        ...

    def open(self, name: str) -> BinaryIO:
        """A stream of the object's bytes; raises NotStored."""
        ...

    def exists(self, name: str) -> bool: ...

    def copy(self, source: str, target: str) -> None:
        """`target` becomes a copy of `source`, made inside the store (no byte through this
        process where the store can); raises NotStored."""
        ...

    def delete(self, name: str) -> None:
        """Gone, whether it was there or not."""
        ...

    def names(self, prefix: str = "") -> Iterator[str]:
        """Every stored name that starts with `prefix`, in no particular order."""
        ...

    def listing(self, prefix: str = "") -> Iterator[tuple[str, float, int]]:
        """`names`, each with the time it was stored (seconds since the epoch) and its size."""
        ...

    def probe(self) -> None:
        """Health's check, cheap and listing nothing: raises ProbeFailed (or the client's own
        error) unless the store would take an upload now."""
        ...

    def clear_unfinished(self, before: float) -> int:
        """Remove what writes cut off before `before` (seconds since the epoch) left behind,
        which `listing` never shows: a directory's temporary `.part-` files, a bucket's
        multipart uploads never completed nor aborted (a process killed mid-upload); returns
        how many. A write still on its way must have started after `before`."""
        ...


def open_store(url: str) -> ObjectStore:
    """The store INTAKE_STORAGE_URL names; ValueError for an address it cannot be."""
    parsed = urlparse(url)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost") or not parsed.path.startswith("/"):
            raise ValueError(f"INTAKE_STORAGE_URL={url!r}: a directory is file:///absolute/path")
        return FileStore(Path(unquote(parsed.path)))
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise ValueError(f"INTAKE_STORAGE_URL={url!r}: a bucket is s3://bucket/prefix")
        return S3Store(parsed.netloc, parsed.path.strip("/"))
    raise ValueError(f"INTAKE_STORAGE_URL={url!r} must be a file:/// or s3:// URL")


class FileStore:
    """A directory; every machine that runs a web or a worker must see the same one (a shared
    volume), or use S3."""

    kind = "file"

    def __init__(self, root: Path) -> None:
        self.root = root
        self._root = os.fspath(root)

    def _path(self, name: str) -> Path:
        return Path(self._join(name))

    def _join(self, name: str) -> str:
        """The file of `name`, judged by its parts rather than by resolving it on the disk
        (six lstat calls an upload does not need): no empty, `.` or `..` part, so it stays in
        the store."""
        parts = name.split("/")
        if not name or "\0" in name or any(part in ("", ".", "..") for part in parts):
            raise ValueError(f"object name {name!r} leaves the store")
        return os.path.join(self._root, *parts)

    def put(self, name: str, source: BinaryIO) -> int:
        path = self._join(name)
        # Written beside it under a temporary name (one per process: two never write into the
        # same), then renamed over it: all or nothing. The folder is made only when missing.
        folder, base = os.path.split(path)
        temporary = os.path.join(folder, f".part-{os.getpid()}-{base}")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
        try:
            handle = os.open(temporary, flags, 0o644)
        except FileNotFoundError:
            _make_folder(folder)
            handle = os.open(temporary, flags, 0o644)
        try:
            try:  # os.write: a small upload is one write(2), without a buffered file around it
                size = 0
                while piece := source.read(PIECE_BYTES):
                    size += _write_all(handle, piece)
            finally:
                os.close(handle)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise
        return size

    def open(self, name: str) -> BinaryIO:
        try:
            return self._path(name).open("rb")
        except (FileNotFoundError, IsADirectoryError):
            raise NotStored(name) from None

    def exists(self, name: str) -> bool:
        return self._path(name).is_file()

    def copy(self, source: str, target: str) -> None:
        origin, path = self._path(source), self._path(target)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.parent / f".part-{os.getpid()}-{path.name}"
        temporary.unlink(missing_ok=True)
        try:
            try:  # a hard link: the same bytes under a second name, none copied
                os.link(origin, temporary)
            except FileNotFoundError:
                raise NotStored(source) from None
            except OSError:  # a file system without hard links
                shutil.copyfile(origin, temporary)
            os.replace(temporary, path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise

    def delete(self, name: str) -> None:
        self._path(name).unlink(missing_ok=True)

    def names(self, prefix: str = "") -> Iterator[str]:
        return (name for name, _modified, _size in self.listing(prefix))

    def listing(self, prefix: str = "") -> Iterator[tuple[str, float, int]]:
        if not self.root.is_dir():
            return
        for directory, _subdirectories, files in os.walk(self.root):
            for file in files:
                if file.startswith(".part-"):
                    continue
                path = Path(directory, file)
                name = path.relative_to(self.root).as_posix()
                if name.startswith(prefix):
                    with contextlib.suppress(FileNotFoundError):  # deleted meanwhile
                        stat = path.stat()
                        yield name, stat.st_mtime, stat.st_size

    def probe(self) -> None:
        """A stat and an access(2) of the directory, off gevent's loop (a mount that hangs
        must not hold the web's other requests). Missing is down, although an upload would
        make it: the originals already stored are not there (a volume not mounted, a wrong
        path), so no worker could read them."""
        blocking(self._probe)

    def _probe(self) -> None:
        try:
            mode = os.stat(self._root).st_mode
        except FileNotFoundError:
            raise ProbeFailed("missing") from None
        except PermissionError:
            raise ProbeFailed("not readable") from None
        if not stat.S_ISDIR(mode):
            raise ProbeFailed("not a directory")
        if not os.access(self._root, os.W_OK | os.X_OK):
            raise ProbeFailed("not writable")

    def clear_unfinished(self, before: float) -> int:
        """The `.part-` files last written before `before`: a write goes on moving its file's
        modification time with every piece, so one that stopped that long ago was cut off."""
        removed = 0
        if not self.root.is_dir():
            return 0
        for directory, _subdirectories, files in os.walk(self.root):
            for file in files:
                if not file.startswith(".part-"):
                    continue
                path = os.path.join(directory, file)
                with contextlib.suppress(FileNotFoundError):  # renamed or removed meanwhile
                    if os.lstat(path).st_mtime < before:
                        os.unlink(path)
                        removed += 1
        return removed


class S3Store:
    """A bucket (and a prefix inside it) of any S3-compatible store."""

    kind = "s3"

    def __init__(self, bucket: str, prefix: str = "", client: Any = None) -> None:
        self.bucket = bucket
        self.prefix = f"{prefix}/" if prefix else ""
        self.client = client if client is not None else _s3_client()
        self._probe_client: Any = None

    def put(self, name: str, source: BinaryIO) -> int:
        """One PUT for an object of at most a piece; above, a multipart upload sent one piece
        at a time (boto3's transfer manager reads a stream that cannot seek whole before its
        first part), aborted if the stream breaks, so that no part is left behind."""
        key = self.prefix + name
        piece = _read_piece(source)
        if len(piece) < PIECE_BYTES:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=piece)
            return len(piece)
        upload = self.client.create_multipart_upload(Bucket=self.bucket, Key=key)["UploadId"]
        parts: list[dict[str, Any]] = []
        size = 0
        try:
            while piece:
                reply = self.client.upload_part(
                    Bucket=self.bucket,
                    Key=key,
                    UploadId=upload,
                    PartNumber=len(parts) + 1,
                    Body=piece,
                )
                parts.append({"PartNumber": len(parts) + 1, "ETag": reply["ETag"]})
                size += len(piece)
                piece = b""  # let go of this piece before reading the next
                piece = _read_piece(source)
            self.client.complete_multipart_upload(
                Bucket=self.bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts}
            )
        except BaseException:
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload)
            raise
        return size

    def open(self, name: str) -> BinaryIO:
        try:
            reply = self.client.get_object(Bucket=self.bucket, Key=self.prefix + name)
        except self.client.exceptions.NoSuchKey:
            raise NotStored(name) from None
        return reply["Body"]

    def exists(self, name: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=self.prefix + name)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise
        return True

    def copy(self, source: str, target: str) -> None:
        """S3's CopyObject: the store copies (one call up to 5 GiB, past INTAKE_MAX_FILE_BYTES)."""
        from botocore.exceptions import ClientError

        try:
            self.client.copy_object(
                Bucket=self.bucket,
                Key=self.prefix + target,
                CopySource={"Bucket": self.bucket, "Key": self.prefix + source},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                raise NotStored(source) from None
            raise

    def delete(self, name: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self.prefix + name)

    def names(self, prefix: str = "") -> Iterator[str]:
        return (name for name, _modified, _size in self.listing(prefix))

    def listing(self, prefix: str = "") -> Iterator[tuple[str, float, int]]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self.prefix + prefix
        )
        for page in pages:
            for item in page.get("Contents", []):
                yield (
                    item["Key"][len(self.prefix) :],
                    item["LastModified"].timestamp(),
                    int(item.get("Size", 0)),
                )

    def probe(self) -> None:
        """One HeadBucket (the s3:ListBucket Intake already needs; nothing is listed) on a
        client of its own that tries once with short timeouts: the store's own client would
        wait out its three attempts of 30 s on a store that hangs."""
        from botocore.exceptions import ClientError

        if self._probe_client is None:
            self._probe_client = _s3_client(
                connect_timeout=S3_PROBE_TIMEOUT_SECONDS,
                read_timeout=S3_PROBE_TIMEOUT_SECONDS,
                attempts=1,
            )
        try:
            self._probe_client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", "unknown"))
            raise ProbeFailed(f"answered {code}"[:40]) from None

    def clear_unfinished(self, before: float) -> int:
        """Abort the multipart uploads under the store's prefix initiated before `before`: the
        parts of one whose process was killed stay in the bucket, billed and unlisted, until
        then (`put` aborts only an upload whose stream broke)."""
        from botocore.exceptions import ClientError

        removed = 0
        pages = self.client.get_paginator("list_multipart_uploads").paginate(
            Bucket=self.bucket, Prefix=self.prefix
        )
        for page in pages:
            for upload in page.get("Uploads", []):
                if upload["Initiated"].timestamp() >= before:
                    continue
                try:
                    self.client.abort_multipart_upload(
                        Bucket=self.bucket, Key=upload["Key"], UploadId=upload["UploadId"]
                    )
                    removed += 1
                except ClientError as exc:  # ended meanwhile: nothing left to abort
                    if exc.response.get("Error", {}).get("Code") != "NoSuchUpload":
                        raise
        return removed


def _write_all(handle: int, piece: bytes) -> int:
    view = memoryview(piece)
    while view:
        view = view[os.write(handle, view) :]
    return len(piece)


def _make_folder(folder: str) -> None:
    """One mkdir when only the folder is missing (a document's first original), the whole path
    otherwise; made meanwhile by another process is as good."""
    try:
        os.mkdir(folder)
    except FileNotFoundError:
        os.makedirs(folder, exist_ok=True)
    except FileExistsError:
        pass


def _read_piece(source: BinaryIO) -> bytes:
    """Up to PIECE_BYTES of `source`, fewer only at its end (a stream may answer short reads)."""
    pieces, held = [], 0
    while held < PIECE_BYTES:
        piece = source.read(PIECE_BYTES - held)
        if not piece:
            break
        pieces.append(piece)
        held += len(piece)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def _s3_client(
    connect_timeout: float | None = None,
    read_timeout: float | None = None,
    attempts: int | None = None,
) -> Any:
    """boto3's client from the standard AWS variables; path-style addresses when an endpoint is
    given (`AWS_ENDPOINT_URL`: MinIO, SeaweedFS, Ceph and most S3-compatible stores), and
    checksums only where the API requires them (boto3's default since 1.36 sends CRC trailers
    that some S3-compatible stores refuse, and copies each part to compute them). `attempts`
    given: that many in all (botocore's `total_max_attempts`); else S3_ATTEMPTS."""
    import boto3
    from botocore.config import Config

    style = "path" if os.environ.get("AWS_ENDPOINT_URL") else "auto"
    retries: dict[str, Any] = {"mode": "standard", "max_attempts": S3_ATTEMPTS}
    if attempts is not None:
        retries = {"mode": "standard", "total_max_attempts": attempts}
    return boto3.client(
        "s3",
        config=Config(
            s3={"addressing_style": style},
            retries=retries,
            connect_timeout=connect_timeout or S3_CONNECT_TIMEOUT_SECONDS,
            read_timeout=read_timeout or S3_READ_TIMEOUT_SECONDS,
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        ),
    )
