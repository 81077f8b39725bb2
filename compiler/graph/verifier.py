"""Verifier of the graph IR: op table conformance, types, use lists, names, outputs saved once.

Run after every pass in tests (and by the pass manager when `verify=True`). Errors name the
node and print it, so a broken rewrite points at itself.
"""

from __future__ import annotations

from compiler.errors import VerifyError
from compiler.graph.ir import Constant, Function, Module, Node, Placeholder, Result
from compiler.graph.ops import get_op
from compiler.graph.printer import format_node


def _where(fn: Function, node: Node) -> str:
    """Where an error is: the node printed (only then: printing every node was a third of
    the verifier's time)."""
    return f"in @{fn.name}: {format_node(node)}"


def verify_module(module: Module) -> None:
    """Raise VerifyError describing the first problem found."""
    names: set[str] = set()
    for name, c in module.constants.items():
        if c.name != name:
            raise VerifyError(f"constant registered as '{name}' is named '{c.name}'")
        if c.data is not None and (
            tuple(c.data.shape) != c.type.shape or c.data.dtype != c.type.np_dtype
        ):
            raise VerifyError(
                f"constant %{name}: data {c.data.dtype}{list(c.data.shape)} "
                f"does not match type {c.type}"
            )
        names.add(name)
    for name in module.placeholders:
        if name in names:
            raise VerifyError(f"name '%{name}' is defined twice")
        names.add(name)
    saved: dict[str, int] = {}
    for fn in module.functions:
        try:
            order = fn.nodes
        except ValueError as e:
            raise VerifyError(f"function @{fn.name}: {e}") from None
        defined: set[int] = set()
        for node in order:
            if node.name in names:
                raise VerifyError(f"node name '{node.name}' is defined twice {_where(fn, node)}")
            names.add(node.name)
            opdef = get_op(node.op)
            try:
                normal = opdef.normalize_attrs(node.attrs, node.name)
            except VerifyError as e:
                raise VerifyError(f"{e.message} {_where(fn, node)}") from None
            if normal != node.attrs:
                raise VerifyError(f"attributes are not normalised {_where(fn, node)}")
            for i, v in enumerate(node.operands):
                if isinstance(v, Constant):
                    if module.constants.get(v.name) is not v:
                        raise VerifyError(
                            f"operand {i} is a constant not in the module {_where(fn, node)}"
                        )
                elif isinstance(v, Placeholder):
                    if module.placeholders.get(v.name) is not v:
                        raise VerifyError(
                            f"operand {i} is a placeholder not in the module {_where(fn, node)}"
                        )
                elif isinstance(v, Result):
                    if v.node.function is not fn or id(v.node) not in defined:
                        raise VerifyError(
                            f"operand {i} (%{v.name}) is not defined before use {_where(fn, node)}"
                        )
                else:
                    raise VerifyError(f"operand {i} has unknown kind {_where(fn, node)}")
                if (node, i) not in v.users:
                    raise VerifyError(
                        f"use list of %{v.name} misses operand {i} {_where(fn, node)}"
                    )
            try:
                expect = opdef.infer_types([v.type for v in node.operands], node.attrs, node.name)
            except Exception as e:  # noqa: BLE001 - report any inference failure as a verify error
                raise VerifyError(f"type inference failed: {e} {_where(fn, node)}") from None
            got = [r.type for r in node.results]
            if expect != got:
                raise VerifyError(
                    f"result types {', '.join(map(str, got))} differ from inferred "
                    f"{', '.join(map(str, expect))} {_where(fn, node)}"
                )
            for r in node.results:
                for user, idx in r.users:
                    if (
                        user.function is not fn
                        or idx >= len(user.operands)
                        or user.operands[idx] is not r
                    ):
                        raise VerifyError(f"stale use of %{r.name} {_where(fn, node)}")
            if node.op == "Save":
                dst = node.operands[1]
                if not isinstance(dst, Placeholder) or not dst.is_output:
                    raise VerifyError(f"Save must write an output placeholder {_where(fn, node)}")
                saved[dst.name] = saved.get(dst.name, 0) + 1
            elif any(isinstance(v, Placeholder) and v.is_output for v in node.operands):
                raise VerifyError(f"output placeholder read by a node {_where(fn, node)}")
            defined.add(id(node))
    for p in module.outputs():
        if saved.get(p.name, 0) != 1:
            raise VerifyError(f"output placeholder %{p.name} is saved {saved.get(p.name, 0)} times")
