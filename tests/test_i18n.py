"""Every visible string exists in English and Korean, with the same placeholders."""

import re
import string

from conftest import ROOT

from ui.i18n import catalog, t

FORMATTER = string.Formatter()


def placeholders(text: str) -> list[str]:
    return sorted(name for _, name, _, _ in FORMATTER.parse(text) if name is not None)


def test_korean_has_every_english_key_with_the_same_placeholders():
    en, ko = catalog("en"), catalog("ko")
    assert set(en) == set(ko)
    assert [k for k in en if placeholders(en[k]) != placeholders(ko[k])] == []


def test_every_key_the_pages_use_exists():
    used = set()
    for path in [ROOT / "app.py", *(ROOT / "app_pages").glob("*.py"), *(ROOT / "ui").glob("*.py")]:
        used |= set(re.findall(r'\bT\("([a-z_0-9]+\.[a-z_0-9.]+)"', path.read_text()))
        used |= set(re.findall(r'\bt\("([a-z_0-9]+\.[a-z_0-9.]+)"', path.read_text()))
    assert used, "the scan found no keys"
    missing = sorted(k for k in used if k not in catalog("en"))
    assert missing == []


def test_missing_keys_fall_back_to_english_then_to_the_key():
    assert t("home.title", "xx") == t("home.title", "en")
    assert t("no.such.key", "ko") == "no.such.key"
