#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# timemodel-check.sh: the time model's predicted step against the measured
# one, for docs/benchmarks.md ("Time model"): tide-bench timemodel --json
# for the CNN (batch 64, --steps 20) and ResNet-38 (batch 16, --steps 5),
# each at its three budgets (the resident peak, halfway, the smallest that
# fits), on the CPU backend's measured profile.
#
# Prints one Markdown table: per model and budget the bytes moved per step,
# predicted_step_ms, the process CPU time per step, the fastest step's wall
# time, and predicted / CPU, the issue's figure (#11: within +-30 %). On a
# shared machine the wall times include waiting for a core, so CPU time is
# the measure; the script prints the load average before and after. With
# REPEATS > 1 every model runs that many times, interleaved, and each
# figure is the median.
#
#   bench/timemodel-check.sh [BUILD_DIR] [REPEATS]
set -euo pipefail
build=${1:-build}
repeats=${2:-1}
bench="$build/bin/tide-bench"
[ -x "$bench" ] || { echo "timemodel-check: $bench is missing; build first" >&2; exit 2; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# name|tide-bench timemodel arguments
cases=(
    "CNN b64|--model cnn --batch 64 --steps 20"
    "ResNet-38 b16|--model resnet --depth 38 --batch 16 --steps 5"
)
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for rep in $(seq "$repeats"); do
    for c in "${cases[@]}"; do
        # shellcheck disable=SC2086 # the arguments are words
        "$bench" timemodel ${c#*|} --json 2>/dev/null | grep '^{' |
            sed "s/^/${c%%|*}|$rep|/" >>"$out"
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 - "$out" <<'EOF'
import json, statistics, sys

runs = {}
for raw in open(sys.argv[1]):
    name, rep, line = raw.rstrip("\n").split("|", 2)
    runs.setdefault(name, {}).setdefault(rep, []).append(json.loads(line))

print("| model | budget (bytes) | moved / step | predicted | CPU / step | fastest | "
      "predicted / CPU |")
print("|---|---:|---:|---:|---:|---:|---:|")
worst = 0.0
for name, by_rep in runs.items():
    lines = list(by_rep.values())
    for i, first in enumerate(lines[0]):
        same = [r[i] for r in lines if len(r) > i]
        def median(key):
            return statistics.median(j[key] for j in same)
        ratio = median("predicted_step_ms") / median("cpu_ms_per_step")
        worst = max(worst, abs(ratio - 1))
        print(f"| {name} | {first['budget_bytes']:,} | {first['moved_bytes'] / 1e6:.1f} MB | "
              f"{median('predicted_step_ms'):.2f} ms | {median('cpu_ms_per_step'):.2f} ms | "
              f"{median('fastest_step_ms'):.2f} ms | {ratio:.2f} |")
print(f"\nfarthest from the CPU time: {worst * 100:.0f} % "
      f"({'within' if worst <= 0.3 else 'outside'} +-30 %)")
EOF
