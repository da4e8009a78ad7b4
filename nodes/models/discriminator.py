"""The cascade's real-vs-generated classifier: an EfficientNet-style CNN written with torch modules
(MBConv blocks with squeeze-and-excitation, SiLU, BatchNorm), trained from scratch; no downloaded
weights. Confidence = P(real); DiffServe accepts the light model's image when it is >= threshold.

Files are .safetensors whose metadata holds the architecture (key "discriminator_config", JSON), so a
file alone rebuilds the network.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

CONFIG_KEY = "discriminator_config"


@dataclass(frozen=True)
class DiscriminatorConfig:
    image_size: int = 64
    stem: int = 16
    # (expansion, out channels, repeats, kernel, stride) per stage, EfficientNet-B0's shape scaled down
    stages: tuple[tuple[int, int, int, int, int], ...] = (
        (1, 16, 1, 3, 1),
        (4, 24, 2, 3, 2),
        (4, 40, 2, 5, 2),
        (4, 64, 1, 3, 2),
    )
    head: int = 128
    se_ratio: float = 0.25
    dropout: float = 0.2

    @classmethod
    def from_json(cls, text: str) -> DiscriminatorConfig:
        data = json.loads(text)
        data["stages"] = tuple(tuple(s) for s in data["stages"])
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def _conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    if act:
        layers.append(nn.SiLU())
    return nn.Sequential(*layers)


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, squeezed: int) -> None:
        super().__init__()
        self.reduce = nn.Conv2d(channels, squeezed, 1)
        self.expand = nn.Conv2d(squeezed, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = F.adaptive_avg_pool2d(x, 1)
        return x * torch.sigmoid(self.expand(F.silu(self.reduce(s))))


class MBConv(nn.Module):
    """Inverted residual: 1x1 expand, depthwise kxk, squeeze-excite, 1x1 project (+ skip when shapes match)."""

    def __init__(self, cin: int, cout: int, expansion: int, kernel: int, stride: int, se_ratio: float) -> None:
        super().__init__()
        mid = cin * expansion
        self.expand = _conv_bn(cin, mid, 1) if expansion != 1 else nn.Identity()
        self.depthwise = _conv_bn(mid, mid, kernel, stride, groups=mid)
        self.se = SqueezeExcite(mid, max(1, int(cin * se_ratio)))
        self.project = _conv_bn(mid, cout, 1, act=False)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.project(self.se(self.depthwise(self.expand(x))))
        return x + y if self.residual else y


class Discriminator(nn.Module):
    """Images [B,H,W,3] in 0..1 (ComfyUI's IMAGE) -> logits [B,2] over (generated, real)."""

    def __init__(self, config: DiscriminatorConfig = DiscriminatorConfig()) -> None:
        super().__init__()
        self.config = config
        blocks: list[nn.Module] = [_conv_bn(3, config.stem, 3, 2)]
        cin = config.stem
        for expansion, cout, repeats, kernel, stride in config.stages:
            for r in range(repeats):
                blocks.append(MBConv(cin, cout, expansion, kernel, stride if r == 0 else 1, config.se_ratio))
                cin = cout
        blocks.append(_conv_bn(cin, config.head, 1))
        self.features = nn.Sequential(*blocks)
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.head, 2)

    def preprocess(self, images: torch.Tensor) -> torch.Tensor:
        x = images[..., :3].permute(0, 3, 1, 2).float()
        if x.shape[-2:] != (self.config.image_size,) * 2:
            x = F.interpolate(
                x, size=(self.config.image_size,) * 2, mode="bilinear", align_corners=False, antialias=True
            )
        return (x - 0.5) / 0.5

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        feats = F.adaptive_avg_pool2d(self.features(self.preprocess(images)), 1).flatten(1)
        return self.classifier(self.dropout(feats))

    @torch.no_grad()
    def confidence(self, images: torch.Tensor) -> torch.Tensor:
        """P(real) per image, [B]."""
        return torch.softmax(self(images).float(), dim=1)[:, 1]


def train_discriminator(
    model: Discriminator,
    real: torch.Tensor,
    fake: torch.Tensor,
    epochs: int = 10,
    batch_size: int = 16,
    lr: float = 3e-3,
    seed: int = 0,
) -> list[float]:
    """Fit real (label 1) vs generated (label 0) images [N,H,W,3]; returns the mean loss per epoch.

    Classes are balanced by weighting the loss, and each epoch sees a seeded shuffle with random
    horizontal flips (and dropout draws from a forked, seeded global generator), so a run is repeatable."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return _train(model, real, fake, epochs, batch_size, lr, torch.Generator().manual_seed(seed))


def _train(
    model: Discriminator,
    real: torch.Tensor,
    fake: torch.Tensor,
    epochs: int,
    batch_size: int,
    lr: float,
    gen: torch.Generator,
) -> list[float]:
    images = torch.cat([real, fake]).float()
    labels = torch.cat([torch.ones(len(real), dtype=torch.long), torch.zeros(len(fake), dtype=torch.long)])
    weight = torch.tensor([len(images) / (2 * max(len(fake), 1)), len(images) / (2 * max(len(real), 1))])
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    steps = epochs * math.ceil(len(images) / batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(steps, 1))
    losses = []
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(images), generator=gen)
        total = 0.0
        for start in range(0, len(images), batch_size):
            idx = order[start : start + batch_size]
            x = images[idx]
            flip = torch.rand(len(idx), generator=gen) < 0.5
            x = torch.where(flip[:, None, None, None], x.flip(2), x)
            loss = F.cross_entropy(model(x), labels[idx], weight=weight)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(idx)
        losses.append(total / len(images))
    recalibrate_batchnorm(model, images, batch_size)
    return losses


@torch.no_grad()
def recalibrate_batchnorm(model: nn.Module, images: torch.Tensor, batch_size: int = 64) -> None:
    """Re-estimate BatchNorm statistics with the final weights (a cumulative average over the data):
    on short runs the momentum-averaged ones still reflect early weights and skew eval-mode outputs."""
    norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    saved = [m.momentum for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    for start in range(0, len(images), batch_size):
        model(images[start : start + batch_size])
    for m, momentum in zip(norms, saved):
        m.momentum = momentum
    model.eval()


def save_discriminator(model: Discriminator, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().contiguous().clone() for k, v in sorted(model.state_dict().items())}
    tmp = path.with_name(path.name + ".tmp")
    # One metadata entry only: safetensors writes its metadata map in hash order, which varies per run.
    save_file(tensors, str(tmp), metadata={CONFIG_KEY: model.config.to_json()})
    tmp.replace(path)
    return path


def load_discriminator(path: str | Path) -> Discriminator:
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
        if CONFIG_KEY not in meta:
            raise ValueError(f"{path}: not a discriminator file (no {CONFIG_KEY!r} metadata)")
        model = Discriminator(DiscriminatorConfig.from_json(meta[CONFIG_KEY]))
        state = {k: f.get_tensor(k) for k in f.keys()}
    model.load_state_dict(state)
    return model.eval()


def synthetic_images(n: int, size: int, noise: float, seed: int) -> torch.Tensor:
    """[n,size,size,3] smooth colour fields (upsampled 4x4 random grids), plus per-pixel noise of
    amplitude `noise`: noise 0 stands in for "real" photos, noisy ones for a weak generator's output."""
    gen = torch.Generator().manual_seed(seed)
    base = torch.rand(n, 3, 4, 4, generator=gen)
    smooth = F.interpolate(base, size=(size, size), mode="bicubic", align_corners=False).clamp(0, 1)
    noisy = smooth + noise * (torch.rand(n, 3, size, size, generator=gen) - 0.5) * 2
    return noisy.clamp(0, 1).permute(0, 2, 3, 1).contiguous()


DEMO_NAME = "cascade-demo-discriminator.safetensors"
DEMO_CONFIG = DiscriminatorConfig(
    image_size=32, stem=8, stages=((1, 8, 1, 3, 1), (4, 16, 1, 3, 2), (4, 24, 1, 3, 2)), head=32
)


def build_demo_discriminator(path: str | Path, seed: int = 0) -> Path:
    """A small discriminator trained (seeded, a few seconds on a CPU) to call smooth images real and
    noisy ones generated: the demo models' outputs look like noise, so the demo cascade defers them."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Discriminator(DEMO_CONFIG)
    real = synthetic_images(24, 32, 0.0, seed + 1)
    fake = synthetic_images(24, 32, 0.5, seed + 2)
    train_discriminator(model, real, fake, epochs=6, batch_size=16, seed=seed)
    return save_discriminator(model, path)
