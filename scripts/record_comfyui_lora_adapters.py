"""Record how ComfyUI 0.10.0 (upstream commit 79cdbc81) merges LyCORIS's LoHa and LoKr modules, full differences
(`.diff`) and bias differences (`.diff_b`, beside a LoRA pair or alone) into a model's weights, as the fixture tests/models/fixtures/comfyui_lora_adapters.json.xz.

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<sitecustomize shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_lora_adapters.py <fixture>

A module of seeded Linear layers (its weights recorded) is patched as LoraLoaderModelOnly patches a model:
comfy.lora.load_lora reads a seeded LoRA state dict (recorded whole) through a key map naming each layer, and a
ModelPatcher adds the patches at each strength and patches the weights (comfy.lora.calculate_weight, the LoHa and
LoKr adapters). Recorded: the patched weights per strength."""

from __future__ import annotations

import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, write_json

OUT = sys.argv[1]
comfyui_on_cpu()
import comfy.lora  # noqa: E402
import comfy.model_patcher  # noqa: E402

COMMIT = "79cdbc81"
STRENGTHS = [1.0, 0.7]
LAYERS = {  # layer -> (out, in)
    "loha": (12, 8),
    "loha_no_alpha": (6, 10),
    "lokr_full_w1": (12, 8),
    "lokr_factored_w1": (12, 8),
    "lokr_full_both": (6, 4),
    "diff": (5, 7),
}
BIASED = {"with_bias": (6, 5), "bias_only": (4, 3)}  # Linear layers with a bias


def seeded_lora(gen: torch.Generator) -> dict[str, torch.Tensor]:
    def r(*shape: int) -> torch.Tensor:
        return 0.2 * torch.randn(*shape, generator=gen)

    return {
        "loha.hada_w1_a": r(12, 3),
        "loha.hada_w1_b": r(3, 8),
        "loha.hada_w2_a": r(12, 3),
        "loha.hada_w2_b": r(3, 8),
        "loha.alpha": torch.tensor(2.0),
        "loha_no_alpha.hada_w1_a": r(6, 2),
        "loha_no_alpha.hada_w1_b": r(2, 10),
        "loha_no_alpha.hada_w2_a": r(6, 2),
        "loha_no_alpha.hada_w2_b": r(2, 10),
        # kron(w1 [3, 2], w2 [4, 4]) fills a [12, 8] weight
        "lokr_full_w1.lokr_w1": r(3, 2),
        "lokr_full_w1.lokr_w2_a": r(4, 2),
        "lokr_full_w1.lokr_w2_b": r(2, 4),
        "lokr_full_w1.alpha": torch.tensor(4.0),
        "lokr_factored_w1.lokr_w1_a": r(3, 1),
        "lokr_factored_w1.lokr_w1_b": r(1, 2),
        "lokr_factored_w1.lokr_w2": r(4, 4),
        "lokr_factored_w1.alpha": torch.tensor(3.0),
        "lokr_full_both.lokr_w1": r(2, 2),
        "lokr_full_both.lokr_w2": r(3, 2),
        "lokr_full_both.alpha": torch.tensor(8.0),  # no factorised side: ComfyUI scales by 1
        "diff.diff": r(5, 7),
        "with_bias.lora_down.weight": r(2, 5),
        "with_bias.lora_up.weight": r(6, 2),
        "with_bias.alpha": torch.tensor(1.0),
        "with_bias.diff_b": r(6),
        "bias_only.diff_b": r(4),
    }


@torch.inference_mode()
def main() -> None:
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(11)
    net = torch.nn.Module()
    for name, (rows, cols) in {**LAYERS, **BIASED}.items():
        layer = torch.nn.Linear(cols, rows, bias=name in BIASED)
        layer.weight.copy_(torch.randn(rows, cols, generator=gen))
        if name in BIASED:
            layer.bias.copy_(torch.randn(rows, generator=gen))
        net.add_module(name, layer)
    lora = seeded_lora(gen)
    key_map = {name: f"{name}.weight" for name in {**LAYERS, **BIASED}}
    patches = comfy.lora.load_lora(lora, key_map)
    expected = [*key_map.values(), "with_bias.bias", "bias_only.bias"]
    assert sorted(patches) == sorted(k for k in expected if k != "bias_only.weight"), patches.keys()
    record = {
        "comfyui_commit": COMMIT,
        "recorded_by": "scripts/record_comfyui_lora_adapters.py",
        "weights": {k: b64(v) for k, v in net.state_dict().items()},
        "lora": {k: b64(v) for k, v in lora.items()},
        "cases": [],
    }
    for strength in STRENGTHS:
        patcher = comfy.model_patcher.ModelPatcher(net, torch.device("cpu"), torch.device("cpu"))
        patched = patcher.clone()
        patched.add_patches(patches, strength)
        patched.patch_model()
        record["cases"].append({"strength": strength, "patched": {k: b64(v) for k, v in net.state_dict().items()}})
        patched.unpatch_model()
        print(strength, {k: float(v.abs().sum()) for k, v in net.state_dict().items()})
    print("wrote", write_json(OUT, record))


if __name__ == "__main__":
    main()
