"""ModelFn providers (cluster.executor.providers): the back end finds ModelFns through modules the layers above
declare, by the entry-point group of an installed distribution or by `add_providers`, never by name."""

from __future__ import annotations

import sys
import textwrap

import pytest

from cluster.executor import providers
from cluster.modelfn import MODEL_FNS, get_model_fn


@pytest.fixture
def fresh_providers(monkeypatch, tmp_path):
    """A process whose providers are not loaded yet, with `tmp_path` importable."""
    monkeypatch.setattr(providers, "_added", list(providers._added))
    monkeypatch.setattr(providers, "_loaded", False)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ("provided_by_entry_point", "provided_by_add"):
        MODEL_FNS.pop(name, None)
    for module in ("entry_point_provider", "added_provider"):
        sys.modules.pop(module, None)


def _provider(folder, module: str, fn_name: str) -> None:
    (folder / f"{module}.py").write_text(
        textwrap.dedent(f'''
        from cluster.modelfn import ModelFn, register

        @register
        class Provided(ModelFn):
            name = "{fn_name}"
            def setup_io(self): self.add_output("y")
            def load_model(self, ref): return None
            def execute(self, model, inputs, params): return {{}}
    ''')
    )


def test_an_installed_distributions_entry_point_provides_modelfns(fresh_providers):
    # what `pip install` writes for [project.entry-points."comfy_cluster.modelfns"] in pyproject.toml
    dist = fresh_providers / "provider_dist-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: provider-dist\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{providers.GROUP}]\nfake = entry_point_provider\n")
    _provider(fresh_providers, "entry_point_provider", "provided_by_entry_point")
    assert "entry_point_provider" in providers.providers()
    assert get_model_fn("provided_by_entry_point").name == "provided_by_entry_point"


def test_added_providers_are_imported_on_the_first_unknown_name(fresh_providers):
    _provider(fresh_providers, "added_provider", "provided_by_add")
    providers.add_providers("added_provider")
    assert "added_provider" not in sys.modules  # not at start-up: on first need
    assert get_model_fn("provided_by_add").name == "provided_by_add"
    with pytest.raises(KeyError, match="unknown ModelFn"):
        get_model_fn("provided_by_nobody")


def test_the_comfyui_layer_provides_the_core_modelfns_and_the_pack_node():
    # in a fresh process: here comfy_bridge may have been imported already, under another test's providers
    import subprocess

    from tests.conftest import REPO

    code = "import comfy_bridge; from cluster.executor import providers; print(' '.join(providers.added_providers()))"
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert {"nodes.modelfns", "comfy_bridge.packs.pack_node"} <= set(run.stdout.split()), run.stderr
