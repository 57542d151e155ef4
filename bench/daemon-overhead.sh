#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# daemon-overhead.sh: steps per second of a small model through tided (over
# its Unix socket, with tidectl) against in-process tide-bench, in the same
# run, on the same backend and the same batches' shapes. Prints both figures
# and the daemon's overhead per step; the last line is one JSON object.
#
#   bench/daemon-overhead.sh [BUILD_DIR] [STEPS] [MODEL]
set -euo pipefail
build=${1:-build}
steps=${2:-500}
model=${3:-mlp}
bin="$build/bin"
for b in tided tidectl tide-bench; do
    [ -x "$bin/$b" ] || { echo "daemon-overhead: $bin/$b is missing; build first" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
"$bin/tided" --socket "$tmp/sock" --state-dir "$tmp/state" --backend cpu \
    --log-level warn >"$tmp/tided.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$tmp/sock" ] && break; sleep 0.1; done

common=(--model "$model" --dataset synthetic --batch 64 --steps "$steps" --optimizer sgd)
t0=$(date +%s.%N)
"$bin/tidectl" --socket "$tmp/sock" train "${common[@]}" --no-eval --json >"$tmp/daemon.json" 2>/dev/null
t1=$(date +%s.%N)
"$bin/tide-bench" train "${common[@]}" --json >"$tmp/bench.json" 2>/dev/null
t2=$(date +%s.%N)

calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }
daemon_s=$(calc "$t1 - $t0")
# In-process: the training loop alone (tide-bench also evaluates the test split), read
# from its JSON line by a JSON parser.
bench_s=$(tail -n 1 "$tmp/bench.json" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["train_seconds"])')
daemon_sps=$(calc "$steps / $daemon_s")
bench_sps=$(calc "$steps / $bench_s")
overhead_ms=$(calc "($daemon_s - $bench_s) * 1000 / $steps")
printf 'model %s, batch 64, %d steps, CPU backend\n' "$model" "$steps"
printf 'through tided (tidectl, Unix socket, submit and compile included): %.1f steps/s\n' "$daemon_sps"
printf 'in-process (tide-bench, training loop only):                      %.1f steps/s\n' "$bench_sps"
printf 'daemon overhead: %.2f ms per step\n' "$overhead_ms"
# The JSON line, by Python's json module (which escapes the model's name).
python3 -c 'import json, sys
model, steps, daemon, inprocess, overhead = sys.argv[1:]
print(json.dumps({"model": model, "steps": int(steps),
                  "daemon_steps_per_s": round(float(daemon), 2),
                  "inprocess_steps_per_s": round(float(inprocess), 2),
                  "overhead_ms_per_step": round(float(overhead), 3)}))' \
    "$model" "$steps" "$daemon_sps" "$bench_sps" "$overhead_ms"
