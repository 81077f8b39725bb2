"""The fused-activation table: every row names a real op and real attributes, and every user
(op table, reference kernels, fusion, lowering) derives from it."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.errors import VerifyError
from compiler.graph import Module
from compiler.graph.activations import ACTIVATIONS, BY_OP, NONE, get_activation
from compiler.graph.ops import get_op
from compiler.graph.types import f32
from compiler.kernels.reference import KERNELS, apply_activation

ARGS = {"relu": (), "clip": (-0.5, 0.75), "leaky_relu": (0.2,), "sigmoid": (), "tanh": ()}


def test_every_row_names_an_op_its_attributes_and_a_kernel() -> None:
    assert set(ARGS) == set(ACTIVATIONS), "give the new activation arguments in ARGS"
    for act in ACTIVATIONS.values():
        opdef = get_op(act.op)
        assert set(act.params) == set(opdef.attrs), act
        assert act.op in KERNELS
        assert BY_OP[act.op] is act
    # The op table's attribute documentation is derived from the table.
    doc = get_op("Conv").attrs["activation"].doc
    assert all(name in doc for name in (NONE, *ACTIVATIONS))


@pytest.mark.parametrize("name", sorted(ARGS))
def test_args_round_trip_and_numpy_semantics_are_the_ops_kernel(name: str) -> None:
    act = get_activation(name)
    attrs = act.attrs_of(ARGS[name])
    assert act.args_of(attrs) == ARGS[name]
    y = np.random.default_rng(0).standard_normal((3, 7)).astype(np.float32)
    y[0, 0] = np.nan
    want = KERNELS[act.op]([y.copy()], get_op(act.op).normalize_attrs(attrs))[0]
    got = apply_activation(y.copy(), name, ARGS[name])
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "activation,act_args,match",
    [
        ("swish", (), "unknown fused activation 'swish'"),
        ("clip", (0.0,), r"takes act_args \(min, max\)"),
        ("relu", (1.0,), "takes act_args"),
        ("none", (1.0,), "takes no act_args"),
    ],
)
def test_malformed_fused_activation_is_refused_at_creation(
    activation: str, act_args: tuple[float, ...], match: str
) -> None:
    m = Module("t")
    x = m.add_placeholder("x", f32(2, 4))
    w = m.add_constant("w", np.ones((4, 3), np.float32))
    b = m.add_constant("b", np.zeros(3, np.float32))
    fn = m.create_function()
    with pytest.raises(VerifyError, match=match) as err:
        fn.create("FullyConnected", [x, w, b], {"activation": activation, "act_args": act_args})
    assert "FullyConnected" in str(err.value)
