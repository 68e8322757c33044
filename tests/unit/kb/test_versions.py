"""The pipeline version (docs/architecture.md §9): what makes an already ingested file be ingested
again. Each thing that changes what a document's entries would be changes it; nothing else does."""

from jobs.core.settings import Settings
from jobs.embedding.embedders import LocalEmbedder
from jobs.kb.versions import pipeline_version


def version(**env):
    return pipeline_version(Settings.from_mapping(env), LocalEmbedder())


def test_the_default_version_names_code_chunking_and_model():
    assert version() == f"p2/chunk-1000-150/{LocalEmbedder.model}-{2**32}"


def test_turning_ocr_off_or_back_on_re_ingests():
    assert version(INTAKE_OCR="off") == version() + "/ocr-off"
    assert version(INTAKE_OCR="auto") == version()


def test_chunk_settings_change_it_and_unrelated_settings_do_not():
    assert version(INTAKE_CHUNK_SIZE="800") != version()
    assert version(INTAKE_CHUNK_OVERLAP="100") != version()
    assert version(INTAKE_MAX_ATTEMPTS="9", INTAKE_OCR_PAGE_TIMEOUT="5") == version()
