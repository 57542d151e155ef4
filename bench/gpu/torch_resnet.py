#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""torch_resnet.py: the PyTorch figure beside tide's on the GPU machine.

Trains the ResNet that tide_model_resnet builds (ResNet v1.5 bottleneck
blocks in stages of 3, 4, n and 3, base width 64, ImageNet stem for images of
64 pixels or more, BatchNorm in training mode, no conv bias, a dense head to
10 classes) with SGD on random images of the given size, in float32, and
prints one JSON line per depth: images/s over the timed steps, the peak of
torch.cuda.max_memory_allocated, or "oom" when the model does not fit the
budget (torch.cuda.set_per_process_memory_fraction caps the caching
allocator at --budget-gib, as tide's --budget caps its device arena).

--math tf32 (PyTorch's default: cuDNN convolutions may use TF32 tensor
cores) or fp32 (plain float32 arithmetic, as tide's CUDA kernels);
--deterministic: only deterministic cuDNN algorithms, no autotuning (as
tide). With --math fp32 --deterministic, PyTorch runs under tide's rules.

  torch_resnet.py --n N [N ...] [--batch 16] [--image-size 224] [--steps 5]
                  [--budget-gib 12] [--math tf32|fp32] [--deterministic]
"""
import argparse
import json
import time

import torch
import torch.nn as nn


class Bottleneck(nn.Module):
    def __init__(self, cin, w, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, w, 1, bias=False)
        self.b1 = nn.BatchNorm2d(w)
        self.c2 = nn.Conv2d(w, w, 3, stride=stride, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(w)
        self.c3 = nn.Conv2d(w, 4 * w, 1, bias=False)
        self.b3 = nn.BatchNorm2d(4 * w)
        self.short = None
        if stride != 1 or cin != 4 * w:
            self.short = nn.Sequential(nn.Conv2d(cin, 4 * w, 1, stride=stride, bias=False),
                                       nn.BatchNorm2d(4 * w))
        self.relu = nn.ReLU()

    def forward(self, x):
        y = self.relu(self.b1(self.c1(x)))
        y = self.relu(self.b2(self.c2(y)))
        y = self.b3(self.c3(y))
        return self.relu(y + (x if self.short is None else self.short(x)))


def resnet(n, image_size, width=64, classes=10):
    if image_size >= 64:
        stem = [nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                nn.MaxPool2d(3, 2, 1)]
    else:
        stem = [nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
    layers, cin = list(stem), width
    for s, blocks in enumerate([3, 4, n, 3]):
        w = width << s
        for i in range(blocks):
            layers.append(Bottleneck(cin, w, 2 if (i == 0 and s > 0) else 1))
            cin = 4 * w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def run(n, a):
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    depth = 3 * (10 + n) + 2
    out = {"framework": "pytorch " + torch.__version__, "n": n, "depth": depth,
           "batch": a.batch, "image_size": a.image_size, "budget_gib": a.budget_gib,
           "math": a.math, "deterministic": a.deterministic,
           "device": torch.cuda.get_device_name()}
    try:
        model = resnet(n, a.image_size).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x = torch.randn(a.batch, 3, a.image_size, a.image_size, device="cuda")
        y = torch.randint(0, 10, (a.batch,), device="cuda")
        lossf = nn.CrossEntropyLoss()

        def step():
            opt.zero_grad(set_to_none=True)
            loss = lossf(model(x), y)
            loss.backward()
            opt.step()
            return loss

        for _ in range(2):
            step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.steps):
            loss = step()
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        out.update(steps=a.steps, images_per_s=a.batch * a.steps / dt,
                   step_ms=1000 * dt / a.steps, peak_bytes=torch.cuda.max_memory_allocated(),
                   loss=float(loss))
    except torch.OutOfMemoryError:
        out["oom"] = True
    print(json.dumps(out), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, nargs="+", required=True)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--budget-gib", type=float, default=12)
    p.add_argument("--math", choices=["tf32", "fp32"], default="tf32")
    p.add_argument("--deterministic", action="store_true")
    a = p.parse_args()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, a.budget_gib * 2**30 / total))
    torch.backends.cudnn.allow_tf32 = a.math == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = a.math == "tf32"
    torch.backends.cudnn.benchmark = not a.deterministic
    torch.backends.cudnn.deterministic = a.deterministic
    for n in a.n:
        run(n, a)


if __name__ == "__main__":
    main()
