#!/usr/bin/env bash
# The GPU half of the test plan, for a machine with an NVIDIA GPU whose Python already
# has buildtile's dependencies and nanobind (no network needed): install buildtile and the
# example projects without build isolation, run the demo, every GPU test, and the benchmarks.
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 BUILDTILE_REQUIRE_GPU=1
python="${PYTHON:-python3}"
status=0
# editable, so that the compiled launch call (built by the runtime distribution) lands next to the
# sources that tests import
"$python" -m pip install -q --no-deps --no-build-isolation -e ./runtime || exit 1
"$python" -m pip install -q --no-deps --no-build-isolation -e . || exit 1
"$python" -m pip install -q --no-deps --no-build-isolation ./example_project || exit 1
"$python" -m pip install -q --no-deps --no-build-isolation ./example_project_mixed || status=1
"$python" -m example_kernels || status=1
# compute-sanitizer over every example kernel and tile specialization (the conformance jobs, from
# Python), once per tool; the last line of each run is its summary, and any error fails the plan
# (BUILDTILE_SKIP_SANITIZER=1 leaves it out, for a quick run)
if [ "${BUILDTILE_SKIP_SANITIZER:-0}" != 1 ]; then
    for tool in memcheck racecheck synccheck initcheck; do
        sanitize_log="$(mktemp)"
        "$python" -m buildtile sanitize --tool "$tool" -- "$python" tests/gpu/sanitize_examples.py \
            > "$sanitize_log" 2>&1
        sanitize_status=$?
        [ "$sanitize_status" -eq 0 ] || { cat "$sanitize_log"; status=1; }
        summary="$(grep '^buildtile sanitize: ' "$sanitize_log" | tail -n 1)"
        echo "${summary:-buildtile sanitize: $tool: did not run (exit $sanitize_status)}"
    done
fi
# BUILDTILE_REQUIRE_GPU=1: a GPU test that does not run fails (tests/gpu_gate.py); the gate's last
# line counts those that ran, and a run in which none did is a failure too
log="$(mktemp)"
"$python" -m pytest -q -m gpu -rs tests/gpu tests/test_runtime_gpu_ptx.py "$@" 2>&1 | tee "$log" || status=1
ran="$(sed -n 's/^GPU tests: \([0-9]*\) ran.*/\1/p' "$log" | tail -n 1)"
echo "GPU tests that ran: ${ran:-0}"
[ "${ran:-0}" -gt 0 ] || status=1
for bench in benchmarks/bench_*.py; do "$python" "$bench" || status=1; done
# C++ launch overhead against raw cuLaunchKernel, on this GPU's vecadd cubin; its path, its
# coarsening factor and its entry name are read from the installed manifest
cmake_dir="$("$python" -m example_kernels --cmake-dir)" || exit 1
read -r cubin coarsen symbol < <("$python" - "$cmake_dir" <<'PY'
import json, sys
from pathlib import Path

import torch

root = Path(sys.argv[1]).parent
manifest = json.loads((root / "manifest.json").read_text())
(vecadd,) = [k for k in manifest["kernels"] if k["module"] == "example_kernels.ops" and k["name"] == "vecadd"]
sm = "sm_%d%d" % torch.cuda.get_device_capability()
print(root / vecadd["artifacts"][sm]["path"], vecadd["contract"].get("coarsen") or 1, vecadd["symbol"])
PY
) || exit 1
build="$(mktemp -d)"
cmake -S benchmarks/cpp_launch -B "$build" -Dexample_kernels_DIR="$cmake_dir" > "$build/configure.log" &&
    cmake --build "$build" > "$build/build.log" && "$build/launch_overhead" "$cubin" "$coarsen" "$symbol" || status=1
exit "$status"
