"""The arena interpreter (pipeline step 11, reference backend): runs the low-level IR instruction
by instruction over ONE byte arena laid out exactly as the memory plan says.

Every operand is a numpy view at its planned offset (tensorviews resolve through their source),
so a wrong plan gives wrong numbers. Compute instructions call the reference kernels; `poison`
fills activations with NaN (or 0x7F bytes) at allocactivation and deallocactivation, so any read
of a dead buffer shows up in the outputs. Stepping API for the IDE: `reset`, `step`, `run`,
`run_to`, `pc`, `done`, `read`, `outputs`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, overload

import numpy as np

from compiler.errors import CompilerError, ExecutionError
from compiler.graph.activations import NONE
from compiler.limits import format_size, out_of_memory_is_an_error
from compiler.lir.instructions import Kind
from compiler.lir.ir import Instruction, LIRFunction, LValue, view_root
from compiler.lir.printer import format_instruction
from compiler.memory.regions import (
    ACTIVATION_REGION,
    ALIGNMENT,
    CONSTANT_REGION,
    MUTABLE_REGION,
    REGIONS,
    ArenaLayout,
    align,
)
from compiler.runtime import check_inputs, lir_io_specs, lowered

if TYPE_CHECKING:
    from compiler.graph.ir import Module
    from compiler.pipeline import CompileResult

Breakpoint = int | Callable[[int, Instruction], bool]


@dataclass
class StepInfo:
    """What one `step()` did: the instruction index, the instruction, the buffers it wrote."""

    index: int
    instruction: Instruction
    written: list[str] = field(default_factory=list)


class NaivePlan:
    """A no-reuse memory plan: every weight and activation in its own aligned slot.

    The fallback when the compile result carries no plan, and the baseline in tests. Same
    interface as the memory planner's plan: `alignment`, `region_sizes`, `offset_of(name)`.
    """

    def __init__(self, lir: LIRFunction, alignment: int = ALIGNMENT) -> None:
        self.alignment = alignment
        self.offsets: dict[str, tuple[str, int]] = {}
        sizes = dict.fromkeys(REGIONS, 0)
        for w in lir.weights.values():
            region = CONSTANT_REGION if w.is_constant else MUTABLE_REGION
            self.offsets[w.name] = (region, sizes[region])
            sizes[region] += align(w.type_.size_bytes, alignment)
        for ins in lir.code:
            if ins.is_alloc:
                assert ins.type is not None
                self.offsets[ins.name] = (ACTIVATION_REGION, sizes[ACTIVATION_REGION])
                sizes[ACTIVATION_REGION] += align(ins.type.size_bytes, alignment)
        self.region_sizes = sizes

    def offset_of(self, name: str) -> tuple[str, int]:
        return self.offsets[name]


class ArenaInterpreter:
    """Executes `lir` over one numpy byte arena laid out by `plan` (see module docstring)."""

    def __init__(
        self,
        lir: LIRFunction,
        plan: ArenaLayout | None = None,
        *,
        poison: bool = False,
        check_plan: bool = True,
        lazy_constants: bool = False,
    ) -> None:
        self.lir = lir
        self.plan: ArenaLayout = plan if plan is not None else NaivePlan(lir)
        self.poison = poison
        self.alignment = self.plan.alignment
        sizes = self.plan.region_sizes
        self.region_base: dict[str, int] = {}
        total = 0
        for r in REGIONS:
            self.region_base[r] = total
            total += align(int(sizes.get(r, 0)), self.alignment)
        self.region_end = {r: self.region_base[r] + int(sizes.get(r, 0)) for r in REGIONS}
        with out_of_memory_is_an_error(f"for the {format_size(total)} arena of the memory plan"):
            self._raw = np.zeros(total + self.alignment, dtype=np.uint8)
        shift = (-self._raw.ctypes.data) % self.alignment
        #: The arena: one aligned byte buffer holding all three regions.
        self.arena: np.ndarray = self._raw[shift : shift + total]
        self._views: dict[tuple[int, bool], np.ndarray] = {}
        self._check_plan = check_plan
        #: Every instruction's operand views, made on the first step.
        self._ops: list[list[np.ndarray]] | None = None
        for w in lir.weights.values():
            if w.is_constant and w.data is None:
                raise ExecutionError(
                    f"constant weight %{w.name} has no data (elided); "
                    "parse IR printed with_data=True to execute it"
                )
        self._constants_filled = False
        if lazy_constants:
            for ins in lir.code:
                for v, _ in ins.operands:
                    self._placed(v)  # the plan's bounds are checked up front all the same
        else:
            self._fill_constants()
            self._ops = [
                [self._view(v, writable=m != "in") for v, m in ins.operands] for ins in lir.code
            ]
        self.pc = 0
        self._last_inputs: dict[str, np.ndarray] | None = None

    # -- layout ---------------------------------------------------------------------------------
    def address_of(self, value: LValue) -> tuple[str, int]:
        """(region, byte offset inside the arena) of a weight, allocation or view."""
        root, off = view_root(value)
        try:
            region, base = self.plan.offset_of(root.name)
        except (KeyError, CompilerError):
            raise ExecutionError(f"the memory plan has no offset for %{root.name}") from None
        return region, self.region_base[region] + int(base) + off

    def _placed(self, value: LValue) -> tuple[str, int]:
        """``address_of(value)``, checked against its region's end (``check_plan``)."""
        t = value.type
        assert t is not None, value.name
        region, start = self.address_of(value)
        if self._check_plan and start + t.size_bytes > self.region_end[region]:
            raise ExecutionError(
                f"%{value.name} ({t}) at byte {start} overruns the {region} "
                f"region (ends at {self.region_end[region]})"
            )
        return region, start

    def _fill_constants(self) -> None:
        """The constant weights' data into the arena (with ``lazy_constants``: on the first
        view of a constant; the LLVM executor's code reads its own copy, so a run that never
        looks at a weight never pays for writing ResNet-50's 100 MB here)."""
        if self._constants_filled:
            return
        self._constants_filled = True
        for w in self.lir.weights.values():
            if w.is_constant:
                self._view(w, writable=True)[...] = w.data

    def _view(self, value: LValue, *, writable: bool) -> np.ndarray:
        key = (id(value), writable)
        if key in self._views:
            return self._views[key]
        t = value.type
        assert t is not None, value.name
        region, start = self._placed(value)
        if region == CONSTANT_REGION and not self._constants_filled:
            self._fill_constants()
        arr = np.ndarray(t.shape, dtype=t.np_dtype, buffer=self.arena, offset=start)
        if not writable:
            arr.flags.writeable = False
        self._views[key] = arr
        return arr

    # -- state ----------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.pc >= len(self.lir.code)

    def reset(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray] | None = None) -> None:
        """Back to instruction 0: activations cleared (poisoned), outputs zeroed, inputs written."""
        self.pc = 0
        act0, act1 = self.region_base[ACTIVATION_REGION], self.region_end[ACTIVATION_REGION]
        if self.poison:
            self.arena[act0:act1] = 0
            for ins in self.lir.code:
                if ins.is_alloc:
                    self._poison(ins)
        else:
            self.arena[act0:act1] = 0
        for w in self.lir.outputs():
            self._view(w, writable=True)[...] = 0
        if inputs is not None:
            self.set_inputs(inputs)
        elif self._last_inputs is not None:
            self.set_inputs(self._last_inputs)  # the program may have overwritten them

    def set_inputs(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> None:
        """Write the inputs (a dict by weight name or a list in declaration order), checked by
        `compiler.runtime.check_inputs`: names, element types and shapes must match."""
        specs, _, _ = lir_io_specs(self.lir)
        bound = check_inputs(specs, inputs)
        for name, a in bound.items():
            self._view(self.lir.weights[name], writable=True)[...] = a
        self._last_inputs = {n: a.copy() for n, a in bound.items()}

    def _poison(self, buf: LValue) -> None:
        v = self._view(buf, writable=True)
        if v.dtype.kind == "f":
            v[...] = np.nan
        else:
            v.reshape(-1).view(np.uint8)[...] = 0x7F

    # -- execution ------------------------------------------------------------------------------
    def step(self) -> StepInfo:
        """Execute the instruction at `pc` and advance."""
        if self.done:
            raise ExecutionError("the program has finished; call reset() to run it again")
        idx = self.pc
        ins = self.lir.code[idx]
        try:
            if self._ops is None:
                self._ops = [
                    [self._view(v, writable=m != "in") for v, m in i.operands]
                    for i in self.lir.code
                ]
            self._execute(ins, self._ops[idx])
        except ExecutionError:
            raise
        except Exception as e:  # noqa: BLE001 - wrap any kernel failure with the instruction
            raise ExecutionError(
                f"instruction {idx} failed: {format_instruction(ins)}: {type(e).__name__}: {e}"
            ) from e
        self.pc = idx + 1
        written = [v.name for v, m in ins.operands if m in ("out", "inout") and not ins.is_dealloc]
        return StepInfo(idx, ins, written)

    @overload
    def run(
        self,
        inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray],
        *,
        until: int | None = None,
        breakpoints: Iterable[Breakpoint] | None = None,
    ) -> dict[str, np.ndarray]: ...

    @overload
    def run(
        self,
        inputs: None = None,
        *,
        until: int | None = None,
        breakpoints: Iterable[Breakpoint] | None = None,
    ) -> StepInfo | None: ...

    def run(
        self,
        inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray] | None = None,
        *,
        until: int | None = None,
        breakpoints: Iterable[Breakpoint] | None = None,
    ) -> dict[str, np.ndarray] | StepInfo | None:
        """Two uses.

        `run(inputs)`: reset, run the whole program, return the outputs by name (executors).
        `run(until=None, breakpoints=...)`: continue from `pc` until the end, index `until`, or a
        breakpoint (an index, or `fn(index, instruction) -> bool`) is reached; the instruction
        there is not executed. Returns the last StepInfo (None if nothing ran).
        """
        if inputs is not None:
            self.reset(inputs)
            while not self.done:
                self.step()
            return self.outputs()
        idxs = {b for b in (breakpoints or ()) if isinstance(b, int)}
        preds = [b for b in (breakpoints or ()) if callable(b)]
        last: StepInfo | None = None
        first = True
        while not self.done:
            if until is not None and self.pc >= until:
                break
            if not first and (
                self.pc in idxs or any(p(self.pc, self.lir.code[self.pc]) for p in preds)
            ):
                break
            last = self.step()
            first = False
        return last

    def run_to(self, index: int) -> StepInfo | None:
        """Stop with `pc == index`: continue forward, or (for an earlier index) restart from 0
        with the same inputs and run up to it."""
        if index < self.pc:
            self.reset()
        return self.run(until=index)

    def read(self, name: str) -> np.ndarray:
        """A copy of a weight, activation or view by name; for a compute instruction, its dest."""
        v = self.lir.get(name)
        if isinstance(v, Instruction) and not v.is_memory:
            outs = [o for o, m in v.operands if m in ("out", "inout")]
            if not outs:
                raise ExecutionError(f"%{name} is a {v.kind} and holds no data")
            v = outs[0]
        return self._view(v, writable=False).copy()

    def write(self, name: str, data: np.ndarray) -> None:
        """Overwrite a weight, activation or view by name (the debugger re-synchronises a
        reference run with the executor under test through it)."""
        v = self.lir.get(name)
        if isinstance(v, Instruction) and not v.is_memory:
            v = next(o for o, m in v.operands if m in ("out", "inout"))
        self._view(v, writable=True)[...] = data

    def outputs(self) -> dict[str, np.ndarray]:
        with out_of_memory_is_an_error("copying the outputs"):
            return {w.name: self.read(w.name) for w in self.lir.outputs()}

    def _execute(self, ins: Instruction, ops: list[np.ndarray]) -> None:
        kind = ins.kind
        if kind == Kind.ALLOC:
            if self.poison:
                self._poison(ins)
        elif kind == Kind.DEALLOC:
            if self.poison:
                self._poison(ins.operands[0][0])
        elif kind == Kind.VIEW:
            pass  # views are addresses; nothing moves
        elif kind == Kind.COPY:
            dst, src = ops
            np.copyto(dst, src.copy() if np.may_share_memory(dst, src) else src)
        elif kind == Kind.EXTRACT:
            dst, src = ops
            sl = tuple(slice(o, o + n) for o, n in zip(ins.attrs["offsets"], dst.shape))
            np.copyto(dst, src[sl].copy() if np.may_share_memory(dst, src) else src[sl])
        elif kind == Kind.INSERT:
            dst, src = ops
            if np.may_share_memory(dst, src):
                src = src.copy()
            axis, offs = ins.attrs["axis"], ins.attrs["offsets"]
            for k in range(ins.attrs["count"]):
                sl = tuple(
                    slice(o + (k * n if d == axis else 0), o + (k * n if d == axis else 0) + n)
                    for d, (o, n) in enumerate(zip(offs, src.shape))
                )
                dst[sl] = src
        else:
            graph_op = ins.graph_op
            if graph_op is None:
                raise ExecutionError(f"no semantics for instruction kind '{kind}'")
            from compiler.kernels.reference import apply_activation, has_kernel, run_kernel
            from compiler.kernels.reference_quant import ACCUMULATING_KERNELS

            if not has_kernel(graph_op):
                raise ExecutionError(
                    f"no reference kernel for {graph_op} (instruction %{ins.name})"
                )
            dests = [(a, m) for a, (v, m) in zip(ops, ins.operands) if m in ("out", "inout")]
            inputs = [a for a, (v, m) in zip(ops, ins.operands) if m == "in"]
            attrs = ins.attrs
            if ins.accumulates and "activation" in attrs:
                attrs = {**attrs, "activation": NONE}  # it applies to the sum, below
            in_types = [v.type_ for v, m in ins.operands if m == "in"]
            if ins.accumulates and graph_op in ACCUMULATING_KERNELS:
                # An int8 sum post-op: the sum is part of the requantization (one rounding).
                dst = dests[0][0]
                res = ACCUMULATING_KERNELS[graph_op](inputs, attrs, in_types, dst.copy())
                np.copyto(dst, np.asarray(res, dtype=dst.dtype))
                return
            with np.errstate(all="ignore"):  # NaN and Inf are data, as in `evaluate`
                results = run_kernel(
                    graph_op,
                    inputs,
                    attrs,
                    in_types,
                    [v.type_ for v, m in ins.operands if m in ("out", "inout")],
                )
            # Compute everything first, then write: an @out may alias an @in.
            staged = []
            for k, ((dst, _), res) in enumerate(zip(dests, results)):
                res = np.asarray(res)
                if tuple(res.shape) != dst.shape:
                    raise ExecutionError(
                        f"kernel {graph_op} returned shape {list(res.shape)}, "
                        f"the destination is {list(dst.shape)}"
                    )
                # A private copy only where the result could change before its write: a cast,
                # the sum below, or memory a destination covers (a kernel may return a view of
                # an operand). Else it is written as it is: copying every result first was 1.5 s
                # of the conformance suite's nine light CNNs.
                if (
                    res.dtype != dst.dtype
                    or (k == 0 and ins.accumulates)
                    or any(np.may_share_memory(res, d) for d, _ in dests)
                ):
                    res = res.astype(dst.dtype, copy=True)
                if k == 0 and ins.accumulates:
                    # The sum post-op reads the arena: a plan that let another buffer clobber
                    # the accumulation target (or poison it) shows in the result. Then the
                    # fused activation, as the accumulating kernels apply it: to the sum.
                    res += dst
                    if "activation" in ins.attrs:
                        res = np.asarray(
                            apply_activation(res, ins.attrs["activation"], ins.attrs["act_args"]),
                            dtype=dst.dtype,
                        )
                staged.append((dst, res))
            for dst, res in staged:
                np.copyto(dst, res)


class ArenaExecutor:
    """The "interpreter" executor: runs a CompileResult's LIR over its memory plan.

    Uses `result.lir` and `result.plan`; when the compile stopped before the low-level stages
    (or `result` is a bare graph Module), runs IRGen on the module (in `result.schedule.order`
    when present) over a NaivePlan. Inputs: a dict (by input name, ONNX names accepted) or a
    list in input order; outputs by output name, in the model's output order.
    """

    kind = "interpreter"

    def __init__(self, result: CompileResult | Module, *, poison: bool = False) -> None:
        module, lir, plan = lowered(result)
        self.lir: LIRFunction = lir
        self.interpreter = ArenaInterpreter(lir, plan, poison=poison)
        in_specs, out_specs, self.aliases = lir_io_specs(lir, module)
        self._in_specs = in_specs
        self.input_names = [n for n, _ in in_specs]
        self.output_names = [n for n, _ in out_specs]
        self.input_types = dict(in_specs)
        self.output_types = dict(out_specs)

    def run(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        out = self.interpreter.run(check_inputs(self._in_specs, inputs, self.aliases))
        return {n: out[n] for n in self.output_names}


def run_lir(
    lir: LIRFunction,
    inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray],
    plan: ArenaLayout | None = None,
    *,
    poison: bool = False,
) -> dict[str, np.ndarray]:
    """One-shot convenience: execute `lir` over `plan` (default: no reuse) and return outputs."""
    return ArenaInterpreter(lir, plan, poison=poison).run(inputs)


__all__ = ["ArenaExecutor", "ArenaInterpreter", "NaivePlan", "StepInfo", "run_lir"]
