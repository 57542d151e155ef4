#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# scripts/screenshots.sh: makes docs/trace.png and docs/dashboard.png from a
# real tided, so that they can be made again when the pages change:
#
#   1. starts build/bin/tided (CPU backend, 1 GiB device) in a fresh
#      temporary directory, with metrics-listen on a free loopback port and a
#      token file holding one monitor token;
#   2. trains three jobs through tidectl on synthetic data: ResNet-38 with
#      batch 16 in a 64 MiB budget (it swaps), a CNN in 16 MiB and an MLP;
#   3. once ResNet-38 has trained a few steps, records one step of it with
#      `tidectl trace JOB --steps 1`;
#   4. lets the jobs train on a while, so that the loss curves have a shape,
#      then has headless chromium load tided's trace viewer
#      (/trace.html?job=JOB#token=...) and its dashboard (/#token=...) and
#      save each as a PNG;
#   5. stops the trainers (Ctrl-C) and tided (SIGTERM) and removes the
#      directory.
#
# Usage: scripts/screenshots.sh   (after cmake --build build)
#
# Environment:
#   TIDE_SHOTS_BUILD   build directory (default: build)
#   TIDE_SHOTS_OUT     where the PNGs go (default: docs)
#   TIDE_SHOTS_STEPS   ResNet-38's steps before the screenshots (default 150)
#   TIDE_SHOTS_KEEP    keep the temporary directory (tided.log, trace.json)
set -euo pipefail
cd "$(dirname "$0")/.."

build=${TIDE_SHOTS_BUILD:-build}
out=${TIDE_SHOTS_OUT:-docs}
steps_before_shots=${TIDE_SHOTS_STEPS:-150}
for tool in "$build/bin/tided" "$build/bin/tidectl"; do
    [ -x "$tool" ] || { echo "screenshots: $tool is not built (cmake --build $build)" >&2; exit 1; }
done
chromium=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$chromium" ] || { echo "screenshots: no chromium (apt install chromium)" >&2; exit 1; }
mkdir -p "$out"

work=$(mktemp -d /tmp/tide-screenshots.XXXXXX)
socket=$work/tided.sock
tidectl=("$build/bin/tidectl" --socket "$socket")
daemon_pid=""
trainers=()

cleanup() {
    local status=$?
    for pid in "${trainers[@]}"; do
        kill -INT "$pid" 2>/dev/null || true
    done
    for pid in "${trainers[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
        kill -TERM "$daemon_pid" 2>/dev/null || true
        wait "$daemon_pid" 2>/dev/null || true
    fi
    if [ -n "${TIDE_SHOTS_KEEP:-}" ]; then
        echo "screenshots: kept $work" >&2
    else
        rm -rf "$work"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A free port on loopback, and a monitor token (tided wants 16 characters or more).
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
printf '%s monitor\n' "$token" >"$work/tokens"
chmod 600 "$work/tokens"

"$build/bin/tided" --socket "$socket" --state-dir "$work/state" --backend cpu \
    --device-memory 1G --metrics-listen "127.0.0.1:$port" --tokens "$work/tokens" \
    --log-level info >"$work/tided.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 1 300); do
    "${tidectl[@]}" status >/dev/null 2>&1 && break
    if ! kill -0 "$daemon_pid" 2>/dev/null; then
        echo "screenshots: tided exited at start-up; its log:" >&2
        cat "$work/tided.log" >&2
        exit 1
    fi
    sleep 0.2
done

train() { # NAME LOG OPTIONS...
    local name=$1 log=$2
    shift 2
    "${tidectl[@]}" train --dataset synthetic --no-eval --steps 1000000 --name "$name" "$@" \
        >"$work/$log" 2>&1 &
    trainers+=($!)
}
resnet_name="resnet-38, batch 16, in 64 MiB"
train "$resnet_name" resnet.log --model resnet --depth 38 --batch 16 --budget 64M
train "cnn, batch 64, in 16 MiB" cnn.log --model cnn --batch 64 --budget 16M
train "mlp, batch 64, in 32 MiB" mlp.log --model mlp --batch 64 --budget 32M --lr 0.05

# The id and steps of the job called NAME, from `tidectl --json jobs`.
job_field() { # NAME FIELD
    "${tidectl[@]}" --json jobs | python3 -c '
import json, sys
for line in sys.stdin:
    job = json.loads(line)
    if job.get("name") == sys.argv[1]:
        print(job[sys.argv[2]])
        break' "$1" "$2"
}
wait_for_steps() { # NAME STEPS
    for _ in $(seq 1 600); do
        local steps
        steps=$(job_field "$1" steps || true)
        if [ -n "$steps" ] && [ "$steps" -ge "$2" ]; then
            return 0
        fi
        sleep 0.5
    done
    echo "screenshots: job \"$1\" did not reach step $2; tided's log:" >&2
    tail -n 40 "$work/tided.log" >&2
    exit 1
}

wait_for_steps "$resnet_name" 5
job=$(job_field "$resnet_name" id)
"${tidectl[@]}" trace "$job" --steps 1 -o "$work/trace.json"
wait_for_steps "$resnet_name" "$steps_before_shots"

# --no-sandbox: chromium refuses to run as root without it (as in CI containers).
shoot() { # PNG WIDTH HEIGHT PATH
    "$chromium" --headless=new --no-sandbox --disable-gpu --no-first-run \
        --user-data-dir="$work/chromium" --hide-scrollbars --force-device-scale-factor=1 \
        --window-size="$2,$3" --virtual-time-budget=5000 --screenshot="$1" \
        "http://127.0.0.1:$port$4#token=$token" 2>>"$work/chromium.log"
    echo "screenshots: wrote $1 ($(stat -c %s "$1") bytes)" >&2
}
shoot "$out/trace.png" 1400 800 "/trace.html?job=$job"
shoot "$out/dashboard.png" 1280 800 "/"
