"""ocr_word_recall_en and ocr_char_recall_zh: how much of a clean printed page OCR gives back.

Pages: generated here, deterministically (seed SEED), as a scanner would give them at its
cleanest: black text on white, no noise, no skew, rendered by Pillow on a 1400 × 1980 page
(A4-shaped, under jobs.text.ocr.MAX_SIDE, so the product reads it at the size it was drawn).
English: EN_PAGES pages of varied, report-like sentences (names, numbers, dates, units,
punctuation), ~1,300 words, in DejaVu Sans at SIZE pixels; Chinese: ZH_PAGES pages of
sentences of the same kind in Noto Sans CJK SC (the Debian packages fonts-dejavu-core and
fonts-noto-cjk). Each page goes through `jobs.text.ocr.read_pages`, the function the PDF and
image parsers call, in this process, with the languages a worker has by default.

Figures:
- ocr_word_recall_en: the share of the source's words (a multiset, lower case, punctuation
  stripped from each word's ends) found as whole words (split at white space) in what OCR
  read. A word glued to its neighbour ("valvenumber") is not found: it is not searchable.
- ocr_char_recall_zh: the share of the source's characters (a multiset, white space and
  punctuation left out) found in what OCR read.
Both have the goal ≥ 0.97 (docs/architecture.md, "OCR"). Seconds per page are reported beside
them, and, in this module's own output (`python -m bench.ocr_quality`), the same pages at
smaller and larger type (EXTRA_SIZES), when the fonts are installed.
"""

from __future__ import annotations

import collections
import random
import re
import sys
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

SEED = 25
SIZE = 26  # pixels: the glyph size of the measured pages
EXTRA_SIZES = (16, 20, 34)  # reported by `python -m bench.ocr_quality` only
EN_PAGES, ZH_PAGES = 4, 2
EN_WORDS = 1300  # about this many words in all, spread over EN_PAGES
ZH_CHARS = 1400  # about this many characters in all, spread over ZH_PAGES
PAGE = (1400, 1980)  # width, height in pixels
MARGIN = 100
LATIN_FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
CJK_FONT = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")
CJK_FONT_INDEX = 2  # Noto Sans CJK SC in the collection (JP, KR, SC, TC, HK)
GOAL = 0.97

# -- the English text: report-like sentences from templates -----------------------------------

_NAMES = (
    "Okafor",
    "Lindqvist",
    "Moreau",
    "Kowalski",
    "Tanaka",
    "Brennan",
    "Haddad",
    "Novak",
    "Fischer",
    "Delgado",
    "Patel",
    "Whitfield",
    "Ivanova",
    "McAllister",
    "Osei",
    "Larsen",
)
_FIRST = (
    "Anna",
    "David",
    "Maria",
    "James",
    "Priya",
    "Thomas",
    "Elena",
    "Samuel",
    "Grace",
    "Henrik",
    "Laura",
    "Kwame",
    "Sofia",
    "Michael",
    "Ingrid",
    "Rafael",
)
_SITES = (
    "Riverside",
    "North Quay",
    "Eastfield",
    "the Harbour depot",
    "Millbrook",
    "Westgate",
    "the Calder plant",
    "Stonebridge",
    "Ashford yard",
    "Kingsway",
    "Pine Hill",
    "Dunmore",
)
_PARTS = (
    "valve",
    "pump",
    "turbine",
    "compressor",
    "boiler",
    "transformer",
    "conveyor belt",
    "cooling tower",
    "gearbox",
    "heat exchanger",
    "pressure relief valve",
    "fan bearing",
    "generator",
    "feed pipe",
    "control panel",
    "backup battery",
    "filter housing",
)
_FINDINGS = (
    "minor corrosion on the outer flange",
    "a worn seal that leaked under pressure",
    "loose bolts on the mounting bracket",
    "no defects of any kind",
    "vibration above the agreed limit",
    "a cracked inspection window",
    "oil residue around the drive shaft",
    "an outdated calibration certificate",
    "normal wear within tolerance",
    "a faulty temperature sensor",
    "debris blocking the intake screen",
    "paint damage but sound metal underneath",
)
_ACTIONS = (
    "replaced the seal",
    "tightened every bolt",
    "cleaned the intake screen",
    "recalibrated the sensor",
    "ordered a new part",
    "logged the fault for review",
    "scheduled a second visit",
    "tested the alarm twice",
    "updated the drawings",
    "isolated the circuit",
    "flushed the cooling loop",
    "signed off the work order",
)
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
_UNITS = ("bar", "kPa", "degrees", "litres", "hours", "metres", "volts", "percent")
_TEMPLATES = (
    "The quarterly inspection of {part} number {n} at {site} found {finding}.",
    "On {day} {date} {first} {name} {action} and reported it to the duty manager.",
    "Readings taken at {time} showed {x} {unit}, compared with {y} {unit} in {month}.",
    "After the repair, the {part} ran for {h} hours without a single warning.",
    "{first} {name} noted {finding}; the team {action} before the shift ended.",
    "Work order {wo} covers the {part} and the {part2} at {site}, due by {date}.",
    "Costs for {month} came to {money} euros, about {pct} percent below the forecast.",
    "Please send questions about this report to {first} {name} at the {site} office.",
    "Safety check {n}: the {part} passed, although {finding} must be watched.",
    "In total, {k} of the {m} units inspected this quarter needed no further action.",
    "The maintenance report for {site} was approved by {first} {name} on {date}.",
    "Why did the {part} fail? The logs suggest {finding}, first seen in {month}.",
    "Next steps: {action}, then review the {part2} at {site} (priority {p}).",
)


def english_text(rng: random.Random, words: int = EN_WORDS) -> str:
    """Sentences from _TEMPLATES with their slots filled, until about `words` words."""
    sentences: list[str] = []
    count = 0
    while count < words:
        fill = {
            "part": rng.choice(_PARTS),
            "part2": rng.choice(_PARTS),
            "site": rng.choice(_SITES),
            "finding": rng.choice(_FINDINGS),
            "action": rng.choice(_ACTIONS),
            "first": rng.choice(_FIRST),
            "name": rng.choice(_NAMES),
            "day": rng.choice(_DAYS),
            "month": rng.choice(_MONTHS),
            "unit": rng.choice(_UNITS),
            "n": rng.randint(2, 999),
            "h": rng.randint(12, 480),
            "p": rng.randint(1, 4),
            "x": f"{rng.randint(1, 250)}.{rng.randint(0, 9)}",
            "y": f"{rng.randint(1, 250)}.{rng.randint(0, 9)}",
            "date": f"{rng.randint(1, 28)} {rng.choice(_MONTHS)} {rng.randint(2019, 2026)}",
            "time": f"{rng.randint(6, 21):02d}:{rng.choice((0, 15, 30, 45)):02d}",
            "wo": f"WO-{rng.randint(1000, 9999)}",
            "money": f"{rng.randint(1, 99)},{rng.randint(100, 999)}",
            "pct": rng.randint(2, 30),
            "k": rng.randint(2, 20),
            "m": rng.randint(21, 60),
        }
        sentence = rng.choice(_TEMPLATES).format(**fill)
        sentences.append(sentence[0].upper() + sentence[1:])
        count += len(sentence.split())
    return " ".join(sentences)


_ZH_SENTENCES = (
    "本季度对三号机组进行了全面检查，发现冷却系统运行正常。",
    "维修人员更换了损坏的密封圈，并重新校准了温度传感器。",
    "根据记录，压力读数在上午九点达到最高值。",
    "请在下周五之前提交设备维护报告。",
    "仓库的备用零件数量不足，需要尽快采购。",
    "安全检查中没有发现严重问题，但部分螺栓需要紧固。",
    "技术部门建议每六个月更换一次过滤器。",
    "由于天气原因，户外管道的检修推迟到下个月。",
    "北京和上海的工厂已经完成了年度审核。",
    "新员工必须参加消防安全培训后才能上岗。",
    "控制面板的软件已经升级到最新版本。",
    "本月的电费比预算低百分之八。",
    "运输公司将在周三把新的变压器送到现场。",
    "检查结果显示涡轮机的振动在允许范围之内。",
    "所有的工作单都需要经理签字确认。",
    "会议决定明年增加两名维修工程师。",
    "发电机的运行时间已经超过两千小时。",
    "数据库中的旧记录将在年底归档。",
    "如有疑问，请联系设备管理办公室。",
    "我们对供应商的服务质量进行了评估。",
    "冷却塔的水质检测合格，无需进一步处理。",
    "报告中的数字已经由财务部门核对。",
    "明天早上八点开始停电检修，预计持续四个小时。",
    "这台压缩机去年修理过两次，应考虑更换。",
)


def chinese_text(rng: random.Random, characters: int = ZH_CHARS) -> str:
    """Sentences of _ZH_SENTENCES, shuffled, until about `characters` characters."""
    out: list[str] = []
    while sum(map(len, out)) < characters:
        batch = list(_ZH_SENTENCES)
        rng.shuffle(batch)
        out += batch
    return "".join(out)


# -- pages ------------------------------------------------------------------------------------


def _font(size: int, cjk: bool) -> Any:
    from PIL import ImageFont

    if cjk:
        return ImageFont.truetype(str(CJK_FONT), size, index=CJK_FONT_INDEX)
    return ImageFont.truetype(str(LATIN_FONT), size)


def wrap(text: str, font: Any, width: int, cjk: bool) -> list[str]:
    """`text` in lines no wider than `width` pixels: at spaces (English), anywhere (Chinese)."""
    lines: list[str] = []
    line = ""
    for piece in text if cjk else text.split(" "):
        candidate = line + piece if cjk or not line else f"{line} {piece}"
        if line and font.getlength(candidate) > width:
            lines.append(line)
            line = piece
        else:
            line = candidate
    return lines + [line] if line else lines


def pages(text: str, size: int, count: int, cjk: bool) -> list[tuple[list[str], Any]]:
    """`text` laid out on `count` pages (lines spread evenly): each page's lines and image."""
    from PIL import Image, ImageDraw

    font = _font(size, cjk)
    lines = wrap(text, font, PAGE[0] - 2 * MARGIN, cjk)
    step = round(size * 1.6)
    per_page = -(-len(lines) // count)
    if MARGIN + per_page * step > PAGE[1] - MARGIN:
        raise ValueError(f"{len(lines)} lines at {size} px do not fit on {count} pages")
    out = []
    for first in range(0, len(lines), per_page):
        image = Image.new("L", PAGE, "white")
        draw = ImageDraw.Draw(image)
        page_lines = lines[first : first + per_page]
        for number, line in enumerate(page_lines):
            draw.text((MARGIN, MARGIN + step * number), line, font=font, fill="black")
        out.append((page_lines, image))
    return out


# -- measures ---------------------------------------------------------------------------------


def _is_punctuation(char: str) -> bool:
    return unicodedata.category(char).startswith("P")


def words(text: str) -> list[str]:
    """The words of `text`: split at white space, lower case, punctuation stripped from their
    ends ("(priority" → "priority", "3.5" stays), empty ones dropped."""
    out = []
    for token in text.lower().split():
        start, end = 0, len(token)
        while start < end and _is_punctuation(token[start]):
            start += 1
        while end > start and _is_punctuation(token[end - 1]):
            end -= 1
        if start < end:
            out.append(token[start:end])
    return out


def characters(text: str) -> list[str]:
    """The characters of `text` but white space and punctuation (Chinese or Latin)."""
    return [c for c in text if not c.isspace() and not _is_punctuation(c)]


def recall(source: list[str], read: list[str]) -> float:
    """The share of `source` (a multiset) found in `read` (a multiset)."""
    found = collections.Counter(source) & collections.Counter(read)
    return sum(found.values()) / max(len(source), 1)


def read(images: list[Any]) -> tuple[list[str], list[float]]:
    """What `jobs.text.ocr.read_pages` reads on each image, and the seconds each page took."""
    from jobs.core.settings import Settings
    from jobs.text import ocr

    languages = Settings.from_mapping({}).ocr_language_list
    started: list[float] = []
    texts = ocr.read_pages(
        [lambda image=image: image for image in images],
        lambda detail: started.append(time.perf_counter()),
        languages=languages,
    )
    ended = time.perf_counter()
    seconds = [b - a for a, b in zip(started, started[1:] + [ended])]
    return texts, seconds


def measure_size(size: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Both recalls at `size` pixels, and the seconds a page took."""
    rng = random.Random(SEED)
    english, chinese = english_text(rng), chinese_text(rng)
    en_pages = pages(english, size, EN_PAGES, cjk=False)
    zh_pages = pages(chinese, size, ZH_PAGES, cjk=True)
    log(
        f"ocr quality: {len(en_pages)} English pages ({len(words(english))} words) and "
        f"{len(zh_pages)} Chinese pages ({len(characters(chinese))} characters) at {size} px"
    )
    en_read, en_seconds = read([image for _, image in en_pages])
    zh_read, zh_seconds = read([image for _, image in zh_pages])
    glued = [
        (line, text)
        for (lines, _), text in zip(en_pages, en_read)
        for line in lines
        if _glued(line, text)
    ]
    return {
        "size": size,
        "word_recall_en": recall(words(english), words("\n".join(en_read))),
        "char_recall_zh": recall(characters(chinese), characters("\n".join(zh_read))),
        "words_en": len(words(english)),
        "chars_zh": len(characters(chinese)),
        "seconds_per_page_en": sum(en_seconds) / len(en_seconds),
        "seconds_per_page_zh": sum(zh_seconds) / len(zh_seconds),
        "lines_en": sum(len(lines) for lines, _ in en_pages),
        "glued_lines_en": len(glued),
        "en_read": en_read,
    }


def _glued(line: str, page_text: str) -> bool:
    """Whether `line`'s words are found on the page only with some of its spaces gone."""
    squeezed = re.sub(r"\s+", "", line)
    return (
        line not in page_text
        and squeezed in re.sub(r"\s+", "", page_text)
        and any(
            squeezed == re.sub(r"\s+", "", read_line) and read_line != line
            for read_line in page_text.split("\n")
        )
    )


def fonts_missing() -> str:
    """Why the pages cannot be drawn here ("" when they can)."""
    missing = [str(path) for path in (LATIN_FONT, CJK_FONT) if not path.exists()]
    return (
        f"fonts missing: {', '.join(missing)} (fonts-dejavu-core, fonts-noto-cjk)"
        if missing
        else ""
    )


def run(log: Callable[[str], None], sizes: tuple[int, ...] = ()) -> dict[str, Any]:
    """The figures at SIZE, and at each of `sizes` under "sizes"; {"skipped": why} without the
    fonts."""
    why = fonts_missing()
    if why:
        return {"skipped": why}
    from jobs.text import ocr

    ocr.engine()  # built before the first page: the seconds a page are a built engine's
    figures = measure_size(SIZE, log)
    figures["sizes"] = [measure_size(size, log) for size in sizes]
    return figures


def describe(found: dict[str, Any]) -> list[str]:
    """The context lines of the bench's table."""
    if "skipped" in found:
        return [f"ocr quality: not measured: {found['skipped']}"]
    return [
        f"ocr quality at {m['size']} px: English word recall {m['word_recall_en']:.3f} of "
        f"{m['words_en']} words ({m['glued_lines_en']} of {m['lines_en']} lines came back with "
        f"spaces lost), {m['seconds_per_page_en']:.2f} s a page; Chinese character recall "
        f"{m['char_recall_zh']:.3f} of {m['chars_zh']} characters, "
        f"{m['seconds_per_page_zh']:.2f} s a page"
        for m in [found, *found["sizes"]]
    ]


def figures(found: dict[str, Any]) -> dict[str, float]:
    """The bench's figures of `found` (none when it was skipped)."""
    if "skipped" in found:
        return {}
    return {
        "ocr_word_recall_en": round(found["word_recall_en"], 4),
        "ocr_char_recall_zh": round(found["char_recall_zh"], 4),
    }


if __name__ == "__main__":
    import json

    result = run(
        lambda message: print(f"[bench] {message}", file=sys.stderr, flush=True), sizes=EXTRA_SIZES
    )
    if "--show" in sys.argv:
        print("\n\n".join(result.get("en_read", [])))
    print("\n".join(describe(result)))
    print(json.dumps(figures(result)))
