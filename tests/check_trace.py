# SPDX-License-Identifier: MIT
"""check_trace.py: the "Seeing inside" acceptance for step traces, on a small job.

Runs `tide-bench train --trace FILE` on a swapping CNN (synthetic data, so no
dataset package is needed) and checks the file with Python's json module, as
a person opening it in ui.perfetto.dev would rely on: a Chrome Trace Event
object with "traceEvents" and "displayTimeUnit"; tracks named compute, h2d
and d2h, each with slices; SwapIn slices; no negative duration; every flow
start ("s") paired with one finish ("f"); and a "device" counter series
whose maximum equals the high water tide-bench reports.

Usage: check_trace.py TIDE_BENCH OUTPUT.json [tide-bench train options...]
(ctest passes the options; without them, the CNN below).
"""
import collections
import json
import re
import subprocess
import sys

DEFAULT_ARGS = ["--model", "cnn", "--dataset", "synthetic", "--batch", "16", "--steps", "3",
                "--budget", "6M", "--partition-size", "7", "--swap", "on"]


def main():
    bench, path = sys.argv[1], sys.argv[2]
    args = sys.argv[3:] or DEFAULT_ARGS
    run = subprocess.run([bench, "train", *args, "--trace", path], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"tide-bench failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
    match = re.search(r"device high-water (\d+) bytes", run.stdout)
    if not match:
        sys.exit(f"tide-bench did not report its high water:\n{run.stdout}")
    high_water = int(match.group(1))
    steps = int(args[args.index("--steps") + 1])

    with open(path) as f:
        doc = json.load(f)
    failures = []
    checks = 0

    def expect(ok, what):
        nonlocal checks
        checks += 1
        if not ok:
            failures.append(what)

    expect(doc.get("displayTimeUnit") == "ms", "displayTimeUnit is not \"ms\"")
    events = doc["traceEvents"]
    tracks = {e["tid"]: e["args"]["name"] for e in events
              if e["ph"] == "M" and e["name"] == "thread_name"}
    expect(sorted(tracks.values()) == ["compute", "d2h", "h2d"], f"tracks are {tracks}")
    slices = [e for e in events if e["ph"] == "X"]
    per_track = collections.Counter(tracks.get(e["tid"]) for e in slices
                                    if e["cat"] in ("kernel", "copy"))
    for name in ("compute", "h2d", "d2h"):
        expect(per_track[name] > 0, f"no slices on the {name} track")
    swap_ins = [e for e in slices if e.get("args", {}).get("op") == "SwapIn"]
    expect(len(swap_ins) > 0, "no SwapIn slices")
    expect(all(e["dur"] >= 0 for e in slices), "a slice has a negative duration")
    step_slices = [e for e in slices if e["cat"] == "step" and tracks.get(e["tid"]) == "compute"]
    expect(len(step_slices) == steps, f"{len(step_slices)} step slices for {steps} steps")
    starts = collections.Counter(e["id"] for e in events if e["ph"] == "s")
    finishes = collections.Counter(e["id"] for e in events if e["ph"] == "f")
    expect(starts == finishes and all(n == 1 for n in starts.values()), "unpaired flows")
    expect(len(starts) >= len(swap_ins), "fewer flows than SwapIn slices")
    device = [e for e in events if e["ph"] == "C" and e["name"] == "device"]
    peak = max(e["args"]["bytes in use"] for e in device) if device else None
    expect(peak == high_water, f"device counter peaks at {peak}, tide-bench says {high_water}")

    print(f"{len(events)} events, slices per track {dict(per_track)}, {len(swap_ins)} SwapIn, "
          f"{len(starts)} flows, device peak {peak} = high water {high_water}")
    for f in failures:
        print("FAILED:", f)
    print(f"{checks - len(failures)} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
