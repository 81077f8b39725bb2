"""The ops and element types added for real exports (issue 12), checked against onnxruntime on
every path that runs them: the reference kernels (interpreter policy), the CPU lowerings on the
interpreter, the LLVM executor (its emitters or lowerings) and Glow-like full lowering."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import onnx_backend
from compiler.frontend.onnx_importer import ONNX_TO_ELEM

#: (executor, lowering policy): every way a model runs.
PATHS = [
    ("interpreter", "interpreter"),
    ("interpreter", "cpu"),
    ("llvm", "cpu"),
    ("llvm", "lower-all"),
]
NP_TO_ONNX = {k.np_dtype: code for code, k in ONNX_TO_ELEM.items()}


def model_of(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, np.ndarray],
    outputs: list[str],
    opset: int = 18,
    inits: dict[str, np.ndarray] | None = None,
) -> onnx.ModelProto:
    ins = [
        helper.make_tensor_value_info(k, NP_TO_ONNX[v.dtype], v.shape) for k, v in inputs.items()
    ]
    outs = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs]
    graph = helper.make_graph(
        nodes, "g", ins, outs, [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    del model.graph.output[:]
    model.graph.output.extend(inferred.graph.output)
    for o in model.graph.output:
        if not o.type.tensor_type.elem_type:  # not inferred: the first input's
            o.type.tensor_type.CopyFrom(ins[0].type.tensor_type)
    return model


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def check_paths(
    model: onnx.ModelProto,
    feeds: dict[str, np.ndarray],
    rtol: float = 1e-5,
    atol: float = 1e-6,
    want: list[np.ndarray] | None = None,
) -> None:
    want = run_ort(model, feeds) if want is None else want
    # One compile per lowering: the interpreter and LLVM run the same low-level compile (the
    # compile options do not depend on the executor), so the second executor reuses it.
    compiled: dict[str, onnx_backend.GlowvizRep] = {}
    for executor, lowering in PATHS:
        if lowering in compiled:
            rep = compiled[lowering].with_executor(executor)
        else:
            rep = compiled[lowering] = onnx_backend.prepare(
                model, executor=executor, lowering=lowering
            )
        got = rep.run(feeds)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            where = f"{executor}/{lowering}"
            assert g.dtype == w.dtype, (where, g.dtype, w.dtype)
            assert g.shape == w.shape, (where, g.shape, w.shape)
            np.testing.assert_allclose(
                g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol, err_msg=where
            )


RNG = np.random.default_rng(12)


def _values(dtype: type, shape: tuple[int, ...], lo: int = -9, hi: int = 10) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return (RNG.standard_normal(shape) * 4).astype(dt)
    if dt.kind == "u":
        lo = 0
    return RNG.integers(lo, hi, shape).astype(dt)


# -- Mod and Round ---------------------------------------------------------------------------

MOD_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.float32, np.float64]


@pytest.mark.parametrize("dtype, fmod", itertools.product(MOD_TYPES, [0, 1]))
def test_mod(dtype: type, fmod: int) -> None:
    a = _values(dtype, (3, 4))
    b = _values(dtype, (4,), 1, 6)
    if np.dtype(dtype).kind == "i":
        b = b * np.where(RNG.random(4) < 0.5, -1, 1).astype(dtype)
    b[b == 0] = 3
    node = helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)
    if np.dtype(dtype).kind == "f" and not fmod:
        # Floor mod of floats is opset 28, newer than onnxruntime: numpy is the reference.
        model = model_of([node], {"a": a, "b": b}, ["y"], 28)
        check_paths(model, {"a": a, "b": b}, want=[np.mod(a, b)])
        return
    check_paths(model_of([node], {"a": a, "b": b}, ["y"], 13), {"a": a, "b": b})


def test_mod_float16() -> None:
    a = (RNG.standard_normal((5, 6)) * 5).astype(np.float16)
    b = np.array([1.5, -2.0, 3.25, -0.75, 2.0, 1.0], np.float16)
    node = helper.make_node("Mod", ["a", "b"], ["y"], fmod=1)
    check_paths(model_of([node], {"a": a, "b": b}, ["y"], 13), {"a": a, "b": b}, 1e-3, 1e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_round_half_to_even(dtype: type) -> None:
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, 2.51, -3.7, 7.0], dtype)
    node = helper.make_node("Round", ["x"], ["y"])
    check_paths(model_of([node], {"x": x}, ["y"], 11), {"x": x})


# -- Trilu, CumSum ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "upper, k, dtype", itertools.product([0, 1], [-2, 0, 1, 4], [np.float32, np.int64])
)
def test_trilu(upper: int, k: int, dtype: type) -> None:
    x = _values(dtype, (2, 3, 5))
    node = helper.make_node("Trilu", ["x", "k"], ["y"], upper=upper)
    inits = {"k": np.array(k, np.int64)}
    check_paths(model_of([node], {"x": x}, ["y"], 14, inits), {"x": x})


@pytest.mark.parametrize(
    "axis, exclusive, reverse, dtype",
    itertools.product([0, -1], [0, 1], [0, 1], [np.float32, np.float64, np.int32, np.int64]),
)
def test_cumsum(axis: int, exclusive: int, reverse: int, dtype: type) -> None:
    x = _values(dtype, (4, 5))
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    inits = {"axis": np.array(axis, np.int64)}
    check_paths(model_of([node], {"x": x}, ["y"], 14, inits), {"x": x})


# -- gathers and scatters --------------------------------------------------------------------


@pytest.mark.parametrize(
    "axis, dtype", itertools.product([0, 1, -1], [np.float32, np.int64, np.uint8, np.bool_])
)
def test_gather_elements(axis: int, dtype: type) -> None:
    data = _values(np.int64, (3, 4, 5)).astype(dtype)
    n = data.shape[axis]
    shape = list(data.shape)
    shape[axis] = 2
    idx = RNG.integers(-n, n, shape).astype(np.int64)
    node = helper.make_node("GatherElements", ["data", "idx"], ["y"], axis=axis)
    feeds = {"data": data, "idx": idx}
    check_paths(model_of([node], feeds, ["y"], 13), feeds)


@pytest.mark.parametrize("batch_dims", [0, 1])
def test_gather_nd(batch_dims: int) -> None:
    data = _values(np.float32, (2, 3, 4))
    if batch_dims:
        idx = np.array([[[1, 2], [0, -1]], [[2, 0], [1, 3]]], np.int64)
    else:
        idx = np.array([[1, 2], [0, 1], [-1, 0]], np.int64)
    node = helper.make_node("GatherND", ["data", "idx"], ["y"], batch_dims=batch_dims)
    feeds = {"data": data, "idx": idx}
    check_paths(model_of([node], feeds, ["y"], 13), feeds)


@pytest.mark.parametrize(
    "reduction, dtype",
    itertools.product(["none", "add", "mul", "max", "min"], [np.float32, np.int64]),
)
def test_scatter_nd(reduction: str, dtype: type) -> None:
    data = _values(dtype, (4, 3, 2))
    idx = (
        np.array([[1], [3], [-4]], np.int64)
        if reduction == "none"
        else np.array([[1], [3], [1]], np.int64)
    )
    upd = _values(dtype, (3, 3, 2))
    node = helper.make_node("ScatterND", ["data", "idx", "upd"], ["y"], reduction=reduction)
    feeds = {"data": data, "idx": idx, "upd": upd}
    check_paths(model_of([node], feeds, ["y"], 18), feeds)


@pytest.mark.parametrize(
    "axis, reduction", itertools.product([0, 1, -1], ["none", "add", "mul", "max", "min"])
)
def test_scatter_elements(axis: int, reduction: str) -> None:
    data = _values(np.float32, (3, 4))
    n = data.shape[axis]
    # Distinct indices per line (duplicates with "none" are undefined in ONNX).
    idx = np.stack([RNG.permutation(np.arange(-n, 0))[:2] for _ in range(data.shape[1 - axis % 2])])
    idx = (idx if axis % 2 else idx.T).astype(np.int64)
    upd = _values(np.float32, idx.shape)
    node = helper.make_node(
        "ScatterElements", ["data", "idx", "upd"], ["y"], axis=axis, reduction=reduction
    )
    feeds = {"data": data, "idx": idx, "upd": upd}
    check_paths(model_of([node], feeds, ["y"], 18), feeds)


# -- TopK ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "largest, axis, dtype",
    itertools.product([1, 0], [1, -1, 0], [np.float32, np.float64, np.int64, np.int32]),
)
def test_top_k(largest: int, axis: int, dtype: type) -> None:
    x = _values(dtype, (4, 6, 5), -3, 4)  # few distinct values: ties by lower index first
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
    inits = {"k": np.array([3], np.int64)}
    check_paths(model_of([node], {"x": x}, ["v", "i"], 11, inits), {"x": x})


# -- Einsum ----------------------------------------------------------------------------------

EINSUM = [
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ij->i", [(3, 4)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("i,i", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 6, 8)]),
    ("bhqk,bhkd->bhqd", [(2, 3, 4, 6), (2, 3, 6, 8)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,jk", [(2, 3, 4), (4, 5)]),
    ("ijk,ikl,ilm->ijm", [(2, 3, 4), (2, 4, 5), (2, 5, 3)]),
    ("ij,kj->ik", [(3, 4), (5, 4)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
]


@pytest.mark.parametrize("equation, shapes", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum(equation: str, shapes: list[tuple[int, ...]]) -> None:
    xs = {f"x{i}": _values(np.float32, s) for i, s in enumerate(shapes)}
    node = helper.make_node("Einsum", list(xs), ["y"], equation=equation)
    want = [np.asarray(np.einsum(equation, *xs.values()), np.float32)]
    check_paths(model_of([node], xs, ["y"], 12), xs, 1e-4, 1e-4, want=want)


def test_einsum_integers() -> None:
    xs = {"a": _values(np.int64, (2, 3, 4)), "b": _values(np.int64, (2, 4, 5))}
    node = helper.make_node("Einsum", ["a", "b"], ["y"], equation="bij,bjk->bik")
    want = [np.einsum("bij,bjk->bik", xs["a"], xs["b"])]
    check_paths(model_of([node], xs, ["y"], 12), xs, want=want)


# -- normalisations --------------------------------------------------------------------------


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_group_norm(groups: int) -> None:
    x = _values(np.float32, (2, 4, 3, 5))
    inits = {"s": _values(np.float32, (4,)), "b": _values(np.float32, (4,))}
    node = helper.make_node(
        "GroupNormalization", ["x", "s", "b"], ["y"], num_groups=groups, epsilon=1e-3
    )
    check_paths(model_of([node], {"x": x}, ["y"], 21, inits), {"x": x}, 1e-4, 1e-4)


@pytest.mark.parametrize("axis", [-1, -2, 1])
def test_rms_norm(axis: int) -> None:
    x = _values(np.float32, (2, 3, 8))
    s = _values(np.float32, (3, 8)[axis % 3 - 1 :] if axis != 1 else (3, 8))
    node = helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=axis, epsilon=1e-4)
    x64 = x.astype(np.float64)
    axes = tuple(range(axis % 3, 3))
    want = [
        (x64 / np.sqrt(np.mean(x64**2, axis=axes, keepdims=True) + 1e-4) * s).astype(np.float32)
    ]
    check_paths(model_of([node], {"x": x}, ["y"], 23, {"s": s}), {"x": x}, 1e-5, 1e-5, want)


# -- element types ---------------------------------------------------------------------------


def test_cast_every_pair() -> None:
    """Cast between every two element kinds, on values every pair represents the same way
    (the narrow storage kinds: test_cast_narrow_kinds)."""
    codes = [c for c, k in ONNX_TO_ELEM.items() if not k.is_narrow]
    for src, dst in itertools.product(codes, codes):
        sd, dd = ONNX_TO_ELEM[src].np_dtype, ONNX_TO_ELEM[dst].np_dtype
        vals = [0, 1, 2, 3, 7, 100, 127]
        if "u" not in (sd.kind, dd.kind) and sd.kind != "b":
            vals += [-1, -5, -128]
        if sd.kind == "f":
            vals += [0.5, 1.5, 2.5, -0.7 if dd.kind != "u" else 0.7, 3.999, 2049.0, 2051.0]
            if dd.kind == "f":
                vals += [1e-8, 1 / 3, 65519.99, np.nan]
        x = np.array(vals).astype(sd) if sd.kind != "b" else np.array([True, False])
        node = helper.make_node("Cast", ["x"], ["y"], to=dst)
        model = model_of([node], {"x": x}, ["y"], 19)
        want = run_ort(model, {"x": x})
        for executor in ("interpreter", "llvm"):
            got = onnx_backend.prepare(model, executor=executor).run({"x": x})[0]
            assert got.dtype == want[0].dtype, (sd, dd, executor)
            np.testing.assert_array_equal(got, want[0], err_msg=f"{sd} -> {dd} ({executor})")


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_float16_and_float64_models(dtype: type) -> None:
    """A small MLP-with-attention-ish chain in float16 / float64: kernels the CPU has only for
    float32 (MatMul/Softmax/LayerNorm) run it in float32 between Casts (float16) or through
    float64 lowerings and loops (float64)."""
    x = _values(dtype, (2, 4, 8))
    inits = {
        "w": (_values(np.float32, (8, 8)) / 8).astype(dtype),
        "sc": np.ones(8, dtype),
        "ax": np.array([-1], np.int64),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Softmax", ["r"], ["s"], axis=-1),
        helper.make_node("Add", ["s", "x"], ["t"]),
        helper.make_node("LayerNormalization", ["t", "sc"], ["ln"], axis=-1),
        helper.make_node("Sigmoid", ["ln"], ["g"]),
        helper.make_node("ReduceMean", ["g", "ax"], ["y"]),
    ]
    tol = 2e-3 if dtype == np.float16 else 1e-9
    check_paths(model_of(nodes, {"x": x}, ["y"], 18, inits), {"x": x}, tol, tol)


# -- 3-D convolutions ------------------------------------------------------------------------

CONV3D = list(itertools.product([1, 2], [0, 1], [1, 2], [1, 2], [1, 3]))


@pytest.mark.parametrize("stride, pad, dilation, group, kd", CONV3D)
def test_conv3d(stride: int, pad: int, dilation: int, group: int, kd: int) -> None:
    _check_conv3d(
        "Conv",
        (2, 4, 6, 5, 7),
        (6, 4 // group, kd, 3, 2),
        strides=[stride, 1, stride],
        pads=[pad, 1, 0, pad + 1, 0, pad],
        dilations=[dilation, dilation, 1],
        group=group,
    )


def _check_conv3d(op: str, x_shape: tuple[int, ...], w_shape: tuple[int, ...], **attrs) -> None:
    """`op` (Conv or ConvTranspose) with 6 output channels and a bias, against onnxruntime."""
    x = _values(np.float32, x_shape)
    consts = {"w": _values(np.float32, w_shape), "b": _values(np.float32, (6,))}
    node = helper.make_node(op, ["x", "w", "b"], ["y"], **attrs)
    check_paths(model_of([node], {"x": x}, ["y"], 13, consts), {"x": x}, 1e-4, 1e-4)


# onnxruntime wants output_padding smaller than the stride: those combinations are left out.
CONVT3D = [
    c for c in itertools.product([1, 2], [0, 1], [1, 2], [1, 2], [1, 3], [0, 1]) if c[5] < c[0]
]


@pytest.mark.parametrize("stride, pad, dilation, group, kd, outpad", CONVT3D)
def test_conv_transpose3d(
    stride: int, pad: int, dilation: int, group: int, kd: int, outpad: int
) -> None:
    _check_conv3d(
        "ConvTranspose",
        (1, 4, 3, 4, 5),
        (4, 6 // group, kd, 2, 3),
        strides=[stride, 2, 1],
        pads=[pad, 0, 1, 0, pad, 1],
        dilations=[dilation, 1, 1],
        output_padding=[outpad, 0, 0],
        group=group,
    )


# -- MaxPool's Indices -----------------------------------------------------------------------

MAXPOOL_IDX = list(itertools.product([2, 3], [1, 2], [0, 1], [1, 2], [0, 1], [0, 1]))


@pytest.mark.parametrize("k, s, p, d, ceil, order", MAXPOOL_IDX)
def test_max_pool_indices(k: int, s: int, p: int, d: int, ceil: int, order: int) -> None:
    x = _values(np.float32, (2, 3, 7, 6))
    x[0, 0, :2, :2] = 5.0  # a tie: the first maximum in window order wins
    node = helper.make_node(
        "MaxPool",
        ["x"],
        ["y", "i"],
        kernel_shape=[k, k],
        strides=[s, s],
        pads=[p, p, p, p],
        dilations=[d, d],
        ceil_mode=ceil,
        storage_order=order,
    )
    check_paths(model_of([node], {"x": x}, ["y", "i"], 12), {"x": x})


def test_max_pool_1d_indices() -> None:
    x = _values(np.float32, (2, 3, 9))
    node = helper.make_node(
        "MaxPool", ["x"], ["y", "i"], kernel_shape=[3], strides=[2], pads=[1, 1]
    )
    check_paths(model_of([node], {"x": x}, ["y", "i"], 12), {"x": x})


# -- Resize: antialias and tf_crop_and_resize ------------------------------------------------

RESIZE_AA = list(
    itertools.product(["linear", "cubic"], [(0.6, 0.5), (0.35, 1.0), (0.8, 0.25)], [0, 1])
)


@pytest.mark.parametrize("mode, scales, exclude", RESIZE_AA)
def test_resize_antialias(mode: str, scales: tuple[float, float], exclude: int) -> None:
    x = _values(np.float32, (1, 2, 12, 16))
    node = helper.make_node(
        "Resize", ["x", "", "s"], ["y"], mode=mode, antialias=1, exclude_outside=exclude
    )
    inits = {"s": np.array([1, 1, *scales], np.float32)}
    check_paths(model_of([node], {"x": x}, ["y"], 18, inits), {"x": x}, 1e-4, 1e-4)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_tf_crop_and_resize(mode: str) -> None:
    x = _values(np.float32, (1, 2, 6, 8))
    node = helper.make_node(
        "Resize",
        ["x", "roi", "", "sizes"],
        ["y"],
        mode=mode,
        coordinate_transformation_mode="tf_crop_and_resize",
        extrapolation_value=-3.5,
        axes=[2, 3],
    )
    inits = {
        "roi": np.array([0.2, -0.3, 1.1, 0.7], np.float32),
        "sizes": np.array([5, 7], np.int64),
    }
    check_paths(model_of([node], {"x": x}, ["y"], 18, inits), {"x": x}, 1e-4, 1e-4)


# -- Attention (opset 23) --------------------------------------------------------------------


def _attention_ref(q, k, v, mask=None, causal=False, scale=None, softcap=0.0):
    """Scaled dot-product attention in double, 4-D [B, H, S, D] (GQA by repeating heads)."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    reps = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, reps, axis=1), np.repeat(v, reps, axis=1)
    s = q @ np.swapaxes(k, -1, -2) * (1 / np.sqrt(q.shape[-1]) if scale is None else scale)
    if softcap:
        s = softcap * np.tanh(s / softcap)
    bias = np.zeros(s.shape[-2:])
    if causal:
        qn, kn = s.shape[-2:]
        # Without a KV cache the causal frontier is top-left aligned: key j <= query i.
        bias = np.where(np.arange(kn)[None] <= np.arange(qn)[:, None], 0, -np.inf)
    if mask is not None:
        bias = bias + (np.where(mask, 0, -np.inf) if mask.dtype == bool else mask)
    s = s + bias
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v


ATTENTION = [
    ("plain", {}, False),
    ("causal", {"is_causal": 1}, False),
    ("scaled_softcap", {"scale": 0.3, "softcap": 2.0}, False),
    ("bool_mask", {}, True),
    ("gqa", {}, False),
    ("three_d", {"q_num_heads": 4, "kv_num_heads": 2}, False),
]


@pytest.mark.parametrize("name, attrs, with_mask", ATTENTION, ids=[a[0] for a in ATTENTION])
def test_attention(name: str, attrs: dict, with_mask: bool) -> None:
    kv_heads = 2 if name in ("gqa", "three_d") else 4
    q = _values(np.float32, (2, 4, 5, 8)) / 4
    k = _values(np.float32, (2, kv_heads, 6, 8)) / 4
    v = _values(np.float32, (2, kv_heads, 6, 8))
    mask = RNG.random((5, 6)) < 0.7 if with_mask else None
    if mask is not None:
        mask[:, 0] = True  # no fully masked row
    want = _attention_ref(
        q, k, v, mask, bool(attrs.get("is_causal")), attrs.get("scale"), attrs.get("softcap", 0)
    )
    feeds = {"q": q, "k": k, "v": v}
    if name == "three_d":
        feeds = {n: a.transpose(0, 2, 1, 3).reshape(2, a.shape[2], -1) for n, a in feeds.items()}
        want = want.transpose(0, 2, 1, 3).reshape(2, 5, -1)
    names = ["q", "k", "v"] + (["mask"] if mask is not None else [])
    inits = {"mask": mask} if mask is not None else {}
    node = helper.make_node("Attention", names, ["y"], **attrs)
    model = model_of([node], feeds, ["y"], 23, inits)
    check_paths(model, feeds, 1e-5, 1e-5, want=[want.astype(np.float32)])


# -- trigonometry, IsNaN/IsInf, bit operations -----------------------------------------------

TRIG_OPS = ["Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"]


@pytest.mark.parametrize("op, dtype", itertools.product(TRIG_OPS, [np.float32, np.float64]))
def test_trig(op: str, dtype: type) -> None:
    x = np.linspace(-0.95, 0.95, 12).astype(dtype).reshape(3, 4)
    if op == "Acosh":
        x = x + dtype(2.0)
    node = helper.make_node(op, ["x"], ["y"])
    # onnxruntime has most of them for float32 only: numpy is the double oracle.
    name = op.lower()
    fn = getattr(np, "arc" + name[1:] if name.startswith("a") else name)
    want = [fn(x)] if dtype == np.float64 else None
    check_paths(model_of([node], {"x": x}, ["y"], 13), {"x": x}, 1e-5, 1e-6, want=want)


def test_is_nan_and_is_inf() -> None:
    x = np.array([1.0, np.nan, np.inf, -np.inf, -2.0, 0.0], np.float32)
    nodes = [
        helper.make_node("IsNaN", ["x"], ["n"]),
        helper.make_node("IsInf", ["x"], ["i"]),
        helper.make_node("IsInf", ["x"], ["p"], detect_negative=0),
    ]
    check_paths(model_of(nodes, {"x": x}, ["n", "i", "p"], 13), {"x": x})


@pytest.mark.parametrize(
    "op, dtype",
    itertools.product(
        ["BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot"], [np.int8, np.int32, np.uint16]
    ),
)
def test_bitwise(op: str, dtype: type) -> None:
    a, b = _values(dtype, (3, 4), -50, 50), _values(dtype, (4,), -50, 50)
    feeds = {"a": a} if op == "BitwiseNot" else {"a": a, "b": b}
    node = helper.make_node(op, list(feeds), ["y"])
    check_paths(model_of([node], feeds, ["y"], 18), feeds)


@pytest.mark.parametrize(
    "direction, dtype", itertools.product(["LEFT", "RIGHT"], [np.uint8, np.uint32])
)
def test_bit_shift(direction: str, dtype: type) -> None:
    a = _values(dtype, (3, 4), 0, 200)
    b = np.array([0, 1, 3, 7], dtype)
    node = helper.make_node("BitShift", ["a", "b"], ["y"], direction=direction)
    check_paths(model_of([node], {"a": a, "b": b}, ["y"], 11), {"a": a, "b": b})


# -- quantization ----------------------------------------------------------------------------

QUANT = list(itertools.product([np.uint8, np.int8, np.int16], ["tensor", "axis", "block"]))


@pytest.mark.parametrize("qtype, layout", QUANT)
def test_quantize_dequantize(qtype: type, layout: str) -> None:
    x = _values(np.float32, (2, 6, 4))
    if layout == "tensor":
        scale, zp, attrs = np.array(0.07, np.float32), np.array(3, qtype), {}
    elif layout == "axis":
        scale = np.array([0.05, 0.1, 0.02, 0.2, 0.07, 0.03], np.float32)
        zp, attrs = np.array([0, 1, 2, 3, 4, 5], qtype), {"axis": 1}
    else:  # blocks of 4 along axis 1: two blocks of 6 (the last is partial)
        scale = np.abs(_values(np.float32, (2, 2, 4))) / 20 + 0.01
        zp, attrs = np.full((2, 2, 4), 2, qtype), {"axis": 1, "block_size": 4}
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], **attrs),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], **attrs),
    ]
    inits = {"s": scale, "z": zp}
    check_paths(model_of(nodes, {"x": x}, ["q", "y"], 21, inits), {"x": x}, 1e-6, 1e-6)


def test_dynamic_quantize() -> None:
    x = _values(np.float32, (3, 5))
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    check_paths(model_of([node], {"x": x}, ["y", "s", "z"], 11), {"x": x}, 1e-6, 1e-6)


# -- losses ----------------------------------------------------------------------------------

LOSSES = list(
    itertools.product(
        ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"],
        ["none", "sum", "mean"],
        [False, True],
        [None, 1],
    )
)


@pytest.mark.parametrize("op, reduction, weighted, ignore", LOSSES)
def test_losses(op: str, reduction: str, weighted: bool, ignore: int | None) -> None:
    x = _values(np.float32, (3, 4, 2))
    t = np.array([[0, 1], [1, 3], [2, 1]], np.int64)
    feeds = {"x": x, "t": t}
    inits = {"w": np.array([0.5, 1.0, 2.0, 1.5], np.float32)} if weighted else {}
    attrs = {"reduction": reduction} | ({"ignore_index": ignore} if ignore is not None else {})
    node = helper.make_node(op, ["x", "t"] + (["w"] if weighted else []), ["y"], **attrs)
    check_paths(model_of([node], feeds, ["y"], 13, inits), feeds, 1e-5, 1e-6)


# -- small ops expressed in existing ones ----------------------------------------------------

MISC = [
    ("Hardmax", {"axis": 1}, {"x": (3, 4, 5)}, {}, 13),
    ("LpNormalization", {"axis": -1, "p": 1}, {"x": (3, 4)}, {}, 13),
    ("LpNormalization", {"axis": 0, "p": 2}, {"x": (3, 4)}, {}, 13),
    ("Shrink", {"bias": 0.5, "lambd": 0.7}, {"x": (3, 4)}, {}, 13),
    ("DepthToSpace", {"blocksize": 2, "mode": "DCR"}, {"x": (1, 8, 2, 3)}, {}, 13),
    ("DepthToSpace", {"blocksize": 2, "mode": "CRD"}, {"x": (1, 8, 2, 3)}, {}, 13),
    ("SpaceToDepth", {"blocksize": 2}, {"x": (1, 2, 4, 6)}, {}, 13),
    ("EyeLike", {"k": 1}, {"x": (3, 4)}, {}, 13),
    ("CenterCropPad", {}, {"x": (5, 4)}, {"shape": np.array([3, 7], np.int64)}, 18),
]


@pytest.mark.parametrize("op, attrs, inputs, inits, opset", MISC, ids=[m[0] for m in MISC])
def test_misc_ops(op: str, attrs: dict, inputs: dict, inits: dict, opset: int) -> None:
    feeds = {k: _values(np.float32, s) for k, s in inputs.items()}
    node = helper.make_node(op, list(feeds) + list(inits), ["y"], **attrs)
    check_paths(model_of([node], feeds, ["y"], opset, inits), feeds, 1e-5, 1e-6)


def test_one_hot() -> None:
    idx = np.array([[0, 3, -1], [2, 1, 4]], np.int64)
    inits = {"depth": np.array(5, np.int64), "values": np.array([-1.0, 2.0], np.float32)}
    node = helper.make_node("OneHot", ["idx", "depth", "values"], ["y"], axis=1)
    check_paths(model_of([node], {"idx": idx}, ["y"], 11, inits), {"idx": idx})


def test_reverse_sequence() -> None:
    x = _values(np.float32, (4, 3, 2))
    lens = np.array([4, 1, 3], np.int64)
    node = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=1, time_axis=0)
    check_paths(model_of([node], {"x": x, "lens": lens}, ["y"], 10), {"x": x, "lens": lens})


def test_matmul_integer() -> None:
    a, b = _values(np.uint8, (3, 4), 0, 255), _values(np.uint8, (4, 5), 0, 255)
    inits = {"az": np.array(12, np.uint8), "bz": np.array(200, np.uint8)}
    node = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
    check_paths(model_of([node], {"a": a, "b": b}, ["y"], 10, inits), {"a": a, "b": b})


@pytest.mark.parametrize("cond", [True, False])
def test_if_with_a_constant_condition_imports_its_branch(cond: bool) -> None:
    x = _values(np.float32, (3, 4))
    then = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"])],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [3, 4])],
    )
    other = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [3, 4])],
    )
    node = helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)
    model = model_of([node], {"x": x}, ["y"], 13, {"c": np.array(cond)})
    check_paths(model, {"x": x})
    from compiler.frontend import import_onnx

    ops = {n.op for n in import_onnx(model).main.nodes}
    assert ops == {"Relu" if cond else "Neg", "Save"}


@pytest.mark.parametrize("p, nsp", [(2, 2), (3, 2), (2, 1), (1, 3)])
def test_lp_pool(p: int, nsp: int) -> None:
    x = _values(np.float32, (1, 2) + (6,) * nsp)
    node = helper.make_node(
        "LpPool", ["x"], ["y"], p=p, kernel_shape=[3] * nsp, strides=[2] * nsp, pads=[1] * 2 * nsp
    )
    check_paths(model_of([node], {"x": x}, ["y"], 11), {"x": x}, 1e-4, 1e-5)


def test_scan_unrolls_over_the_sequence() -> None:
    """A running sum and a reversed, axis-1 scan output, the body imported once per step."""
    x = _values(np.float32, (2, 5, 3))
    body = helper.make_graph(
        [
            helper.make_node("Add", ["acc", "xt"], ["acc_out"]),
            helper.make_node("Mul", ["acc_out", "xt"], ["y"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("acc", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("xt", TensorProto.FLOAT, [2, 3]),
        ],
        [
            helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
        ],
    )
    node = helper.make_node(
        "Scan",
        ["init", "x"],
        ["final", "ys"],
        body=body,
        num_scan_inputs=1,
        scan_input_axes=[1],
        scan_output_axes=[1],
        scan_output_directions=[1],
    )
    inits = {"init": np.zeros((2, 3), np.float32)}
    check_paths(model_of([node], {"x": x}, ["final", "ys"], 11, inits), {"x": x})


def test_loop_with_a_constant_trip_count_unrolls() -> None:
    x = _values(np.float32, (3,))
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
            helper.make_node("Add", ["v", "fi"], ["v_out"]),
            helper.make_node("Mul", ["v_out", "v_out"], ["sq"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v", TensorProto.FLOAT, [3]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("sq", TensorProto.FLOAT, [3]),
        ],
    )
    node = helper.make_node("Loop", ["m", "c", "x"], ["v", "sqs"], body=body)
    inits = {"m": np.array(4, np.int64), "c": np.array(True)}
    model = model_of([node], {"x": x}, ["v", "sqs"], 13, inits)
    # ONNX's shape inference leaves the loop's outputs without shapes: declare them.
    for out, dims in zip(model.graph.output, ((3,), (4, 3))):
        out.type.CopyFrom(helper.make_tensor_type_proto(TensorProto.FLOAT, dims))
    check_paths(model, {"x": x})


NARROW = [c for c, k in ONNX_TO_ELEM.items() if k.is_narrow]


def _narrow_probe(kind_code: int) -> np.ndarray:
    """float64 values that exercise a narrow kind's rounding: its own values, the midpoints
    between neighbours (ties to even), just off them, subnormals, overflow, inf, NaN, -0."""
    dt = ONNX_TO_ELEM[kind_code].np_dtype
    width = 1 << 16 if dt.itemsize == 2 else 256
    vals = np.arange(width, dtype=np.uint16 if dt.itemsize == 2 else np.uint8).view(dt)
    with np.errstate(invalid="ignore"):
        wide = vals.astype(np.float64)
    mags = np.unique(np.abs(wide[np.isfinite(wide)]))
    if len(mags) > 64:  # bfloat16: a sample across the range
        mags = mags[np.linspace(0, len(mags) - 1, 64).astype(int)]
    mids = (mags[:-1] + mags[1:]) / 2
    top = mags[-1]
    extra = [top * 1.03, top * 1.5, top * 4, 1e9, np.inf, np.nan, -0.0, 0.3, 2.5, 1 / 3]
    probe = np.concatenate([mags, mids, mids * (1 + 1e-6), mids * (1 - 1e-6), extra])
    return np.concatenate([probe, -probe])


@pytest.mark.parametrize("dst", NARROW, ids=[ONNX_TO_ELEM[c].value for c in NARROW])
def test_cast_narrow_kinds(dst: int) -> None:
    """Casts into and out of each narrow kind on both executors, bit for bit as onnx's
    reference evaluator (ml_dtypes) gives them: rounding ties to even, subnormals, saturation
    (float8 by default, and not with saturate=0), overflow to inf/NaN, NaN, negative zero."""
    from onnx.reference import ReferenceEvaluator

    kind = ONNX_TO_ELEM[dst]
    is_int = kind.value[0] in "iu"
    srcs = [np.float32, np.float16, np.float64] + ([np.int8, np.int32] if is_int else [])
    for src in srcs:
        x = _narrow_probe(dst)
        if np.dtype(src).kind in "iu":
            x = np.clip(np.nan_to_num(x), -100, 100)  # in range of int8, wraps in the kind
        with np.errstate(all="ignore"):
            x = x.astype(src)
        sats = [1, 0] if kind.value.startswith("f8") else [1]
        for sat in sats:
            there = helper.make_node("Cast", ["x"], ["y"], to=dst, saturate=sat)
            back = helper.make_node("Cast", ["y"], ["z"], to=NP_TO_ONNX[np.dtype(src)])
            # opset 25: the first whose Cast takes every narrow kind (float4e2m1 from 23,
            # int2/uint2 from 25); the importer refuses an operand type the schema does not allow
            model = model_of([there, back], {"x": x}, ["y", "z"], 25)
            with np.errstate(all="ignore"):
                want = ReferenceEvaluator(model).run(None, {"x": x})
            for executor in ("interpreter", "llvm"):
                got = onnx_backend.prepare(model, executor=executor).run({"x": x})
                where = f"{np.dtype(src)} -> {kind.value} (saturate={sat}, {executor})"
                assert got[0].dtype == want[0].dtype, where
                bits = np.uint16 if kind.itemsize == 2 else np.uint8
                # 4- and 2-bit kinds: only the low bits of the byte are the value
                mask = {"i4": 0xF, "u4": 0xF, "f4e2m1": 0xF, "i2": 3, "u2": 3}.get(
                    kind.value, np.iinfo(bits).max
                )
                np.testing.assert_array_equal(
                    got[0].view(bits) & mask, want[0].view(bits) & mask, err_msg=where
                )
                np.testing.assert_array_equal(got[1], want[1], err_msg=where + " and back")


BITCASTS = [
    (np.float32, np.int32),
    (np.int32, np.float32),
    (np.float16, np.uint16),
    (np.int16, np.float16),
    (np.float64, np.uint64),
    (np.int8, np.uint8),
    (np.bool_, np.uint8),
]


@pytest.mark.parametrize(
    "src, dst", BITCASTS, ids=[f"{a.__name__}-{b.__name__}" for a, b in BITCASTS]
)
def test_bit_cast(src: type, dst: type) -> None:
    """BitCast reinterprets the bits (numpy's view is the reference); float16 round-trips its
    bits exactly through the float32 it computes in on LLVM, NaN payloads and -0 included."""
    raw = np.array([0, 1, 0x7F, 0x80, 0xFF, 0x3C00, 0x7E01, 0x8000], np.uint64)
    if np.dtype(src) == np.bool_:
        x = np.array([True, False, True])
    else:
        x = raw.astype(np.dtype(src).newbyteorder("=").str.replace("f", "u").replace("i", "u"))
        x = x.view(src)
    node = helper.make_node("BitCast", ["x"], ["y"], to=NP_TO_ONNX[np.dtype(dst)])
    model = model_of([node], {"x": x}, ["y"], 26)
    for executor in ("interpreter", "llvm"):
        got = onnx_backend.prepare(model, executor=executor).run({"x": x})[0]
        assert got.dtype == np.dtype(dst)
        np.testing.assert_array_equal(got.view(np.uint8), x.view(np.uint8), err_msg=executor)
