"""2-D convolution emitter (float32, NCHW) as an implicit GEMM over packed filters.

Per image and group: out[Kg, OH*OW] = Wg[Kg, Cg*R*S] @ im2col(Xg)[Cg*R*S, OH*OW]. The filters are
packed at compile time into the GEMM's MR-row A panels; the im2col matrix is never materialised
whole: each KC block of it is gathered straight into the GEMM's NR-wide B panel buffer, so output
pixels run along the vector lanes and stores stay contiguous in NCHW. 1x1 stride-1 convs pack by
plain row copies. Depthwise convs (Cg == 1) use a direct loop vectorised over output columns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from compiler.backends.llvm.kernels.common import (
    F32,
    Activation,
    apply_activation,
    broadcast,
    clamp,
    fma,
    gep,
    i64,
    in_range,
    load_vec,
    loop,
    mul,
    new_kernel,
    smax,
    smin,
    splat,
    store_vec,
)
from compiler.backends.llvm.kernels.gemm import (
    GemmConfig,
    GemmOperands,
    _strided_b_fill,
    emit_gemm_body,
    gemm_config,
    pack_a_constant,
    panel_a,
    runtime_packed_b,
)


@dataclass(frozen=True)
class ConvShape:
    N: int
    C: int
    H: int
    W: int
    K: int
    R: int
    S: int
    stride: tuple[int, int]
    pad: tuple[int, int, int, int]  # top, left, bottom, right
    dilation: tuple[int, int]
    group: int

    @property
    def OH(self) -> int:
        return (
            self.H + self.pad[0] + self.pad[2] - self.dilation[0] * (self.R - 1) - 1
        ) // self.stride[0] + 1

    @property
    def OW(self) -> int:
        return (
            self.W + self.pad[1] + self.pad[3] - self.dilation[1] * (self.S - 1) - 1
        ) // self.stride[1] + 1

    @property
    def depthwise(self) -> bool:
        return self.C == self.group and self.K % self.group == 0


@dataclass
class ConvKernel:
    """An emitted conv: call ``fn(x, packed_weights, out[, bias])`` with base pointers.

    ``x``: float32[N, C, H, W]; ``out``: float32[N, K, OH, OW]; ``bias``: float32[K] as given.
    ``packed_weights`` (float32, contiguous) replaces the ONNX weight tensor in the constant
    region. Kernels that pack at run time use a module-level scratch buffer: not reentrant.
    """

    fn: ir.Function
    packed_weights: np.ndarray
    shape: ConvShape
    strategy: str  # "gemm-1x1" | "implicit-gemm" | "depthwise-direct"


def _pair(v: int | tuple[int, ...]) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def pack_conv_weights(w: np.ndarray, group: int, isa: str | None = None) -> np.ndarray:
    """[K, C/group, R, S] -> per group, the GEMM's MR-row A panels (see ``pack_a_constant``)."""
    cfg = gemm_config(isa)
    k = w.shape[0]
    kg = k // group
    w2 = np.asarray(w, dtype=np.float32).reshape(group, kg, -1)
    return np.concatenate([pack_a_constant(w2[g], cfg.mr).ravel() for g in range(group)])


def _im2col_fill(cfg: GemmConfig, s: ConvShape, x: ir.Value):
    """Gather rows [pc, pc+kc) of the im2col matrix (rows c*R*S + r*S + s) into B panels."""
    kc_cap = min(cfg.kc, (s.C // s.group) * s.R * s.S)
    nr = cfg.nr
    sh, sw = s.stride
    dh, dw = s.dilation
    pt, pl = s.pad[0], s.pad[1]
    OH, OW, H, W = s.OH, s.OW, s.H, s.W

    def fill(b: ir.IRBuilder, buf: ir.Value, pc: ir.Value, kcv: ir.Value) -> None:
        with loop(b, 0, kcv, 1, "ck") as kk:
            kg = b.add(pc, kk)
            c = b.udiv(kg, i64(s.R * s.S))
            rs = b.urem(kg, i64(s.R * s.S))
            r = b.udiv(rs, i64(s.S))
            sc = b.urem(rs, i64(s.S))
            xc = gep(b, x, mul(b, c, H * W))
            ih0 = b.sub(mul(b, r, dh), i64(pt))
            iw0 = b.sub(mul(b, sc, dw), i64(pl))
            dst_k = gep(b, buf, mul(b, kk, nr))
            # Output columns whose input column is inside the image: [ow_lo, ow_hi). sdiv
            # truncates toward zero, so each numerator is kept >= 0 whenever its bound is > 0:
            # (W-1-iw0)/sw + 1 gave 1 instead of 0 for iw0 = W (stride 2) and read past the row.
            ow_lo = smin(b, smax(b, b.sdiv(b.add(b.sub(i64(0), iw0), i64(sw - 1)), i64(sw)), 0), OW)
            ow_hi = smax(b, smin(b, b.sdiv(b.sub(i64(W - 1 + sw), iw0), i64(sw)), OW), ow_lo)
            with loop(b, 0, OH, 1, "oh") as oh:
                ih = b.add(mul(b, oh, sh), ih0)
                row_ok = in_range(b, ih, H)
                ihc = clamp(b, ih, 0, H - 1)
                xrow = gep(b, xc, mul(b, ihc, W))
                nrow = mul(b, oh, OW)

                def put(n: ir.Value, val: ir.Value) -> None:
                    jp = b.lshr(n, i64(int(math.log2(nr))))
                    lane = b.and_(n, i64(nr - 1))
                    b.store(val, gep(b, dst_k, b.add(mul(b, jp, kc_cap * nr), lane)), align=4)

                zero = ir.Constant(F32, 0.0)
                with loop(b, 0, ow_lo, 1, "owl") as ow:
                    put(b.add(nrow, ow), zero)
                with loop(b, ow_lo, ow_hi, 1, "owm") as ow:
                    iw = b.add(mul(b, ow, sw), iw0)
                    v = b.load(gep(b, xrow, iw), typ=F32, align=4)
                    put(b.add(nrow, ow), b.select(row_ok, v, zero))
                with loop(b, ow_hi, OW, 1, "owr") as ow:
                    put(b.add(nrow, ow), zero)

    return fill


def _emit_depthwise(
    b: ir.IRBuilder,
    s: ConvShape,
    cfg: GemmConfig,
    x: ir.Value,
    w: ir.Value,
    out: ir.Value,
    bias: ir.Value | None,
    activation: Activation,
) -> None:
    """Direct depthwise loop: out[n, k] = sum_rs w[k, r, s] * x[n, k // mult] (shifted)."""
    vw = cfg.vw
    mult = s.K // s.group
    sh, sw = s.stride
    dh, dw = s.dilation
    pt, pl = s.pad[0], s.pad[1]
    OH, OW, H, W, R, S = s.OH, s.OW, s.H, s.W, s.R, s.S
    # Interior output columns need no bounds checks: ow*sw - pl + s*dw in [0, W) for all s.
    ow_lo = min(OW, max(0, -(-pl // sw)))
    ow_hi = max(ow_lo, min(OW, (W - 1 - (S - 1) * dw + pl) // sw + 1))
    nvec_interior = (ow_hi - ow_lo) // vw
    zero_s = ir.Constant(F32, 0.0)
    vty = ir.VectorType(F32, vw)

    with loop(b, 0, s.N, 1, "dn") as n, loop(b, 0, s.K, 1, "dk") as k:
        xc = gep(b, x, b.add(mul(b, n, s.C * H * W), mul(b, b.udiv(k, i64(mult)), H * W)))
        oc = gep(b, out, b.add(mul(b, n, s.K * OH * OW), mul(b, k, OH * OW)))
        wk = gep(b, w, mul(b, k, R * S))
        bval = b.load(gep(b, bias, k), typ=F32) if bias is not None else zero_s
        wv = [b.load(gep(b, wk, i), typ=F32) for i in range(R * S)]
        wb = [broadcast(b, x_, vw) for x_ in wv]
        with loop(b, 0, OH, 1, "doh") as oh:
            ih0 = b.sub(mul(b, oh, sh), i64(pt))
            orow = gep(b, oc, mul(b, oh, OW))
            rows = []
            for r in range(R):
                ih = b.add(ih0, i64(r * dh))
                ok = in_range(b, ih, H)
                rows.append((ok, gep(b, xc, mul(b, clamp(b, ih, 0, H - 1), W))))

            def scalar_cols(lo: int, hi: int) -> None:
                if lo >= hi:
                    return
                with loop(b, lo, hi, 1, "dsc") as ow:
                    acc = bval
                    for r in range(R):
                        ok_r, xrow = rows[r]
                        for sc in range(S):
                            iw = b.add(b.sub(mul(b, ow, sw), i64(pl)), i64(sc * dw))
                            ok = b.and_(
                                ok_r,
                                in_range(b, iw, W),
                            )
                            v = b.load(gep(b, xrow, clamp(b, iw, 0, W - 1)), typ=F32)
                            acc = fma(b, b.select(ok, v, zero_s), wv[r * S + sc], acc)
                    b.store(apply_activation(b, acc, activation), gep(b, orow, ow))

            scalar_cols(0, ow_lo)
            if nvec_interior:
                with loop(b, ow_lo, ow_lo + nvec_interior * vw, vw, "dvc") as ow:
                    acc = broadcast(b, bval, vw) if bias is not None else splat(0.0, vw)
                    base_iw = b.sub(mul(b, ow, sw), i64(pl))
                    for r in range(R):
                        ok_r, xrow = rows[r]
                        for sc in range(S):
                            p = gep(b, xrow, b.add(base_iw, i64(sc * dw)))
                            if sw == 1:
                                v = load_vec(b, p, vw)
                            else:
                                lo = (
                                    b.load(p, typ=ir.VectorType(F32, vw * sw), align=4)
                                    if sw == 2
                                    else None
                                )
                                if lo is not None:
                                    v = b.shuffle_vector(
                                        lo,
                                        ir.Constant(lo.type, ir.Undefined),
                                        ir.Constant(
                                            ir.VectorType(ir.IntType(32), vw),
                                            [i * sw for i in range(vw)],
                                        ),
                                    )
                                else:
                                    v = ir.Constant(vty, ir.Undefined)
                                    for i in range(vw):
                                        e = b.load(gep(b, p, i * sw), typ=F32)
                                        v = b.insert_element(v, e, ir.Constant(ir.IntType(32), i))
                            v = b.select(ok_r, v, splat(0.0, vw))
                            acc = fma(b, v, wb[r * S + sc], acc)
                    store_vec(b, apply_activation(b, acc, activation), gep(b, orow, ow), vw)
            scalar_cols(ow_lo + nvec_interior * vw, OW)


def emit_conv2d(
    module: ir.Module,
    name: str,
    *,
    N: int,
    C: int,
    H: int,
    W: int,
    K: int,
    R: int,
    S: int,
    weights: np.ndarray,
    stride: int | tuple[int, int] = 1,
    pad: tuple[int, int, int, int] | int = 0,
    dilation: int | tuple[int, int] = 1,
    group: int = 1,
    layout: str = "NCHW",
    bias: bool = True,
    activation: Activation = None,
    isa: str | None = None,
) -> ConvKernel:
    """Emit ``void name(ptr x, ptr w_packed, ptr out [, ptr bias])`` for a float32 NCHW conv.

    ``weights``: the ONNX filter [K, C/group, R, S]; the returned ``packed_weights`` is what the
    kernel reads. ``pad`` is (top, left, bottom, right). ``activation``: None, 'relu', ('clip', lo, hi).
    """
    if layout != "NCHW":
        raise ValueError(f"conv {name}: only NCHW is supported, not {layout}")
    p4 = (pad,) * 4 if isinstance(pad, int) else tuple(int(v) for v in pad)
    s = ConvShape(N, C, H, W, K, R, S, _pair(stride), p4, _pair(dilation), group)
    if C % group or K % group:
        raise ValueError(f"conv {name}: C={C} and K={K} must be multiples of group={group}")
    if weights.shape != (K, C // group, R, S):
        raise ValueError(f"conv {name}: weights {weights.shape} != {(K, C // group, R, S)}")
    if s.OH <= 0 or s.OW <= 0:
        raise ValueError(f"conv {name}: empty output {s.OH}x{s.OW}")
    cfg = gemm_config(isa)
    fn, b = new_kernel(module, name, 4 if bias else 3)
    x, w, out = fn.args[:3]
    bptr = fn.args[3] if bias else None

    if s.depthwise and C // group == 1 and K // group <= 2:
        packed = np.ascontiguousarray(weights, dtype=np.float32).ravel()
        _emit_depthwise(b, s, cfg, x, w, out, bptr, activation)
        b.ret_void()
        return ConvKernel(fn, packed, s, "depthwise-direct")

    cg, kgr = C // group, K // group
    kgemm = cg * R * S
    npix = s.OH * s.OW
    packed = pack_conv_weights(weights, group, isa)
    gw = math.ceil(kgr / cfg.mr) * cfg.mr * kgemm  # floats of packed weights per group
    pointwise = R == S == 1 and s.stride == (1, 1) and p4 == (0, 0, 0, 0)
    strategy = "gemm-1x1" if pointwise else "implicit-gemm"
    # The B packer reads the current image/group input through xg_slot (set in the loops below).
    xg_slot = b.alloca(ir.PointerType(), name="xg")

    def fill_any(bb: ir.IRBuilder, buf: ir.Value, pc: ir.Value, kcv: ir.Value) -> None:
        xg = bb.load(xg_slot, typ=ir.PointerType())
        f = (
            _strided_b_fill(cfg, npix, kgemm, xg, H * W, False)
            if pointwise
            else _im2col_fill(cfg, s, xg)
        )
        f(bb, buf, pc, kcv)

    b_addr, b_pack = runtime_packed_b(module, name, cfg, npix, kgemm, fill_any)
    with loop(b, 0, N, 1, "n") as n, loop(b, 0, group, 1, "g") as g:
        xg = gep(b, x, b.add(mul(b, n, C * H * W), mul(b, g, cg * H * W)))
        b.store(xg, xg_slot)
        og = gep(b, out, b.add(mul(b, n, K * npix), mul(b, g, kgr * npix)))
        ops = GemmOperands(
            a_addr=panel_a(gep(b, w, mul(b, g, gw)), kgemm, cfg.mr),
            b_addr=b_addr,
            c_base=og,
            c_stride=npix,
            b_pack=b_pack,
            bias_col=gep(b, bptr, mul(b, g, kgr)) if bptr is not None else None,
            activation=activation,
        )
        emit_gemm_body(b, cfg, kgr, npix, kgemm, ops)
    b.ret_void()
    return ConvKernel(fn, packed, s, strategy)
