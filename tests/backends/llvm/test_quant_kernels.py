"""The int8 kernels against the reference arithmetic, bit for bit, on every int8 ISA flavour.

One graph holds a grid of quantized ops (convolutions of many geometries: 1x1, 3x3 with and
without padding, strides 1-2, dilation, a few-channel stem, grouped and depthwise, tails in
every tiling dimension; fully connected layers; products of two activations; QAdd/QMul with
broadcasting; pools; Quantize/Dequantize/RescaleQuantized with clamps), each fed from its own
float input through a Quantize and read out through a Dequantize. It is compiled once per
flavour (AVX-512 VNNI, AVX-VNNI, AVX2, plain SSE: `$GLOWVIZ_LLVM_FEATURES` / `_CPU` pick them)
and the LLVM executor must give exactly the arena interpreter's outputs.
"""

from __future__ import annotations

import llvmlite.binding as llvm_binding
import numpy as np
import pytest

from compiler.backends.llvm import target
from compiler.executors import make_executor
from compiler.graph.ir import Module, Value
from compiler.graph.types import f32
from compiler.kernels.reference_quant import softmax_table
from compiler.pipeline import CompileOptions, compile_model

RNG = np.random.default_rng(1234)

#: (name, x shape, K, kernel, stride, pads, dilation, group)
CONVS = [
    ("c1x1", (1, 16, 7, 9), 24, 1, 1, (0, 0, 0, 0), 1, 1),
    ("c1x1_s2", (1, 8, 9, 9), 20, 1, 2, (0, 0, 0, 0), 1, 1),
    ("c3x3", (1, 8, 10, 11), 12, 3, 1, (1, 1, 1, 1), 1, 1),
    ("c3x3_valid", (2, 5, 6, 7), 9, 3, 1, (0, 0, 0, 0), 1, 1),
    ("c3x3_s2", (1, 12, 11, 10), 17, 3, 2, (1, 1, 1, 1), 1, 1),
    ("c3x3_asym", (1, 6, 8, 8), 8, 3, 2, (0, 1, 1, 0), 1, 1),
    ("c3x3_dil", (1, 4, 9, 9), 8, 3, 1, (2, 2, 2, 2), 2, 1),
    ("stem", (1, 3, 19, 19), 16, 7, 2, (3, 3, 3, 3), 1, 1),
    ("grouped", (1, 8, 6, 6), 12, 3, 1, (1, 1, 1, 1), 1, 2),
    ("dw", (1, 10, 9, 13), 10, 3, 1, (1, 1, 1, 1), 1, 10),
    ("dw_s2", (1, 6, 12, 12), 6, 3, 2, (1, 1, 1, 1), 1, 6),
    ("dw_valid", (1, 4, 7, 7), 4, 3, 1, (0, 0, 0, 0), 1, 4),
    # Two images, and a 1x1 depthwise whose plane grid is the output (stored in place).
    ("dw_1x1_n2", (2, 5, 4, 6), 5, 1, 1, (0, 0, 0, 0), 1, 5),
    # Biases near 2**24: the sums leave float32's exact integers, so the depthwise kernel adds
    # the bias in int32 (the others start their float32 sums from it).
    ("dw_bigbias", (1, 6, 8, 8), 6, 3, 1, (1, 1, 1, 1), 1, 6),
    ("big_k", (1, 40, 5, 5), 70, 3, 1, (1, 1, 1, 1), 1, 1),
    # 49 output pixels: a one-lane tail tile, whose eight rows store one byte each.
    ("c7x7", (1, 24, 7, 7), 20, 1, 1, (0, 0, 0, 0), 1, 1),
]
#: The convolutions also run accumulating into a residual (the int8 sum post-op): a direct
#: 1x1 (its output is the plane grid), padded ones (compacted from a wider grid), a tail.
SUMS = ("c1x1", "c3x3", "c3x3_s2", "grouped", "c7x7")
#: (name, M, K, N)
FCS = [
    ("fc", 5, 37, 19),
    ("fc_wide", 9, 64, 48),
    ("fc_one", 1, 3, 1),
    ("fc_n64", 16, 64, 64),
    ("fc_n100", 3, 20, 100),
    ("fc_n49", 9, 16, 49),
]


def _q(m: Module, fn, x: Value, scale: float, offset: int) -> Value:
    return fn.create("Quantize", [x], {"scale": scale, "offset": offset}).result


def _out(m: Module, fn, q: Value, name: str) -> None:
    d = fn.create("Dequantize", [q]).result
    p = m.add_placeholder(f"out_{name}", d.type, is_output=True)
    fn.create("Save", [d, p])


def _grid_module() -> tuple[Module, dict[str, np.ndarray]]:
    m = Module("qgrid")
    m.meta["int8_sum_post_op"] = True  # the project's own int8 arithmetic, as quantizing makes
    fn = m.create_function()
    inputs: dict[str, np.ndarray] = {}

    def inp(name: str, shape: tuple[int, ...]) -> Value:
        p = m.add_placeholder(name, f32(*shape))
        data = RNG.standard_normal(shape).astype(np.float32) * 2
        data.reshape(-1)[:3] = [np.nan, 1e30, -1e30]  # saturation and NaN inputs
        inputs[name] = data
        return p

    for name, xs, k, r, st, pads, dil, grp in CONVS:
        x = _q(m, fn, inp(name, xs), 0.03, int(RNG.integers(-20, 20)))
        cg = xs[1] // grp
        w = m.add_constant(f"{name}_w", RNG.integers(-127, 128, (k, cg, r, r)).astype(np.int8))
        lim = 1 << 24 if name.endswith("bigbias") else 3000
        b = m.add_constant(f"{name}_b", RNG.integers(-lim, lim, k).astype(np.int32))
        ws = m.add_constant(f"{name}_s", (RNG.random(k) * 0.004 + 0.001).astype(np.float32))
        attrs = {
            "strides": (st, st),
            "pads": pads,
            "dilations": (dil, dil),
            "group": grp,
            "scale": 0.05,
            "offset": int(RNG.integers(-30, 30)),
        }
        if name == "c3x3":
            attrs["qmin"] = attrs["offset"]  # a folded Relu
        y = fn.create("QConv", [x, w, b, ws], attrs).result
        _out(m, fn, y, name)
        if name in SUMS:
            # A residual add the sum post-op fuses: the conv requantizes its result plus r's.
            r = _q(m, fn, inp(f"{name}_r", y.type.shape), 0.07, int(RNG.integers(-30, 30)))
            sattrs = {**attrs, "qmin": -128, "offset": attrs["offset"] + 1}  # not CSE-d
            ys = fn.create("QConv", [x, w, b, ws], sattrs).result
            s = fn.create("QAdd", [ys, r], {"scale": 0.08, "offset": -20}).result
            _out(m, fn, s, f"{name}_sum")
    for name, mm, kk, nn in FCS:
        x = _q(m, fn, inp(name, (mm, kk)), 0.04, 7)
        w = m.add_constant(f"{name}_w", RNG.integers(-127, 128, (kk, nn)).astype(np.int8))
        b = m.add_constant(f"{name}_b", RNG.integers(-500, 500, nn).astype(np.int32))
        ws = m.add_constant(f"{name}_s", (RNG.random(nn) * 0.01 + 0.001).astype(np.float32))
        attrs = {"scale": 0.1, "offset": -3, "qmin": -100, "qmax": 90}
        _out(m, fn, fn.create("QFullyConnected", [x, w, b, ws], attrs).result, name)
    a = _q(m, fn, inp("mm_a", (2, 3, 5, 7)), 0.05, 4)
    bq = _q(m, fn, inp("mm_b", (3, 7, 6)), 0.07, -9)
    _out(m, fn, fn.create("QMatMul", [a, bq], {"scale": 0.3, "offset": 1}).result, "qmatmul")
    a = _q(m, fn, inp("ew_a", (2, 3, 4, 5)), 0.05, 10)
    bq = _q(m, fn, inp("ew_b", (3, 1, 5)), 0.02, -50)
    _out(m, fn, fn.create("QAdd", [a, bq], {"scale": 0.06, "offset": -5}).result, "qadd")
    _out(m, fn, fn.create("QMul", [a, bq], {"scale": 0.01, "offset": 2}).result, "qmul")
    r = fn.create("RescaleQuantized", [a], {"scale": 0.11, "offset": -128, "qmin": -100})
    _out(m, fn, r.result, "rescale")
    p = _q(m, fn, inp("pool", (1, 5, 9, 8)), 0.05, -7)
    pool = {"kernel": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1), "scale": 0.04, "offset": 3}
    _out(m, fn, fn.create("QAvgPool", [p], pool).result, "qavgpool")
    pool2 = dict(pool, count_include_pad=1, ceil_mode=1, pads=(0, 0, 1, 1))
    _out(m, fn, fn.create("QAvgPool", [p], pool2).result, "qavgpool2")
    _out(m, fn, fn.create("QGlobalAvgPool", [p], {"scale": 0.01, "offset": 0}).result, "qgap")
    table = m.add_constant("lut", RNG.integers(-128, 128, 256).astype(np.int8))
    lut = fn.create("QLookup", [p, table], {"scale": 0.02, "offset": 9})
    _out(m, fn, lut.result, "qlookup")
    for axis in (1, 3):  # a strided row and a contiguous one
        exp_table = m.add_constant(f"exp{axis}", softmax_table(p.type))
        sm = fn.create("QSoftmax", [p, exp_table], {"axis": axis, "scale": 1 / 255, "offset": -128})
        _out(m, fn, sm.result, f"qsoftmax{axis}")
    mp = {"kernel": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1)}
    _out(m, fn, fn.create("MaxPool", [p], mp).result, "maxpool")
    return m, inputs


FLAVOURS = {
    "vnni512": {},
    "vnni256": {"GLOWVIZ_LLVM_FEATURES": "+avx2,+fma,+avxvnni,+f16c"},
    "avx2": {"GLOWVIZ_LLVM_CPU": "haswell"},
    "generic": {"GLOWVIZ_LLVM_CPU": "x86-64"},
}


@pytest.mark.parametrize("flavour", list(FLAVOURS))
def test_int8_kernels_match_the_reference_bit_for_bit(flavour, monkeypatch):
    for k, v in FLAVOURS[flavour].items():
        monkeypatch.setenv(k, v)
    if flavour == "vnni512" and target.int8_isa() != "vnni512":
        pytest.skip("the host has no AVX-512 VNNI")
    if flavour == "vnni256" and not llvm_binding.get_host_cpu_features().get("avxvnni"):
        # The forced features make LLVM emit VEX-encoded VPDPBUSD, which a host with only
        # AVX-512 VNNI (Zen 4, Ice Lake) does not decode: the run dies of SIGILL.
        pytest.skip("the host has no AVX-VNNI (VEX) to run the 256-bit kernels")
    assert target.int8_isa() == flavour
    m, inputs = _grid_module()
    # In creation order: each residual is complete before its conv, as in a network.
    result = compile_model(m, CompileOptions(verify=True, scheduler="topological"))
    llvm = make_executor(result, "llvm")
    ref = make_executor(result, "interpreter").run(inputs)
    got = llvm.run(inputs)
    # What the program entry stores of each instruction (a hit generates no program).
    strategies = {ic.kind: ic.strategy for ic in llvm.executor.info.instrs}
    sums = [i for i in result.lir.code if i.kind == "qconv" and i.accumulates]
    assert len(sums) == len(SUMS)
    if flavour != "generic":
        assert strategies["qconv"] == f"qconv-{flavour}"
    bad = [k for k in ref if not np.array_equal(ref[k], got[k], equal_nan=True)]
    assert not bad, {k: float(np.nanmax(np.abs(ref[k] - got[k]))) for k in bad}
    assert all(np.isfinite(v).all() for v in got.values())


def test_depthwise_float_bias_only_where_float32_sums_are_exact() -> None:
    from compiler.backends.llvm.kernels.qconv import exact_float_bias

    w = np.full((2, 1, 3, 3), -127, np.int8)  # 255 * 1143 = 291,465 per channel at most
    assert exact_float_bias(w, np.array([0, (1 << 24) - 291_466], np.int32))
    assert not exact_float_bias(w, np.array([0, (1 << 24) - 291_465], np.int32))
    assert not exact_float_bias(w, np.array([-(1 << 24), 0], np.int32))
