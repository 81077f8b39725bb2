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
#: Op types converted from a domain other than the default ONNX one, by domain.
DOMAIN_OPS: dict[str, set[str]] = {}


def converter(*op_types: str, domain: str = "") -> Callable[[Converter], Converter]:
    """Register `fn` for `op_types` (of `domain`, default the ONNX one)."""

    def deco(fn: Converter) -> Converter:
        for op in op_types:
            assert op not in CONVERTERS, op
            CONVERTERS[op] = fn
            if domain:
                DOMAIN_OPS.setdefault(domain, set()).add(op)
        return fn

    return deco
