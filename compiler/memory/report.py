"""The memory report (pipeline step 10's summary): one data class for every consumer of a plan.

`MemoryReport` is what `glowviz mem` prints and writes (`to_json`: the `glowviz.memory/1`
contract), what `glowviz mem-diff` and the IDE's comparison load back (`from_json`) and diff,
and what the IDE's Memory and Lifetimes views and the exported memory figures draw. Built from a
`MemoryPlan` (and the LIR it plans) by `from_plan`. Its live-bytes profile is the allocators'
`live_profile`, the one definition of "bytes live at an instruction".

Extensions of the schema (compatible: keys added, none changed): each buffer's `alias_of` (null
for a buffer; for an alias, the value whose bytes it shares by design: the concat it is a slice
of, the buffer a kernel accumulates into). Aliases are listed among the buffers, nested in their
partner in bytes and in time, and take no part in the live bytes, `lower_bound_bytes` or
`no_reuse_bytes`. And `certificate` (compiler/memory/certificate.py): the planned peak against
this schedule's and every schedule's lower bound, and the buffers behind a gap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from compiler.errors import CompilerError
from compiler.lir.ir import LIRFunction
from compiler.memory.allocators import live_profile
from compiler.memory.certificate import Certificate, certify, format_certificate
from compiler.memory.plan import BufferPlacement, MemoryPlan
from compiler.memory.regions import ACTIVATION_REGION, ALIGNMENT, REGIONS
from compiler.scheduling import Schedule

SCHEMA = "glowviz.memory/1"


class ReportError(CompilerError):
    """A memory report (JSON) that does not follow the `glowviz.memory/1` schema."""


@dataclass(frozen=True)
class ReportBuffer:
    """One activation buffer: where it lives, when, who made it and why it sits there."""

    name: str
    size: int  # aligned bytes
    offset: int
    first: int  # instruction indices, inclusive
    last: int
    producer: str = ""  # the schema's `producer`: the graph node, else the instruction
    instruction: str = ""  # the instruction that writes it first
    node: str = ""  # the graph node it comes from ("" when unknown, e.g. a loaded report)
    category: str = "other"  # the producing instruction's op category (for colours)
    users: tuple[str, ...] = ()
    reason: str = ""
    region: str = ACTIVATION_REGION
    alias_of: str = ""  # an alias: the value whose bytes it shares by design ("": a buffer)
    # The lifetime in operations (compute instructions, markers and views not counted): the
    # graph nodes of the first and last operation touching the buffer and how many operations
    # run from one to the other. Stable when markers or copies shift instruction indices, so
    # mem-diff compares lifetimes with these ("" / -1 when unknown, e.g. an older report).
    first_op: str = ""
    last_op: str = ""
    op_span: int = -1

    def live_at(self, index: int) -> bool:
        return self.first <= index <= self.last

    def placement(self) -> dict[str, int | str]:
        """Where and when, as JSON: the keys every report schema starts a buffer with."""
        return {
            "name": self.name,
            "size": self.size,
            "offset": self.offset,
            "first": self.first,
            "last": self.last,
        }


@dataclass(frozen=True)
class MemoryReport:
    """The activation plan of one compile, its bounds and what is live at the peak.

    The peak is the arena's top, whatever the allocator: `peak_instruction` is the instruction
    where the top is reached (of the instructions where a buffer ending at the top is live, the
    one with the most live bytes, the first on ties), `top_buffer` the buffer ending there and
    `live_at_peak` what is live at that instruction (largest first). With an allocator that
    reaches the lower bound it is the first instruction with the most live bytes, which
    `lower_bound_instruction` names in any case. These are always resolved (computed from the
    buffers when a loaded report lacks them); `n_instructions` is the program length (at least
    max(last) + 1). `source` says where a loaded or compared report came from (a file, a
    model spec); it is not part of the JSON.
    """

    model: str
    scheduler: str
    allocator: str
    peak_bytes: int
    lower_bound_bytes: int
    no_reuse_bytes: int
    buffers: tuple[ReportBuffer, ...]
    alignment: int = ALIGNMENT
    regions: dict[str, int] = field(default_factory=dict)
    instructions: int | None = None  # the LIR's length, when known
    peak_instruction: int = -1
    live_at_peak: tuple[str, ...] = ()
    ratio: float | None = None
    strategy: str = ""
    weights: tuple[dict[str, Any], ...] = ()
    source: str = ""
    certificate: Certificate | None = None
    # What produced the plan (`compiler.pipeline.run_config`): scheduler, allocator, disabled
    # passes, input shapes, lowering policy, the model file's sha256 and the project version.
    config: dict[str, Any] = field(default_factory=dict)
    top_buffer: str = ""  # the buffer whose end is the arena's top, live at `peak_instruction`
    lower_bound_instruction: int = -1  # the first instruction with the most live bytes

    # -- derived ------------------------------------------------------------------------------
    @property
    def n_instructions(self) -> int:
        n = max((b.last for b in self.buffers), default=-1) + 1
        return max(n, self.instructions or 0)

    @property
    def live_bytes(self) -> list[int]:
        """Bytes of activations live at every instruction 0..n_instructions-1 (aliases take
        no bytes of their own)."""
        return live_profile(self.own_buffers, self.n_instructions)

    @property
    def own_buffers(self) -> tuple[ReportBuffer, ...]:
        """The buffers that own their bytes (not the aliases nested in them)."""
        return tuple(b for b in self.buffers if not b.alias_of)

    @property
    def gap_bytes(self) -> int:
        return self.peak_bytes - self.lower_bound_bytes

    @property
    def gap_pct(self) -> float:
        lb = self.lower_bound_bytes
        return 100.0 * self.gap_bytes / lb if lb else 0.0

    def buffer(self, name: str) -> ReportBuffer | None:
        return next((b for b in self.buffers if b.name == name), None)

    def with_source(self, source: str) -> MemoryReport:
        return replace(self, source=source)

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_plan(
        cls,
        plan: MemoryPlan,
        lir: LIRFunction | None = None,
        model: str = "",
        scheduler: str = "",
        allocator: str | None = None,
        schedule: Schedule | None = None,
        *,
        config: dict[str, Any] | None = None,
    ) -> MemoryReport:
        """The report of `plan`; `schedule` (the compile's) completes the certificate's
        all-schedules bound when the plan was made without it; `config` is what produced the
        plan (`compiler.pipeline.run_config`)."""
        placed = sorted((*plan.buffers, *plan.aliases), key=lambda b: (b.first, b.name))
        ops = _operation_spans(lir, placed) if lir is not None else {}
        buffers = tuple(_report_buffer(b, lir, ops.get(b.name, {})) for b in placed)
        if schedule is not None or plan.certificate is None:
            certificate = certify(plan, lir, schedule)
        else:
            certificate = plan.certificate
        return cls(
            model=Path(model).name if model else "",
            scheduler=scheduler,
            allocator=allocator or plan.allocator,
            peak_bytes=int(plan.peak_bytes),
            lower_bound_bytes=int(plan.lower_bound_bytes),
            no_reuse_bytes=int(plan.no_reuse_bytes),
            buffers=buffers,
            alignment=plan.alignment,
            regions={k: int(plan.region_sizes.get(k, 0)) for k in REGIONS},
            instructions=len(lir.code) if lir is not None else None,
            ratio=round(plan.ratio, 6),
            strategy=plan.strategy,
            weights=tuple(
                {"name": w.name, "region": w.region, "size": int(w.size), "offset": int(w.offset)}
                for w in plan.weights
            ),
            certificate=certificate,
            config=dict(config or {}),
        )._resolved(-1, None)

    @classmethod
    def from_json(cls, data: Any, source: str = "") -> MemoryReport:
        """A `glowviz.memory/1` report read back (e.g. from `glowviz mem --json`); raises
        ReportError naming `source` when the data does not follow the schema."""
        where = source or "memory report"
        if not isinstance(data, dict):
            raise ReportError(f"{where}: not a {SCHEMA} report (a JSON object)")
        if data.get("schema") != SCHEMA:
            raise ReportError(f"{where}: schema is {data.get('schema')!r}, expected {SCHEMA!r}")
        for key in ("peak_bytes", "lower_bound_bytes", "no_reuse_bytes"):
            if not isinstance(data.get(key), int):
                raise ReportError(f"{where}: '{key}' missing or not an integer")
        raw = data.get("buffers")
        if not isinstance(raw, list):
            raise ReportError(f"{where}: 'buffers' missing or not a list")
        buffers = []
        for i, b in enumerate(raw):
            if (
                not isinstance(b, dict)
                or not isinstance(b.get("name"), str)
                or not all(isinstance(b.get(k), int) for k in ("size", "offset", "first", "last"))
            ):
                raise ReportError(f"{where}: buffers[{i}] needs name, size, offset, first, last")
            buffers.append(
                ReportBuffer(
                    name=b["name"],
                    size=b["size"],
                    offset=b["offset"],
                    first=b["first"],
                    last=b["last"],
                    producer=str(b.get("producer") or ""),
                    instruction=str(b.get("instruction") or ""),
                    users=tuple(b.get("users") or ()),
                    reason=str(b.get("reason") or ""),
                    alias_of=str(b.get("alias_of") or ""),
                    node=str(b.get("node") or ""),
                    category=str(b.get("category") or "other"),
                    first_op=str(b.get("first_op") or ""),
                    last_op=str(b.get("last_op") or ""),
                    op_span=b["op_span"] if isinstance(b.get("op_span"), int) else -1,
                )
            )
        cert = data.get("certificate")
        n = data.get("instructions")
        at = data.get("peak_instruction")
        live = data.get("live_at_peak")
        return cls(
            model=str(data.get("model") or ""),
            scheduler=str(data.get("scheduler") or ""),
            allocator=str(data.get("allocator") or ""),
            peak_bytes=data["peak_bytes"],
            lower_bound_bytes=data["lower_bound_bytes"],
            no_reuse_bytes=data["no_reuse_bytes"],
            buffers=tuple(buffers),
            alignment=int(data.get("alignment") or ALIGNMENT),
            regions={k: int(v) for k, v in (data.get("regions") or {}).items()},
            instructions=n if isinstance(n, int) else None,
            ratio=data.get("ratio"),
            strategy=str(data.get("strategy") or ""),
            weights=tuple(data.get("weights") or ()),
            source=source,
            certificate=Certificate.from_json(cert) if isinstance(cert, dict) else None,
            config=dict(data.get("config") or {}),
            top_buffer=str(data.get("top_buffer") or ""),
        )._resolved(
            at if isinstance(at, int) else -1,
            [str(x) for x in live] if isinstance(live, list) else None,
        )

    def _resolved(self, peak_at: int, live: list[str] | None) -> MemoryReport:
        """The report with the peak resolved (see the class docstring) unless given: the arena
        top's instruction and buffer, the buffers live there (largest first, then by name) and
        the lower bound's instruction."""
        prof = self.live_bytes
        lb_at = prof.index(max(prof)) if prof else -1
        top = self.top_buffer
        if peak_at < 0:
            peak_at, top = arena_top(self.own_buffers, prof)
        elif not top:
            at_top = [b for b in self.own_buffers if b.live_at(peak_at)]
            if at_top:
                top = max(at_top, key=lambda b: (b.offset + b.size, b.name)).name
        if live is None:
            at_peak = sorted(
                (b for b in self.own_buffers if b.live_at(peak_at)),
                key=lambda b: (-b.size, b.name),
            )
            live = [b.name for b in at_peak]
        return replace(
            self,
            peak_instruction=peak_at,
            live_at_peak=tuple(live),
            top_buffer=top,
            lower_bound_instruction=lb_at,
        )

    # -- output -------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The report exactly in the `glowviz.memory/1` schema (plus the compatible extras,
        documented in docs/memory-report.md and docs/schemas/glowviz.memory-1.schema.json)."""
        return {
            "schema": SCHEMA,
            "model": self.model,
            "scheduler": self.scheduler,
            "allocator": self.allocator,
            "alignment": self.alignment,
            "regions": {k: int(self.regions.get(k, 0)) for k in REGIONS},
            "peak_bytes": self.peak_bytes,
            "lower_bound_bytes": self.lower_bound_bytes,
            "no_reuse_bytes": self.no_reuse_bytes,
            "buffers": [
                {
                    **b.placement(),
                    "producer": b.producer,
                    "reason": b.reason,
                    "instruction": b.instruction,
                    "users": list(b.users),
                    "alias_of": b.alias_of or None,
                    "node": b.node,
                    "category": b.category,
                    "first_op": b.first_op,
                    "last_op": b.last_op,
                    "op_span": b.op_span,
                }
                for b in self.buffers
            ],
            # Extra fields (allowed by the contract).
            "config": dict(self.config),
            "ratio": self.ratio,
            "strategy": self.strategy,
            "instructions": self.instructions,
            "peak_instruction": self.peak_instruction,
            "top_buffer": self.top_buffer,
            "live_at_peak": list(self.live_at_peak),
            "lower_bound_instruction": self.lower_bound_instruction,
            "live_bytes": self.live_bytes,
            "weights": [dict(w) for w in self.weights],
            **({"certificate": self.certificate.to_json()} if self.certificate else {}),
        }


def _report_buffer(
    b: BufferPlacement, lir: LIRFunction | None, ops: dict[str, Any]
) -> ReportBuffer:
    """One placement as reported; `ops`: its lifetime in operations (`_operation_spans`)."""
    return ReportBuffer(
        name=b.name,
        size=int(b.size),
        offset=int(b.offset),
        first=int(b.first),
        last=int(b.last),
        producer=b.producer_node or b.producer,
        instruction=b.producer,
        node=b.producer_node,
        category=_category_of(lir, b.producer),
        users=tuple(b.users),
        reason=b.reason,
        region=b.region,
        alias_of=b.alias_of,
        **ops,
    )


def arena_top(buffers: Sequence[ReportBuffer], profile: Sequence[int]) -> tuple[int, str]:
    """(the instruction where the arena's top is reached, the buffer ending at the top there).

    Of the instructions where a buffer ending at the top is live, the one with the most live
    bytes (the first on ties): with a packing that reaches the lower bound this is the lower
    bound's instruction; under first-fit it is where the top block actually sits."""
    if not buffers:
        return -1, ""
    top = max(b.offset + b.size for b in buffers)
    best: tuple[int, int, str] | None = None  # (-live bytes, instruction, buffer)
    for b in buffers:
        if b.offset + b.size != top:
            continue
        for i in range(max(0, b.first), min(b.last, len(profile) - 1) + 1):
            key = (-profile[i], i, b.name)
            if best is None or key < best:
                best = key
    if best is None:
        return -1, ""
    return best[1], best[2]


def _operation_spans(
    lir: LIRFunction, placed: Sequence[BufferPlacement]
) -> dict[str, dict[str, Any]]:
    """Each activation buffer's lifetime in operations (see `ReportBuffer.first_op`)."""
    from compiler.lir.ir import view_root

    op_no: list[int] = []  # instruction index -> operations run so far (this one included)
    touched: dict[str, list[int]] = {}  # buffer -> instruction indices of operations on it
    count = 0
    for i, ins in enumerate(lir.code):
        is_op = not (ins.is_alloc or ins.is_dealloc or ins.is_view)
        count += is_op
        op_no.append(count)
        if not is_op:
            continue
        for v, _mode in ins.operands:
            root, _ = view_root(v)
            name = getattr(root, "name", None)
            if name is not None:
                touched.setdefault(name, []).append(i)
    out: dict[str, dict[str, Any]] = {}
    for b in placed:
        idx = touched.get(b.name)
        if not idx:
            continue
        first, last = lir.code[idx[0]], lir.code[idx[-1]]
        out[b.name] = {
            "first_op": str(first.meta.get("node") or first.name),
            "last_op": str(last.meta.get("node") or last.name),
            "op_span": op_no[idx[-1]] - op_no[idx[0]] + 1,
        }
    return out


def _category_of(lir: LIRFunction | None, instruction: str) -> str:
    ins = lir.find(instruction) if lir is not None and instruction else None
    return ins.idef.category if ins is not None else "other"


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def config_bits(config: dict[str, Any]) -> list[str]:
    """A report's `config` in words beyond scheduler and allocator: disabled passes, input
    shapes, version (the text report's headline and mem-diff's two sides say them alike)."""
    disabled = config.get("disabled_passes") or []
    bits = ["disabled passes: " + (", ".join(disabled) if disabled else "none")]
    shapes = config.get("input_shapes") or {}
    if shapes:
        bits.append(
            "input shapes: "
            + ", ".join(f"{k}={'x'.join(str(d) for d in v)}" for k, v in shapes.items())
        )
    if config.get("version"):
        bits.append(f"glowviz {config['version']}")
    return bits


def config_lines(config: dict[str, Any]) -> list[str]:
    """What a report's `config` adds to its headline (`config_bits`; nothing without one)."""
    return ["  " + "; ".join(config_bits(config))] if config else []


def format_report(r: MemoryReport, top: int = 15) -> str:
    """Readable text of a report: regions, bounds, and the buffers live at the peak."""
    regions = {k: int(r.regions.get(k, 0)) for k in REGIONS}
    lb, peak = r.lower_bound_bytes, r.peak_bytes
    ratio = peak / lb if lb else 1.0
    lines = [
        f"memory plan for {r.model or '<model>'}  (scheduler {r.scheduler}, "
        f"allocator {r.allocator}, alignment {r.alignment} B)",
        *config_lines(r.config),
        "regions:",
        *(f"  {k:<12} {human_bytes(regions[k]):>12}  ({regions[k]} B)" for k in REGIONS),
        f"peak (activations)   {human_bytes(peak):>12}",
        f"lower bound          {human_bytes(lb):>12}   ratio {ratio:.3f}",
        f"no reuse (sum)       {human_bytes(r.no_reuse_bytes):>12}   "
        f"saved {human_bytes(r.no_reuse_bytes - peak)}",
        f"buffers              {len(r.own_buffers):>12}"
        + (
            f"   (+ {len(r.buffers) - len(r.own_buffers)} aliases)"
            if r.own_buffers != r.buffers
            else ""
        ),
    ]
    if r.certificate is not None:
        lines += format_certificate(r.certificate, human_bytes)
    by_name = {b.name: b for b in r.buffers}
    top_buf = by_name.get(r.top_buffer)
    if top_buf is not None:
        end = human_bytes(top_buf.offset + top_buf.size)
        lines.append(
            f"arena top reached at instruction {r.peak_instruction} by %{top_buf.name} "
            f"(@{top_buf.offset}, {human_bytes(top_buf.size)}, ends at {end})"
        )
    if r.lower_bound_instruction >= 0 and r.lower_bound_instruction != r.peak_instruction:
        lines.append(
            f"most bytes live (the lower bound) at instruction {r.lower_bound_instruction}"
        )
    live = [by_name[n] for n in r.live_at_peak if n in by_name]
    if live:
        lines.append(f"live at the peak (instruction {r.peak_instruction}), largest first:")
        w = max((len(b.name) for b in live[:top]), default=0)  # top=0: just the count
        for b in live[:top]:
            lines.append(
                f"  %{b.name:<{w}} {human_bytes(b.size):>11}  @{b.offset:<10} "
                f"[{b.first}, {b.last}]  from {b.producer or '?'}"
            )
        if len(live) > top:
            lines.append(f"  ... and {len(live) - top} more")
    return "\n".join(lines)


__all__ = [
    "SCHEMA",
    "MemoryReport",
    "arena_top",
    "config_bits",
    "config_lines",
    "ReportBuffer",
    "ReportError",
    "format_report",
    "human_bytes",
]
