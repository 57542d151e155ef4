#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_onnx_tests.py TIDE_BENCH DATA_DIR MIN_PASSED: runs tide-bench onnx-tests DATA_DIR --json
and fails on any failed or crashed case, or on fewer than MIN_PASSED passes (issue #13: 150)."""
import json
import subprocess
import sys

bench, data, min_passed = sys.argv[1], sys.argv[2], int(sys.argv[3])
run = subprocess.run([bench, "onnx-tests", data, "--json"], capture_output=True, text=True)
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
