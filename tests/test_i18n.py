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


def test_a_korean_page_writes_the_file_uploaders_words_in_korean():
    # Streamlit writes "Upload" and "20MB per file • CSV" in English on every page; on a Korean
    # one ui/language.uploader_css puts the catalog's words there, for every type an uploader
    # of the app accepts, with the server's own size limit.
    from ui.language import UPLOAD_TYPES, uploader_css

    css = uploader_css("ko", 20)
    assert 'content: "업로드"' in css and 'content: "파일당 20MB까지"' in css
    for kind in UPLOAD_TYPES:
        assert f'input[accept*=".{kind}"]' in css and f'"파일당 20MB까지 • {kind.upper()}"' in css
    assert "20MB" not in uploader_css("ko", 200) and uploader_css("en", 20) == ""
    accepted = set()
    for path in [*(ROOT / "app_pages").glob("*.py"), *(ROOT / "ui").glob("*.py")]:
        for types in re.findall(r"file_uploader\([^)]*type=\[([^\]]*)\]", path.read_text()):
            accepted |= set(re.findall(r'"(\w+)"', types))
    assert accepted and accepted <= set(UPLOAD_TYPES), accepted
