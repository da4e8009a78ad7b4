"""`comfy-cluster bench throughput`: the mixed load it sends, the figures it derives, and one small run end to
end against our own server with a second `serve` standing in for ComfyUI (the same HTTP and websocket
protocol; no keys). No timing is asserted: the figures depend on the machine."""

from __future__ import annotations

import json

import pytest

from comfy_bridge.bench import throughput
from comfy_bridge.bench.throughput_load import SAMPLERS, WORKFLOWS, mixed_load


def test_the_mixed_load_cycles_workflows_samplers_tenants_and_seeds():
    load = mixed_load(12, 3, 1000, "sd.safetensors", 128, 20)
    assert [t for t, _ in load] == [0, 1, 2] * 4
    kinds, samplers, seeds = set(), set(), set()
    for tenant, prompt in load:
        ks = prompt["3"]["inputs"]
        samplers.add((ks["sampler_name"], ks["scheduler"]))
        seeds.add(ks["seed"])
        assert prompt["4"]["inputs"]["ckpt_name"] == "sd.safetensors" and ks["steps"] == 20
        if "10" in prompt:
            kinds.add("img2img")
            assert prompt["10"]["inputs"]["image"] == "throughput-input.png"
        else:
            size = (prompt["5"]["inputs"]["width"], prompt["5"]["inputs"]["height"])
            kinds.add("txt2img" if size == (128, 128) else "txt2img-wide")
            assert size in ((128, 128), (192, 128))
        assert prompt["6"]["inputs"]["text"] == load[tenant][1]["6"]["inputs"]["text"]  # each tenant its text
    assert kinds == set(WORKFLOWS) and samplers == set(SAMPLERS) and seeds == set(range(1000, 1012))
    # all six workflow x sampler pairs occur, twice each
    pairs = [(i % len(WORKFLOWS), i % len(SAMPLERS)) for i in range(12)]
    assert len(set(pairs)) == 6


def _mixed(makespan: float, latencies: list[float], batches: int | None = 0) -> dict:
    return {
        "makespan_s": makespan,
        "images_per_s": len(latencies) / makespan,
        "latencies_s": latencies,
        "images": [["h"]] * len(latencies),
        "batches_dispatched": batches,
        "identical_to_reference": [True] * (len(latencies) - 1) + [False],
    }


def test_figure_gives_ratios_of_the_same_round_and_percentiles():
    rounds = [
        {
            "round": 1,
            "load_start": [1.0],
            "load_end": [1.0],
            "mixed": {"serve": _mixed(8.0, [1.0, 2.0, 8.0]), "comfyui": _mixed(10.0, [2.0, 5.0, 10.0], None)},
            "single": {"serve": [{"latency_s": 1.0}, {"latency_s": 2.0}], "comfyui": [{"latency_s": 2.0}] * 2},
        },
        {
            "round": 2,
            "load_start": [1.0],
            "load_end": [1.0],
            "mixed": {"serve": _mixed(12.0, [1.0, 3.0, 12.0]), "comfyui": _mixed(20.0, [4.0, 9.0, 20.0], None)},
            "single": {"serve": [{"latency_s": 3.0}] * 2, "comfyui": [{"latency_s": 3.0}] * 2},
        },
    ]
    fig = throughput.figure(rounds, ["serve"], "comfyui")
    mixed = fig["serve"]["mixed"]
    assert mixed["makespan_median_s"] == 10.0 and mixed["makespan_min_s"] == 8.0
    assert mixed["makespan_ratio_median"] == pytest.approx((0.8 + 0.6) / 2)
    assert mixed["makespan_ratio_of_minima"] == pytest.approx(0.8)
    assert (mixed["latency_p50_s"], mixed["latency_p99_s"]) == (2.0, 12.0)
    assert mixed["identical_to_reference"] == "4/6"
    assert fig["serve"]["single"]["ratio_median"] == pytest.approx((0.75 + 1.0) / 2)
    assert "makespan_ratio_median" not in fig["comfyui"]["mixed"]
    assert fig["comfyui"]["mixed"]["pixels_equal_to_ours"] == "4/6"
    lines = throughput.report(fig, rounds)
    assert any("2/3 images equal one-at-a-time" in line for line in lines)


def test_bad_arguments_are_refused_by_name(capsys):
    for argv, word in ((["--prompts", "0"], "--prompts"), (["--size", "100"], "multiple of 8")):
        with pytest.raises(SystemExit):
            throughput.parse(argv)
        assert word in capsys.readouterr().err
    assert throughput.side_names(["", "--executors 2", "--executors 2"]) == [
        "serve",
        "serve --executors 2",
        "serve --executors 2 #2",
    ]


def test_a_comfyui_without_the_checkpoint_is_refused_by_name(serve):
    url = serve("--executors", "0")
    with pytest.raises(SystemExit, match="does not list the checkpoint nowhere.safetensors"):
        throughput.comfyui_side(url, 2, "nowhere.safetensors")


def test_small_run_against_a_stand_in_comfyui_writes_every_figure(serve, demo_workspace, tmp_path):
    stand_in = serve("--executors", "0")
    out = tmp_path / "throughput.json"
    checkpoint = demo_workspace.models_dir / "checkpoints" / "sd1-tiny.safetensors"
    argv = ["--comfyui", stand_in, "--checkpoint", str(checkpoint), "--rounds", "1", "--prompts", "3"]
    argv += ["--tenants", "2", "--single-cases", "1", "--warmup", "1", "--steps", "2", "--size", "64"]
    argv += ["--serve-flags", "--executors 1 --concurrent-prompts 2", "--out", str(out), "--label", "test"]
    assert throughput.main(argv) == 0
    doc = json.loads(out.read_text())
    assert doc["label"] == "test" and set(doc["load_average"]) == {"start", "end"}
    (r,) = doc["rounds"]
    ours, theirs = r["mixed"]["serve --executors 1 --concurrent-prompts 2"], r["mixed"]["comfyui"]
    assert len(ours["latencies_s"]) == len(theirs["latencies_s"]) == 3
    assert ours["batches_dispatched"] is not None and theirs["batches_dispatched"] is None
    # concurrent prompts on our server, one at a time on the reference: the same pixels, and the stand-in's
    # (our code as well) equal them too
    assert ours["identical_to_reference"] == theirs["identical_to_reference"] == [True] * 3
    fig = doc["figure"]["serve --executors 1 --concurrent-prompts 2"]
    assert fig["mixed"]["identical_to_reference"] == "3/3"
    assert fig["mixed"]["makespan_ratio_median"] > 0 and fig["single"]["ratio_median"] > 0
