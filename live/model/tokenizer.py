"""Build SmolLM2's byte-level BPE tokenizer from the vocabulary stored in its GGUF file.

Notable features
- GGUF files carry the tokenizer as plain lists (tokens, merges, token types); `tokenizers`
  rebuilds the same BPE model from them, no model hub needed.
- Pre-tokenizer as in SmolLM2's tokenizer.json: each digit alone, then GPT-2 byte-level splitting.
- Tokens of type 3 ("control": <|im_start|>, <|im_end|>, <|endoftext|>, ...) are registered as
  special tokens, otherwise chat prompts would be split into junk pieces.
"""

from __future__ import annotations

from collections.abc import Sequence

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

CONTROL_TOKEN = 3  # GGUF token_type of special/control tokens


def bpe_tokenizer(
    tokens: Sequence[str], merges: Sequence[str], token_types: Sequence[int]
) -> Tokenizer:
    """A byte-level BPE tokenizer from GGUF-style lists (merges as "left right" strings)."""
    vocab = {t: i for i, t in enumerate(tokens)}
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    tok = Tokenizer(models.BPE(vocab, pairs))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    specials = [t for t, kind in zip(tokens, token_types, strict=True) if kind == CONTROL_TOKEN]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    return tok


def chat_prompt(user_text: str, system: str | None = None) -> str:
    """SmolLM2-Instruct's chat format for one user turn, ending where the assistant speaks."""
    parts = [f"<|im_start|>system\n{system}<|im_end|>\n"] if system else []
    parts.append(f"<|im_start|>user\n{user_text}<|im_end|>\n<|im_start|>assistant\n")
    return "".join(parts)
