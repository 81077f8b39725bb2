"""Export small PyTorch models to ONNX, the way real users export them (run by hand).

    pip install torch==2.13.0 && python tests/torch_models/export_models.py

Writes, for every model below, `tests/torch_models/<name>.onnx`, `<name>.input.npz` (the
input, keyed by the ONNX input name) and `<name>.expected.npz` (PyTorch's own outputs, keyed by
the ONNX output name), after checking that onnxruntime agrees with PyTorch. The committed
files are what `tests/test_torch_exports.py` checks the compiler against; neither that test nor
anything else in the repo imports torch.

The modules are written the way PyTorch code usually is (`x.view(x.size(0), -1)`, sizes read
from tensors, `.transpose`/`.reshape`, `F.interpolate`, `torch.cat`, BatchNorm, ReLU6,
depthwise convolutions, nn.Flatten + Dropout), so the exports contain the Shape -> Gather ->
Unsqueeze -> Concat -> Reshape chains, Clip-with-inputs, Resize-with-scales etc. that the
TorchScript exporter produces. Channel counts are small so that every file stays < 300 KB.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

OUT = Path(__file__).resolve().parent
MAX_BYTES = 300 * 1024


# ---------------------------------------------------------------------------------------------
# Modules
# ---------------------------------------------------------------------------------------------


class CnnViewFlatten(nn.Module):
    """LeNet-style CNN; `x.view(x.size(0), -1)` exports as Shape->Gather->Unsqueeze->Concat->
    Reshape."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 8, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(8 * 4 * 4, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.view(x.size(0), -1)
        x = F.relu(self.fc1(x))
        return self.fc2(x)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNetBlock(nn.Module):
    """Stem + identity block + downsampling block (1x1 conv + BN shortcut), global pool, fc."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True)
        )
        self.layer1 = BasicBlock(8, 8, 1)
        self.layer2 = BasicBlock(8, 16, 2)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer2(self.layer1(self.stem(x)))
        x = torch.flatten(self.pool(x), 1)
        return self.fc(x)


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.block = nn.Sequential(
            nn.Conv2d(cin, hidden, 1, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x) if self.use_res else self.block(x)


class MobileNetV2Block(nn.Module):
    """MobileNetV2 stem, two inverted residuals (ReLU6 = Clip, depthwise conv), mean, dropout,
    classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6(inplace=True)
        )
        self.ir1 = InvertedResidual(8, 8, 1, 4)
        self.ir2 = InvertedResidual(8, 16, 2, 4)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(16, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ir2(self.ir1(self.stem(x)))
        x = x.mean([2, 3])
        return self.classifier(x)


class SelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int, sdpa: bool) -> None:
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.size()
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = F.softmax(att, dim=-1)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)


class AttentionBlock(nn.Module):
    """Pre-norm transformer block: LayerNorm, multi-head self-attention, GELU MLP, residuals."""

    def __init__(self, dim: int = 16, heads: int = 2, sdpa: bool = False) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads, sdpa)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(
            nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim), nn.Dropout(0.1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class UpsampleDecoder(nn.Module):
    """Tiny U-Net: encoder, bottleneck, F.interpolate(scale_factor=2, 'nearest'), torch.cat
    skip connection, decoder convs."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.down = nn.MaxPool2d(2)
        self.mid = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
        self.dec = nn.Sequential(nn.Conv2d(16 + 8, 8, 3, padding=1), nn.ReLU())
        self.head = nn.Conv2d(8, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.enc(x)
        m = self.mid(self.down(e))
        u = F.interpolate(m, scale_factor=2, mode="nearest")
        d = self.dec(torch.cat([u, e], dim=1))
        return torch.sigmoid(self.head(d))


class MlpFlattenDropout(nn.Module):
    """nn.Flatten + Linear + ReLU + Dropout (eval mode) + Linear + LogSoftmax."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(),
            nn.Linear(64, 32),
            nn.ReLU(),
            nn.Dropout(0.5),
            nn.Linear(32, 16),
            nn.ReLU(),
            nn.Dropout(0.5),
            nn.Linear(16, 10),
            nn.LogSoftmax(dim=1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class LstmClassifier(nn.Module):
    """Two-layer LSTM over a batch-first sequence; the last step's output -> Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(8, 16, num_layers=2, batch_first=True)
        self.fc = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(x)
        return self.fc(y[:, -1])


class GruSequence(nn.Module):
    """Sequence-major GRU from a learned initial state; every step's output -> tanh(Linear)."""

    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(8, 12)
        self.h0 = nn.Parameter(torch.randn(1, 1, 12) * 0.1)
        self.head = nn.Linear(12, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h0 = self.h0.expand(1, x.size(1), 12).contiguous()
        y, _ = self.gru(x, h0)
        return torch.tanh(self.head(y))


class BiLstmTagger(nn.Module):
    """Bidirectional LSTM tagger: per-step Linear over both directions, log-softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(8, 10, bidirectional=True, batch_first=True)
        self.tag = nn.Linear(20, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(x)
        return F.log_softmax(self.tag(y), dim=-1)


class TransformerOpsBlock(nn.Module):
    """A BERT-/Swin-like block written with the ops real exports add to plain attention:
    position ids as the cumsum of a mask (CumSum), a phase embedding read at `pos % 3` (Mod),
    attention scores by einsum (Einsum), a relative-position bias read with torch.gather
    (GatherElements), a causal re-weighting by torch.tril (Trilu), GroupNorm, an in-place write
    of the first token (ScatterND), top-k pooling (TopK) and the pooled rows picked by advanced
    indexing (GatherND), values snapped by torch.round (Round)."""

    def __init__(self, dim: int = 16, heads: int = 2, seq: int = 8) -> None:
        super().__init__()
        self.heads = heads
        self.pos = nn.Embedding(seq + 1, dim)
        self.phase = nn.Embedding(3, dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.rel = nn.Parameter(torch.randn(heads, seq, 2 * seq - 1) * 0.1)
        rel_idx = torch.arange(seq)[None, :] - torch.arange(seq)[:, None] + seq - 1
        self.register_buffer("rel_idx", rel_idx.expand(heads, seq, seq).contiguous())
        self.norm = nn.GroupNorm(4, dim)
        self.cls = nn.Parameter(torch.randn(dim) * 0.1)
        self.out = nn.Linear(dim, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.size()
        d = c // self.heads
        mask = (x[..., 0] > -100.0).long()
        pos_ids = torch.cumsum(mask, dim=1) * mask
        h = x + self.pos(pos_ids) + self.phase(pos_ids % 3)
        h[:, 0] = self.cls
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        q = q.reshape(b, t, self.heads, d)
        k = k.reshape(b, t, self.heads, d)
        v = v.reshape(b, t, self.heads, d)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d)
        bias = torch.gather(self.rel, 2, self.rel_idx)
        att = F.softmax(scores + bias, dim=-1)
        att = torch.tril(att)
        att = att / att.sum(dim=-1, keepdim=True)
        y = torch.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, t, c)
        h = h + self.proj(y)
        h = self.norm(h.transpose(1, 2)).transpose(1, 2)
        score = h.mean(dim=-1)
        _, top = score.topk(3, dim=1)
        rows = torch.arange(b).unsqueeze(1).expand(b, 3)
        picked = h[rows, top]
        pooled = torch.round(picked.mean(dim=1) * 8) / 8
        return self.out(pooled)


# ---------------------------------------------------------------------------------------------
# The exported set
# ---------------------------------------------------------------------------------------------


@dataclass
class Spec:
    name: str
    make: Callable[..., nn.Module]
    input_shape: tuple[int, ...]
    opset: int = 17
    kwargs: dict = field(default_factory=dict)
    dynamic_batch: bool = False
    # torch.onnx.export's do_constant_folding; False keeps the exporter's shape arithmetic
    # (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) even where the shapes are static.
    fold: bool = True
    # The dynamo exporter (torch.export + onnxscript) instead of the TorchScript one.
    dynamo: bool = False


SPECS = [
    Spec("cnn_view_flatten", CnnViewFlatten, (1, 1, 16, 16)),
    Spec("cnn_view_flatten_unfolded", CnnViewFlatten, (1, 1, 16, 16), fold=False),
    Spec("cnn_view_flatten_dynamic_batch", CnnViewFlatten, (1, 1, 16, 16), dynamic_batch=True),
    Spec("resnet_block", ResNetBlock, (1, 3, 16, 16)),
    Spec("mobilenetv2_block", MobileNetV2Block, (1, 3, 32, 32), opset=13),
    Spec("attention_block", AttentionBlock, (1, 8, 16)),
    Spec(
        "attention_sdpa_dynamic_batch",
        AttentionBlock,
        (1, 8, 16),
        kwargs={"sdpa": True},
        dynamic_batch=True,
    ),
    Spec("attention_block_opset13_unfolded", AttentionBlock, (1, 8, 16), opset=13, fold=False),
    Spec("unet_decoder", UpsampleDecoder, (1, 3, 16, 16)),
    Spec(
        "unet_decoder_dynamic_batch_unfolded",
        UpsampleDecoder,
        (1, 3, 16, 16),
        dynamic_batch=True,
        fold=False,
    ),
    Spec("mlp_flatten_dropout", MlpFlattenDropout, (1, 1, 8, 8), opset=13),
    Spec("lstm_classifier", LstmClassifier, (1, 6, 8)),
    Spec("gru_sequence", GruSequence, (6, 1, 8)),
    Spec("bilstm_tagger", BiLstmTagger, (1, 6, 8)),
    Spec("transformer_ops_block", TransformerOpsBlock, (1, 8, 16)),
    Spec("lstm_classifier_dynamo", LstmClassifier, (1, 6, 8), opset=18, dynamo=True),
    Spec("gru_sequence_dynamo", GruSequence, (6, 1, 8), opset=18, dynamo=True),
    Spec("bilstm_tagger_dynamo", BiLstmTagger, (1, 6, 8), opset=18, dynamo=True),
    Spec("transformer_ops_block_dynamo", TransformerOpsBlock, (1, 8, 16), opset=18, dynamo=True),
]


def _randomize_batchnorm(model: nn.Module, gen: torch.Generator) -> None:
    """Give BatchNorm non-trivial running statistics and affine parameters (as trained nets
    have), so BN folding is really exercised."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            n = m.num_features
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(n, generator=gen) * 0.5)
                m.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
                m.weight.copy_(torch.rand(n, generator=gen) + 0.5)
                m.bias.copy_(torch.randn(n, generator=gen) * 0.2)


def _ort_run(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def export(spec: Spec, out: Path, quiet: bool) -> None:
    import onnx

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    model = spec.make(**spec.kwargs)
    _randomize_batchnorm(model, gen)
    model.eval()
    rng = np.random.RandomState(0)
    x = rng.standard_normal(spec.input_shape).astype(np.float32)
    with torch.no_grad():
        expected = model(torch.from_numpy(x)).numpy()

    path = out / f"{spec.name}.onnx"
    kwargs = {}
    if spec.dynamic_batch:
        kwargs["dynamic_axes"] = {"input": {0: "batch"}, "output": {0: "batch"}}
    if spec.dynamo:
        program = torch.onnx.export(
            model,
            (torch.from_numpy(x),),
            input_names=["input"],
            output_names=["output"],
            opset_version=spec.opset,
            dynamo=True,
            optimize=True,
        )
        program.save(str(path), external_data=False)
    else:
        torch.onnx.export(
            model,
            (torch.from_numpy(x),),
            str(path),
            input_names=["input"],
            output_names=["output"],
            opset_version=spec.opset,
            dynamo=False,
            do_constant_folding=spec.fold,
            **kwargs,
        )
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)

    np.savez(out / f"{spec.name}.input.npz", input=x)
    np.savez(out / f"{spec.name}.expected.npz", output=expected)

    (got,) = _ort_run(path, {"input": x})
    np.testing.assert_allclose(
        got,
        expected,
        rtol=1e-4,
        atol=1e-5,
        err_msg=f"{spec.name}: onnxruntime disagrees with PyTorch",
    )
    if spec.dynamic_batch:  # the symbolic batch really is dynamic
        x3 = rng.standard_normal((3, *spec.input_shape[1:])).astype(np.float32)
        with torch.no_grad():
            e3 = model(torch.from_numpy(x3)).numpy()
        (g3,) = _ort_run(path, {"input": x3})
        np.testing.assert_allclose(g3, e3, rtol=1e-4, atol=1e-5)
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise SystemExit(f"{path} is {size} bytes (> {MAX_BYTES}); shrink the model")
    if not quiet:
        ops = sorted({n.op_type for n in proto.graph.node})
        print(
            f"{spec.name:32s} opset {spec.opset:2d} {size:7d} B  "
            f"{len(proto.graph.node):3d} nodes  {' '.join(ops)}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("names", nargs="*", help="export only these models")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    for spec in SPECS:
        if not args.names or spec.name in args.names:
            export(spec, args.out, args.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
