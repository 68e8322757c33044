"""Originals' store (jobs.core.object_store) on a directory: whole objects or none, streams in
bounded pieces, names that cannot leave the store, and the addresses INTAKE_STORAGE_URL takes.
(The S3 side runs against a real SeaweedFS server in
tests/integration/core/test_object_store.py.)"""

from __future__ import annotations

import io
import time
import tracemalloc

import pytest

from jobs.core import object_store
from jobs.core.object_store import FileStore, NotStored, S3Store, open_store
from tests.silent_server import silent_server
from tests.streams import MadeStream


def test_an_object_is_stored_read_listed_replaced_and_deleted(tmp_path):
    store = FileStore(tmp_path / "originals")
    assert list(store.names()) == []
    assert store.put("acme/report.pdf", io.BytesIO(b"%PDF-1.7 first")) == 14
    assert store.put("acme/deep/notes.txt", io.BytesIO(b"notes")) == 5
    with store.open("acme/report.pdf") as stream:
        assert stream.read() == b"%PDF-1.7 first"
    assert sorted(store.names("acme/")) == ["acme/deep/notes.txt", "acme/report.pdf"]
    assert list(store.names("globex/")) == []

    store.put("acme/report.pdf", io.BytesIO(b"%PDF-1.7 second"))
    assert store.open("acme/report.pdf").read() == b"%PDF-1.7 second"
    store.delete("acme/report.pdf")
    store.delete("acme/report.pdf")  # gone either way
    with pytest.raises(NotStored):
        store.open("acme/report.pdf")


def test_an_upload_that_breaks_leaves_the_object_as_it_was(tmp_path):
    store = FileStore(tmp_path)
    store.put("a/b", io.BytesIO(b"kept"))
    with pytest.raises(ConnectionResetError):
        store.put("a/b", MadeStream(3 * object_store.PIECE_BYTES, b"x", breaks=True).buffered())
    assert store.open("a/b").read() == b"kept"
    assert list(store.names()) == ["a/b"], "no piece of the broken one is left behind"


def test_a_large_object_is_written_a_piece_at_a_time(tmp_path):
    store = FileStore(tmp_path)
    size = 96 * 1024 * 1024
    source = MadeStream(size).buffered()
    tracemalloc.start()
    try:
        assert store.put("big", source) == size
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * object_store.PIECE_BYTES, f"{peak / 2**20:.0f} MiB held for a 96 MiB put"
    assert (tmp_path / "big").stat().st_size == size


@pytest.mark.parametrize("name", ["../outside", "a/../../outside", "/etc/passwd"])
def test_a_name_cannot_leave_the_store(tmp_path, name):
    store = FileStore(tmp_path / "originals")
    with pytest.raises(ValueError):
        store.put(name, io.BytesIO(b"x"))
    assert not (tmp_path / "outside").exists()


def test_the_addresses_a_store_takes(tmp_path, monkeypatch):
    store = open_store(f"file://{tmp_path}/originals")
    assert isinstance(store, FileStore) and store.root == tmp_path / "originals"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    s3 = open_store("s3://intake-originals/prod/eu")
    assert isinstance(s3, S3Store) and (s3.bucket, s3.prefix) == ("intake-originals", "prod/eu/")
    for bad in ("file://relative/path", "s3:///no-bucket", "ftp://host/x", "/just/a/path"):
        with pytest.raises(ValueError):
            open_store(bad)


def test_an_s3_store_that_never_answers_fails_in_bounded_time(monkeypatch):
    """A server that takes the connection and the request, then says nothing (a hung gateway):
    each attempt ends at the read timeout and the put fails after a few of them, in seconds,
    instead of holding an upload's request for minutes (botocore's default: 60 s a try)."""
    monkeypatch.setattr(object_store, "S3_READ_TIMEOUT_SECONDS", 0.5)
    with silent_server() as (endpoint, held):
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        for name, value in (
            ("AWS_ACCESS_KEY_ID", "key"),
            ("AWS_SECRET_ACCESS_KEY", "secret"),
            ("AWS_DEFAULT_REGION", "us-east-1"),
        ):
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("AWS_MAX_ATTEMPTS", raising=False)
        store = S3Store("originals")
        started = time.monotonic()
        with pytest.raises(Exception) as failed:
            store.put("a/b", io.BytesIO(b"never stored"))
        took = time.monotonic() - started
    assert "timeout" in type(failed.value).__name__.lower() or "timed out" in str(failed.value)
    assert len(held) >= 2, "tried again before giving up"
    assert took < 10, f"{took:.1f} s to give up ({len(held)} connections)"
