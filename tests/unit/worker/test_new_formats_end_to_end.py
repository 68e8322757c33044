"""Each new format uploaded through the API, sniffed, parsed in the sandbox, chunked and
indexed: its chunks keep their locations (slide, sheet, heading), and a bad file fails with the
parser's readable message, on fakeredis with an in-process worker."""

from tests.samples import make_eml, make_epub, make_pptx, make_xlsx
from tests.unit.conftest import upload

OLE_ENCRYPTED = (
    b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504) + "EncryptedPackage".encode("utf-16-le")
)


def _chunks(client, task):
    answer = client.get(f"/api/tasks/{task['id']}/chunks?limit=100").get_json()
    return [(chunk["text"], chunk["location"]) for chunk in answer["chunks"]]


def test_new_formats_are_accepted_parsed_and_located(client, run_jobs):
    files = [
        ("deck.pptx", make_pptx([{"title": "Penguin census"}, {"body": "Walrus count"}])),
        (
            "book.xlsx",
            make_xlsx(
                {
                    "North": [["Animal", "Count"], ["Seal", 4]],
                    "South": [["Animal", "Count"], ["Orca", 2]],
                }
            ),
        ),
        (
            "novel.epub",
            make_epub(
                "T",
                "A",
                [("Chapter One", "Sea shanty. " * 150), ("Chapter Two", "Land ahoy. " * 150)],
            ),
        ),
        ("letter.eml", make_eml(subject="Iceberg report", body="All clear.")),
        ("table.csv", b"Ship,Crew\nEndurance,28\n"),
    ]
    answer = upload(client, *files).get_json()
    assert answer["rejected"] == [] and len(answer["tasks"]) == 5
    run_jobs()
    tasks = {task["filename"]: task for task in answer["tasks"]}
    for name in tasks:
        assert client.get(f"/api/tasks/{tasks[name]['id']}").get_json()["status"] == "succeeded"
    assert _chunks(client, tasks["deck.pptx"]) == [
        ("Penguin census", {"slide": 1}),
        ("Walrus count", {"slide": 2}),
    ]
    assert _chunks(client, tasks["book.xlsx"]) == [
        ("Animal: Seal; Count: 4", {"sheet": "North"}),
        ("Animal: Orca; Count: 2", {"sheet": "South"}),
    ]
    located = {location.get("heading") for _, location in _chunks(client, tasks["novel.epub"])}
    assert {"Chapter One", "Chapter Two"} <= located
    assert "Subject: Iceberg report" in _chunks(client, tasks["letter.eml"])[0][0]
    assert _chunks(client, tasks["table.csv"])[0][0] == "Ship: Endurance; Crew: 28"


def test_password_protected_workbook_fails_readably(client, run_jobs):
    task = upload(client, ("locked.xlsx", OLE_ENCRYPTED)).get_json()["tasks"][0]
    run_jobs()
    record = client.get(f"/api/tasks/{task['id']}").get_json()
    assert record["status"] == "failed" and record["attempts"] == 1
    assert record["error"]["type"] == "encrypted" and record["error"]["retryable"] is False
    assert record["error"]["message"] == (
        "This workbook is password-protected; upload an unprotected copy."
    )


def test_a_workbook_renamed_csv_is_refused_at_upload(client):
    answer = upload(client, ("sales.csv", make_xlsx({"S": [["a"]]}))).get_json()
    assert answer["error"]["code"] == "unsupported_type"
