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
    `llvm_ir(k)`, `assembly(k)` and `strategy(k)` for the code views."""

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


#: Default tolerance of "run to first divergence" (numpy.allclose semantics).
RTOL, ATOL = 1e-4, 1e-5


def compare_arrays(got: Any, ref: Any, rtol: float = RTOL, atol: float = ATOL) -> dict[str, Any]:
    """The largest absolute and relative error of `got` against `ref`, and whether they agree
    within `atol + rtol * |ref|` (NaN matches NaN). The relative error divides by
    max(|ref|, atol / rtol) so that values near zero do not blow it up; rel <= rtol implies
    agreement."""
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
    nan_mismatch = int((nan_a != nan_b).sum())
    both = nan_a | nan_b
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(both, 0.0, np.abs(fa - fb))
        diff = np.where(np.isnan(diff), 0.0, diff)  # inf - inf of equal infinities
        mag = np.abs(np.where(both, 0.0, fb))
        rel = diff / np.maximum(mag, atol / rtol if rtol > 0 else atol)
        bad = diff > atol + rtol * mag
    worst = int(np.argmax(diff))
    out = {
        "abs": float(diff.max()),
        "rel": float(rel.max()),
        "ok": not bool(bad.any()) and nan_mismatch == 0,
        "n_bad": int(bad.sum()) + nan_mismatch,
        "size": int(a.size),
        "worst_index": tuple(int(x) for x in np.unravel_index(worst, a.shape)),
        "got": float(fa.flat[worst]),
        "want": float(fb.flat[worst]),
    }
    if nan_mismatch:
        out["why"] = f"{nan_mismatch} NaN mismatches"
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
        self.rtol, self.atol = RTOL, ATOL
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
        written = self.executor.step()
        if self.reference is not None and self.reference.pc == k:
            self.reference.step()
        self.last_index = k
        self.last_written = list(written) if written is not None else self._writes(k)
        self.comparison = self.compare(k) if compare else None
        self.stop_reason = f"stepped {self.instrs[k]['name'] if k < len(self.instrs) else k}"

    def compare(self, k: int | None = None) -> list[dict[str, Any]] | None:
        """Each buffer instruction `k` (default: the last executed) wrote: the executor's value
        against the reference's, with the largest absolute and relative error. None without a
        reference or when the reference is not at the same point."""
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
                row["ref_stats"] = array_stats(ref)
            except Exception as e:  # noqa: BLE001
                row.update({"ok": True, "error": f"{type(e).__name__}: {e}"})
            out.append(row)
        return out

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
        if rtol is not None:
            self.rtol = rtol
        if atol is not None:
            self.atol = atol
        n = 0
        self.divergence = None
        while not self.finished:
            self.step(compare=True)
            n += 1
            bad = [r for r in self.comparison or [] if not r.get("ok", True)]
            if bad:
                k = self.last_index
                assert k is not None  # a step just ran
                worst = max(bad, key=lambda r: r["abs"])
                self.divergence = {"index": k, "name": self.instrs[k]["name"], **worst}
                self.stop_reason = (
                    f"diverged at #{k} {self.instrs[k]['kind']}: "
                    f"%{worst['name']} abs {worst['abs']:.3g} "
                    f"rel {worst['rel']:.3g} "
                    f"(rtol {self.rtol:g}, atol {self.atol:g})"
                )
                return True
        self.stop_reason = (
            f"no divergence, {n} instructions (rtol {self.rtol:g}, atol {self.atol:g})"
        )
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


def array_stats(arr: Any) -> dict[str, Any]:
    import numpy as np

    a = np.asarray(arr)
    out: dict[str, Any] = {"shape": tuple(a.shape), "dtype": str(a.dtype)}
    if a.size and a.dtype.kind in "fiub":
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
    import numpy as np

    a = np.asarray(arr)
    while a.ndim > 2:
        a = a[0]
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim == 0:
        a = a.reshape(1, 1)
    return a[:max_rows, :max_cols].tolist()
