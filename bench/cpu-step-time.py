#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""cpu-step-time.py: step time of the MLP, the CNN and ResNet-38 on the CPU
backend at 1 and 2 threads, for one or more tide-bench binaries side by side
(a build before a change and one after it).

Each cell holds figures over ROUNDS runs of tide-bench train (synthetic data,
--no-eval), and the runs are interleaved: round after round, every model, thread
count and binary once, so that the load of a shared machine falls on every
column alike. A cell gives the wall time per step (tide-bench's step_ms_mean)
as the median and the minimum over the runs: other processes only ever add
time, so on a shared machine the minimum is the closer estimate of the cost,
the median of what a user sees. Then, in brackets, the median CPU time per step
of the whole process (train_cpu_seconds / steps), which a busy machine does not
inflate; a binary without that field prints "-". The ratio column, with two
binaries, compares the minima.

    bench/cpu-step-time.py [--rounds R] [--threads 1,2] [--models mlp,cnn,resnet]
                           [--json] LABEL=PATH [LABEL=PATH ...]

e.g. bench/cpu-step-time.py before=/tmp/old/tide-bench after=build/bin/tide-bench

OPENBLAS_NUM_THREADS is set to the thread count of each run: tide pins OpenBLAS
to one thread and sizes its pool from --threads, but a tide-bench built before
--threads reached the kernels sized its pool from OpenBLAS's start-up count, so
this makes such a binary run at the stated count too. With --json the last line
is one JSON object holding every median.

There is no PyTorch column here: bench/torch-compare builds the same models in
PyTorch from tide's weights and batches and prints tide / PyTorch step time.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

# The models of issue 16's table: (name, tide-bench arguments, steps per run).
MODELS = {
    "mlp": (["--model", "mlp", "--batch", "64"], 100),
    "cnn": (["--model", "cnn", "--batch", "64"], 40),
    "resnet": (["--model", "resnet", "--depth", "38", "--width", "16", "--batch", "16"], 10),
}
TITLES = {"mlp": "MLP, batch 64", "cnn": "CNN, batch 64", "resnet": "ResNet-38 w16, batch 16"}


def run_tide(path, model, threads, no_eval):
    """One tide-bench train run; returns (ms per step, CPU ms per step or None)."""
    args, steps = MODELS[model]
    cmd = [path, "train", *args, "--dataset", "synthetic", "--steps", str(steps),
           "--threads", str(threads), "--json"]
    if no_eval:
        cmd.append("--no-eval")
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads))
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    line = json.loads(out.strip().splitlines()[-1])
    cpu = line.get("train_cpu_seconds")
    return line["step_ms_mean"], (cpu * 1e3 / line["steps"] if cpu is not None else None)


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--models", default="mlp,cnn,resnet")
    p.add_argument("--json", action="store_true")
    p.add_argument("binaries", nargs="+", metavar="LABEL=PATH")
    o = p.parse_args()
    threads = [int(t) for t in o.threads.split(",")]
    models = o.models.split(",")
    for m in models:
        if m not in MODELS:
            p.error(f"unknown model {m!r}; want {', '.join(MODELS)}")
    binaries = []
    for spec in o.binaries:
        label, sep, path = spec.partition("=")
        if not sep or not os.access(path, os.X_OK):
            p.error(f"{spec!r}: want LABEL=PATH to a tide-bench")
        usage = subprocess.run([path, "--help"], capture_output=True, text=True).stdout
        binaries.append((label, path, "--no-eval" in usage))

    wall = {}
    cpu = {}
    for r in range(o.rounds):
        for m in models:
            for t in threads:
                for label, path, no_eval in binaries:
                    ms, cpu_ms = run_tide(path, m, t, no_eval)
                    wall.setdefault((m, t, label), []).append(ms)
                    cpu.setdefault((m, t, label), []).append(cpu_ms)
                    print(f"round {r + 1}/{o.rounds}: {m} at {t} thread(s), {label}: "
                          f"{ms:.2f} ms/step", file=sys.stderr)

    fmt = lambda v: f"{v:.2f}" if v is not None else "-"
    print(f"{o.rounds} interleaved runs; ms per step: wall median / minimum (CPU time of the "
          "process, median)")
    header = ["model", "threads"] + [label for label, _, _ in binaries]
    if len(binaries) == 2:
        header.append(f"{binaries[1][0]}/{binaries[0][0]}")
    print(" | ".join(header))
    result = []
    for m in models:
        for t in threads:
            cells = [TITLES[m], str(t)]
            row = {"model": m, "threads": t}
            for label, _, _ in binaries:
                w, c = median(wall[(m, t, label)]), median(cpu[(m, t, label)])
                least = min(wall[(m, t, label)])
                cells.append(f"{fmt(w)} / {fmt(least)} ({fmt(c)})")
                row[label] = {"step_ms_median": w, "step_ms_min": least, "cpu_ms_per_step": c}
            if len(binaries) == 2:
                a = min(wall[(m, t, binaries[0][0])])
                b = min(wall[(m, t, binaries[1][0])])
                cells.append(f"{b / a:.2f}")
            print(" | ".join(cells))
            result.append(row)
    if o.json:
        print(json.dumps({"rounds": o.rounds, "rows": result}))


if __name__ == "__main__":
    main()
