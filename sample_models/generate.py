"""Builds glowviz's sample ONNX models deterministically, with onnx.helper only.

Each model gets `<name>.onnx`, a recorded input `<name>.input.npz` and onnxruntime's output
`<name>.expected.npz`. Run `python sample_models/generate.py [--out DIR]`.
"""

from __future__ import annotations

import argparse
import io
import math
import sys
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
PRODUCER = "glowviz-sample-models"
# The oldest IR version each opset may be stored with (onnx.helper.VERSION_TABLE).
IR_FOR_OPSET = {9: 4, 17: 8}


class GraphBuilder:
    """Accumulates nodes and initializers with unique, readable names."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._counts: dict[str, int] = {}

    def fresh(self, prefix: str) -> str:
        n = self._counts.get(prefix, 0)
        self._counts[prefix] = n + 1
        return f"{prefix}_{n}"

    def const(self, prefix: str, value: np.ndarray) -> str:
        name = self.fresh(prefix)
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def op(self, op_type: str, inputs: Sequence[str], prefix: str | None = None, **attrs) -> str:
        name = self.fresh(prefix or op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [name], name=name, **attrs))
        return name

    # Weights -----------------------------------------------------------------------------

    def normal(self, shape: Sequence[int], std: float) -> np.ndarray:
        return (self.rng.standard_normal(shape) * std).astype(np.float32)

    def he(self, shape: Sequence[int], fan_in: int) -> np.ndarray:
        return self.normal(shape, math.sqrt(2.0 / fan_in))

    # Layers ------------------------------------------------------------------------------

    #: Name prefixes of a conv layer's weight and bias initializers.
    CONV_NAMES = ("conv.weight", "conv.bias")

    def conv_weight(self, shape: Sequence[int], fan_in: int) -> np.ndarray:
        return self.he(shape, fan_in)

    def conv_bias(self, cout: int) -> np.ndarray:
        return self.normal((cout,), 0.05)

    def conv(
        self,
        x: str,
        cin: int,
        cout: int,
        k: int,
        stride: int = 1,
        pad: int | None = None,
        group: int = 1,
        bias: bool = True,
    ) -> str:
        """A k x k Conv ("same" padding unless `pad`); subclasses choose the initial weights and
        the initializers' names (the benchmark models' Net)."""
        pad = k // 2 if pad is None else pad
        fan_in = (cin // group) * k * k
        w = self.const(self.CONV_NAMES[0], self.conv_weight((cout, cin // group, k, k), fan_in))
        inputs = [x, w]
        if bias:
            inputs.append(self.const(self.CONV_NAMES[1], self.conv_bias(cout)))
        attrs = dict(kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)
        if group != 1:
            attrs["group"] = group
        return self.op("Conv", inputs, **attrs)

    def batchnorm(self, x: str, c: int, gamma: tuple[float, float] = (0.5, 1.5)) -> str:
        scale = self.rng.uniform(*gamma, c).astype(np.float32)
        shift = self.normal((c,), 0.1)
        mean = self.normal((c,), 0.1)
        var = self.rng.uniform(0.5, 1.5, c).astype(np.float32)
        names = [
            self.const("bn.scale", scale),
            self.const("bn.bias", shift),
            self.const("bn.mean", mean),
            self.const("bn.var", var),
        ]
        return self.op("BatchNormalization", [x, *names], prefix="bn", epsilon=1e-5)

    def gemm(self, x: str, cin: int, cout: int) -> str:
        # PyTorch's Linear layout: weight [out, in] with transB=1.
        w = self.const("fc.weight", self.he((cout, cin), cin))
        b = self.const("fc.bias", self.normal((cout,), 0.05))
        return self.op("Gemm", [x, w, b], prefix="fc", transB=1)

    def relu(self, x: str) -> str:
        return self.op("Relu", [x])

    def maxpool2(self, x: str) -> str:
        return self.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])


def make_model(
    b: GraphBuilder,
    name: str,
    out_name: str,
    *,
    in_shape: Sequence[int],
    out_shape: Sequence[int],
    doc: str,
    opset: int = 17,
) -> onnx.ModelProto:
    # The last node's result is renamed to "output" so every model has the same interface.
    for node in b.nodes:
        node.output[:] = ["output" if o == out_name else o for o in node.output]
        node.input[:] = ["output" if i == out_name else i for i in node.input]
    graph = helper.make_graph(
        b.nodes,
        name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(in_shape))],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, list(out_shape))],
        initializer=b.initializers,
        doc_string=doc,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset)],
        producer_name=PRODUCER,
        producer_version="0.1.0",
        ir_version=IR_FOR_OPSET[opset],
    )
    model.doc_string = doc
    return model


# Models ------------------------------------------------------------------------------------


def build_mlp(opset: int = 17) -> onnx.ModelProto:
    b = GraphBuilder(seed=1001)
    x = b.relu(b.gemm("input", 64, 128))
    x = b.relu(b.gemm(x, 128, 64))
    x = b.gemm(x, 64, 10)
    x = b.op("Softmax", [x], axis=1)
    return make_model(
        b,
        "mlp",
        x,
        in_shape=[1, 64],
        out_shape=[1, 10],
        opset=opset,
        doc="MLP 64-128-64-10 with ReLU and Softmax.",
    )


def build_lenet() -> onnx.ModelProto:
    b = GraphBuilder(seed=1002)
    x = b.maxpool2(b.relu(b.conv("input", 1, 6, 5)))
    x = b.maxpool2(b.relu(b.conv(x, 6, 16, 5, pad=0)))
    # x.view(x.size(0), -1) as PyTorch exports it: a shape subgraph that must fold.
    shape = b.op("Shape", [x])
    zero = b.const("idx", np.array(0, dtype=np.int64))
    batch = b.op("Gather", [shape, zero], axis=0)
    axes = b.const("axes", np.array([0], dtype=np.int64))
    batch1 = b.op("Unsqueeze", [batch, axes])
    minus1 = b.const("dim", np.array([-1], dtype=np.int64))
    new_shape = b.op("Concat", [batch1, minus1], axis=0)
    x = b.op("Reshape", [x, new_shape])
    # 28 -> 28 (pad 2) -> 14 -> 10 (no pad) -> 5: 16 * 5 * 5 features.
    x = b.relu(b.gemm(x, 16 * 5 * 5, 120))
    x = b.relu(b.gemm(x, 120, 84))
    x = b.gemm(x, 84, 10)
    return make_model(
        b,
        "lenet",
        x,
        in_shape=[1, 1, 28, 28],
        out_shape=[1, 10],
        doc="LeNet-5 style CNN with a PyTorch-style flatten (Shape/Gather/Unsqueeze/Concat/Reshape).",
    )


def build_resnet_small() -> onnx.ModelProto:
    b = GraphBuilder(seed=1003)
    x = b.relu(b.batchnorm(b.conv("input", 3, 16, 3, bias=False), 16))
    cin = 16
    for cout in (16, 32, 64):
        for block in range(2):
            stride = 2 if (block == 0 and cout != cin) else 1
            y = b.relu(b.batchnorm(b.conv(x, cin, cout, 3, stride, bias=False), cout))
            # A small last gamma keeps the residual stream O(1), as zero-init-residual does.
            y = b.batchnorm(b.conv(y, cout, cout, 3, bias=False), cout, gamma=(0.2, 0.5))
            if stride != 1 or cin != cout:
                short = b.batchnorm(b.conv(x, cin, cout, 1, stride, bias=False), cout)
            else:
                short = x
            x = b.relu(b.op("Add", [y, short]))
            cin = cout
    x = b.op("GlobalAveragePool", [x], prefix="gap")
    x = b.op("Flatten", [x], axis=1)
    x = b.gemm(x, 64, 10)
    return make_model(
        b,
        "resnet_small",
        x,
        in_shape=[1, 3, 32, 32],
        out_shape=[1, 10],
        doc="ResNet-style CNN: stem + 3 stages x 2 basic blocks (16/32/64 channels), BatchNorm.",
    )


def build_mobilenet_small() -> onnx.ModelProto:
    b = GraphBuilder(seed=1004)
    lo = b.const("clip.min", np.array(0.0, dtype=np.float32))
    hi = b.const("clip.max", np.array(6.0, dtype=np.float32))

    def relu6(v: str) -> str:
        return b.op("Clip", [v, lo, hi])

    def conv_bn(v: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1) -> str:
        return b.batchnorm(b.conv(v, cin, cout, k, stride, group=group, bias=False), cout)

    x = relu6(conv_bn("input", 3, 16, 3, stride=2))
    cin = 16
    for cout, stride in ((24, 1), (32, 2), (48, 1), (64, 2)):
        x = relu6(conv_bn(x, cin, cin, 3, stride, group=cin))  # depthwise
        x = relu6(conv_bn(x, cin, cout, 1))  # pointwise
        cin = cout
    # Inverted residual: expand 1x1, depthwise 3x3, linear projection, Add.
    y = relu6(conv_bn(x, 64, 128, 1))
    y = relu6(conv_bn(y, 128, 128, 3, group=128))
    y = conv_bn(y, 128, 64, 1)
    x = b.op("Add", [x, y])
    x = b.op("GlobalAveragePool", [x], prefix="gap")
    x = b.op("Flatten", [x], axis=1)
    x = b.gemm(x, 64, 10)
    return make_model(
        b,
        "mobilenet_small",
        x,
        in_shape=[1, 3, 32, 32],
        out_shape=[1, 10],
        doc="MobileNet-style CNN: depthwise-separable blocks with ReLU6 as Clip, one inverted residual.",
    )


def build_transformer_block() -> onnx.ModelProto:
    seq, d, heads, ffn = 16, 64, 4, 256
    dh = d // heads
    b = GraphBuilder(seed=1005)

    def layernorm(v: str) -> str:
        scale = b.const("ln.scale", b.rng.uniform(0.8, 1.2, d).astype(np.float32))
        shift = b.const("ln.bias", b.normal((d,), 0.05))
        return b.op("LayerNormalization", [v, scale, shift], prefix="ln", axis=-1, epsilon=1e-5)

    def linear(v: str, cin: int, cout: int) -> str:
        w = b.const("linear.weight", b.normal((cin, cout), math.sqrt(1.0 / cin)))
        bias = b.const("linear.bias", b.normal((cout,), 0.02))
        return b.op("Add", [b.op("MatMul", [v, w]), bias])

    split_shape = b.const("shape", np.array([1, seq, heads, dh], dtype=np.int64))
    merge_shape = b.const("shape", np.array([1, seq, d], dtype=np.int64))

    h = layernorm("input")
    q = b.op("Transpose", [b.op("Reshape", [linear(h, d, d), split_shape])], perm=[0, 2, 1, 3])
    k = b.op("Transpose", [b.op("Reshape", [linear(h, d, d), split_shape])], perm=[0, 2, 3, 1])
    v = b.op("Transpose", [b.op("Reshape", [linear(h, d, d), split_shape])], perm=[0, 2, 1, 3])
    scale = b.const("scale", np.array(1.0 / math.sqrt(dh), dtype=np.float32))
    scores = b.op("Mul", [b.op("MatMul", [q, k]), scale])
    attn = b.op("Softmax", [scores], axis=-1)
    ctx = b.op("MatMul", [attn, v])
    ctx = b.op("Reshape", [b.op("Transpose", [ctx], perm=[0, 2, 1, 3]), merge_shape])
    x = b.op("Add", ["input", linear(ctx, d, d)])

    h = linear(layernorm(x), d, ffn)
    # GELU, exact form: h * 0.5 * (1 + erf(h / sqrt(2))).
    sqrt2 = b.const("sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
    one = b.const("one", np.array(1.0, dtype=np.float32))
    half = b.const("half", np.array(0.5, dtype=np.float32))
    e = b.op("Add", [b.op("Erf", [b.op("Div", [h, sqrt2])]), one])
    h = b.op("Mul", [b.op("Mul", [h, e]), half])
    x = b.op("Add", [x, linear(h, ffn, d)])
    return make_model(
        b,
        "transformer_block",
        x,
        in_shape=[1, seq, d],
        out_shape=[1, seq, d],
        doc="Pre-norm transformer encoder block: 4-head self-attention and an Erf-GELU FFN.",
    )


def build_unet_small() -> onnx.ModelProto:
    b = GraphBuilder(seed=1006)
    e1 = b.relu(b.conv("input", 3, 16, 3))  # 16x32x32
    e2 = b.relu(b.conv(b.maxpool2(e1), 16, 32, 3))  # 32x16x16
    mid = b.relu(b.conv(b.maxpool2(e2), 32, 64, 3))  # 64x8x8
    up_w = b.const("convt.weight", b.he((64, 32, 2, 2), 64))
    up_b = b.const("convt.bias", b.normal((32,), 0.05))
    up = b.op("ConvTranspose", [mid, up_w, up_b], kernel_shape=[2, 2], strides=[2, 2])
    d2 = b.relu(b.conv(b.op("Concat", [up, e2], axis=1), 64, 32, 3))  # 32x16x16
    scales = b.const("scales", np.array([1.0, 1.0, 2.0, 2.0], dtype=np.float32))
    up2 = b.op(
        "Resize",
        [d2, "", scales],
        mode="nearest",
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    )
    d1 = b.relu(b.conv(b.op("Concat", [up2, e1], axis=1), 48, 16, 3))  # 16x32x32
    x = b.op("Sigmoid", [b.conv(d1, 16, 2, 1)])
    return make_model(
        b,
        "unet_small",
        x,
        in_shape=[1, 3, 32, 32],
        out_shape=[1, 2, 32, 32],
        doc="U-Net-style segmenter: ConvTranspose and nearest Resize upsampling, skip Concats.",
    )


MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "mlp": build_mlp,
    "mlp_opset9": lambda: build_mlp(opset=9),
    "lenet": build_lenet,
    "resnet_small": build_resnet_small,
    "mobilenet_small": build_mobilenet_small,
    "transformer_block": build_transformer_block,
    "unet_small": build_unet_small,
}
DEFAULT_MODEL = "resnet_small"
INPUT_SEED = 7


# Outputs -----------------------------------------------------------------------------------


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """np.savez with fixed zip timestamps, so regenerating does not dirty the tree."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for key, arr in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
            zf.writestr(
                zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0)), buf.getvalue()
            )


def run_onnxruntime(model_bytes: bytes, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model_bytes, opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds), strict=True))


def model_input(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        shape = [dim.dim_value for dim in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def generate(out_dir: Path, names: Sequence[str] | None = None, verbose: bool = True) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in names or MODELS:
        model = MODELS[name]()
        onnx.checker.check_model(model, full_check=True)
        data = model.SerializeToString(deterministic=True)
        (out_dir / f"{name}.onnx").write_bytes(data)
        # Each model gets its own fixed input; the opset-9 MLP shares the MLP's.
        seed = INPUT_SEED + sorted(MODELS).index(name.removesuffix("_opset9"))
        feeds = model_input(model, seed)
        write_npz(out_dir / f"{name}.input.npz", feeds)
        outputs = run_onnxruntime(data, feeds)
        write_npz(out_dir / f"{name}.expected.npz", outputs)
        if verbose:
            out = outputs["output"]
            print(
                f"{name + '.onnx':24s} {len(data) / 1024:8.1f} KiB  {len(model.graph.node):4d} nodes"
                f"  output {list(out.shape)} |max| {float(np.abs(out).max()):.3g}"
            )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="output directory (default: here)")
    parser.add_argument(
        "models",
        nargs="*",
        metavar="MODEL",
        help=f"models to build (default: all of {', '.join(MODELS)})",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing")
    args = parser.parse_args(argv)
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        parser.error(f"unknown model(s): {', '.join(unknown)}")
    generate(args.out, args.models or None, verbose=not args.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
