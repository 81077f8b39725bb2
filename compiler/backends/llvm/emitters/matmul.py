"""MatMul and FullyConnected: the blocked GEMM kernel (kernels/gemm.py). A constant B is packed
at compile time into a blob appended to the constant region; batch dims of A fold into M when B
has none, otherwise a loop over the (broadcast) batch calls one GEMM per matrix. An `@inout`
destination (the sum post-op) makes the GEMM add to C.
"""

from __future__ import annotations

import math
from typing import Any

from llvmlite import ir

from compiler.backends.llvm.emitters.common import (
    F32,
    F32_ONLY,
    Arg,
    Call,
    EmitContext,
    Emitted,
    broadcast_strides,
    gep,
    linear,
    loop_nest,
    register,
    unsupported,
)
from compiler.backends.llvm.emitters.elementwise import kernel_activation
from compiler.backends.llvm.kernels.gemm import emit_matmul, matmul_config, pack_b_constant
from compiler.graph.types import ElemKind


def _gemm(
    ctx: EmitContext,
    M: int,
    N: int,
    K: int,
    *,
    a_stride: int,
    b_stride: int,
    c_stride: int,
    packed: bool,
    bias: str | None = None,
    activation: Any = None,
    noalias: tuple[bool, ...] = (),
    accumulate: bool = False,
    bias_after: bool = False,
) -> str:
    key = (
        "gemm",
        M,
        N,
        K,
        a_stride,
        b_stride,
        c_stride,
        packed,
        bias,
        activation,
        noalias,
        accumulate,
        bias_after,
    )
    if key in ctx.sink.kernels:
        return ctx.sink.kernels[key]
    fn = emit_matmul(
        ctx.sink.module,
        ctx.sink.fresh_name("gemm"),
        M,
        N,
        K,
        a_stride=a_stride,
        b_stride=b_stride,
        c_stride=c_stride,
        bias=bias,
        activation=activation,
        accumulate=accumulate,
        b_packed=packed,
        bias_after=bias_after,
        cfg=matmul_config(N),
    )
    for a, ok in zip(fn.args, noalias):
        if not ok:
            a.attributes.discard("noalias")
    return ctx.sink.adopt(key, fn)


def _dense_gemm(
    ctx: EmitContext,
    a: Any,
    bm: Any,
    c: Any,
    M: int,
    N: int,
    K: int,
    *,
    activation: Any,
    accumulate: bool,
    bias: Any = None,
    bias_after: bool = False,
) -> Emitted:
    """One GEMM call C[M,N] = A[M,K] @ B[K,N] (+ a row `bias`: the sum's start, or with
    ``bias_after`` added to the finished sum) over contiguous operands. A constant B is packed
    once at compile time into a blob; otherwise it is read in place."""
    data = ctx.constant_data(bm)
    name = _gemm(
        ctx,
        M,
        N,
        K,
        a_stride=K,
        b_stride=N,
        c_stride=N,
        packed=data is not None,
        bias=None if bias is None else "row",
        activation=activation,
        accumulate=accumulate,
        bias_after=bias_after,
    )
    if data is None:
        b_arg = Arg(value=bm)
    else:
        packed = pack_b_constant(data.reshape(K, N), cfg=matmul_config(N))
        b_arg = Arg(blob=ctx.sink.blob(packed, key=("packB", bm.name, packed.shape)))
    args = [Arg(value=a), b_arg, Arg(value=c)] + ([] if bias is None else [Arg(value=bias)])
    return Emitted([Call(name, args)], "gemm" if data is None else "gemm-packed")


def _folds_batch(ins: Any) -> bool:
    """Whether the matmul runs as one GEMM: B has no batch, A's batch folds into M."""
    c, a, bm = (v for v, _ in ins.operands)
    out_batch = tuple(c.type.shape[:-2])
    b_batch = tuple(bm.type.shape[:-2])
    a_batch = tuple(a.type.shape[:-2])
    return math.prod(b_batch) == 1 and (a_batch == out_batch or math.prod(out_batch) == 1)


def matmul_row_bias(ctx: EmitContext, prod: Any, step: Any) -> Any:
    """The constant of ``step`` when it adds a row bias to the result of ``prod`` (a
    non-accumulating float32 MatMul that runs as one GEMM): ``step`` is an Add of prod's dest
    and a constant of N floats broadcast along the last axis (PyTorch's Linear exports as
    MatMul + Add). The GEMM then adds it to each finished sum (``bias_after``), the same bits
    as the Add run on its own. None otherwise."""
    if prod.kind != "matmul" or prod.accumulates or step.kind != "add" or not _folds_batch(prod):
        return None
    dest = prod.operands[0][0]
    if any(v.type.elem != ElemKind.F32 for v, _ in step.operands):
        return None
    srcs = [v for v, _ in step.operands[1:]]
    if len(srcs) != 2 or sum(v is dest for v in srcs) != 1:
        return None
    bias = srcs[1] if srcs[0] is dest else srcs[0]
    n = dest.type.shape[-1]
    shape = tuple(bias.type.shape)
    if not shape or shape[-1] != n or math.prod(shape) != n or len(shape) > dest.type.rank:
        return None
    if tuple(step.operands[0][0].type.shape) != tuple(dest.type.shape):
        return None
    return bias if ctx.constant_data(bias) is not None else None


@register("matmul", elems=F32_ONLY, accumulates=True)
def emit_matmul_instr(ctx: EmitContext, ins: Any) -> Emitted:
    _, a, bm = (v for v, _ in ins.operands)
    c = ctx.result(ins)
    act = ctx.with_epilogue(None)
    bias = ctx.fused_bias()
    if ctx.may_alias(c, a) or ctx.may_alias(c, bm):
        raise unsupported(ins, "matmul output overlaps an input")
    M, K = a.type.shape[-2:]
    N = bm.type.shape[-1]
    acc = ins.accumulates
    out_batch = tuple(c.type.shape[:-2])
    b_batch = tuple(bm.type.shape[:-2])
    a_batch = tuple(a.type.shape[:-2])
    bsz = math.prod(out_batch)
    if _folds_batch(ins):
        Mf = M * bsz
        return _dense_gemm(
            ctx, a, bm, c, Mf, N, K, activation=act, accumulate=acc, bias=bias,
            bias_after=bias is not None,
        )
    if bias is not None:
        raise unsupported(ins, "a row bias in a batched matmul")
    # General batched case: one GEMM per output matrix, operands by broadcast batch strides.
    inner = _gemm(
        ctx,
        M,
        N,
        K,
        a_stride=K,
        b_stride=N,
        c_stride=N,
        packed=False,
        activation=act,
        accumulate=acc,
    )
    sa = [s * M * K for s in broadcast_strides(a_batch, out_batch)]
    sb = [s * K * N for s in broadcast_strides(b_batch, out_batch)]
    sc = [s * M * N for s in broadcast_strides(out_batch, out_batch)]
    key = ("bmm", out_batch, tuple(sa), tuple(sb), tuple(sc), inner)

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        pa, pb, pc = fn.args
        callee = ctx.sink.module.globals[inner]

        def body(ivs):
            b.call(
                callee,
                [
                    gep(b, pa, linear(b, ivs, sa), F32),
                    gep(b, pb, linear(b, ivs, sb), F32),
                    gep(b, pc, linear(b, ivs, sc), F32),
                ],
            )

        loop_nest(b, list(out_batch), body, "bt")

    name = ctx.sink.kernel(key, 3, build, "bmm")
    return Emitted([Call(name, [Arg(value=a), Arg(value=bm), Arg(value=c)])], "batched-gemm")


@register("fullyconnected", elems=F32_ONLY, accumulates=True)
def emit_fc(ctx: EmitContext, ins: Any) -> Emitted:
    _, x, w, bias = (v for v, _ in ins.operands)
    c = ctx.result(ins)
    if ctx.may_alias(c, x):
        raise unsupported(ins, "output overlaps the input")
    M, K = x.type.shape
    N = w.type.shape[1]
    act, act_args = ins.attrs.get("activation", "none"), ins.attrs.get("act_args", ())
    kact = ctx.with_epilogue(kernel_activation(act, act_args))
    return _dense_gemm(
        ctx, x, w, c, M, N, K, activation=kact, accumulate=ins.accumulates, bias=bias
    )


__all__ = ["emit_fc", "emit_matmul_instr", "matmul_row_bias"]
