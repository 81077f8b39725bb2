"""Ahead-of-time bundles (pipeline step 11, the LLVM backend's other product): a compiled model
as a relocatable object with one entry, a C header and a weights file, as Glow's -emit-bundle.

`build_bundle(result, options)` specialises the kernels for the target CPU, wraps the code
generator's `@run_all(constant, mutable, activations)` in `int <name>(...)`, defines
`<name>_config` (regions, inputs, outputs), makes every other symbol internal, optimises at O3
and emits a position-independent object for the target triple. The constant region of a bundle
holds only what the code reads: constants some kernel reads in place (re-laid out densely) and
the weights the code generator packed; the activations and mutable regions are the memory
plan's. Nothing here writes files: the CLI writes `Bundle.files` (atomically).
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import llvmlite.binding as llvm
import numpy as np

from compiler.backends.llvm import target
from compiler.backends.llvm.bundle_header import (
    ELEM_CODES,
    ENTRY_EALIGN,
    ENTRY_EDIVZERO,
    ENTRY_OK,
    FORMAT_VERSION,
    BundleTensor,
    HeaderInfo,
    c_identifier,
    check_name,
    header_text,
    unique_macros,
    weights_c_text,
)
from compiler.backends.llvm.codegen import Program, generate
from compiler.backends.llvm.emitters.common import LIBM, STATUS_GLOBAL, Call
from compiler.errors import CodegenError, CompilerError
from compiler.lir.ir import LIRFunction, view_root
from compiler.memory.plan import MemoryPlan
from compiler.memory.regions import ACTIVATION_REGION, CONSTANT_REGION, MUTABLE_REGION, REGIONS

if TYPE_CHECKING:
    from compiler.graph.ir import Module
    from compiler.pipeline import CompileResult

#: libm functions LLVM may call for an intrinsic the target has no instruction for (fmaf
#: without FMA, floorf without SSE4.1, ...), besides the ones the kernels call (LIBM).
_LIBM_LOWERED = ("fma", "floor", "ceil", "trunc", "round", "rint", "nearbyint", "sqrt")

#: Symbols a bundle object may leave undefined: memcpy/memset (LLVM lowers copies and fills
#: to them) and libm. Anything else would be a dependency the application cannot satisfy.
ALLOWED_UNDEFINED = frozenset(
    {"memcpy", "memset", *LIBM, *_LIBM_LOWERED, *(f + "f" for f in _LIBM_LOWERED)}
)


@dataclass(frozen=True)
class BundleOptions:
    """What `glowviz bundle` asks for; None means the host's value."""

    name: str | None = None  # C identifier naming the entry and the files (default: model stem)
    target: str | None = None  # LLVM target triple
    cpu: str | None = None  # LLVM CPU name (with --target and no --cpu: "generic")
    features: str | None = None  # LLVM features string, e.g. "+neon"
    embed_weights: bool = False  # also `<name>.weights.c`
    generator: str = "glowviz"  # who generated it, for the header


@dataclass
class Bundle:
    """A generated bundle: file name -> bytes, and the facts the header states."""

    name: str
    files: dict[str, bytes]
    info: HeaderInfo
    sections: dict[str, int] = field(default_factory=dict)  # text / data / rodata / bss bytes

    @property
    def object(self) -> bytes:
        return self.files[f"{self.name}.o"]

    @property
    def weights(self) -> bytes:
        return self.files[f"{self.name}.weights.bin"]


def resolve_target(
    triple: str | None, cpu: str | None, features: str | None
) -> tuple[str, target.HostCPU]:
    """(triple, CPU) to generate for: the host (its CPU name and features) unless given."""
    if triple is None:
        host = target.host_cpu()
        if cpu is None:
            return llvm.get_process_triple(), target.HostCPU(
                host.name, host.features if features is None else features
            )
        return llvm.get_process_triple(), target.HostCPU(cpu, features or "")
    target.ensure_all_targets()
    try:
        llvm.Target.from_triple(triple)
    except RuntimeError as e:
        raise CompilerError(
            f"LLVM {'.'.join(map(str, llvm.llvm_version_info))} (llvmlite) cannot generate code for "
            f"target '{triple}': {str(e).strip()}",
            hint="use a triple such as x86_64-unknown-linux-gnu or aarch64-linux-gnu",
        ) from None
    return triple, target.HostCPU(cpu or "generic", features or "")


def _constants_read(entry_calls: Mapping[str, list[Call]], plan: MemoryPlan) -> set[str]:
    """Constant weights some wrapper passes to a kernel (so reads in place)."""
    names = set()
    for calls in entry_calls.values():
        for call in calls:
            for arg in call.args:
                if arg.value is None:
                    continue
                root, _ = view_root(arg.value)
                if plan.offset_of(root.name)[0] == CONSTANT_REGION:
                    names.add(root.name)
    return names


def _dense_plan(plan: MemoryPlan, read: set[str]) -> MemoryPlan:
    """`plan` with only the constants in `read` in the constant region, packed in declaration
    order; the others (replaced by packed copies, or folded into code) sit at offset 0, where
    nothing reads them."""
    offset = 0
    weights = []
    for w in plan.weights:
        if w.region != CONSTANT_REGION:
            weights.append(w)
        elif w.name in read:
            weights.append(replace(w, offset=offset, reason="read in place by a kernel"))
            offset += w.size
        else:
            weights.append(replace(w, offset=0, size=0, reason="not read: packed or folded"))
    sizes = {**plan.region_sizes, CONSTANT_REGION: offset}
    return replace(plan, weights=weights, region_sizes=sizes)


def _constant_region(lir: LIRFunction, plan: MemoryPlan, program: Program, read: set[str]) -> bytes:
    """The bundle's constant region: constants read in place, then the packed blobs."""
    buf = np.zeros(program.constant_size, dtype=np.uint8)
    for w in lir.weights.values():
        if not w.is_constant or w.name not in read:
            continue
        if w.data is None:
            raise CompilerError(f"constant weight %{w.name} has no data; cannot bundle it")
        arr = np.empty(w.type_.shape, dtype=w.type_.elem.np_dtype)
        arr[...] = w.data  # the arena interpreter's conversion, so both see the same bytes
        off = plan.offset_of(w.name)[1]
        raw = arr.reshape(-1).view(np.uint8)
        buf[off : off + raw.size] = raw
    for blob, off in zip(program.blobs, program.blob_offsets):
        raw = np.ascontiguousarray(blob).reshape(-1).view(np.uint8)
        buf[off : off + raw.size] = raw
    return buf.tobytes()


def _tensors(module: Module, plan: MemoryPlan) -> tuple[list[BundleTensor], list[BundleTensor]]:
    from compiler.runtime import io_specs

    in_specs, out_specs, _ = io_specs(module)
    onnx_name = {p: o for o, p in module.meta.get("onnx_inputs", ())}
    onnx_name.update({p: o for o, p in module.meta.get("onnx_outputs", ())})
    names = [onnx_name.get(n, n) for n, _ in (*in_specs, *out_specs)]
    macros = unique_macros(names)
    out: list[BundleTensor] = []
    for (ph, t), name, macro in zip((*in_specs, *out_specs), names, macros):
        region, offset = plan.offset_of(ph)
        if region != MUTABLE_REGION:  # pragma: no cover - placeholders are mutable weights
            raise CodegenError(f"input/output %{ph} is not in the mutable region")
        out.append(BundleTensor(name, macro, offset, t.size_bytes, t.elem, tuple(t.shape)))
    return out[: len(in_specs)], out[len(in_specs) :]


def _ir_string(text: str) -> tuple[str, int]:
    """`text` as an LLVM IR c"..." initializer (NUL-terminated) and its byte length."""
    data = text.encode() + b"\0"
    body = "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:02X}" for b in data)
    return f'c"{body}"', len(data)


def _entry_ir(
    name: str,
    regions: dict[str, int],
    alignment: int,
    crc32: int,
    ins: list[BundleTensor],
    outs: list[BundleTensor],
    status: bool = False,
) -> str:
    """The entry `i32 @<name>(ptr, ptr, ptr)` around `@run_all`, and `@<name>_config` (its
    fields in the order of `glowviz_bundle_config` in the header)."""
    lines = [
        "%glowviz_tensor_info = type { ptr, i64, i64, i32, i32, ptr }",
        "%glowviz_bundle_config = type { i32, i32, i64, i64, i64, i32, i32, i32, ptr, ptr }",
    ]

    def table(kind: str, tensors: list[BundleTensor]) -> str:
        if not tensors:
            return "ptr null"
        entries = []
        for i, t in enumerate(tensors):
            s, n = _ir_string(t.name)
            sym = f"@.{name}.{kind}{i}"
            lines.append(f"{sym}.name = private unnamed_addr constant [{n} x i8] {s}, align 1")
            if t.shape:
                dims = ", ".join(f"i64 {d}" for d in t.shape)
                lines.append(
                    f"{sym}.shape = private unnamed_addr constant [{len(t.shape)} x i64] "
                    f"[{dims}], align 8"
                )
            shape = f"ptr {sym}.shape" if t.shape else "ptr null"
            entries.append(
                f"%glowviz_tensor_info {{ ptr {sym}.name, i64 {t.offset}, i64 {t.size}, "
                f"i32 {ELEM_CODES[t.elem]}, i32 {len(t.shape)}, {shape} }}"
            )
        lines.append(
            f"@.{name}.{kind}s = private unnamed_addr constant [{len(tensors)} x "
            f"%glowviz_tensor_info] [{', '.join(entries)}], align 8"
        )
        return f"ptr @.{name}.{kind}s"

    in_ptr, out_ptr = table("input", ins), table("output", outs)
    sizes = ", ".join(f"i64 {regions[r]}" for r in REGIONS)
    lines += [
        f"@{name}_config = constant %glowviz_bundle_config {{ i32 {FORMAT_VERSION}, "
        f"i32 {alignment}, {sizes}, i32 {crc32}, i32 {len(ins)}, i32 {len(outs)}, "
        f"{in_ptr}, {out_ptr} }}, align 8",
        "",
        "declare void @run_all(ptr, ptr, ptr)",
        "",
        f"define i32 @{name}(ptr noalias %constant_weight, ptr noalias %mutable_weight, "
        "ptr noalias %activations) nounwind {",
        "entry:",
        "  %c = ptrtoint ptr %constant_weight to i64",
        "  %m = ptrtoint ptr %mutable_weight to i64",
        "  %a = ptrtoint ptr %activations to i64",
        "  %cm = or i64 %c, %m",
        "  %all = or i64 %cm, %a",
        f"  %low = and i64 %all, {alignment - 1}",
        "  %bad = icmp ne i64 %low, 0",
        "  br i1 %bad, label %misaligned, label %run",
        "misaligned:",
        f"  ret i32 {ENTRY_EALIGN}",
        "run:",
    ]
    if status:
        # The code's status (integer division by zero) becomes the return code.
        at = lines.index("declare void @run_all(ptr, ptr, ptr)")
        lines[at:at] = [f"@{STATUS_GLOBAL} = external global i32", ""]
        lines.append(f"  store i32 0, ptr @{STATUS_GLOBAL}")
    lines.append(
        "  call void @run_all(ptr %constant_weight, ptr %mutable_weight, ptr %activations)"
    )
    if status:
        lines += [
            f"  %status = load i32, ptr @{STATUS_GLOBAL}",
            "  %failed = icmp ne i32 %status, 0",
            f"  %code = select i1 %failed, i32 {ENTRY_EDIVZERO}, i32 {ENTRY_OK}",
            "  ret i32 %code",
        ]
    else:
        lines.append(f"  ret i32 {ENTRY_OK}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _compile_object(
    program: Program, entry_ir: str, exported: set[str], triple: str, cpu: target.HostCPU
) -> bytes:
    """Link the entry into the program, internalise the rest, O3 for the target, emit PIC."""
    tm = llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu.name, features=cpu.features, opt=3, reloc="pic", codemodel="default"
    )
    try:
        mod = target.parse_and_verify(str(program.module))
        mod.link_in(target.parse_and_verify(entry_ir))
    except RuntimeError as e:
        raise CodegenError(f"LLVM rejected the bundle's IR: {e}") from e
    mod.name = min(exported)  # the entry's name: the module ID must not vary between runs
    for fn in mod.functions:
        if not fn.is_declaration and fn.name not in exported:
            fn.linkage = llvm.Linkage.internal
    for gv in mod.global_variables:
        if not gv.is_declaration and gv.name not in exported:
            gv.linkage = llvm.Linkage.internal
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    mod.verify()
    target.optimize(mod, tm=tm)
    return tm.emit_object(mod)


def object_sections(obj: bytes) -> dict[str, int]:
    """Bytes of code, writable data, read-only data and zero-initialised data in an object."""
    sizes = {"text": 0, "data": 0, "rodata": 0, "bss": 0}
    for sec in llvm.ObjectFileRef.from_data(obj).sections():
        name = (sec.name() or b"").decode(errors="replace")
        for kind in ("text", "rodata", "data", "bss"):  # .rodata before .data: both prefixes
            if name == f".{kind}" or name.startswith(f".{kind}."):
                sizes[kind] += sec.size()
                break
    return sizes


def build_bundle(result: CompileResult, options: BundleOptions | None = None) -> Bundle:
    """Bundle a compile result (with its LIR and memory plan) for `options`' target."""
    options = options or BundleOptions()
    if result.lir is None or result.plan is None:
        raise CompilerError("the pipeline stopped before memory planning; nothing to bundle")
    source = Path(result.source) if result.source and result.source != "<memory>" else None
    name = check_name(options.name or c_identifier(source.stem if source else result.lir.name))
    triple, cpu = resolve_target(options.target, options.cpu, options.features)
    lir, plan = result.lir, result.plan

    # The kernels are emitted over the plan; once they are, their calls say which constants
    # the code reads in place, and the wrappers address a plan whose constant region holds only
    # those (one generation: a second one over that plan emitted the same kernels again).
    read: set[str] = set()
    dense = plan

    def dense_layout(calls: Mapping[str, list[Call]]) -> MemoryPlan:
        nonlocal dense
        read.update(_constants_read(calls, plan))
        dense = _dense_plan(plan, read)
        return dense

    with target.generating_for(cpu):
        program = generate(lir, plan, relayout=dense_layout)

    weights = _constant_region(lir, dense, program, read)
    crc = zlib.crc32(weights)
    ins, outs = _tensors(result.module, plan)
    regions = {r: int(plan.region_sizes.get(r, 0)) for r in REGIONS}
    regions[CONSTANT_REGION] = len(weights)
    status = STATUS_GLOBAL in program.module.globals
    entry = _entry_ir(name, regions, plan.alignment, crc, ins, outs, status)
    obj = _compile_object(program, entry, {name, f"{name}_config"}, triple, cpu)
    sections = object_sections(obj)
    info = HeaderInfo(
        name=name,
        model=source.name if source else "<memory>",
        model_sha256=hashlib.sha256(source.read_bytes()).hexdigest()
        if source and source.is_file()
        else "",
        generator=options.generator,
        triple=triple,
        cpu=cpu.name,
        features=cpu.features,
        constant_size=regions[CONSTANT_REGION],
        mutable_size=regions[MUTABLE_REGION],
        activations_size=regions[ACTIVATION_REGION],
        alignment=plan.alignment,
        weights_crc32=crc,
        static_scratch=sections["bss"],
        inputs=tuple(ins),
        outputs=tuple(outs),
        embedded=options.embed_weights,
    )
    # The compile's own report, configuration included: `glowviz mem NAME.h` prints what
    # `glowviz mem MODEL` printed for the plan the bundle was generated for.
    mem = result.memory_report()
    assert mem is not None  # result.plan was checked above
    report = mem.to_json()
    report["bundle"] = {
        "name": name,
        "target": triple,
        "cpu": cpu.name,
        "regions": regions,
        "constant_layout": [
            {"name": w.name, "offset": int(w.offset), "size": int(w.size)}
            for w in dense.weights
            if w.region == CONSTANT_REGION and w.name in read
        ]
        + [
            {"name": f"<packed {i}>", "offset": int(off), "size": int(blob.nbytes)}
            for i, (blob, off) in enumerate(zip(program.blobs, program.blob_offsets))
        ],
        "object": {"bytes": len(obj), **sections},
    }
    files = {
        f"{name}.o": obj,
        f"{name}.h": header_text(info, report).encode(),
        f"{name}.weights.bin": weights,
    }
    if options.embed_weights:
        files[f"{name}.weights.c"] = weights_c_text(name, weights).encode()
    return Bundle(name, files, info, sections)


__all__ = [
    "ALLOWED_UNDEFINED",
    "Bundle",
    "BundleOptions",
    "build_bundle",
    "object_sections",
    "resolve_target",
]
