"""The app under hostile links and uploads (issue 32, defects 12-17; issue 26's /serve): visitor
text is shown as text, the server's files stay unread, a crafted file is one local error."""

import re

import pytest
from apptest_page import open_page
from streamlit.testing.v1 import AppTest

from ui.i18n import t

PLAY, SERVE, LIVE = "app_pages/playground.py", "app_pages/serve.py", "app_pages/live.py"
LINK = "[prize](https://evil.example/x)"  # a knob name no engine has: quoted in the error
IMAGE = "![i](https://evil.example/i.png)"


def outside_code(markdown: str) -> str:
    """The markdown less its code spans (CommonMark: a run of N backticks up to the next run of
    exactly N), i.e. the part a browser would read as markdown."""
    return re.sub(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", " ", markdown)


def shown(at: AppTest) -> list[str]:
    """Every error, warning and info box's markdown, and every caption."""
    return [e.value for kind in ("error", "warning", "info", "caption") for e in at.get(kind)]


# ---- 12: knob text from a link never becomes a link or an image --------------------------


@pytest.mark.parametrize("page, key", [(PLAY, "s0"), (SERVE, "knobs"), (LIVE, "knobs")])
def test_knob_text_from_a_link_is_shown_as_text(page, key):
    at = open_page(page, {key: f"{LINK}=1;{IMAGE}=2"})
    assert not at.exception, at.exception
    errors = [e.value for e in at.error if "evil" in e.value]
    assert errors, shown(at)
    for value in errors:
        assert LINK in value  # the visitor reads what they typed ...
        assert "evil" not in outside_code(value), value  # ... as text: no link, no image


def test_a_host_name_from_a_link_is_shown_as_text():
    at = open_page(SERVE, {"url": "http://__x__.invalid:8000"})
    assert not at.exception, at.exception
    (value,) = [e.value for e in at.error]
    assert "__x__" in value and "__x__" not in outside_code(value)  # not a bold "x"


# ---- 13: a model is a catalog name or an upload, never a path on the server --------------


@pytest.mark.parametrize("page, key", [(PLAY, "s0"), (SERVE, "knobs"), (LIVE, "knobs")])
def test_a_server_path_as_model_is_refused_without_reading_it(page, key):
    seen = []
    for path in ("/etc/passwd", "/no/such/file", "/proc/self/environ"):
        at = open_page(page, {key: f"model={path}"})
        assert not at.exception, at.exception
        (value,) = [e.value for e in at.error]
        seen.append(value.replace(path, "PATH"))
    assert len(set(seen)) == 1, seen  # existing and missing files: the same answer
    assert "PATH" in seen[0]


def test_an_uploaded_config_can_still_be_named_as_the_model(tmp_path):
    from ui.model_upload import check_model, save_config

    good = (
        b'{"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, '
        b'"intermediate_size": 128, "vocab_size": 100}'
    )
    path = save_config(good, "tiny")
    check_model(str(path))  # an upload: allowed
    check_model("Llama-3.1-8B:fp8:kv-fp8")  # a catalog name with suffixes: allowed
    for bad in ("/etc/passwd", f"{path.parent}/../../../etc/passwd", "~/.ssh/id_rsa", "."):
        with pytest.raises(ValueError, match="catalog"):
            check_model(bad)


# ---- 14: a crafted upload or URL is one local error, not the page's generic one ------------

DEEP = b'{"a": ' + b"[" * 5000 + b"]" * 5000 + b"}"
QLIST = (
    b'{"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, '
    b'"intermediate_size": 128, "vocab_size": 100, "quantization_config": [1, 2]}'
)


@pytest.mark.parametrize(
    "data, says", [(DEEP, "deep"), (QLIST, "quantization_config")], ids=["deep", "list"]
)
def test_a_crafted_config_upload_is_a_local_error(data, says):
    at = open_page(PLAY)
    (uploader,) = [u for u in at.get("file_uploader") if u.allowed_type == [".json"]]
    uploader.set_value(("config.json", data, "application/json")).run()
    assert not at.exception, at.exception
    assert any(says in e.value for e in at.error), shown(at)
    assert at.get("plotly_chart")  # the rest of the page still runs, with the catalog model


@pytest.mark.parametrize("url", ["http://[::1", "http://[x](y)", "http://127.0.0.1:99999"])
def test_a_malformed_url_is_a_local_error(url):
    at = open_page(SERVE, {"url": url})
    assert not at.exception, at.exception
    assert at.error and "127.0.0.1" in at.error[0].value
    assert at.title[0].value == t("serve.title")  # the page, not app.error


# ---- 15: cloud metadata in any spelling is refused, whatever the operator allows ----------


@pytest.mark.parametrize(
    "url",
    [
        "http://[::ffff:169.254.169.254]",
        "http://[fd00:ec2::254]",
        "http://100.100.100.200",
        "http://[::ffff:a9fe:a9fe]:80",
        "http://168.63.129.16",
        "http://192.0.0.192",
        "http://[2002:a9fe:a9fe::1]",
    ],
)
def test_metadata_addresses_are_refused_in_every_spelling(url):
    at = open_page(SERVE, {"url": url}, env={"PDLAB_ALLOW_ENDPOINTS": "any"})
    assert not at.exception, at.exception
    assert at.error, shown(at)
    assert not at.tabs  # nothing was fetched: the page stopped at the URL


def test_a_public_address_is_still_allowed_when_the_operator_says_any():
    from ui.endpoints import checked_endpoint

    assert checked_endpoint("http://203.0.113.7:8000", "any").url == "http://203.0.113.7:8000"
    with pytest.raises(ValueError):
        checked_endpoint("http://[::ffff:127.0.0.1]:8000", "loopback")


# ---- found on a further pass ---------------------------------------------------------------


def test_an_uploaded_models_name_cannot_carry_html_into_chart_titles():
    from ui.model_upload import save_config

    crafted = QLIST.replace(
        b', "quantization_config": [1, 2]',
        b', "_name_or_path": "<a href=\'https://evil.example\'>x</a>"',
    )
    with pytest.raises(ValueError, match="_name_or_path"):
        save_config(crafted, "m")
    good = crafted.replace(b"<a href='https://evil.example'>x</a>", b"org/My-Model_1.5")
    path = save_config(good, "../../" + "n" * 300 + "<b>")  # a browser's file name: any text
    assert path.parent.parent.name == "pdlab_models" and len(path.parent.name) < 80
