"""`comfy-cluster discriminator train --real DIR --fake DIR [--out FILE]`: fit the cascade's
real-vs-generated classifier on the user's images and save it as .safetensors (by default into the
workspace's models/classifiers, where CascadeKSampler lists it)."""

from __future__ import annotations

import argparse
from pathlib import Path

from comfy_bridge.cli.flags import shared_options

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".webp", ".bmp"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    disc = sub.add_parser("discriminator", help="train the cascade discriminator")
    common = shared_options(disc, lambda p: p.add_argument("--workspace", help="where the default --out goes"))
    actions = disc.add_subparsers(dest="action", required=True)
    train = actions.add_parser(
        "train", parents=[common], help="train on real and generated images; writes a .safetensors"
    )
    train.add_argument("--real", required=True, help="folder of real images (searched recursively)")
    train.add_argument("--fake", required=True, help="folder of generated images (searched recursively)")
    train.add_argument(
        "--out", default=None, help="output file (default: <workspace>/models/classifiers/discriminator.safetensors)"
    )
    train.add_argument("--epochs", type=int, default=20)
    train.add_argument("--batch-size", type=int, default=32)
    train.add_argument("--lr", type=float, default=3e-3)
    train.add_argument("--image-size", type=int, default=64)
    train.add_argument("--seed", type=int, default=0)
    train.set_defaults(func=main)


def load_folder(folder: Path, size: int):
    """Every image under `folder`, centre-cropped square and resized: a tensor [N,size,size,3] in 0..1."""
    import numpy as np
    import torch
    from PIL import Image, ImageOps

    files = sorted(p for p in Path(folder).rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise SystemExit(f"no images in {folder}")
    out = []
    for path in files:
        with Image.open(path) as im:
            im = ImageOps.fit(ImageOps.exif_transpose(im).convert("RGB"), (size, size), Image.Resampling.BICUBIC)
            out.append(torch.from_numpy(np.asarray(im, dtype=np.float32) / 255.0))
    return torch.stack(out)


def main(args: argparse.Namespace) -> int:
    import torch

    from nodes.models.discriminator import Discriminator, DiscriminatorConfig, save_discriminator, train_discriminator

    if args.out:
        out = Path(args.out)
    else:
        from comfy_bridge.cli.workspace_args import open_workspace

        out = open_workspace(args).folder_paths("classifiers")[0] / "discriminator.safetensors"
    real, fake = load_folder(Path(args.real), args.image_size), load_folder(Path(args.fake), args.image_size)
    print(f"{len(real)} real and {len(fake)} generated images at {args.image_size}px")
    torch.manual_seed(args.seed)
    model = Discriminator(DiscriminatorConfig(image_size=args.image_size))
    losses = train_discriminator(model, real, fake, args.epochs, args.batch_size, args.lr, args.seed)
    for epoch, loss in enumerate(losses, 1):
        print(f"epoch {epoch:3d}  loss {loss:.4f}")
    conf_real, conf_fake = model.confidence(real), model.confidence(fake)
    accuracy = (float((conf_real >= 0.5).sum()) + float((conf_fake < 0.5).sum())) / (len(real) + len(fake))
    print(
        f"training accuracy {accuracy:.3f}; mean P(real): real {float(conf_real.mean()):.3f}, "
        f"generated {float(conf_fake.mean()):.3f}"
    )
    print(save_discriminator(model, out))
    return 0
