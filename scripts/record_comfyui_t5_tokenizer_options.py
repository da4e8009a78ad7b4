"""Record how ComfyUI's Flux T5 tokenizer settings (min_length 256, no start token, end token, pad 0) and
T5TokenizerOptions' min_padding / min_length pad a prompt, as a test fixture.

Run inside ComfyUI's own environment (it runs ComfyUI's SDTokenizer; nothing of ComfyUI is copied here):

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \
        /work/main/scripts/record_comfyui_t5_tokenizer_options.py /work/main/tests/nodes/fixtures/comfyui_t5_tokenizer_options.json

The T5 vocabulary is not needed for the padding rules, so SDTokenizer gets a stand-in tokenizer class: one id
per character (ord(c) % 97 + 2; spaces dropped), end token 1, as T5's tokenizer ends every text with 1.
"""

from __future__ import annotations

import json
import sys

from comfyui_recording import comfyui_on_cpu

comfyui_on_cpu(sys.argv[1])
import comfy.sd1_clip  # noqa: E402


class CharTokenizer:
    @classmethod
    def from_pretrained(cls, path, **kwargs):
        return cls()

    def __call__(self, text):
        return {"input_ids": [ord(c) % 97 + 2 for c in text if c != " "] + [1]}

    def get_vocab(self):
        return {}


def main(out_path: str) -> None:
    # The settings of ComfyUI's Flux T5XXLTokenizer (comfy/text_encoders/flux.py).
    tokenizer = comfy.sd1_clip.SDTokenizer(
        None,
        pad_with_end=False,
        embedding_size=4096,
        embedding_key="t5xxl",
        tokenizer_class=CharTokenizer,
        has_start_token=False,
        pad_to_max_length=False,
        max_length=99999999,
        min_length=256,
    )
    texts = ["a glass bottle", "", "(red:1.3) house " * 40]
    options = [None, (0, 0), (3, 0), (0, 10), (5, 300), (7, 8)]
    cases = []
    for text in texts:
        for opt in options:
            tokenizer_options = {} if opt is None else {"t5xxl_min_padding": opt[0], "t5xxl_min_length": opt[1]}
            chunks = tokenizer.tokenize_with_weights(text, tokenizer_options=tokenizer_options)
            cases.append({"text": text, "options": tokenizer_options, "chunks": chunks})
    fixture = {
        "note": (
            "Recorded by scripts/record_comfyui_t5_tokenizer_options.py with ComfyUI 0.3.64's SDTokenizer "
            "(commit a125cd84b054a57729b5eecab930ca9408719832)."
        ),
        "cases": cases,
    }
    with open(out_path, "w") as f:
        json.dump(fixture, f)


if __name__ == "__main__":
    main(sys.argv[1])
