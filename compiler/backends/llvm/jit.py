"""JIT engine for the LLVM backend: IR text -> verify -> O3 -> MCJIT -> ctypes callables.

Compiled objects are cached in memory and on disk (``~/.cache/glowviz/llvm`` or
``$GLOWVIZ_CACHE_DIR``), keyed by sha256 of the IR text, CPU, features and llvmlite version, through
MCJIT's object-cache hooks; a disk hit skips the optimizer and the code generator.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import llvmlite
import llvmlite.binding as llvm
from llvmlite import ir

from compiler.backends.llvm import target
from compiler.errors import CodegenError

_CTYPES = {
    "ptr": ctypes.c_void_p,
    "i64": ctypes.c_int64,
    "i32": ctypes.c_int32,
    "i8": ctypes.c_int8,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
}


def cache_dir() -> Path:
    env = os.environ.get("GLOWVIZ_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "glowviz" / "llvm"


def module_key(ir_text: str) -> str:
    cpu = target.host_cpu()
    h = hashlib.sha256()
    for part in (ir_text, cpu.name, cpu.features, llvmlite.__version__):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _module_text(modules: ir.Module | str | Sequence[ir.Module | str]) -> str:
    if isinstance(modules, (ir.Module, str)):
        return str(modules)
    texts = [str(m) for m in modules]
    if len(texts) == 1:
        return texts[0]
    # Several modules: link them into the first so one object holds everything.
    ensure = target.parse_and_verify
    dst = ensure(texts[0])
    for t in texts[1:]:
        dst.link_in(ensure(t))
    return str(dst)


class CompiledModule:
    """One JIT-compiled module: function addresses, ctypes callables, optimized IR and asm."""

    def __init__(
        self,
        key: str,
        engine: llvm.ExecutionEngine,
        mod: llvm.ModuleRef,
        optimized_ir: str | None,
        cache_path: Path | None,
        from_disk: bool,
    ) -> None:
        self.key = key
        self.from_disk = from_disk
        self._engine = engine
        self._mod = mod
        self._optimized_ir = optimized_ir
        self._cache_path = cache_path
        self._asm: str | None = None
        self._cfuncs: dict[str, Any] = {}

    def address(self, name: str) -> int:
        addr = self._engine.get_function_address(name)
        if not addr:
            raise CodegenError(f"JIT: no function named {name!r} in module {self.key[:12]}")
        return addr

    def cfunc(self, name: str) -> Any:
        """A ctypes callable for ``name``; pointer args take ints (addresses) or ctypes pointers."""
        if name not in self._cfuncs:
            fn = self._mod.get_function(name)
            argtypes = [_CTYPES.get(str(a.type), ctypes.c_void_p) for a in fn.arguments]
            ret = str(fn.type)  # "ptr" under opaque pointers; use the global value type
            fty = str(fn.global_value_type)
            rt = fty.split(" ", 1)[0] if fty else ret
            restype = None if rt == "void" else _CTYPES.get(rt, ctypes.c_void_p)
            proto = ctypes.CFUNCTYPE(restype, *argtypes)
            self._cfuncs[name] = proto(self.address(name))
        return self._cfuncs[name]

    @property
    def optimized_ir(self) -> str:
        if self._optimized_ir is None and self._cache_path is not None:
            ll = self._cache_path.with_suffix(".ll")
            if ll.exists():
                self._optimized_ir = ll.read_text()
        return self._optimized_ir or ""

    def assembly(self, name: str | None = None) -> str:
        """Assembly of the whole module, or of the one function ``name``."""
        if self._asm is None:
            opt = target.parse_and_verify(self.optimized_ir or str(self._mod))
            self._asm = target.target_machine().emit_assembly(opt)
        if name is None:
            return self._asm
        m = re.search(rf"^{re.escape(name)}:.*?^\.Lfunc_end\d+:", self._asm, re.M | re.S)
        if not m:
            raise CodegenError(f"JIT: no assembly for function {name!r}")
        return m.group(0)


class JITEngine:
    """Compiles modules; one MCJIT engine per compiled module, with memory and disk caches."""

    _memory: dict[str, CompiledModule] = {}
    _mem_lock = threading.Lock()

    def __init__(self, *, disk_cache: bool = True, directory: Path | None = None) -> None:
        self.disk_cache = disk_cache and os.environ.get("GLOWVIZ_NO_DISK_CACHE") is None
        self.directory = directory

    def compile(self, modules: ir.Module | str | Sequence[ir.Module | str]) -> CompiledModule:
        text = _module_text(modules)
        key = module_key(text)
        with self._mem_lock:
            hit = self._memory.get(key)
        if hit is not None:
            return hit
        compiled = self._compile(text, key)
        with self._mem_lock:
            self._memory.setdefault(key, compiled)
            return self._memory[key]

    def _compile(self, text: str, key: str) -> CompiledModule:
        tm = target.new_target_machine()
        try:
            mod = target.parse_and_verify(text)
        except RuntimeError as e:
            raise CodegenError(f"LLVM rejected the generated IR: {e}") from e
        mod.name = key
        path: Path | None = None
        cached: bytes | None = None
        if self.disk_cache:
            d = self.directory or cache_dir()
            path = d / f"{key}.o"
            if path.exists():
                cached = path.read_bytes()
        optimized: str | None = None
        if cached is None:
            target.optimize(mod)
            optimized = str(mod)
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)

        def notify(m: llvm.ModuleRef, buf: bytes) -> None:
            if path is None or cached is not None:
                return
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(f".tmp{os.getpid()}")
                tmp.write_bytes(buf)
                os.replace(tmp, path)
                path.with_suffix(".ll").write_text(optimized or "")
            except OSError:
                pass  # a read-only cache only costs speed

        def getbuffer(m: llvm.ModuleRef) -> bytes | None:
            return cached

        engine.set_object_cache(notify, getbuffer)
        engine.add_module(mod)
        engine.finalize_object()
        engine.run_static_constructors()
        return CompiledModule(key, engine, mod, optimized, path, cached is not None)


_default: JITEngine | None = None


def default_engine() -> JITEngine:
    global _default
    if _default is None:
        _default = JITEngine()
    return _default
