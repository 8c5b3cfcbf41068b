"""The Chinese texts follow one glossary; the first start picks the system's language; a missing
CJK font is reported instead of drawn as boxes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from PySide6.QtGui import QFontDatabase

from matviz.app import i18n
from matviz.paths import I18N_DIR

ZH_FILES = sorted(I18N_DIR.glob("zh_CN*.json"))


def glossary() -> list[tuple[str, str, list[str]]]:
    """(English, Chinese, rejected variants) of every row of resources/i18n/glossary.md; English
    ends in ' *' where only the rejected variants are checked."""
    rows = []
    for line in i18n.GLOSSARY.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("English", "---"):
            continue
        rejected = re.findall(r"`([^`]+)`", cells[2])
        rows.append((cells[0], cells[1], rejected))
    return rows


def placeholders_out(text: str) -> str:
    return re.sub(r"\{[^{}]*\}", " ", text)


def word(english: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-]){re.escape(english)}s?(?![\w-])", re.IGNORECASE)


def violations(table: dict[str, str]) -> list[str]:
    found = []
    rows = [(term.removesuffix(" *"), term.endswith(" *"), zh, bad) for term, zh, bad in glossary()]
    for english, loose, chinese, rejected in rows:
        longer = [(e, zh) for e, _, zh, _ in rows if e != english and word(english).search(e)]
        for source, target in table.items():
            source = placeholders_out(source).replace("&", "")  # "SM &lanes": a menu mnemonic
            value = placeholders_out(target).replace(f"{chinese}（{english}）", chinese)
            for e, zh in longer:  # "Perfetto trace" is its own term, not a trace
                source = word(e).sub(" ", source)
                value = value if zh == chinese else value.replace(zh, " ")
            if not loose and word(english).search(source) and chinese not in value:
                found.append(f"{source!r} -> {target!r}: lacks {chinese!r} for {english!r}")
            found += [
                f"{source!r} -> {target!r}: {bad!r} instead of {chinese!r}"
                for bad in rejected
                if bad in value
            ]
    return found


def test_glossary_lists_the_terms_of_the_issue():
    terms = {e.removesuffix(" *"): (zh, rejected) for e, zh, rejected in glossary()}
    assert {"kernel", "padding", "wavefront", "lane", "trace", "tile", "warp"} <= set(terms)
    assert terms["kernel"] == ("kernel", ["Kernel", "核函数", "内核"])
    assert terms["padding"][0] == "填充" and "Padding" in terms["padding"][1]
    for english, (chinese, rejected) in terms.items():
        assert chinese not in rejected, english


@pytest.mark.parametrize("path", ZH_FILES, ids=lambda p: p.name)
def test_every_translation_uses_the_glossary_terms(path: Path):
    table = json.loads(path.read_text(encoding="utf-8"))
    assert violations(table) == []


def test_the_glossary_check_catches_a_rejected_variant():
    assert violations({"Kernel": "核函数"})  # the rejected variant, and no chosen term
    assert violations({"Pad P": "Padding P"})
    assert violations({"Open trace": "打开 trace"})
    assert not violations({"Kernel": "kernel", "no padding": "无填充（padding）"})


def test_the_files_this_issue_fixed_follow_the_glossary():
    """kernel was written three ways (kernel, Kernel, 核函数), padding three ways."""
    values = " ".join(
        v for p in ZH_FILES for v in json.loads(p.read_text(encoding="utf-8")).values()
    )  # fmt: skip
    for bad in ("核函数", "Kernel", "Padding", "Trace", "Warp", "k-Tile"):
        assert bad not in values, bad


# -- first start -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("saved", "system", "expected"),
    [
        (None, "zh_CN", "zh_CN"),
        (None, "zh_TW", "zh_CN"),  # the only Chinese the app has
        (None, "zh", "zh_CN"),
        (None, "en_US", "en"),
        (None, "de_DE", "en"),
        ("en", "zh_CN", "en"),  # a saved choice wins
        ("zh_CN", "en_US", "zh_CN"),
        ("fr", "zh_CN", "zh_CN"),  # an unknown saved value counts as none
        ("fr", "en_GB", "en"),
    ],
)
def test_initial_language(saved, system, expected):
    assert i18n.initial_language(saved, system=system) == expected


def test_initial_language_reads_the_system_locale(monkeypatch):
    class Zh:
        def name(self) -> str:
            return "zh_CN"

    monkeypatch.setattr(i18n.QLocale, "system", staticmethod(lambda: Zh()))
    assert i18n.initial_language(None) == "zh_CN"
    assert i18n.initial_language("en") == "en"


# -- fonts -------------------------------------------------------------------------------------
def test_cjk_font_missing_follows_the_font_database(qapp, monkeypatch):
    chinese = QFontDatabase.WritingSystem.SimplifiedChinese
    real = any(chinese in QFontDatabase.writingSystems(f) for f in QFontDatabase.families())
    assert i18n.cjk_font_missing() is (not real)
    monkeypatch.setattr(i18n.QFontDatabase, "families", staticmethod(lambda *a: ["Latin Only"]))
    monkeypatch.setattr(
        i18n.QFontDatabase,
        "writingSystems",
        staticmethod(lambda *a: [QFontDatabase.WritingSystem.Latin]),
    )
    assert i18n.cjk_font_missing() is True
    line = i18n.cjk_font_notice("zh_CN")
    assert line == i18n.CJK_FONT_MISSING and "\n" not in line and "font" in line
    assert i18n.cjk_font_notice("en") == ""  # English needs no CJK font
    monkeypatch.setattr(i18n.QFontDatabase, "writingSystems", staticmethod(lambda *a: [chinese]))
    assert i18n.cjk_font_missing() is False and i18n.cjk_font_notice("zh_CN") == ""

