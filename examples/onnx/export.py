#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""export.py: the PyTorch-exported example models and their reference losses
(issue 13, item 7).

Builds, with fixed seeds, small image classifiers (a CNN for Fashion-MNIST,
a U-Net, a MobileNet, torchvision's Swin Transformer, a CNN with BatchNorms
in eval mode, a recurrent classifier of image rows), a small GPT-style byte-level language model and a padded-text
classifier, exports each to ONNX the way every tide user must (opset 14,
torch.onnx.TrainingMode.TRAINING, or EVAL for a model trained in .eval();
do_constant_folding=False, a static batch size), and then trains a copy of
the same initial weights in PyTorch for three steps of plain SGD on fixed
batches. The losses of those three steps are what tide must reproduce when it
trains the .onnx file on the same batches.

Step i (0, 1, 2) computes the loss of batch i with the weights after i
updates, then updates: loss 0 is the untrained model's, so it checks the
forward pass alone; losses 1 and 2 check the gradients and the update too.
The batches are the rows [i * batch, (i + 1) * batch) of the input and label
.npy files, in order, without shuffling.

Writes, next to this script (or under --out):
  cnn.onnx, cnn_images.npy (float32 [24, 1, 28, 28]), cnn_labels.npy
  (int64 [24]); the same three files of unet, mobilenet, bn_eval (exported
  in eval mode and trained in .eval()), rnn (a GRU and an LSTM over image
  rows) and swin (torchvision's Swin Transformer; images float32
  [24, 3, 32, 32]); gpt.onnx, gpt_tokens.npy
  (int64 [12, 32]), gpt_labels.npy (int64 [12, 32]); textclf.onnx,
  textclf_tokens.npy (int64 [12, 32], padded with 0), textclf_labels.npy
  (int64 [12]); reference.json.

Run by hand, not by CI, on Debian 12:
  apt-get install --no-install-recommends python3-torch python3-torchvision python3-onnx
  OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 examples/onnx/export.py [--out DIR]
The output is the same bit for bit from run to run on one machine (one
thread, fixed seeds); another CPU or PyTorch build may change the last bits
of the losses, so the committed files belong together and are regenerated
together. The committed ones were written with OpenBLAS's SkylakeX kernels,
which OPENBLAS_CORETYPE selects where OpenBLAS does not recognise the CPU
(a virtual one) and would fall back to Prescott's.
"""
import argparse
import collections
import copy
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torchvision.models.swin_transformer import SwinTransformer

OPSET = 14
FORTUNES_DIR = "/usr/share/games/fortunes"


# ---------------------------------------------------------------------------
# The models
# ---------------------------------------------------------------------------

class SmallCNN(nn.Module):
    """Two 3x3 convolutions with ReLU and 2x2 max pooling, then one dense
    layer: [batch, 1, 28, 28] images to [batch, 10] logits."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 7 * 7, 10)

    def forward(self, images):
        x = F.max_pool2d(F.relu(self.conv1(images)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc(x)


class SmallUNet(nn.Module):
    """An encoder-decoder CNN of the layers segmentation and detection models
    are made of, pooled to [batch, 10] logits: a depthwise-separable block
    (a 3x3 convolution with one group per channel, then 1x1), a strided
    convolution down, a grouped 3x3 convolution behind reflection padding,
    then back up three ways (a 2x2 ConvTranspose of stride 2, nearest and
    bilinear upsampling), a skip connection from the stem, zero padding and
    global average pooling."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pw = nn.Conv2d(8, 16, 1)
        self.down = nn.Conv2d(16, 16, 3, stride=2, padding=1)
        self.grouped = nn.Conv2d(16, 16, 3, groups=4)
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.lat = nn.Conv2d(16, 8, 1)
        self.head = nn.Conv2d(24, 10, 2)

    def forward(self, images):
        s = F.relu(self.stem(images))                                     # [B, 8, 28, 28]
        x = F.relu(self.pw(self.dw(s)))                                   # [B, 16, 28, 28]
        d = F.relu(self.down(x))                                          # [B, 16, 14, 14]
        d = F.relu(self.grouped(F.pad(d, (1, 1, 1, 1), mode="reflect")))  # [B, 16, 14, 14]
        lat = self.lat(d)
        n = F.interpolate(lat, scale_factor=2, mode="nearest")            # [B, 8, 28, 28]
        b = F.interpolate(lat, scale_factor=2, mode="bilinear", align_corners=False)
        y = torch.cat([s, self.up(d) + n, b], dim=1)                      # [B, 24, 28, 28]
        y = self.head(F.pad(y, (0, 1, 0, 1)))                             # [B, 10, 28, 28]
        return F.adaptive_avg_pool2d(y, 1).flatten(1)


class SmallMobileNet(nn.Module):
    """The layers of mobile CNNs (MobileNetV2/V3, EfficientNet, ShuffleNet,
    SqueezeNet) at Fashion-MNIST size: a strided stem with BatchNorm and
    HardSwish; an inverted residual block (1x1 expansion, depthwise 3x3, a
    squeeze-and-excitation gate with HardSigmoid, 1x1 projection, SiLU and
    BatchNorm, a residual Add); a channel shuffle; ceil_mode max pooling; a
    fire module (1x1 squeeze, 1x1 and 3x3 expansions concatenated); global
    average pooling and a Linear head. BatchNorm trains with the batch's
    statistics, as tide's does."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 8, 3, stride=2, padding=1, bias=False)
        self.stem_bn = nn.BatchNorm2d(8)
        self.expand = nn.Conv2d(8, 16, 1, bias=False)
        self.expand_bn = nn.BatchNorm2d(16)
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False)
        self.dw_bn = nn.BatchNorm2d(16)
        self.se_reduce = nn.Conv2d(16, 4, 1)
        self.se_expand = nn.Conv2d(4, 16, 1)
        self.project = nn.Conv2d(16, 8, 1, bias=False)
        self.project_bn = nn.BatchNorm2d(8)
        self.squeeze = nn.Conv2d(8, 4, 1)
        self.expand1 = nn.Conv2d(4, 8, 1)
        self.expand3 = nn.Conv2d(4, 8, 3, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, images):
        x = F.hardswish(self.stem_bn(self.stem(images)))                 # [B, 8, 14, 14]
        h = F.silu(self.expand_bn(self.expand(x)))
        h = F.silu(self.dw_bn(self.dw(h)))
        gate = F.adaptive_avg_pool2d(h, 1)
        gate = F.hardsigmoid(self.se_expand(F.relu(self.se_reduce(gate))))
        x = x + self.project_bn(self.project(h * gate))                  # [B, 8, 14, 14]
        b, c, hh, ww = x.shape
        x = x.view(b, 2, c // 2, hh, ww).transpose(1, 2).reshape(b, c, hh, ww)
        x = F.max_pool2d(x, 3, stride=2, ceil_mode=True)                 # [B, 8, 7, 7]
        s = F.relu(self.squeeze(x))
        x = torch.cat([F.relu(self.expand1(s)), F.relu(self.expand3(s))], dim=1)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention written the usual (nanoGPT) way: one
    projection to q, k and v, split, heads by view and transpose, scores
    q k^T / sqrt(head size), a causal mask by masked_fill, softmax, times v.
    nanoGPT calls the mask buffer "bias"; here it is "mask", so that no one
    takes the float initializer it becomes for a parameter."""

    def __init__(self, d_model, n_head, block_size):
        super().__init__()
        assert d_model % n_head == 0
        self.n_head = n_head
        self.d_model = d_model
        self.c_attn = nn.Linear(d_model, 3 * d_model)
        self.c_proj = nn.Linear(d_model, d_model)
        self.register_buffer(
            "mask",
            torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.d_model, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    """A pre-LayerNorm transformer block: x + attn(ln(x)), then
    x + mlp(ln(x)) with an exact (erf) GELU MLP of width 4 d."""

    def __init__(self, d_model, n_head, block_size):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_head, block_size)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp_fc = nn.Linear(d_model, 4 * d_model)
        self.mlp_gelu = nn.GELU()
        self.mlp_proj = nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp_proj(self.mlp_gelu(self.mlp_fc(self.ln_2(x))))
        return x


class SmallGPT(nn.Module):
    """A byte-level GPT: token embedding plus learned positions, n_layer
    pre-LayerNorm blocks, a final LayerNorm and an untied head to the 256
    byte values. No dropout, so that the losses are deterministic."""

    def __init__(self, vocab=256, block_size=32, d_model=64, n_head=2, n_layer=2):
        super().__init__()
        self.block_size = block_size
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(block_size, d_model)
        self.h = nn.ModuleList([Block(d_model, n_head, block_size) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab)

    def forward(self, tokens):
        b, t = tokens.size()
        pos = torch.arange(0, t, dtype=torch.long, device=tokens.device)
        x = self.wte(tokens) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class PaddedTextClassifier(nn.Module):
    """A classifier of byte strings padded with 0 to a fixed length, as a
    BERT-style encoder reads them: token embedding plus learned positions,
    one nn.TransformerEncoderLayer (post-LayerNorm, exact GELU, no dropout)
    whose key_padding_mask is computed from the tokens (tokens == 0), and the
    mean of the unpadded positions' features into a linear head. The masks are
    computed in the graph from the input (Equal, Not, Where of -inf, Cast),
    not constants: what an exported BERT does with its attention_mask."""

    def __init__(self, vocab=256, seq=32, d_model=32, n_head=2, classes=4):
        super().__init__()
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(seq, d_model)
        self.enc = nn.TransformerEncoderLayer(d_model, n_head, 2 * d_model, dropout=0.0,
                                              activation="gelu", batch_first=True)
        self.head = nn.Linear(d_model, classes)

    def forward(self, tokens):
        b, t = tokens.size()
        pos = torch.arange(0, t, dtype=torch.long, device=tokens.device)
        x = self.wte(tokens) + self.wpe(pos)
        pad = tokens == 0
        x = self.enc(x, src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).float()
        return self.head((x * keep).sum(dim=1) / keep.sum(dim=1))


# torchvision's Swin Transformer (V1) at sizes that shift windows in both
# stages: patch 4 makes 8 x 8 patches of a 32 x 32 image, in 2 x 2 windows;
# the second block of each stage (depth 2) rolls them by 1 and masks the
# attention between the regions the roll brought together, the mask built in
# the graph (zeros, nine regions assigned by slices: ConstantOfShape,
# ScatterND; the padding of _patch_merging_pad and the window counts from the
# shapes: Shape, Mod, Range). Stage 2 runs at 4 x 4, still larger than a
# window. stochastic_depth_prob 0: PyTorch cannot export the Bernoulli of
# stochastic depth; at 0 it is the identity.
SWIN_CONFIG = {
    "patch_size": [4, 4], "embed_dim": 8, "depths": [2, 2], "num_heads": [1, 2],
    "window_size": [2, 2], "mlp_ratio": 4.0, "dropout": 0.0, "attention_dropout": 0.0,
    "stochastic_depth_prob": 0.0, "num_classes": 10,
}


def tiny_swin():
    """torchvision.models.swin_transformer.SwinTransformer(**SWIN_CONFIG):
    [batch, 3, 32, 32] images to [batch, 10] logits, with larger initial
    weights than torchvision's: every Linear drawn as nn.Linear draws it
    (reset_parameters) and the relative position bias tables normal with std 1,
    in module order. Under torchvision's trunc_normal(std 0.02) the logits are
    near 0 and the loss near ln 10 whatever the windows do: without the
    shifted windows' mask PyTorch's losses moved by 5e-5 relative at most,
    inside the 1e-4 a comparison allows. With these weights, no mask, no
    shift, a roll the wrong way, no relative position bias or its transpose
    each move a loss by 1e-3 relative or more."""
    model = SwinTransformer(**SWIN_CONFIG)
    for m in model.modules():
        if isinstance(m, nn.Linear):
            m.reset_parameters()
        elif hasattr(m, "relative_position_bias_table"):
            nn.init.normal_(m.relative_position_bias_table, std=1.0)
    return model


class BatchNormEvalNet(nn.Module):
    """A CNN exported in eval mode whose BatchNorms stay nodes: a BatchNorm2d
    after a ReLU and a BatchNorm1d after a Linear (the exporter folds only a
    BatchNorm that directly follows a Conv into the Conv), and a Dropout that
    eval mode removes. Trained as PyTorch trains it in .eval(): the running
    statistics normalise and stay as they are, the BatchNorms' weight and
    bias train."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.bn2d = nn.BatchNorm2d(8)
        self.fc1 = nn.Linear(8 * 7 * 7, 32)
        self.bn1d = nn.BatchNorm1d(32)
        self.drop = nn.Dropout(0.5)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, images):
        x = self.bn2d(F.relu(self.conv(images)))                         # [B, 8, 28, 28]
        x = torch.flatten(F.max_pool2d(x, 4), 1)                          # [B, 392]
        x = self.drop(F.relu(self.bn1d(self.fc1(x))))                     # [B, 32]
        return self.fc2(x)


BN_EVAL_WARMUP_SEED, BN_EVAL_WARMUP_BATCHES = 1311, 16


def bn_eval_model():
    """BatchNormEvalNet with running statistics that are neither 0 nor 1:
    BN_EVAL_WARMUP_BATCHES forward passes in train mode (momentum 0.1) over
    batches of 8 other random images (cnn_data(BN_EVAL_WARMUP_SEED)), without
    gradients; then .eval()."""
    model = BatchNormEvalNet()
    images, _ = cnn_data(BN_EVAL_WARMUP_SEED, BN_EVAL_WARMUP_BATCHES, 8)
    model.train()
    with torch.no_grad():
        for i in range(BN_EVAL_WARMUP_BATCHES):
            model(images[i * 8:(i + 1) * 8])
    return model.eval()


class RowRNN(nn.Module):
    """A recurrent classifier that reads each image row by row, as tide's
    built-in lstm model does: the 28 rows are 28 time steps of 28 pixels, a
    Conv1d over time with a BatchNorm1d of [B, C, T] (batch statistics), a
    bidirectional GRU, a two-layer LSTM, and the last step's state to a
    Linear. PyTorch exports nn.GRU and nn.LSTM as ONNX's GRU (with
    linear_before_reset) and LSTM nodes, their gates reordered."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(28, 16, 3, padding=1)
        self.bn = nn.BatchNorm1d(16)
        self.gru = nn.GRU(16, 12, batch_first=True, bidirectional=True)
        self.lstm = nn.LSTM(24, 16, num_layers=2, batch_first=True)
        self.fc = nn.Linear(16, 10)

    def forward(self, images):
        x = images.squeeze(1)                                             # [B, 28, 28]
        h = F.relu(self.bn(self.conv(x.transpose(1, 2)))).transpose(1, 2)  # [B, 28, 16]
        h = self.lstm(self.gru(h)[0])[0]                                  # [B, 28, 16]
        return self.fc(h[:, -1])


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------

def fortunes_bytes(count):
    """The first count bytes of the fortunes corpus: the files of
    FORTUNES_DIR without an extension, concatenated in name order."""
    names = sorted(n for n in os.listdir(FORTUNES_DIR)
                   if "." not in n and os.path.isfile(os.path.join(FORTUNES_DIR, n)))
    data, used = bytearray(), []
    for name in names:
        with open(os.path.join(FORTUNES_DIR, name), "rb") as f:
            data += f.read()
        used.append(name)
        if len(data) >= count:
            break
    if len(data) < count:
        sys.exit(f"export.py: the fortunes corpus has {len(data)} bytes, {count} needed")
    return bytes(data[:count]), used


def cnn_data(seed, batches, batch, shape=(1, 28, 28)):
    """Random images of shape (channels, height, width) in [0, 1) and random
    labels, from a seeded generator."""
    g = torch.Generator().manual_seed(seed)
    images = torch.rand(batches * batch, *shape, generator=g, dtype=torch.float32)
    labels = torch.randint(0, 10, (batches * batch,), generator=g, dtype=torch.int64)
    return images, labels


def gpt_data(batches, batch, seq):
    """Consecutive windows of seq bytes of the corpus, window r starting at
    byte r * seq, with the next bytes as labels."""
    rows = batches * batch
    text, files = fortunes_bytes(rows * seq + 1)
    buf = torch.tensor(list(text), dtype=torch.int64)
    tokens = torch.stack([buf[r * seq:r * seq + seq] for r in range(rows)])
    labels = torch.stack([buf[r * seq + 1:r * seq + seq + 1] for r in range(rows)])
    return tokens, labels, text, files


def padded_text_data(batches, batch, seq, classes):
    """Row r: the corpus's bytes [r * seq, r * seq + n_r) with n_r = seq - (7 r
    mod 13) (20 to 32 bytes), then zeros to seq (the corpus has no zero byte);
    its label the count of spaces in those bytes, mod classes."""
    rows = batches * batch
    text, files = fortunes_bytes(rows * seq)
    tokens = torch.zeros(rows, seq, dtype=torch.int64)
    labels = torch.zeros(rows, dtype=torch.int64)
    for r in range(rows):
        n = seq - (7 * r) % 13
        row = text[r * seq:r * seq + n]
        tokens[r, :n] = torch.tensor(list(row), dtype=torch.int64)
        labels[r] = row.count(b" ") % classes
    return tokens, labels, text, files


# ---------------------------------------------------------------------------
# Export, training and checks
# ---------------------------------------------------------------------------

def export(model, example, input_name, path, training=True):
    """Exports with the flags that keep a model trainable as designed; with
    training False, in eval mode (TrainingMode.EVAL), as a model meant to
    train in .eval() is exported."""
    torch.onnx.export(
        model, (example,), path,
        input_names=[input_name], output_names=["logits"],
        opset_version=OPSET,
        training=torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL,
        do_constant_folding=False)
    proto = onnx.load(path)
    onnx.checker.check_model(proto, full_check=True)
    return proto


def op_counts(proto):
    counts = collections.Counter(node.op_type for node in proto.graph.node)
    return dict(sorted(counts.items()))


def check_initializers(proto, model, training=True):
    """Every parameter of the model is an initializer of the file with the
    same values: tide starts from exactly the weights PyTorch trained. In eval
    mode (training False) so is every float buffer (BatchNorm's running
    statistics), which normalise as they are; in training mode the trace
    moved them, and training-mode BatchNorm does not read them."""
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in proto.graph.initializer}
    tensors = list(model.named_parameters())
    if not training:
        tensors += [(n, b) for n, b in model.named_buffers() if b.is_floating_point()]
    for name, p in tensors:
        if name not in inits:
            sys.exit(f"export.py: {name} is not an initializer of the export")
        if not np.array_equal(inits[name], p.detach().numpy()):
            sys.exit(f"export.py: initializer {name} differs from the model's")
    return sorted(inits)


# ---------------------------------------------------------------------------
# An independent reading of the exported file
# ---------------------------------------------------------------------------

def _np_conv2d(x, w, b, pads, strides, dilations, group):
    if list(dilations) != [1, 1]:
        raise NotImplementedError("Conv: dilations other than 1")
    x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    n, c, h, wd = x.shape
    k, cg, kh, kw = w.shape
    kg = k // group
    oh = (h - kh) // strides[0] + 1
    ow = (wd - kw) // strides[1] + 1
    out = np.zeros((n, k, oh, ow), dtype=np.float64)
    for g in range(group):
        xg = x[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                patch = xg[:, :, i:i + strides[0] * oh:strides[0],
                           j:j + strides[1] * ow:strides[1]]
                out[:, g * kg:(g + 1) * kg] += np.einsum(
                    "nchw,kc->nkhw", patch, w[g * kg:(g + 1) * kg, :, i, j], dtype=np.float64)
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out.astype(np.float32)


def _np_conv(x, w, b, pads, strides, dilations, group):
    """Conv of rank 2 (_np_conv2d) or 1, the 1-D one as 2-D of height 1."""
    if x.ndim == 4:
        return _np_conv2d(x, w, b, pads, strides, dilations, group)
    y = _np_conv2d(x[:, :, None, :], w[:, :, None, :], b, [0, pads[0], 0, pads[1]],
                   [1, strides[0]], [1, dilations[0]], group)
    return y[:, :, 0, :]


def _np_sigmoid(v):
    return 1 / (1 + np.exp(-v))


def _np_recurrent(op, x, w, r, b, h0, c0, a):
    """ONNX's GRU (gates z, r, h) and LSTM (gates i, o, f, c; no peepholes)
    by their equations, in float64, layout 0: x [S, B, I] -> Y [S, D, B, H],
    Y_h [D, B, H] (and Y_c for LSTM); the reverse direction runs from the
    last step back."""
    if a.get("layout", 0) or a.get("clip") is not None or "activations" in a:
        raise NotImplementedError(f"{op}: layout, clip or activations")
    hidden = a["hidden_size"]
    gates = 3 if op == "GRU" else 4
    dirs = 2 if a.get("direction", b"forward") == b"bidirectional" else 1
    x, w, r = (t.astype(np.float64) for t in (x, w, r))
    s_len, batch = x.shape[0], x.shape[1]
    b = np.zeros((dirs, 2 * gates * hidden)) if b is None else b.astype(np.float64)
    h0 = np.zeros((dirs, batch, hidden)) if h0 is None else h0.astype(np.float64)
    c0 = np.zeros((dirs, batch, hidden)) if c0 is None else c0.astype(np.float64)
    y = np.zeros((s_len, dirs, batch, hidden))
    y_h, y_c = np.zeros((dirs, batch, hidden)), np.zeros((dirs, batch, hidden))
    for d in range(dirs):
        reverse = d == 1 or a.get("direction", b"forward") == b"reverse"
        wb, rb = b[d, :gates * hidden], b[d, gates * hidden:]
        h, c = h0[d], c0[d]
        for t in (range(s_len - 1, -1, -1) if reverse else range(s_len)):
            xw = x[t] @ w[d].T + wb
            hr = h @ r[d].T + rb
            split = lambda v: [v[:, k * hidden:(k + 1) * hidden] for k in range(gates)]
            if op == "GRU":
                (xz, xr, xh), (hz, hrr, hh) = split(xw), split(hr)
                z, rg = _np_sigmoid(xz + hz), _np_sigmoid(xr + hrr)
                if a.get("linear_before_reset", 0):
                    cand = np.tanh(xh + rg * hh)
                else:
                    rh = r[d][2 * hidden:]
                    cand = np.tanh(xh + (rg * h) @ rh.T + rb[2 * hidden:])
                h = (1 - z) * cand + z * h
            else:
                (xi, xo, xf, xc), (hi, ho, hf, hc) = split(xw), split(hr)
                i, o, f = _np_sigmoid(xi + hi), _np_sigmoid(xo + ho), _np_sigmoid(xf + hf)
                c = f * c + i * np.tanh(xc + hc)
                h = o * np.tanh(c)
            y[t, d] = h
        y_h[d], y_c[d] = h, c
    out = [y.astype(np.float32), y_h.astype(np.float32)]
    return out + [y_c.astype(np.float32)] if op == "LSTM" else out


def _np_conv_transpose2d(x, w, b, a):
    """ConvTranspose by its definition: input cell (ih, iw) adds x * w[:, :, r, s] at
    (ih * stride + r, iw * stride + s) of the full result, which the pads then crop."""
    if a.get("group", 1) != 1 or list(a.get("dilations", [1, 1])) != [1, 1] \
            or "output_shape" in a or a.get("auto_pad", b"NOTSET") != b"NOTSET":
        raise NotImplementedError("ConvTranspose: groups, dilations, output_shape, auto_pad")
    st = a.get("strides", [1, 1])
    op = a.get("output_padding", [0, 0])
    pads = a.get("pads", [0] * 4)
    n, c, h, wd = x.shape
    _, k, kh, kw = w.shape
    fh, fw = st[0] * (h - 1) + kh + op[0], st[1] * (wd - 1) + kw + op[1]
    full = np.zeros((n, k, fh, fw), dtype=np.float64)
    for r in range(kh):
        for q in range(kw):
            full[:, :, r:r + st[0] * h:st[0], q:q + st[1] * wd:st[1]] += np.einsum(
                "nchw,ck->nkhw", x, w[:, :, r, q], dtype=np.float64)
    out = full[:, :, pads[0]:fh - pads[2], pads[1]:fw - pads[3]]
    if b is not None:
        out = out + b.reshape(1, -1, 1, 1)
    return out.astype(np.float32)


def _np_resize_axis(x, axis, scale, a):
    """One axis of Resize (opset 13) from the operator's formulas: the output
    coordinate mapped back by coordinate_transformation_mode, then nearest
    (by nearest_mode) or linear interpolation clamped at the edges."""
    n_in = x.shape[axis]
    n_out = int(math.floor(n_in * scale))
    mode = a.get("coordinate_transformation_mode", b"half_pixel").decode()
    out = np.arange(n_out, dtype=np.float64)
    if mode == "half_pixel":
        src = (out + 0.5) / scale - 0.5
    elif mode == "asymmetric":
        src = out / scale
    elif mode == "align_corners":
        src = out * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros_like(out)
    else:
        raise NotImplementedError(f"Resize: coordinate_transformation_mode {mode}")
    if a.get("mode", b"nearest") == b"nearest":
        nearest = a.get("nearest_mode", b"round_prefer_floor").decode()
        if nearest == "floor":
            idx = np.floor(src)
        elif nearest == "round_prefer_floor":
            idx = np.ceil(src - 0.5)
        else:
            raise NotImplementedError(f"Resize: nearest_mode {nearest}")
        return np.take(x, np.clip(idx, 0, n_in - 1).astype(np.int64), axis=axis)
    if a["mode"] != b"linear":
        raise NotImplementedError("Resize: cubic")
    src = np.clip(src, 0, n_in - 1)
    lo = np.floor(src).astype(np.int64)
    hi = np.minimum(lo + 1, n_in - 1)
    shape = [1] * x.ndim
    shape[axis] = n_out
    frac = (src - lo).reshape(shape)
    return np.take(x, lo, axis=axis) * (1 - frac) + np.take(x, hi, axis=axis) * frac


def _np_resize(x, scales, a):
    y = x.astype(np.float64)
    for axis, scale in enumerate(scales):
        if scale != 1:
            y = _np_resize_axis(y, axis, float(scale), a)
    return y.astype(x.dtype)


def _np_maxpool(x, kernel, strides, pads, ceil_mode):
    n, c, h, w = x.shape
    size = []
    for a, length in enumerate((h, w)):
        span = length + pads[a] + pads[a + 2] - kernel[a]
        o = (-(-span // strides[a]) if ceil_mode else span // strides[a]) + 1
        if ceil_mode and (o - 1) * strides[a] >= length + pads[a]:
            o -= 1  # PyTorch's rule: no window starts in the end padding
        size.append(o)
    oh, ow = size
    # -inf around x, far enough for ceil_mode's last window.
    x = np.pad(x, ((0, 0), (0, 0), (pads[0], (oh - 1) * strides[0] + kernel[0] - h - pads[0]),
                   (pads[1], (ow - 1) * strides[1] + kernel[1] - w - pads[1])),
               constant_values=-np.inf)
    out = np.full((n, c, oh, ow), -np.inf, dtype=x.dtype)
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            out = np.maximum(out, x[:, :, i:i + strides[0] * oh:strides[0],
                                    j:j + strides[1] * ow:strides[1]])
    return out


def _np_softmax(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


_ERF = np.vectorize(math.erf, otypes=[np.float64])


def onnx_forward(proto, feeds):
    """Runs the graph with NumPy, op by op, knowing only the ONNX operator
    definitions of opset 14 (and only the ops and attributes these
    models use): a check on the exporter, independent of PyTorch's own kernels."""
    env = {t.name: onnx.numpy_helper.to_array(t) for t in proto.graph.initializer}
    env.update(feeds)
    for node in proto.graph.node:
        a = {at.name: onnx.helper.get_attribute_value(at) for at in node.attribute}
        x = [env[i] if i else None for i in node.input]
        op = node.op_type
        if op == "Constant":
            out = [onnx.numpy_helper.to_array(a["value"])]
        elif op == "Conv":
            sp = x[0].ndim - 2
            out = [_np_conv(x[0], x[1], x[2] if len(x) > 2 else None, a.get("pads", [0] * 2 * sp),
                            a.get("strides", [1] * sp), a.get("dilations", [1] * sp),
                            a.get("group", 1))]
        elif op in ("GRU", "LSTM"):
            if len(x) > 4 and x[4] is not None:
                raise NotImplementedError(f"{op}: sequence_lens")
            get = lambda k: x[k] if len(x) > k else None
            out = _np_recurrent(op, x[0], x[1], x[2], get(3), get(5), get(6), a)
        elif op == "Squeeze":
            out = [np.squeeze(x[0], axis=tuple(int(i) for i in x[1]))]
        elif op == "MaxPool":
            out = [_np_maxpool(x[0], a["kernel_shape"], a.get("strides", [1, 1]),
                               a.get("pads", [0] * 4), a.get("ceil_mode", 0))]
        elif op == "Relu":
            out = [np.maximum(x[0], 0)]
        elif op == "Sigmoid":
            out = [(1 / (1 + np.exp(-x[0].astype(np.float64)))).astype(x[0].dtype)]
        elif op == "HardSigmoid":
            y = a.get("alpha", 0.2) * x[0].astype(np.float64) + a.get("beta", 0.5)
            out = [np.clip(y, 0, 1).astype(x[0].dtype)]
        elif op == "HardSwish":
            v = x[0].astype(np.float64)
            out = [(v * np.clip(v / 6 + 0.5, 0, 1)).astype(x[0].dtype)]
        elif op == "BatchNormalization":
            v = x[0].astype(np.float64)
            shape = (1, -1) + (1,) * (v.ndim - 2)
            if a.get("training_mode", 0):
                # Training mode: the batch's mean and biased variance per channel.
                axes = (0,) + tuple(range(2, v.ndim))
                mean = v.mean(axis=axes, keepdims=True)
                var = v.var(axis=axes, keepdims=True)
            else:
                # Inference mode: the running statistics, inputs 3 and 4.
                mean = x[3].astype(np.float64).reshape(shape)
                var = x[4].astype(np.float64).reshape(shape)
            y = (v - mean) / np.sqrt(var + a.get("epsilon", 1e-5))
            y = y * x[1].reshape(shape) + x[2].reshape(shape)
            out = [y.astype(x[0].dtype)]
        elif op == "Flatten":
            ax = a.get("axis", 1)
            out = [x[0].reshape(int(np.prod(x[0].shape[:ax])), -1)]
        elif op == "Gemm":
            A = x[0].T if a.get("transA", 0) else x[0]
            B = x[1].T if a.get("transB", 0) else x[1]
            y = a.get("alpha", 1.0) * (A @ B)
            if len(x) > 2:
                y = y + a.get("beta", 1.0) * x[2]
            out = [y.astype(np.float32)]
        elif op == "Gather":
            out = [np.take(x[0], x[1], axis=a.get("axis", 0))]
        elif op in ("Add", "Sub", "Mul", "Div", "Pow", "Equal"):
            f = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
                 "Pow": np.power, "Equal": np.equal}[op]
            y = f(x[0], x[1])
            out = [y if op == "Equal" else y.astype(x[0].dtype)]
        elif op == "Sqrt":
            out = [np.sqrt(x[0])]
        elif op == "Not":
            out = [np.logical_not(x[0])]
        elif op == "Expand":
            out = [x[0] * np.ones(tuple(int(i) for i in x[1]), dtype=x[0].dtype)]
        elif op == "ReduceSum":
            axes = tuple(int(i) for i in x[1]) if len(x) > 1 else None
            out = [np.sum(x[0], axis=axes, keepdims=bool(a.get("keepdims", 1)))]
        elif op == "Dropout":
            if len(x) > 1 and x[1] is not None and float(x[1]) != 0.0:
                raise NotImplementedError("Dropout: a nonzero ratio")
            out = [x[0], np.ones(x[0].shape, dtype=bool)]
        elif op == "Erf":
            out = [_ERF(x[0]).astype(x[0].dtype)]
        elif op == "ReduceMean":
            out = [np.mean(x[0], axis=tuple(a["axes"]), keepdims=bool(a.get("keepdims", 1)))]
        elif op == "Transpose":
            out = [np.transpose(x[0], a.get("perm"))]
        elif op == "MatMul":
            out = [np.matmul(x[0], x[1])]
        elif op == "Split":
            ax = a.get("axis", 0)
            cuts = np.cumsum(x[1])[:-1]
            out = np.split(x[0], cuts, axis=ax)
        elif op == "Unsqueeze":
            out = [np.expand_dims(x[0], tuple(int(i) for i in x[1]))]
        elif op == "Concat":
            out = [np.concatenate(x, axis=a["axis"])]
        elif op == "Reshape":
            if a.get("allowzero", 0):
                raise NotImplementedError("Reshape: allowzero")
            # A 0 copies the input's dimension at that place (as GRU's export uses).
            out = [x[0].reshape(tuple(x[0].shape[k] if int(i) == 0 else int(i)
                                      for k, i in enumerate(x[1])))]
        elif op == "Slice":
            starts, ends = x[1], x[2]
            axes = x[3] if len(x) > 3 else range(len(starts))
            steps = x[4] if len(x) > 4 else [1] * len(starts)
            idx = [slice(None)] * x[0].ndim
            for s0, e0, ax, st in zip(starts, ends, axes, steps):
                idx[int(ax)] = slice(int(s0), int(e0), int(st))
            out = [x[0][tuple(idx)]]
        elif op == "Cast":
            out = [x[0].astype(onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[a["to"]])]
        elif op == "Where":
            out = [np.where(x[0], x[1], x[2]).astype(x[2].dtype)]
        elif op == "Softmax":
            out = [_np_softmax(x[0], a.get("axis", -1))]
        elif op == "ConvTranspose":
            out = [_np_conv_transpose2d(x[0], x[1], x[2] if len(x) > 2 else None, a)]
        elif op == "Resize":
            if len(x) > 3 and x[3] is not None and x[3].size:
                raise NotImplementedError("Resize: sizes")
            out = [_np_resize(x[0], x[2], a)]
        elif op == "Pad":
            pads = [int(p) for p in x[1]]
            r = x[0].ndim
            width = [(pads[i], pads[i + r]) for i in range(r)]
            mode = a.get("mode", b"constant").decode()
            if mode == "constant":
                value = x[2] if len(x) > 2 and x[2] is not None else 0
                out = [np.pad(x[0], width, mode="constant", constant_values=value)]
            else:
                out = [np.pad(x[0], width, mode={"reflect": "reflect", "edge": "edge"}[mode])]
        elif op == "Shape":
            out = [np.array(x[0].shape, dtype=np.int64)]
        elif op == "ConstantOfShape":
            value = onnx.numpy_helper.to_array(a["value"]) if "value" in a \
                else np.zeros(1, np.float32)
            out = [np.full(tuple(int(i) for i in x[0]), value[0], dtype=value.dtype)]
        elif op == "GlobalAveragePool":
            out = [np.mean(x[0], axis=(2, 3), keepdims=True)]
        elif op == "Mod":
            if a.get("fmod", 0) or x[0].dtype.kind != "i":
                raise NotImplementedError("Mod: fmod 1 or a float input")
            out = [np.mod(x[0], x[1])]  # the sign of the divisor, as fmod 0
        elif op == "Range":
            out = [np.arange(x[0], x[1], x[2]).astype(x[0].dtype)]
        elif op == "ScatterND":
            if a.get("reduction", b"none") != b"none":
                raise NotImplementedError("ScatterND: a reduction")
            y = np.copy(x[0])
            idx = x[1]
            k = idx.shape[-1]
            updates = x[2].reshape((-1,) + x[0].shape[k:])
            for i, where in enumerate(idx.reshape(-1, k)):
                y[tuple(int(j) for j in where)] = updates[i]
            out = [y]
        else:
            raise NotImplementedError(f"onnx_forward: op {op}")
        env.update(zip(node.output, out))
    return [env[o.name] for o in proto.graph.output]


def check_forward(proto, model, input_name, inputs, labels):
    """The file read by onnx_forward against PyTorch on batch 0: the largest
    logit difference and the loss from the file's logits."""
    logits = onnx_forward(proto, {input_name: inputs.numpy()})[0]
    with torch.no_grad():
        expected = model(inputs).numpy()
    z = logits.reshape(-1, logits.shape[-1]).astype(np.float64)
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    loss = float(-logp[np.arange(z.shape[0]), labels.numpy().reshape(-1)].mean())
    return {"max_abs_logit_difference": float(np.abs(logits - expected).max()),
            "loss0_from_onnx_float64": loss}


def sgd_losses(model, inputs, labels, batch, lr, steps):
    """The losses of steps 0..steps-1 of plain SGD, batch i at step i; and,
    for comparison, the loss of each batch with the initial weights."""
    untrained = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.0, weight_decay=0.0)
    losses, untrained_losses = [], []
    for i in range(steps):
        x = inputs[i * batch:(i + 1) * batch]
        y = labels[i * batch:(i + 1) * batch]
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
        with torch.no_grad():
            u = untrained(x)
            untrained_losses.append(float(F.cross_entropy(
                u.reshape(-1, u.shape[-1]), y.reshape(-1)).item()))
    return losses, untrained_losses


def exported_and_trained(out, name, model, inputs, labels, input_name, batch, lr, steps,
                         model_seed, training=True):
    """What every example does: export model as name.onnx (input_name), check
    its initializers and its forward pass against the file, save the inputs
    and labels as name_<input_name>.npy and name_labels.npy, train a copy
    steps SGD steps; returns the reference entry's fields that follow its
    "loss" (the same for every model). training False: exported, checked and
    trained in eval mode (.eval())."""
    initial = copy.deepcopy(model.state_dict())
    proto = export(model, inputs[:batch], input_name, os.path.join(out, name + ".onnx"),
                   training)
    model.load_state_dict(initial)  # tracing in training mode moved BatchNorm's statistics
    init_names = check_initializers(proto, model, training)
    model.train(training)
    forward = check_forward(proto, model, input_name, inputs[:batch], labels[:batch])
    model.load_state_dict(initial)  # and so did the check's forward pass
    np.save(os.path.join(out, f"{name}_{input_name}.npy"), inputs.numpy())
    np.save(os.path.join(out, name + "_labels.npy"), labels.numpy())
    losses, untrained = sgd_losses(model, inputs, labels, batch, lr, steps)
    return {
        "optimizer": {"name": "sgd", "lr": lr, "momentum": 0.0, "weight_decay": 0.0},
        "losses": losses,
        "losses_with_initial_weights": untrained,
        "parameters": sum(p.numel() for p in model.parameters()),
        "initializers": init_names,
        "buffers": [n for n in init_names if n not in dict(model.named_parameters())],
        "onnx_forward_check": forward,
        "ops": op_counts(proto),
        "nodes": len(proto.graph.node),
        "model_seed": model_seed,
    }


def image_model(reference, out, name, model_cls, model_seed, data_seed, steps, batch=8, lr=0.1,
                shape=(1, 28, 28), training=True, described=None):
    """An image classifier's files and reference entry: model_cls built after
    torch.manual_seed(model_seed), exported as name.onnx, its initializers
    and its forward pass checked against the file, then a copy trained
    steps SGD steps on cnn_data(data_seed) of images of the given shape
    (name_images.npy, name_labels.npy). training False: exported with
    TrainingMode.EVAL and trained in .eval(). described: further fields of
    the entry (after "batch")."""
    torch.manual_seed(model_seed)
    model = model_cls()
    images, labels = cnn_data(data_seed, steps, batch, shape)
    extra = dict(described or {})
    if not training:
        extra["export_flags"] = {"training": "torch.onnx.TrainingMode.EVAL",
                                 "do_constant_folding": False, "dynamic_axes": None}
        extra["pytorch_mode"] = "model.eval() while training: running statistics fixed"
        # What batch 0 would cost with the batch's statistics instead: a file
        # trained as in model.train() cannot match the losses.
        batch_statistics = copy.deepcopy(model).train()
        with torch.no_grad():
            extra["loss0_with_batch_statistics"] = float(F.cross_entropy(
                batch_statistics(images[:batch]), labels[:batch]).item())
    trained = exported_and_trained(out, name, model, images, labels, "images", batch, lr, steps,
                                   model_seed, training)
    reference["models"][name] = {
        "file": name + ".onnx",
        "input": {"name": "images", "file": name + "_images.npy", "dtype": "float32",
                  "shape": list(images.shape), "batch_shape": [batch, *shape],
                  "content": (f"torch.rand with torch.Generator seed {data_seed}: "
                              "uniform in [0, 1)")},
        "labels": {"file": name + "_labels.npy", "dtype": "int64", "shape": list(labels.shape),
                   "content": "torch.randint(0, 10) from the same generator, after the images"},
        "output": "logits",
        "output_shape": [batch, 10],
        "batch": batch,
        **extra,
        "loss": "cross-entropy of logits against the class labels, mean over the batch",
        **trained,
    }


def token_model(reference, out, name, model, tokens, labels, batch, lr, steps, model_seed,
                described):
    """A model of int64 byte tokens [rows, seq]: its files and reference
    entry, as image_model's (input "tokens": name_tokens.npy). described
    holds what differs between such models: input_content, labels_content,
    output_shape, config and loss."""
    trained = exported_and_trained(out, name, model, tokens, labels, "tokens", batch, lr, steps,
                                   model_seed)
    reference["models"][name] = {
        "file": name + ".onnx",
        "input": {"name": "tokens", "file": name + "_tokens.npy", "dtype": "int64",
                  "shape": list(tokens.shape), "batch_shape": [batch, tokens.shape[1]],
                  "content": described["input_content"]},
        "labels": {"file": name + "_labels.npy", "dtype": "int64", "shape": list(labels.shape),
                   "content": described["labels_content"]},
        "output": "logits",
        "output_shape": described["output_shape"],
        "batch": batch,
        "config": described["config"],
        "loss": described["loss"],
        **trained,
    }


def debian_version(package):
    """The Debian package's version (torch.__version__ of Debian's build says
    1.13.0a0 for 1.13.1), or None off Debian."""
    try:
        return subprocess.run(["dpkg-query", "-W", "-f=${Version}", package],
                              capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=here, help="output folder (default: this script's)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    # The tracer warns that 1 / sqrt(head size) becomes a constant: it is one.
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    steps = 3
    reference = {
        "generator": "examples/onnx/export.py",
        "torch_version": torch.__version__,
        "torch_debian_package": debian_version("python3-torch"),
        "torchvision_version": torchvision.__version__,
        "onnx_version": onnx.__version__,
        "opset": OPSET,
        "export_flags": {
            "training": "torch.onnx.TrainingMode.TRAINING",
            "do_constant_folding": False,
            "dynamic_axes": None,
        },
        "steps": steps,
        "step_rule": ("step i computes the loss of batch i (rows [i*batch, (i+1)*batch) of "
                      "the input and label files, in order) with the weights after i SGD "
                      "updates, then updates"),
        "models": {},
    }

    # -- The image classifiers: [8, 1, 28, 28] -> [8, 10] -------------------
    image_model(reference, args.out, "cnn", SmallCNN, 1301, 1302, steps)
    image_model(reference, args.out, "unet", SmallUNet, 1304, 1305, steps)
    image_model(reference, args.out, "mobilenet", SmallMobileNet, 1306, 1307, steps)
    image_model(reference, args.out, "swin", tiny_swin, 1309, 1310, steps, shape=(3, 32, 32),
                described={"config": {"torchvision": "models.swin_transformer.SwinTransformer",
                                      **SWIN_CONFIG},
                           "initial_weights": ("torchvision's, then every Linear redrawn by "
                                               "nn.Linear.reset_parameters and each "
                                               "relative_position_bias_table normal with std 1, "
                                               "in module order (tiny_swin)")})
    image_model(reference, args.out, "bn_eval", bn_eval_model, 1312, 1313, steps,
                training=False,
                described={"warmup": (f"before export, {BN_EVAL_WARMUP_BATCHES} forward passes "
                                      "in train mode (momentum 0.1, no gradients) over batches "
                                      "of 8 of cnn_data(seed "
                                      f"{BN_EVAL_WARMUP_SEED}): running statistics neither 0 "
                                      "nor 1")})

    image_model(reference, args.out, "rnn", RowRNN, 1314, 1315, steps, lr=1.0,
                described={"config": {"reads": "each image's 28 rows as 28 time steps",
                                      "conv1d": "28 -> 16, kernel 3, padding 1",
                                      "batchnorm1d": "16 channels of [B, 16, 28]",
                                      "gru": "16 -> 12, bidirectional",
                                      "lstm": "24 -> 16, 2 layers", "head": "last step"}})

    # -- GPT ---------------------------------------------------------------
    batch, seq, lr = 4, 32, 0.05
    torch.manual_seed(1303)
    gpt = SmallGPT(vocab=256, block_size=seq, d_model=64, n_head=2, n_layer=2)
    tokens, targets, text, files = gpt_data(steps, batch, seq)
    token_model(reference, args.out, "gpt", gpt, tokens, targets, batch, lr, steps, 1303, {
        "input_content": (f"byte ids; row r is bytes [r*{seq}, r*{seq}+{seq}) of the "
                          f"fortunes corpus ({FORTUNES_DIR}, the files without an "
                          f"extension concatenated in name order; the first "
                          f"{len(text)} bytes, from {', '.join(files)}; sha256 "
                          f"{hashlib.sha256(text).hexdigest()})"),
        "labels_content": "the next byte of each token: row r is bytes [r*32+1, r*32+33)",
        "output_shape": [batch, seq, 256],
        "config": {"vocab": 256, "seq": seq, "d_model": 64, "heads": 2, "layers": 2,
                   "mlp": 256, "norm": "pre-LayerNorm, eps 1e-5", "gelu": "exact (erf)",
                   "dropout": 0.0, "head": "untied Linear with bias"},
        "loss": "cross-entropy of logits against the next bytes, mean over all batch*seq tokens",
    })

    # -- A padded-text classifier: masks computed from the tokens ----------------
    batch, seq, classes, lr = 4, 32, 4, 0.05
    torch.manual_seed(1308)
    clf = PaddedTextClassifier(vocab=256, seq=seq, d_model=32, n_head=2, classes=classes)
    tokens, labels, text, files = padded_text_data(steps, batch, seq, classes)
    token_model(reference, args.out, "textclf", clf, tokens, labels, batch, lr, steps, 1308, {
        "input_content": (f"byte ids padded with 0: row r is bytes [r*{seq}, r*{seq}+n_r) "
                          f"of the fortunes corpus with n_r = {seq} - (7 r mod 13), then "
                          f"zeros (the first {len(text)} bytes, from {', '.join(files)}; "
                          f"sha256 {hashlib.sha256(text).hexdigest()})"),
        "labels_content": f"the number of spaces in each row's bytes, mod {classes}",
        "output_shape": [batch, classes],
        "config": {"vocab": 256, "seq": seq, "d_model": 32, "heads": 2, "layers": 1,
                   "feedforward": 64, "norm": "post-LayerNorm (nn.TransformerEncoderLayer)",
                   "gelu": "exact (erf)", "dropout": 0.0,
                   "masks": "key_padding_mask = tokens == 0; mean over tokens != 0"},
        "loss": "cross-entropy of logits against the class labels, mean over the batch",
    })

    for name, m in reference["models"].items():
        f = m["onnx_forward_check"]
        if (f["max_abs_logit_difference"] > 1e-4
                or abs(f["loss0_from_onnx_float64"] - m["losses"][0]) > 1e-5 * m["losses"][0]):
            sys.exit(f"export.py: {name}: the exported file does not compute what PyTorch "
                     f"computed: {f} against loss {m['losses'][0]}")
        m["sha256"] = {k: sha256(os.path.join(args.out, k))
                       for k in (m["file"], m["input"]["file"], m["labels"]["file"])}
    text = json.dumps(reference, indent=2)
    # Lists of numbers (shapes, losses) on one line each, for reading.
    text = re.sub(r"\[\s+([-+0-9.e,\s]+?)\s+\]",
                  lambda m: "[" + ", ".join(v.strip() for v in m.group(1).split(",")) + "]",
                  text)
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        f.write(text + "\n")
    for name, m in reference["models"].items():
        print(f"{name}: losses {m['losses']} ops {m['ops']}")


if __name__ == "__main__":
    main()
