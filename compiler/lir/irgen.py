"""IRGen (pipeline step 8): the scheduled graph function becomes one low-level IR function.

Constants become constant WeightVars (data shared), placeholders mutable WeightVars. Each node
becomes `allocactivation` of its result plus its instruction, generically through the
instruction table; only Save (copy into the output weight), Reshape (tensorview, no copy),
Concat (inserttensor per operand), Slice with unit steps (extracttensor) and Split
(extracttensor per result) are special. A `deallocactivation` follows each buffer's last use.
"""

from __future__ import annotations

from collections.abc import Sequence

from compiler.errors import CompilerError
from compiler.graph.ir import Function, Module, Node, Value
from compiler.lir.instructions import Kind, kind_for_graph_op
from compiler.lir.ir import Instruction, LIRFunction, LValue, view_root


def irgen(
    module: Module, order: Sequence[Node] | None = None, *, function: Function | None = None
) -> LIRFunction:
    """Generate the low-level IR of `function` (default: the module's main) in node `order`
    (default: `function.nodes`, a topological order; the scheduler supplies a better one)."""
    fn = function or module.main
    nodes = list(order) if order is not None else fn.nodes
    if len(nodes) != len(fn) or any(n not in fn for n in nodes):
        raise CompilerError(f"irgen: the order does not list exactly the nodes of @{fn.name}")
    lir = LIRFunction(fn.name)
    if "accumulating_ops" in module.meta:  # what the backend's kernels accumulate (lowering)
        lir.meta["accumulating_ops"] = frozenset(module.meta["accumulating_ops"])
    if module.meta.get("int8_sum_post_op"):  # the quantize stage chose the int8 arithmetic
        lir.meta["int8_sum_post_op"] = True
    vmap: dict[int, LValue] = {}
    used = {id(v) for n in nodes for v in n.operands}
    for p in module.placeholders.values():
        vmap[id(p)] = lir.add_weight(
            p.name, p.type, "mutable", role="output" if p.is_output else "input", exact_name=True
        )
    for c in module.constants.values():
        if id(c) in used:
            vmap[id(c)] = lir.add_weight(
                c.name, c.type, "constant", data=c.data, digest=c._digest, exact_name=True
            )
    gen = _IRGen(lir, vmap)
    for node in nodes:
        gen.emit(node)
    _insert_deallocs(lir)
    return lir


class _IRGen:
    def __init__(self, lir: LIRFunction, vmap: dict[int, LValue]) -> None:
        self.lir = lir
        self.vmap = vmap

    def value(self, v: Value, node: Node) -> LValue:
        try:
            return self.vmap[id(v)]
        except KeyError:
            raise CompilerError(
                f"irgen: operand %{v.name} of node '{node.name}' is used before "
                "it is computed (the order is not topological)"
            ) from None

    def alloc(self, node: Node, index: int) -> Instruction:
        r = node.results[index]
        a = self.lir.create(
            Kind.ALLOC, (), name=f"{r.name}_res", type=r.type, meta={"node": node.name}
        )
        self.vmap[id(r)] = a
        return a

    def instr(
        self,
        kind: str,
        operands: list[tuple[LValue, str]],
        attrs: dict,
        node: Node,
        name: str | None = None,
    ) -> Instruction:
        return self.lir.create(
            kind, operands, attrs, name=name or node.name, meta={"node": node.name, "op": node.op}
        )

    def emit(self, node: Node) -> None:
        op = node.op
        ins = [self.value(v, node) for v in node.operands]
        if op == "Save":
            self.instr(Kind.COPY, [(ins[1], "out"), (ins[0], "in")], {}, node)
        elif op == "Reshape":
            src = node.operands[0]
            v = self.lir.create(
                Kind.VIEW,
                [(ins[0], "in")],
                {"offsets": (0,) * src.type.rank},
                name=node.name,
                type=node.result.type,
                meta={"node": node.name, "op": op},
            )
            self.vmap[id(node.result)] = v
        elif op == "Concat":
            dest = self.alloc(node, 0)
            axis = node.attrs["axis"] % node.result.type.rank
            pos = 0
            for k, (gv, lv) in enumerate(zip(node.operands, ins)):
                offs = tuple(pos if d == axis else 0 for d in range(node.result.type.rank))
                self.instr(
                    Kind.INSERT,
                    [(dest, "inout"), (lv, "in")],
                    {"offsets": offs, "count": 1, "axis": axis},
                    node,
                    name=f"{node.name}.insert{k}",
                )
                pos += gv.type.shape[axis]
        elif op == "Split":
            axis = node.attrs["axis"] % node.operands[0].type.rank
            pos = 0
            for k, r in enumerate(node.results):
                dest = self.alloc(node, k)
                offs = tuple(pos if d == axis else 0 for d in range(r.type.rank))
                self.instr(
                    Kind.EXTRACT,
                    [(dest, "out"), (ins[0], "in")],
                    {"offsets": offs},
                    node,
                    name=f"{node.name}.extract{k}",
                )
                pos += r.type.shape[axis]
        elif op == "Slice" and all(s == 1 for s in node.attrs["steps"]):
            dest = self.alloc(node, 0)
            src_shape = node.operands[0].type.shape
            offs = tuple(min(max(s, 0), d) for s, d in zip(node.attrs["starts"], src_shape))
            self.instr(Kind.EXTRACT, [(dest, "out"), (ins[0], "in")], {"offsets": offs}, node)
        else:
            if len(node.results) != 1:
                raise CompilerError(
                    f"irgen: node '{node.name}' ({op}) has {len(node.results)} "
                    "results; only Split may have several"
                )
            dest = self.alloc(node, 0)
            ops = [(dest, "out")] + [(v, "in") for v in ins]
            self.instr(kind_for_graph_op(op), ops, dict(node.attrs), node)


def _insert_deallocs(lir: LIRFunction) -> None:
    """Put a deallocactivation right after each activation's last use (views count)."""
    last: dict[int, tuple[int, Instruction]] = {}
    for idx, instr in enumerate(lir.code):
        if instr.is_alloc:
            last[id(instr)] = (idx, instr)
        for v, _ in instr.operands:
            root, _ = view_root(v)
            if isinstance(root, Instruction) and root.is_alloc:
                last[id(root)] = (idx, root)
    ends: dict[int, list[Instruction]] = {}
    for idx, buf in last.values():
        ends.setdefault(idx, []).append(buf)
    new_code: list[Instruction] = []
    for idx, instr in enumerate(lir.code):
        new_code.append(instr)
        for buf in ends.get(idx, ()):
            d = Instruction(
                Kind.DEALLOC,
                lir.unique_name(f"{buf.name}.dealloc"),
                [(buf, "out")],
                meta=dict(buf.meta),
            )
            d.function = lir
            lir._values[d.name] = d
            new_code.append(d)
    lir.code = new_code
    lir.invalidate()


__all__ = ["irgen"]
