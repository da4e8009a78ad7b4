#!/usr/bin/env bash
# Run ComfyUI's own execution test suite (tests/execution) against Comfy Cluster.
#
#   scripts/run_comfyui_execution_tests.sh /path/to/ComfyUI [extra pytest args...]
#
# The suite's fixture starts `python main.py ... --extra-model-paths-config tests/execution/extra_model_paths.yaml`
# in the current directory, so pytest runs from our repository root and our main.py serves.
# ComfyUI's test files are copied into a temporary folder outside the repository (nothing of ComfyUI
# is committed); for the duration of the run `tests/execution` in the repository is a symlink to that
# copy (ignored by git) so the relative YAML path resolves. It is removed on exit.
set -euo pipefail

if [ $# -lt 1 ] || [ ! -d "$1/tests/execution" ]; then
  echo "usage: $0 /path/to/ComfyUI-checkout [pytest args...]" >&2
  exit 2
fi
COMFYUI="$(cd "$1" && pwd)"
shift
REPO="$(cd "$(dirname "$0")/.." && pwd)"
cd "$REPO"

LINK="$REPO/tests/execution"
if [ -e "$LINK" ] || [ -L "$LINK" ]; then
  if [ ! -L "$LINK" ]; then
    echo "$LINK exists and is not our symlink; refusing to touch it" >&2
    exit 2
  fi
  # Another run may be using it: two runs at once would share one symlink.
  echo "$LINK already exists (another run in progress?); remove it if stale" >&2
  exit 2
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/comfyui-exec-tests.XXXXXX")"
cleanup() {
  rm -f "$LINK"
  rm -rf "$WORK"
}
trap cleanup EXIT

# Only the files the suite needs (shared/reference/comfyui-protocol.md §12.4).
mkdir -p "$WORK/tests/execution/testing_nodes"
cp "$COMFYUI/pytest.ini" "$WORK/"
cp "$COMFYUI/tests/__init__.py" "$COMFYUI/tests/conftest.py" "$WORK/tests/"
cp "$COMFYUI/tests/execution/"{test_execution.py,test_async_nodes.py,test_progress_isolation.py,extra_model_paths.yaml} \
   "$WORK/tests/execution/"
cp -r "$COMFYUI/tests/execution/testing_nodes/testing-pack" "$WORK/tests/execution/testing_nodes/"
ln -s "$WORK/tests/execution" "$LINK"

# main.py builds the demo models into models/ on a fresh checkout before it listens; do it now so the
# first server is ready within the suite's ~20 s readiness window.
if [ -z "$(ls -A "$REPO/models/checkpoints" 2>/dev/null)" ]; then
  python -m comfy_bridge.cli demo-models --workspace "$REPO" >/dev/null
fi

# A free port: the suite starts and kills seven servers on it.
PORT="$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"

# ComfyUI keeps queue and history in the server process; the suite restarts the server seven times
# and expects neither to survive (e.g. its /history offset tests), so no SQLite state for these servers.
export COMFY_CLUSTER_STATE_DB=memory

# -c/--rootdir: ComfyUI's pytest.ini and conftest (options --port, --skip-timing-checks) apply, ours do not.
# The plugin lets the test process import comfy_execution.graph_utils from our compat layer.
# --timeout (pytest-timeout, in our test extras): a missing final `executing` would otherwise block forever.
python -m pytest "$WORK/tests/execution" -c "$WORK/pytest.ini" --rootdir "$WORK" \
  -p comfy_bridge.compat.pytest_plugin -p no:cacheprovider --timeout 300 \
  -v --skip-timing-checks --port "$PORT" --output_dir "$WORK/output" "$@"
