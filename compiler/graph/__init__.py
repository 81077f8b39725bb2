"""The high-level graph IR: typed values, the op table, nodes, functions, text form, verifier."""

# The quantized rows of the op table live in their own module, which registers them on import;
# importing it first means every user of the table (any compiler.graph module) sees them.
import compiler.graph.ops_quant  # noqa: F401, I001
from compiler.graph import ops_extra  # noqa: F401, I001 - the rest of the op table registers
from compiler.graph.ir import Constant, Function, Module, Node, Placeholder, Result, Value
from compiler.graph.ops import OpDef, all_ops, get_op
from compiler.graph.parser import parse_module
from compiler.graph.printer import print_module
from compiler.graph.types import ElemKind, TensorType
from compiler.graph.verifier import verify_module

__all__ = [
    "Constant",
    "ElemKind",
    "Function",
    "Module",
    "Node",
    "OpDef",
    "Placeholder",
    "Result",
    "TensorType",
    "Value",
    "all_ops",
    "get_op",
    "parse_module",
    "print_module",
    "verify_module",
]
