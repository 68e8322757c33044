"""Embedders: turn chunks of text (and search queries) into unit vectors.

The pipeline and the search depend only on the small `Embedder` protocol. `LocalEmbedder` is the
default: it needs no network and no model download, yet search finds words, because it hashes
the words themselves into the vector (feature hashing, with a stable hash so every process
agrees). Its space is the whole CRC-32 range (2**32 buckets), so two words rarely share a
bucket, which is why its vectors are sparse (`SparseRows`): a chunk touches ~100 buckets, not a million.
`HttpEmbedder` talks to any OpenAI-compatible ``/embeddings`` endpoint and returns dense
vectors; it turns each way a call can fail into a `TransientError` (retry later) or a
`PermanentError` (fix the configuration, then Retry). Vectors are float32 and L2-normalised,
so cosine similarity is a dot product. This module is pure: no rq, no redis, no flask.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Protocol, Sequence
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import requests
from urllib3.exceptions import ReadTimeoutError

from jobs.failures import PermanentError, TransientError
from jobs.settings import Settings
from jobs.tokens import terms

DEFAULT_HTTP_MODEL = "text-embedding-3-small"


@dataclass(frozen=True, eq=False)
class SparseRows:
    """Rows of a very large hashed space, stored CSR-style: only the buckets a row touches.

    Row ``i`` has the buckets ``indices[indptr[i]:indptr[i + 1]]`` (uint32, sorted and unique
    within the row) with weights ``values[...]`` (float32, each non-empty row L2-normalised).
    A text without words is an empty row. (``eq=False``: arrays have no truth value, so rows
    compare by identity.)
    """

    indptr: np.ndarray   # int64, len(rows) + 1, starts at 0
    indices: np.ndarray  # uint32 bucket ids
    values: np.ndarray   # float32
    dimension: int

    def __post_init__(self) -> None:
        indptr = np.asarray(self.indptr, dtype=np.int64)
        indices = np.asarray(self.indices, dtype=np.uint32)
        values = np.asarray(self.values, dtype=np.float32)
        if (indptr.ndim != 1 or len(indptr) == 0 or indptr[0] != 0
                or indptr[-1] != len(indices) or len(indices) != len(values)):
            raise ValueError("SparseRows arrays do not describe the same rows")
        object.__setattr__(self, "indptr", indptr)
        object.__setattr__(self, "indices", indices)
        object.__setattr__(self, "values", values)

    def __len__(self) -> int:
        return len(self.indptr) - 1

    @classmethod
    def empty(cls, dimension: int) -> SparseRows:
        """No rows at all (an empty batch)."""
        return cls(np.zeros(1, np.int64), np.zeros(0, np.uint32), np.zeros(0, np.float32),
                   dimension)

    @classmethod
    def concatenate(cls, blocks: Sequence[SparseRows]) -> SparseRows:
        """The rows of every block, in order (the pipeline embeds in batches)."""
        if not blocks:
            raise ValueError("nothing to concatenate")
        dimension = blocks[0].dimension
        if any(block.dimension != dimension for block in blocks):
            raise ValueError("cannot concatenate SparseRows of different dimensions")
        offsets = np.cumsum([0] + [len(block.indices) for block in blocks])
        indptr = np.concatenate([np.zeros(1, np.int64)] + [
            block.indptr[1:] + offset for block, offset in zip(blocks, offsets)])
        return cls(indptr, np.concatenate([block.indices for block in blocks]),
                   np.concatenate([block.values for block in blocks]), dimension)

    def to_bytes(self) -> tuple[bytes, bytes, bytes]:
        """``(indptr, indices, values)`` as raw little-endian-native bytes, for Redis."""
        return self.indptr.tobytes(), self.indices.tobytes(), self.values.tobytes()

    @classmethod
    def from_bytes(cls, indptr: bytes, indices: bytes, values: bytes,
                   dimension: int) -> SparseRows:
        """The inverse of `to_bytes` (read-only views on the bytes, no copy)."""
        return cls(np.frombuffer(indptr, dtype=np.int64), np.frombuffer(indices, dtype=np.uint32),
                   np.frombuffer(values, dtype=np.float32), dimension)


#: What `Embedder.embed` returns: dense rows, or sparse rows of a hashed space.
Embedding = np.ndarray | SparseRows


class Embedder(Protocol):
    """What the pipeline and the search need from an embedder."""

    #: Names the vectors' space; part of the pipeline version.
    model: str
    #: Length of every vector (0 until known, for a remote model).
    dimension: int
    #: How many texts the pipeline should pass per `embed` call (it reports progress per batch).
    batch_size: int

    def embed(self, texts: Sequence[str]) -> Embedding:
        """One L2-normalised row per text: either a dense float32 array of shape
        ``(len(texts), dimension)`` or `SparseRows` with ``len(texts)`` rows."""
        ...


def normalise_rows(vectors: np.ndarray) -> np.ndarray:
    """Scale each row to unit length in place (a zero row stays zero) and return it."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    np.divide(vectors, norms, out=vectors, where=norms > 0)
    return vectors


class LocalEmbedder:
    """Feature-hashed bag of words in 2**32 buckets: the whole CRC-32 range, as sparse rows.

    Words are NFKC-normalised and lowercased; a word's bucket is its CRC-32 modulo `dimension`,
    which, unlike ``hash()``, is the same in every process and on every machine. A bucket's
    weight is ``1 + ln(count)`` (sublinear: a word repeated ten times does not drown the rest).
    With this many buckets collisions are rare, so the old random signs that let colliding
    words cancel out are not needed: every weight is positive.
    """

    model = "local-hash-v3"  # v3: bigrams of scripts written without spaces (jobs.tokens)

    def __init__(self, dimension: int = 2 ** 32, batch_size: int = 256) -> None:
        if not 0 < dimension <= 2 ** 32:
            raise ValueError("dimension must be between 1 and 2**32 (uint32 bucket ids)")
        self.dimension = dimension
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> SparseRows:
        hashes: list[int] = []
        rows: list[int] = []
        for row, text in enumerate(texts):
            words = terms(text)
            hashes.extend(zlib.crc32(word.encode("utf-8")) for word in words)
            rows.extend([row] * len(words))
        buckets = np.array(hashes, dtype=np.int64) % self.dimension
        # One (row, bucket) key per occurrence; np.unique sorts by row, then bucket, and counts.
        cells, counts = np.unique(np.array(rows, dtype=np.int64) << 32 | buckets,
                                  return_counts=True)
        cell_rows = cells >> 32
        weights = 1.0 + np.log(counts)
        norms = np.sqrt(np.bincount(cell_rows, weights=weights * weights, minlength=len(texts)))
        indptr = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(np.bincount(cell_rows, minlength=len(texts)), out=indptr[1:])
        return SparseRows(indptr, (cells & 0xFFFFFFFF).astype(np.uint32),
                          (weights / norms[cell_rows]).astype(np.float32), self.dimension)


def display_url(url: str) -> str:
    """`url` without any user:password part, fit for a message."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", "")) if parts.scheme else url


def _service_detail(response: requests.Response) -> str:
    """The service's own error text (OpenAI style ``{"error": {"message": …}}``), shortened."""
    try:
        payload = response.json()
    except ValueError:
        return ""
    error = payload.get("error") if isinstance(payload, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    if not isinstance(message, str) or not message.strip():
        return ""
    message = " ".join(message.split())
    return f": {message[:200]}" if len(message) <= 200 else f": {message[:199]}…"


class HttpEmbedder:
    """Embeddings from an OpenAI-compatible API: ``POST {url}/embeddings``, in batches.

    One `requests.Session` per instance keeps connections open between batches; keep one
    instance per process. `dimension` is 0 until the first answer tells it.
    """

    def __init__(self, url: str, model: str, api_key: str = "", timeout: float = 30.0,
                 batch_size: int = 64) -> None:
        self.url = url
        self.endpoint = f"{url.rstrip('/')}/embeddings"
        self.model = model
        self.timeout = timeout
        self.batch_size = batch_size
        self.dimension = 0
        self._session = requests.Session()
        if api_key:
            self._session.headers["Authorization"] = f"Bearer {api_key}"

    def close(self) -> None:
        self._session.close()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        blocks = [self._embed_batch(list(texts[start:start + self.batch_size]))
                  for start in range(0, len(texts), self.batch_size)]
        if not blocks:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.vstack(blocks)

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        response = self._post({"model": self.model, "input": batch})
        vectors = self._read_vectors(response, len(batch))
        self.dimension = vectors.shape[1]
        return normalise_rows(vectors)

    def _post(self, payload: dict[str, Any]) -> requests.Response:
        """POST `payload`; a network failure or an error status becomes an IntakeError."""
        try:
            response = self._session.post(self.endpoint, json=payload,
                                          timeout=(min(self.timeout, 10.0), self.timeout))
        except (requests.exceptions.InvalidURL, requests.exceptions.InvalidSchema,
                requests.exceptions.MissingSchema, requests.exceptions.InvalidHeader) as exc:
            raise self._configuration_error(exc) from None
        except requests.RequestException as exc:
            raise self._network_error(exc) from None
        if response.status_code >= 300:
            raise _status_error(response)
        return response

    def _network_error(self, exc: requests.RequestException) -> TransientError:
        # A body that stops arriving surfaces as a ConnectionError wrapping a read timeout.
        cause = exc.args[0] if exc.args else None
        if isinstance(exc, requests.Timeout) or isinstance(cause, ReadTimeoutError):
            return TransientError(
                f"The embedding service did not answer within {self.timeout:g} s.",
                code="embedding_timeout")
        return TransientError(
            f"The embedding service at {display_url(self.url)} could not be reached.",
            code="embedding_unavailable")

    def _configuration_error(self, exc: requests.RequestException) -> PermanentError:
        if isinstance(exc, requests.exceptions.InvalidHeader):
            problem = ("The embedding API key is not a valid header value. "
                       "Check INTAKE_EMBEDDING_API_KEY, then Retry.")
        else:
            problem = (f"INTAKE_EMBEDDING_URL ({display_url(self.url)}) is not a usable "
                       f"http(s) URL. Fix it, then Retry.")
        return PermanentError(problem, code="embedding_rejected", retryable=True)

    def _read_vectors(self, response: requests.Response, expected: int) -> np.ndarray:
        """The response's vectors in input order, checked for count and a consistent length."""
        try:
            items = sorted(response.json()["data"], key=lambda item: item["index"])
            if [item["index"] for item in items] != list(range(expected)):
                raise ValueError("indexes do not match the input")
            vectors = np.array([item["embedding"] for item in items], dtype=np.float32)
        except (ValueError, KeyError, TypeError, AttributeError):
            vectors = None
        if (vectors is None or vectors.ndim != 2 or vectors.shape[1] == 0
                or (self.dimension and vectors.shape[1] != self.dimension)
                or not np.isfinite(vectors).all()):
            raise TransientError(
                f"The embedding service sent an answer Intake cannot read (expected {expected} "
                f"vectors of one length).", code="embedding_bad_response")
        return vectors


def _status_error(response: requests.Response) -> TransientError | PermanentError:
    """Classify an error status: 408, 429 and 5xx may pass; other answers need a fix first."""
    status = response.status_code
    if status == 429:
        return TransientError("The embedding service is rate-limiting Intake (HTTP 429).",
                              code="embedding_rate_limited")
    if status == 408:
        return TransientError("The embedding service timed out on the request (HTTP 408).",
                              code="embedding_timeout")
    if status >= 500:
        return TransientError(f"The embedding service answered {status} "
                              f"({response.reason or 'server error'}).",
                              code="embedding_unavailable")
    detail = _service_detail(response)
    if status in (401, 403):
        hint = "refused the API key"
        fix = "Check INTAKE_EMBEDDING_API_KEY, then Retry."
    else:
        hint = "rejected the request"
        fix = "Check INTAKE_EMBEDDING_URL and INTAKE_EMBEDDING_MODEL, then Retry."
    return PermanentError(f"The embedding service {hint} (HTTP {status}{detail}). {fix}",
                          code="embedding_rejected", retryable=True)


def make_embedder(settings: Settings, timeout: float | None = None) -> Embedder:
    """The embedder the settings ask for: HTTP when INTAKE_EMBEDDING_URL is set, else local.
    `timeout`: the HTTP one's, when not INTAKE_EMBEDDING_TIMEOUT (a search's is short)."""
    if settings.embedding_url:
        return HttpEmbedder(settings.embedding_url,
                            settings.embedding_model or DEFAULT_HTTP_MODEL,
                            api_key=settings.embedding_api_key,
                            timeout=settings.embedding_timeout if timeout is None else timeout)
    return LocalEmbedder()
