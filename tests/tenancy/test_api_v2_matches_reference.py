"""Our /api/v2 answers the probes of api_v2_probes.py as the reference did (comfy-api-proxy 0.1.6 in front
of real ComfyUI 0.3.64, recorded by scripts/api_v2_reference.py in fixtures/api_v2_reference_probes.json):
the same statuses, error codes, envelopes, transitions, dedup and range answers, except where the
reference departs from the published contract, each listed below with what the contract says."""

from __future__ import annotations

import json
from pathlib import Path

from api_v2_probes import run_probes

FIXTURE = Path(__file__).parent / "fixtures" / "api_v2_reference_probes.json"
# probe -> (what we answer instead, why)
DEPARTURES: dict[str, tuple[dict, str]] = {
    "content_range_unsatisfiable": (
        {"status": 416},
        "the contract's getAssetContent answers 416 (Range not "
        "satisfiable); the proxy turns ComfyUI's /view answer into a 502",
    ),
}


async def test_our_answers_match_the_reference(hosted):
    recorded = json.loads(FIXTURE.read_text())["probes"]
    auth = hosted.add("alice")
    ours = await run_probes(hosted.client, auth)
    assert set(ours) == set(recorded)
    for name, expected in recorded.items():
        if name in DEPARTURES:
            assert ours[name] == DEPARTURES[name][0], (name, ours[name])
        else:
            assert ours[name] == expected, (name, ours[name], expected)
