"""Record what ComfyUI 0.10.0 computes for FLUX.2 dev's Mistral 3 text encoder on the demo's tiny file, as the
fixture of tests/models/test_flux2_dev.py.

Run inside ComfyUI's own environment (it imports ComfyUI's modules and runs their code; nothing of ComfyUI
is copied here), given the demo models (`comfy-cluster demo-models` builds them):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_flux2_mistral.py \\
        <models>/text_encoders/flux2-dev-tiny-mistral3.safetensors /work/main/tests/models/fixtures/comfyui_flux2_mistral.json

- Tokenizer: ComfyUI's Flux2Tokenizer with the file's tekken_model. With transformers 5 its MistralConverter call
  (the vocab= keyword of transformers 4) raises; the error is recorded instead of ids.
- Encoder: ComfyUI's Mistral3Small24B (comfy.text_encoders.llama) built with the tiny file's sizes (ComfyUI's
  loader takes them from its fixed 24B config) and its weights, run on fixed token ids with the taps
  Mistral3_24BModel reads ([10, 20, 30], no final norm on them); the three states are joined per token as
  Flux2TEModel.encode_token_weights joins them. Tensors as float32 (base64).
"""

from __future__ import annotations

import json
import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, sha256

WEIGHTS, OUT = sys.argv[1], sys.argv[2]
comfyui_on_cpu()

COMFYUI = "0.10.0 (79cdbc81)"
PROMPTS = ["a photo of the cat", "the (red) apple\non a table"]
# ids: BOS, [SYSTEM_PROMPT], bytes of "hi", [/SYSTEM_PROMPT], [INST], merged and single tokens, [/INST]
ID_ROWS = [[1, 17, 124, 125, 18, 3, 277, 52, 280, 117, 4], [1, 3, 20, 21, 22, 23, 4]]


def main() -> None:
    import comfy.ops
    import comfy.text_encoders.flux
    import comfy.text_encoders.llama
    import comfy.utils

    sd = comfy.utils.load_torch_file(WEIGHTS)
    tokenizer: dict = {}
    try:
        tok = comfy.text_encoders.flux.Flux2Tokenizer(tokenizer_data={"tekken_model": sd["tekken_model"]})
        tokenizer["ids"] = [[t for t, _ in tok.tokenize_with_weights(p)["mistral3_24b"][0]] for p in PROMPTS]
    except Exception as e:  # noqa: BLE001 - the error itself is the record
        tokenizer["error"] = f"{type(e).__name__}: {e}"
    vocab, hidden = sd["model.embed_tokens.weight"].shape
    layers = 0
    while f"model.layers.{layers}.self_attn.q_proj.weight" in sd:
        layers += 1
    config = {
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": sd["model.layers.0.mlp.gate_proj.weight"].shape[0],
        "num_hidden_layers": layers,
        "num_attention_heads": sd["model.layers.0.self_attn.q_proj.weight"].shape[0] // 128,
        "num_key_value_heads": sd["model.layers.0.self_attn.k_proj.weight"].shape[0] // 128,
    }
    model = comfy.text_encoders.llama.Mistral3Small24B(config, torch.float32, "cpu", comfy.ops.disable_weight_init)
    weights = {k: v.float() for k, v in sd.items() if k.startswith("model.")}
    missing, unexpected = model.load_state_dict(weights, strict=False)
    assert not unexpected and all("rotary" in k or "freqs" in k for k in missing), (missing, unexpected)
    runs = []
    for ids in ID_ROWS:
        with torch.no_grad():
            _, taps = model(torch.tensor([ids]), intermediate_output=[10, 20, 30], final_layer_norm_intermediate=False)
        out = taps.movedim(1, 2)  # [B, 3, T, D] -> [B, T, 3, D]: each token's three states side by side
        runs.append({"ids": ids, "cond": b64(out.reshape(out.shape[0], out.shape[1], -1))})
    record = {
        "comfyui": COMFYUI,
        "recorded_by": "scripts/record_comfyui_flux2_mistral.py (Flux2Tokenizer; Mistral3Small24B at the tiny "
        "file's sizes with taps [10, 20, 30]; CPU)",
        "weights_sha256": sha256(WEIGHTS),
        "config": config,
        "prompts": PROMPTS,
        "tokenizer": tokenizer,
        "runs": runs,
    }
    with open(OUT, "w") as f:
        json.dump(record, f, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
