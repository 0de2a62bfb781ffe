"""Any Hugging Face model in the app: upload its config.json, simulate it like a catalog model.

Notable features
- `uploaded_model(label, help)` shows a file uploader for a `config.json` (Llama, Mistral,
  Qwen2/3, Mixtral, Qwen-MoE, DeepSeek-V2/V3) and returns a path the simulator's `model` knob
  accepts (`sim.cost.hardware.get_model` reads config files), or None when nothing is uploaded.
- The file is parsed before it is kept: a config the simulator cannot read shows `st.error`
  with the reason, and the page goes on with the catalog model.
- Uploads are stored by content hash in a temporary folder (one small JSON each), so the same
  config gives the same path, hence the same cached runs, for every visitor.
- `check_model(value)` is the app's rule for a `model=` typed in the knobs (or a shared link):
  a catalog name (with its :fp8/:kv-fp8 suffixes) or one of these uploads, never any other path
  on the server. The simulator itself reads any config.json path (right for the command line,
  where the user owns the files); a link must not make the server open /etc/shadow or
  /proc/self/environ, nor tell which of them exist by its error message.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

import streamlit as st

from sim.cost.hf_config import model_from_hf_config
from ui.errors import say
from ui.language import translator

UPLOADS = Path(tempfile.gettempdir()) / "pdlab_models"
MAX_BYTES = 200_000  # a config.json is a few kB; anything bigger is not one
SAFE_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")


def save_config(data: bytes, name: str = "") -> Path:
    """Validate a config.json's bytes and keep them; the path of the kept file.

    ValueError (with the reason) when it is not a config the simulator understands.
    """
    if len(data) > MAX_BYTES:
        raise ValueError(f"a config.json is a few kB, this file has {len(data):,} bytes")
    try:
        config = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"not a JSON file: {err}") from None
    except RecursionError:  # 200 kB of "[[[[...": Python's parser gives up, with a traceback
        raise ValueError("the JSON is nested too deep for a config.json") from None
    spec = model_from_hf_config(config)  # raises ValueError naming the missing or bad field
    # The model's name (from _name_or_path) becomes chart titles, where plotly reads <a href>,
    # and captions: a Hugging Face repo id is letters, digits and . _ - only.
    if not SAFE_NAME.fullmatch(spec.name):
        raise ValueError(
            "_name_or_path may hold only letters, digits and . _ - / (a Hugging Face repo id)"
        )
    digest = hashlib.sha256(data).hexdigest()[:16]
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", Path(name).stem)[:40].lstrip(".")  # the browser's
    folder = UPLOADS / (f"{stem}-{digest}" if stem else digest)  # file name: any text at all
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.json"
    if not path.is_file():
        path.write_bytes(data)
    return path


def check_model(value: str) -> None:
    """ValueError unless `value` names a catalog model or a config.json uploaded here."""
    from sim.cost.hardware import DTYPE_BYTES, KV_SUFFIX, MODELS

    text = value.strip()
    base = text  # without the suffixes, parsed as get_model parses them: a last :kv-..., then
    for allowed in (lambda x: x.startswith(KV_SUFFIX), lambda x: x in DTYPE_BYTES):  # one :fp8
        head, sep, last = base.rpartition(":")
        if sep and head and allowed(last.lower()):
            base = head
    if base.lower() in {name.lower() for name in MODELS}:
        return
    path = Path(os.path.realpath(base))  # (.. and symbolic links resolved first)
    if path.parent.parent == Path(os.path.realpath(UPLOADS)) and path.name == "config.json":
        return
    raise ValueError(translator()("errors.model_path", value=text))


def uploaded_model(label: str, help: str | None = None, key: str = "hfcfg") -> str | None:
    """A config.json uploader; the path to simulate it with, or None (catalog model)."""
    upload = st.file_uploader(label, type=["json"], help=help, key=key)
    if upload is None:
        return None
    try:
        return str(save_config(upload.getvalue(), Path(upload.name).stem))
    except (ValueError, OSError) as err:  # (OSError: the server's disk) quoted as text
        say("error", "errors.bad_config", message=str(err).splitlines()[0])
        return None
