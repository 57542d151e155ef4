#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# planner.sh: the planner's figures for docs/benchmarks.md ("## Planner"),
# from tide-bench plan --json, the automatic partition size against the
# fixed size 64:
#
#  - the smallest budget (min_budget_bytes, from a plan under --budget 1K)
#    against the floor (floor_bytes: the largest kernel's working set) for
#    ResNet-200 at batch 16 (32x32), the CNN (batch 64, 28x28) and ResNet-50
#    at 224x224 (batch 16);
#  - plan_ms of ResNets of 1001, 2000 and 4001 layers at batch 16 under 64
#    and 256 MiB (plans that must move tensors), and under 1K (nothing fits:
#    the smallest budget's search).
#
# Every case runs REPEATS times, interleaved with the others so that a
# burst of load on a shared machine hits all of them alike. Both times are
# medians: plan_ms, the wall time, which depends on the machine's load (the
# script prints the load average before and after), and plan_cpu_ms, the
# planning thread's CPU time, which does much less. Prints two Markdown
# tables.
#
#   bench/planner.sh [BUILD_DIR] [REPEATS]
set -euo pipefail
build=${1:-build}
repeats=${2:-3}
bench="$build/bin/tide-bench"
[ -x "$bench" ] || { echo "planner: $bench is missing; build first" >&2; exit 2; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# name|tide-bench plan arguments
budget_cases=(
    "ResNet-200 b16|--model resnet --depth 200 --batch 16"
    "CNN b64|--model cnn --batch 64"
    "ResNet-50@224 b16|--model resnet --depth 50 --image-size 224 --batch 16"
)
time_cases=()
for depth in 1001 2000 4001; do
    for budget in 64M 256M 1K; do
        time_cases+=("ResNet-$depth b16 $budget|--model resnet --depth $depth --batch 16 --budget $budget")
    done
done

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for rep in $(seq "$repeats"); do
    for size in 0 64; do
        if [ "$rep" -eq 1 ]; then
            for c in "${budget_cases[@]}"; do
                # shellcheck disable=SC2086 # the arguments are words
                line=$("$bench" plan ${c#*|} --budget 1K --partition-size "$size" --json \
                    2>/dev/null | tail -n 1) || true
                echo "budget|${c%%|*}|$size|$line" >>"$out"
            done
        fi
        for c in "${time_cases[@]}"; do
            # shellcheck disable=SC2086
            line=$("$bench" plan ${c#*|} --partition-size "$size" --json 2>/dev/null |
                tail -n 1) || true
            echo "time|${c%%|*}|$size|$line" >>"$out"
        done
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 - "$out" <<'EOF'
import json, statistics, sys

rows = {}
for raw in open(sys.argv[1]):
    kind, name, size, line = raw.rstrip("\n").split("|", 3)
    rows.setdefault((kind, name), {}).setdefault(size, []).append(json.loads(line))

mib = 1 << 20
print("| model | floor | min budget, auto (size) | × floor | min budget, fixed 64 | × floor |")
print("|---|---:|---:|---:|---:|---:|")
for (kind, name), by in rows.items():
    if kind != "budget":
        continue
    a, f = by["0"][0], by["64"][0]
    floor = a["floor_bytes"]
    print(f"| {name} | {floor / mib:.2f} MiB | {a['min_budget_bytes'] / mib:.2f} MiB "
          f"({a['partition_size']}) | {a['min_budget_bytes'] / floor:.3f} | "
          f"{f['min_budget_bytes'] / mib:.2f} MiB | {f['min_budget_bytes'] / floor:.2f} |")
print()
print("| plan | nodes (auto) | auto: wall ms | CPU ms | size chosen | moved/step | "
      "fixed 64: wall ms | CPU ms | moved/step |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
def moved(j):
    return (j["swap_in_bytes"] + j["swap_out_bytes"] + j["fetch_bytes"]
            + j["write_back_bytes"]) / mib
for (kind, name), by in rows.items():
    if kind != "time":
        continue
    a, f = by["0"], by["64"]
    def median(runs, key):
        return statistics.median(j[key] for j in runs)
    fits = "fits" if a[0]["fits"] else "does not fit"
    print(f"| {name} ({fits}) | {a[0]['nodes']} | {median(a, 'plan_ms'):.0f} | "
          f"{median(a, 'plan_cpu_ms'):.0f} | {a[0]['partition_size']} | {moved(a[0]):.0f} MiB | "
          f"{median(f, 'plan_ms'):.0f} | {median(f, 'plan_cpu_ms'):.0f} | "
          f"{moved(f[0]):.0f} MiB |")
EOF
