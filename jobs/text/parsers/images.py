"""Images (PNG, JPEG, TIFF, WebP): read by OCR, each page a block located by its page number.

A TIFF holds a page per frame (fax and scanner output); the other formats are one page, their
first frame. Decoding is Pillow's, bounded: only the decoder of the format the content was
sniffed as is tried, a frame's size is checked from its header before any pixel is decoded
(`MAX_PIXELS`: a decompression bomb is refused, not expanded), and a JPEG is decoded at the
reduced scale OCR reads anyway. A damaged or truncated file fails as such, never as "no text".
"""

from __future__ import annotations

import io
import struct
import warnings
import zlib
from collections.abc import Callable

from PIL import Image, ImageOps, UnidentifiedImageError

from jobs.core.failures import PermanentError
from jobs.text import ocr
from jobs.text.parsers.document import Block, ParsedDocument, ParseOptions

#: The most pixels of one page: a 600-dpi A3 scan (~70 megapixels) fits, a bomb does not.
MAX_PIXELS = 100_000_000
Image.MAX_IMAGE_PIXELS = MAX_PIXELS  # Pillow's own check on open agrees with ours
_FORMATS = {"png": "PNG", "jpeg": "JPEG", "tiff": "TIFF", "webp": "WEBP"}
_DECODE_ERRORS = (
    OSError,
    ValueError,
    EOFError,
    SyntaxError,
    IndexError,
    struct.error,
    zlib.error,
    Image.DecompressionBombError,
)


def parse_png(data: bytes, options: ParseOptions) -> ParsedDocument:
    return parse_image(data, options, "png")


def parse_jpeg(data: bytes, options: ParseOptions) -> ParsedDocument:
    return parse_image(data, options, "jpeg")


def parse_tiff(data: bytes, options: ParseOptions) -> ParsedDocument:
    return parse_image(data, options, "tiff")


def parse_webp(data: bytes, options: ParseOptions) -> ParsedDocument:
    return parse_image(data, options, "webp")


def parse_image(data: bytes, options: ParseOptions, kind: str) -> ParsedDocument:
    """The text OCR reads on each page of an image of `kind` (a key of `_FORMATS`)."""
    name = _FORMATS[kind]
    if options.ocr != "auto":
        raise PermanentError(
            f"This is an image ({name}): Intake reads the text of images by OCR "
            "only, and OCR is turned off here (INTAKE_OCR=off).",
            code="no_text",
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        image = _open(data, name)
        try:
            pages = _page_count(image, name)
            ocr.check_page_count(pages, options.ocr_max_pages, f"This image has {pages:,} pages")
            texts = ocr.read_pages(
                [_page(image, i, name) for i in range(pages)], options.tell, options.ocr_languages
            )
        finally:
            image.close()
    blocks = [Block(text, {"page": n}) for n, text in enumerate(texts, start=1) if text]
    if not blocks:
        what = "this image" if pages == 1 else f"the {pages:,} pages of this image"
        raise PermanentError(f"OCR read {what} and found no text in it.", code="no_text")
    return ParsedDocument(blocks, pages=pages, ocr_pages=pages)


def _damaged(name: str) -> PermanentError:
    return PermanentError(
        f"This {name} image is damaged or truncated and cannot be read.", code="corrupt"
    )


def _open(data: bytes, name: str) -> Image.Image:
    try:
        return Image.open(io.BytesIO(data), formats=[name])
    except (Image.DecompressionBombWarning, Image.DecompressionBombError):
        raise PermanentError(
            f"This {name} image is larger than the {MAX_PIXELS // 10**6} "
            "megapixels per page Intake reads.",
            code="too_large",
        ) from None
    except (UnidentifiedImageError, *_DECODE_ERRORS):
        raise _damaged(name) from None


def _page_count(image: Image.Image, name: str) -> int:
    if name != "TIFF":
        return 1
    try:
        return int(getattr(image, "n_frames", 1))
    except _DECODE_ERRORS:
        raise _damaged(name) from None


def _page(image: Image.Image, index: int, name: str) -> Callable[[], Image.Image]:
    """Decodes page `index` of `image` when called, after checking its size."""

    def decode() -> Image.Image:
        try:
            image.seek(index)
            width, height = image.size
            if width * height > MAX_PIXELS:
                raise PermanentError(
                    f"Page {index + 1} of this {name} image is {width:,} × {height:,} pixels; at "
                    f"most {MAX_PIXELS // 10**6} megapixels per page are read.",
                    code="too_large",
                )
            image.draft("L", (ocr.MAX_SIDE, ocr.MAX_SIDE))
            image.load()
            return ImageOps.exif_transpose(image)
        except _DECODE_ERRORS:
            raise _damaged(name) from None

    return decode
