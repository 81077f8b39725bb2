"""Property tests of the graph IR on generated modules: the text form parses back to a module
that prints identically (with and without constant data) and computes the same outputs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

from compiler.backends.interpreter.graph_interpreter import run_graph
from compiler.graph import parse_module, print_module, verify_module
from tests.graph_strategies import GraphCase, graphs


@settings(max_examples=60)
@given(graphs())
def test_text_round_trip(case: GraphCase) -> None:
    m = case.module
    text = print_module(m)
    back = parse_module(text)
    verify_module(back)
    assert print_module(back) == text
    assert print_module(m.clone()) == text

    full = print_module(m, with_data=True)
    back = parse_module(full)
    verify_module(back)
    assert print_module(back, with_data=True) == full
    for name, c in m.constants.items():
        np.testing.assert_array_equal(back.constants[name].data, c.data)
    want, got = run_graph(m, case.inputs), run_graph(back, case.inputs)
    assert list(got) == list(want)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
