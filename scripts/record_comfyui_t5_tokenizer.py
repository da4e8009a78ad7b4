"""Record the token ids ComfyUI 0.3.64's own T5-XXL tokenizer (SD3's T5XXLTokenizer: its shipped t5_tokenizer
folder read by transformers' T5TokenizerFast, under ComfyUI's SDTokenizer rules) gives a few hundred varied
prompts, as a fixture for the T5 vocabulary shipped with Comfy Cluster.

Run inside ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here):

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \
        /work/main/scripts/record_comfyui_t5_tokenizer.py /work/main/tests/models/fixtures/comfyui_t5_tokenizer.json

The prompts are fixed edge cases (spacing, newlines, tabs, accents, CJK, emoji, digits, weights, escapes,
long prompts) plus seeded random mixes of words, punctuation and whitespace; they are stored with the ids.
"""

from __future__ import annotations

import json
import random
import sys

from comfyui_recording import comfyui_on_cpu

OUT = sys.argv[1]
comfyui_on_cpu()
from comfy.text_encoders.sd3_clip import T5XXLTokenizer  # noqa: E402

COMMIT = "a125cd84b054a57729b5eecab930ca9408719832"

EDGE_CASES = [
    "",
    " ",
    "  ",
    "a",
    "A photo of a cat",
    "a photo of a cat ",
    " a photo of a cat",
    "a  photo   of a cat",
    "a photo\nof a cat",
    "a photo\n\nof a cat\n",
    "a\tphoto\tof a cat",
    "tab\t at end\t",
    "\n",
    "\t",
    "an astronaut riding a horse on the moon, 8k, highly detailed, trending on artstation",
    "a (red:1.3) house",
    "((masterpiece)), best quality, (worst quality:0.7)",
    "a \\(literal\\) paren",
    "(unclosed paren",
    "closed) paren",
    "(a:1.2)(b:0.8)(c)",
    "(nested (deep:1.5) weights:1.1)",
    "café crème brûlée, naïve façade",
    "Ærøskøbing, Øresund, Ångström",
    "Straße über München",
    "東京の夜景、ネオン",
    "一只猫坐在窗台上",
    "서울의 밤",
    "Москва зимой",
    "Αθήνα",
    "emoji 🐱🚀✨ test",
    "ﬁﬂ ligatures and ＦＵＬＬＷＩＤＴＨ ｔｅｘｔ",
    "½ ¼ ² ³ ™ © ®",
    "ｶﾀｶﾅ",
    "e\u0301 combining accent",
    "zero\u200bwidth space",
    "non\u00a0breaking space",
    "em—dash – en-dash … ellipsis",
    "“curly” ‘quotes’",
    "1234567890 3.14159 1,000,000 2024-01-01 12:30",
    "v1.5 SDXL 1024x1024 f/1.8 ISO-400 50mm",
    "snake_case CamelCase kebab-case UPPER lower",
    "http://example.com/a?b=c&d=e #hashtag @user",
    "<html> {braces} [brackets] |pipes| ~tilde` ^caret",
    "$100 €50 £20 ¥1000 ₹500",
    "a.b,c;d:e!f?g",
    "...!!!???",
    "----====____",
    "'single' \"double\"",
    "back\\slash",
    "unk symbols: ☃ ♞ ⌘ ∑ ∫ √ ∞",
    "x" * 300,
    "word " * 120,
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "a very long prompt that goes on " * 12 + "(with a weighted tail:1.4)",
]

WORDS = (
    "a the of portrait landscape cat dog castle cyberpunk city neon rain forest mountain river sunset "
    "oil painting watercolor photograph cinematic lighting bokeh 35mm hdr ultra detailed masterpiece "
    "woman man child robot dragon knight wizard spaceship galaxy nebula ocean waves beach snow winter "
    "autumn leaves golden hour volumetric fog octane render unreal engine artstation greg rutkowski "
    "studio ghibli anime manga sketch charcoal isometric low-poly vaporwave steampunk baroque gothic "
    "art-nouveau ukiyo-e photorealistic 4k 8k 16:9 f/2.8 don't it's o'clock café niño über 東京 猫 🌸 "
    "Zürich São Paulo Kraków Reykjavík"
).split()
SEPARATORS = [" ", " ", " ", ", ", ". ", "  ", "\n", " - ", "; ", "\t", ",", ":", "! ", "? ", " / "]


def random_prompt(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 40)):
        word = rng.choice(WORDS)
        r = rng.random()
        if r < 0.08:
            word = f"({word}:{rng.choice(['0.5', '0.8', '1.1', '1.25', '1.5', '2'])})"
        elif r < 0.12:
            word = f"(({word}))"
        elif r < 0.16:
            word = word.upper()
        elif r < 0.20:
            word = word.capitalize()
        parts.append(word)
        parts.append(rng.choice(SEPARATORS))
    text = "".join(parts)
    return text if rng.random() < 0.7 else text.strip()


def main() -> None:
    rng = random.Random(19)
    prompts = EDGE_CASES + [random_prompt(rng) for _ in range(300)]
    tokenizer = T5XXLTokenizer()
    cases = []
    for text in prompts:
        chunks = tokenizer.tokenize_with_weights(text)
        cases.append(
            {
                "text": text,
                "ids": [[int(t) for t, _ in chunk] for chunk in chunks],
                "weights": [[w, i, j] for i, chunk in enumerate(chunks) for j, (_, w) in enumerate(chunk) if w != 1.0],
            }
        )
    fixture = {
        "note": (
            "Recorded by scripts/record_comfyui_t5_tokenizer.py with ComfyUI 0.3.64's SD3 T5XXLTokenizer "
            f"(commit {COMMIT}): the token ids of each window, and [weight, window, position] of the "
            "tokens whose weight is not 1."
        ),
        "cases": cases,
    }
    with open(OUT, "w") as f:
        json.dump(fixture, f, ensure_ascii=False)
    print(len(cases), "prompts recorded")


if __name__ == "__main__":
    main()
