"""Deterministic text form of the low-level IR; `compiler.lir.parser` reads it back identically.

    function @main
    declare {
      %input = weight mutable input : f32<1x3x32x32>
      %output = weight mutable output : f32<1x10>
      %conv_w = weight const : f32<16x3x3x3> = elided<3f2a...>
    }
    code {
      0 %conv_res = allocactivation : f32<1x16x32x32>
      1 %conv = conv @out %conv_res, @in %input, @in %conv_w, @in %conv_b {strides = [1, 1], ...}
      2 %flat = tensorview @in %pool_res {offsets = [0, 0, 0, 0]} : f32<1x1024>
      9 %conv_res.dealloc = deallocactivation @out %conv_res
    }

Attribute values and constant data use the graph printer's formatting (one implementation).
"""

from __future__ import annotations

from compiler.graph.printer import format_attr, format_constant_data
from compiler.lir.ir import Instruction, LIRFunction, WeightVar


def format_weight(w: WeightVar, with_data: bool = False) -> str:
    if w.is_constant:
        return f"%{w.name} = weight const : {w.type} = {format_constant_data(w, with_data)}"  # type: ignore[arg-type]
    role = f" {w.role}" if w.role else ""
    return f"%{w.name} = weight mutable{role} : {w.type}"


def format_instruction(instr: Instruction) -> str:
    """One instruction without its index: `%name = kind @out %a, @in %b {attrs} : type`."""
    text = f"%{instr.name} = {instr.kind}"
    if instr.operands:
        text += " " + ", ".join(f"@{m} %{v.name}" for v, m in instr.operands)
    if instr.attrs:
        text += " {" + ", ".join(f"{k} = {format_attr(v)}" for k, v in instr.attrs.items()) + "}"
    if instr.type is not None:
        text += f" : {instr.type}"
    return text


def print_function(fn: LIRFunction, *, with_data: bool = False) -> str:
    """The function as text. `with_data` writes every constant's bytes (lossless)."""
    lines = [f"function @{fn.name}", "declare {"]
    for w in fn.weights.values():
        lines.append("  " + format_weight(w, with_data))
    lines.append("}")
    lines.append("code {")
    for i, instr in enumerate(fn.code):
        lines.append(f"  {i} {format_instruction(instr)}")
    lines.append("}")
    return "\n".join(lines) + "\n"


print_lir = print_function

__all__ = ["format_instruction", "format_weight", "print_function", "print_lir"]
