"""Fixtures for the SD-family loader tests: the demo models, built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.refs import ModelRef, Patch, file_digest


@pytest.fixture(scope="session")
def sd_models(tmp_path_factory) -> Path:
    from nodes.models.demo import build_demo_models

    root = tmp_path_factory.mktemp("sd-models")
    build_demo_models(root, include_flux=False)
    return root


@pytest.fixture(scope="session")
def make_ref(sd_models):
    """make_ref(component, *relative files, loras=[(file, strength)], **options) -> ModelRef."""

    def make(component: str, *files: str, loras=(), **options) -> ModelRef:
        paths = [str(f if Path(f).is_absolute() else sd_models / f) for f in files]
        patches = tuple(Patch(str(sd_models / f), file_digest(sd_models / f), s) for f, s in loras)
        return ModelRef(
            component, "", tuple(paths), tuple(file_digest(p) for p in paths), patches, tuple(sorted(options.items()))
        )

    return make
