"""Upload names as they are shown and kept (docs/architecture.md §9, §10): no bidi controls or
control characters, and a name cut to its length keeps its extension."""

from __future__ import annotations

import pytest

from tests.unit.conftest import upload
from webapp.uploads import clean_path

TEXT = b"The quick brown fox. It jumps over the lazy dog."
MAX_PATH_CHARS = 512  # webapp.uploads.MAX_PATH_CHARS
HTML = b"<!DOCTYPE html><html><body><p>A quarterly report.</p></body></html>"


@pytest.mark.parametrize(
    "raw, clean",
    [
        ("report\u202etxt.html", "reporttxt.html"),  # shown as "reportlmth.txt"
        ("a\u202ab\u202bc\u202cd\u202de.txt", "abcde.txt"),  # embeddings, overrides
        ("a\u2066b\u2067c\u2068d\u2069.txt", "abcd.txt"),  # isolates
        ("\u200eleft\u200fright\u061c.md", "leftright.md"),  # marks
        ("tab\there\x1bnul\x00del\x7f.txt", "tabherenuldel.txt"),  # C0 controls and DEL
        ("c1\x80\x85\x9b\x9f.txt", "c1.txt"),  # C1 controls
        ("dir\u202e/sub/x.pdf", "dir/sub/x.pdf"),
    ],
)
def test_a_name_loses_its_bidi_controls_and_control_characters(raw, clean):
    assert clean_path(raw) == clean


def test_a_name_keeps_what_it_is_written_with():
    assert clean_path("caf\u00e9 \u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645.txt") == (
        "caf\u00e9 \u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645.txt"
    )
    assert clean_path("e\u0301.md") == "\u00e9.md"


def test_a_name_cut_to_its_length_keeps_its_extension():
    cut = clean_path("n" * 600 + ".txt")
    assert len(cut) == MAX_PATH_CHARS
    assert cut == "n" * (MAX_PATH_CHARS - 4) + ".txt"
    long_markdown = clean_path("reports/" + "y" * 600 + ".markdown")
    assert long_markdown == "reports/" + "y" * (MAX_PATH_CHARS - 17) + ".markdown"


def test_a_name_cut_in_a_folder_keeps_its_file_s_extension():
    cut = clean_path("f" * 300 + "/" + "g" * 300 + ".pdf")
    assert len(cut) == MAX_PATH_CHARS and cut.endswith("g.pdf")


def test_a_name_cut_just_after_a_folder_is_not_left_without_a_stem():
    cut = clean_path("d" * (MAX_PATH_CHARS - 5) + "/" + "e" * 100 + ".txt")
    assert cut == "d" * (MAX_PATH_CHARS - 5) + ".txt"


def test_a_long_dotted_tail_is_no_extension_and_a_short_name_is_not_cut():
    assert clean_path("a." + "b" * 600) == "a." + "b" * (MAX_PATH_CHARS - 2)
    assert clean_path("x" * (MAX_PATH_CHARS - 4) + ".txt") == "x" * (MAX_PATH_CHARS - 4) + ".txt"


def test_an_upload_named_with_an_override_is_shown_and_kept_without_it(client):
    response = upload(client, ("report\u202etxt.html", HTML))
    assert response.status_code == 202, response.get_json()
    (task,) = response.get_json()["tasks"]
    assert (task["filename"], task["document_id"]) == ("reporttxt.html", "reporttxt.html")
    shown = client.get(f"/api/tasks/{task['id']}").get_json()
    assert shown["filename"] == "reporttxt.html"
    assert "\u202e" not in client.get(f"/batches/{response.get_json()['batch_id']}").get_data(
        as_text=True
    )


def test_an_upload_with_a_name_past_its_length_is_accepted_as_its_extension_says(client):
    name = "q" * 596 + ".txt"
    response = upload(client, (name, TEXT))
    assert response.status_code == 202, response.get_json()
    (task,) = response.get_json()["tasks"]
    assert task["filename"] == task["document_id"] == "q" * (MAX_PATH_CHARS - 4) + ".txt"


def test_a_document_id_sent_with_the_upload_is_cleaned_the_same_way(client):
    response = upload(client, ("x.txt", TEXT), document_id=["notes/\u202eevil\x85.txt"])
    assert response.get_json()["tasks"][0]["document_id"] == "notes/evil.txt"
