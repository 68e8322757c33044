"""Hypothesis against POST /api/documents: whatever arrives, the answer is 202 or a 4xx with
the JSON error shape, never a 500, and every accepted file became a task."""

from __future__ import annotations

import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

NAMES = st.one_of(
    st.text(min_size=0, max_size=80),
    st.sampled_from(
        [
            "a.txt",
            "../../etc/passwd.txt",
            "<img src=x onerror=alert(1)>.md",
            "C:\\docs\\x.pdf",
            "dir/sub/x.docx",
            "x.html",
            ".txt",
            "x.exe",
            "\x00.txt",
            "caf\u00e9.txt",
            "e\u0301.md",
        ]
    ),
)
CONTENT = st.one_of(
    st.binary(max_size=512),
    st.sampled_from(
        [
            b"",
            b"%PDF-1.4\n",
            b"PK\x03\x04garbage",
            b"\x7fELF\x02",
            b"MZ\x90\x00",
            "caf\u00e9".encode("latin-1"),
            "\ufeffhello".encode("utf-16"),
        ]
    ),
    st.text(max_size=200).map(str.encode),
)
FILES = st.lists(st.tuples(NAMES, CONTENT), min_size=0, max_size=4)
FORM = st.dictionaries(
    st.sampled_from(["priority", "force", "document_id", "other"]), st.text(max_size=20), max_size=3
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(files=FILES, form=FORM)
def test_uploads_never_break_the_server(client, files, form):
    data = {**form, "files": [(io.BytesIO(content), name) for name, content in files]}
    response = client.post("/api/documents", data=data, content_type="multipart/form-data")
    assert response.status_code in (202, 400, 413, 415), response.get_data(as_text=True)[:300]
    body = response.get_json()
    if response.status_code == 202:
        assert len(body["tasks"]) + len(body["rejected"]) <= len(files)
        assert all(len(task["id"]) == 32 for task in body["tasks"])
    else:
        assert set(body["error"]) == {"code", "message"}
