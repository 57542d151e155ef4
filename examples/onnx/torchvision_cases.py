# SPDX-License-Identifier: MIT
"""torchvision_cases.py: torchvision's image models as ONNX conformance cases.

Builds each model torchvision 0.14 ships (random weights, fixed seed, 10
classes), exports it as a user exports for training in tide (opset 14,
TrainingMode.TRAINING, no constant folding, a static batch), runs PyTorch's
forward pass on one random batch in training mode (BatchNorm on the batch's
statistics, as tide computes it) and writes the pair as a case of ONNX's
conformance layout:

    OUT/<model>/model.onnx
    OUT/<model>/test_data_set_0/input_0.pb, output_0.pb

so that `tide-bench onnx-tests OUT` imports each file and compares tide's
forward pass with PyTorch's (rtol 1e-3, atol 1e-5). Dropout and stochastic
depth are set to 0 (PyTorch's masks are random, and it cannot export
Bernoulli); nothing else is changed.

With --dynamic-batch, writes only OUT/<model>.onnx, exported the same way
but with a dynamic batch dimension and no expected output: models to train
at any --batch (`tide-bench train --onnx OUT/mobilenet_v2.onnx --batch 32`),
as bench/gpu/run.sh's torchvision steps do beside PyTorch.

Usage: /usr/bin/python3 torchvision_cases.py OUT [--batch B] [--dynamic-batch] [MODEL ...]
(default: every model below). Needs python3-torch and python3-torchvision
(Debian's 1.13 and 0.14), which tide itself does not.
"""
import argparse
import os
import warnings

import torch
import torchvision.models as models
import torchvision.ops as ops
from onnx import numpy_helper

MODELS = [
    "alexnet", "convnext_tiny", "densenet121", "efficientnet_b0", "googlenet",
    "inception_v3", "mnasnet0_5", "mobilenet_v2", "mobilenet_v3_small",
    "regnet_y_400mf", "resnet18", "resnext50_32x4d", "shufflenet_v2_x0_5",
    "squeezenet1_1", "swin_t", "vgg11", "vit_b_16",
]


def build(name):
    kwargs = {"num_classes": 10}
    if name in ("googlenet", "inception_v3"):
        kwargs.update(aux_logits=False, init_weights=True)
    model = getattr(models, name)(**kwargs)
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
        if isinstance(m, ops.StochasticDepth):
            m.p = 0.0
    return model


def export(model, x, path, dynamic_batch):
    axes = {"images": {0: "batch"}, "logits": {0: "batch"}} if dynamic_batch else None
    torch.onnx.export(model, (x,), path, input_names=["images"], output_names=["logits"],
                      opset_version=14, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, dynamic_axes=axes)


def write_case(out, name, batch, dynamic_batch):
    torch.manual_seed(0)
    model = build(name)
    size = 299 if name == "inception_v3" else 224
    x = torch.randn(batch, 3, size, size)
    model.train()
    if dynamic_batch:
        os.makedirs(out, exist_ok=True)
        export(model, x, os.path.join(out, name + ".onnx"), True)
        return os.path.join(out, name + ".onnx")
    case = os.path.join(out, name)
    os.makedirs(os.path.join(case, "test_data_set_0"), exist_ok=True)
    export(model, x, os.path.join(case, "model.onnx"), False)
    with torch.no_grad():
        y = model(x)
    for path, array, tensor_name in (("input_0.pb", x, "images"), ("output_0.pb", y, "logits")):
        with open(os.path.join(case, "test_data_set_0", path), "wb") as f:
            f.write(numpy_helper.from_array(array.numpy(), tensor_name).SerializeToString())
    return case


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--dynamic-batch", action="store_true",
                        help="write only OUT/<model>.onnx, with a dynamic batch")
    parser.add_argument("models", nargs="*", default=MODELS)
    args = parser.parse_intermixed_args()
    warnings.filterwarnings("ignore")
    for name in args.models:
        print(f"wrote {write_case(args.out, name, args.batch, args.dynamic_batch)}", flush=True)


if __name__ == "__main__":
    main()
