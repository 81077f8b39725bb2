"""Verifier of the low-level IR: table conformance, types, use lists, lifetimes, write rules.

Checked: each instruction's operand count and modes match the table, attributes are
normalised, destination types equal the graph op's inferred type, every activation is
allocated before use and deallocated at most once with no use after, tensorviews lie inside
their source, constant weights are never written and every output weight is written.
Errors name the instruction and print it.
"""

from __future__ import annotations

import math

from compiler.errors import VerifyError
from compiler.graph.types import TensorType
from compiler.lir.instructions import Kind, get_instr
from compiler.lir.ir import Instruction, LIRFunction, LValue, WeightVar, view_root
from compiler.lir.printer import format_instruction


def _err(msg: str, i: int, instr: Instruction) -> VerifyError:
    return VerifyError(f"{msg}, at instruction {i}: {format_instruction(instr)}")


def verify_lir(fn: LIRFunction) -> None:
    """Raise VerifyError describing the first problem found."""
    for name, w in fn.weights.items():
        if w.name != name or fn._values.get(name) is not w:
            raise VerifyError(f"weight registered as '{name}' is named '{w.name}'")
        if (
            w.is_constant
            and w.data is not None
            and (tuple(w.data.shape) != w.type_.shape or w.data.dtype != w.type_.np_dtype)
        ):
            raise VerifyError(
                f"weight %{name}: data {w.data.dtype}{list(w.data.shape)} does not "
                f"match type {w.type}"
            )
        if w.is_constant and w.role is not None:
            raise VerifyError(f"constant weight %{name} cannot be an {w.role}")
    seen_names: set[str] = set(fn.weights)
    defined: set[int] = set()
    allocated: set[int] = set()
    freed: dict[int, int] = {}
    written_outputs: set[str] = set()
    for i, instr in enumerate(fn.code):
        if instr.function is not fn:
            raise _err("instruction does not belong to this function", i, instr)
        if instr.name in seen_names:
            raise _err(f"name '%{instr.name}' is defined twice", i, instr)
        seen_names.add(instr.name)
        try:
            idef = get_instr(instr.kind)
            normal = idef.normalize_attrs(instr.attrs, instr.name)
        except VerifyError as e:
            raise _err(e.message, i, instr) from None
        if normal != instr.attrs:
            raise _err("attributes are not normalised", i, instr)
        n = len(instr.operands)
        if not idef.arity_ok(n):
            raise _err(
                f"{instr.kind} expects {len(idef.operands)}"
                f"{'+' if idef.variadic else ''} operands, got {n}",
                i,
                instr,
            )
        expect_modes = idef.modes_for(n)
        for k, ((v, mode), want) in enumerate(zip(instr.operands, expect_modes)):
            if not idef.mode_allowed(k, mode, want):
                raise _err(f"operand {k} (%{v.name}) is @{mode}, the table says @{want}", i, instr)
            _check_operand(fn, v, k, i, instr, defined)
            if (instr, k) not in v.users:
                raise _err(f"use list of %{v.name} misses operand {k}", i, instr)
            root, _ = view_root(v)
            if isinstance(root, Instruction):
                if id(root) in freed:
                    raise _err(
                        f"%{v.name} is used after its deallocation at instruction "
                        f"{freed[id(root)]}",
                        i,
                        instr,
                    )
                if id(root) not in allocated:
                    raise _err(f"%{v.name} is used before it is allocated", i, instr)
            if mode in ("out", "inout") and not instr.is_dealloc:
                if isinstance(root, WeightVar):
                    if root.is_constant:
                        raise _err(f"constant weight %{root.name} is written", i, instr)
                    if root.is_output:
                        written_outputs.add(root.name)
        if idef.defines_value != (instr.type is not None):
            raise _err(
                "a result type is required exactly for allocactivation and tensorview", i, instr
            )
        _check_types(instr, i)
        if instr.is_alloc:
            allocated.add(id(instr))
        elif instr.is_dealloc:
            buf = instr.operands[0][0]
            if not (isinstance(buf, Instruction) and buf.is_alloc):
                raise _err("deallocactivation must name an allocactivation", i, instr)
            freed[id(buf)] = i
        for user, k in instr.users:
            if (
                user.function is not fn
                or k >= len(user.operands)
                or user.operands[k][0] is not instr
            ):
                raise _err(f"stale use of %{instr.name}", i, instr)
        defined.add(id(instr))
    for w in fn.outputs():
        if w.name not in written_outputs:
            raise VerifyError(f"output weight %{w.name} is never written")
    for w in fn.weights.values():
        for user, k in w.users:
            if user.function is not fn or user.operands[k][0] is not w:
                raise VerifyError(f"stale use of weight %{w.name} by %{user.name}")


def _check_operand(
    fn: LIRFunction, v: LValue, k: int, i: int, instr: Instruction, defined: set[int]
) -> None:
    if isinstance(v, WeightVar):
        if fn.weights.get(v.name) is not v:
            raise _err(f"operand {k} is a weight %{v.name} not declared here", i, instr)
    elif isinstance(v, Instruction):
        if not v.is_memory:
            raise _err(f"operand {k} (%{v.name}) is a {v.kind}, not memory", i, instr)
        if v.function is not fn or id(v) not in defined:
            raise _err(f"operand {k} (%{v.name}) is not defined before use", i, instr)
    else:
        raise _err(f"operand {k} has unknown kind", i, instr)


def _t(v: LValue) -> TensorType:
    assert v.type is not None
    return v.type


def _check_types(instr: Instruction, i: int) -> None:
    kind, ops, attrs = instr.kind, instr.operands, instr.attrs
    idef = instr.idef
    if idef.graph_op is not None:
        opdef = idef.opdef
        assert opdef is not None
        ins = [_t(v) for v, _ in ops[1:]]
        try:
            (expect,) = opdef.infer_types(ins, attrs, instr.name)
        except Exception as e:  # noqa: BLE001 - any inference failure is a verify error
            raise _err(f"type inference failed: {e}", i, instr) from None
        got = _t(ops[0][0])
        if got != expect:
            raise _err(f"destination type {got} differs from inferred {expect}", i, instr)
        return
    if kind == Kind.COPY:
        d, s = _t(ops[0][0]), _t(ops[1][0])
        if d.shape != s.shape or d.elem != s.elem:
            raise _err(f"copy between different types {d} and {s}", i, instr)
    elif kind == Kind.VIEW:
        src, view = _t(ops[0][0]), _t(instr)
        offs = attrs["offsets"]
        if view.elem != src.elem:
            raise _err(f"view element kind {view.elem.value} differs from source {src}", i, instr)
        if len(offs) != src.rank or any(
            o < 0 or (o >= d and d > 0) for o, d in zip(offs, src.shape)
        ):
            raise _err(f"offsets {list(offs)} do not fit the source {src}", i, instr)
        lin = sum(o * s for o, s in zip(offs, src.strides()))
        if lin + view.numel > src.numel:
            raise _err(f"view {view} at element {lin} overruns its source {src}", i, instr)
    elif kind == Kind.EXTRACT:
        d, s = _t(ops[0][0]), _t(ops[1][0])
        offs = attrs["offsets"]
        if d.elem != s.elem or d.rank != s.rank or len(offs) != s.rank:
            raise _err(f"cannot extract {d} from {s} at {list(offs)}", i, instr)
        if any(o < 0 or o + n > m for o, n, m in zip(offs, d.shape, s.shape)):
            raise _err(f"extract of {d} at {list(offs)} overruns the source {s}", i, instr)
    elif kind == Kind.INSERT:
        d, s = _t(ops[0][0]), _t(ops[1][0])
        offs, count, axis = attrs["offsets"], attrs["count"], attrs["axis"]
        if (
            d.elem != s.elem
            or d.rank != s.rank
            or len(offs) != d.rank
            or not 0 <= axis < max(d.rank, 1)
        ):
            raise _err(f"cannot insert {s} into {d} at {list(offs)}", i, instr)
        ext = [n * (count if k == axis else 1) for k, n in enumerate(s.shape)]
        if count < 1 or any(o < 0 or o + n > m for o, n, m in zip(offs, ext, d.shape)):
            raise _err(
                f"insert of {s} x{count} at {list(offs)} overruns the destination {d}", i, instr
            )
    elif kind == Kind.ALLOC:
        if ops:
            raise _err("allocactivation has no operands", i, instr)
        if math.prod(_t(instr).shape) < 0:
            raise _err("negative size", i, instr)


__all__ = ["verify_lir"]
