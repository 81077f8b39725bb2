"""The converter table: ONNX op type -> function turning one ONNX node into graph-IR values.

A converter takes a NodeContext and returns one Value (or None when unused/unsupported) per
ONNX output. Converter modules register themselves with `@converter("OpType", ...)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from compiler.frontend.onnx_importer import NodeContext

Converter = Callable[["NodeContext"], list[Any]]

CONVERTERS: dict[str, Converter] = {}


def converter(*op_types: str) -> Callable[[Converter], Converter]:
    def deco(fn: Converter) -> Converter:
        for op in op_types:
            assert op not in CONVERTERS, op
            CONVERTERS[op] = fn
        return fn

    return deco
