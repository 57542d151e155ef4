#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# scripts/demo.sh: tide's main job, end to end, in one command on a fresh
# Debian 12 machine:
#
#   1. installs the dependencies (deploy/install-deps.sh) and builds tided and
#      tidectl (CMake + Ninja, warnings as errors);
#   2. starts build/bin/tided on a socket and state directory in a fresh
#      temporary directory — the CUDA backend when this build has it and a GPU
#      is present, else the CPU backend, which emulates a device;
#   3. asks the daemon for the CNN's memory plan with everything resident
#      (`tidectl plan --swap off`), then for a budget of a third of that peak;
#      when that is below what the largest node needs by itself, it takes the
#      smallest budget the plan reports instead — either way well below the
#      resident peak, so the plan fits only by swapping feature maps out to
#      host memory and back and by keeping variables in host memory;
#   4. trains the CNN on Fashion-MNIST under that budget through tidectl,
#      which draws a progress bar (loss, batch accuracy, device memory high
#      water, swap traffic per step, steps/s, ETA) and ends with the test
#      accuracy;
#   5. stops the daemon with SIGTERM (it checkpoints the job and exits 0) and
#      removes the temporary directory.
#
# Environment:
#   TIDE_DEMO_BUILD    build directory (default: build)
#   TIDE_DEMO_EPOCHS   epochs to train (default 1)
#   TIDE_DEMO_STEPS    train this many steps instead (a quick look)
#   TIDE_DEMO_BATCH    batch size (default 64)
#   TIDE_DEMO_PARTITION_SIZE  nodes per partition (default 0: the planner chooses)
#   TIDE_DEMO_KEEP     keep the temporary directory (daemon log, checkpoint)
set -euo pipefail
cd "$(dirname "$0")/.."

build=${TIDE_DEMO_BUILD:-build}
epochs=${TIDE_DEMO_EPOCHS:-1}
steps=${TIDE_DEMO_STEPS:-}
batch=${TIDE_DEMO_BATCH:-64}

if [ -t 2 ]; then
    say() { printf '\n\033[1m== %s\033[0m\n' "$*" >&2; }
else
    say() { printf '\n== %s\n' "$*" >&2; }
fi
# The value of a numeric or boolean field in a one-line JSON object.
json_field() { sed -n "s/.*\"$1\":\([0-9a-z.]*\).*/\1/p" | head -n 1; }

say "installing dependencies and building"
./deploy/install-deps.sh
cmake -S . -B "$build" -G Ninja -DTIDE_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" --target tided tidectl

work=$(mktemp -d /tmp/tide-demo.XXXXXX)
socket=$work/tided.sock
tidectl=("$build/bin/tidectl" --socket "$socket")
daemon_pid=""

cleanup() {
    local status=$?
    if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
        kill -TERM "$daemon_pid" 2>/dev/null || true
        wait "$daemon_pid" 2>/dev/null || true
    fi
    if [ -n "${TIDE_DEMO_KEEP:-}" ]; then
        echo "demo: kept $work (tided.log, state/)" >&2
    else
        rm -rf "$work"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "starting tided on $socket"
"$build/bin/tided" --socket "$socket" --state-dir "$work/state" --backend auto \
    --device-memory 2G --log-level info >"$work/tided.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 1 300); do
    if "${tidectl[@]}" status >/dev/null 2>&1; then
        break
    fi
    if ! kill -0 "$daemon_pid" 2>/dev/null; then
        echo "demo: tided exited at start-up; its log:" >&2
        cat "$work/tided.log" >&2
        exit 1
    fi
    sleep 0.2
done
"${tidectl[@]}" status

model=(--model cnn --batch "$batch")
say "the CNN's memory plan with every tensor resident (swap off)"
"${tidectl[@]}" plan "${model[@]}" --swap off --vars-home device
peak=$("${tidectl[@]}" --json plan "${model[@]}" --swap off --vars-home device |
    json_field predicted_peak_bytes)
budget=$((peak / 3))

# The planner searches the partition size with the swap threshold and the
# prefetch distance; TIDE_DEMO_PARTITION_SIZE forces one.
swapped=(--swap auto --partition-size "${TIDE_DEMO_PARTITION_SIZE:-0}")
say "a budget of a third of that peak ($budget bytes)"
plan=$("${tidectl[@]}" --json plan "${model[@]}" "${swapped[@]}" --budget "$budget")
if [ "$(json_field fits <<<"$plan")" != "true" ]; then
    # No plan can go below the working set of the largest node (for this CNN,
    # the gradient of conv1's Relu: its input, its gradient and its output).
    "${tidectl[@]}" plan "${model[@]}" "${swapped[@]}" --budget "$budget" | grep -E 'peak|why'
    budget=$(json_field min_budget_bytes <<<"$plan")
    say "that is below the largest node's working set: the smallest budget that fits is" \
        "$budget bytes ($((100 * budget / peak))% of the resident peak)"
fi
"${tidectl[@]}" plan "${model[@]}" "${swapped[@]}" --budget "$budget" --partitions

if [ -n "$steps" ]; then
    length=(--steps "$steps")
else
    length=(--epochs "$epochs")
fi
say "training the CNN on Fashion-MNIST within $budget bytes of device memory"
"${tidectl[@]}" train "${model[@]}" "${swapped[@]}" --dataset fashion-mnist "${length[@]}" \
    --budget "$budget" --optimizer momentum --lr 0.02 --name demo-cnn
"${tidectl[@]}" jobs

say "stopping tided (SIGTERM: checkpoint, then exit 0)"
kill -TERM "$daemon_pid"
status=0
wait "$daemon_pid" || status=$?
daemon_pid=""
echo "tided exited with status $status" >&2
ls "$work"/state/jobs/*/ 2>/dev/null | sed 's/^/  /' >&2 || true
exit "$status"
