"""kohya LoRAs merge into our modules: they change the output, strength scales them, 0 is a no-op."""

from __future__ import annotations

import torch

from nodes.models.loader import load_diffusion_model, load_text_encoder

CKPT, LORA = "checkpoints/sd1-tiny.safetensors", "loras/sd1-tiny-lora.safetensors"


def _weights(model):
    return {k: v.clone() for k, v in model.module.state_dict().items()}


def test_unet_lora_changes_output_and_strength_scales_the_delta(make_ref, fixed_threads):
    base = load_diffusion_model(make_ref("diffusion_model", CKPT))
    one = load_diffusion_model(make_ref("diffusion_model", CKPT, loras=[(LORA, 1.0)]))
    two = load_diffusion_model(make_ref("diffusion_model", CKPT, loras=[(LORA, 2.0)]))
    zero = load_diffusion_model(make_ref("diffusion_model", CKPT, loras=[(LORA, 0.0)]))
    assert one.config["patched_weights"] == 32  # 8 attention projections x 4 transformer blocks
    x, t, ctx = torch.randn(1, 4, 8, 8), torch.tensor([400.0]), torch.randn(1, 77, 32)
    out = {n: m.apply(x, t, {"context": ctx}) for n, m in (("base", base), ("one", one), ("zero", zero))}
    assert torch.equal(out["zero"], out["base"])
    assert (out["one"] - out["base"]).abs().max() > 1e-3
    wb, w1, w2 = _weights(base), _weights(one), _weights(two)
    changed = [k for k in wb if not torch.equal(wb[k], w1[k])]
    assert len(changed) == 32 and all("attn" in k for k in changed)
    for k in changed:
        torch.testing.assert_close(w2[k] - wb[k], 2 * (w1[k] - wb[k]), rtol=1e-4, atol=1e-5)


def test_text_encoder_lora(make_ref):
    base = load_text_encoder(make_ref("text_encoder", CKPT))
    lora = load_text_encoder(make_ref("text_encoder", CKPT, loras=[(LORA, 1.0)]))
    zero = load_text_encoder(make_ref("text_encoder", CKPT, loras=[(LORA, 0.0)]))
    assert lora.patched_weights == 12  # q/k/v/out_proj + fc1/fc2 in 2 layers
    tokens = base.tokenize("a red fox")
    assert torch.equal(zero.encode(tokens)[0], base.encode(tokens)[0])
    assert (lora.encode(tokens)[0] - base.encode(tokens)[0]).abs().max() > 1e-3


def test_lora_does_not_alter_the_cached_checkpoint(make_ref):
    load_diffusion_model(make_ref("diffusion_model", CKPT, loras=[(LORA, 1.0)]))
    base1 = _weights(load_diffusion_model(make_ref("diffusion_model", CKPT)))
    load_diffusion_model(make_ref("diffusion_model", CKPT, loras=[(LORA, 3.0)]))
    base2 = _weights(load_diffusion_model(make_ref("diffusion_model", CKPT)))
    assert all(torch.equal(base1[k], base2[k]) for k in base1)
