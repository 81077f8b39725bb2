"""LIR -> one LLVM module (pipeline step 11, the CPU backend's code generator).

Every compute instruction becomes `void @instr_<idx>(ptr noalias %constant, ptr noalias
%mutable, ptr noalias %activations)`: it offsets the three region bases by the memory plan's
constant byte offsets and calls kernels specialised for the instruction's shapes (kernels are
shared between instructions with the same signature, e.g. ResNet's repeated blocks). `@run_all`
runs the whole program; in it, chains of element-wise instructions are stacked into one loop
(`@fused_<idx>`). Kernels come from the emitter table `EMITTERS`, keyed by instruction kind;
an instruction without an emitter raises `CodegenError` naming it.

`conv_strategy` (or `$GLOWVIZ_CONV_STRATEGY`) forces one row of the conv strategy table
(`kernels.conv.STRATEGIES`) on every conv, for tests and debugging; a conv it does not apply
to raises `CodegenError`.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from llvmlite import ir

from compiler.backends.llvm.emitters import EMITTERS, NO_CODE
from compiler.backends.llvm.emitters.common import (
    I8,
    PTR,
    VOID,
    Call,
    EmitContext,
    Emitted,
    KernelSink,
    RegionAlloc,
    gep,
)
from compiler.backends.llvm.emitters.elementwise import (
    emit_chain,
    is_elementwise,
    lane_epilogue,
    lane_sources,
)
from compiler.backends.llvm.emitters.matmul import (
    matmul_residual,
    matmul_row_bias,
)
from compiler.backends.llvm.kernels.parallel import finish_runtime, runtime
from compiler.errors import CodegenError, CompilerError
from compiler.lir.ir import Instruction, LIRFunction, LValue, view_root
from compiler.memory.regions import CONSTANT_REGION, REGIONS, ArenaLayout, align


@dataclass
class InstrCode:
    """The code of one instruction: its entry (None for memory markers) and kernel calls."""

    index: int
    name: str
    kind: str
    entry: str | None
    calls: list[Call] = field(default_factory=list)
    strategy: str = ""


@dataclass
class Program:
    """A generated program: the LLVM module, per-instruction entries and the constant blobs."""

    module: ir.Module
    instrs: list[InstrCode]
    blobs: list[np.ndarray]
    blob_offsets: list[int]  # byte offsets in the extended constant region
    constant_size: int  # bytes of the extended constant region (plan's + packed blobs)
    groups: list[tuple[int, ...]]  # instruction indices run by each call of @run_all
    kernel_count: int = 0
    #: Every wrapper (`instr_<i>`, `fused_<i>`) -> its kernel calls: all the memory it reads.
    entry_calls: dict[str, list[Call]] = field(default_factory=dict)
    #: The wrappers `@run_all` calls.
    run_entries: frozenset[str] = frozenset()
    #: With ``CodeGen(constant_region=...)``: (owner, bytes) of the extended constant region,
    #: ``max(constant_size, 64)`` bytes, the blobs already in place (``blobs`` are its views).
    region: tuple[Any, np.ndarray] | None = None

    @property
    def ir_text(self) -> str:
        return str(self.module)

    @property
    def step_entries(self) -> list[str]:
        """The instructions' entries `@run_all` does not call (members of a fused chain or
        epilogue): only stepping and profiling need them."""
        return [ic.entry for ic in self.instrs if ic.entry and ic.entry not in self.run_entries]

    def run_text(self) -> str:
        """The module's IR with the step-only entries made internal: what ``run_all`` (and
        every other exported entry it calls) needs, so O3 drops the step-only entries and the
        kernels only they call before spending any time on them. DenseNet-121's BatchNorm +
        ReLU pairs run fused: their unfused kernels, 0.9 of its 2.2 s of kernel LLVM time, are
        compiled only when someone steps (``step_text``)."""
        step = set(self.step_entries)
        return self._text_exporting(lambda name: name not in step)

    def step_text(self) -> str | None:
        """A module exporting only the step-only entries (and the pool's entry points), or
        None when there are none."""
        step = set(self.step_entries)
        if not step:
            return None
        return self._text_exporting(lambda name: name in step or name in POOL_ENTRIES)

    def _text_exporting(self, exported: Callable[[str], bool]) -> str:
        """The module's text with the defined functions ``exported`` rejects made internal
        (their linkage restored afterwards)."""
        fns = [f for f in self.module.functions if f.blocks]
        saved = {f.name: f.linkage for f in fns}
        try:
            for f in fns:
                if not exported(f.name):
                    f.linkage = "internal"
            return str(self.module)
        finally:
            for f in fns:
                f.linkage = saved[f.name]

    def entry_of(self, index: int) -> str | None:
        return self.instrs[index].entry


class Addresses:
    """(region, byte offset, byte size) of every operand, from the plan (views resolved)."""

    def __init__(self, plan: ArenaLayout) -> None:
        self.plan = plan

    def of(self, value: LValue) -> tuple[int, int, int]:
        root, off = view_root(value)
        try:
            region, base = self.plan.offset_of(root.name)
        except (KeyError, CompilerError):
            raise CodegenError(f"the memory plan has no offset for %{root.name}") from None
        return REGIONS.index(region), int(base) + off, value.type_.size_bytes

    def overlap(self, a: LValue, b: LValue) -> bool:
        ra, oa, sa = self.of(a)
        rb, ob, sb = self.of(b)
        return ra == rb and oa < ob + sb and ob < oa + sa

    def same(self, a: LValue, b: LValue) -> bool:
        return self.of(a) == self.of(b)


def _users(
    ins: Instruction, cache: dict[int, list[Instruction]] | None = None
) -> list[Instruction]:
    """Non-marker instructions that use the buffer `ins` writes (through views too); `cache`
    keeps them per buffer (a chain merged into one buffer asks once, not once per step)."""
    dest = ins.operands[0][0]
    root, _ = view_root(dest)
    if cache is not None:
        if id(root) not in cache:
            cache[id(root)] = _users(ins)
        return cache[id(root)]
    out = []
    seen = set()
    stack = [root]
    while stack:
        v = stack.pop()
        for u, _ in v.users:
            if id(u) in seen:
                continue
            seen.add(id(u))
            if u.is_view:
                stack.append(u)
            elif u.kind not in NO_CODE:
                out.append(u)
    return out


def find_chains(lir: LIRFunction, addr: Addresses) -> list[tuple[list[Instruction], list[bool]]]:
    """Chains of element-wise instructions where each one's dest feeds the next (same shape).

    Returns (chain, keep) pairs; `keep[j]`: step j's result must still be stored (it has other
    readers). Only instructions separated by memory markers are chained.
    """
    code = [i for i in lir.code if i.kind not in NO_CODE]
    chains: list[tuple[list[Instruction], list[bool]]] = []
    cur: list[Instruction] = []
    # What the chain reads (its steps' @in operands, each value once) and the (read, dest)
    # pairs already found safe: linear in the chain, where rechecking every step's operands
    # for every new step was quadratic (a 3000-step chain, a value read 2000 times).
    reads: dict[int, LValue] = {}
    safe: set[tuple[int, tuple[int, int, int]]] = set()
    users: dict[int, list[Instruction]] = {}

    def flush() -> None:
        nonlocal cur
        if len(cur) > 1:
            keep = []
            for j, ins in enumerate(cur[:-1]):
                others = any(u is not cur[j + 1] and u is not ins for u in _users(ins, users))
                out_v = ins.operands[0][0]
                keep.append(
                    others
                    or getattr(out_v, "role", None) == "output"
                    or not isinstance(view_root(out_v)[0], Instruction)
                )
            keep.append(True)
            chains.append((cur, keep))
        cur = []
        reads.clear()
        safe.clear()

    def start(ins: Instruction) -> None:
        cur.append(ins)
        reads.update((id(v), v) for v, _ in ins.operands[1:])

    for ins in code:
        if not is_elementwise(ins):
            flush()
            continue
        if cur and _chainable(cur[-1], reads, safe, ins, addr):
            start(ins)
        else:
            flush()
            start(ins)
    flush()
    return chains


#: A MatMul's row-bias Add (PyTorch's Linear) runs in the GEMM, before the rest of the chain
#: (``matmul_row_bias``): one pass over the result fewer, and the chain after it (GELU) can
#: run in the GEMM's epilogue too.
FUSE_MATMUL_BIAS = True

#: ... and a residual Add right after that bias too (the tensor read in the GEMM's epilogue).
FUSE_MATMUL_RESIDUAL = True

#: A chain step may read any earlier step's result or the producer's (not only the step
#: before it): GPT-2's tanh GELU reads x again after the tanh, in the scheduler's order.
EPILOGUE_DAGS = True

#: Instructions whose kernels run a lane-wise epilogue (``EmitContext.with_epilogue``).
EPILOGUE_PRODUCERS = frozenset({"conv", "fullyconnected", "matmul", "batchnorm"})


def _skippable(value: LValue) -> bool:
    """A dest a fused kernel may leave unwritten: an activation buffer, not an output."""
    return getattr(value, "role", None) != "output" and isinstance(view_root(value)[0], Instruction)


def find_epilogues(
    lir: LIRFunction, addr: Addresses, ctx: EmitContext
) -> list[tuple[Instruction, list[Instruction]]]:
    """(producer, chain) pairs: a conv / fully-connected / matmul / batchnorm followed by
    element-wise instructions that each read the one before (the producer's result first)
    and otherwise only uniform constants (``lane_sources``), so ``run_all`` can run the chain
    on the producer's results before they are stored. Every dest but the last is read by nothing
    else and is not an output; the last must not overlap the producer's operands."""
    code = [i for i in lir.code if i.kind not in NO_CODE]
    out = []
    users: dict[int, list[Instruction]] = {}
    for pos, prod in enumerate(code):
        # A sum post-op producer adds to what its destination holds: a chain would read that
        # from its own last destination instead, so accumulating producers keep theirs.
        if prod.kind not in EPILOGUE_PRODUCERS or prod.accumulates:
            continue
        src = prod.operands[0][0]
        known: dict[int, tuple] = {id(src): ("acc",)}
        chain: list[Instruction] = []
        for at in range(pos + 1, len(code)):
            nxt = code[at]
            cur = chain[-1].operands[0][0] if chain else src
            if not any(v is cur for v, _ in nxt.operands[1:]) and not (
                chain and EPILOGUE_DAGS and any(id(v) in known for v, _ in nxt.operands[1:])
            ):
                break
            if tuple(nxt.operands[0][0].type_.shape) != tuple(src.type_.shape):
                break
            if not chain and FUSE_MATMUL_BIAS and matmul_row_bias(ctx, prod, nxt) is not None:
                # The GEMM adds the bias; the steps after it see the biased sum (and not
                # the producer's own dest, when the Add was not in place).
                chain.append(nxt)
                known = {id(nxt.operands[0][0]): ("acc",)}
                continue
            if (
                len(chain) == 1
                and FUSE_MATMUL_RESIDUAL
                and matmul_row_bias(ctx, prod, chain[0]) is not None
                and matmul_residual(ctx, chain[0], nxt) is not None
            ):
                # ... and then the residual tensor: the chain ends there (the addend must not
                # overlap the dest the GEMM writes, which a later step could change).
                chain.append(nxt)
                break
            if lane_sources(ctx, nxt, known) is None:
                break
            chain.append(nxt)
            known[id(nxt.operands[0][0])] = ("step", len(chain) - 1)
        del chain[_fusable_prefix(prod, chain, addr, users) :]
        if chain:
            out.append((prod, chain))
    return out


def _fusable_prefix(
    prod: Instruction,
    chain: list[Instruction],
    addr: Addresses,
    users: dict[int, list[Instruction]],
) -> int:
    """The length of the longest prefix of `chain` whose intermediate results nothing outside
    the fused kernel reads. Writer j (the producer, then each step but the last) may be left
    unstored when its dest is an activation buffer read only by members up to the prefix's end
    -- unless it is the buffer the prefix writes last (an in-place chain). One pass over the
    prefixes with counts of the writers that block them (per address), and one walk of each
    buffer's users: linear, where retrying every shorter prefix was quadratic on a chain that
    buffer sharing merged into one buffer (every step's buffer had every step as a user)."""
    place = {id(prod): 0, **{id(ins): k + 1 for k, ins in enumerate(chain)}}
    # Per buffer root: whether only members use it, and the last member position that does.
    reach: dict[int, tuple[bool, int]] = {}
    blocking: Counter[tuple[int, int, int]] = Counter()
    blocked = 0
    unblocks: dict[int, list[tuple[int, int, int]]] = {}
    best = 0
    for k in range(1, len(chain) + 1):
        for where in unblocks.pop(k, []):
            blocking[where] -= 1
            blocked -= 1
        writer = prod if k == 1 else chain[k - 2]
        dest = writer.operands[0][0]
        root = id(view_root(dest)[0])
        if root not in reach:
            us = _users(writer, users)
            inside = all(id(u) in place for u in us)
            reach[root] = (inside, max((place[id(u)] for u in us if id(u) in place), default=0))
        inside, last_use = reach[root]
        where = addr.of(dest)
        if not (_skippable(dest) and inside) or last_use > k:
            blocking[where] += 1
            blocked += 1
        if _skippable(dest) and inside and last_use > k:
            unblocks.setdefault(last_use, []).append(where)
        last = chain[k - 1].operands[0][0]
        lwhere = addr.of(last)
        if blocked == blocking[lwhere] and not any(
            addr.overlap(last, v) for v, _ in prod.operands[1:]
        ):
            best = k
    return best


def _chainable(
    prev: Instruction,
    reads: dict[int, LValue],
    safe: set[tuple[int, tuple[int, int, int]]],
    nxt: Instruction,
    addr: Addresses,
) -> bool:
    """Whether `nxt` extends the chain ending in `prev` that reads `reads`."""
    pdest = prev.operands[0][0]
    ndest = nxt.operands[0][0]
    if tuple(pdest.type_.shape) != tuple(ndest.type_.shape):
        return False
    if not any(v is pdest for v, _ in nxt.operands[1:]):
        return False
    # Writes of the fused loop must not clobber data an earlier step still reads at a later
    # element: only an exact in-place overlap (same address, same shape, no broadcast) is safe.
    # Safe pairs are kept by the dest's address: a chain merged into one buffer, or
    # ping-ponging between two, checks each read once or twice in all.
    where = addr.of(ndest)
    for v in (*reads.values(), *(v for v, _ in nxt.operands[1:])):
        if v is pdest or (id(v), where) in safe:
            continue
        w = ndest
        if addr.overlap(v, w) and not (addr.same(v, w) and v.type_.shape == w.type_.shape):
            return False
        safe.add((id(v), where))
    return True


def merge_identical_functions(module: ir.Module) -> dict[str, str]:
    """Keep one of every set of internal functions whose IR is the same but for their names
    (kernels of different shape signatures can still compile to the same code, e.g. the GEMM
    chunks of a stride-1 and a stride-2 3x3 conv over the same grid), and point every call at
    it. Merging callees can make their callers identical too: repeated until nothing merges.
    Returns the merged names, each to the name kept. The code is the same, so the results are
    too; LLVM compiles each body once (ResNet-50: 5 GEMM chunk functions of ~50 ms each)."""
    fns = {f.name: f for f in module.functions if f.blocks and f.linkage == "internal"}
    texts = {n: str(f).replace(f'@"{n}"', '@"<self>"') for n, f in fns.items()}
    alias: dict[str, str] = {}
    while True:
        first: dict[str, str] = {}
        merged: dict[str, str] = {}
        for n, t in texts.items():
            keep = first.setdefault(t, n)
            if keep != n:
                merged[n] = keep
        if not merged:
            break
        for n in merged:
            del texts[n]
        for n, t in texts.items():
            if any(f'@"{m}"' in t for m in merged):
                for m, keep in merged.items():
                    t = t.replace(f'@"{m}"', f'@"{keep}"')
                texts[n] = t
        alias = {m: merged.get(k, k) for m, k in alias.items()} | merged
    if not alias:
        return alias
    for n in alias:
        del module.globals[n]
    for f in module.functions:
        for block in f.blocks:
            for instr in block.instructions:
                if isinstance(instr, ir.CallInstr):
                    for op in instr.operands:
                        if isinstance(op, ir.Function) and op.name in alias:
                            instr.replace_usage(op, fns[alias[op.name]])  # clears its text
    return alias


def _writes_nothing(ins: Instruction) -> bool:
    """Every operand `ins` writes holds no element (an empty batch): it has nothing to do, and
    kernels need not handle zero-size shapes (the GEMM refused them)."""
    outs = [v for v, m in ins.operands if m in ("out", "inout")]
    return bool(outs) and all(0 in v.type_.shape for v in outs)


#: The thread pool's exported entry points (kernels/parallel.py), in every module.
POOL_ENTRIES = frozenset({"glowviz_pool_start", "glowviz_pool_stop"})

#: Whether ``generate`` merges functions identical but for their names (A/B switch).
MERGE_FUNCTIONS = True

#: Whether a ``constant_region`` given to ``CodeGen`` receives the packed weights as they are
#: made (``KernelSink``), so the executor takes it as is (A/B switch; off: it copies them).
DIRECT_BLOBS = True


class CodeGen:
    """Builds the Program of a LIR function over a memory plan."""

    def __init__(
        self,
        lir: LIRFunction,
        plan: ArenaLayout,
        *,
        fuse: bool = True,
        conv_strategy: str | None = None,
        constant_region: RegionAlloc | None = None,
    ) -> None:
        self.lir = lir
        self.plan = plan
        self.fuse = fuse
        self.entry_calls: dict[str, list[Call]] = {}
        self.addr = Addresses(plan)
        self.module = ir.Module(name=f"glowviz.{lir.name}")
        # Every module has the pool's entry points: the pool itself if a kernel loop runs in
        # chunks (idle until the host starts it), no-ops otherwise (see ``finish_runtime``).
        runtime(self.module)
        start = align(int(plan.region_sizes.get(CONSTANT_REGION, 0)))
        if constant_region is not None and DIRECT_BLOBS:
            # The packed weights go to their place in the constant region as they come: about
            # the constants' bytes (Winograd's filters: 16/9 of theirs), grown past that.
            weights = sum(w.type_.size_bytes for w in lir.weights.values() if w.data is not None)
            self.sink = KernelSink(
                self.module, region=constant_region, start=start, capacity=2 * weights + (1 << 20)
            )
        else:
            self.sink = KernelSink(self.module)
        forced = conv_strategy or os.environ.get("GLOWVIZ_CONV_STRATEGY") or None
        self.ctx = EmitContext(self.sink, self.addr.overlap, conv_strategy=forced)

    def generate(self, relayout: Relayout | None = None) -> Program:
        """The program; with ``relayout``, its wrappers address the plan ``relayout`` returns
        for the kernel calls of every wrapper (see ``generate``)."""
        instrs: list[InstrCode] = []
        for idx, ins in enumerate(self.lir.code):
            if ins.kind in NO_CODE or _writes_nothing(ins):
                instrs.append(InstrCode(idx, ins.name, ins.kind, None))
                continue
            emitter = EMITTERS.get(ins.kind)
            if emitter is None:
                raise CodegenError(
                    f"no LLVM emitter for instruction kind '{ins.kind}'", instruction=ins.name
                )
            try:
                em: Emitted = emitter(self.ctx, ins)
            except CodegenError:
                raise
            except (ValueError, NotImplementedError, KeyError, TypeError, AssertionError) as e:
                raise CodegenError(
                    f"{ins.kind}: {type(e).__name__}: {e}", instruction=ins.name
                ) from e
            entry = f"instr_{idx}"
            instrs.append(InstrCode(idx, ins.name, ins.kind, entry, em.calls, em.strategy))

        groups: list[tuple[int, ...]] = []
        fused_entry: dict[int, str] = {}
        fused_members: set[int] = set()
        fused_calls: dict[str, list[Call]] = {}

        def fused(ids: tuple[int, ...], calls: list[Call], tag: str) -> None:
            name = f"fused_{ids[0]}"
            fused_calls[name] = calls
            fused_entry[ids[-1]] = name
            fused_members.update(ids)
            for i in ids:
                instrs[i].strategy = (instrs[i].strategy + " " + tag).strip()
            groups.append(ids)

        if self.fuse:
            index = {id(i): n for n, i in enumerate(self.lir.code)}
            for prod, chain in find_epilogues(self.lir, self.addr, self.ctx):
                if _writes_nothing(prod):
                    continue
                try:
                    bias = matmul_row_bias(self.ctx, prod, chain[0]) if FUSE_MATMUL_BIAS else None
                    addend = None
                    if bias is not None and len(chain) == 2 and FUSE_MATMUL_RESIDUAL:
                        addend = matmul_residual(self.ctx, chain[0], chain[1])
                    if bias is None:
                        lanes = lane_epilogue(self.ctx, prod.operands[0][0], chain)
                    elif addend is None and len(chain) > 1:
                        lanes = lane_epilogue(self.ctx, chain[0].operands[0][0], chain[1:])
                    else:
                        lanes = None
                    with self.ctx.fusing(chain[-1].operands[0][0], lanes, bias, addend):
                        em = EMITTERS[prod.kind](self.ctx, prod)
                except CodegenError:
                    continue
                fused((index[id(prod)], *(index[id(i)] for i in chain)), em.calls, "epilogue")
            for chain, keep in find_chains(self.lir, self.addr):
                if any(index[id(i)] in fused_members or _writes_nothing(i) for i in chain):
                    continue
                try:
                    em = emit_chain(self.ctx, chain, keep)
                except CodegenError:
                    continue
                fused(tuple(index[id(i)] for i in chain), em.calls, "fused")

        if MERGE_FUNCTIONS:
            alias = merge_identical_functions(self.module)
            for call in [c for ic in instrs for c in ic.calls] + [
                c for calls in fused_calls.values() for c in calls
            ]:
                call.name = alias.get(call.name, call.name)
        if relayout is not None:
            # The kernels are done: only the wrappers and the blobs' offsets read the plan now.
            wrapped = {ic.entry: ic.calls for ic in instrs if ic.entry is not None}
            self.plan = relayout(wrapped | fused_calls)
            self.addr = Addresses(self.plan)
        # Blobs (packed weights) after the plan's constant region.
        csize = align(int(self.plan.region_sizes.get(CONSTANT_REGION, 0)))
        offsets = []
        for blob in self.sink.blobs:
            offsets.append(csize)
            csize = align(csize + blob.nbytes)
        region = None
        if self.sink.region is not None:
            assert offsets == self.sink.blob_offsets and csize == self.sink.end
            owner, mem = self.sink.region
            region = (owner, mem[: max(csize, 64)])
        for ic in instrs:
            if ic.entry is not None:
                self._wrapper(ic.entry, ic.calls, offsets)
        for name, calls in fused_calls.items():
            self._wrapper(name, calls, offsets)

        # run_all
        fn = ir.Function(self.module, ir.FunctionType(VOID, [PTR] * 3), "run_all")
        for a, n in zip(fn.args, REGIONS):
            a.name = n
            a.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        order: list[tuple[int, ...]] = []
        run_entries: set[str] = set()
        for ic in instrs:
            if ic.index in fused_entry:
                callee = self.module.globals[fused_entry[ic.index]]
                b.call(callee, list(fn.args))
                order.append(next(g for g in groups if g[-1] == ic.index))
                run_entries.add(callee.name)
            elif ic.entry is not None and ic.index not in fused_members:
                b.call(self.module.globals[ic.entry], list(fn.args))
                order.append((ic.index,))
                run_entries.add(ic.entry)
        b.ret_void()
        finish_runtime(self.module)
        return Program(
            self.module,
            instrs,
            list(self.sink.blobs),
            offsets,
            csize,
            order,
            len(self.sink.kernels),
            self.entry_calls,
            frozenset(run_entries),
            region,
        )

    def _wrapper(self, name: str, calls: list[Call], blob_offsets: list[int]) -> None:
        self.entry_calls[name] = calls
        fn = ir.Function(self.module, ir.FunctionType(VOID, [PTR] * 3), name)
        for a, n in zip(fn.args, REGIONS):
            a.name = n
            a.add_attribute("noalias")
        fn.attributes.add("nounwind")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        for call in calls:
            ptrs = []
            for arg in call.args:
                if arg.scalar is not None:
                    ptrs.append(ir.Constant(ir.IntType(64), arg.scalar))
                elif arg.blob is not None:
                    ptrs.append(gep(b, fn.args[0], blob_offsets[arg.blob] + arg.offset, I8))
                else:
                    region, off, _ = self.addr.of(arg.value)
                    ptrs.append(gep(b, fn.args[region], off + arg.offset, I8))
            b.call(self.module.globals[call.name], ptrs)
        b.ret_void()


#: ``(every wrapper's kernel calls) -> the plan the wrappers address`` (``generate``).
Relayout = Callable[[Mapping[str, list[Call]]], ArenaLayout]


def generate(
    lir: LIRFunction,
    plan: ArenaLayout,
    *,
    fuse: bool = True,
    conv_strategy: str | None = None,
    constant_region: RegionAlloc | None = None,
    relayout: Relayout | None = None,
) -> Program:
    """Generate the Program (LLVM module + entries) for `lir` laid out by `plan`; with
    ``constant_region``, the packed weights are placed in a region from it (``Program.region``).

    ``relayout`` (the bundle's) is given the kernel calls of every wrapper once the kernels
    are emitted, and returns the plan the wrappers (and the blobs after its constant region)
    use instead of ``plan``. It may move constant weights only, and must keep the ones the
    calls read apart: the kernels were emitted over ``plan``, and all they learn from a plan
    is whether two of their operands overlap, which such a move does not change (a written
    operand is never a constant; two constants a kernel reads overlap in neither plan)."""
    if relayout is not None and constant_region is not None:
        raise ValueError("generate: relayout moves the constants a constant_region holds")
    return CodeGen(
        lir, plan, fuse=fuse, conv_strategy=conv_strategy, constant_region=constant_region
    ).generate(relayout)


__all__ = [
    "EPILOGUE_PRODUCERS",
    "Addresses",
    "CodeGen",
    "InstrCode",
    "Program",
    "Relayout",
    "find_chains",
    "find_epilogues",
    "generate",
]
