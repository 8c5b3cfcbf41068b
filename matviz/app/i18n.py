"""Run-time language switching through Qt's own translator machinery.

Translations are JSON tables (English source text -> translation) in ``resources/i18n``, one or
more files per language (``zh_CN.json``, ``zh_CN_views.json``, ...), served by a QTranslator.
Widgets call :func:`tr` for every visible string and re-apply their texts in ``retranslate``,
which :class:`Retranslating` calls when Qt sends them a ``QEvent.LanguageChange`` (which
``installTranslator`` does for every widget).
"""

from __future__ import annotations

import json

from PySide6.QtCore import QCoreApplication, QEvent, QLocale, QTranslator
from PySide6.QtGui import QFontDatabase

from matviz.paths import I18N_DIR

LANGUAGES = {"en": "English", "zh_CN": "简体中文"}
CONTEXT = "matviz"
GLOSSARY = I18N_DIR / "glossary.md"
# English on purpose: it is shown exactly when Chinese characters would draw as boxes.
CJK_FONT_MISSING = (
    "No Chinese (CJK) font is installed, so Chinese text draws as boxes: install one, e.g. "
    "fonts-noto-cjk or fonts-wqy-microhei."
)


def load_table(language: str) -> dict[str, str]:
    table: dict[str, str] = {}
    for path in sorted(I18N_DIR.glob(f"{language}*.json")):
        table.update(json.loads(path.read_text(encoding="utf-8")))
    return table


class Retranslating:
    """Mixin for a widget with a ``retranslate()`` method: calls it on every language change.

    List it before the Qt base class: ``class View(Retranslating, QWidget)``.
    """

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802
        if event.type() == QEvent.LanguageChange:
            self.retranslate()
        super().changeEvent(event)


class JsonTranslator(QTranslator):
    def __init__(self, language: str) -> None:
        super().__init__()
        self.language = language
        self.table = load_table(language)

    def translate(self, context, source_text, disambiguation=None, n=-1):  # noqa: N802
        return self.table.get(source_text, source_text)

    def isEmpty(self) -> bool:  # noqa: N802
        return not self.table


_installed: JsonTranslator | None = None


def tr(text: str) -> str:
    """The current language's version of ``text`` (English source strings)."""
    return QCoreApplication.translate(CONTEXT, text)


def current_language() -> str:
    return _installed.language if _installed else "en"


def set_language(language: str) -> None:
    """Switch every widget's language now; widgets re-translate on LanguageChange."""
    global _installed
    if language not in LANGUAGES:
        raise ValueError(f"unknown language {language!r}")
    app = QCoreApplication.instance()
    if _installed is not None:
        app.removeTranslator(_installed)
        _installed = None
    if language != "en":
        _installed = JsonTranslator(language)
        app.installTranslator(_installed)


def initial_language(saved: object | None, system: str | None = None) -> str:
    """The language to start in: the one saved in the settings if it is known, else Chinese
    when the system locale is Chinese (``zh``, ``zh_CN``, ...), else English.

    ``system`` is the locale name; by default ``QLocale.system().name()``.
    """
    if isinstance(saved, str) and saved in LANGUAGES:
        return saved
    name = QLocale.system().name() if system is None else system
    return "zh_CN" if name.lower().startswith("zh") else "en"


def cjk_font_missing() -> bool:
    """True when no installed font can draw Simplified Chinese (the Chinese texts would show as
    boxes). Needs a QGuiApplication."""
    chinese = QFontDatabase.WritingSystem.SimplifiedChinese
    return not any(chinese in QFontDatabase.writingSystems(f) for f in QFontDatabase.families())


def cjk_font_notice(language: str | None = None) -> str:
    """One line for the status bar or explanation panel when ``language`` (default: the current
    one) is Chinese and no CJK font is installed; else ''."""
    language = current_language() if language is None else language
    return CJK_FONT_MISSING if language.startswith("zh") and cjk_font_missing() else ""
