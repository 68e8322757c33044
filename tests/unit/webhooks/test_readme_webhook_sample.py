"""The README's webhook signature verifier, run as a receiver would run it: it accepts Intake's
signatures and answers False (never raises) to anything else a sender can put in the header."""

from __future__ import annotations

import hashlib
import hmac
import inspect
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration import webhook_receiver

README = Path(__file__).resolve().parents[3] / "README.md"
SECRET = "whsec-test-☃"
BODY = '{"type": "task.succeeded", "data": {"filename": "résumé.pdf"}}'.encode()


def readme_sample() -> str:
    """The ```python block of the README that defines `verified`."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    [sample] = [block for block in blocks if "def verified(" in block]
    return sample


@pytest.fixture(scope="module")
def verified() -> Callable[..., bool]:
    namespace: dict = {}
    exec(compile(readme_sample(), "README.md", "exec"), namespace)
    return namespace["verified"]


def sign(t: int | str, body: bytes = BODY, secret: str = SECRET) -> str:
    digest = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={digest}"


def test_a_fresh_signature_of_the_body_is_accepted(verified):
    assert verified(SECRET, sign(int(time.time())), BODY) is True


@pytest.mark.parametrize(
    "header",
    [
        sign(int(time.time()), secret="another secret"),
        sign(int(time.time()), body=BODY + b" "),
        sign(int(time.time()) - 3600),  # replayed an hour later
        sign(int(time.time())).replace("v1=", "v1=0"),
        sign(int(time.time())).upper(),
    ],
    ids=["another secret", "another body", "an hour old", "a longer digest", "upper case"],
)
def test_a_wrong_or_stale_signature_is_refused(verified, header):
    assert verified(SECRET, header, BODY) is False


NOW = int(time.time())
HOSTILE = [
    "",
    "garbage",
    "t=,v1=",
    f"t={NOW}",
    f"v1={'0' * 64}",
    f"t={NOW},v1=",
    f"t={NOW},v1=é{'0' * 63}",  # non-ASCII signature
    sign(NOW) + "é",  # non-ASCII anywhere
    f"t=²,v1={'0' * 64}",  # '²'.isdigit() is True
    f"t=١٢٣,v1={'0' * 64}",  # Arabic-Indic digits
    f"t={'9' * 5000},v1={'0' * 64}",  # past int()'s digit limit
    f"t=-{NOW},v1={'0' * 64}",
    f"t= {NOW},v1={'0' * 64}",
    f"t={NOW}.5,v1={'0' * 64}",
    "t=1,t=2,v1=x",
    "=,=,=",
    "\x00",
    "t=\udcff,v1=\udcff",
]


# Ids by position: the headers hold the time, and every pytest-xdist worker must collect the
# same names.
@pytest.mark.parametrize("header", HOSTILE, ids=[f"hostile-{n}" for n in range(len(HOSTILE))])
def test_a_hostile_header_is_refused_without_raising(verified, header):
    assert verified(SECRET, header, BODY) is False


def test_the_test_receiver_verifies_with_the_readme_code():
    """tests/integration's receiver checks Intake's deliveries with exactly this sample."""
    assert (
        inspect.getsource(webhook_receiver.verified).strip()
        == readme_sample().split("\n\n", 1)[1].strip()
    )
