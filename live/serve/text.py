"""Text <-> token ids for `python -m live serve`: the model's tokenizer, or bytes for random models.

Notable features
- `codec_for(tokenizer, vocab)`: SmolLM2's byte-level BPE (real weights) or `ByteCodec`, one token
  per UTF-8 byte, for the random-weight presets. `tiny` has a 256-token vocabulary, so bytes are
  exactly its vocabulary; for the bigger presets byte ids are a valid (if odd) subset. A random
  model writes random ids: its text is noise by design, only the timing means something.
- `chat_text(messages)`: SmolLM2-Instruct's ChatML template (with its default system prompt, as
  the Hugging Face template adds one), or a plain "role: text" transcript for byte models; the
  assistant's opening (the generation prompt) at the end unless add_generation_prompt=False.
- `StreamText`: incremental detokenization for streaming. Byte-level tokens may end in the
  middle of a UTF-8 character; the text after such a token is held back (an empty delta) until
  the character is complete, as vLLM's detokenizer does, so a client never sees a broken glyph.
- The end-of-sequence ids (`<|im_end|>`, `<|endoftext|>`) stop a request unless `ignore_eos`.
"""

from __future__ import annotations

from collections.abc import Sequence

SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
REPLACEMENT = "\ufffd"  # what a decoder writes for an incomplete UTF-8 character


class ByteCodec:
    """One token per UTF-8 byte (ids 0..255)."""

    name = "bytes"

    def __init__(self, vocab: int) -> None:
        self.vocab = vocab
        self.eos_ids: frozenset[int] = frozenset()

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int]) -> str:
        # Ids above 255 (a random 1B-shaped model may sample them) have no byte: drop them.
        return bytes(i for i in ids if 0 <= i < 256).decode("utf-8", errors="replace")

    def chat_text(self, messages: Sequence[dict], add_generation_prompt: bool = True) -> str:
        lines = [f"{m['role']}: {m['content']}" for m in messages]
        return "\n".join(lines) + ("\nassistant: " if add_generation_prompt else "")


class BpeCodec:
    """A `tokenizers.Tokenizer` (SmolLM2's byte-level BPE) with its chat template."""

    name = "bpe"

    def __init__(self, tokenizer, vocab: int) -> None:
        self.tokenizer = tokenizer
        self.vocab = vocab
        eos = (tokenizer.token_to_id(t) for t in ("<|im_end|>", "<|endoftext|>"))
        self.eos_ids = frozenset(i for i in eos if i is not None)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def chat_text(self, messages: Sequence[dict], add_generation_prompt: bool = True) -> str:
        turns = list(messages)
        if not turns or turns[0]["role"] != "system":
            turns.insert(0, {"role": "system", "content": SMOLLM2_SYSTEM})
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in turns)
        return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


def codec_for(tokenizer, vocab: int) -> ByteCodec | BpeCodec:
    """The model's own tokenizer when it has one, else bytes."""
    return ByteCodec(vocab) if tokenizer is None else BpeCodec(tokenizer, vocab)


class StreamText:
    """The text each new token adds, holding back incomplete UTF-8 characters."""

    def __init__(self, codec) -> None:
        self.codec = codec
        self.ids: list[int] = []
        self.sent = 0  # characters already handed out

    def add(self, token_id: int, last: bool = False) -> str:
        """Append one token; the new text (maybe '' while a character is incomplete)."""
        self.ids.append(token_id)
        if token_id in self.codec.eos_ids:
            return ""  # the end-of-sequence token has no text
        text = self.codec.decode(self.ids)
        if text.endswith(REPLACEMENT) and not last:
            return ""
        delta, self.sent = text[self.sent :], len(text)
        return delta

    @property
    def text(self) -> str:
        return self.codec.decode(self.ids)
