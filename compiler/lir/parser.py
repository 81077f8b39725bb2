"""Parser of the low-level IR text written by `compiler.lir.printer`.

Line oriented. Instruction indices at the start of a code line are optional; when present they
must equal the instruction's position. Attribute values and constant data are read with the
graph parser's functions, so both IRs share one grammar for them.
"""

from __future__ import annotations

import re
from typing import Any

from compiler.errors import ParseError, VerifyError
from compiler.graph.parser import _constant_data, _split_attrs, parse_attr_value
from compiler.graph.types import TensorType
from compiler.lir.instructions import get_instr
from compiler.lir.ir import Instruction, LIRFunction, LValue

_NAME = r"[A-Za-z_][\w.#-]*"
_TYPE = r"[a-z0-9]+<[^>]*>"
_RE_FUNC = re.compile(rf"^function @({_NAME})$")
_RE_WEIGHT = re.compile(
    rf"^%({_NAME}) = weight (const|mutable)(?: (input|output))? : ({_TYPE})"
    rf"(?: = (dense|hex|elided)<(.*)>)?$"
)
_RE_INSTR = re.compile(rf"^(?:(\d+) )?%({_NAME}) = ([a-z_][a-z0-9_]*)(.*)$")
_RE_OPERAND = re.compile(rf"^@(in|out|inout) %({_NAME})$")
_RE_TYPE_SUFFIX = re.compile(rf" : ({_TYPE})$")


def parse_lir(text: str) -> LIRFunction:
    """Parse LIR text into an LIRFunction; raises ParseError with the line number."""
    fn: LIRFunction | None = None
    section: str | None = None
    done = False
    lines = text.splitlines()
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("//"):
            continue
        if done:
            raise ParseError(f"unexpected '{line}' after the code section", line=lineno)
        try:
            if fn is None:
                m = _RE_FUNC.match(line)
                if not m:
                    raise ParseError("expected 'function @name'", line=lineno)
                fn = LIRFunction(m.group(1))
                continue
            if section is None:
                if line == "declare {":
                    section = "declare"
                elif line == "code {":
                    section = "code"
                else:
                    raise ParseError("expected 'declare {' or 'code {'", line=lineno)
                continue
            if line == "}":
                if section == "code":
                    done = True
                section = None
                continue
            if section == "declare":
                _parse_weight(fn, line, lineno)
            else:
                _parse_instr(fn, line, lineno)
        except ParseError:
            raise
        except (ValueError, KeyError, VerifyError) as e:
            raise ParseError(str(e), line=lineno) from None
    if fn is None or not done:
        raise ParseError("unexpected end of input (missing 'code { ... }')", line=len(lines))
    fn.journal.clear()  # parsing is not a change a pass made
    return fn


def _parse_weight(fn: LIRFunction, line: str, lineno: int) -> None:
    m = _RE_WEIGHT.match(line)
    if not m:
        raise ParseError(f"cannot parse weight '{line}'", line=lineno)
    name, mut, role, ty, dkind, body = m.groups()
    t = TensorType.parse(ty)
    if name in fn:
        raise ParseError(f"redefinition of '%{name}'", line=lineno)
    if mut == "const":
        if role:
            raise ParseError("a constant weight has no input/output role", line=lineno)
        if dkind is None:
            raise ParseError(
                "a constant weight needs data (dense<>, hex<> or elided<>)", line=lineno
            )
        data, digest = _constant_data(dkind, body, t)
        if data is not None:
            data.setflags(write=False)
        fn.add_weight(name, t, "constant", data=data, digest=digest, exact_name=True)
    else:
        if dkind is not None:
            raise ParseError("a mutable weight has no data", line=lineno)
        fn.add_weight(name, t, "mutable", role=role, exact_name=True)


def _parse_instr(fn: LIRFunction, line: str, lineno: int) -> None:
    m = _RE_INSTR.match(line)
    if not m:
        raise ParseError(f"cannot parse instruction '{line}'", line=lineno)
    idx, name, kind, rest = m.groups()
    if idx is not None and int(idx) != len(fn.code):
        raise ParseError(f"instruction index {idx} should be {len(fn.code)}", line=lineno)
    idef = get_instr(kind)
    type_: TensorType | None = None
    if tm := _RE_TYPE_SUFFIX.search(rest):
        type_ = TensorType.parse(tm.group(1))
        rest = rest[: tm.start()]
    attrs: dict[str, Any] = {}
    brace = rest.find(" {")
    if brace >= 0:
        if not rest.endswith("}"):
            raise ParseError("unterminated attribute block", line=lineno)
        for k, v in _split_attrs(rest[brace + 2 : -1]):
            if k not in idef.attrs:
                raise ParseError(f"{kind} has no attribute '{k}'", line=lineno)
            attrs[k] = parse_attr_value(v)
        rest = rest[:brace]
    operands: list[tuple[LValue, str]] = []
    rest = rest.strip()
    if rest:
        for tok in rest.split(","):
            om = _RE_OPERAND.match(tok.strip())
            if not om:
                raise ParseError(f"bad operand '{tok.strip()}' (expected '@in %name')", line=lineno)
            mode, vname = om.groups()
            if vname not in fn:
                raise ParseError(f"unknown value '%{vname}'", line=lineno)
            operands.append((fn.get(vname), mode))
    if idef.defines_value and type_ is None:
        raise ParseError(f"{kind} needs a result type (': f32<...>')", line=lineno)
    if not idef.defines_value and type_ is not None:
        raise ParseError(f"{kind} has no result type", line=lineno)
    if name in fn:
        raise ParseError(f"redefinition of '%{name}'", line=lineno)
    fn.insert(len(fn.code), Instruction(kind, name, operands, attrs, type_))


__all__ = ["parse_lir"]
