"""The debugger of a compile session: instruction-level stepping over a small stepping-executor
interface (LLVM primary, the arena interpreter in lock-step as the reference), breakpoints,
comparison of every step, "run to first divergence"; array helpers for the views.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compiler.backends.interpreter.arena import ArenaInterpreter
from compiler.errors import CompilerError
from compiler.lir.instructions import Kind
from compiler.lir.ir import LIRFunction, view_root
from compiler.memory.plan import MemoryPlan

if TYPE_CHECKING:
    from compiler.backends.llvm.executor import LLVMExecutor
    from glowviz.session.core import CompileSession

# ---------------------------------------------------------------------------------------------
# Debugger
# ---------------------------------------------------------------------------------------------


class SteppingExecutor:
    """What the debugger needs from an executor: `pc`, `reset(inputs)`, `step()` (returning the
    names it wrote, or None), `read(name)`. Executors that generate code (`generates_code`) add
    `llvm_ir(k)`, `assembly(k)` and `strategy(k)` for the code views. A reference executor
    also needs `write(name, data)`."""

    name = "abstract"
    generates_code = False

    @property
    def pc(self) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def reset(self, inputs: dict[str, Any]) -> None:  # pragma: no cover
        raise NotImplementedError

    def step(self) -> list[str] | None:  # pragma: no cover
        raise NotImplementedError

    def read(self, name: str) -> Any:  # pragma: no cover
        raise NotImplementedError

    def write(self, name: str, data: Any) -> None:  # pragma: no cover
        """Overwrite a buffer (the reference is re-synchronised with the executor this way)."""
        raise NotImplementedError

    def llvm_ir(self, k: int) -> str:  # pragma: no cover
        raise NotImplementedError

    def assembly(self, k: int) -> str:  # pragma: no cover
        raise NotImplementedError

    def strategy(self, k: int) -> str:  # pragma: no cover
        raise NotImplementedError


class ArenaStepper(SteppingExecutor):
    """Adapter over compiler.backends.interpreter.arena.ArenaInterpreter(lir, plan)."""

    name = "interpreter"

    def __init__(self, lir: LIRFunction, plan: MemoryPlan) -> None:
        self.interp: ArenaInterpreter = ArenaInterpreter(lir, plan)

    @property
    def pc(self) -> int:
        return int(self.interp.pc)

    def reset(self, inputs: dict[str, Any]) -> None:
        self.interp.reset(inputs)

    def step(self) -> list[str] | None:
        return list(self.interp.step().written)

    def read(self, name: str) -> Any:
        return self.interp.read(name)

    def write(self, name: str, data: Any) -> None:
        self.interp.write(name, data)


class LLVMStepper(ArenaStepper):
    """Adapter over compiler.backends.llvm.executor.LLVMExecutor: JIT-compiled kernels, one
    entry per instruction; the kernel's LLVM IR and host assembly for the code views."""

    name = "llvm"
    generates_code = True

    def __init__(self, lir: LIRFunction, plan: MemoryPlan) -> None:
        from compiler.backends.llvm.executor import LLVMExecutor

        self.interp: LLVMExecutor = LLVMExecutor(lir, plan)
        self._code: dict[tuple[str, int], str] = {}
        self._code_lock = threading.Lock()

    @property
    def timings(self) -> dict[str, float]:
        return dict(self.interp.timings)

    def code(self, kind: str, k: int) -> str:
        """`kind` "llvm" (optimized LLVM IR) or "asm" (host assembly) of instruction `k`."""
        key = (kind, k)
        with self._code_lock:
            if key not in self._code:
                ex = self.interp
                self._code[key] = ex.llvm_ir(k) if kind == "llvm" else ex.assembly(k)
            return self._code[key]

    def llvm_ir(self, k: int) -> str:
        return self.code("llvm", k)

    def assembly(self, k: int) -> str:
        return self.code("asm", k)

    def strategy(self, k: int) -> str:
        return self.interp.strategy(k)

    def kernels_of(self, k: int) -> list[str]:
        return list(self.interp.kernels_of(k))


#: Default tolerance of "run to first divergence" (numpy.allclose semantics), and the allowance
#: for accumulation: an element that sums K products may differ by ULPS * eps * sqrt(K) times
#: the sum of the absolute values of its terms (two summation orders each err by about
#: eps * sqrt(K) of that sum: measured ratios stay below 1 on ResNet-50's convolutions).
RTOL, ATOL, ULPS = 1e-4, 1e-5, 8.0

#: Ops whose kernel, run on the absolute values of the operands, gives each output element's
#: sum of absolute terms (sums of products): the scale of their accumulation error.
SUM_OF_PRODUCTS = frozenset(
    {
        "Conv",
        "ConvTranspose",
        "MatMul",
        "FullyConnected",
        "ReduceSum",
        "ReduceMean",
        "AvgPool",
        "GlobalAvgPool",
    }
)


def reduction_length(
    op: str, in_shapes: list[tuple[int, ...]], out_shape: tuple[int, ...], attrs: dict[str, Any]
) -> int:
    """How many terms each output element of `op` accumulates (1 for element-wise ops)."""
    import math

    if not in_shapes:
        return 1
    x = in_shapes[0]
    size = math.prod(x)
    if op == "Conv" and len(in_shapes) > 1:
        return max(1, math.prod(in_shapes[1][1:]))
    if op == "ConvTranspose" and len(in_shapes) > 1:
        w = in_shapes[1]
        return max(1, w[0] // max(1, int(attrs.get("group", 1))) * math.prod(w[2:]))
    if op in ("MatMul", "FullyConnected"):
        return max(1, x[-1])
    if op == "AvgPool":
        return max(1, math.prod(attrs.get("kernel_shape", ()) or (1,)))
    if op in ("Softmax", "LogSoftmax"):
        axis = int(attrs.get("axis", -1))
        return max(1, x[axis] if -len(x) <= axis < len(x) else 1)
    if op == "LayerNorm" and len(in_shapes) > 1:
        return max(1, math.prod(in_shapes[1]))
    out = math.prod(out_shape) if out_shape else 1
    if op.startswith("Reduce") or op in ("GlobalAvgPool", "GlobalMaxPool", "ArgMax", "ArgMin"):
        return max(1, size // max(1, out))
    return 1


def float_eps(dtype: Any) -> float:
    """The unit roundoff of a float dtype (0 for integers: they must match exactly)."""
    import numpy as np

    dt = np.dtype(dtype)
    return float(np.finfo(dt).eps) / 2 if dt.kind == "f" else 0.0


def full_precision(x: Any, dtype: Any = "float32") -> str:
    """Every digit a value of `dtype` holds (9 significant digits for float32), so two values
    that print alike at 3 digits show how they differ."""
    import numpy as np

    if x is None:
        return "-"
    dt = np.dtype(dtype)
    if dt.kind != "f":
        return str(int(x))
    digits = {2: 5, 4: 9, 8: 17}.get(dt.itemsize, 17)
    return f"{float(x):.{digits}g}"


def ulp_distance(a: float, b: float, dtype: Any = "float32") -> int | None:
    """How many representable values of `dtype` lie between `a` and `b` (None if not float)."""
    import numpy as np

    dt = np.dtype(dtype)
    if dt.kind != "f" or not (np.isfinite(a) and np.isfinite(b)):
        return None
    ints = {2: np.int16, 4: np.int32, 8: np.int64}[dt.itemsize]

    def ordered(v: float) -> int:
        i = int(np.array(v, dt).view(ints))
        return i if i >= 0 else -(i & ~(1 << (8 * dt.itemsize - 1)))

    return abs(ordered(a) - ordered(b))


def compare_arrays(
    got: Any,
    ref: Any,
    rtol: float = RTOL,
    atol: float = ATOL,
    allowance: Any = None,
) -> dict[str, Any]:
    """The largest absolute and relative error of `got` against `ref`, and whether they agree
    within `atol + rtol * |ref| + allowance` (NaN matches NaN; `allowance`, per element or a
    scalar, is the accumulation error a reduction may make). The relative error divides by
    max(|ref|, atol / rtol) so that values near zero do not blow it up. `worst_index` is the
    element furthest out of tolerance (the largest error when all agree), with both values."""
    import numpy as np

    a = np.asarray(got)
    b = np.asarray(ref)
    if a.shape != b.shape:
        return {
            "abs": float("inf"),
            "rel": float("inf"),
            "ok": False,
            "why": f"shape {a.shape} vs {b.shape}",
        }
    if a.size == 0:
        return {"abs": 0.0, "rel": 0.0, "ok": True}
    if a.dtype.kind not in "fiub" or b.dtype.kind not in "fiub":
        same = bool(np.array_equal(a, b))
        return {
            "abs": 0.0 if same else float("inf"),
            "rel": 0.0 if same else float("inf"),
            "ok": same,
        }
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    nan_a, nan_b = np.isnan(fa), np.isnan(fb)
    nan_mismatch = nan_a != nan_b
    both = nan_a | nan_b
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(both, 0.0, np.abs(fa - fb))
        diff = np.where(np.isnan(diff), 0.0, diff)  # inf - inf of equal infinities
        mag = np.abs(np.where(both, 0.0, fb))
        rel = diff / np.maximum(mag, atol / rtol if rtol > 0 else atol)
        tol = atol + rtol * mag
        if allowance is not None:
            tol = tol + np.asarray(allowance, np.float64)
        bad = (diff > tol) | nan_mismatch
        excess = np.where(nan_mismatch, np.inf, diff / np.maximum(tol, 1e-300))
    n_bad = int(bad.sum())
    worst = int(np.argmax(excess)) if n_bad else int(np.argmax(diff))
    tol_w = float(np.broadcast_to(tol, a.shape).flat[worst])
    out = {
        "abs": float(diff.max()),
        "rel": float(rel.max()),
        "ok": n_bad == 0,
        "n_bad": n_bad,
        "size": int(a.size),
        "worst_index": tuple(int(x) for x in np.unravel_index(worst, a.shape)),
        "got": float(fa.flat[worst]),
        "want": float(fb.flat[worst]),
        "tol": tol_w,
        "dtype": str(a.dtype),
    }
    out["ulps"] = ulp_distance(float(fa.flat[worst]), float(fb.flat[worst]), a.dtype)
    if nan_mismatch.any():
        out["why"] = f"{int(nan_mismatch.sum())} NaN mismatches"
    return out


class Debugger:
    """Instruction-level stepping with breakpoints (by index, by op kind, on writes to a buffer).

    The primary executor is the LLVM one (the product's); the arena interpreter runs in
    lock-step as the reference, so every step can be compared and "run to first divergence"
    works. If LLVM code generation fails with a CompilerError, the interpreter is the primary
    (`fallback_error` says why) and there is no reference.
    """

    def __init__(
        self,
        session: CompileSession,
        executor: SteppingExecutor | None = None,
        reference: SteppingExecutor | None = None,
    ) -> None:
        self.session = session
        self.instrs = session.instructions()
        self.breakpoints: set[int] = set()
        self.op_breakpoints: set[str] = set()
        self.write_breakpoints: set[str] = set()
        self.last_written: list[str] = []
        self.last_index: int | None = None  # the instruction executed by the last step
        self.comparison: list[dict[str, Any]] | None = None  # of last_index, vs the reference
        self.divergence: dict[str, Any] | None = None
        self.stop_reason = ""
        self.reason_unavailable: str | None = None
        self.fallback_error: str | None = None  # LLVM codegen failed: the interpreter runs
        self.rtol, self.atol, self.ulps = RTOL, ATOL, ULPS
        #: Copy what the executor wrote into the reference after every step, so each
        #: instruction is compared on identical inputs (its own error, not the accumulated
        #: drift of everything before it).
        self.resync = True
        #: Buffers whose statistics are shown after every step (gdb's `display`).
        self.watches: list[str] = []
        self._pre: dict[str, Any] = {}  # inputs of the instruction stepped, when it is in place
        self.executor = executor
        self.reference = reference
        self._roots = self._buffer_roots()
        if self.executor is None and session.executor_factory is not None:
            self.executor = session.executor_factory(session)
            if self.reference is None and session.reference_factory is not None:
                self.reference = session.reference_factory(session)
        if self.executor is None:
            self._make_executors()
        if self.executor is not None:
            self.restart()

    def _make_executors(self) -> None:
        result = self.session.result
        if result is None or result.lir is None or result.plan is None:
            self.reason_unavailable = self.session.unavailable("low-level IR / memory plan")
            return
        try:
            self.executor = LLVMStepper(result.lir, result.plan)
        except CompilerError as e:  # no kernel for an instruction: the interpreter steps alone
            self.fallback_error = f"{type(e).__name__}: {e}"
        interp = ArenaStepper(result.lir, result.plan)
        if self.executor is None:
            self.executor = interp
        else:
            self.reference = interp

    def _buffer_roots(self) -> dict[str, str]:
        """Operand name -> the buffer it lives in (tensorviews resolve to their source)."""
        result = self.session.result
        lir = result.lir if result is not None else None
        if lir is None:
            return {}
        return {v.name: view_root(v)[0].name for ins in lir.code for v, _ in ins.operands}

    @property
    def available(self) -> bool:
        return self.executor is not None

    @property
    def executor_name(self) -> str:
        return self.executor.name if self.executor is not None else "?"

    @property
    def has_code(self) -> bool:
        """Whether the executor can show generated code (LLVM IR, assembly)."""
        return self.executor is not None and self.executor.generates_code

    def code(self, kind: str, k: int) -> str:
        """LLVM IR ("llvm") or assembly ("asm") of instruction `k` (may take a moment)."""
        if not self.has_code:
            why = self.fallback_error or f"the {self.executor_name} executor generates no code"
            return f"; no generated code: {why}\n"
        assert self.executor is not None
        return self.executor.llvm_ir(k) if kind == "llvm" else self.executor.assembly(k)

    def strategy(self, k: int) -> str:
        """The kernel strategy of instruction `k` ("" when the executor generates no code)."""
        return self.executor.strategy(k) if self.executor is not None and self.has_code else ""

    @property
    def pc(self) -> int:
        return self.executor.pc if self.executor else 0

    @property
    def finished(self) -> bool:
        return self.pc >= len(self.instrs)

    def inputs(self) -> dict[str, Any]:
        """The sample model's recorded input (`<model>.input.npz`), else seeded random data."""
        import numpy as np

        p = Path(self.session.model_path)
        npz = p.with_name(p.stem + ".input.npz")
        if npz.exists():
            with np.load(npz) as f:
                return {k: f[k] for k in f.files}
        rng = np.random.default_rng(0)
        out = {}
        result = self.session.result
        for ph in result.module.inputs() if result is not None else []:
            out[ph.name] = rng.standard_normal(ph.type.shape).astype(ph.type.np_dtype)
        return out

    def restart(self) -> None:
        assert self.executor is not None
        inputs = self.inputs()
        self.executor.reset(inputs)
        if self.reference is not None:
            self.reference.reset(inputs)
        self.last_written, self.stop_reason = [], "restarted"
        self.last_index, self.comparison, self.divergence = None, None, None

    def toggle_breakpoint(self, index: int) -> bool:
        if index in self.breakpoints:
            self.breakpoints.discard(index)
            return False
        self.breakpoints.add(index)
        return True

    def _writes(self, k: int) -> list[str]:
        if k >= len(self.instrs) or self.instrs[k]["kind"] == Kind.DEALLOC:
            return []
        return [n for n, m in self.instrs[k]["operands"] if "out" in m]

    def written_buffers(self, names: list[str] | None = None) -> list[str]:
        """The buffers (tensorviews resolved) behind `names` (default: the last step's writes)."""
        names = self.last_written if names is None else names
        return list(dict.fromkeys(self._roots.get(n, n) for n in names))

    def step(self, compare: bool = True) -> None:
        if self.executor is None or self.finished:
            self.stop_reason = "finished" if self.executor else "unavailable"
            return
        k = self.pc
        self._pre = self._inputs_before(k) if compare and self.reference is not None else {}
        written = self.executor.step()
        if self.reference is not None and self.reference.pc == k:
            self.reference.step()
        self.last_index = k
        self.last_written = list(written) if written is not None else self._writes(k)
        self.comparison = self.compare(k) if compare else None
        if self.resync and self.reference is not None and self.reference.pc == self.pc:
            for n in self.last_written:
                try:
                    self.reference.write(n, self.executor.read(n))
                except Exception:  # noqa: BLE001 - a value the reference cannot hold: skip it
                    pass
        self.stop_reason = f"stepped {self.instrs[k]['name'] if k < len(self.instrs) else k}"

    def _instruction(self, k: int) -> Any:
        result = self.session.result
        lir = result.lir if result is not None else None
        return lir.code[k] if lir is not None and k < len(lir.code) else None

    def _inputs_before(self, k: int) -> dict[str, Any]:
        """The inputs of a sum of products that writes over one of them (an accumulation into
        its destination, an in-place op), copied before it runs: its error bound needs them."""
        ins = self._instruction(k)
        if ins is None or ins.graph_op not in SUM_OF_PRODUCTS:
            return {}
        ops = self.instrs[k]["operands"]
        outs = {self._roots.get(n, n) for n, m in ops if "out" in m}
        if not any(m == "inout" or self._roots.get(n, n) in outs for n, m in ops if "in" in m):
            return {}
        assert self.reference is not None
        return {n: self.reference.read(n) for n, m in ops if "in" in m}

    def _accumulation_bound(self, k: int, name: str, ref: Any) -> tuple[Any, str]:
        """(per-element allowance, how it was derived) for output `name` of instruction `k`:
        ULPS * eps * sqrt(K) * the sum of the absolute terms of each element (the reference
        kernel run on the operands' absolute values), or * |ref| for ops that are not sums of
        products."""
        import math

        import numpy as np

        eps = float_eps(np.asarray(ref).dtype)
        ins = self._instruction(k)
        if ins is None or eps == 0.0 or ins.graph_op is None:
            return 0.0, ""
        ops = self.instrs[k]["operands"]
        in_names = [n for n, m in ops if m == "in"]
        read = (lambda n: self._pre[n]) if self._pre else self.reference.read  # type: ignore[union-attr]
        try:
            shapes = [tuple(np.shape(read(n))) for n in in_names]
        except Exception:  # noqa: BLE001
            return 0.0, ""
        K = reduction_length(ins.graph_op, shapes, tuple(np.shape(ref)), dict(ins.attrs))
        scale = self.ulps * eps * math.sqrt(K)
        if ins.graph_op not in SUM_OF_PRODUCTS:
            mag = np.abs(np.asarray(ref, np.float64))
            if K > 1:  # a normalisation: its error scales with the largest value it sums
                mag = np.full_like(mag, float(mag.max()) if mag.size else 0.0)
            return scale * mag, f"K={K}, {self.ulps:g} ulp x sqrt(K) x |value|"
        from compiler.kernels.reference import KERNELS

        attrs = dict(ins.attrs)
        if "activation" in attrs:  # the bound of the sum itself, before any epilogue
            attrs["activation"], attrs["act_args"] = "none", []
        try:
            absolute = [np.abs(np.asarray(read(n), np.float64)) for n in in_names]
            bound = np.abs(np.asarray(KERNELS[ins.graph_op](absolute, attrs)[0], np.float64))
            for n, m in ops:
                if m == "inout" and n in self._pre:
                    bound = bound + np.abs(np.asarray(self._pre[n], np.float64))
        except Exception:  # noqa: BLE001 - no bound: fall back to the values themselves
            bound = np.abs(np.asarray(ref, np.float64))
        if bound.shape != np.shape(ref):
            bound = np.broadcast_to(bound, np.shape(ref)) if bound.size == 1 else np.abs(ref)
        return scale * bound, f"K={K}, {self.ulps:g} ulp x sqrt(K) x sum |terms|"

    def compare(self, k: int | None = None) -> list[dict[str, Any]] | None:
        """Each buffer instruction `k` (default: the last executed) wrote: the executor's value
        against the reference's, within rtol/atol plus the accumulation allowance of the
        instruction (`_accumulation_bound`). None without a reference or when the reference is
        not at the same point."""
        k = self.last_index if k is None else k
        if self.reference is None or k is None or self.reference.pc != self.pc:
            return None
        names = self.last_written if k == self.last_index else self._writes(k)
        out = []
        for n in names:
            row: dict[str, Any] = {"name": n}
            try:
                got, ref = self.executor.read(n), self.reference.read(n)  # type: ignore[union-attr]
                row.update(compare_arrays(got, ref, self.rtol, self.atol))
                if not row["ok"] and "why" not in row:
                    allowance, how = self._accumulation_bound(k, n, ref)
                    row.update(compare_arrays(got, ref, self.rtol, self.atol, allowance))
                    row["allowance"] = how
                row["ref_stats"] = array_stats(ref)
            except Exception as e:  # noqa: BLE001
                row.update({"ok": True, "error": f"{type(e).__name__}: {e}"})
            out.append(row)
        return out

    def tolerance_text(self) -> str:
        mode = "per instruction" if self.resync else "accumulated"
        return f"rtol {self.rtol:g}, atol {self.atol:g}, {self.ulps:g} ulp x sqrt(K); {mode}"

    def set_tolerance(
        self, rtol: float | None = None, atol: float | None = None, ulps: float | None = None
    ) -> None:
        if rtol is not None:
            self.rtol = float(rtol)
        if atol is not None:
            self.atol = float(atol)
        if ulps is not None:
            self.ulps = float(ulps)

    def _hits(self, k: int) -> str | None:
        if k in self.breakpoints:
            return f"breakpoint at #{k}"
        ins = self.instrs[k]
        if ins["kind"] in self.op_breakpoints:
            return f"breakpoint on op {ins['kind']}"
        hit = set(self.written_buffers(self._writes(k))) & self.write_breakpoints
        hit |= set(self._writes(k)) & self.write_breakpoints
        if hit:
            return f"breakpoint on write to {', '.join(sorted(hit))}"
        return None

    def cont(self) -> None:
        """Run until a breakpoint (not the one we stand on) or the end."""
        if self.executor is None:
            return
        first = True
        while not self.finished:
            if not first:
                why = self._hits(self.pc)
                if why:
                    self.comparison = self.compare()
                    self.stop_reason = why
                    return
            first = False
            self.step(compare=False)
        self.comparison = self.compare()
        self.stop_reason = "finished"

    def run_to_divergence(self, rtol: float | None = None, atol: float | None = None) -> bool:
        """Step executor and reference together until an instruction's output differs beyond
        the tolerance; stop right after it. True if a divergence was found."""
        if self.executor is None:
            return False
        if self.reference is None:
            self.stop_reason = "no reference executor to compare with"
            return False
        self.set_tolerance(rtol, atol)
        n = 0
        self.divergence = None
        while not self.finished:
            self.step(compare=True)
            n += 1
            bad = [r for r in self.comparison or [] if not r.get("ok", True)]
            if bad:
                k = self.last_index
                assert k is not None
                worst = max(bad, key=lambda r: r.get("n_bad", 0))
                self.divergence = {"index": k, "name": self.instrs[k]["name"], **worst}
                self.stop_reason = f"diverged at #{k} {self.instrs[k]['kind']}: " + (
                    divergence_text(worst, self.executor_name, self.reference.name)
                )
                return True
        self.stop_reason = f"no divergence, {n} instructions ({self.tolerance_text()})"
        return False

    def operands(self, k: int | None = None) -> list[dict[str, Any]]:
        """The operands of instruction `k` (default: current) with offset, shape and stats."""
        import numpy as np

        k = self.pc if k is None else k
        if k >= len(self.instrs):
            return []
        report = self.session.memory_report()
        out = []
        ops = self.instrs[k]["operands"] or [(self.instrs[k]["name"], "def")]
        for name, mode in ops:
            b = None
            if report is not None:
                b = report.buffer(name) or report.buffer(self._roots.get(name, name))
            row: dict[str, Any] = {
                "name": name,
                "mode": mode,
                "offset": b.offset if b is not None else None,
                "size": b.size if b is not None else None,
            }
            try:
                arr = np.asarray(self.executor.read(name)) if self.executor else None
            except Exception as e:  # noqa: BLE001
                arr, row["error"] = None, str(e)
            if arr is not None:
                row.update(array_stats(arr))
                row["array"] = arr
            out.append(row)
        return out

    # -- watches ------------------------------------------------------------------------------
    def add_watch(self, name: str) -> str:
        """Watch buffer `name` (a leading % is dropped); returns the name watched. Raises
        KeyError for a name the program does not have."""
        name = name.strip().lstrip("%")
        known = {n for ins in self.instrs for n, _ in ins["operands"]} | set(self._roots)
        if name not in known:
            raise KeyError(name)
        if name not in self.watches:
            self.watches.append(name)
        return name

    def watch_rows(self) -> list[dict[str, Any]]:
        """min/max/mean/NaN/Inf of every watched buffer now (and whether it is live)."""
        report = self.session.memory_report()
        out = []
        for name in self.watches:
            row: dict[str, Any] = {"name": name}
            b = report.buffer(self._roots.get(name, name)) if report is not None else None
            if b is not None:
                last = self.last_index if self.last_index is not None else -1
                row["live"] = b.first <= max(last, 0) <= b.last or b.first <= self.pc <= b.last
            try:
                row.update(array_stats(self.executor.read(name)))  # type: ignore[union-attr]
            except Exception as e:  # noqa: BLE001
                row["error"] = f"{type(e).__name__}: {e}"
            out.append(row)
        return out


def divergence_text(r: dict[str, Any], name: str, ref_name: str) -> str:
    """One line on a failed comparison: how many elements, the worst with every digit."""
    dt = r.get("dtype", "float32")
    idx = ",".join(str(i) for i in r.get("worst_index", ()))
    s = (
        f"%{r['name']} {r.get('n_bad', '?'):,} of {r.get('size', '?'):,} elements beyond "
        f"tolerance; worst [{idx}]: {name} {full_precision(r.get('got'), dt)} vs {ref_name} "
        f"{full_precision(r.get('want'), dt)} (diff {abs(r['got'] - r['want']):.3g} > "
        f"tol {r.get('tol', 0):.3g}"
    )
    if r.get("ulps") is not None:
        s += f", {r['ulps']:,} ulp"
    return s + ")" + (f" ({r['why']})" if r.get("why") else "")


def array_stats(arr: Any) -> dict[str, Any]:
    import numpy as np

    a = np.asarray(arr)
    out: dict[str, Any] = {"shape": tuple(a.shape), "dtype": str(a.dtype)}
    if a.size and a.dtype.kind == "f":
        # in the array's own precision (min and max are exact; the mean sums in float64):
        # a float64 copy of a 1x64x112x112 activation was ~25 ms of the debugger's frame
        out["nan"] = int(np.isnan(a).sum())
        out["inf"] = int(np.isinf(a).sum())
        fv = a if out["nan"] + out["inf"] == 0 else a[np.isfinite(a)]
        if fv.size:
            out["min"], out["max"] = float(fv.min()), float(fv.max())
            out["mean"] = float(fv.mean(dtype=np.float64))
    elif a.size and a.dtype.kind in "iub":
        f = a.astype(np.float64, copy=False)
        finite = np.isfinite(f)
        out["nan"] = int(np.isnan(f).sum())
        out["inf"] = int(np.isinf(f).sum())
        if finite.any():
            fv = f[finite]
            out["min"], out["max"], out["mean"] = float(fv.min()), float(fv.max()), float(fv.mean())
    return out


def slice_2d(arr: Any, max_rows: int = 8, max_cols: int = 8) -> list[list[float]]:
    """A 2-D slice of an array for display: the last two dims at index 0 of the rest."""
    return slice_view(arr, rows=max_rows, cols=max_cols)["values"]


def default_axes(shape: tuple[int, ...]) -> tuple[int, int]:
    """The slice's default axes: the last two (a vector is one row)."""
    n = len(shape)
    return (max(0, n - 2), max(0, n - 1)) if n >= 2 else (0, 0)


def slice_view(
    arr: Any,
    axes: tuple[int, int] | None = None,
    index: tuple[int, ...] | None = None,
    rows: int = 8,
    cols: int = 8,
    centre: bool = False,
) -> dict[str, Any]:
    """A window of `rows` x `cols` values of `arr` over two `axes`, the other axes fixed at
    `index` (which also gives the window's first row and column, or its centre). Returns the
    values, the row and column indices shown, the axes and the index used."""
    import numpy as np

    a = np.asarray(arr)
    if a.ndim == 0:
        a = a.reshape(1, 1)
    elif a.ndim == 1:  # a vector is one row
        a = a.reshape(1, -1)
        index = None if index is None else (0, *index)
        axes = (0, 1)
    ra, ca = axes if axes is not None else default_axes(a.shape)
    if ra == ca or not (0 <= ra < a.ndim and 0 <= ca < a.ndim):
        ra, ca = default_axes(a.shape)
    idx = [0] * a.ndim if index is None else [int(x) for x in index][: a.ndim]
    idx += [0] * (a.ndim - len(idx))
    idx = [min(max(0, x), a.shape[d] - 1) for d, x in enumerate(idx)]

    def window(axis: int, n: int) -> range:
        size = a.shape[axis]
        start = idx[axis] - n // 2 if centre else idx[axis]
        start = max(0, min(start, size - n))
        return range(start, min(size, start + n))

    r_rng, c_rng = window(ra, rows), window(ca, cols)
    sel: list[Any] = list(idx)
    sel[ra] = slice(r_rng.start, r_rng.stop)
    sel[ca] = slice(c_rng.start, c_rng.stop)
    block = a[tuple(sel)]
    if ra > ca:
        block = block.T
    return {
        "values": np.asarray(block).reshape(len(r_rng), len(c_rng)).tolist(),
        "rows": list(r_rng),
        "cols": list(c_rng),
        "axes": (ra, ca),
        "index": tuple(idx),
        "shape": tuple(a.shape),
    }


def parse_slice(spec: str, shape: tuple[int, ...]) -> tuple[tuple[int, int], tuple[int, ...]]:
    """`[0, :, 5, 10:]` -> axes (1, 3) and index (0, 0, 5, 10): two `:` pick the row and
    column axes (an optional start before the colon), integers fix the other axes. Raises
    ValueError with a readable message."""
    parts = [p.strip() for p in spec.strip().strip("[]").split(",")]
    if len(parts) != len(shape):
        raise ValueError(f"give {len(shape)} indices for shape {list(shape)}, got {len(parts)}")
    axes, index = [], []
    for d, p in enumerate(parts):
        if ":" in p:
            axes.append(d)
            start = p.split(":", 1)[0].strip()
            index.append(int(start) if start else 0)
        else:
            try:
                index.append(int(p))
            except ValueError:
                raise ValueError(f"'{p}' is neither an integer nor a ':'") from None
        if not 0 <= index[-1] < shape[d]:
            raise ValueError(f"index {index[-1]} is out of 0..{shape[d] - 1} on axis {d}")
    if len(shape) >= 2 and len(axes) != 2:
        raise ValueError("mark exactly two axes with ':' (rows, then columns)")
    if len(shape) == 1:
        axes = [0, 0]
    return (axes[0], axes[1]), tuple(index)


def slice_spec(axes: tuple[int, int], index: tuple[int, ...]) -> str:
    """The text `parse_slice` reads back for a slice."""
    parts = []
    for d, x in enumerate(index):
        parts.append((f"{x}:" if x else ":") if d in axes else str(x))
    return "[" + ", ".join(parts) + "]"
