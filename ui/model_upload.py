"""Any Hugging Face model in the app: upload its config.json, simulate it like a catalog model.

Notable features
- `uploaded_model(label, help)` shows a file uploader for a `config.json` (Llama, Mistral,
  Qwen2/3, Mixtral, Qwen-MoE, DeepSeek-V2/V3) and returns a path the simulator's `model` knob
  accepts (`sim.hardware.get_model` reads config files), or None when nothing is uploaded.
- The file is parsed before it is kept: a config the simulator cannot read shows `st.error`
  with the reason, and the page goes on with the catalog model.
- Uploads are stored by content hash in a temporary folder (one small JSON each), so the same
  config gives the same path, hence the same cached runs, for every visitor.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import streamlit as st

from sim.hf_config import model_from_hf_config

UPLOADS = Path(tempfile.gettempdir()) / "pdlab_models"
MAX_BYTES = 200_000  # a config.json is a few kB; anything bigger is not one


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
    model_from_hf_config(config)  # raises ValueError naming the missing or bad field
    digest = hashlib.sha256(data).hexdigest()[:16]
    folder = UPLOADS / (f"{Path(name).stem}-{digest}" if name else digest)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.json"
    if not path.is_file():
        path.write_bytes(data)
    return path


def uploaded_model(label: str, help: str | None = None, key: str = "hfcfg") -> str | None:
    """A config.json uploader; the path to simulate it with, or None (catalog model)."""
    upload = st.file_uploader(label, type=["json"], help=help, key=key)
    if upload is None:
        return None
    try:
        return str(save_config(upload.getvalue(), Path(upload.name).stem))
    except ValueError as err:
        st.error(str(err))
        return None
