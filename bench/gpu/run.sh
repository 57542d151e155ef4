#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# run.sh — on the GPU machine: tide's GPU checks and benchmarks, with logs and
# JSON under $OUT.
#
#   bench/gpu/run.sh [BUNDLE_DIR]
#
# TIDE_GPU_ONLY="NAME..." runs only the steps whose names start with one of
# the NAMEs (a short run when device time is scarce).
#
# Run from the repository root with the bundle bench/gpu/prepare.sh made on
# the build machine (default .device-bundle; BUNDLE_DIR.tar.xz is unpacked
# when only it is there). The GPU machine has no package registry: everything
# comes from the bundle, and the CUDA libraries from the machine (env.sh).
#
# Steps, each with a time limit, each logged to $OUT/<step>.log:
#   device          nvidia-smi -L and the GPU's name, driver, memory
#   backend_ops     test_backend_ops: every op, CPU vs CUDA, and determinism;
#                   on a GPU machine any skipped test is a failure
#   onnx_*          examples/onnx's MobileNet, U-Net, Swin, eval-mode CNN and RNN trained on
#                   CUDA: loss against the CPU backend's, and swapping under a budget
#                   against resident; ONNX's conformance cases on CUDA against the CPU's
#                   (TIDE_ONNX_TESTDATA, default libonnx-testdata's data/)
#   backend         test_backend and test_executor (the registry picks CUDA
#                   for "auto" now; their CPU tests still run)
#   swap_tests      test_swap with TIDE_TEST_BACKEND=cuda: swap transparency
#                   (bit-identical Variables) and high water = plan, on CUDA
#   bandwidth       tide-bandwidth --json: tide's copy path vs cudaMemcpyAsync
#   train_*         tide-bench train on CUDA (and a CPU baseline), --json
#   determinism     the same CUDA training twice: the losses must be equal
#   swap            CUDA training under a budget below the plan's peak (swaps):
#                   its loss must equal the resident run's (swap transparency)
#   seq_*           the Transformer's longest sequence and MoE's most experts in
#                   12 GiB (plans), the Transformer trained on CUDA (defaults, longest)
#   resnet50_*      ResNet-50 at 224x224, swap off and on, in fp32 and in tf32 (whose
#                   losses must be equal too)
#   torchvision_*   torchvision's models ($TIDE_TORCHVISION_ONNX: *.onnx with a dynamic
#                   batch) at batch 32 on CUDA, fp32, tf32 and half the peak, beside
#                   PyTorch's step for the same model (torch_torchvision.py)
#   depth           tide-bench depth at batch 16, 224x224, 12 GiB (Wei et al.),
#                   a training run at the swap-off depth, and PyTorch's figure for
#                   the same models (torch_resnet.py, when torch imports)
#
# $OUT gets device.txt, <step>.log, bandwidth.json, train.jsonl (one line per
# run, each with the device) and summary.json. Exit status: 0 when every
# check passed; 1 otherwise. Benchmark figures are recorded, never judged;
# compare them only with runs on the same kind of device (device.txt).
set -uo pipefail

bundle=${1:-.device-bundle}
out=${OUT:-$PWD/gpu-results}
mkdir -p "$out"
log() { printf '[run.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" | tee -a "$out/run.log"; }

# ---- the bundle -------------------------------------------------------------
if [[ ! -d $bundle && -f $bundle.tar.xz ]]; then
  log "unpacking $bundle.tar.xz"
  tar -xJf "$bundle.tar.xz" || { log "cannot unpack $bundle.tar.xz"; exit 1; }
fi
if [[ ! -f $bundle/env.sh ]]; then
  log "no bundle at $bundle (make one with bench/gpu/prepare.sh on the build machine)"
  exit 1
fi
# shellcheck disable=SC1091
. "$bundle/env.sh"
log "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"

# ---- the device -------------------------------------------------------------
{
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv
} > "$out/device.txt" 2>&1
device=$(nvidia-smi -L 2>/dev/null | head -n 1)
[[ -n $device ]] || device="unknown (nvidia-smi -L printed nothing)"
log "device: $device"
cat "$out/device.txt"

# ---- steps ------------------------------------------------------------------
declare -a step_names step_rcs step_secs
failed=0

# step NAME LIMIT_SECONDS KIND COMMAND...: runs COMMAND with a time limit, logs it; KIND is
# "check" (a failure fails the run) or "bench" (recorded only).
step() {
  local name=$1 limit=$2 kind=$3; shift 3
  if [[ -n ${TIDE_GPU_ONLY:-} ]]; then
    local want keep=0
    for want in $TIDE_GPU_ONLY; do [[ $name == $want* ]] && keep=1; done
    (( keep )) || return 1
  fi
  log "$name: $*"
  local t0=$SECONDS rc
  timeout --kill-after=10 "$limit" "$@" > "$out/$name.log" 2>&1
  rc=$?
  step_names+=("$name"); step_rcs+=("$rc"); step_secs+=("$((SECONDS - t0))")
  if (( rc != 0 )); then
    log "$name: exit status $rc (last lines follow)"
    tail -n 15 "$out/$name.log" | sed 's/^/    /'
    [[ $kind == check ]] && failed=1
  else
    log "$name: ok in $((SECONDS - t0)) s"
  fi
  return "$rc"
}

# The last line of a step's log, when it is a JSON object.
# The log's last JSON line: a command that fails may print its JSON line and then its error
# (tide-bench plan on a budget that nothing fits).
last_json() { grep -E '^\{.*\}$' "$out/$1.log" 2> /dev/null | tail -n 1 || true; }

# Whether a step ran (TIDE_GPU_ONLY may have left it out).
ran() { [[ -f $out/$1.log ]]; }

# Appends a train run's JSON line, with the device and the step's name, to train.jsonl
# (built by python3's json module: the device's name may hold any character).
record_train() {
  local json
  json=$(last_json "$1")
  [[ -n $json ]] || return 0
  python3 -c 'import json, sys
print(json.dumps({"step": sys.argv[1], "device": sys.argv[2], "result": json.loads(sys.argv[3])}))' \
    "$1" "$device" "$json" >> "$out/train.jsonl" 2>/dev/null ||
    log "$1: its last line is not JSON: $json"
}

# A field of a step's JSON line, by python3 (there with PyTorch); empty if absent.
json_field() {
  local json
  json=$(last_json "$1")
  [[ -n $json ]] || return 0
  python3 -c 'import json, sys
v = json.loads(sys.argv[1]).get(sys.argv[2])
print("" if v is None else v)' "$json" "$2" 2>/dev/null || true
}

: > "$out/train.jsonl"

# Correctness first.
step backend_ops 600 check test_backend_ops
if ran backend_ops && grep -q 'SKIPPED' "$out/backend_ops.log"; then
  log "backend_ops: tests were skipped on a GPU machine:"
  grep -E 'no CUDA device|SKIPPED' "$out/backend_ops.log" | head -n 5 | sed 's/^/    /'
  failed=1
fi
# The exported models of examples/onnx/ (grouped, depthwise, dilated and transposed
# convolutions, Resize, Pad, GatherElements through the import; Swin's shifted-window
# attention; an eval-mode export's frozen BatchNormalization; the GRU and LSTM the import
# unrolls) trained on CUDA: their loss after 20 steps within 1e-3 (relative) of the CPU
# backend's, and with every feature map swapped (--swap on) equal to the resident CUDA run's.
for model in mobilenet unet swin bn_eval rnn; do
  onnx_run=(tide-bench train --onnx "examples/onnx/$model.onnx" --dataset synthetic --batch 8
    --steps 20 --no-eval --json)
  step "onnx_${model}_cpu" 300 check "${onnx_run[@]}" --backend cpu && record_train "onnx_${model}_cpu"
  step "onnx_${model}_cuda" 300 check "${onnx_run[@]}" --backend cuda &&
    record_train "onnx_${model}_cuda"
  ran "onnx_${model}_cuda" || continue
  loss_cpu=$(json_field "onnx_${model}_cpu" loss)
  loss_cuda=$(json_field "onnx_${model}_cuda" loss)
  if ! python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2])
sys.exit(0 if abs(a - b) <= 1e-3 * abs(a) else 1)' "$loss_cpu" "$loss_cuda" 2> /dev/null; then
    log "onnx $model: CUDA loss '$loss_cuda' is not within 1e-3 of the CPU's '$loss_cpu'"
    failed=1
  else
    log "onnx $model: loss $loss_cuda on CUDA, $loss_cpu on the CPU"
  fi
  # --swap on: every feature map out to host memory and back (plan only reads --onnx in train).
  if step "onnx_${model}_swap" 300 check "${onnx_run[@]}" --backend cuda --swap on; then
    record_train "onnx_${model}_swap"
    loss_swap=$(json_field "onnx_${model}_swap" loss)
    if [[ $loss_swap != "$loss_cuda" ]]; then
      log "onnx $model swap: loss $loss_swap with every feature map swapped, $loss_cuda resident"
      failed=1
    else
      log "onnx $model swap: loss $loss_swap with every feature map swapped, as resident"
    fi
  fi
done

# ONNX's conformance cases (libonnx-testdata's node/ and pytorch-converted/, or
# $TIDE_ONNX_TESTDATA, which may hold a folder of examples/onnx/module_cases.py's cases
# beside them) on the CUDA backend, 16 at a time: no case may fail or crash, and the
# cases passed are compared with the CPU backend's on the same data (a case the CPU passes
# that CUDA refuses is an op the CUDA backend lacks: listed, and a failure).
onnx_data=${TIDE_ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
if [[ -d $onnx_data ]]; then
  step onnx_conformance_cpu 300 check tide-bench onnx-tests "$onnx_data" --jobs 16 --json
  step onnx_conformance_cuda 600 check tide-bench onnx-tests "$onnx_data" --backend cuda \
    --jobs 16 --json
  if ran onnx_conformance_cpu && ran onnx_conformance_cuda; then
    only_cpu=$(comm -23 <(grep '^pass ' "$out/onnx_conformance_cpu.log" | cut -d' ' -f2 | sort) \
      <(grep '^pass ' "$out/onnx_conformance_cuda.log" | cut -d' ' -f2 | sort))
    log "onnx conformance: $(json_field onnx_conformance_cuda passed) passed on CUDA," \
      "$(json_field onnx_conformance_cpu passed) on the CPU"
    if [[ -n $only_cpu ]]; then
      log "onnx conformance: passed on the CPU, not on CUDA:"
      printf '%s\n' "$only_cpu" | sed 's/^/    /' | tee -a "$out/run.log"
      failed=1
    fi
  fi
else
  log "onnx conformance: no test data at $onnx_data (set TIDE_ONNX_TESTDATA); not run"
fi

step backend 300 check test_backend
step executor 300 check test_executor
# tests/test_swap.c on CUDA: swap on/off, hand and planned plans, recompute, the
# sequence models: every run's Variables bit-identical to the all-resident one's.
step swap_tests 600 check env TIDE_TEST_BACKEND=cuda test_swap
if ran swap_tests && grep -q 'SKIPPED' "$out/swap_tests.log"; then
  log "swap_tests: skipped on a GPU machine:"
  grep -E 'no CUDA device|SKIPPED' "$out/swap_tests.log" | head -n 5 | sed 's/^/    /'
  failed=1
fi

# Copy bandwidth, tide's path against plain CUDA.
step bandwidth 600 bench tide-bandwidth --json
last_json bandwidth > "$out/bandwidth.json"

# Training throughput on CUDA, and a CPU baseline for the small models.
for model in mlp cnn; do
  step "train_${model}_cuda" 600 bench tide-bench train --model "$model" --dataset synthetic \
    --batch 64 --steps 200 --backend cuda --json && record_train "train_${model}_cuda"
  step "train_${model}_cpu" 600 bench tide-bench train --model "$model" --dataset synthetic \
    --batch 64 --steps 50 --backend cpu --json && record_train "train_${model}_cpu"
done
step train_resnet_cuda 600 bench tide-bench train --model resnet --dataset synthetic \
  --batch 64 --steps 50 --backend cuda --json && record_train train_resnet_cuda

# Determinism of a whole training run on the GPU: same loss, to the printed digit.
step determinism_a 600 check tide-bench train --model cnn --dataset synthetic --batch 32 \
  --steps 30 --backend cuda --json && record_train determinism_a
step determinism_b 600 check tide-bench train --model cnn --dataset synthetic --batch 32 \
  --steps 30 --backend cuda --json && record_train determinism_b
loss_a=$(json_field determinism_a loss)
loss_b=$(json_field determinism_b loss)
if ! ran determinism_a; then
  :
elif [[ -z $loss_a || $loss_a != "$loss_b" ]]; then
  log "determinism: the losses differ or are missing: '$loss_a' vs '$loss_b'"
  failed=1
else
  log "determinism: both runs end with loss $loss_a"
fi

# Swap transparency on the GPU: ResNet-38 at batch 32 (the CNN's smallest plan is its
# peak, so it cannot swap), resident and under a budget halfway between the smallest plan
# that fits and the resident peak: the losses must be equal.
swap_model=(--model resnet --depth 38 --dataset synthetic --batch 32 --steps 10 --backend cuda
  --no-eval --json)
step swap_resident 300 check tide-bench train "${swap_model[@]}" && record_train swap_resident
peak=$(json_field swap_resident predicted_peak_bytes)
loss_resident=$(json_field swap_resident loss)
min_budget=""
if [[ -n $peak ]] && (( peak > 0 )); then
  # Planned at 1 KiB, which nothing fits: min_budget_bytes is then the smallest budget that
  # does, exactly (a plan that fits reports only the smallest peak its search built, which at
  # the resident peak is about the peak itself: the 2026-11-26 run swapped no feature map).
  # The plan's exit status is 1 (it does not fit); its JSON line is what counts.
  step swap_plan 120 bench tide-bench plan --model resnet --depth 38 --batch 32 --budget 1K \
    --backend cuda --json
  min_budget=$(json_field swap_plan min_budget_bytes)
fi
if [[ -n $min_budget ]] && (( min_budget > 0 && min_budget < peak )); then
  budget=$(( (min_budget + peak) / 2 ))
  if step swap 300 check tide-bench train "${swap_model[@]}" --budget "$budget"; then
    record_train swap
    loss_swap=$(json_field swap loss)
    if [[ $loss_swap != "$loss_resident" ]]; then
      log "swap: loss $loss_swap under a budget of $budget bytes, $loss_resident resident"
      failed=1
    else
      log "swap: loss $loss_swap under a budget of $budget bytes (peak $peak), as resident"
    fi
  fi
elif ran swap_resident; then
  log "swap: no budget below the peak fits (peak '$peak', smallest '$min_budget')"
  failed=1
fi

# ResNet-50 at batch 16, 224x224: swap off against every feature map swapped (--swap on).
# 60 steps: step_ms_mean counts the first step (about twice the others: cuDNN's lazy
# loading), which made a 10-step mean 5-10 ms too high.
for policy in off on; do
  step "resnet50_swap_$policy" 180 bench tide-bench train --model resnet --depth 50 --width 64 \
    --image-size 224 --batch 16 --steps 60 --dataset synthetic --swap "$policy" --no-eval \
    --backend cuda --json && record_train "resnet50_swap_$policy"
done

# The same in math tf32 (TF32 tensor cores in the convolutions and products, still the same
# bits every run): swap off and on must end with the same loss, as in fp32.
for policy in off on; do
  step "resnet50_tf32_swap_$policy" 180 check tide-bench train --model resnet --depth 50 \
    --width 64 --image-size 224 --batch 16 --steps 60 --dataset synthetic --swap "$policy" \
    --no-eval --math tf32 --backend cuda --json && record_train "resnet50_tf32_swap_$policy"
done
if ran resnet50_tf32_swap_off; then
  loss_off=$(json_field resnet50_tf32_swap_off loss)
  loss_on=$(json_field resnet50_tf32_swap_on loss)
  if [[ -z $loss_off || $loss_off != "$loss_on" ]]; then
    log "tf32 swap: the losses differ or are missing: '$loss_off' (off) vs '$loss_on' (on)"
    failed=1
  else
    log "tf32 swap: swap off and on both end with loss $loss_off"
  fi
fi

# Depth (Wei et al.: 504 -> 1916 layers): the deepest ResNet at batch 16, 224x224, under
# 12 GiB with swap off and with the automatic plan (one confirming step at the latter), a
# training run at the swap-off depth for its images/s, and PyTorch on the same models.
if step depth 200 bench tide-bench depth --budget 12G --batch 16 --image-size 224 \
     --width 64 --backend cuda --json; then
  record_train depth
fi
depth_off=$(json_field depth depth_swap_off)
depth_auto=$(json_field depth depth_swap_auto)
if [[ -n $depth_off ]]; then
  step train_depth_off 120 bench tide-bench train --model resnet --depth "$depth_off" \
    --width 64 --image-size 224 --batch 16 --steps 5 --dataset synthetic --budget 12G \
    --swap off --no-eval --backend cuda --json && record_train train_depth_off
fi
if command -v python3 > /dev/null && python3 -c 'import torch' 2> /dev/null; then
  torch_n=(6)
  [[ -n $depth_off ]] && torch_n+=($(( (depth_off - 2) / 3 - 10 )))
  [[ -n $depth_auto ]] && torch_n+=($(( (depth_auto - 2) / 3 - 10 )))
  step torch_resnet 180 bench python3 "$(dirname "$0")/torch_resnet.py" --n "${torch_n[@]}" \
    --batch 16 --image-size 224 --steps 5 --budget-gib 12
  ran torch_resnet && { grep -E '^\{' "$out/torch_resnet.log" > "$out/torch.jsonl" || true; }
  # ResNet-50 under tide's rules: plain float32 and deterministic algorithms.
  step torch_resnet_fp32 120 bench python3 "$(dirname "$0")/torch_resnet.py" --n 6 \
    --batch 16 --image-size 224 --steps 30 --budget-gib 12 --math fp32 --deterministic
  ran torch_resnet_fp32 && { grep -E '^\{' "$out/torch_resnet_fp32.log" >> "$out/torch.jsonl" || true; }
  # ...and as tide's --math tf32: TF32 allowed, deterministic algorithms.
  step torch_resnet_tf32_det 120 bench python3 "$(dirname "$0")/torch_resnet.py" --n 6 \
    --batch 16 --image-size 224 --steps 30 --budget-gib 12 --math tf32 --deterministic
  ran torch_resnet_tf32_det &&
    { grep -E '^\{' "$out/torch_resnet_tf32_det.log" >> "$out/torch.jsonl" || true; }
fi

# torchvision's image models, exported with a dynamic batch on the build machine
# (examples/onnx/torchvision_cases.py DIR --dynamic-batch MODEL...) and carried here as
# $TIDE_TORCHVISION_ONNX: each trained at batch 32, 224x224, on CUDA in fp32 and tf32 and in
# fp32 under half its resident peak (swapping), and PyTorch's step for the same model under
# tide's rules (fp32, deterministic) and its default (tf32) by torch_torchvision.py, where
# the machine's PyTorch has torchvision.
tv_dir=${TIDE_TORCHVISION_ONNX:-}
if [[ -n $tv_dir && -d $tv_dir ]]; then
  for f in "$tv_dir"/*.onnx; do
    m=$(basename "$f" .onnx)
    tv_run=(tide-bench train --onnx "$f" --dataset synthetic --batch 32 --steps 30 --no-eval
      --backend cuda --json)
    for math in fp32 tf32; do
      step "torchvision_${m}_$math" 120 bench "${tv_run[@]}" --math "$math" &&
        record_train "torchvision_${m}_$math"
    done
    tv_peak=$(json_field "torchvision_${m}_fp32" predicted_peak_bytes)
    if [[ -n $tv_peak ]]; then
      step "torchvision_${m}_half" 120 bench "${tv_run[@]}" --budget "$((tv_peak / 2))" &&
        record_train "torchvision_${m}_half"
    fi
    for math in fp32 tf32; do
      det=(); [[ $math == fp32 ]] && det=(--deterministic)
      step "torchvision_${m}_torch_$math" 120 bench python3 "$(dirname "$0")/torch_torchvision.py" \
        "$m" --batch 32 --math "$math" "${det[@]}" &&
        { grep -E '^\{' "$out/torchvision_${m}_torch_$math.log" >> "$out/torch.jsonl" || true; }
    done
  done
elif [[ -n $tv_dir ]]; then
  log "torchvision: no directory $tv_dir; not run"
fi

# The sequence models (#12) under 12 GiB: the longest Transformer sequence and the most MoE
# experts per layer, swap off against the automatic plan (planning only), then the
# Transformer trained on the device at its defaults and at the longest automatic sequence.
step seq_max_transformer 300 bench tide-bench max --model transformer --vary seq --budget 12G \
  --backend cuda --json
step seq_max_moe 300 bench tide-bench max --model moe --vary experts --budget 12G \
  --backend cuda --json
step seq_train_transformer 300 bench tide-bench train --model transformer --steps 50 \
  --backend cuda --json && record_train seq_train_transformer
seq_auto=$(json_field seq_max_transformer value_auto)
if [[ -n $seq_auto ]]; then
  # One step: at ~56k bytes a window the attention is O(seq^2) (about 3e14 FLOPs a step with
  # its recomputation) and the plan moves ~60 GB through host memory; two steps ran past 160 s
  # on an H200 (2026-11-26) and took the rest of the run with them.
  step seq_longest_transformer 240 bench tide-bench train --model transformer \
    --seq-len "$seq_auto" --steps 1 --budget 12G --backend cuda --json &&
    record_train seq_longest_transformer
fi

# ---- summary ----------------------------------------------------------------
# By python3's json module, as train.jsonl: NAME RC SECONDS per step after the device.
summary_args=()
for i in "${!step_names[@]}"; do
  summary_args+=("${step_names[$i]}" "${step_rcs[$i]}" "${step_secs[$i]}")
done
python3 -c 'import json, sys
device, failed, rest = sys.argv[1], sys.argv[2] != "0", sys.argv[3:]
steps = [{"name": rest[i], "rc": int(rest[i + 1]), "seconds": int(rest[i + 2])}
         for i in range(0, len(rest), 3)]
print(json.dumps({"device": device, "failed": failed, "steps": steps}))' \
  "$device" "$failed" "${summary_args[@]}" > "$out/summary.json"
log "summary: $(cat "$out/summary.json")"
exit "$failed"
