"""Record the token ids ComfyUI 0.3.64's own Qwen tokenizer (comfy/text_encoders/qwen25_tokenizer, loaded with
transformers' Qwen2Tokenizer exactly as its SDTokenizer loads it) gives a few hundred varied prompts.

Run inside ComfyUI's environment (its files are read there, nothing of them is copied here):

    cd /tmp/realcomfy/src && PYTHONPATH=/tmp/realcomfy/site /tmp/realcomfy/venv/bin/python \
        /work/main/scripts/record_comfyui_qwen_tokenizer.py /work/main/tests/models/fixtures/comfyui_qwen_tokenizer_ids.json

The prompts are generated here (seeded), so the fixture holds prompts and ids side by side."""

from __future__ import annotations

import json
import os
import random
import sys

HAND = [
    "",
    " ",
    "a",
    "A photo of a cat",
    "a (photo:1.2) of an astronaut riding a horse, 8k, highly detailed",
    "  leading and trailing spaces  ",
    "tabs\tand\tnewlines\nand\r\ncarriage returns\r",
    "\n\n\n",
    "x\n \n y",
    "1234567890",
    "3.14159 and 2,718,281",
    "year 2026, 4K UHD, 1920x1080, f/1.8, ISO-100",
    "v1.0.0-rc2",
    "I'm sure it's what they'd've said; THEY'LL, We'RE, you'VE",
    "don't won't can't shan't",
    "一只猫坐在窗台上，阳光明媚。",
    "東京の夜景、ネオンサイン",
    "한국어 텍스트 프롬프트",
    "Привет, мир! Кот в шляпе.",
    "مرحبا بالعالم",
    "שלום עולם",
    "Ελληνικά γράμματα αβγ",
    "हिन्दी पाठ",
    "ภาษาไทย",
    "emoji 🐱🚀✨👩‍👩‍👧‍👦 🇯🇵 ❤️",
    "café naïve résumé Ångström",
    "cafe\u0301 (combining accent, NFC)",
    "ﬁ ligature, ① circled, Ｆｕｌｌｗｉｄｔｈ",
    "zero\u200bwidth\u200dj\u2060oin",
    "math: ∑∫√∞ ≤ ≥ ≠ ± × ÷",
    "<|im_start|>user\nA red fox<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nDescribe the image.<|im_end|>\n<|im_start|>user\n<|vision_start|><|image_pad|>"
    "<|vision_end|>make it blue<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>",
    "text<|endoftext|>more",
    "<|im_end|><|im_end|>",
    "<|object_ref_start|>cat<|object_ref_end|><|box_start|>(1,2),(3,4)<|box_end|><|quad_start|><|quad_end|>",
    "<|vision_pad|><|video_pad|>",
    '<tool_call>{"a": 1}</tool_call>',
    "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|><|fim_pad|>",
    "<|repo_name|>x<|file_sep|>y",
    "<|im_start|> spaced <|im_end|>",
    "< |im_start| > not special",
    "<think>not a Qwen2.5 token</think>",
    "embedding:foo bar",
    "\\(escaped\\) (paren) [brackets] {braces}",
    "!!!???...,,,;;;:::",
    "a" * 300,
    "ab " * 120,
    "0" * 50,
    "   \t  \n  ",
    "snake_case camelCase PascalCase",
    "https://example.com/path?q=1&x=y#frag",
    "user@example.com",
    "C:\\Windows\\path",
    "$100 €50 £20 ¥1000",
    "“smart quotes” ‘single’ — em dash – en dash …",
    "\u00a0non-breaking\u00a0space",
    "\ufeffBOM at start",
    "Ǆ ǅ ǆ titlecase",
    "ǅungla 's 'S 'T 'Re",
]

FRAGMENTS = [
    "a",
    "cat",
    "dog",
    "photo",
    "of",
    "the",
    "portrait",
    "cinematic lighting",
    "8k",
    "4K",
    "2026",
    "0.5",
    "masterpiece",
    ",",
    ".",
    "!",
    "?",
    "'s",
    "'ll",
    "'RE",
    "  ",
    "\t",
    "\n",
    "\r\n",
    "\n\n",
    "猫",
    "森林",
    "ネコ",
    "고양이",
    "кошка",
    "قطة",
    "🐈",
    "🌲",
    "é",
    "e\u0301",
    "ß",
    "ﬀ",
    "Ⅻ",
    "½",
    "²",
    "(",
    ")",
    ":1.3",
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|vision_start|>",
    "<|image_pad|>",
    "<tool_call>",
    "user",
    "assistant",
    "system",
    "\u200b",
    "-",
    "_",
    "/",
    "\\",
    "#",
    "@",
    "%",
    "&",
    "*",
    "=",
    "+",
    "~",
    "`",
    "|",
    "<",
    ">",
    "{",
    "}",
    "[",
    "]",
    '"',
    "'",
    " ",
    "   ",
    "neon-lit",
    "hyper_realistic",
    "Über",
    "ÅÄÖ",
]


def generated(n: int, seed: int = 19) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = [rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 24))]
        seps = [rng.choice(["", " ", " ", "", "\n"]) for _ in parts]
        out.append("".join(p + s for p, s in zip(parts, seps)))
    return out


def main(out_path: str) -> None:
    from transformers import Qwen2Tokenizer

    path = os.path.join("comfy", "text_encoders", "qwen25_tokenizer")
    tok = Qwen2Tokenizer.from_pretrained(path)  # as comfy.sd1_clip.SDTokenizer loads it
    prompts = HAND + generated(300)
    cases = [{"text": t, "ids": tok(t)["input_ids"]} for t in prompts]
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(
            {
                "source": "ComfyUI 0.3.64 (a125cd84) comfy/text_encoders/qwen25_tokenizer via "
                "transformers.Qwen2Tokenizer.from_pretrained, tokenizer(text)['input_ids']",
                "cases": cases,
            },
            f,
            ensure_ascii=False,
            indent=0,
        )
    print(f"{len(cases)} prompts, {sum(len(c['ids']) for c in cases)} ids -> {out_path}")


if __name__ == "__main__":
    main(sys.argv[1])
