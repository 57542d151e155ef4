# SPDX-License-Identifier: MIT
"""module_cases.py: PyTorch's building blocks as ONNX conformance cases.

The layers and idioms a user's own model is made of (nn.TransformerEncoder
and Decoder layers, MultiheadAttention, LSTM and GRU, the normalisations,
1-D, 2-D and 3-D convolutions, resampling and padding modes, einsum,
cumsum, var and std, F.normalize, T5's relative-position buckets, rotary
embeddings, ALiBi, SwiGLU, ...), each a small module with random weights
(fixed seed), exported as a user exports for training in tide (opset 14,
TrainingMode.TRAINING, no constant folding; BatchNorm1d also in eval mode;
one model with every module a model-local function, opset 15),
with PyTorch's forward pass on one random input as the expected output, in
the conformance suite's layout:

    OUT/<case>/model.onnx
    OUT/<case>/test_data_set_0/input_0.pb, output_0.pb

so that `tide-bench onnx-tests OUT` imports each file and compares tide's
forward pass with PyTorch's (rtol 1e-3, atol 1e-5). Dropout is 0
(PyTorch's masks are random). A case PyTorch itself cannot export is
reported and skipped.

Usage: /usr/bin/python3 module_cases.py OUT [CASE ...] (default: all).
Needs python3-torch (Debian's 1.13), which tide itself does not.
"""
import math
import os
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper


class Fn(nn.Module):
    """forward(x) = f(self, x), with the given submodules and parameters."""

    def __init__(self, f, **parts):
        super().__init__()
        self.f = f
        for name, part in parts.items():
            setattr(self, name, part)

    def forward(self, x):
        return self.f(self, x)


def t5_bucket(rel, buckets=8, max_distance=16):
    """T5's relative_position_bucket (bidirectional), as transformers has it."""
    buckets //= 2
    ret = (rel > 0).long() * buckets
    n = torch.abs(rel)
    max_exact = buckets // 2
    small = n < max_exact
    large = max_exact + (torch.log(n.float() / max_exact) / math.log(max_distance / max_exact) *
                         (buckets - max_exact)).long()
    large = torch.min(large, torch.full_like(large, buckets - 1))
    return ret + torch.where(small, n, large)


def t5_bias(s, x):
    q = torch.arange(x.shape[1])[:, None]
    k = torch.arange(x.shape[1])[None, :]
    bias = s.e(t5_bucket(k - q)).permute(2, 0, 1)
    return torch.softmax(x @ x.transpose(-1, -2) / 2 + bias[None].sum(1), -1)


def rotary(s, x, outer):
    t = x.shape[1]
    inv = 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8))
    pos = torch.arange(t).float()
    freqs = torch.outer(pos, inv) if outer else pos[:, None] * inv[None, :]
    emb = torch.cat([freqs, freqs], -1)
    h = s.l(x)
    return h * emb.cos() + torch.cat([-h[..., 4:], h[..., :4]], -1) * emb.sin()


def alibi(s, x):
    t = x.shape[1]
    pos = torch.arange(t)
    bias = torch.tensor([0.5, 0.25])[:, None, None] * (pos[None, :] - pos[:, None]).float()[None]
    h = s.l(x).view(x.shape[0], t, 2, 4).transpose(1, 2)
    a = (h @ h.transpose(-1, -2)) / 2 + bias
    a = a.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
    return (a.softmax(-1) @ h).transpose(1, 2).reshape(x.shape[0], t, 8)


def conv_gru(s, x):
    h = F.hardtanh(s.b(s.c(x.transpose(1, 2))), 0, 20).transpose(1, 2)
    return F.log_softmax(s.o(s.g(h)[0]), -1)


def lin():
    return nn.Linear(4, 4)


def conv(cin=3, cout=3):
    return nn.Conv2d(cin, cout, 1)


def cases():
    """name -> (module, input, training mode, modules exported as functions)."""
    r = torch.randn
    enc = dict(dropout=0.0, batch_first=True)
    c = {
        "transformer_encoder_layer": (Fn(lambda s, x: s.e(x), e=nn.TransformerEncoderLayer(16, 2, 32, **enc)), r(2, 5, 16)),
        "transformer_encoder_layer_gelu_norm_first": (Fn(lambda s, x: s.e(x), e=nn.TransformerEncoderLayer(16, 2, 32, activation="gelu", norm_first=True, **enc)), r(2, 5, 16)),
        "transformer_decoder_layer": (Fn(lambda s, x: s.d(x, x), d=nn.TransformerDecoderLayer(16, 2, 32, **enc)), r(2, 5, 16)),
        "transformer": (Fn(lambda s, x: s.t(x, x), t=nn.Transformer(16, 2, 1, 1, 32, **enc)), r(2, 5, 16)),
        "multihead_attention": (Fn(lambda s, x: s.m(x, x, x, need_weights=False)[0], m=nn.MultiheadAttention(16, 4, batch_first=True)), r(2, 5, 16)),
        "multihead_attention_causal": (Fn(lambda s, x: s.m(x, x, x, attn_mask=torch.triu(torch.ones(5, 5, dtype=torch.bool), 1), need_weights=False)[0], m=nn.MultiheadAttention(16, 4, batch_first=True)), r(2, 5, 16)),
        "lstm_2_layers_bidirectional": (Fn(lambda s, x: s.l(x)[0], l=nn.LSTM(8, 12, num_layers=2, batch_first=True, bidirectional=True)), r(3, 6, 8)),
        "gru": (Fn(lambda s, x: s.l(x)[0], l=nn.GRU(8, 12, batch_first=True)), r(3, 6, 8)),
        "lstm_cell": (Fn(lambda s, x: s.c(x)[0], c=nn.LSTMCell(4, 5)), r(3, 4)),
        "conv1d_batchnorm1d_gru": (Fn(conv_gru, c=nn.Conv1d(8, 8, 5, stride=2, padding=2), b=nn.BatchNorm1d(8), g=nn.GRU(8, 6, batch_first=True, bidirectional=True), o=nn.Linear(12, 5)), r(2, 10, 8)),
        "embedding_padding_idx": (Fn(lambda s, x: s.e(x), e=nn.Embedding(20, 6, padding_idx=0)), torch.randint(0, 20, (3, 5))),
        "groupnorm": (Fn(lambda s, x: s.g(x), g=nn.GroupNorm(2, 8)), r(2, 8, 5, 5)),
        "instancenorm_affine": (Fn(lambda s, x: s.n(x), n=nn.InstanceNorm2d(3, affine=True)), r(2, 3, 4, 4)),
        "layernorm_2_axes": (Fn(lambda s, x: s.n(x), n=nn.LayerNorm([4, 4])), r(2, 3, 4, 4)),
        "batchnorm1d": (Fn(lambda s, x: s.b(s.l(x)), l=lin(), b=nn.BatchNorm1d(4)), r(3, 4)),
        "batchnorm1d_sequence": (Fn(lambda s, x: s.b(x), b=nn.BatchNorm1d(4)), r(3, 4, 6)),
        "batchnorm1d_sequence_no_affine": (Fn(lambda s, x: s.b(s.c(x)), c=nn.Conv1d(4, 4, 1), b=nn.BatchNorm1d(4, affine=False)), r(3, 4, 6)),
        "batchnorm1d_sequence_eval": (Fn(lambda s, x: s.b(s.c(x)), c=nn.Conv1d(4, 4, 1), b=nn.BatchNorm1d(4)), r(3, 4, 6), False),
        "batchnorm3d": (Fn(lambda s, x: s.b(s.c(x)), c=nn.Conv3d(2, 3, 1), b=nn.BatchNorm3d(3)), r(2, 2, 3, 4, 5)),
        "rmsnorm": (Fn(lambda s, x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * s.w, w=nn.Parameter(torch.ones(4))), r(3, 4)),
        "conv_transpose2d": (Fn(lambda s, x: s.c(x), c=nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1)), r(2, 4, 5, 5)),
        "conv1d": (Fn(lambda s, x: s.c(x), c=nn.Conv1d(4, 6, 3, padding=1)), r(2, 4, 10)),
        "conv1d_dilated": (Fn(lambda s, x: s.c(x), c=nn.Conv1d(4, 6, 3, padding=2, dilation=2)), r(2, 4, 10)),
        "conv3d": (Fn(lambda s, x: s.c(x), c=nn.Conv3d(2, 3, 3, padding=1)), r(2, 2, 4, 4, 4)),
        "avg_pool1d": (Fn(lambda s, x: F.avg_pool1d(s.c(x), 2), c=nn.Conv1d(3, 3, 1)), r(2, 3, 8)),
        "avg_pool2d_exclude_pad": (Fn(lambda s, x: F.avg_pool2d(s.c(x), 3, 2, 1, count_include_pad=False), c=conv()), r(2, 3, 8, 8)),
        "max_pool2d_ceil_pad": (Fn(lambda s, x: F.max_pool2d(s.c(x), 3, 2, 1, ceil_mode=True), c=conv()), r(2, 3, 8, 8)),
        "max_pool2d_dilated": (Fn(lambda s, x: F.max_pool2d(s.c(x), 3, stride=1, dilation=2), c=conv()), r(2, 3, 9, 9)),
        "adaptive_avg_pool2d": (Fn(lambda s, x: F.adaptive_avg_pool2d(s.c(x), (3, 3)), c=conv()), r(2, 3, 9, 9)),
        "adaptive_max_pool2d": (Fn(lambda s, x: F.adaptive_max_pool2d(s.c(x), (2, 2)), c=conv()), r(2, 3, 4, 4)),
        "interpolate_nearest": (Fn(lambda s, x: F.interpolate(s.c(x), scale_factor=2, mode="nearest"), c=conv()), r(2, 3, 4, 4)),
        "interpolate_bilinear": (Fn(lambda s, x: s.c(F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)), c=conv()), r(2, 3, 5, 5)),
        "interpolate_bilinear_align_corners": (Fn(lambda s, x: s.c(F.interpolate(x, size=(9, 9), mode="bilinear", align_corners=True)), c=conv()), r(2, 3, 5, 5)),
        "pixel_shuffle": (Fn(lambda s, x: F.pixel_shuffle(s.c(x), 2), c=conv(4, 8)), r(2, 4, 3, 3)),
        "unfold": (Fn(lambda s, x: F.unfold(s.c(x), 2), c=conv()), r(2, 3, 4, 4)),
        "pad_reflect": (Fn(lambda s, x: s.c(F.pad(x, (1, 1, 1, 1), mode="reflect")), c=nn.Conv2d(3, 3, 3)), r(2, 3, 5, 5)),
        "pad_replicate": (Fn(lambda s, x: s.c(F.pad(x, (1, 2, 1, 2), mode="replicate")), c=nn.Conv2d(3, 3, 3)), r(2, 3, 5, 5)),
        "einsum_linear": (Fn(lambda s, x: torch.einsum("bij,jk->bik", x, s.w), w=nn.Parameter(r(4, 3))), r(2, 5, 4)),
        "einsum_attention_scores": (Fn(lambda s, x: torch.einsum("bhqd,bhkd->bhqk", x, x * s.w), w=nn.Parameter(r(4))), r(2, 2, 5, 4)),
        "outer": (Fn(lambda s, x: torch.outer(s.l(x)[0], x[1]), l=lin()), r(3, 4)),
        "cumsum": (Fn(lambda s, x: torch.cumsum(x * s.w, dim=1), w=nn.Parameter(r(4))), r(2, 5, 4)),
        "var_std": (Fn(lambda s, x: s.l(x).var(dim=-1, keepdim=True) + s.l(x).std(dim=-1, keepdim=True), l=lin()), r(3, 4)),
        "normalize": (Fn(lambda s, x: F.normalize(s.l(x), dim=-1), l=lin()), r(3, 4)),
        "cosine_similarity": (Fn(lambda s, x: F.cosine_similarity(s.l(x), x, dim=-1), l=lin()), r(3, 4)),
        "cdist": (Fn(lambda s, x: torch.cdist(s.l(x), x), l=lin()), r(3, 4)),
        "logsumexp": (Fn(lambda s, x: torch.logsumexp(s.l(x), -1), l=lin()), r(3, 4)),
        "clamp": (Fn(lambda s, x: torch.clamp(s.l(x), min=-0.5, max=0.5), l=lin()), r(3, 4)),
        "masked_fill": (Fn(lambda s, x: s.l(x).masked_fill(x > 0.5, -1.0), l=lin()), r(3, 4)),
        "masked_softmax": (Fn(lambda s, x: s.l(x).masked_fill(torch.ones(3, 4, dtype=torch.bool).triu(1), float("-inf")).softmax(-1), l=lin()), r(3, 4)),
        "argmax_mask": (Fn(lambda s, x: s.l(x) * (s.l(x) == s.l(x).max(-1, keepdim=True)[0]).float(), l=lin()), r(3, 4)),
        "gather": (Fn(lambda s, x: torch.gather(s.l(x), 1, torch.tensor([[0, 1], [2, 3], [1, 1]])), l=lin()), r(3, 4)),
        "index_select": (Fn(lambda s, x: torch.index_select(s.l(x), 1, torch.tensor([3, 0])), l=lin()), r(3, 4)),
        "one_hot": (Fn(lambda s, x: s.l(x) * F.one_hot(torch.tensor([0, 1, 3]), 4).float(), l=lin()), r(3, 4)),
        "stack_unbind": (Fn(lambda s, x: torch.stack(list(reversed(s.l(x).unbind(0))), 1), l=lin()), r(3, 4)),
        "chunk_cat": (Fn(lambda s, x: torch.cat(list(reversed(s.l(x).chunk(2, dim=-1))), dim=-1), l=lin()), r(3, 4)),
        "repeat_interleave": (Fn(lambda s, x: s.l(x).repeat_interleave(2, dim=1), l=lin()), r(3, 4)),
        "roll": (Fn(lambda s, x: torch.roll(s.l(x), 1, dims=1), l=lin()), r(3, 4)),
        "flip": (Fn(lambda s, x: torch.flip(s.l(x), [1]), l=lin()), r(3, 4)),
        "baddbmm": (Fn(lambda s, x: torch.baddbmm(x, x, x.transpose(1, 2) * s.w), w=nn.Parameter(torch.tensor(0.5))), r(2, 3, 3)),
        "activations": (Fn(lambda s, x: F.mish(F.silu(s.l(x))) + F.relu6(x) + F.hardtanh(x) + F.elu(s.p(x)) + F.logsigmoid(x) + F.softplus(x), l=lin(), p=nn.PReLU()), r(3, 4)),
        "gelu_exact_and_tanh": (Fn(lambda s, x: F.gelu(s.l(x)) + F.gelu(x, approximate="tanh"), l=lin()), r(3, 4)),
        "glu": (Fn(lambda s, x: F.glu(s.l(x), -1), l=lin()), r(3, 4)),
        "swiglu": (Fn(lambda s, x: s.c(F.silu(s.a(x)) * s.b(x)), a=nn.Linear(8, 16, bias=False), b=nn.Linear(8, 16, bias=False), c=nn.Linear(16, 8, bias=False)), r(2, 5, 8)),
        "t5_relative_position_bias": (Fn(t5_bias, e=nn.Embedding(8, 2)), r(2, 6, 4)),
        "rotary_embedding_outer": (Fn(lambda s, x: rotary(s, x, True), l=nn.Linear(8, 8)), r(2, 5, 8)),
        "rotary_embedding_broadcast": (Fn(lambda s, x: rotary(s, x, False), l=nn.Linear(8, 8)), r(2, 5, 8)),
        "alibi_causal_attention": (Fn(alibi, l=nn.Linear(8, 8)), r(2, 5, 8)),
        "embedding_bag": (Fn(lambda s, x: s.e(x), e=nn.EmbeddingBag(20, 6, mode="mean")), torch.randint(0, 20, (3, 5))),
        # Every module a model-local function (export_modules_as_functions), nested.
        "modules_as_functions": (Fn(lambda s, x: s.h(s.t(s.b(x))), b=nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 8), nn.ReLU()), t=nn.TransformerEncoderLayer(8, 2, 16, **enc), h=nn.Linear(8, 3)), r(2, 4, 8), True, True),
    }
    return {name: v + (True, False)[len(v) - 2:] for name, v in c.items()}


def write_case(out, name, model, x, training, functions):
    case = os.path.join(out, name)
    os.makedirs(os.path.join(case, "test_data_set_0"), exist_ok=True)
    if training:
        model.train()
    else:
        model.train()  # running statistics that are neither 0 nor 1
        with torch.no_grad():
            model(x)
            model(x * 2 + 1)
        model.eval()
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    torch.onnx.export(model, (x,), os.path.join(case, "model.onnx"), input_names=["x"],
                      output_names=["y"], opset_version=15 if functions else 14,
                      training=mode, do_constant_folding=False,
                      export_modules_as_functions=functions)
    with torch.no_grad():
        y = model(x)
    for path, array, tensor_name in (("input_0.pb", x, "x"), ("output_0.pb", y, "y")):
        with open(os.path.join(case, "test_data_set_0", path), "wb") as f:
            f.write(numpy_helper.from_array(array.numpy(), tensor_name).SerializeToString())


def main():
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit(__doc__)
    out, wanted = sys.argv[1], sys.argv[2:]
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    all_cases = cases()
    unknown = [name for name in wanted if name not in all_cases]
    if unknown:
        sys.exit(f"module_cases.py: no case {', '.join(unknown)}; the cases: {', '.join(all_cases)}")
    for name, (model, x, training, functions) in all_cases.items():
        if wanted and name not in wanted:
            continue
        try:
            write_case(out, name, model, x, training, functions)
        except Exception as e:  # PyTorch's exporter refuses some modules
            print(f"not exported {name}: {str(e).splitlines()[0][:160]}", flush=True)
            continue
        print(f"wrote {os.path.join(out, name)}", flush=True)


if __name__ == "__main__":
    main()
