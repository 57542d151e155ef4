# SPDX-License-Identifier: MIT
"""check_onnx_save.py: trained weights out as ONNX, read by ONNX's own Python package.

Trains PyTorch's exported CNN (examples/onnx/cnn.onnx) in tide-bench on its
own example batches and writes it back (`tide-bench train --onnx ... --save
OUT.onnx`), then checks what a user relies on: onnx.load reads the file and
onnx.checker accepts it; the graph (nodes, inputs, outputs, opsets) is the
exported one, unchanged; every initializer keeps its name, type and shape
and holds new values; and a forward pass written here in NumPy from the ONNX
operator definitions, with those values, scores the examples as tide-bench
did (to one example: float sums in another order may flip a near tie).

Usage: check_onnx_save.py TIDE_BENCH EXAMPLES_DIR WORKDIR. Exits 77 (ctest's
skip) when numpy or onnx (python3-onnx) cannot be imported.
"""
import json
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
    import onnx.numpy_helper
except ImportError as e:
    print(f"{e.name} is not installed (python3-numpy, python3-onnx): skipped")
    sys.exit(77)


def conv2d(x, w, b, pads):
    x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    n, _, h, wd = x.shape
    k, _, kh, kw = w.shape
    out = np.zeros((n, k, h - kh + 1, wd - kw + 1))
    for i in range(kh):
        for j in range(kw):
            patch = x[:, :, i:i + h - kh + 1, j:j + wd - kw + 1]
            out += np.einsum("nchw,kc->nkhw", patch, w[:, :, i, j], dtype=np.float64)
    return out + b.reshape(1, -1, 1, 1)


def forward(model, images):
    """The five ops cnn.onnx uses, from their ONNX definitions (strides 1, group 1 convs)."""
    env = {t.name: onnx.numpy_helper.to_array(t).astype(np.float64)
           for t in model.graph.initializer}
    env[model.graph.input[0].name] = images.astype(np.float64)
    for node in model.graph.node:
        a = {at.name: onnx.helper.get_attribute_value(at) for at in node.attribute}
        x = [env[i] for i in node.input]
        if node.op_type == "Conv":
            assert a.get("strides", [1, 1]) == [1, 1] and a.get("group", 1) == 1
            y = conv2d(x[0], x[1], x[2], a.get("pads", [0] * 4))
        elif node.op_type == "Relu":
            y = np.maximum(x[0], 0)
        elif node.op_type == "MaxPool":
            k, s = a["kernel_shape"], a["strides"]
            n, c, h, w = x[0].shape
            oh, ow = (h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1
            y = np.full((n, c, oh, ow), -np.inf)
            for i in range(k[0]):
                for j in range(k[1]):
                    y = np.maximum(y, x[0][:, :, i:i + s[0] * oh:s[0], j:j + s[1] * ow:s[1]])
        elif node.op_type == "Flatten":
            y = x[0].reshape(x[0].shape[0], -1)
        elif node.op_type == "Gemm":
            assert a.get("transB", 0) == 1 and not a.get("transA", 0)
            y = x[0] @ x[1].T + x[2]
        else:
            sys.exit(f"{node.op_type}: not an op of cnn.onnx")
        env[node.output[0]] = y
    return env[model.graph.output[0].name]


def main():
    bench, examples, work = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(work, exist_ok=True)
    source = os.path.join(examples, "cnn.onnx")
    images = os.path.join(examples, "cnn_images.npy")
    labels = os.path.join(examples, "cnn_labels.npy")
    out = os.path.join(work, "cnn-trained.onnx")
    run = subprocess.run([bench, "train", "--onnx", source, "--data", images, "--labels", labels,
                          "--test-data", images, "--test-labels", labels, "--steps", "30",
                          "--save", out, "--json"], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"tide-bench failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
    result = json.loads(run.stdout.strip().splitlines()[-1])

    trained = onnx.load(out)
    onnx.checker.check_model(trained)
    original = onnx.load(source)
    for field in ("node", "input", "output"):
        got = [m.SerializeToString() for m in getattr(trained.graph, field)]
        want = [m.SerializeToString() for m in getattr(original.graph, field)]
        if got != want:
            sys.exit(f"graph.{field} changed")
    if trained.opset_import != original.opset_import or trained.ir_version != original.ir_version:
        sys.exit("the opsets or the IR version changed")
    before = {t.name: onnx.numpy_helper.to_array(t) for t in original.graph.initializer}
    after = {t.name: onnx.numpy_helper.to_array(t) for t in trained.graph.initializer}
    if list(before) != list(after):
        sys.exit(f"initializers {list(after)}, not {list(before)}")
    for name, value in after.items():
        if value.dtype != np.float32 or value.shape != before[name].shape:
            sys.exit(f"{name}: {value.dtype} {value.shape}, not float32 {before[name].shape}")
        if np.array_equal(value, before[name]):
            sys.exit(f"{name}: still the exported values after 30 steps")

    x = np.load(images)
    y = np.load(labels)
    correct = int((np.argmax(forward(trained, x), axis=1) == y).sum())
    tide_correct = round(result["test_accuracy"] * len(y))
    print(f"cnn.onnx after 30 steps: {len(after)} initializers written; NumPy forward pass on the "
          f"written file: {correct}/{len(y)} correct, tide-bench: {tide_correct}/{len(y)}")
    if abs(correct - tide_correct) > 1:
        sys.exit(f"the written file scores {correct}/{len(y)}, tide-bench {tide_correct}")


if __name__ == "__main__":
    main()
