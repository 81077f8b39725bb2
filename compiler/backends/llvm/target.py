"""LLVM setup for the CPU backend: native target init (once), host CPU and features, the cached
O3 TargetMachine and the new-pass-manager O3 pipeline. Everything LLVM-global lives here.

Env overrides: ``GLOWVIZ_LLVM_CPU`` (e.g. ``haswell``, ``x86-64``) and ``GLOWVIZ_LLVM_FEATURES``
(an LLVM features string, e.g. ``+avx2,+fma,-avx512f``) replace the host values, so tests and
benchmarks can force the AVX2 or plain-SSE code paths.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import llvmlite.binding as llvm

# llvmlite.binding (LLVM's library) is imported by the functions that call it: the emitters
# and kernels import this module for the ISA questions, also in compiles that never generate
# code (the lowering contract reads the emitter table).

Isa = Literal["avx512", "avx2", "generic"]

_lock = threading.RLock()
_initialized = False
_all_targets = False


def load_llvm() -> None:
    """Load LLVM's library (llvmlite.binding), or refuse with one ResourceLimitError when the
    process's address space cannot map it (about 180 MB; under `ulimit -v`, or after a large
    arena was allocated): the dynamic loader's failure is otherwise a bare OSError that names
    a missing library. Call it before importing a module that imports llvmlite.binding."""
    if "llvmlite.binding" in sys.modules:
        return
    from compiler.limits import MIB, ensure_headroom

    spec = importlib.util.find_spec("llvmlite")
    where = spec.submodule_search_locations if spec is not None else None
    libs = list((Path(where[0]) / "binding").glob("libllvmlite.*")) if where else []
    size = max((lib.stat().st_size for lib in libs), default=0)
    # the library's mapping, and what loading it allocates (its static initializers)
    ensure_headroom("loading LLVM's library", size + 64 * MIB)
    import llvmlite.binding  # noqa: F401


def ensure_initialized() -> None:
    """Initialise the native target and asm printer once (``llvm.initialize()`` raises since 0.45)."""
    global _initialized
    if _initialized:
        return
    import llvmlite.binding as llvm

    with _lock:
        if not _initialized:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _initialized = True


def ensure_all_targets() -> None:
    """Initialise every target llvmlite was built with (cross-compiled AOT bundles)."""
    import llvmlite.binding as llvm

    global _all_targets
    ensure_initialized()
    with _lock:
        if not _all_targets:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            _all_targets = True


@dataclass(frozen=True)
class HostCPU:
    name: str
    features: str  # LLVM features string: "+avx2,+fma,-avx512f,..."

    def has(self, feature: str) -> bool:
        return f"+{feature}" in self.features.split(",")


@cache
def _host_cpu(cpu_env: str | None, feat_env: str | None) -> HostCPU:
    import llvmlite.binding as llvm

    ensure_initialized()
    name = cpu_env or llvm.get_host_cpu_name()
    if feat_env is not None:
        features = feat_env
    elif cpu_env:
        features = ""  # a forced CPU name implies its own feature set
    else:
        features = llvm.get_host_cpu_features().flatten()
    return HostCPU(name, features)


#: The CPU an ahead-of-time bundle is generated for, inside `generating_for` (else the host).
_target_cpu: ContextVar[HostCPU | None] = ContextVar("glowviz_target_cpu", default=None)


def host_cpu() -> HostCPU:
    """The CPU we generate code for (host, unless overridden by the env variables, or by
    `generating_for` while a bundle is generated for another CPU)."""
    return _target_cpu.get() or _host_cpu(
        os.environ.get("GLOWVIZ_LLVM_CPU"), os.environ.get("GLOWVIZ_LLVM_FEATURES")
    )


@contextmanager
def generating_for(cpu: HostCPU) -> Iterator[None]:
    """Inside the block, kernels are specialised for `cpu` (its ISA picks tiles and vector
    width) instead of the host: the AOT bundle's cross-compilation. Never JIT inside it."""
    token = _target_cpu.set(cpu)
    try:
        yield
    finally:
        _target_cpu.reset(token)


@cache
def _target_machine(name: str, features: str) -> llvm.TargetMachine:
    import llvmlite.binding as llvm

    ensure_initialized()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(
        cpu=name, features=features, opt=3, reloc="default", codemodel="jitdefault", jit=True
    )


def target_machine() -> llvm.TargetMachine:
    """The shared TargetMachine for optimisation and assembly; never hand it to an engine."""
    cpu = host_cpu()
    with _lock:
        return _target_machine(cpu.name, cpu.features)


def new_target_machine() -> llvm.TargetMachine:
    """A fresh TargetMachine: an MCJIT engine takes ownership of (and frees) the one it gets."""
    cpu = host_cpu()
    ensure_initialized()
    return _target_machine.__wrapped__(cpu.name, cpu.features)


def _cpu_has(cpu: HostCPU, feature: str) -> bool:
    if cpu.features:
        return cpu.has(feature)
    # A forced CPU name without features: answer from well-known names.
    avx512 = ["skylake-avx512", "cascadelake", "icelake", "sapphirerapids", "znver4", "znver5"]
    avx512 += ("x86-64-v4",)
    avx2 = ["haswell", "broadwell", "skylake", "znver1", "znver2", "znver3", "alderlake"] + avx512
    avx2 += ("x86-64-v3",)
    vnni = ("cascadelake", "icelake", "sapphirerapids", "znver4", "znver5")
    table = {"avx512f": avx512, "avx2": avx2, "fma": avx2, "avx512vnni": vnni}
    table |= {"avx512bw": avx512, "avx512vl": avx512, "avxvnni": ("alderlake", "znver5")}
    return any(cpu.name.startswith(n) for n in table.get(feature, ()))


def has_avx512() -> bool:
    cpu = host_cpu()
    return _cpu_has(cpu, "avx512f")


def has_avx2() -> bool:
    cpu = host_cpu()
    return _cpu_has(cpu, "avx2") and _cpu_has(cpu, "fma")


def default_isa() -> Isa:
    """The kernel flavour for the current target: register tiles and vector width follow it."""
    if has_avx512():
        return "avx512"
    if has_avx2():
        return "avx2"
    return "generic"


IntIsa = Literal["vnni512", "vnni256", "avx2", "generic"]


def int8_isa() -> IntIsa:
    """The int8 dot-product flavour for the current target (kernels/qgemm.py): AVX-512 VNNI
    (vpdpbusd on 512-bit vectors), AVX-VNNI or AVX-512 VNNI with VL (256-bit vpdpbusd), AVX2
    (vpmaddwd on 16-bit pairs), else plain IR the vectoriser widens."""
    cpu = host_cpu()
    if has_avx512() and _cpu_has(cpu, "avx512vnni") and _cpu_has(cpu, "avx512bw"):
        return "vnni512"
    if has_avx2() and (
        _cpu_has(cpu, "avxvnni") or (_cpu_has(cpu, "avx512vnni") and _cpu_has(cpu, "avx512vl"))
    ):
        return "vnni256"
    if has_avx2():
        return "avx2"
    return "generic"


def vector_width_f32(isa: Isa | None = None) -> int:
    """float32 lanes per vector register: 16 (AVX-512), 8 (AVX2), 4 (SSE/other)."""
    return {"avx512": 16, "avx2": 8, "generic": 4}[isa or default_isa()]


def parse_and_verify(ir_text: str) -> llvm.ModuleRef:
    import llvmlite.binding as llvm

    ensure_initialized()
    mod = llvm.parse_assembly(ir_text)
    mod.verify()
    return mod


def optimize(
    module_ref: llvm.ModuleRef, speed_level: int = 3, tm: llvm.TargetMachine | None = None
) -> None:
    """Run the O3 module pipeline of the new pass manager in place (for `tm`, default: host)."""
    import llvmlite.binding as llvm

    tm = tm or target_machine()
    module_ref.triple = tm.triple
    module_ref.data_layout = str(tm.target_data)
    with _lock:
        pto = llvm.create_pipeline_tuning_options(speed_level=speed_level)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pto.loop_unrolling = True
        pb = llvm.create_pass_builder(tm, pto)
        mpm = pb.getModulePassManager()
        mpm.run(module_ref, pb)
