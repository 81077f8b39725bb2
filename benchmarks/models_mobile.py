"""Generators of the mobile model families (random weights, PyTorch-export node patterns): the
torchvision MobileNetV3-Small, MNASNet-1.0 and EfficientNet-B0 layer shapes, BatchNorm folded into
the convs as torch.onnx.export does in eval mode. Registered in `benchmarks/models.py`.

Their building blocks: depthwise convolutions (3x3 and 5x5, strides 1 and 2), squeeze-and-
excitation (global average pool -> 1x1 conv -> ReLU/SiLU -> 1x1 conv -> HardSigmoid/Sigmoid ->
channel-wise Mul), HardSwish and SiLU (Sigmoid + Mul) activations, small 1x1 convolutions.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from benchmarks.netbuilder import Net


def _make_divisible(v: float, divisor: int = 8) -> int:
    """torchvision's channel rounding (never more than 10% below ``v``)."""
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new


def _act(n: Net, x: str, act: str) -> str:
    return {"RE": n.relu, "HS": n.hardswish, "SI": n.silu, "R6": n.relu6}[act](x)


def _se(n: Net, x: str, c: int, squeeze: int, inner: str, gate: str) -> str:
    """Squeeze-and-excitation: x * gate(fc2(inner(fc1(avgpool(x)))))."""
    s = n.op("GlobalAveragePool", [x], "se_pool")
    s = _act(n, n.conv(s, c, squeeze, 1), inner)
    s = n.conv(s, squeeze, c, 1)
    s = n.hardsigmoid(s) if gate == "HS" else n.sigmoid(s)
    return n.op("Mul", [s, x], "se_scale")


def _inverted_residual(
    n: Net,
    x: str,
    cin: int,
    k: int,
    exp: int,
    cout: int,
    stride: int,
    act: str,
    se: tuple[int, str, str] | None,
) -> str:
    """1x1 expand (when exp != cin) -> kxk depthwise -> [SE] -> 1x1 project (+ residual)."""
    y = x
    if exp != cin:
        y = _act(n, n.conv(y, cin, exp, 1), act)
    y = _act(n, n.conv(y, exp, exp, k, stride, group=exp), act)
    if se is not None:
        squeeze, inner, gate = se
        y = _se(n, y, exp, squeeze, inner, gate)
    y = n.conv(y, exp, cout, 1)
    if stride == 1 and cin == cout:
        y = n.op("Add", [y, x], "add")
    return y


# (in, kernel, expanded, out, SE, activation, stride): torchvision's mobilenet_v3_small.
_MBV3_SMALL = [
    (16, 3, 16, 16, True, "RE", 2),
    (16, 3, 72, 24, False, "RE", 2),
    (24, 3, 88, 24, False, "RE", 1),
    (24, 5, 96, 40, True, "HS", 2),
    (40, 5, 240, 40, True, "HS", 1),
    (40, 5, 240, 40, True, "HS", 1),
    (40, 5, 120, 48, True, "HS", 1),
    (48, 5, 144, 48, True, "HS", 1),
    (48, 5, 288, 96, True, "HS", 2),
    (96, 5, 576, 96, True, "HS", 1),
    (96, 5, 576, 96, True, "HS", 1),
]


def build_mobilenetv3_small(
    batch: int = 1, image: int = 224, classes: int = 1000, seed: int = 0
) -> onnx.ModelProto:
    """MobileNetV3-Small: SE blocks with HardSigmoid gates, HardSwish, 3x3/5x5 depthwise."""
    n = Net("mobilenetv3_small", seed)
    x = n.hardswish(n.conv("input", 3, 16, 3, 2))
    for cin, k, exp, cout, se, act, stride in _MBV3_SMALL:
        sq = (_make_divisible(exp // 4), "RE", "HS") if se else None
        x = _inverted_residual(n, x, cin, k, exp, cout, stride, act, sq)
    x = n.hardswish(n.conv(x, 96, 576, 1))
    x = n.op("Flatten", [n.op("GlobalAveragePool", [x], "gap")], "flatten", axis=1)
    x = n.hardswish(_gemm(n, x, 576, 1024))
    _gemm(n, x, 1024, classes)
    return n.model("input", "output", (batch, 3, image, image), (batch, classes))


# (in, out, kernel, stride, expansion, repeats): torchvision's mnasnet1_0 stacks.
_MNASNET = [
    (16, 24, 3, 2, 3, 3),
    (24, 40, 5, 2, 3, 3),
    (40, 80, 5, 2, 6, 3),
    (80, 96, 3, 1, 6, 2),
    (96, 192, 5, 2, 6, 4),
    (192, 320, 3, 1, 6, 1),
]


def build_mnasnet(
    batch: int = 1, image: int = 224, classes: int = 1000, seed: int = 0
) -> onnx.ModelProto:
    """MNASNet-1.0: inverted residuals without SE, ReLU, 3x3/5x5 depthwise, mean-pool head."""
    n = Net("mnasnet", seed)
    x = n.relu(n.conv("input", 3, 32, 3, 2))
    x = n.relu(n.conv(x, 32, 32, 3, 1, group=32))
    x = n.conv(x, 32, 16, 1)
    for cin, cout, k, stride, t, reps in _MNASNET:
        for r in range(reps):
            c = cin if r == 0 else cout
            x = _inverted_residual(n, x, c, k, c * t, cout, stride if r == 0 else 1, "RE", None)
    x = n.relu(n.conv(x, 320, 1280, 1))
    x = n.op("ReduceMean", [x], "mean", axes=[2, 3], keepdims=0)
    _gemm(n, x, 1280, classes)
    return n.model("input", "output", (batch, 3, image, image), (batch, classes))


# (expansion, kernel, stride, in, out, layers): EfficientNet-B0's MBConv stages.
_EFFNET_B0 = [
    (1, 3, 1, 32, 16, 1),
    (6, 3, 2, 16, 24, 2),
    (6, 5, 2, 24, 40, 2),
    (6, 3, 2, 40, 80, 3),
    (6, 5, 1, 80, 112, 3),
    (6, 5, 2, 112, 192, 4),
    (6, 3, 1, 192, 320, 1),
]


def build_efficientnet_b0(
    batch: int = 1, image: int = 224, classes: int = 1000, seed: int = 0
) -> onnx.ModelProto:
    """EfficientNet-B0: MBConv with SE (SiLU inside, Sigmoid gate), SiLU everywhere."""
    n = Net("efficientnet_b0", seed)
    x = n.silu(n.conv("input", 3, 32, 3, 2))
    for t, k, stride, cin, cout, layers in _EFFNET_B0:
        for r in range(layers):
            c = cin if r == 0 else cout
            se = (max(1, c // 4), "SI", "SIG")
            x = _inverted_residual(n, x, c, k, c * t, cout, stride if r == 0 else 1, "SI", se)
    x = n.silu(n.conv(x, 320, 1280, 1))
    x = n.op("Flatten", [n.op("GlobalAveragePool", [x], "gap")], "flatten", axis=1)
    _gemm(n, x, 1280, classes)
    return n.model("input", "output", (batch, 3, image, image), (batch, classes))


def _gemm(n: Net, x: str, cin: int, cout: int) -> str:
    """nn.Linear on [N, cin] as torch exports it: Gemm with transB."""
    w = n.const("fc_w", n.weight((cout, cin), cin))
    b = n.const("fc_b", (0.02 * n.rng.standard_normal(cout)).astype(np.float32))
    return n.op("Gemm", [x, w, b], "fc", transB=1)


MOBILE_BUILDERS: dict[str, Callable[..., onnx.ModelProto]] = {
    "mobilenetv3_small": build_mobilenetv3_small,
    "mnasnet": build_mnasnet,
    "efficientnet_b0": build_efficientnet_b0,
}
