"""Einsum's lowering plan (used by `lower` in compiler/passes/lowering.py): an equation becomes
ReduceSum, Transpose, Reshape and batched MatMul nodes.

1. every operand is broadcast where a letter of size 1 meets the same letter larger elsewhere;
2. letters only one operand has and nothing later needs are summed out of it (ReduceSum);
3. the first two operands are contracted: letters both have and something later needs are
   batch dims, letters both have and nothing needs are contracted, the rest are free: A goes to
   [batch, free_a, contracted], B to [batch, contracted, free_b], one MatMul, then the result
   joins the list in the operands' place; repeat until one operand is left;
4. it is transposed into the output's letter order.

A letter repeated inside one operand (a diagonal, `ii->i`) is taken first: the two dims moved
last and merged (Transpose + Reshape to n*n), then every (n+1)-th element (a strided Slice).
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from compiler.graph.ir import Value
from compiler.graph.ops_extra import parse_einsum


class EinsumPlanError(Exception):
    """The equation is outside what the lowering plans (its message says why)."""


class _Creates(Protocol):
    def op(
        self, op: str, operands: list[Value], attrs: dict[str, Any] | None = None, suffix: str = ""
    ) -> Value: ...


def _transpose(b: _Creates, v: Value, have: str, want: str, tag: str) -> Value:
    if have == want:
        return v
    return b.op("Transpose", [v], {"perm": [have.index(c) for c in want]}, suffix=tag)


def _reshape(b: _Creates, v: Value, shape: tuple[int, ...], tag: str) -> Value:
    if v.type.shape == shape:
        return v
    return b.op("Reshape", [v], {"shape": shape}, suffix=tag)


def _sum_out(b: _Creates, v: Value, letters: str, drop: set[str], tag: str) -> tuple[Value, str]:
    axes = [i for i, c in enumerate(letters) if c in drop]
    if not axes:
        return v, letters
    y = b.op("ReduceSum", [v], {"axes": axes, "keepdims": 0}, suffix=tag)
    return y, "".join(c for c in letters if c not in drop)


def _diagonals(b: _Creates, v: Value, letters: str, tag: str) -> tuple[Value, str]:
    """`v` with every repeated letter reduced to its diagonal (one occurrence kept)."""
    k = 0
    while len(set(letters)) != len(letters):
        c = next(c for c in letters if letters.count(c) > 1)
        i = letters.index(c)
        j = letters.index(c, i + 1)
        n = v.type.shape[i]
        if v.type.shape[j] != n:
            raise EinsumPlanError(f"diagonal of '{c}' over dims of sizes {n} and {v.type.shape[j]}")
        rest = "".join(x for p, x in enumerate(letters) if p not in (i, j))
        perm = [p for p in range(len(letters)) if p not in (i, j)] + [i, j]
        if perm != list(range(len(letters))):
            v = b.op("Transpose", [v], {"perm": perm}, suffix=f"{tag}_diag{k}_t")
        lead = v.type.shape[:-2]
        v = _reshape(b, v, lead + (n * n,), f"{tag}_diag{k}_flat")
        r = len(lead) + 1
        v = b.op(
            "Slice",
            [v],
            {"starts": [0] * r, "ends": list(lead) + [n * n], "steps": [1] * (r - 1) + [n + 1]},
            suffix=f"{tag}_diag{k}",
        )
        letters = rest + c
        k += 1
    return v, letters


def lower_einsum_values(b: _Creates, operands: list[Value], equation: str) -> Value:
    """The nodes computing Einsum(equation) of `operands`; returns the result value."""
    subs, out = parse_einsum(equation, [v.type.rank for v in operands])
    diag = [_diagonals(b, v, s, f"in{i}") for i, (v, s) in enumerate(zip(operands, subs))]
    operands, subs = [v for v, _ in diag], [s for _, s in diag]
    sizes: dict[str, int] = {}
    for v, s in zip(operands, subs):
        for c, d in zip(s, v.type.shape):
            sizes[c] = max(sizes.get(c, d), d)
    terms: list[tuple[Value, str]] = []
    for i, (v, s) in enumerate(zip(operands, subs)):
        full = tuple(sizes[c] for c in s)
        if v.type.shape != full:
            v = b.op("Broadcast", [v], {"shape": full}, suffix=f"bcast{i}")
        terms.append((v, s))

    def needed(skip: set[int]) -> set[str]:
        letters = set(out)
        for j, (_, s) in enumerate(terms):
            if j not in skip:
                letters |= set(s)
        return letters

    for i in range(len(terms)):
        v, s = terms[i]
        terms[i] = _sum_out(b, v, s, set(s) - needed({i}), f"sum{i}")
    step = 0
    while len(terms) > 1:
        (va, sa), (vb, sb) = terms[0], terms[1]
        later = needed({0, 1})
        batch = "".join(c for c in sa if c in sb and c in later)
        contracted = "".join(c for c in sa if c in sb and c not in later)
        free_a = "".join(c for c in sa if c not in sb)
        free_b = "".join(c for c in sb if c not in sa)

        def dims(letters: str) -> int:
            return math.prod(sizes[c] for c in letters)

        a3 = _transpose(b, va, sa, batch + free_a + contracted, f"a{step}_t")
        a3 = _reshape(b, a3, (dims(batch), dims(free_a), dims(contracted)), f"a{step}_3d")
        b3 = _transpose(b, vb, sb, batch + contracted + free_b, f"b{step}_t")
        b3 = _reshape(b, b3, (dims(batch), dims(contracted), dims(free_b)), f"b{step}_3d")
        prod = b.op("MatMul", [a3, b3], suffix=f"mm{step}")
        letters = batch + free_a + free_b
        prod = _reshape(b, prod, tuple(sizes[c] for c in letters), f"mm{step}_nd")
        terms[:2] = [(prod, letters)]
        v, s = terms[0]
        terms[0] = _sum_out(b, v, s, set(s) - needed({0}), f"sum_mm{step}")
        step += 1
    v, s = terms[0]
    v, s = _sum_out(b, v, s, set(s) - set(out), "sum_out")
    return _transpose(b, v, s, out, "out")


__all__ = ["EinsumPlanError", "lower_einsum_values"]
