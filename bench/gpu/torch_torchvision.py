#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""torch_torchvision.py: PyTorch's training step for torchvision's image models, beside tide's.

Trains torchvision's MODEL (random weights, 10 classes, dropout 0 as in
examples/onnx/torchvision_cases.py, BatchNorm in training mode) with plain
SGD on random 224x224 images at --batch, on the GPU, and prints one JSON
line: the median and mean step over the timed steps (after 3 warm-up steps,
each step ended by torch.cuda.synchronize), and torch.cuda.max_memory_allocated.

--math fp32 with --deterministic runs under tide's rules (no TF32, only
deterministic cuDNN algorithms, no autotuning); --math tf32 is PyTorch's
default for convolutions. Compare with `tide-bench train --onnx MODEL.onnx
--backend cuda --batch B` of the same model exported with a dynamic batch.

  torch_torchvision.py MODEL [--batch 32] [--steps 30] [--math fp32|tf32] [--deterministic]
"""
import argparse
import json
import statistics
import time

import torch


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--math", choices=["tf32", "fp32"], default="fp32")
    p.add_argument("--deterministic", action="store_true")
    a = p.parse_args()
    out = {"framework": "pytorch " + torch.__version__, "model": a.model, "batch": a.batch,
           "math": a.math, "deterministic": a.deterministic}
    try:
        import torchvision.models as models
    except ImportError as e:
        out["error"] = f"torchvision does not import: {e}"
        print(json.dumps(out))
        return
    torch.backends.cuda.matmul.allow_tf32 = a.math == "tf32"
    torch.backends.cudnn.allow_tf32 = a.math == "tf32"
    torch.backends.cudnn.deterministic = a.deterministic
    torch.backends.cudnn.benchmark = False
    torch.manual_seed(0)
    model = getattr(models, a.model)(num_classes=10)
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    dev = torch.device("cuda")
    model = model.to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(a.batch, 3, 224, 224, device=dev)
    y = torch.randint(0, 10, (a.batch,), device=dev)
    times = []
    for k in range(3 + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        if k >= 3:
            times.append((time.perf_counter() - t0) * 1e3)
    out.update(step_ms_median=round(statistics.median(times), 3),
               step_ms_mean=round(statistics.mean(times), 3),
               peak_bytes=torch.cuda.max_memory_allocated(), loss=float(loss),
               device=torch.cuda.get_device_name(0))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
