"""How a scan's pending pages are cut into ranges, and how a range that failed for good is
worded for the person (jobs.worker.page_ranges, jobs.worker.scan_reading). Pure: the record's
scripts are tested against a real Redis in tests/integration/worker/test_page_ranges.py."""

from __future__ import annotations

from jobs.core.settings import Settings
from jobs.worker.page_ranges import MAX_TRIES, Failed, cut
from jobs.worker.scan_reading import pages_text, range_failure, ranges_of


def test_pages_are_cut_in_order_into_ranges_of_the_size_given_the_last_shorter():
    """Every pending page is read once, in order: pages with a text layer are skipped, so a
    range's pages need not follow each other."""
    assert cut(list(range(1, 11)), 4) == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10]]
    assert cut([2, 3, 5, 8, 9, 13], 4) == [[2, 3, 5, 8], [9, 13]]
    assert cut([1, 2, 3, 4], 4) == [[1, 2, 3, 4]]
    assert cut([], 4) == []


def test_a_range_that_lost_its_readers_is_worded_with_its_pages_and_why():
    """The person must know which pages could not be read and that the workers were lost, in
    the singular for a one-page range; workers lost to restarts are no fault of the file, so a
    Retry by hand is offered, as for a task whose worker was lost."""
    error = range_failure(Failed(1, "reader_lost", None), [5, 6, 7, 8], Settings())
    assert error.code == "worker_lost" and error.retryable
    assert error.message == (
        f"OCR could not read pages 5–8: the worker reading them was lost {MAX_TRIES} times "
        "(killed, restarted or out of memory); the scan may be damaged or too detailed. "
        "Retry to read it again."
    )
    one = range_failure(Failed(2, "reader_lost", None), [9], Settings())
    assert one.message.startswith("OCR could not read page 9: the worker reading it was lost")


def test_a_ranges_failure_names_its_pages_once():
    """A range's reader words its failure with its pages; the task's job, reading it back at
    its next claim, words it again: the pages must not be named twice."""
    first = range_failure(
        Failed(0, "parse_timeout", "OCR took too long on a page."), [1, 2, 3, 4], Settings()
    )
    assert (first.code, first.message) == (
        "parse_timeout",
        "Pages 1–4: OCR took too long on a page.",
    )
    again = range_failure(Failed(0, first.code, first.message), [1, 2, 3, 4], Settings())
    assert (again.code, again.message) == (first.code, first.message)
    one = range_failure(Failed(2, "too_large", "The page needs too much memory."), [9], Settings())
    assert one.message == "Page 9: The page needs too much memory."
    assert range_failure(Failed(2, one.code, one.message), [9], Settings()).message == one.message


def test_a_range_of_pages_apart_names_each():
    """A range holds only pages left for OCR: the pages between them had a text layer and must
    not be named as unread."""
    assert pages_text([9]) == "page 9"
    assert pages_text([9, 10, 11, 12]) == "pages 9–12"
    assert pages_text([2, 3, 5, 8]) == "pages 2, 3, 5 and 8"
    error = range_failure(
        Failed(0, "parse_timeout", "OCR took too long on a page."), [2, 3, 5, 8], Settings()
    )
    assert error.message == "Pages 2, 3, 5 and 8: OCR took too long on a page."


def test_a_scans_last_range_is_cut_in_two_so_its_readers_finish_together():
    """With ranges of 4, the worker that ends first would idle for a whole range while the
    other reads the last one; halved, it idles for half of one at most."""
    assert ranges_of(list(range(1, 41)))[-3:] == [[33, 34, 35, 36], [37, 38], [39, 40]]
    assert ranges_of(list(range(1, 10))) == [[1, 2, 3, 4], [5, 6, 7, 8], [9]]
    assert ranges_of([1, 2, 3, 4, 5, 6, 7]) == [[1, 2, 3, 4], [5, 6], [7]]
