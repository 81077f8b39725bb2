"""ONNX LSTM, GRU and RNN -> graph IR, unrolled over the static sequence length into the
linear-algebra primitives, as Glow lowers its recurrent nodes: one FullyConnected projects every
time step's input at once (X @ W^T + Wb + Rb), then per step a MatMul with R^T, Adds, the gate
activations, element-wise products, and a Concat collecting Y. The memory and schedule views
then show a recurrent model like any other graph.

Supported: every direction (forward, reverse, bidirectional), initial_h / initial_c, peepholes,
`clip`, `layout`, GRU's `linear_before_reset`, the activation functions ONNX lists, and
`sequence_lens` (steps past a sequence's length keep its state and write zeros to Y, computed
with Where masks, so the lengths may be run-time values). Not supported: LSTM `input_forget`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from compiler.frontend.converters_math import FLOAT_ONLY, check_elem, same_elem
from compiler.frontend.converters_tensor import INT_KINDS, reshape
from compiler.frontend.onnx_importer import NodeContext
from compiler.frontend.registry import converter
from compiler.graph.ir import Value

#: Gate count and default activations per op (ONNX's order of gates in W, R and B).
_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
_DEFAULT_ACTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}
#: Default alpha / beta of the parametrised activations (ONNX's table; beta None where the
#: function takes none). Every parametrised one takes an alpha.
_ACT_DEFAULTS: dict[str, tuple[float, float | None]] = {
    "LeakyRelu": (0.01, None),
    "ThresholdedRelu": (1.0, None),
    "ScaledTanh": (1.0, 1.0),
    "HardSigmoid": (0.2, 0.5),
    "Elu": (1.0, None),
    "Affine": (1.0, 0.0),
}

Act = Callable[[Value, str], Value]


@dataclass
class _Step:
    """What every unrolled step of one direction shares."""

    ctx: NodeContext
    d: int  # direction index (0 forward or the only one, 1 reverse of bidirectional)
    hidden: int
    acts: list[Act]
    clip: float | None

    def op(self, op: str, operands: list[Value], suffix: str, attrs: dict | None = None) -> Value:
        return self.ctx.create(op, operands, attrs, suffix=f"d{self.d}_{suffix}")


def _activation(ctx: NodeContext, name: str, alpha: float | None, beta: float | None) -> Act:
    """The graph ops of one ONNX recurrent activation function."""
    a0, b0 = _ACT_DEFAULTS.get(name, (0.0, None))
    # Unparametrised functions (and those without a beta) never read the 0.0 fallbacks.
    a: float = a0 if alpha is None else alpha
    b: float = (0.0 if b0 is None else b0) if beta is None else beta

    def scalar(x: Value, v: float, tag: str) -> Value:
        return ctx.scalar_like(x, v, tag)

    def act(x: Value, tag: str) -> Value:
        def mk(op: str, ops: list[Value], attrs: dict | None = None, s: str = "") -> Value:
            return ctx.create(op, ops, attrs, suffix=f"{tag}{s}")

        if name in ("Sigmoid", "Tanh", "Relu", "Softplus"):
            return mk(name, [x])
        if name == "LeakyRelu":
            return mk("LeakyRelu", [x], {"alpha": a})
        if name == "HardSigmoid":
            return mk("HardSigmoid", [x], {"alpha": a, "beta": b})
        if name == "Elu":
            return mk("Elu", [x], {"alpha": a})
        if name == "Softsign":
            den = mk("Add", [mk("Abs", [x], s="_abs"), scalar(x, 1.0, f"{tag}_one")], s="_den")
            return mk("Div", [x, den])
        if name == "Affine":
            return mk(
                "Add",
                [
                    mk("Mul", [x, scalar(x, a, f"{tag}_a")], s="_ax"),
                    scalar(x, b, f"{tag}_b"),
                ],
            )
        if name == "ScaledTanh":
            t = mk("Tanh", [mk("Mul", [x, scalar(x, b, f"{tag}_b")], s="_bx")], s="_tanh")
            return mk("Mul", [t, scalar(x, a, f"{tag}_a")])
        if name == "ThresholdedRelu":
            keep = mk("Greater", [x, scalar(x, a, f"{tag}_a")], s="_mask")
            return mk("Where", [keep, x, scalar(x, 0.0, f"{tag}_zero")])
        raise ctx.unsupported(f"activation '{name}'")

    return act


_KNOWN_ACTS = {
    "Sigmoid",
    "Tanh",
    "Relu",
    "Softplus",
    "LeakyRelu",
    "HardSigmoid",
    "Elu",
    "Softsign",
    "Affine",
    "ScaledTanh",
    "ThresholdedRelu",
}


def _activations(ctx: NodeContext, n_dirs: int) -> list[list[Act]]:
    per_dir = len(_DEFAULT_ACTS[ctx.op_type])
    names = ctx.attr("activations")
    names = list(names) if names else _DEFAULT_ACTS[ctx.op_type] * n_dirs
    if len(names) != per_dir * n_dirs:
        raise ctx.unsupported(f"activations {names} do not give {per_dir} per direction")
    alphas = list(ctx.attr("activation_alpha", []) or [])
    betas = list(ctx.attr("activation_beta", []) or [])
    out: list[Act] = []
    # alpha/beta lists follow the activations that take them, in order.
    ai = bi = 0
    for name in names:
        canon = next((k for k in _KNOWN_ACTS if k.lower() == str(name).lower()), None)
        if canon is None:
            raise ctx.unsupported(f"activation '{name}'")
        takes_alpha = canon in _ACT_DEFAULTS
        takes_beta = takes_alpha and _ACT_DEFAULTS[canon][1] is not None
        alpha = beta = None
        if takes_alpha and ai < len(alphas):
            alpha, ai = float(alphas[ai]), ai + 1
        if takes_beta and bi < len(betas):
            beta, bi = float(betas[bi]), bi + 1
        out.append(_activation(ctx, canon, alpha, beta))
    return [out[i * per_dir : (i + 1) * per_dir] for i in range(n_dirs)]


def _direction_slice(ctx: NodeContext, v: Value, d: int, tag: str) -> Value:
    """v[d] of a [num_directions, ...] operand."""
    shape = v.type.shape
    if shape[0] == 1:
        return reshape(ctx, v, shape[1:], f"{tag}{d}")
    s = ctx.create(
        "Slice",
        [v],
        {
            "starts": [d] + [0] * (len(shape) - 1),
            "ends": [d + 1, *shape[1:]],
            "steps": [1] * len(shape),
        },
        suffix=f"{tag}{d}_slice",
    )
    return reshape(ctx, s, shape[1:], f"{tag}{d}")


def _recurrence(
    ctx: NodeContext,
    st: _Step,
    xproj: Value,
    r_t: Value,
    rb: Value | None,
    h0: Value,
    c0: Value | None,
    peep: list[Value] | None,
    masks: list[Value] | None,
    lbr: int,
) -> tuple[list[Value], Value, Value | None]:
    """One direction: the H of every time step (in time order), the last H and C."""
    op = ctx.op_type
    seq, batch, _ = xproj.type.shape
    hidden = st.hidden
    order = list(range(seq))[:: -1 if _is_reverse_dir(ctx, st.d) else 1]
    ys: list[Value | None] = [None] * seq
    h, c = h0, c0
    zero = ctx.constant(np.zeros((batch, hidden), xproj.type.np_dtype), suffix=f"d{st.d}_zeros")
    for t in order:
        tag = f"t{t}"
        xt = st.op(
            "Slice",
            [xproj],
            f"{tag}_x",
            {"starts": [t, 0, 0], "ends": [t + 1, batch, xproj.type.shape[2]], "steps": [1, 1, 1]},
        )
        xt = reshape(ctx, xt, (batch, xproj.type.shape[2]), f"d{st.d}_{tag}_x2d")
        if op == "GRU":
            h_new = _gru_step(st, xt, h, r_t, rb, lbr, tag)
            c_new = None
        else:
            pre = st.op("Add", [xt, st.op("MatMul", [h, r_t], f"{tag}_hr")], f"{tag}_pre")
            if op == "RNN":
                h_new = st.acts[0](_clipped(st, pre, f"{tag}_h"), f"d{st.d}_{tag}_h")
                c_new = None
            else:
                assert c is not None, "an LSTM direction always starts from a C (zeros by default)"
                h_new, c_new = _lstm_step(st, pre, c, peep, tag)
        if masks is not None:
            m = masks[t]
            h_new = st.op("Where", [m, h_new, h], f"{tag}_hkeep")
            if c_new is not None and c is not None:
                c_new = st.op("Where", [m, c_new, c], f"{tag}_ckeep")
            ys[t] = st.op("Where", [m, h_new, zero], f"{tag}_y")
        else:
            ys[t] = h_new
        h, c = h_new, c_new
    return [y for y in ys if y is not None], h, c


def _lstm_step(
    st: _Step, pre: Value, c: Value, peep: list[Value] | None, tag: str
) -> tuple[Value, Value]:
    f_act, g_act, h_act = st.acts
    d = f"d{st.d}_{tag}"
    # ONNX clips "the input of activations": after the peephole terms are added.
    i_pre, o_pre, f_pre, c_pre = (_cols(st, pre, k, f"{tag}_{g}_pre") for k, g in enumerate("iofc"))
    if peep is not None:
        pi, po, pf = peep
        i_pre = st.op("Add", [i_pre, st.op("Mul", [c, pi], f"{tag}_pic")], f"{tag}_i_peep")
        f_pre = st.op("Add", [f_pre, st.op("Mul", [c, pf], f"{tag}_pfc")], f"{tag}_f_peep")
    i = f_act(_clipped(st, i_pre, f"{tag}_i"), f"{d}_i")
    f = f_act(_clipped(st, f_pre, f"{tag}_f"), f"{d}_f")
    g = g_act(_clipped(st, c_pre, f"{tag}_c"), f"{d}_g")
    c_new = st.op(
        "Add", [st.op("Mul", [f, c], f"{tag}_fc"), st.op("Mul", [i, g], f"{tag}_ig")], f"{tag}_c"
    )
    if peep is not None:
        o_pre = st.op("Add", [o_pre, st.op("Mul", [c_new, peep[1]], f"{tag}_poc")], f"{tag}_o_peep")
    o = f_act(_clipped(st, o_pre, f"{tag}_o"), f"{d}_o")
    h_new = st.op("Mul", [o, h_act(c_new, f"{d}_hc")], f"{tag}_h")
    return h_new, c_new


def _gru_step(
    st: _Step, xt: Value, h: Value, r_t: Value, rb: Value | None, lbr: int, tag: str
) -> Value:
    """One GRU step. `xt` already holds X W^T + Wb + Rb (Rb's h part only when
    linear_before_reset is 0); `rb` is Rb's h part when it is 1 (it goes inside the reset)."""
    f_act, g_act = st.acts
    d = f"d{st.d}_{tag}"
    x_z, x_r, x_h = (_cols(st, xt, k, f"{tag}_x{g}") for k, g in enumerate("zrh"))
    # H @ R^T for the update and reset gates together (R^T's first 2*hidden columns).
    hzr = st.op("MatMul", [h, _cols(st, r_t, slice(0, 2), f"{tag}_rzr_t")], f"{tag}_hzr")
    h_z, h_r = _cols(st, hzr, 0, f"{tag}_hz"), _cols(st, hzr, 1, f"{tag}_hr")
    z = f_act(_clipped(st, st.op("Add", [x_z, h_z], f"{tag}_z_pre"), f"{tag}_z"), f"{d}_z")
    r = f_act(_clipped(st, st.op("Add", [x_r, h_r], f"{tag}_r_pre"), f"{tag}_r"), f"{d}_r")
    rh_t = _cols(st, r_t, 2, f"{tag}_rh_t")
    if lbr:
        h_h = st.op("MatMul", [h, rh_t], f"{tag}_hh")
        if rb is not None:
            h_h = st.op("Add", [h_h, rb], f"{tag}_hh_b")
        cand = st.op("Add", [x_h, st.op("Mul", [r, h_h], f"{tag}_rhh")], f"{tag}_n_pre")
    else:
        rhh = st.op("MatMul", [st.op("Mul", [r, h], f"{tag}_rh"), rh_t], f"{tag}_rhh")
        cand = st.op("Add", [x_h, rhh], f"{tag}_n_pre")
    n = g_act(_clipped(st, cand, f"{tag}_n"), f"{d}_n")
    one = st.ctx.scalar_like(z, 1.0, f"{d}_one")
    keep = st.op("Mul", [z, h], f"{tag}_zh")
    fresh = st.op("Mul", [st.op("Sub", [one, z], f"{tag}_1mz"), n], f"{tag}_zn")
    return st.op("Add", [fresh, keep], f"{tag}_h")


def _cols(st: _Step, v: Value, k: int | slice, tag: str) -> Value:
    """Gate k's columns (k*hidden .. (k+1)*hidden; a slice of gates for several) of a
    [rows, gates*hidden] value."""
    hid = st.hidden
    lo, hi = (k.start, k.stop) if isinstance(k, slice) else (k, k + 1)
    shape = v.type.shape
    starts = [0] * (len(shape) - 1) + [lo * hid]
    ends = list(shape[:-1]) + [hi * hid]
    return st.op("Slice", [v], tag, {"starts": starts, "ends": ends, "steps": [1] * len(shape)})


def _clipped(st: _Step, v: Value, tag: str) -> Value:
    if st.clip is None:
        return v
    return st.op("Clip", [v], f"{tag}_clip", {"min": -st.clip, "max": st.clip})


def _is_reverse_dir(ctx: NodeContext, d: int) -> bool:
    direction = ctx.attr("direction", "forward")
    return direction == "reverse" or (direction == "bidirectional" and d == 1)


@converter("LSTM", "GRU", "RNN")
def convert_recurrent(ctx: NodeContext) -> list[Value | None]:
    op = ctx.op_type
    allowed: dict[str, tuple[object, ...] | None] = {
        "activation_alpha": None,
        "activation_beta": None,
        "activations": None,
        "clip": None,
        "direction": ("forward", "reverse", "bidirectional"),
        "hidden_size": None,
        "layout": (0, 1),
    }
    if op == "LSTM":
        allowed["input_forget"] = (0,)
    if op == "GRU":
        allowed["linear_before_reset"] = (0, 1)
    ctx.check_attrs(allowed)
    x, w, r = ctx.inp(0), ctx.inp(1), ctx.inp(2)
    check_elem(ctx, x, FLOAT_ONLY)
    same_elem(ctx, x, w)
    same_elem(ctx, x, r)
    if x.type.rank != 3:
        raise ctx.unsupported(f"input {x.type} is not 3-D")
    layout = int(ctx.attr("layout", 0))
    if layout:
        x = ctx.create("Transpose", [x], {"perm": [1, 0, 2]}, suffix="x_seq_major")
    seq, batch, isz = x.type.shape
    n_dirs = 2 if ctx.attr("direction", "forward") == "bidirectional" else 1
    gates = _GATES[op]
    hidden = int(ctx.attr("hidden_size", r.type.shape[-1]))
    if w.type.shape != (n_dirs, gates * hidden, isz) or r.type.shape != (
        n_dirs,
        gates * hidden,
        hidden,
    ):
        raise ctx.unsupported(f"W {w.type} / R {r.type} do not match {n_dirs} direction(s)")
    if seq == 0:
        raise ctx.unsupported("an empty sequence")
    clip = ctx.attr("clip")
    clip = None if clip is None else float(clip)
    acts = _activations(ctx, n_dirs)
    lbr = int(ctx.attr("linear_before_reset", 0))
    b = ctx.inp(3) if ctx.has_input(3) else None
    masks = _masks(ctx, seq, batch) if ctx.has_input(4) else None
    h0 = ctx.inp(5) if ctx.has_input(5) else None
    c0 = ctx.inp(6) if op == "LSTM" and ctx.has_input(6) else None
    p = ctx.inp(7) if op == "LSTM" and ctx.has_input(7) else None
    if layout and h0 is not None:
        h0 = ctx.create("Transpose", [h0], {"perm": [1, 0, 2]}, suffix="h0_dir_major")
    if layout and c0 is not None:
        c0 = ctx.create("Transpose", [c0], {"perm": [1, 0, 2]}, suffix="c0_dir_major")
    x2d = reshape(ctx, x, (seq * batch, isz), "x2d")
    ys: list[list[Value]] = []
    hs: list[Value] = []
    cs: list[Value] = []  # LSTM only
    for d in range(n_dirs):
        st = _Step(ctx, d, hidden, acts[d], clip)
        w_t = ctx.create(
            "Transpose", [_direction_slice(ctx, w, d, "w")], {"perm": [1, 0]}, suffix=f"w{d}_t"
        )
        r_t = ctx.create(
            "Transpose", [_direction_slice(ctx, r, d, "r")], {"perm": [1, 0]}, suffix=f"r{d}_t"
        )
        zeros_b = np.zeros((gates * hidden,), x.type.np_dtype)
        if b is not None:
            bd = _direction_slice(ctx, b, d, "b")
            wb = _cols_plain(ctx, bd, 0, gates * hidden, f"wb{d}")
            rb = _cols_plain(ctx, bd, gates * hidden, 2 * gates * hidden, f"rb{d}")
        else:
            wb = ctx.constant(zeros_b, suffix=f"wb{d}")
            rb = None
        if rb is not None and op == "GRU" and lbr:
            # With linear_before_reset, Rb's h part is applied inside the reset gating.
            keep = np.repeat(np.array([1, 1, 0], x.type.np_dtype), hidden)
            rb_h = _cols_plain(ctx, rb, 2 * hidden, 3 * hidden, f"rbh{d}")
            rb = ctx.create("Mul", [rb, ctx.constant(keep, suffix=f"rb{d}_zr")], suffix=f"rb{d}_zr")
        else:
            rb_h = None
        bias = wb if rb is None else ctx.create("Add", [wb, rb], suffix=f"bias{d}")
        proj = ctx.create("FullyConnected", [x2d, w_t, bias], suffix=f"xproj{d}")
        proj = reshape(ctx, proj, (seq, batch, gates * hidden), f"xproj{d}_3d")
        zero_h = np.zeros((batch, hidden), x.type.np_dtype)
        hd = (
            _direction_slice(ctx, h0, d, "h0_")
            if h0 is not None
            else ctx.constant(zero_h, suffix=f"h0_{d}")
        )
        cd = None
        if op == "LSTM":
            cd = (
                _direction_slice(ctx, c0, d, "c0_")
                if c0 is not None
                else ctx.constant(zero_h, suffix=f"c0_{d}")
            )
        peep = None
        if p is not None:
            pd = _direction_slice(ctx, p, d, "p")
            peep = [
                _cols_plain(ctx, pd, k * hidden, (k + 1) * hidden, f"p{d}{g}")
                for k, g in enumerate("iof")
            ]
        y_list, h_last, c_last = _recurrence(ctx, st, proj, r_t, rb_h, hd, cd, peep, masks, lbr)
        ys.append(y_list)
        hs.append(h_last)
        if c_last is not None:
            cs.append(c_last)
    y_steps = []
    for t in range(seq):
        per_dir = [
            reshape(ctx, ys[d][t], (1, 1, batch, hidden), f"y{d}_{t}_4d") for d in range(n_dirs)
        ]
        y_steps.append(
            per_dir[0]
            if n_dirs == 1
            else ctx.create("Concat", per_dir, {"axis": 1}, suffix=f"y_{t}")
        )
    y = y_steps[0] if seq == 1 else ctx.create("Concat", y_steps, {"axis": 0}, suffix="y")
    y_h = _stack_dirs(ctx, hs, batch, hidden, "y_h")
    y_c = _stack_dirs(ctx, cs, batch, hidden, "y_c") if op == "LSTM" else None
    if layout:
        y = ctx.create("Transpose", [y], {"perm": [2, 0, 1, 3]}, suffix="y_batch_major")
        y_h = ctx.create("Transpose", [y_h], {"perm": [1, 0, 2]}, suffix="y_h_batch_major")
        if y_c is not None:
            y_c = ctx.create("Transpose", [y_c], {"perm": [1, 0, 2]}, suffix="y_c_batch_major")
    return [y, y_h, y_c] if op == "LSTM" else [y, y_h]


def _cols_plain(ctx: NodeContext, v: Value, lo: int, hi: int, tag: str) -> Value:
    return ctx.create("Slice", [v], {"starts": [lo], "ends": [hi], "steps": [1]}, suffix=tag)


def _stack_dirs(ctx: NodeContext, vs: list[Value], batch: int, hidden: int, tag: str) -> Value:
    parts = [reshape(ctx, v, (1, batch, hidden), f"{tag}{d}") for d, v in enumerate(vs)]
    return parts[0] if len(parts) == 1 else ctx.create("Concat", parts, {"axis": 0}, suffix=tag)


def _masks(ctx: NodeContext, seq: int, batch: int) -> list[Value]:
    """Per time step, a [batch, 1] bool: step t is inside sequence b (t < sequence_lens[b])."""
    lens = ctx.inp(4)
    check_elem(ctx, lens, INT_KINDS, "sequence_lens")
    if lens.type.shape != (batch,):
        raise ctx.unsupported(f"sequence_lens {lens.type} does not match batch {batch}")
    lens2 = reshape(ctx, lens, (batch, 1), "seq_lens_col")
    out = []
    for t in range(seq):
        step = ctx.constant(np.array(t, lens.type.np_dtype), suffix=f"step{t}")
        out.append(ctx.create("Less", [step, lens2], suffix=f"in_seq{t}"))
    return out
