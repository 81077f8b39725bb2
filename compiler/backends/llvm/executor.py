"""The LLVM CPU executor: JIT-compiled kernels over the arena interpreter's arena layout.

`LLVMExecutor(lir, plan)` keeps the arena interpreter's stepping API (`reset`, `step`, `run`,
`run_to`, `pc`, `done`, `read`, `outputs`), but each `step()` calls the instruction's compiled
entry `@instr_<idx>` and `run(inputs)` calls `@run_all` once. The constant region the kernels
see is a copy of the arena's, extended with the packed weights the code generator appended.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from compiler.backends.interpreter.arena import ArenaInterpreter, NaivePlan, StepInfo
from compiler.backends.llvm.cache import ProgramInfo, program_key
from compiler.backends.llvm.codegen import Addresses, Program, generate
from compiler.backends.llvm.emitters.common import LIBM, STATUS_GLOBAL, STATUS_MESSAGES
from compiler.backends.llvm.jit import CompiledModule, JITEngine, default_engine
from compiler.backends.llvm.kernels.parallel import LIBC
from compiler.errors import CodegenError, ExecutionError
from compiler.graph.ir import Module
from compiler.limits import out_of_memory_is_an_error
from compiler.lir.ir import LIRFunction
from compiler.memory.regions import CONSTANT_REGION, ArenaLayout, align
from compiler.runtime import check_inputs, lir_io_specs, lowered

if TYPE_CHECKING:
    from compiler.memory.plan import MemoryPlan
    from compiler.pipeline import CompileResult

_symbols_done = False


#: Bytes of a transparent huge page (x86-64).
HUGE_PAGE = 2 << 20
#: The constant region's packed blobs on huge pages, the rest on small ones (see
#: ``constant_region``); False: the whole region from numpy, as before.
SPARSE_CONSTANTS = True


def constant_region(size: int, dense: int) -> tuple[Any, np.ndarray]:
    """(owner, view): ``size`` zeroed bytes, 64-byte aligned, for the extended constant region
    whose bytes from ``dense`` on (the packed blobs) are all written and read by every run,
    and those before (the plan's constants) only where a kernel reads a constant in place.

    numpy's allocation asks for 2 MiB pages everywhere: each of ResNet-50's 54 small in-place
    constants (0.1 MB) then zeroed a whole huge page across the 100 MB of weights the packed
    blobs replace (0.12 s of CPU per compile). Here the region is anonymous memory on 4 KiB
    pages, faulted in only where written, and only the blobs' part, starting on a huge-page
    boundary, asks for huge pages (on small pages the runs were 1.5% slower: the weights
    stream through the TLB)."""
    if not SPARSE_CONSTANTS:
        raw = np.zeros(size + 64, dtype=np.uint8)
        shift = (-raw.ctypes.data) % 64
        return raw, raw[shift : shift + size]
    total = size + HUGE_PAGE
    try:
        pages = mmap.mmap(-1, total, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except OSError:
        raise MemoryError(total) from None
    raw = np.frombuffer(pages, dtype=np.uint8)
    dense = min(dense, size)
    shift = (-(raw.ctypes.data + dense)) % HUGE_PAGE  # a multiple of 64: dense is aligned
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is not None and dense < size:
        try:
            pages.madvise(advice, shift + dense, total - shift - dense)
        except OSError:
            pass  # small pages: slower runs, the same results
    return pages, raw[shift : shift + size]


def ensure_libm_symbols() -> None:
    """Make the libm and libc functions generated code calls (the math fallbacks, the thread
    pool's pthread and futex calls) resolvable by the JIT."""
    global _symbols_done
    if _symbols_done:
        return
    import llvmlite.binding as llvm

    libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    libc = ctypes.CDLL(None)
    for lib, names in ((libm, LIBM), (libc, LIBC)):
        for name in names:
            llvm.add_symbol(name, ctypes.cast(getattr(lib, name), ctypes.c_void_p).value)
    _symbols_done = True


def _resolved_strategy(conv_strategy: str | None) -> str | None:
    return conv_strategy or os.environ.get("GLOWVIZ_CONV_STRATEGY") or None


def executor_key(
    lir: LIRFunction, plan: ArenaLayout, *, fuse: bool = True, conv_strategy: str | None = None
) -> str:
    """The JIT cache key of the run module ``LLVMExecutor(lir, plan, ...)`` compiles (its
    step-only module's is this plus ``-step``)."""
    strategy = _resolved_strategy(conv_strategy)
    return program_key(lir, plan, fuse=fuse, conv_strategy=strategy)


#: Stands in `LLVMExecutor._entries` for an entry of the step-only module not compiled yet.
_STEP_MODULE = object()


class LLVMExecutor(ArenaInterpreter):
    """Runs `lir` with JIT-compiled kernels over the arena laid out by `plan`."""

    kind = "llvm"

    def __init__(
        self,
        lir: LIRFunction,
        plan: ArenaLayout | None = None,
        *,
        engine: JITEngine | None = None,
        fuse: bool = True,
        check_plan: bool = True,
        conv_strategy: str | None = None,
        threads: int = 1,
    ) -> None:
        plan = plan if plan is not None else NaivePlan(lir)
        self._fuse = fuse
        self._conv_strategy = _resolved_strategy(conv_strategy)
        # Code first, the arena after: LLVM aborts the process when its own allocations fail
        # (the JIT's section memory), while numpy's arena allocation fails cleanly.
        t0 = time.perf_counter()
        self._lir_plan = (lir, plan)
        self._program: Program | None = None
        ensure_libm_symbols()
        self._engine = engine or default_engine()
        # The key covers everything the code depends on, so a hit (in memory or on disk)
        # skips the emitters: the cache entry holds what this executor reads of the program.
        self.key = executor_key(lir, plan, fuse=fuse, conv_strategy=self._conv_strategy)
        t1 = time.perf_counter()
        program = self._engine.compile_keyed(self.key, self._build_run)
        #: The program's entry was found (memory or disk): no code was generated.
        self.from_cache = program.from_cache
        self.compiled: CompiledModule = program.module
        self.info = ProgramInfo.from_json(program.extras["program"])
        self._step_compiled: CompiledModule | None = None
        self._step_names = frozenset(self.info.step_entries)
        t2 = time.perf_counter()
        # The arena's constant region is filled only if someone looks at a constant: the code
        # reads ``self.constants`` (in-place constants and packed weights) instead.
        super().__init__(lir, plan, check_plan=check_plan, lazy_constants=True)
        #: Threads the parallel loops of the kernels run on (results do not depend on it).
        self.threads = max(1, int(threads))
        generated = self._codegen_s
        self.timings = {
            "key_s": t1 - t0,
            "codegen_s": generated,
            "jit_s": t2 - t1 - generated,
            "from_disk": float(self.from_cache),
        }
        # The extended constant region: the plan's constants, then the packed blobs (already
        # in place when this executor generated them).
        if self._constants is None:
            blobs = np.frombuffer(program.extras["blobs"], dtype=np.uint8)
            self._blob_region(self.info.constant_size, self.info.blob_start)[...] = blobs
        assert self._constants is not None
        self.constants = self._constants
        # Only constants some kernel reads in place are copied (packed filters replace the rest).
        for start, data in self._constant_ranges():
            self.constants[start : start + data.size] = data
        base = self.arena.ctypes.data
        self._args: tuple[int | ctypes.c_void_p, ...] = (
            self.constants.ctypes.data,
            base + self.region_base["mutable"],
            base + self.region_base["activations"],
        )
        self._entries: list[Any] = [
            None
            if not ic.entry
            else _STEP_MODULE
            if ic.entry in self._step_names
            else self.compiled.cfunc(ic.entry)
            for ic in self.info.instrs
        ]
        self._run_all = self.compiled.cfunc("run_all")
        # What the code reports instead of trapping (integer division by zero), when it can.
        self._status: ctypes.c_int32 | None = None
        self._statuses: list[ctypes.c_int32] = []
        if self.info.has_status:
            self._status = self._status_of(self.compiled)
        self.compiled.set_threads(self.threads)
        self._args = tuple(ctypes.c_void_p(a) for a in self._args)
        # Fast path of run(inputs): the input and output views, resolved once.
        self._in_views = {w.name: self._view(w, writable=True) for w in lir.inputs()}
        self._out_views = {w.name: self._view(w, writable=False) for w in lir.outputs()}
        self._fast_in = [(n, v, v.shape, v.dtype) for n, v in self._in_views.items()]
        self._fast_out = list(self._out_views.items())
        self._one_out = self._fast_out[0] if len(self._fast_out) == 1 else None
        self._code_len = len(lir.code)

    @property
    def program(self) -> Program:
        """The generated program (its LLVM module, kernel calls and blobs). A cache hit never
        generates it: it is generated here, on first use, the same as on a miss."""
        if self._program is None:
            lir, plan = self._lir_plan
            self._program = generate(
                lir,
                plan,
                fuse=self._fuse,
                conv_strategy=self._conv_strategy,
                # After a hit the constants are in place: generating again needs no region
                # (the blobs' offsets are the same either way).
                constant_region=constant_region if self._constants is None else None,
            )
        return self._program

    _codegen_s = 0.0  # code generation time of this executor's compile (0 on a hit)

    def _build_run(self) -> tuple[str, dict[str, bytes | memoryview]]:
        """On a miss: generate the program, and what the cache entry stores beside the run
        module's object (the executor's ``ProgramInfo`` and the packed weights' bytes)."""
        t = time.perf_counter()
        program = self.program
        lir, plan = self._lir_plan
        blob_start = align(int(plan.region_sizes.get(CONSTANT_REGION, 0)))
        info = ProgramInfo.of(program, Addresses(plan), blob_start, lir.weights.values())
        if program.region is not None:
            # The packed weights are in place already (codegen.DIRECT_BLOBS).
            self._const_raw, self._constants = program.region
            region = self._constants[blob_start : program.constant_size]
        else:
            region = self._blob_region(program.constant_size, blob_start)
            for blob, off in zip(program.blobs, program.blob_offsets):
                at = off - blob_start
                region[at : at + blob.nbytes] = blob.view(np.uint8).ravel()
        run_text = program.run_text()
        self._codegen_s = time.perf_counter() - t
        return run_text, {"program": info.to_json(), "blobs": region.data}

    _constants: np.ndarray | None = None

    def _blob_region(self, constant_size: int, blob_start: int) -> np.ndarray:
        """Allocate the extended constant region (64-byte aligned, zeroed: the padding between
        packed weights is stored in the cache entry) and return its packed-weights part."""
        csize = max(constant_size, 64)
        with out_of_memory_is_an_error("for the constant region and packed weights"):
            self._const_raw, self._constants = constant_region(csize, blob_start)
        return self._constants[blob_start:constant_size]

    def _status_of(self, compiled: CompiledModule) -> ctypes.c_int32 | None:
        try:
            status = ctypes.c_int32.from_address(compiled.global_address(STATUS_GLOBAL))
        except CodegenError:  # optimized away: nothing in this module reports
            return None
        self._statuses.append(status)
        return status

    def _step_module(self) -> CompiledModule:
        """The module of the step-only entries, compiled (or loaded) on first use; on a
        cache miss of its own, the program is generated for its text."""
        if self._step_compiled is None:
            compiled = self._engine.compile_keyed(
                self.key + "-step", lambda: (self.program.step_text() or "", {})
            ).module
            if self.info.has_status:
                self._status_of(compiled)
            self._entries = [
                compiled.cfunc(ic.entry) if fn is _STEP_MODULE and ic.entry else fn
                for fn, ic in zip(self._entries, self.info.instrs)
            ]
            self._step_compiled = compiled
        return self._step_compiled

    def prepare_stepping(self) -> None:
        """Compile the step-only entries now (timing them must not include their compile)."""
        if self._step_names:
            self._step_module()

    def _entry(self, index: int) -> Any:
        fn = self._entries[index]
        if fn is _STEP_MODULE:
            self._step_module()
            fn = self._entries[index]
        return fn

    def _module_of(self, entry: str) -> CompiledModule:
        return self._step_module() if entry in self._step_names else self.compiled

    def _constant_ranges(self) -> list[tuple[int, np.ndarray]]:
        """(offset in the constant region, bytes) of every constant a kernel reads in place,
        from the weights' own data."""
        weights = list(self.lir.weights.values())
        roots: dict[int, np.ndarray] = {}
        out = []
        for off, at, inner, size in self.info.constant_reads:
            if at not in roots:
                w = weights[at]
                assert w.data is not None, w.name
                full = np.empty(w.type_.shape, dtype=w.type_.np_dtype)
                full[...] = w.data  # as the arena's fill converts it
                roots[at] = full.reshape(-1).view(np.uint8)
            out.append((off, roots[at][inner : inner + size]))
        return out

    # -- execution ------------------------------------------------------------------------------
    def _check_status(self, where: str = "") -> None:
        """Raise what the code reported during the last call (and clear it for the next)."""
        status = next((st for st in self._statuses if st.value), None)
        if status is None:
            return
        code, status.value = status.value, 0
        what = STATUS_MESSAGES.get(code, f"status {code}")
        raise ExecutionError(what + where)

    def step(self) -> StepInfo:
        if self.done:
            raise ExecutionError("the program has finished; call reset() to run it again")
        idx = self.pc
        ins = self.lir.code[idx]
        fn = self._entry(idx)
        if fn is not None:
            self._pool()
            fn(*self._args)
            self._check_status(f" in %{ins.name} ({ins.kind})")
        self.pc = idx + 1
        written = [v.name for v, m in ins.operands if m in ("out", "inout") and not ins.is_dealloc]
        return StepInfo(idx, ins, written)

    def run(
        self,
        inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray] | None = None,
        *,
        until: int | None = None,
        breakpoints: Any = None,
    ) -> Any:
        """`run(inputs)`: the whole program in one call of `@run_all`, outputs by name.
        Otherwise: continue stepping (see ArenaInterpreter.run)."""
        if inputs is not None:
            outs = self.run_fast(inputs)
            if outs is not None:
                return outs
            self.set_inputs(inputs)
            self._pool()
            self._run_all(*self._args)
            self.pc = len(self.lir.code)
            self._check_status()
            return self._copy_outputs()
        return super().run(until=until, breakpoints=breakpoints)

    def run_fast(self, inputs: Any) -> dict[str, np.ndarray] | None:
        """The whole program on a dict of exactly the input arrays by placeholder name, with
        their dtypes and shapes; None (nothing run) for anything else. Tiny models spend most
        of their time here, so it is a few attribute lookups per input and one call (plain
        loops: a comprehension is a function call of its own, ~0.3 us of LeNet's ~15)."""
        fast = self._fast_in
        if type(inputs) is not dict or len(inputs) != len(fast):
            return None
        # Each input is checked and copied in one pass: a later input that fails the check
        # leaves earlier ones written, which the slow path (set_inputs) writes again anyway.
        for name, view, shape, dtype in fast:
            a = inputs.get(name)
            if (
                type(a) is not np.ndarray
                or a.shape != shape
                or (a.dtype is not dtype and a.dtype != dtype)  # identity first: cheaper
            ):
                return None
            view[...] = a
        self._inputs_set = True
        compiled = self.compiled
        if compiled.threads != self.threads:
            compiled.set_threads(self.threads)
        self._run_all(*self._args)
        self.pc = self._code_len
        if self._status is not None and self._status.value:
            self._check_status()
        one = self._one_out
        if one is not None:  # most models: no second call, no comprehension
            try:
                return {one[0]: one[1].copy()}
            except MemoryError:
                pass  # reported by _copy_outputs
        return self._copy_outputs()

    def _copy_outputs(self) -> dict[str, np.ndarray]:
        # A plain try, not the context manager: entering a generator-based one cost ~0.7 us a
        # call, a quarter of an MLP's whole run (``run_fast`` copies a single output itself).
        try:
            return {n: v.copy() for n, v in self._fast_out}
        except MemoryError:
            with out_of_memory_is_an_error("copying the outputs"):
                raise

    def run_all(self) -> None:
        """Run the whole program on the inputs already in the arena."""
        self._pool()
        self._run_all(*self._args)
        self.pc = len(self.lir.code)
        self._check_status()

    def call_entry(self, index: int) -> None:
        """Call instruction `index`'s entry without moving `pc` (profiling)."""
        fn = self._entry(index)
        if fn is not None:
            self._pool()
            fn(*self._args)
            self._check_status()

    def set_threads(self, n: int) -> None:
        """Run the kernels' parallel loops on ``n`` threads from now on (1: the calling thread
        only). The compiled module is shared by executors of the same program in a process:
        each sets its own thread count before it runs."""
        self.threads = max(1, int(n))
        self._pool()

    def _pool(self) -> None:
        if self.compiled.threads != self.threads:
            self.compiled.set_threads(self.threads)
        step = self._step_compiled
        if step is not None and step.threads != self.threads:
            step.set_threads(self.threads)

    # -- inspection -----------------------------------------------------------------------------
    def kernels_of(self, index: int) -> list[str]:
        return list(self.info.instrs[index].kernels)

    def llvm_ir(self, index: int) -> str:
        """Optimized LLVM IR of instruction `index`'s entry and the kernels it calls."""
        ic = self.info.instrs[index]
        if ic.entry is None:
            return f"; %{self.lir.code[index].name} ({ic.kind}) generates no code\n"
        fn_ir = self._module_of(ic.entry).function_ir
        parts = [fn_ir(ic.entry) or f"; @{ic.entry} was inlined\n"]
        for k in self.kernels_of(index):
            parts.append(fn_ir(k) or f"; @{k} was inlined into @{ic.entry}\n")
        return "\n".join(parts)

    def assembly(self, index: int) -> str:
        """Host assembly of instruction `index`'s entry and the kernels it calls (generated for
        those functions alone, in a fraction of the whole module's time)."""
        ic = self.info.instrs[index]
        if ic.entry is None:
            return f"# %{self.lir.code[index].name} ({ic.kind}) generates no code\n"
        names = [ic.entry, *self.kernels_of(index)]
        asm = self._module_of(ic.entry).assembly_of(names)
        return "\n".join(asm.get(n, f"# {n}: inlined\n") for n in names)

    def strategy(self, index: int) -> str:
        return self.info.instrs[index].strategy


def _lir_and_plan(result: CompileResult | Module) -> tuple[LIRFunction, MemoryPlan | None]:
    _, lir, plan = lowered(result)
    if isinstance(result, Module) or result.lir is None:  # made now: plan it as the pipeline does
        try:
            from compiler.memory.plan import plan_memory

            plan = plan_memory(lir)
        except Exception:  # noqa: BLE001 - the naive plan is always valid
            plan = None
    return lir, plan


class LLVMModelExecutor:
    """The "llvm" entry of `compiler.executors.EXECUTORS`: a CompileResult run by LLVMExecutor."""

    kind = "llvm"

    def __init__(self, result: CompileResult | Module, **options: Any) -> None:
        lir, plan = _lir_and_plan(result)
        self.module = result if isinstance(result, Module) else result.module
        self.executor = LLVMExecutor(lir, plan, **options)
        self.lir = lir
        in_specs, out_specs, self.aliases = lir_io_specs(lir, self.module)
        self.input_names = [n for n, _ in in_specs]
        self.output_names = [n for n, _ in out_specs]
        self.input_types = dict(in_specs)
        self.output_types = dict(out_specs)
        #: The executor's outputs come in the model's output order already.
        self._in_order = list(self.executor._out_views) == self.output_names
        self._run_fast = self.executor.run_fast

    def _inputs(self, inputs: Any) -> Mapping[str, np.ndarray]:
        if (
            isinstance(inputs, Mapping)
            and not self.aliases
            and len(inputs) == len(self.input_types)
        ):
            ok = all(
                isinstance(a := inputs.get(n), np.ndarray)
                and a.dtype == t.np_dtype
                and a.shape == t.shape
                for n, t in self.input_types.items()
            )
            if ok:
                return inputs
        # Never cast silently: the one input check of every executor (dtype, shape, names).
        return check_inputs(list(self.input_types.items()), inputs, self.aliases)

    def run(self, inputs: Any) -> dict[str, np.ndarray]:
        outs = self._run_fast(inputs)
        if outs is None:
            outs = self.executor.run(self._inputs(inputs))
        if self._in_order:
            return outs
        return {n: outs[n] for n in self.output_names}


def make_llvm_executor(result: Any) -> LLVMModelExecutor:
    options = getattr(result, "options", None)
    return LLVMModelExecutor(result, threads=getattr(options, "threads", 1))


__all__ = [
    "LLVMExecutor",
    "LLVMModelExecutor",
    "ensure_libm_symbols",
    "executor_key",
    "make_llvm_executor",
]
