"""Parser for the graph IR text form written by `compiler.graph.printer`.

Line oriented: one declaration or node per line. Attribute values are coerced by the op table,
so `[]` is read as ints or floats depending on the attribute's declared kind. `elided<digest>`
constants parse to Constants without data (printable and verifiable, not executable).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from compiler.errors import ParseError, VerifyError
from compiler.graph.ir import Constant, Function, Module, Placeholder, Value
from compiler.graph.ops import get_op
from compiler.graph.types import TensorType

_NAME = r"[A-Za-z_][\w.#-]*"
_TYPE = r"[a-z0-9]+<[^>]*>"
_RE_MODULE = re.compile(rf"^module @({_NAME}) \{{$")
_RE_PH = re.compile(rf"^placeholder %({_NAME}) : ({_TYPE})( output)?$")
_RE_CONST = re.compile(rf"^constant %({_NAME}) : ({_TYPE}) = (dense|hex|elided)<(.*)>$")
_RE_FUNC = re.compile(rf"^func @({_NAME}) \{{$")
_RE_NODE = re.compile(
    rf"^(?:(%{_NAME}(?:, %{_NAME})*) = )?([A-Za-z]\w*)\((.*?)\)(?: \{{(.*)\}})?"
    rf"(?: : ({_TYPE}(?:, {_TYPE})*))?$"
)

_TOKEN = re.compile(
    r'\s*(?:(\[)|(\])|(,)|("(?:[^"\\]|\\.)*")|(-?inf|nan)|'
    r"(-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?))"
)


def parse_attr_value(text: str) -> Any:
    """Parse one attribute value: number, inf/nan, quoted string or (nested-free) list."""
    pos, out = 0, None
    stack: list[list[Any]] = []
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m:
            raise ValueError(f"bad attribute value '{text}'")
        pos = m.end()
        lb, rb, comma, s, special, num = m.groups()
        if lb:
            stack.append([])
            continue
        if comma:
            continue
        if rb:
            done = tuple(stack.pop())
            if stack:
                stack[-1].append(done)
            else:
                out = done
            continue
        if s is not None:
            val: Any = s[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        elif special is not None:
            val = float(special)
        else:
            val = float(num) if any(c in num for c in ".eE") else int(num)
        if stack:
            stack[-1].append(val)
        else:
            out = val
    if stack:
        raise ValueError(f"unbalanced brackets in '{text}'")
    return out


def _split_attrs(text: str) -> list[tuple[str, str]]:
    items: list[str] = []
    cur: list[str] = []
    depth, in_str = 0, False
    prev = ""
    for ch in text:
        if ch == '"' and prev != "\\":
            in_str = not in_str
        if not in_str:
            if ch == "[":
                depth += 1
            elif ch == "]":
                depth -= 1
            elif ch == "," and depth == 0:
                items.append("".join(cur))
                cur = []
                prev = ch
                continue
        cur.append(ch)
        prev = ch
    if "".join(cur).strip():
        items.append("".join(cur))
    out = []
    for item in items:
        key, _, val = item.partition("=")
        out.append((key.strip(), val.strip()))
    return out


def _constant_data(kind: str, body: str, t: TensorType) -> tuple[np.ndarray | None, str | None]:
    if kind == "elided":
        return None, body
    if kind == "hex":
        raw = bytes.fromhex(body)
        return np.frombuffer(raw, dtype=t.np_dtype).reshape(t.shape).copy(), None
    vals = parse_attr_value(body)
    arr = np.array(vals if vals else [], dtype=t.np_dtype).reshape(t.shape)
    return arr, None


def parse_module(text: str) -> Module:
    """Parse graph IR text into a Module; raises ParseError with the line number on bad input."""
    lines = text.splitlines()
    module: Module | None = None
    fn: Function | None = None
    values: dict[str, Value] = {}
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("//"):
            continue
        try:
            if module is None:
                m = _RE_MODULE.match(line)
                if not m:
                    raise ParseError("expected 'module @name {'", line=lineno)
                module = Module(m.group(1))
                continue
            if line == "}":
                if fn is not None:
                    fn = None
                    continue
                return _finish(module)
            if fn is None:
                if m := _RE_PH.match(line):
                    name, t = m.group(1), TensorType.parse(m.group(2))
                    p = Placeholder(name, t, bool(m.group(3)))
                    _declare(module, name, lineno, values)
                    module.placeholders[name] = p
                    values[name] = p
                    continue
                if m := _RE_CONST.match(line):
                    name, t = m.group(1), TensorType.parse(m.group(2))
                    data, digest = _constant_data(m.group(3), m.group(4), t)
                    c = Constant(name, data, t, digest)
                    _declare(module, name, lineno, values)
                    module.constants[name] = c
                    values[name] = c
                    continue
                if m := _RE_FUNC.match(line):
                    fn = module.create_function(m.group(1))
                    continue
                raise ParseError(f"unexpected '{line}'", line=lineno)
            m = _RE_NODE.match(line)
            if not m:
                raise ParseError(f"cannot parse node '{line}'", line=lineno)
            lhs, op, operands, attr_text, types = m.groups()
            opdef = get_op(op)
            ops: list[Value] = []
            for tok in (t.strip() for t in operands.split(",") if t.strip()):
                if not tok.startswith("%") or tok[1:] not in values:
                    raise ParseError(f"unknown value '{tok}'", line=lineno)
                ops.append(values[tok[1:]])
            attrs: dict[str, Any] = {}
            if attr_text:
                for k, v in _split_attrs(attr_text):
                    if k not in opdef.attrs:
                        raise ParseError(f"{op} has no attribute '{k}'", line=lineno)
                    attrs[k] = parse_attr_value(v)
            result_names = [r.strip()[1:] for r in lhs.split(",")] if lhs else []
            result_types = [TensorType.parse(t) for t in re.findall(_TYPE, types or "")]
            if len(result_names) != len(result_types):
                raise ParseError("result names and types differ in number", line=lineno)
            node_name = result_names[0].split("#")[0] if result_names else _save_name(op, module)
            if node_name in module._names:
                raise ParseError(f"redefinition of '{node_name}'", line=lineno)
            node = fn.create(
                op, ops, attrs, name=node_name, result_types=result_types if result_names else []
            )
            fn.journal.clear()
            if node.name != node_name:
                raise ParseError(f"bad node name '{node_name}'", line=lineno)
            for r, expect in zip(node.results, result_names):
                if r.name != expect:
                    raise ParseError(f"result '{expect}' should be named '{r.name}'", line=lineno)
                values[r.name] = r
        except ParseError:
            raise
        except (ValueError, KeyError, VerifyError) as e:
            raise ParseError(str(e), line=lineno) from None
    raise ParseError("unexpected end of input (missing '}')", line=len(lines))


def _declare(module: Module, name: str, lineno: int, values: dict[str, Value]) -> None:
    if name in values or name in module._names:
        raise ParseError(f"redefinition of '%{name}'", line=lineno)
    module._names.add(name)


def _save_name(op: str, module: Module) -> str:
    # Nodes without results are unnamed in the text; give them a fresh name.
    base = op.lower()
    n = 0
    name = base
    while name in module._names:
        n += 1
        name = f"{base}_{n}"
    return name


def _finish(module: Module) -> Module:
    return module
