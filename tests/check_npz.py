# SPDX-License-Identifier: MIT
"""check_npz.py: data in from NumPy files and weights out as NumPy, read by NumPy itself.

Writes a small classification problem with numpy.save (float32 examples
[N, 4, 5], int64 labels for training, int32 for the test split), trains
tide-bench's MLP on it in-process (`tide-bench train --data ... --save-npz`),
then opens the .npz with numpy.load and checks, as a user would rely on:
every Variable of the MLP is there by name ("fc1/w", ...), float32, C order,
with the graph's shapes; the values add up to the parameter count tide-bench
reports; and a forward pass written here in NumPy with those weights on the
test split reaches the test accuracy tide-bench measured (to one example:
float sums in another order may flip a near tie).

Usage: check_npz.py TIDE_BENCH WORKDIR. Exits 77 (ctest's skip) when numpy
cannot be imported.
"""
import json
import os
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("numpy is not installed (python3-numpy): skipped")
    sys.exit(77)


def main():
    bench, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(7)
    w_true = rng.normal(size=(20, 5)).astype(np.float32)
    x = rng.normal(size=(640, 4, 5)).astype(np.float32)
    y = np.argmax(x.reshape(640, 20) @ w_true, axis=1)
    paths = {name: os.path.join(work, name + ".npy") for name in ("x", "y", "xt", "yt")}
    np.save(paths["x"], x[:512])
    np.save(paths["y"], y[:512].astype(np.int64))
    np.save(paths["xt"], x[512:])
    np.save(paths["yt"], y[512:].astype(np.int32))
    npz = os.path.join(work, "weights.npz")
    run = subprocess.run([bench, "train", "--model", "mlp", "--data", paths["x"], "--labels",
                          paths["y"], "--test-data", paths["xt"], "--test-labels", paths["yt"],
                          "--batch", "32", "--epochs", "3", "--seed", "3", "--save-npz", npz,
                          "--json"], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"tide-bench failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
    result = json.loads(run.stdout.strip().splitlines()[-1])

    weights = np.load(npz)
    want = {"fc1/w": (20, 256), "fc1/b": (256,), "fc2/w": (256, 128), "fc2/b": (128,),
            "fc_out/w": (128, 5), "fc_out/b": (5,)}
    if sorted(weights.files) != sorted(want):
        sys.exit(f"arrays {sorted(weights.files)}, want {sorted(want)}")
    for name, shape in want.items():
        a = weights[name]
        if a.dtype != np.float32 or a.shape != shape or not a.flags["C_CONTIGUOUS"]:
            sys.exit(f"{name}: {a.dtype} {a.shape}, want float32 {shape} in C order")
        if not np.all(np.isfinite(a)):
            sys.exit(f"{name} has values that are not finite")
    total = sum(weights[name].size for name in want)
    if total != result["parameters"]:
        sys.exit(f"{total} values in the .npz, tide-bench reports {result['parameters']} parameters")
    if np.all(weights["fc1/b"] == 0):
        sys.exit("fc1/b is still all zeros: these are not the trained weights")

    h = x[512:].reshape(128, 20)
    h = np.maximum(h @ weights["fc1/w"] + weights["fc1/b"], 0)
    h = np.maximum(h @ weights["fc2/w"] + weights["fc2/b"], 0)
    logits = h @ weights["fc_out/w"] + weights["fc_out/b"]
    correct = int(np.sum(np.argmax(logits, axis=1) == y[512:]))
    reported = round(result["test_accuracy"] * 128)
    if abs(correct - reported) > 1:
        sys.exit(f"NumPy's forward pass with the saved weights gets {correct}/128 right, "
                 f"tide-bench reported {reported}/128")
    if correct < 0.7 * 128:
        sys.exit(f"only {correct}/128 right after 3 epochs: did training use the files?")
    print(f"ok: {len(want)} arrays, {total} values; test accuracy {correct}/128 in NumPy, "
          f"{reported}/128 in tide-bench")


if __name__ == "__main__":
    main()
