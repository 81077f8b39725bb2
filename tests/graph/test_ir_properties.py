"""Property tests of the graph IR on generated modules: the text form parses back to a module
that prints identically (with and without constant data) and computes the same outputs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

from compiler.backends.interpreter.graph_interpreter import run_graph
from compiler.graph import print_module
from tests.graph_strategies import GraphCase, graphs
from tests.roundtrip import assert_round_trips


@settings(max_examples=60)
@given(graphs())
def test_text_round_trip(case: GraphCase) -> None:
    m = case.module
    text = print_module(m)
    assert_round_trips(m)
    assert print_module(m.clone()) == text

    back = assert_round_trips(m, with_data=True)
    for name, c in m.constants.items():
        np.testing.assert_array_equal(back.constants[name].data, c.data)
    want, got = run_graph(m, case.inputs), run_graph(back, case.inputs)
    assert list(got) == list(want)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
