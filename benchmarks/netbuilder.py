"""The ONNX graph builder the benchmark model generators share (onnx.helper only, random weights):
conv / BatchNorm / activations / pools / linear layers / LayerNorm, and the model wrapper.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper

from sample_models.generate import GraphBuilder

OPSET = 17
IR_VERSION = 8


class Net(GraphBuilder):
    """The sample models' graph builder (names, constants, nodes), plus the model's name and
    the layers below."""

    def __init__(self, name: str, seed: int) -> None:
        super().__init__(seed)
        self.name = name

    def weight(self, shape: Sequence[int], fan_in: int) -> np.ndarray:
        return self.rng.standard_normal(shape, dtype=np.float32) * np.float32(
            math.sqrt(2.0 / fan_in)
        )

    # -- layers ---------------------------------------------------------------------------------
    # conv is GraphBuilder's, with these weights (He in float32) and zero biases, named w and b.
    CONV_NAMES = ("w", "b")

    def conv_weight(self, shape: Sequence[int], fan_in: int) -> np.ndarray:
        return self.weight(shape, fan_in)

    def conv_bias(self, cout: int) -> np.ndarray:
        return np.zeros(cout, np.float32)

    def bn(self, x: str, c: int) -> str:
        scale = self.const("gamma", (1.0 + 0.1 * self.rng.standard_normal(c)).astype(np.float32))
        bias = self.const("beta", (0.1 * self.rng.standard_normal(c)).astype(np.float32))
        mean = self.const("mean", (0.1 * self.rng.standard_normal(c)).astype(np.float32))
        var = self.const("var", (1.0 + 0.1 * self.rng.random(c)).astype(np.float32))
        return self.op("BatchNormalization", [x, scale, bias, mean, var], "bn", epsilon=1e-5)

    def relu(self, x: str) -> str:
        return self.op("Relu", [x], "relu")

    def relu6(self, x: str) -> str:
        lo = self.const("clip_min", np.array(0.0, np.float32))
        hi = self.const("clip_max", np.array(6.0, np.float32))
        return self.op("Clip", [x, lo, hi], "relu6")

    def maxpool(self, x: str, k: int, stride: int, pad: int = 0) -> str:
        return self.op(
            "MaxPool", [x], "maxpool", kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4
        )

    def avgpool(self, x: str, k: int, stride: int, pad: int = 0) -> str:
        return self.op(
            "AveragePool",
            [x],
            "avgpool",
            kernel_shape=[k, k],
            strides=[stride, stride],
            pads=[pad] * 4,
        )

    def classifier(self, x: str, c: int, classes: int) -> str:
        g = self.op("GlobalAveragePool", [x], "gap")
        f = self.op("Flatten", [g], "flatten", axis=1)
        w = self.const("fc_w", self.weight((classes, c), c))
        b = self.const("fc_b", np.zeros(classes, np.float32))
        return self.op("Gemm", [f, w, b], "fc", transB=1)

    # -- activations as PyTorch exports them (opset 17) ------------------------------------------
    def scalar(self, prefix: str, v: float) -> str:
        return self.const(prefix, np.array(v, np.float32))

    def hardswish(self, x: str) -> str:
        return self.op("HardSwish", [x], "hswish")

    def hardsigmoid(self, x: str) -> str:
        return self.op("HardSigmoid", [x], "hsigmoid", alpha=1.0 / 6.0, beta=0.5)

    def sigmoid(self, x: str) -> str:
        return self.op("Sigmoid", [x], "sigmoid")

    def silu(self, x: str) -> str:
        """SiLU / swish: x * sigmoid(x) (torch exports nn.SiLU as Sigmoid + Mul)."""
        return self.op("Mul", [x, self.sigmoid(x)], "silu")

    def gelu_erf(self, x: str) -> str:
        """nn.GELU(): x * 0.5 * (1 + erf(x / sqrt(2))), as torch exports it at opset 17."""
        d = self.op("Div", [x, self.scalar("sqrt2", math.sqrt(2.0))], "gelu_div")
        e = self.op("Erf", [d], "gelu_erf")
        a = self.op("Add", [e, self.scalar("one", 1.0)], "gelu_add")
        m = self.op("Mul", [x, a], "gelu_mul")
        return self.op("Mul", [m, self.scalar("half", 0.5)], "gelu")

    def gelu_tanh(self, x: str) -> str:
        """GPT-2's gelu_new: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
        p = self.op("Pow", [x, self.scalar("three", 3.0)], "gelu_pow")
        c = self.op("Mul", [p, self.scalar("c", 0.044715)], "gelu_cube")
        s = self.op("Add", [x, c], "gelu_inner")
        t = self.op("Mul", [s, self.scalar("k", math.sqrt(2.0 / math.pi))], "gelu_scaled")
        th = self.op("Tanh", [t], "gelu_tanh")
        a = self.op("Add", [th, self.scalar("one", 1.0)], "gelu_add")
        m = self.op("Mul", [self.op("Mul", [x, self.scalar("half", 0.5)], "gelu_half"), a])
        return m

    # -- transformer layers -------------------------------------------------------------------
    def linear(self, x: str, cin: int, cout: int, bias: bool = True) -> str:
        """nn.Linear on [..., cin] as torch exports it for rank > 2: MatMul + Add."""
        y = self.op("MatMul", [x, self.const("lin_w", self.weight((cin, cout), cin))], "lin")
        if not bias:
            return y
        b = self.const("lin_b", (0.02 * self.rng.standard_normal(cout)).astype(np.float32))
        return self.op("Add", [b, y], "lin_add")

    def layernorm(self, x: str, c: int, eps: float = 1e-5) -> str:
        scale = self.const("ln_g", (1.0 + 0.1 * self.rng.standard_normal(c)).astype(np.float32))
        bias = self.const("ln_b", (0.1 * self.rng.standard_normal(c)).astype(np.float32))
        return self.op("LayerNormalization", [x, scale, bias], "ln", axis=-1, epsilon=eps)

    def shape(self, dims: Sequence[int]) -> str:
        return self.const("shape", np.array(list(dims), np.int64))

    def reshape(self, x: str, dims: Sequence[int]) -> str:
        return self.op("Reshape", [x, self.shape(dims)], "reshape")

    def transpose(self, x: str, perm: Sequence[int]) -> str:
        return self.op("Transpose", [x], "transpose", perm=list(perm))

    # -- the model ----------------------------------------------------------------------------
    def model(
        self, x: str, y: str, in_shape: Sequence[int], out_shape: Sequence[int]
    ) -> onnx.ModelProto:
        """One float input ``x``; the last node's output becomes the float output "output"."""
        return self.model_io([(x, TensorProto.FLOAT, in_shape)], [("output", out_shape)])

    def model_io(
        self,
        inputs: Sequence[tuple[str, int, Sequence[int]]],
        outputs: Sequence[tuple[str, Sequence[int]]],
    ) -> onnx.ModelProto:
        """``inputs``: (name, TensorProto element type, shape); ``outputs``: float (name, shape).
        The last node's output is renamed to the first output's name."""
        self.nodes[-1].output[0] = outputs[0][0]
        graph = helper.make_graph(
            self.nodes,
            self.name,
            [helper.make_tensor_value_info(n, t, list(s)) for n, t, s in inputs],
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in outputs],
            self.initializers,
        )
        m = helper.make_model(
            graph,
            producer_name="glowviz-benchmarks",
            opset_imports=[helper.make_opsetid("", OPSET)],
        )
        m.ir_version = IR_VERSION
        return m
