"""The scheduling policies have one registry (cluster.scheduling.policies): the head, the simulator, the
dispatch benchmark and both command lines choose from it, so a policy added there is offered everywhere."""

from __future__ import annotations

import argparse

import pytest

from cluster.scheduling.policies import POLICIES, make_scheduler
from cluster.scheduling.tenant_scheduler import FairScheduler, QueueScheduler
from comfy_bridge.cli import simulate
from comfy_bridge.cli.flags import add_cluster_flags


def _choices(p: argparse.ArgumentParser, dest: str) -> object:
    return next(a.choices for a in p._actions if a.dest == dest)


def test_the_command_lines_offer_the_registrys_policies():
    serve, sim = argparse.ArgumentParser(), argparse.ArgumentParser()
    add_cluster_flags(serve)
    simulate.add_arguments(sim)
    assert _choices(serve, "scheduler") is POLICIES
    assert _choices(sim, "policy") is POLICIES


def test_each_policy_makes_its_scheduler():
    made = {name: make_scheduler(name, delta=2.0) for name in POLICIES}
    assert list(made) == ["vtime", "fifo", "sjf", "vtc"]
    assert isinstance(made["vtime"], FairScheduler) and made["vtime"].delta == 2.0
    assert isinstance(made["vtc"], FairScheduler) and made["vtc"].delta == 0.0  # the slack is vtime's only
    assert isinstance(made["fifo"], QueueScheduler) and isinstance(made["sjf"], QueueScheduler)


def test_an_unknown_policy_is_named_with_the_choices():
    with pytest.raises(ValueError, match=r"unknown policy 'random'; choose one of \('vtime', 'fifo', 'sjf', 'vtc'\)"):
        make_scheduler("random")
