"""Every `comfy-cluster` command with verbs (tenants, nodes, discriminator) takes its options after the
verb, as users type them (`tenants add NAME --workspace W`), and before it (`tenants --workspace W add NAME`)."""

from __future__ import annotations

import argparse
import json

import pytest

from comfy_bridge.cli import build_parser, main


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {
        a.option_strings[-1]: a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)
    }


def _minimal_args(verb: argparse.ArgumentParser) -> list[str]:
    """Values for the verb's positionals and required options, so that it parses."""
    args = []
    for action in verb._actions:
        if not action.option_strings and not isinstance(action, argparse._SubParsersAction):
            args.append("x")
        elif action.required:
            args += [action.option_strings[-1], "x"]
    return args


def _cases() -> list[tuple[str, str, str]]:
    cases = []
    for command, parser in _subcommands(build_parser()).items():
        verbs = _subcommands(parser)
        for option in _options(parser) if verbs else {}:
            cases += [(command, verb, option) for verb in verbs]
    return cases


CASES = _cases()


def test_the_commands_with_verbs_are_all_covered():
    assert {command for command, _, _ in CASES} >= {"tenants", "nodes", "discriminator"}
    assert {(c, v) for c, v, o in CASES if o == "--workspace" and c == "tenants"} == {
        ("tenants", verb) for verb in ("add", "set", "list", "key", "revoke", "remove", "usage")
    }
    assert {v for c, v, o in CASES if c == "nodes"} == {"install", "list", "disable", "enable"}


@pytest.mark.parametrize("command,verb,option", CASES)
def test_options_before_and_after_the_verb(command, verb, option):
    parser = build_parser()
    verb_parser = _subcommands(_subcommands(parser)[command])[verb]
    dest = _options(_subcommands(parser)[command])[option].dest
    rest = _minimal_args(verb_parser)
    after = parser.parse_args([command, verb, *rest, option, "V"])
    before = parser.parse_args([command, option, "V", verb, *rest])
    neither = parser.parse_args([command, verb, *rest])
    assert getattr(after, dest) == "V" and getattr(before, dest) == "V"
    assert getattr(neither, dest) is None


def test_tenants_add_with_the_workspace_after_the_verb(tmp_path, capsys):
    ws = str(tmp_path / "ws")
    assert main(["tenants", "add", "alice", "--workspace", ws, "--max-queued", "3"]) == 0
    assert main(["tenants", "key", "alice", "--workspace", ws]) == 0
    assert main(["tenants", "--workspace", ws, "add", "bob"]) == 0
    db = str(tmp_path / "ws" / "comfy_cluster.sqlite3")
    capsys.readouterr()
    assert main(["tenants", "list", "--state-db", db]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["name"], r["max_queued"], len(r["keys"])) for r in rows] == [("alice", 3, 1), ("bob", None, 0)]


def test_nodes_list_with_the_workspace_before_the_verb(tmp_path, capsys):
    ws = tmp_path / "ws"
    (ws / "custom_nodes").mkdir(parents=True)
    (ws / "custom_nodes" / "my_pack.py").write_text("NODE_CLASS_MAPPINGS = {}\n")
    assert main(["nodes", "--workspace", str(ws), "list"]) == 0
    assert "my_pack.py" in capsys.readouterr().out
    assert main(["nodes", "list", "--workspace", str(ws)]) == 0
    assert "my_pack.py" in capsys.readouterr().out
