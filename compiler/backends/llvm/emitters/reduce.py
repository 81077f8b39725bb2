"""Reductions (ReduceSum/Mean/Max/Min/Prod), ArgMax/ArgMin, Softmax/LogSoftmax and the
normalisations (LayerNorm, BatchNorm, LRN). Float sums accumulate in double.
"""

from __future__ import annotations

import math
from typing import Any

from llvmlite import ir

from compiler.backends.llvm.emitters.common import (
    F32,
    F32_ONLY,
    F64,
    I64,
    Arg,
    Call,
    EmitContext,
    Emitted,
    broadcast_strides,
    c64,
    call_intr,
    call_libm,
    compute_type,
    const,
    contiguous_strides,
    entry_alloca,
    fast_exp,
    fast_exp_nonpositive,
    fast_log,
    gep,
    is_nan,
    linear,
    load_elem,
    loop,
    loop_nest,
    register,
    storage_type,
    store_elem,
    unsupported,
)
from compiler.backends.llvm.emitters.elementwise import fmax_nan, fmin_nan, imax, imin
from compiler.backends.llvm.kernels.common import (
    apply_activation,
    broadcast,
    load_vec,
    smin,
    store_vec,
    vector_runs,
)
from compiler.backends.llvm.kernels.parallel import (
    ELEMENT_WORK,
    parallel_loop,
    parallel_range,
    work_chunks,
)
from compiler.backends.llvm.kernels.rows import (
    fadd,
    hreduce,
    masked_load,
    masked_store,
    vbroadcast,
    vector_loop,
    vsplat,
    widen,
)
from compiler.backends.llvm.target import vector_width_f32
from compiler.graph.types import ElemKind

#: Work of one element of a row kernel (a few passes over the row, a transcendental), in
#: multiply-adds, for the parallel chunks.
ROW_WORK = 2 * ELEMENT_WORK


def _split_axes(shape, axes):
    ss = contiguous_strides(shape)
    kept = [(n, s) for i, (n, s) in enumerate(zip(shape, ss)) if i not in axes]
    red = [(n, s) for i, (n, s) in enumerate(zip(shape, ss)) if i in axes]
    return kept, red


@register("reducesum", "reducemean", "reducemax", "reducemin", "reduceprod")
def emit_reduce(ctx: EmitContext, ins: Any) -> Emitted:
    out, x = (v for v, _ in ins.operands)
    elem = x.type.elem
    rank = x.type.rank
    axes = sorted({a % max(rank, 1) for a in ins.attrs["axes"]})
    op = ins.kind[6:]
    kept, red = _split_axes(x.type.shape, axes)
    kshape = [n for n, _ in kept] or [1]
    kstr = [s for _, s in kept] or [0]
    rshape = [n for n, _ in red] or [1]
    rstr = [s for _, s in red] or [0]
    count = math.prod(rshape)
    if out.type.numel == 0:
        return Emitted([], "empty")
    if x.type.numel == 0:
        if op not in ("sum", "prod"):
            raise unsupported(ins, f"reduce{op} of an empty tensor")
        return Emitted([_fill(ctx, out, 0 if op == "sum" else 1)], "fill")
    isf = elem.is_float
    unsigned = elem.is_unsigned
    cty = compute_type(elem)
    aty = F64 if isf and op in ("sum", "mean", "prod") else cty
    ety = storage_type(elem)
    key = ("reduce", op, tuple(x.type.shape), tuple(axes), elem)

    # Float reductions over trailing axes read each output's inputs as one contiguous row:
    # vector lanes (double for sum/mean/prod), combined in a fixed order.
    rows = isf and elem == ElemKind.F32 and axes == list(range(rank - len(axes), rank))

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        po, px = fn.args
        ocs = contiguous_strides(kshape)
        if rows:
            vw = vector_width_f32()
            wide = op in ("sum", "mean", "prod")
            fill = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "max": -math.inf, "min": math.inf}[op]
            combine = {"sum": fadd, "mean": fadd, "prod": _fmul, "max": fmax_nan, "min": fmin_nan}[
                op
            ]

            kcount = math.prod(kshape)
            kflat = contiguous_strides(kshape)

            def row(b: ir.IRBuilder, k: ir.Value, tid: ir.Value, args: list[ir.Value]) -> None:
                po, px = args
                # The kept dims' offset of flat output index k.
                off: ir.Value = c64(0)
                for n_, st, fl in zip(kshape, kstr, kflat):
                    idx = b.urem(b.udiv(k, c64(fl)), c64(n_)) if n_ > 1 else None
                    if idx is not None and st:
                        off = b.add(off, b.mul(idx, c64(st)))
                xr = gep(b, px, off, F32)

                def step(j, valid, c):
                    v = masked_load(b, gep(b, xr, j), vw, valid, fill)
                    return [combine(b, c[0], widen(b, v) if wide else v)]

                (acc,) = vector_loop(b, count, vw, [vsplat(fill, vw, F64 if wide else F32)], step)
                r = hreduce(b, acc, combine)
                if op == "mean":
                    r = b.fdiv(r, const(F64, float(count)))
                if wide:
                    r = b.fptrunc(r, F32)
                b.store(r, gep(b, po, k, F32))

            parallel_range(b, kcount, kcount * count * ELEMENT_WORK, [po, px], row, "k")
            return

        def outer(kivs):
            base = linear(b, kivs, kstr)
            acc = entry_alloca(b, aty)
            if op in ("sum", "mean"):
                init = const(aty, 0)
            elif op == "prod":
                init = const(aty, 1)
            else:
                init = None
            first = load_elem(b, gep(b, px, base, ety), elem)
            b.store(init if init is not None else first, acc)

            def inner(rivs):
                v = load_elem(b, gep(b, px, b.add(base, linear(b, rivs, rstr)), ety), elem)
                if aty == F64 and v.type != F64:
                    v = b.fpext(v, F64)
                cur = b.load(acc, typ=aty)
                if op in ("sum", "mean"):
                    nv = b.fadd(cur, v) if isf else b.add(cur, v)
                elif op == "prod":
                    nv = b.fmul(cur, v) if isf else b.mul(cur, v)
                elif op == "max":
                    nv = fmax_nan(b, cur, v) if isf else imax(b, cur, v, unsigned)
                else:
                    nv = fmin_nan(b, cur, v) if isf else imin(b, cur, v, unsigned)
                b.store(nv, acc)

            loop_nest(b, rshape, inner, "r")
            r = b.load(acc, typ=aty)
            if op == "mean":
                if isf:
                    r = b.fdiv(r, const(F64, float(count)))
                else:
                    r = b.udiv(r, const(cty, count)) if unsigned else b.sdiv(r, const(cty, count))
            if r.type != cty:
                r = b.fptrunc(r, cty)
            store_elem(b, r, gep(b, po, linear(b, kivs, ocs), ety), elem)

        loop_nest(b, kshape, outer, "k")

    name = ctx.sink.kernel(key, 2, build, "reduce")
    return Emitted([Call(name, [Arg(value=out), Arg(value=x)])], "loop")


def _fmul(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.fmul(x, y)


def _fill(ctx: EmitContext, out: Any, value: float) -> Call:
    elem = out.type.elem
    n = out.type.numel
    key = ("fill", n, elem, value)

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        with loop(b, 0, n, 1, "f") as i:
            store_elem(
                b, const(compute_type(elem), value), gep(b, fn.args[0], i, storage_type(elem)), elem
            )

    return Call(ctx.sink.kernel(key, 1, build, "fill"), [Arg(value=out)])


def _axis_split(shape, axis):
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])


@register("argmax", "argmin")
def emit_arg(ctx: EmitContext, ins: Any) -> Emitted:
    out, x = (v for v, _ in ins.operands)
    elem = x.type.elem
    ax = ins.attrs["axis"] % max(x.type.rank, 1)
    outer, n, inner = _axis_split(x.type.shape, ax)
    last = bool(ins.attrs["select_last_index"])
    is_max = ins.kind == "argmax"
    isf = elem.is_float
    unsigned = elem.is_unsigned
    ety = storage_type(elem)
    cty = compute_type(elem)
    key = (ins.kind, outer, n, inner, last, elem)
    if n == 0:
        raise unsupported(ins, "arg-reduction over an empty axis")

    def better(b, v, best):
        if isf:
            strict = b.fcmp_ordered(">" if is_max else "<", v, best)
            weak = b.fcmp_ordered(">=" if is_max else "<=", v, best)
            vn, bn = is_nan(b, v), is_nan(b, best)
            if last:
                return b.or_(b.and_(weak, b.not_(bn)), vn)
            return b.or_(strict, b.and_(vn, b.not_(bn)))
        op = (">=" if is_max else "<=") if last else (">" if is_max else "<")
        return b.icmp_unsigned(op, v, best) if unsigned else b.icmp_signed(op, v, best)

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        po, px = fn.args
        with loop(b, 0, outer, 1, "o") as o, loop(b, 0, inner, 1, "i") as i:
            base = b.add(b.mul(o, c64(n * inner)), i)
            best = entry_alloca(b, cty)
            bi = entry_alloca(b, I64)
            b.store(load_elem(b, gep(b, px, base, ety), elem), best)
            b.store(c64(0), bi)
            with loop(b, 1, n, 1, "j") as j:
                v = load_elem(b, gep(b, px, b.add(base, b.mul(j, c64(inner))), ety), elem)
                cur = b.load(best, typ=cty)
                c = better(b, v, cur)
                b.store(b.select(c, v, cur), best)
                b.store(b.select(c, j, b.load(bi, typ=I64)), bi)
            b.store(b.load(bi, typ=I64), gep(b, po, b.add(b.mul(o, c64(inner)), i), I64))

    name = ctx.sink.kernel(key, 2, build, ins.kind)
    return Emitted([Call(name, [Arg(value=out), Arg(value=x)])], "loop")


@register("softmax", "logsoftmax", elems=F32_ONLY)
def emit_softmax(ctx: EmitContext, ins: Any) -> Emitted:
    out, x = (v for v, _ in ins.operands)
    ax = ins.attrs["axis"] % x.type.rank
    outer, n, inner = _axis_split(x.type.shape, ax)
    log = ins.kind == "logsoftmax"
    key = (ins.kind, outer, n, inner)
    if x.type.numel == 0:
        return Emitted([], "empty")

    vw = vector_width_f32()

    group = _short_row_group(outer, n, inner, vw)

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        def row(bb: ir.IRBuilder, o: ir.Value, tid: ir.Value, args: list[ir.Value]) -> None:
            po, px = args
            off = bb.mul(o, c64(n * inner))
            xr, orow = gep(bb, px, off, F32), gep(bb, po, off, F32)
            if inner == 1:
                _softmax_row(bb, xr, orow, n, vw, log)
            else:
                _softmax_columns(bb, xr, orow, n, inner, vw, log)

        def rows(bb: ir.IRBuilder, g: ir.Value, tid: ir.Value, args: list[ir.Value]) -> None:
            po, px = args
            offs = [bb.mul(bb.add(bb.mul(g, c64(group)), c64(r)), c64(n)) for r in range(group)]
            _softmax_short_rows(
                bb, [gep(bb, px, o, F32) for o in offs], [gep(bb, po, o, F32) for o in offs],
                n, vw, log,
            )

        work = outer * n * inner * ROW_WORK
        if group > 1:
            parallel_range(b, outer // group, work, list(fn.args), rows, "og")
        else:
            parallel_range(b, outer, work, list(fn.args), row, "o")

    name = ctx.sink.kernel(key, 2, build, ins.kind)
    return Emitted([Call(name, [Arg(value=out), Arg(value=x)])], "loop")


def _lanes(b: ir.IRBuilder, v: ir.Value, valid: int, fill: float) -> ir.Value:
    """``v`` with the lanes from ``valid`` on replaced by ``fill`` (a tail vector)."""
    n = v.type.count
    if valid >= n:
        return v
    mask = ir.Constant(ir.VectorType(ir.IntType(1), n), [int(i < valid) for i in range(n)])
    return b.select(mask, v, vsplat(fill, n))


#: Independent running maxima of a softmax row's max pass (a chain of compare-selects, ~6
#: cycles a vector with one): the row's vectors are dealt to them in turn.
SOFTMAX_MAX_CHAINS = 4
#: Normalise by one reciprocal of the row's sum and a multiply per vector (one division per
#: vector took ~6 cycles on AVX-512); at most an ulp from dividing every element.
SOFTMAX_RECIPROCAL = True
#: exp(x - max) without fast_exp's overflow clamp (the argument is never positive).
SOFTMAX_EXP_NONPOSITIVE = True


def _softmax_row(b: ir.IRBuilder, x: ir.Value, out: ir.Value, n: int, vw: int, log: bool) -> None:
    """(Log)Softmax of one contiguous row of ``n`` floats: a vector max pass, a pass storing
    exp(x - max) (or x - max) and summing the exps in double lanes, a normalising pass."""
    chains = max(1, SOFTMAX_MAX_CHAINS)

    def vmax(j, valid, c):
        # ``chains`` vectors per step, each into its own running max (lanes past the row: -inf).
        out = list(c)
        for k in range(chains):
            lanes = min(valid - k * vw, vw)
            if lanes > 0:
                p = gep(b, x, b.add(j, c64(k * vw)) if k else j)
                out[k] = fmax_nan(b, c[k], masked_load(b, p, vw, lanes, -math.inf))
        return out

    parts = vector_loop(b, n, vw * chains, [vsplat(-math.inf, vw)] * chains, vmax, "smax")
    while len(parts) > 1:  # pairwise, in a fixed order
        parts = [fmax_nan(b, p, q) for p, q in zip(parts[::2], parts[1::2])] + (
            [parts[-1]] if len(parts) % 2 else []
        )
    m = vbroadcast(b, hreduce(b, parts[0], fmax_nan), vw)
    exp = fast_exp_nonpositive if SOFTMAX_EXP_NONPOSITIVE else fast_exp

    def vexp(j, valid, c):
        s = b.fsub(masked_load(b, gep(b, x, j), vw, valid), m)
        e = _lanes(b, exp(b, s), valid, 0.0)
        masked_store(b, s if log else e, gep(b, out, j), vw, valid)
        return [b.fadd(c[0], widen(b, e))]

    (sv,) = vector_loop(b, n, vw, [vsplat(0.0, vw, F64)], vexp, "sexp")
    tot = b.fptrunc(hreduce(b, sv, fadd), F32)
    if log:
        shift = vbroadcast(b, call_libm(b, "logf", tot), vw)
    elif SOFTMAX_RECIPROCAL:
        scale = vbroadcast(b, b.fdiv(const(F32, 1.0), tot), vw)
    totv = vbroadcast(b, tot, vw)

    def vnorm(j, valid, c):
        p = gep(b, out, j)
        v = masked_load(b, p, vw, valid)
        if log:
            y = b.fsub(v, shift)
        elif SOFTMAX_RECIPROCAL:
            y = b.fmul(v, scale)
        else:
            y = b.fdiv(v, totv)
        masked_store(b, y, p, vw, valid)
        return []

    vector_loop(b, n, vw, [], vnorm, "snorm")


#: Rows of at most one vector are done this many at a time, each stage for all of them in
#: straight-line code (a row alone is one chain of dependent steps: load, max across lanes,
#: exp, sum across lanes, scale); 1: one row at a time.
SOFTMAX_SHORT_ROWS = 8


def _short_row_group(outer: int, n: int, inner: int, vw: int) -> int:
    """How many rows ``_softmax_short_rows`` takes at once (1: the row-by-row kernel)."""
    if inner != 1 or n > vw:
        return 1
    g = SOFTMAX_SHORT_ROWS
    while g > 1 and outer % g:
        g //= 2
    return max(g, 1)


def _softmax_short_rows(
    b: ir.IRBuilder, xs: list[ir.Value], outs: list[ir.Value], n: int, vw: int, log: bool
) -> None:
    """(Log)Softmax of rows of ``n <= vw`` floats, all at once stage by stage; the same values
    as ``_softmax_row`` (its single vector and the same reductions)."""
    exp = fast_exp_nonpositive if SOFTMAX_EXP_NONPOSITIVE else fast_exp
    vs = [masked_load(b, x, vw, n, -math.inf) for x in xs]
    ms = [vbroadcast(b, hreduce(b, v, fmax_nan), vw) for v in vs]
    ss = [b.fsub(_lanes(b, v, n, 0.0), m) for v, m in zip(vs, ms)]
    es = [_lanes(b, exp(b, sv), n, 0.0) for sv in ss]
    tots = [b.fptrunc(hreduce(b, widen(b, e), fadd), F32) for e in es]
    for sv, e, tot, out in zip(ss, es, tots, outs):
        if log:
            y = b.fsub(sv, vbroadcast(b, call_libm(b, "logf", tot), vw))
        elif SOFTMAX_RECIPROCAL:
            y = b.fmul(e, vbroadcast(b, b.fdiv(const(F32, 1.0), tot), vw))
        else:
            y = b.fdiv(e, vbroadcast(b, tot, vw))
        masked_store(b, y, out, vw, n)


def _softmax_columns(
    b: ir.IRBuilder, x: ir.Value, out: ir.Value, n: int, inner: int, vw: int, log: bool
) -> None:
    """(Log)Softmax over the middle axis of [n, inner]: lanes run along ``inner`` (contiguous),
    so every reduction is lane-wise."""

    def column_block(i0, valid, c):
        def at(p, j):
            return gep(b, p, b.add(b.mul(j, c64(inner)), i0), F32)

        m = masked_load(b, at(x, c64(0)), vw, valid)
        mx = entry_alloca(b, m.type)
        b.store(m, mx)
        with loop(b, 1, n, 1, "cm") as j:
            b.store(fmax_nan(b, b.load(mx, typ=m.type), masked_load(b, at(x, j), vw, valid)), mx)
        m = b.load(mx, typ=m.type)
        d64 = ir.VectorType(F64, vw)
        sm = entry_alloca(b, d64)
        b.store(vsplat(0.0, vw, F64), sm)
        with loop(b, 0, n, 1, "ce") as j:
            s = b.fsub(masked_load(b, at(x, j), vw, valid), m)
            e = fast_exp(b, s)
            masked_store(b, s if log else e, at(out, j), vw, valid)
            b.store(b.fadd(b.load(sm, typ=d64), widen(b, e)), sm)
        tot = b.fptrunc(b.load(sm, typ=d64), ir.VectorType(F32, vw))
        if log:
            tot = fast_log(b, tot)
        elif SOFTMAX_RECIPROCAL:
            tot = b.fdiv(vsplat(1.0, vw), tot)
        with loop(b, 0, n, 1, "cw") as j:
            p = at(out, j)
            v = masked_load(b, p, vw, valid)
            y = b.fsub(v, tot) if log else b.fmul(v, tot) if SOFTMAX_RECIPROCAL else b.fdiv(v, tot)
            masked_store(b, y, p, vw, valid)
        return []

    vector_loop(b, inner, vw, [], column_block, "ccol")


#: LayerNorm's normalising pass in float32 lanes ((x - mean) * inv with the mean as two floats,
#: then scale and bias as one fused multiply-add) instead of double; the statistics stay double.
LAYERNORM_F32_NORMALISE = True


def _ln_moments(
    b: ir.IRBuilder, v1: ir.Value, v2: ir.Value, m: int, eps: float
) -> tuple[ir.Value, ir.Value]:
    """(mean, 1 / sqrt(var + eps)) in double from a row's lane sums of x and x^2."""
    mean = b.fdiv(hreduce(b, v1, fadd), const(F64, float(m)))
    msq = b.fdiv(hreduce(b, v2, fadd), const(F64, float(m)))
    var = b.fsub(msq, b.fmul(mean, mean))
    var = b.select(b.fcmp_ordered("<", var, const(F64, 0.0)), const(F64, 0.0), var)
    inv = b.fdiv(const(F64, 1.0), call_intr(b, "sqrt", b.fadd(var, const(F64, eps))))
    return mean, inv


@register("layernorm", elems=F32_ONLY)
def emit_layernorm(ctx: EmitContext, ins: Any) -> Emitted:
    out, x, scale, bias = (v for v, _ in ins.operands)
    ax = ins.attrs["axis"] % x.type.rank
    eps = ins.attrs["epsilon"]
    norm = tuple(x.type.shape[ax:])
    outer = math.prod(x.type.shape[:ax])
    m = math.prod(norm)
    ss = broadcast_strides(scale.type.shape, norm)
    bs = broadcast_strides(bias.type.shape, norm)
    key = ("layernorm", outer, norm, tuple(ss), tuple(bs), eps)

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        cs = contiguous_strides(norm)
        dense = tuple(ss) == cs and tuple(bs) == cs  # scale and bias as long as the row
        vw = vector_width_f32()

        def row(b: ir.IRBuilder, o: ir.Value, tid: ir.Value, args: list[ir.Value]) -> None:
            po, px, psc, pbi = args
            base = b.mul(o, c64(m))
            xr = gep(b, px, base, F32)
            orow = gep(b, po, base, F32)

            # One pass for the mean and variance (sums of x and x^2 in double lanes, as
            # onnxruntime sums in double), then one normalising pass with one division per row.
            def stats(j, valid, c):
                v = widen(b, masked_load(b, gep(b, xr, j), vw, valid))
                return [b.fadd(c[0], v), b.fadd(c[1], b.fmul(v, v))]

            zero = vsplat(0.0, vw, F64)
            v1, v2 = vector_loop(b, m, vw, [zero, zero], stats, "lns")
            mean, inv = _ln_moments(b, v1, v2, m, eps)
            if dense and LAYERNORM_F32_NORMALISE:
                # (x - mean) * inv in float32 lanes, half the double work: the mean as two
                # floats (its float32 rounding and the rest), so x - mean stays exact for rows
                # whose mean is thousands of times their spread (x - hi is exact near the mean).
                hi = b.fptrunc(mean, F32)
                lo = b.fptrunc(b.fsub(mean, b.fpext(hi, F64)), F32)
                mv, lv = vbroadcast(b, hi, vw), vbroadcast(b, lo, vw)
                iv = vbroadcast(b, b.fptrunc(inv, F32), vw)

                def normalise32(j, valid, c):
                    x = masked_load(b, gep(b, xr, j), vw, valid)
                    y = b.fmul(b.fsub(b.fsub(x, mv), lv), iv)
                    sc = masked_load(b, gep(b, psc, j), vw, valid)
                    bi = masked_load(b, gep(b, pbi, j), vw, valid)
                    masked_store(b, call_intr(b, "fmuladd", y, sc, bi), gep(b, orow, j), vw, valid)
                    return []

                vector_loop(b, m, vw, [], normalise32, "lnn")
            elif dense:
                meanv, invv = vbroadcast(b, mean, vw), vbroadcast(b, inv, vw)

                def normalise(j, valid, c):
                    def ld(p):
                        return widen(b, masked_load(b, gep(b, p, j), vw, valid))

                    y = b.fmul(b.fsub(ld(xr), meanv), invv)
                    y = b.fadd(b.fmul(y, ld(psc)), ld(pbi))
                    masked_store(
                        b, b.fptrunc(y, ir.VectorType(F32, vw)), gep(b, orow, j), vw, valid
                    )
                    return []

                vector_loop(b, m, vw, [], normalise, "lnn")
            else:

                def body(ivs):
                    j = linear(b, ivs, cs)
                    v = b.fpext(b.load(gep(b, xr, j, F32), typ=F32), F64)
                    y = b.fmul(b.fsub(v, mean), inv)
                    sc = b.fpext(b.load(gep(b, psc, linear(b, ivs, ss), F32), typ=F32), F64)
                    bi = b.fpext(b.load(gep(b, pbi, linear(b, ivs, bs), F32), typ=F32), F64)
                    b.store(b.fptrunc(b.fadd(b.fmul(y, sc), bi), F32), gep(b, orow, j, F32))

                loop_nest(b, list(norm), body, "n")

        parallel_range(b, outer, outer * m * ROW_WORK, list(fn.args), row, "o")

    name = ctx.sink.kernel(key, 4, build, "layernorm")
    return Emitted(
        [Call(name, [Arg(value=out), Arg(value=x), Arg(value=scale), Arg(value=bias)])], "loop"
    )


@register("batchnorm", elems=F32_ONLY)
def emit_batchnorm(ctx: EmitContext, ins: Any) -> Emitted:
    _, x, scale, bias, mean, var = (v for v, _ in ins.operands)
    out = ctx.result(ins)
    N, C = x.type.shape[:2]
    inner = math.prod(x.type.shape[2:])
    eps = ins.attrs["epsilon"]
    # A chain of element-wise instructions after it (DenseNet's ReLU before each conv) runs on
    # its vectors before they are stored (codegen.EPILOGUE_PRODUCERS): one pass, not two.
    ep = ctx.with_epilogue(None)
    vw = vector_width_f32()
    # The channel count is an argument: DenseNet's 120 BNs (C = 64 + 32i) share a kernel per
    # plane size and power of two of C, whose chunks (by whole channels) follow that power.
    crep = 1 << (C.bit_length() - 1)
    chunks = work_chunks(N * crep * inner * ELEMENT_WORK, N * crep)
    key = ("batchnorm", N, inner, eps, ep, vw, chunks)

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        def channel(b: ir.IRBuilder, i: ir.Value, args: list[ir.Value]) -> None:
            po, px, psc, pbi, pm, pv, nc = args
            c = b.urem(i, nc) if N > 1 else i
            # Per channel, in double: y = x * s + t, s = gamma / sqrt(var + eps), t = beta -
            # mean * s (the constants lowering would fold at compile time; here parameters may
            # be inputs); then float32 lanes, each x * s + t rounded twice as before.
            ld = lambda p: b.fpext(b.load(gep(b, p, c, F32), typ=F32), F64)  # noqa: E731
            s = b.fdiv(ld(psc), call_intr(b, "sqrt", b.fadd(ld(pv), const(F64, eps))))
            t = b.fptrunc(b.fsub(ld(pbi), b.fmul(ld(pm), s)), F32)
            s = b.fptrunc(s, F32)
            sv, tv = broadcast(b, s, vw), broadcast(b, t, vw)
            base = b.mul(i, c64(inner))
            xrow, orow = gep(b, px, base, F32), gep(b, po, base, F32)

            def run(j0: Any, valid: int) -> None:
                v = load_vec(b, gep(b, xrow, j0, F32), vw, valid)
                y = apply_activation(b, b.fadd(b.fmul(v, sv), tv), ep)
                store_vec(b, y, gep(b, orow, j0, F32), vw, valid)

            vector_runs(b, inner, vw, run, "p")

        def part(b: ir.IRBuilder, k: ir.Value, _tid: ir.Value, args: list[ir.Value]) -> None:
            # Chunk k of `chunks`: whole channels (items n * C + c), the same on every run.
            count = b.mul(args[6], c64(N))
            per = b.udiv(b.add(count, c64(chunks - 1)), c64(chunks))
            lo = b.mul(k, per)
            with loop(b, lo, smin(b, b.add(lo, per), count), 1, "c") as i:
                channel(b, i, args)

        # The channels are independent: spread over the pool (it ran on one thread).
        parallel_loop(b, chunks, list(fn.args), part, "c")

    name = ctx.sink.kernel(key, 6, build, "batchnorm", scalars=1)
    args = [Arg(value=out)] + [Arg(value=v) for v, _ in ins.operands[1:]] + [Arg(scalar=C)]
    return Emitted([Call(name, args)], "loop")


@register("lrn", elems=F32_ONLY)
def emit_lrn(ctx: EmitContext, ins: Any) -> Emitted:
    out, x = (v for v, _ in ins.operands)
    at = ins.attrs
    size = at["size"]
    N, C = x.type.shape[:2]
    inner = math.prod(x.type.shape[2:])
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    key = ("lrn", N, C, inner, size, at["alpha"], at["beta"], at["bias"])

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        po, px = fn.args
        with loop(b, 0, N, 1, "n") as n, loop(b, 0, C, 1, "c") as c, loop(b, 0, inner, 1, "p") as p:
            nb = b.mul(n, c64(C * inner))
            c0 = b.sub(c, c64(lo))
            c0 = b.select(b.icmp_signed("<", c0, c64(0)), c64(0), c0)
            c1 = b.add(c, c64(hi + 1))
            c1 = b.select(b.icmp_signed(">", c1, c64(C)), c64(C), c1)
            acc = entry_alloca(b, F64)
            b.store(const(F64, 0.0), acc)
            with loop(b, c0, c1, 1, "q") as q:
                v = b.fpext(
                    b.load(gep(b, px, b.add(nb, b.add(b.mul(q, c64(inner)), p)), F32), typ=F32), F64
                )
                b.store(b.fadd(b.load(acc, typ=F64), b.fmul(v, v)), acc)
            s = b.load(acc, typ=F64)
            d = b.fadd(const(F64, at["bias"]), b.fmul(const(F64, at["alpha"] / size), s))
            d = call_libm(b, "pow", d, const(F64, at["beta"]))
            q = b.add(nb, b.add(b.mul(c, c64(inner)), p))
            v = b.fpext(b.load(gep(b, px, q, F32), typ=F32), F64)
            b.store(b.fptrunc(b.fdiv(v, d), F32), gep(b, po, q, F32))

    name = ctx.sink.kernel(key, 2, build, "lrn")
    return Emitted([Call(name, [Arg(value=out), Arg(value=x)])], "loop")


__all__ = ["emit_arg", "emit_layernorm", "emit_reduce", "emit_softmax"]
