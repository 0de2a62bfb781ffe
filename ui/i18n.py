"""Translations: every visible string comes from assets/i18n/<lang>/*.json through t().

Notable features
- Catalogs are split by area (one JSON file per page or figure family) and merged per language,
  so pages and figures can be translated independently.
- `t(key, lang, **fmt)` falls back to English, then to the key itself, so a missing translation
  shows up as a readable key instead of a crash; tests/test_i18n.py checks that every English key
  exists in Korean.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

LANGUAGES = {"en": "English", "ko": "한국어"}
DEFAULT_LANG = "en"
CATALOG_DIR = Path(__file__).resolve().parents[1] / "assets" / "i18n"


@cache
def catalog(lang: str) -> dict[str, str]:
    """All strings of one language: the union of assets/i18n/<lang>/*.json."""
    merged: dict[str, str] = {}
    for path in sorted((CATALOG_DIR / lang).glob("*.json")):
        merged.update(json.loads(path.read_text(encoding="utf-8")))
    return merged


def t(key: str, lang: str = DEFAULT_LANG, **fmt) -> str:
    """The text for `key` in `lang` (English if missing), with {placeholders} filled in."""
    text = catalog(lang).get(key) or catalog(DEFAULT_LANG).get(key) or key
    return text.format(**fmt) if fmt else text
