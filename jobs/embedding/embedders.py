"""Embedders: turn chunks of text (and search queries) into unit vectors.

The pipeline and the search depend only on the small `Embedder` protocol. Dense vectors only:
a chunk's search terms are no embedding (jobs.text.terms counts them at indexing, whatever the
embedder). `LocalEmbedder` is the default: no network, no model download, and no dense model:
chunks are then searched by their terms alone.
`HttpEmbedder` talks to any OpenAI-compatible ``/embeddings`` endpoint and returns dense
vectors; it turns each way a call can fail into a `TransientError` (retry later) or a
`PermanentError` (fix the configuration, then Retry). Vectors are float32 and L2-normalised,
so cosine similarity is a dot product. This module is pure: no rq, no redis, no flask.

What every process shares about the service (its budget, a Retry-After, the largest batch it
takes) reaches `HttpEmbedder.embed` through a `Gate` handed in per call (jobs.embedding.budget
keeps it in Redis): the embedder asks it before each request and tells it what the service said.
"""

from __future__ import annotations

import contextlib
import math
import re
import time
from collections.abc import Iterator, Sequence
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

import numpy as np
import requests
from urllib3.exceptions import ReadTimeoutError

from jobs.core.addresses import display_url
from jobs.core.failures import PermanentError, TransientError
from jobs.core.settings import Settings
from jobs.text.terms import TERM_SPACE, TermCounter

DEFAULT_HTTP_MODEL = "text-embedding-3-small"
#: The longest Retry-After an attempt waits out and then resends within itself; a longer one
#: fails the attempt as transient, its next attempt scheduled after it.
MAX_RETRY_AFTER_SECONDS = 300.0
#: How many times one request is resent after a Retry-After within an attempt.
MAX_RESENDS = 5


#: What `Embedder.embed` returns: one dense float32 row per text.
Embedding = np.ndarray


class Embedder(Protocol):
    """What the pipeline and the search need from an embedder."""

    #: Names the vectors' space; part of the pipeline version.
    model: str
    #: Length of every vector (0 until known, for a remote model).
    dimension: int
    #: How many texts the pipeline should pass per `embed` call (it reports progress per batch).
    batch_size: int

    def embed(self, texts: Sequence[str]) -> Embedding:
        """One L2-normalised row per text: a dense float32 array of shape
        ``(len(texts), dimension)`` (no columns for `LocalEmbedder`: it has no model)."""
        ...


def normalise_rows(vectors: np.ndarray) -> np.ndarray:
    """Scale each row to unit length in place (a zero row stays zero) and return it."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    np.divide(vectors, norms, out=vectors, where=norms > 0)
    return vectors


class LocalEmbedder:
    """The embedder where no service is configured: no dense model at all. A chunk is searched
    by its terms alone, which the index step counts for every embedder (jobs.text.terms), so
    this one has nothing to make: its `embed` gives rows of no columns.

    Its `model` and `dimension` are the term counter's: the pipeline version has carried them
    since the terms were this embedder's rows, and keeping them keeps every knowledge base made
    before from being ingested again as a new version.
    """

    model = TermCounter.model

    def __init__(self, batch_size: int = 256) -> None:
        self.dimension = TERM_SPACE
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """No dense vectors: an empty row per text."""
        return np.zeros((len(texts), 0), dtype=np.float32)


class Gate(Protocol):
    """What an HTTP embedder asks before each request, and tells after some answers."""

    def admit(self) -> contextlib.AbstractContextManager[int]:
        """Wait until a request may go (or raise a TransientError: `BudgetUnavailable`) and
        hold its place while the block runs; yields the largest batch the service is known to
        take (0: none known)."""
        ...

    def hold_off(self, seconds: float, reason: str) -> None:
        """The service asked for a pause (Retry-After): no request of anyone for `seconds`."""
        ...

    def limit_batch(self, size: int) -> None:
        """Batches of `size` texts were taken after larger ones were refused."""
        ...


class OpenGate:
    """No budget, nothing shared (a caller without Redis): a request goes at once, unless the
    service asked this gate's user for a pause, which it waits out."""

    def __init__(self) -> None:
        self._until = 0.0

    @contextlib.contextmanager
    def admit(self) -> Iterator[int]:
        pause = self._until - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        yield 0

    def hold_off(self, seconds: float, reason: str) -> None:
        self._until = max(self._until, time.monotonic() + seconds)

    def limit_batch(self, size: int) -> None:
        pass


class BudgetUnavailable(TransientError):
    """A request may not go now: the budget is spent, or the service asked for a pause."""

    code = "embedding_budget"


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """A Retry-After header in seconds from now: delta-seconds or an HTTP-date (RFC 9110);
    None when absent or unreadable, 0 for a date in the past."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if moment is None or moment.tzinfo is None:
        return None
    return max(0.0, moment.timestamp() - (time.time() if now is None else now))


# How providers say a request carried too many texts (a 400 or 422, where not a 413): OpenAI
# "'$.input' is invalid" / "array too long … maximum length 2048", Voyage and Cohere "too many
# inputs" / "batch size", DashScope "batch size is invalid, it should not be larger than 10",
# Gemini "at most 100 requests can be in one batch", Cohere "total number of texts must be at
# most 96", and limits on a batch's total tokens.
_TOO_MANY = re.compile(
    r"too many (inputs?|texts?|items|documents|requests)|batch size|batch.{0,20}(limit|exceed)"
    r"|\$\.input'? is invalid|array too long|(maximum|at most|more than|larger than|exceed\w*|"
    r"limit)\W+(\w+\W+){0,6}(inputs|texts|items|array|batch)|tokens per (submitted )?batch"
    r"|number of (inputs|texts)",
    re.IGNORECASE,
)


def too_many_inputs(response: requests.Response) -> bool:
    """Whether the service refused the request for the number of texts it carried."""
    if response.status_code == 413:
        return True
    if response.status_code not in (400, 422):
        return False
    return bool(_TOO_MANY.search(_service_detail(response) or response.text[:500]))


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
    instance per process. `dimension` is 0 until the first answer tells it. `batch_size` is
    what the pipeline hands to one `embed` call (and checkpoints); a request carries at most
    that many texts, fewer once the service refused a batch as too large (413, or a 400 saying
    so): the batch is halved until the service takes it, down to one text, and the size that
    worked is told to the gate so that every process sends no more.
    """

    def __init__(
        self, url: str, model: str, api_key: str = "", timeout: float = 30.0, batch_size: int = 64
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.url = url
        self.endpoint = f"{url.rstrip('/')}/embeddings"
        self.model = model
        self.timeout = timeout
        self.batch_size = batch_size
        #: The most texts this instance sends in one request (lowered by a refused batch).
        self.request_size = batch_size
        self.dimension = 0
        self._session = requests.Session()
        if api_key:
            self._session.headers["Authorization"] = f"Bearer {api_key}"

    def close(self) -> None:
        self._session.close()

    def embed(self, texts: Sequence[str], gate: Gate | None = None) -> np.ndarray:
        """One row per text. Each request first passes `gate` (none: `OpenGate`); a 429 or
        503 with a Retry-After of at most MAX_RETRY_AFTER_SECONDS is told to the gate and the
        request resent once the gate lets it (at most MAX_RESENDS times)."""
        gate = gate or OpenGate()
        blocks: list[np.ndarray] = []
        start = resends = 0
        halved = False
        while start < len(texts):
            with gate.admit() as known_limit:
                size = min(self.request_size, known_limit or self.request_size)
                batch = list(texts[start : start + size])
                response = self._post({"model": self.model, "input": batch})
            delay = (
                retry_after_seconds(response.headers.get("Retry-After"))
                if response.status_code in (429, 503)
                else None
            )
            if delay is not None:
                gate.hold_off(delay, f"HTTP {response.status_code}")
                if delay <= MAX_RETRY_AFTER_SECONDS and resends < MAX_RESENDS:
                    resends += 1
                    continue
                raise _status_error(response, retry_after=delay)
            if too_many_inputs(response):
                if len(batch) == 1:
                    raise _refused_single_text(response)
                self.request_size, halved = max(1, len(batch) // 2), True
                continue
            if response.status_code >= 300:
                raise _status_error(response)
            vectors = self._read_vectors(response, len(batch))
            self.dimension = vectors.shape[1]
            blocks.append(normalise_rows(vectors))
            if halved:  # the size that worked after a refusal (a short remainder: its size)
                gate.limit_batch(size)
                halved = False
            start, resends = start + len(batch), 0
        if not blocks:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.vstack(blocks) if len(blocks) > 1 else blocks[0]

    def _post(self, payload: dict[str, Any]) -> requests.Response:
        """POST `payload`; a network failure becomes an IntakeError, an answer is returned."""
        try:
            return self._session.post(
                self.endpoint, json=payload, timeout=(min(self.timeout, 10.0), self.timeout)
            )
        except (
            requests.exceptions.InvalidURL,
            requests.exceptions.InvalidSchema,
            requests.exceptions.MissingSchema,
            requests.exceptions.InvalidHeader,
        ) as exc:
            raise self._configuration_error(exc) from None
        except requests.RequestException as exc:
            raise self._network_error(exc) from None

    def _network_error(self, exc: requests.RequestException) -> TransientError:
        # A body that stops arriving surfaces as a ConnectionError wrapping a read timeout.
        cause = exc.args[0] if exc.args else None
        if isinstance(exc, requests.Timeout) or isinstance(cause, ReadTimeoutError):
            return TransientError(
                f"The embedding service did not answer within {self.timeout:g} s.",
                code="embedding_timeout",
            )
        return TransientError(
            f"The embedding service at {display_url(self.url)} could not be reached.",
            code="embedding_unavailable",
        )

    def _configuration_error(self, exc: requests.RequestException) -> PermanentError:
        if isinstance(exc, requests.exceptions.InvalidHeader):
            problem = (
                "The embedding API key is not a valid header value. "
                "Check INTAKE_EMBEDDING_API_KEY, then Retry."
            )
        else:
            problem = (
                f"INTAKE_EMBEDDING_URL ({display_url(self.url)}) is not a usable "
                f"http(s) URL. Fix it, then Retry."
            )
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
        if (
            vectors is None
            or vectors.ndim != 2
            or vectors.shape[1] == 0
            or (self.dimension and vectors.shape[1] != self.dimension)
            or not np.isfinite(vectors).all()
        ):
            raise TransientError(
                f"The embedding service sent an answer Intake cannot read (expected {expected} "
                f"vectors of one length).",
                code="embedding_bad_response",
            )
        return vectors


def _status_error(
    response: requests.Response, retry_after: float | None = None
) -> TransientError | PermanentError:
    """Classify an error status: 408, 429 and 5xx may pass; other answers need a fix first.
    `retry_after`: the pause the service asked for, too long to wait out within the attempt."""
    status = response.status_code
    pause = (
        f" It asked Intake to wait {math.ceil(retry_after)} s; the next attempt starts after that."
        if retry_after is not None
        else ""
    )
    if status == 429:
        return TransientError(
            f"The embedding service is rate-limiting Intake (HTTP 429).{pause}",
            code="embedding_rate_limited",
            retry_after=retry_after,
        )
    if status == 408:
        return TransientError(
            "The embedding service timed out on the request (HTTP 408).", code="embedding_timeout"
        )
    if status >= 500:
        return TransientError(
            f"The embedding service answered {status} "
            f"({response.reason or 'server error'}).{pause}",
            code="embedding_unavailable",
            retry_after=retry_after,
        )
    detail = _service_detail(response)
    if status in (401, 403):
        hint = "refused the API key"
        fix = "Check INTAKE_EMBEDDING_API_KEY, then Retry."
    else:
        hint = "rejected the request"
        fix = "Check INTAKE_EMBEDDING_URL and INTAKE_EMBEDDING_MODEL, then Retry."
    return PermanentError(
        f"The embedding service {hint} (HTTP {status}{detail}). {fix}",
        code="embedding_rejected",
        retryable=True,
    )


def _refused_single_text(response: requests.Response) -> PermanentError:
    """Refused as too large with one text in the request: smaller batches cannot help."""
    return PermanentError(
        f"The embedding service refused a request even with a single text in it (HTTP "
        f"{response.status_code}{_service_detail(response)}). Lower INTAKE_CHUNK_SIZE or check "
        f"the service's limits, then Retry.",
        code="embedding_rejected",
        retryable=True,
    )


def make_embedder(settings: Settings, timeout: float | None = None) -> Embedder:
    """The embedder the settings ask for: HTTP when INTAKE_EMBEDDING_URL is set, else local.
    `timeout`: the HTTP one's, when not INTAKE_EMBEDDING_TIMEOUT (a search's is short)."""
    if settings.embedding_url:
        return HttpEmbedder(
            settings.embedding_url,
            settings.embedding_model or DEFAULT_HTTP_MODEL,
            api_key=settings.embedding_api_key,
            timeout=settings.embedding_timeout if timeout is None else timeout,
            batch_size=settings.embedding_batch_size,
        )
    return LocalEmbedder()
