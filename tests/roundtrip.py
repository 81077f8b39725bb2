"""The text round-trip both IRs promise (print -> parse -> verify -> print is identical), one
check shared by the IR, property, irgen and every-stage tests."""

from __future__ import annotations

from typing import TypeVar

from compiler.graph import parse_module, print_module, verify_module
from compiler.graph.ir import Module
from compiler.lir import LIRFunction, parse_lir, print_lir, verify_lir

IR = TypeVar("IR", Module, LIRFunction)


def assert_round_trips(ir: IR, with_data: bool = False, where: str = "") -> IR:
    """Print `ir` (its constants' data too if `with_data`), parse the text back, verify it and
    assert it prints to the same text; returns the parsed IR."""
    back: Module | LIRFunction
    if isinstance(ir, Module):
        text = print_module(ir, with_data=with_data)
        back = parse_module(text)
        verify_module(back)
        again = print_module(back, with_data=with_data)
    else:
        text = print_lir(ir, with_data=with_data)
        back = parse_lir(text)
        verify_lir(back)
        again = print_lir(back, with_data=with_data)
    assert again == text, where or f"the printed IR does not parse back to itself:\n{text}"
    return back  # type: ignore[return-value]
