"""Deterministic text form of the graph IR. `compiler.graph.parser` reads it back identically.

module @lenet {
  placeholder %input : f32<1x1x28x28>
  placeholder %output : f32<1x10> output
  constant %w : f32<6x1x5x5> = elided<3f2a...>      (large data; `with_data` prints hex<...>)
  constant %shape : i64<2> = dense<[1, -1]>
  func @main {
    %conv = Conv(%input, %w, %b) {strides = [1, 1], ...} : f32<1x6x24x24>
    Save(%fc3, %output)
  }
}
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from compiler.graph.ir import Constant, Function, Module, Node

#: Constants with at most this many elements are always printed inline.
INLINE_LIMIT = 16


def format_float(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(float(x))


def format_attr(v: Any) -> str:
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return format_float(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, tuple | list):
        return "[" + ", ".join(format_attr(x) for x in v) + "]"
    raise TypeError(f"cannot print attribute value {v!r}")


def format_constant_data(c: Constant, with_data: bool) -> str:
    if c.data is None:
        return f"elided<{c.digest}>"
    if c.type.numel <= INLINE_LIMIT:
        flat = c.data.reshape(-1)
        if c.data.dtype.kind == "f":
            items = [format_float(float(x)) for x in flat]
        else:
            items = [str(int(x)) for x in flat]
        return "dense<[" + ", ".join(items) + "]>"
    if with_data:
        return "hex<" + np.ascontiguousarray(c.data).tobytes().hex() + ">"
    return f"elided<{c.digest}>"


def format_node(node: Node) -> str:
    ops = ", ".join(f"%{v.name}" for v in node.operands)
    attrs = ""
    if node.attrs:
        attrs = " {" + ", ".join(f"{k} = {format_attr(v)}" for k, v in node.attrs.items()) + "}"
    if not node.results:
        return f"{node.op}({ops}){attrs}"
    lhs = ", ".join(f"%{r.name}" for r in node.results)
    types = ", ".join(str(r.type) for r in node.results)
    return f"{lhs} = {node.op}({ops}){attrs} : {types}"


def print_function(fn: Function, indent: str = "  ") -> list[str]:
    lines = [f"{indent}func @{fn.name} {{"]
    for node in fn.nodes:
        lines.append(f"{indent}  {format_node(node)}")
    lines.append(f"{indent}}}")
    return lines


def print_module(module: Module, *, with_data: bool = False) -> str:
    """The module as text. `with_data` writes every constant's bytes (large, but lossless)."""
    lines = [f"module @{module.name} {{"]
    for p in module.placeholders.values():
        lines.append(f"  placeholder %{p.name} : {p.type}" + (" output" if p.is_output else ""))
    for c in module.constants.values():
        lines.append(f"  constant %{c.name} : {c.type} = {format_constant_data(c, with_data)}")
    for fn in module.functions:
        lines.extend(print_function(fn))
    lines.append("}")
    return "\n".join(lines) + "\n"
