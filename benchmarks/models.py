"""Generators of full-size ONNX models with random weights (onnx.helper only), for the memory and
speed benchmarks.

ResNet-50, DenseNet-121, Inception (GoogLeNet / Inception-v1), VGG-19, MobileNet-v2, ShuffleNet-v2 and
a BERT-base encoder here; the
mobile families (MobileNetV3-Small, MNASNet, EfficientNet-B0: `models_mobile.py`) and the
transformer families (GPT-2, Whisper encoder, BERT, ViT, tiny: `models_transformer.py`), with
the layer shapes of the published networks and the node patterns of PyTorch's exports. Nothing
is downloaded. `python benchmarks/models.py --out benchmarks/models [--only resnet50 ...]`.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.models_mobile import MOBILE_BUILDERS  # noqa: E402
from benchmarks.models_transformer import TRANSFORMER_BUILDERS  # noqa: E402
from benchmarks.netbuilder import IR_VERSION, OPSET, Net  # noqa: E402


def build_resnet50(
    batch: int = 1, image: int = 224, classes: int = 1000, seed: int = 0
) -> onnx.ModelProto:
    """ResNet-50 v1.5: bottleneck blocks [3, 4, 6, 3], BatchNorm, residual adds."""
    n = Net("resnet50", seed)
    x = n.relu(n.bn(n.conv("input", 3, 64, 7, 2, 3, bias=False), 64))
    x = n.maxpool(x, 3, 2, 1)
    cin = 64
    for stage, (blocks, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512))):
        for b in range(blocks):
            stride = 2 if (b == 0 and stage > 0) else 1
            cout = width * 4
            y = n.relu(n.bn(n.conv(x, cin, width, 1, bias=False), width))
            y = n.relu(n.bn(n.conv(y, width, width, 3, stride, bias=False), width))
            y = n.bn(n.conv(y, width, cout, 1, bias=False), cout)
            sc = x
            if b == 0:
                sc = n.bn(n.conv(x, cin, cout, 1, stride, bias=False), cout)
            x = n.relu(n.op("Add", [y, sc], "add"))
            cin = cout
    n.classifier(x, cin, classes)
    return n.model("input", "output", (batch, 3, image, image), (batch, classes))


def build_densenet121(
    batch: int = 1, image: int = 224, classes: int = 1000, seed: int = 0
) -> onnx.ModelProto:
    """DenseNet-121: dense blocks [6, 12, 24, 16], growth 32, BN-ReLU-Conv, concat growth."""
    n = Net("densenet121", seed)
    x = n.relu(n.bn(n.conv("input", 3, 64, 7, 2, 3, bias=False), 64))
    x = n.maxpool(x, 3, 2, 1)
    c, growth = 64, 32
    for i, layers in enumerate((6, 12, 24, 16)):
        for _ in range(layers):
            y = n.conv(n.relu(n.bn(x, c)), c, 4 * growth, 1, bias=False)
            y = n.conv(n.relu(n.bn(y, 4 * growth)), 4 * growth, growth, 3, bias=False)
            x = n.op("Concat", [x, y], "concat", axis=1)
            c += growth
        if i < 3:
            x = n.conv(n.relu(n.bn(x, c)), c, c // 2, 1, bias=False)
            c //= 2
            x = n.avgpool(x, 2, 2)
    x = n.relu(n.bn(x, c))
    n.classifier(x, c, classes)
    return n.model("input", "output", (batch, 3, image, image), (batch, classes))


_GOOGLENET = [  # (1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool proj), "M" = max pool 3/2
    (64, 96, 128, 16, 32, 32),
    (128, 128, 192, 32, 96, 64),
    "M",
    (192, 96, 208, 16, 48, 64),
    (160, 112, 224, 24, 64, 64),
    (128, 128, 256, 24, 64, 64),
    (112, 144, 288, 32, 64, 64),
    (256, 160, 320, 32, 128, 128),
    "M",
    (256, 160, 320, 32, 128, 128),
    (384, 192, 384, 48, 128, 128),
]


def build_inception(
    batch: int = 1, image: int = 224, classes: int = 1000, seed: int = 0
) -> onnx.ModelProto:
    """Inception-v1 (GoogLeNet) without auxiliary heads: 9 four-branch modules joined by Concat."""
    n = Net("inception", seed)
    x = n.maxpool(n.relu(n.conv("input", 3, 64, 7, 2, 3)), 3, 2, 1)
    x = n.relu(n.conv(x, 64, 64, 1))
    x = n.maxpool(n.relu(n.conv(x, 64, 192, 3)), 3, 2, 1)
    c = 192
    for spec in _GOOGLENET:
        if spec == "M":
            x = n.maxpool(x, 3, 2, 1)
            continue
        a, r3, b3, r5, b5, pp = spec  # type: ignore[misc]
        br1 = n.relu(n.conv(x, c, a, 1))
        br2 = n.relu(n.conv(n.relu(n.conv(x, c, r3, 1)), r3, b3, 3))
        br3 = n.relu(n.conv(n.relu(n.conv(x, c, r5, 1)), r5, b5, 5))
        br4 = n.relu(n.conv(n.maxpool(x, 3, 1, 1), c, pp, 1))
        x = n.op("Concat", [br1, br2, br3, br4], "concat", axis=1)
        c = a + b3 + b5 + pp
    n.classifier(x, c, classes)
    return n.model("input", "output", (batch, 3, image, image), (batch, classes))


_VGG19 = [
    64,
    64,
    "M",
    128,
    128,
    "M",
    256,
    256,
    256,
    256,
    "M",
    512,
    512,
    512,
    512,
    "M",
    512,
    512,
    512,
    512,
    "M",
]


def build_vgg19(
    batch: int = 1, image: int = 224, classes: int = 1000, seed: int = 0
) -> onnx.ModelProto:
    """VGG-19 (about 548 MB of weights at full size: 16 3x3 convs and three large FC layers)."""
    n = Net("vgg19", seed)
    x, c = "input", 3
    for v in _VGG19:
        if v == "M":
            x = n.maxpool(x, 2, 2)
        else:
            x = n.relu(n.conv(x, c, int(v), 3))
            c = int(v)
    side = image // 32
    x = n.op("Flatten", [x], "flatten", axis=1)
    dims = [c * side * side, 4096, 4096, classes]
    for i in range(3):
        w = n.const("fc_w", n.weight((dims[i + 1], dims[i]), dims[i]))
        b = n.const("fc_b", np.zeros(dims[i + 1], np.float32))
        x = n.op("Gemm", [x, w, b], "fc", transB=1)
        if i < 2:
            x = n.relu(x)
    return n.model("input", "output", (batch, 3, image, image), (batch, classes))


_MBV2 = [
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
]  # (expansion, channels, repeats, first stride)


def build_mobilenet(
    batch: int = 1, image: int = 224, classes: int = 1000, seed: int = 0
) -> onnx.ModelProto:
    """MobileNet-v2: inverted residuals, depthwise 3x3 convs, BatchNorm, Clip(0, 6)."""
    n = Net("mobilenet", seed)
    x = n.relu6(n.bn(n.conv("input", 3, 32, 3, 2, bias=False), 32))
    c = 32
    for t, cout, reps, s in _MBV2:
        for r in range(reps):
            stride = s if r == 0 else 1
            hidden = c * t
            y = x
            if t != 1:
                y = n.relu6(n.bn(n.conv(y, c, hidden, 1, bias=False), hidden))
            y = n.relu6(
                n.bn(n.conv(y, hidden, hidden, 3, stride, group=hidden, bias=False), hidden)
            )
            y = n.bn(n.conv(y, hidden, cout, 1, bias=False), cout)
            x = n.op("Add", [x, y], "add") if stride == 1 and c == cout else y
            c = cout
    x = n.relu6(n.bn(n.conv(x, c, 1280, 1, bias=False), 1280))
    n.classifier(x, 1280, classes)
    return n.model("input", "output", (batch, 3, image, image), (batch, classes))


_SHUFFLE_WIDTHS = {
    0.5: ((48, 96, 192), 1024),
    1.0: ((116, 232, 464), 1024),
    1.5: ((176, 352, 704), 1024),
    2.0: ((244, 488, 976), 2048),
}


def build_shufflenet(
    batch: int = 1, image: int = 224, classes: int = 1000, seed: int = 0, width: float = 1.0
) -> onnx.ModelProto:
    """ShuffleNet-v2 (`width` 0.5, 1.0, 1.5 or 2.0): channel split, two-branch units joined by Concat, channel shuffle
    (Reshape-Transpose-Reshape), depthwise 3x3 convs, BatchNorm."""
    n = Net("shufflenet", seed)
    x = n.relu(n.bn(n.conv("input", 3, 24, 3, 2, bias=False), 24))
    x = n.maxpool(x, 3, 2, 1)
    c, side = 24, image // 4

    def conv_bn(v: str, cin: int, cout: int, k: int, stride: int = 1, relu: bool = True) -> str:
        group = cin if k == 3 else 1  # the 3x3 convs of ShuffleNet are depthwise
        y = n.bn(n.conv(v, cin, cout, k, stride, group=group, bias=False), cout)
        return n.relu(y) if relu else y

    def shuffle(v: str, ch: int, hw: int) -> str:
        s5 = n.const("shape", np.array([batch, 2, ch // 2, hw, hw], np.int64))
        s4 = n.const("shape", np.array([batch, ch, hw, hw], np.int64))
        t = n.op(
            "Transpose", [n.op("Reshape", [v, s5], "reshape")], "shuffle", perm=[0, 2, 1, 3, 4]
        )
        return n.op("Reshape", [t, s4], "reshape")

    stages, last = _SHUFFLE_WIDTHS[width]
    for units, cout in zip((4, 8, 4), stages):
        half = cout // 2
        for u in range(units):
            if u == 0:
                side = (side + 1) // 2
                b1 = conv_bn(conv_bn(x, c, c, 3, 2, relu=False), c, half, 1)
                b2 = conv_bn(x, c, half, 1)
                b2 = conv_bn(conv_bn(b2, half, half, 3, 2, relu=False), half, half, 1)
            else:
                sizes = n.const("split", np.array([half, half], np.int64))
                b1, rest = n.fresh("split"), n.fresh("split")
                n.nodes.append(helper.make_node("Split", [x, sizes], [b1, rest], name=b1, axis=1))
                b2 = conv_bn(rest, half, half, 1)
                b2 = conv_bn(conv_bn(b2, half, half, 3, relu=False), half, half, 1)
            x = shuffle(n.op("Concat", [b1, b2], "concat", axis=1), cout, side)
            c = cout
    x = conv_bn(x, c, last, 1)
    n.classifier(x, last, classes)
    return n.model("input", "output", (batch, 3, image, image), (batch, classes))


def build_bert(
    batch: int = 1,
    seq: int = 128,
    hidden: int = 768,
    heads: int = 12,
    layers: int = 12,
    seed: int = 0,
) -> onnx.ModelProto:
    """A BERT-base encoder (no embeddings: the input is the embedded sequence): post-norm layers
    of 12-head self-attention and a 3072-wide Erf-GELU feed-forward, residual adds."""
    n = Net("bert", seed)
    dh, ffn = hidden // heads, 4 * hidden

    def linear(v: str, cin: int, cout: int) -> str:
        w = n.const("w", n.weight((cin, cout), cin))
        b = n.const("b", np.zeros(cout, np.float32))
        return n.op("Add", [n.op("MatMul", [v, w], "matmul"), b], "bias")

    def layernorm(v: str) -> str:
        scale = n.const("ln_scale", (1.0 + 0.1 * n.rng.standard_normal(hidden)).astype(np.float32))
        shift = n.const("ln_bias", (0.1 * n.rng.standard_normal(hidden)).astype(np.float32))
        return n.op("LayerNormalization", [v, scale, shift], "ln", axis=-1, epsilon=1e-12)

    split = n.const("shape", np.array([batch, seq, heads, dh], np.int64))
    merge = n.const("shape", np.array([batch, seq, hidden], np.int64))
    scale = n.const("scale", np.array(1.0 / math.sqrt(dh), np.float32))
    sqrt2 = n.const("sqrt2", np.array(math.sqrt(2.0), np.float32))
    one = n.const("one", np.array(1.0, np.float32))
    half = n.const("half", np.array(0.5, np.float32))
    x = "input"
    for _ in range(layers):
        heads_of = [
            n.op(
                "Transpose",
                [n.op("Reshape", [linear(x, hidden, hidden), split], "reshape")],
                "transpose",
                perm=perm,
            )
            for perm in ([0, 2, 1, 3], [0, 2, 3, 1], [0, 2, 1, 3])
        ]
        q, k, v = heads_of
        att = n.op(
            "Softmax",
            [n.op("Mul", [n.op("MatMul", [q, k], "scores"), scale], "mul")],
            "softmax",
            axis=-1,
        )
        ctx = n.op(
            "Transpose", [n.op("MatMul", [att, v], "context")], "transpose", perm=[0, 2, 1, 3]
        )
        ctx = n.op("Reshape", [ctx, merge], "reshape")
        x = layernorm(n.op("Add", [x, linear(ctx, hidden, hidden)], "residual"))
        h = linear(x, hidden, ffn)
        e = n.op("Add", [n.op("Erf", [n.op("Div", [h, sqrt2], "div")], "erf"), one], "add")
        h = n.op("Mul", [n.op("Mul", [h, e], "mul"), half], "gelu")
        x = layernorm(n.op("Add", [x, linear(h, ffn, hidden)], "residual"))
    shape = (batch, seq, hidden)
    return n.model("input", "output", shape, shape)


BUILDERS: dict[str, Callable[..., onnx.ModelProto]] = {
    "resnet50": build_resnet50,
    "densenet121": build_densenet121,
    "inception": build_inception,
    "vgg19": build_vgg19,
    "mobilenet": build_mobilenet,
    "shufflenet": build_shufflenet,
    "shufflenet_2x": partial(build_shufflenet, width=2.0),
    "bert": build_bert,
    **MOBILE_BUILDERS,
    **TRANSFORMER_BUILDERS,
}


def _vector_model(
    name: str, nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto] | None = None
) -> onnx.ModelProto:
    """A model over one 1x8 float input `x` and output `y` (graph-size benchmarks)."""
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 8]) for n in ("x", "y")]
    graph = helper.make_graph(nodes, name, io[:1], io[1:], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    return model


def build_chain(length: int = 3000) -> onnx.ModelProto:
    """`length` element-wise nodes in one chain (Neg, Relu alternating: nothing folds them)."""
    nodes, prev = [], "x"
    for i in range(length):
        out = "y" if i == length - 1 else f"v{i}"
        nodes.append(helper.make_node("Relu" if i % 2 else "Neg", [prev], [out], name=f"n{i}"))
        prev = out
    return _vector_model(f"chain{length}", nodes)


def build_matmul_chain(length: int = 3000) -> onnx.ModelProto:
    """A MatMul followed by a chain of `length` element-wise nodes (Neg first, so no Relu
    fuses into it): the LLVM backend's epilogue finder runs the chain on the MatMul's lanes."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 8], np.eye(8, dtype=np.float32).ravel())
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul")]
    nodes += build_chain(length).graph.node
    nodes[1].input[0] = "m"
    return _vector_model(f"matmul_chain{length}", nodes, [w])


def build_fanout(users: int = 2000) -> onnx.ModelProto:
    """One input read by `users` Relu nodes, all summed by one Sum node."""
    nodes = [helper.make_node("Relu", ["x"], [f"r{i}"], name=f"r{i}") for i in range(users)]
    nodes.append(helper.make_node("Sum", [f"r{i}" for i in range(users)], ["y"], name="sum"))
    return _vector_model(f"fanout{users}", nodes)


def write_model(name: str, out_dir: Path, **kwargs) -> Path:
    """Build model `name` and write `<out_dir>/<name>.onnx` (checked by onnx.checker)."""
    model = BUILDERS[name](**kwargs)
    onnx.checker.check_model(model)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.onnx"
    tmp = path.with_suffix(".onnx.tmp")
    tmp.write_bytes(model.SerializeToString())
    tmp.replace(path)
    return path


def ensure_model(
    name: str, out_dir: Path | str = Path(__file__).resolve().parent / "models", **kwargs
) -> Path:
    """The model's path, generating it first if it is not there yet."""
    path = Path(out_dir) / f"{name}.onnx"
    return path if path.exists() else write_model(name, Path(out_dir), **kwargs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "models")
    ap.add_argument("--only", nargs="*", choices=sorted(BUILDERS), default=None)
    ap.add_argument("--batch", type=int, default=1)
    args = ap.parse_args(argv)
    for name in args.only or BUILDERS:
        kwargs = {"batch": args.batch} if args.batch != 1 else {}
        path = write_model(name, args.out, **kwargs)
        print(f"{path}  {path.stat().st_size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
