"""Stable Cascade's stage C coder, the VAE of the stage C checkpoint (`vae.`) or of effnet_encoder.safetensors /
previewer.safetensors: an EfficientNetV2-S feature extractor (torchvision's `features` names under `backbone.`)
mapped to 16 batch-normed channels at 1/32 of the image size (what StableCascade_StageC_VAEEncode encodes images
with), and the previewer that paints a stage C latent at 8x its size. ComfyUI's comfy/sd.py tells the three files
by `backbone.1.0.block.0.1.num_batches_tracked`, `blocks.11.num_batches_tracked` and the combined
`encoder.`/`previewer.` names.

The EfficientNet is written here in torchvision's key layout (torchvision is not among the project's CPU
dependencies): a stem, six stages of fused (stages 1-3) or squeeze-and-excitation (4-6) inverted residual blocks
and a 1x1 head, batch norms with eps 1e-3, SiLU. Widths, kernels, expansions and block counts come from the
shapes; the strides are EfficientNetV2-S's (the stem's 2, then 1, 2, 2, 2, 1, 2 per stage). As ComfyUI's VAE runs it,
images go in as 2x-1 and the encoder maps them back to 0..1 before ImageNet's normalisation; the previewer's
output comes back as (x+1)/2 clamped to 0..1."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from nodes.models.components import VAEModel

STAGE_STRIDES = (1, 2, 2, 2, 1, 2)  # EfficientNetV2-S's six stages
BN_EPS = 1e-3


class ConvNormAct(nn.Sequential):
    """torchvision's Conv2dNormActivation: conv without bias, batch norm, optional SiLU (keys .0 and .1)."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1, act: bool = True) -> None:
        layers: list[nn.Module] = [
            nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout, eps=BN_EPS),
        ]
        super().__init__(*layers, *([nn.SiLU()] if act else []))


class SqueezeExcitation(nn.Module):
    """torchvision's squeeze-and-excitation (its fc1/fc2 names): channels gated by their pooled means."""

    def __init__(self, channels: int, squeezed: int) -> None:
        super().__init__()
        self.fc1 = nn.Conv2d(channels, squeezed, 1)
        self.fc2 = nn.Conv2d(squeezed, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = nn.functional.adaptive_avg_pool2d(x, 1)
        return x * torch.sigmoid(self.fc2(nn.functional.silu(self.fc1(s))))


@dataclass(frozen=True)
class BlockShape:
    fused: bool
    cin: int
    expanded: int
    cout: int
    kernel: int
    stride: int


class InvertedResidual(nn.Module):
    """A fused block (one k x k expansion conv, a 1x1 projection) or a squeeze-and-excitation one (1x1 expansion,
    k x k depthwise, squeeze-excite, 1x1 projection); the input is added back where the shape is kept."""

    def __init__(self, s: BlockShape) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        if s.fused:
            if s.expanded != s.cin:
                layers += [
                    ConvNormAct(s.cin, s.expanded, s.kernel, s.stride),
                    ConvNormAct(s.expanded, s.cout, 1, act=False),
                ]
            else:
                layers += [ConvNormAct(s.cin, s.cout, s.kernel, s.stride)]
        else:
            if s.expanded != s.cin:
                layers.append(ConvNormAct(s.cin, s.expanded, 1))
            layers += [
                ConvNormAct(s.expanded, s.expanded, s.kernel, s.stride, groups=s.expanded),
                SqueezeExcitation(s.expanded, max(1, s.cin // 4)),
                ConvNormAct(s.expanded, s.cout, 1, act=False),
            ]
        self.block = nn.Sequential(*layers)
        self.residual = s.stride == 1 and s.cin == s.cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.block(x)
        return out + x if self.residual else out


class EfficientNetEncoder(nn.Module):
    def __init__(self, stem: int, stages: list[list[BlockShape]], head: int, latent: int) -> None:
        super().__init__()
        last = stages[-1][-1].cout
        self.backbone = nn.Sequential(
            ConvNormAct(3, stem, 3, 2),
            *[nn.Sequential(*[InvertedResidual(b) for b in blocks]) for blocks in stages],
            ConvNormAct(last, head, 1),
        )
        self.mapper = nn.Sequential(nn.Conv2d(head, latent, 1, bias=False), nn.BatchNorm2d(latent, affine=False))
        self.mean = nn.Parameter(torch.tensor([0.485, 0.456, 0.406]))
        self.std = nn.Parameter(torch.tensor([0.229, 0.224, 0.225]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * 0.5 + 0.5
        x = (x - self.mean.view(3, 1, 1)) / self.std.view(3, 1, 1)
        return self.mapper(self.backbone(x))


def _previewer_layers(cin: int, hidden: int, cout: int) -> list[nn.Module]:
    """Conv/transposed-conv steps, each followed by GELU and a batch norm, then a 1x1 to RGB (keys blocks.0-24)."""
    steps = [
        nn.Conv2d(cin, hidden, 1),
        nn.Conv2d(hidden, hidden, 3, padding=1),
        nn.ConvTranspose2d(hidden, hidden // 2, 2, stride=2),
        nn.Conv2d(hidden // 2, hidden // 2, 3, padding=1),
        nn.ConvTranspose2d(hidden // 2, hidden // 4, 2, stride=2),
        nn.Conv2d(hidden // 4, hidden // 4, 3, padding=1),
        nn.ConvTranspose2d(hidden // 4, hidden // 4, 2, stride=2),
        nn.Conv2d(hidden // 4, hidden // 4, 3, padding=1),
    ]
    layers: list[nn.Module] = []
    for step in steps:
        layers += [step, nn.GELU(), nn.BatchNorm2d(step.out_channels)]
    return [*layers, nn.Conv2d(hidden // 4, cout, 1)]


class Previewer(nn.Module):
    def __init__(self, cin: int, hidden: int, cout: int = 3) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*_previewer_layers(cin, hidden, cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.blocks(x) - 0.5) * 2.0


class StageCCoder(nn.Module):
    def __init__(self, encoder: EfficientNetEncoder | None, previewer: Previewer | None) -> None:
        super().__init__()
        self.encoder, self.previewer = encoder, previewer


def _count(sd: Mapping[str, torch.Tensor], prefix: str) -> int:
    return len({k[len(prefix) :].split(".")[0] for k in sd if k.startswith(prefix)})


def encoder_shapes(sd: Mapping[str, torch.Tensor]) -> dict:
    """EfficientNetEncoder's arguments from `backbone.`/`mapper.` tensors (no prefix)."""
    n_stages = _count(sd, "backbone.") - 2
    if n_stages != len(STAGE_STRIDES):
        raise ValueError(
            f"{n_stages} EfficientNet stages; EfficientNetV2-S (Stable Cascade's) has {len(STAGE_STRIDES)}"
        )
    stages = []
    for s in range(1, n_stages + 1):
        blocks = []
        for j in range(_count(sd, f"backbone.{s}.")):
            p = f"backbone.{s}.{j}.block."
            layers = _count(sd, p)
            fused = f"{p}2.fc1.weight" not in sd and f"{p}1.fc1.weight" not in sd
            first = sd[f"{p}0.0.weight"]
            cin = first.shape[1]
            if fused:
                expanded = first.shape[0] if layers == 2 else cin
                kernel = first.shape[-1]
            else:
                has_expand = f"{p}2.fc1.weight" in sd
                expanded = first.shape[0] if has_expand else cin
                kernel = sd[f"{p}{1 if has_expand else 0}.0.weight"].shape[-1]
            cout = sd[f"{p}{layers - 1}.0.weight"].shape[0]
            stride = STAGE_STRIDES[s - 1] if j == 0 else 1
            blocks.append(BlockShape(fused, int(cin), int(expanded), int(cout), int(kernel), stride))
        stages.append(blocks)
    return {
        "stem": int(sd["backbone.0.0.weight"].shape[0]),
        "stages": stages,
        "head": int(sd[f"backbone.{n_stages + 1}.0.weight"].shape[0]),
        "latent": int(sd["mapper.0.weight"].shape[0]),
    }


def previewer_shapes(sd: Mapping[str, torch.Tensor]) -> dict:
    return {
        "cin": int(sd["blocks.0.weight"].shape[1]),
        "hidden": int(sd["blocks.0.weight"].shape[0]),
        "cout": int(sd["blocks.24.weight"].shape[0]),
    }


@dataclass
class StageCCoderVAE(VAEModel):
    def _part(self, name: str, what: str) -> nn.Module:
        part = getattr(self.module, name)
        if part is None:
            raise ValueError(f"this Stable Cascade stage C coder has no {name} ({what}): its file lacks those weights")
        return part

    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        encoder = self._part("encoder", "the EfficientNet that encodes images")
        x = pixels.movedim(-1, 1).to(next(encoder.parameters()).device, torch.float32) * 2.0 - 1.0
        with torch.no_grad():
            return encoder(x).float()

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        previewer = self._part("previewer", "the decoder of stage C latents")
        z = latent.to(next(previewer.parameters()).device, torch.float32)
        with torch.no_grad():
            image = previewer(z).float()
        return ((image + 1.0) / 2.0).clamp(0.0, 1.0).movedim(1, -1)


def split_coder(sd: Mapping[str, torch.Tensor]) -> tuple[dict, dict]:
    """(EfficientNet tensors, previewer tensors), each without its prefix, from any of the three layouts."""
    if any(k.startswith(("encoder.", "previewer.")) for k in sd):
        enc = {k[len("encoder.") :]: v for k, v in sd.items() if k.startswith("encoder.")}
        prev = {k[len("previewer.") :]: v for k, v in sd.items() if k.startswith("previewer.")}
        return enc, prev
    if any(k.startswith("backbone.") for k in sd):
        return dict(sd), {}
    return {}, dict(sd)


def load_stage_c_coder(path: str | None, sd: Mapping[str, torch.Tensor]) -> StageCCoderVAE:
    from nodes.models.errors import ModelLoadError
    from nodes.models.safetensors_io import build_module

    enc_sd, prev_sd = split_coder({k: v.float() for k, v in sd.items()})
    try:
        enc_shapes = encoder_shapes(enc_sd) if enc_sd else None
        prev_shapes = previewer_shapes(prev_sd) if prev_sd else None
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Stable Cascade stage C coder: {e}") from None
    encoder = (
        build_module(
            lambda: EfficientNetEncoder(**enc_shapes).requires_grad_(False),
            enc_sd,
            path,
            "Stable Cascade EfficientNet encoder",
        )
        if enc_shapes
        else None
    )
    previewer = (
        build_module(lambda: Previewer(**prev_shapes).requires_grad_(False), prev_sd, path, "Stable Cascade previewer")
        if prev_shapes
        else None
    )
    module = StageCCoder(encoder, previewer).eval()
    latent = enc_shapes["latent"] if enc_shapes else prev_shapes["cin"]
    return StageCCoderVAE(arch="stable_cascade_c", module=module, latent_channels=latent, downscale=32)
