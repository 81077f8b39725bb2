"""The low-level IR (pipeline step 8): instruction table, IR, text form, verifier, IRGen."""

from compiler.lir.instructions import InstrDef, all_instrs, get_instr, kind_for_graph_op
from compiler.lir.ir import Instruction, LIRFunction, LValue, WeightVar, view_byte_offset, view_root
from compiler.lir.parser import parse_lir
from compiler.lir.printer import format_instruction, print_function, print_lir
from compiler.lir.verifier import verify_lir

__all__ = [
    "InstrDef",
    "Instruction",
    "LIRFunction",
    "LValue",
    "WeightVar",
    "all_instrs",
    "format_instruction",
    "get_instr",
    "kind_for_graph_op",
    "parse_lir",
    "print_function",
    "print_lir",
    "verify_lir",
    "view_byte_offset",
    "view_root",
]
