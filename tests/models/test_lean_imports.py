"""The model code is imported without what an image never runs (nodes.models.lean_imports): torch's
compiler, scipy's optimizers and distributions, every other diffusers family, transformers' model index;
each still works the moment something asks for it. Run in fresh processes: the deferral is per process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def run(code: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", "import json, sys, torch\n" + code], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_sd_model_code_imports_without_the_compiler_scipy_or_other_families():
    out = run(
        "from nodes.models.loader import import_model_code\n"
        "import_model_code()\n"
        "from nodes.models.lean_imports import is_loaded\n"
        "names = ['torch._dynamo', 'scipy.optimize', 'scipy.stats', 'scipy.integrate', 'transformers.models',\n"
        "         'diffusers.models.transformers', 'diffusers.models.unets']\n"
        "print(json.dumps({'loaded': [n for n in names if is_loaded(n)],\n"
        "  'flux': 'diffusers.models.transformers.transformer_flux' in sys.modules,\n"
        "  'sd': [m in sys.modules for m in ('diffusers.models.unets.unet_2d_condition',\n"
        "        'diffusers.models.autoencoders.autoencoder_kl', 'transformers.models.clip.modeling_clip')]}))\n"
    )
    assert out == {"loaded": [], "flux": False, "sd": [True, True, True]}


def test_what_was_deferred_loads_when_asked_for():
    out = run(
        "from nodes.models.loader import import_model_code\n"
        "import_model_code()\n"
        "from nodes.models.lean_imports import is_loaded\n"
        "from diffusers.models.transformers import FluxTransformer2DModel   # the package's own code\n"
        "import scipy.stats\n"
        "from transformers import models   # its registry: a package not imported yet\n"
        "BertConfig = models.bert.BertConfig\n"
        "print(json.dumps({'flux': FluxTransformer2DModel.__name__, 'beta': float(scipy.stats.beta.ppf(0.5, 1, 1)),\n"
        "  'bert': BertConfig().model_type, 'loaded': [is_loaded(n) for n in\n"
        "  ('diffusers.models.transformers', 'scipy.stats', 'transformers.models', 'torch._dynamo')]}))\n"
    )
    assert out == {"flux": "FluxTransformer2DModel", "beta": 0.5, "bert": "bert", "loaded": [True, True, True, False]}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_torch_compile_loads_the_real_compiler_and_functions_marked_before_run_under_it(backend):
    out = run(
        "from nodes.models.loader import import_model_code\n"
        "import_model_code()\n"
        "from nodes.models.lean_imports import is_loaded\n"
        "calls = []\n"
        "@torch.compiler.disable\n"
        "def hook(x):\n"
        "    calls.append(torch.compiler.is_compiling())\n"
        "    return x + 1\n"
        "before = [hook(torch.zeros(1)).item(), is_loaded('torch._dynamo')]\n"
        "net = torch.nn.Linear(3, 3)\n"
        "x = torch.randn(2, 3)\n"
        f"compiled = torch.compile(lambda t: hook(net(t)), backend={backend!r})\n"
        "same = torch.allclose(compiled(x), net(x) + 1)\n"
        "print(json.dumps({'before': before, 'same': same, 'loaded': is_loaded('torch._dynamo'),\n"
        "                  'compiling_in_hook': calls}))\n"
    )
    # the disabled hook ran outside the graph both times, as the real decorator has it
    assert out == {"before": [1.0, False], "same": True, "loaded": True, "compiling_in_hook": [False, False]}


def test_importlib_invalidate_caches_works_with_the_finder_installed():
    # importlib.invalidate_caches() calls every finder on sys.meta_path (packs and tests call it after
    # writing modules): the class on it must answer without an instance
    import importlib

    import nodes.models  # noqa: F401  (installs the finder)
    from nodes.models.lean_imports import DeferredImports

    assert DeferredImports in sys.meta_path
    importlib.invalidate_caches()
