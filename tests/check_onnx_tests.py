#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_onnx_tests.py TIDE_BENCH DATA_DIR MIN_PASSED [ARG...]: runs tide-bench onnx-tests
DATA_DIR --json ARG... and fails on any failed or crashed case, on fewer than MIN_PASSED passes
(issue #13: 150), or on a case printed other than once. Then the options' errors: a backend
that cannot run here and a --jobs of 0, each refused by name."""
import json
import subprocess
import sys

bench, data, min_passed, extra = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
run = subprocess.run([bench, "onnx-tests", data, "--json"] + extra, capture_output=True, text=True)
lines = run.stdout.strip().splitlines()
bad = [l for l in lines if l.startswith("fail ") or l.startswith("crashed ")]
for l in bad:
    print(l)
if not lines:
    sys.exit("no output; stderr: " + run.stderr)
counts = json.loads(lines[-1])
print(lines[-2] if len(lines) > 1 else "", counts)
for key in ("passed", "failed", "unsupported", "crashed", "total"):
    if key not in counts:
        sys.exit(f"the JSON line lacks {key}")
if counts["passed"] + counts["failed"] + counts["unsupported"] + counts["crashed"] != counts["total"]:
    sys.exit("the counts do not add up to total")
if counts["failed"] or counts["crashed"] or bad:
    sys.exit(f"{counts['failed']} failed, {counts['crashed']} crashed")
if counts["passed"] < min_passed:
    sys.exit(f"{counts['passed']} passed, fewer than {min_passed}")
if run.returncode != 0:
    sys.exit(f"tide-bench exited {run.returncode}")
# With --jobs, lines come in the order cases end: each case still exactly once.
cases = [l.split(" ")[1] for l in lines if l.split(" ")[0] in ("pass", "fail", "unsupported", "crashed")]
if len(cases) != counts["total"] or len(set(cases)) != len(cases):
    sys.exit(f"{len(cases)} case lines ({len(set(cases))} distinct) for {counts['total']} cases")
if counts.get("backend") != "cpu":
    sys.exit(f"the JSON line names backend {counts.get('backend')!r}, not cpu")

for args, rc, says in (
    (["--backend", "no-such-backend"], 1, "backend 'no-such-backend' cannot run here"),
    (["--jobs", "0"], 2, "--jobs wants a count from 1 to 256, not '0'"),
):
    bad_run = subprocess.run([bench, "onnx-tests", data] + args, capture_output=True, text=True)
    if bad_run.returncode != rc or says not in bad_run.stderr or bad_run.stdout:
        sys.exit(f"onnx-tests {' '.join(args)}: exit {bad_run.returncode}, stderr "
                 f"{bad_run.stderr!r}, stdout {bad_run.stdout[:200]!r}; want exit {rc} saying {says!r}")
