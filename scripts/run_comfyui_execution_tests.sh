#!/usr/bin/env bash
# Run ComfyUI's own execution test suite (tests/execution) against Comfy Cluster, as ComfyUI runs it:
# timing checks on, the test process building its prompts with ComfyUI's own client-side helpers
# (comfy_execution/graph_utils.py from the given checkout, not ours), and write a result file.
#
#   scripts/run_comfyui_execution_tests.sh COMFYUI [--ref REF] [--result FILE] [--skip-timing-checks] [pytest args...]
#
# COMFYUI: a ComfyUI work tree, or a git directory without one (e.g. the `fetch` tool's
# /work/.mirror/Comfy-Org+ComfyUI/repo), from which REF (default HEAD) is exported with `git archive`.
# --result: where the result JSON goes (default docs/benchmarks/comfyui_execution_suite.json): command,
# ComfyUI commit (read from the checkout) and version, date, machine, load average, pytest summary and
# every test's outcome. --skip-timing-checks is passed on to the suite and recorded in the file.
#
# The suite's fixture starts `python main.py ... --extra-model-paths-config tests/execution/extra_model_paths.yaml`
# in the current directory, so pytest runs from our repository root and our main.py serves.
# ComfyUI's test files are copied into a temporary folder outside the repository (nothing of ComfyUI
# is committed); for the duration of the run `tests/execution` in the repository is a symlink to that
# copy (ignored by git) so the relative YAML path resolves. It is removed on exit.
set -euo pipefail

usage() {
  echo "usage: $0 COMFYUI-checkout-or-git-dir [--ref REF] [--result FILE] [--skip-timing-checks] [pytest args...]" >&2
  exit 2
}
[ $# -ge 1 ] && [ -d "$1" ] || usage
SOURCE="$(cd "$1" && pwd)"
shift
REF=HEAD
REPO="$(cd "$(dirname "$0")/.." && pwd)"
RESULT="$REPO/docs/benchmarks/comfyui_execution_suite.json"
TIMING=on
PYTEST_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --ref) [ $# -ge 2 ] || usage; REF="$2"; shift 2 ;;
    --result) [ $# -ge 2 ] || usage; RESULT="$(realpath -m "$2")"; shift 2 ;;
    --skip-timing-checks) TIMING=off; PYTEST_ARGS+=("$1"); shift ;;
    *) PYTEST_ARGS+=("$1"); shift ;;
  esac
done
COMMAND="scripts/run_comfyui_execution_tests.sh $SOURCE --ref $REF${PYTEST_ARGS[*]:+ ${PYTEST_ARGS[*]}}"
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

# The ComfyUI source: its commit read from git, never from a server's /system_stats.
FILES=(pytest.ini comfyui_version.py tests/__init__.py tests/conftest.py tests/execution comfy_execution/graph_utils.py)
if git -C "$SOURCE" rev-parse --is-bare-repository >/dev/null 2>&1 \
   && [ "$(git -C "$SOURCE" rev-parse --is-inside-work-tree 2>/dev/null)" != true ]; then
  COMMIT="$(git -C "$SOURCE" rev-parse --verify "$REF^{commit}")"
  mkdir "$WORK/src"
  # git archive names every blob it could not read (a snapshot may lack large files) even when the
  # ones asked for are all there: its messages are shown only if one of those is missing.
  git -C "$SOURCE" archive "$COMMIT" -- "${FILES[@]}" 2>"$WORK/archive.err" | tar -x -C "$WORK/src"
  for f in "${FILES[@]}"; do
    [ -e "$WORK/src/$f" ] || { cat "$WORK/archive.err" >&2; echo "$f missing at $COMMIT" >&2; exit 2; }
  done
  COMFYUI="$WORK/src"
else
  COMFYUI="$SOURCE"
  [ "$REF" = HEAD ] || { echo "--ref needs a git directory without a work tree; $SOURCE is a work tree" >&2; exit 2; }
  COMMIT="$(git -C "$SOURCE" rev-parse HEAD 2>/dev/null || echo unknown)"
  if [ "$COMMIT" != unknown ] && [ -n "$(git -C "$SOURCE" status --porcelain --untracked-files=no -- "${FILES[@]}")" ]; then
    COMMIT="$COMMIT+local-changes"   # the suite as run is not the commit's
  fi
fi
[ -d "$COMFYUI/tests/execution" ] || { echo "$SOURCE has no tests/execution" >&2; exit 2; }
VERSION="$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$COMFYUI/comfyui_version.py" 2>/dev/null || true)"

# Only the files the suite needs (shared/reference/comfyui-protocol.md §12.4), and ComfyUI's own
# GraphBuilder for the test process (an __init__ so that no other comfy_execution can take its place).
mkdir -p "$WORK/run/tests/execution/testing_nodes" "$WORK/run/comfy_execution"
cp "$COMFYUI/pytest.ini" "$WORK/run/"
cp "$COMFYUI/tests/__init__.py" "$COMFYUI/tests/conftest.py" "$WORK/run/tests/"
cp "$COMFYUI/tests/execution/"{test_execution.py,test_async_nodes.py,test_progress_isolation.py,extra_model_paths.yaml} \
   "$WORK/run/tests/execution/"
cp -r "$COMFYUI/tests/execution/testing_nodes/testing-pack" "$WORK/run/tests/execution/testing_nodes/"
cp "$COMFYUI/comfy_execution/graph_utils.py" "$WORK/run/comfy_execution/"
touch "$WORK/run/comfy_execution/__init__.py"
HELPERS="$WORK/run/comfy_execution/graph_utils.py"
# The test process must find that copy, not our compat layer (no -p comfy_bridge.compat.pytest_plugin):
# ComfyUI's pytest.ini (pythonpath = .) puts $WORK/run first on its sys.path, as PYTHONPATH does here.
# Only there: the servers it starts must import our compat layer's comfy_execution, so no PYTHONPATH below.
FOUND="$(cd "$REPO" && PYTHONPATH="$WORK/run" python -c \
  'import os, comfy_execution.graph_utils as g; print(os.path.realpath(g.__file__))')"
if [ "$FOUND" != "$(realpath "$HELPERS")" ]; then
  echo "the test process would import comfy_execution.graph_utils from $FOUND, not ComfyUI's copy" >&2
  exit 2
fi
ln -s "$WORK/run/tests/execution" "$LINK"

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

STARTED="$(date +%s)"
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "ComfyUI $VERSION at $COMMIT; load average $LOAD_BEFORE; timing checks $TIMING" >&2
# -c/--rootdir: ComfyUI's pytest.ini and conftest (options --port, --skip-timing-checks) apply, ours do not.
# --timeout (pytest-timeout, in our test extras): a missing final `executing` would otherwise block forever.
set +e
python -m pytest "$WORK/run/tests/execution" -c "$WORK/run/pytest.ini" --rootdir "$WORK/run" \
  -p no:cacheprovider --timeout 300 -v --port "$PORT" --output_dir "$WORK/output" \
  --junitxml "$WORK/junit.xml" "${PYTEST_ARGS[@]}"
STATUS=$?
set -e
if [ -s "$WORK/junit.xml" ]; then
  mkdir -p "$(dirname "$RESULT")"
  python "$REPO/scripts/comfyui_execution_result.py" "$WORK/junit.xml" "$RESULT" --command "$COMMAND" \
    --comfyui-commit "$COMMIT" --comfyui-version "${VERSION:-unknown}" --helpers "comfy_execution/graph_utils.py of $COMMIT" \
    --started "$STARTED" --load-before "$LOAD_BEFORE" --exit-code "$STATUS" --timing-checks "$TIMING"
fi
exit "$STATUS"
