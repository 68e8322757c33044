"""A worker reads an upload's head with its start; `load` gives the whole file either way."""
from __future__ import annotations

import pytest

from jobs.core import keys
from jobs.core.failures import PermanentError
from jobs.tasks import blobs


def _head(redis, task_id: str) -> bytes:
    pipe = redis.pipeline(transaction=False)
    blobs.queue_head(pipe, task_id)
    return pipe.execute()[0]


@pytest.mark.parametrize("size", [1, blobs.HEAD_BYTES, blobs.HEAD_BYTES + 1, 3 * blobs.HEAD_BYTES])
def test_the_whole_upload_is_loaded_whatever_its_size(redis, size):
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    redis.set(keys.blob("t"), data)
    assert blobs.load(redis, "t", size, head=_head(redis, "t")) == data


def test_an_upload_gone_since_the_start_is_still_a_readable_error(redis):
    head = _head(redis, "gone")          # b"": nothing was there
    with pytest.raises(PermanentError) as failure:
        blobs.load(redis, "gone", 10, head=head)
    assert failure.value.code == "upload_expired"


def test_an_unfinished_upload_is_not_taken_for_a_small_one(redis):
    redis.set(keys.blob("t"), b"half")   # 4 of the 10 bytes the submit announced
    with pytest.raises(PermanentError) as failure:
        blobs.load(redis, "t", 10, head=_head(redis, "t"))
    assert failure.value.code == "upload_incomplete"
