"""JIT engine for the LLVM backend: IR text -> verify -> O3 -> MCJIT -> ctypes callables.

Compiled objects are cached on disk (``~/.cache/glowviz/llvm`` or ``$GLOWVIZ_CACHE_DIR``, one
checked entry file per key: ``cache.py``) by the hash of their IR text, and in memory, least
recently used out first, up to a count and a byte budget (``ModuleCache``). ``compile_keyed``
takes a program key computed before the IR exists (``cache.program_key``), whose entry names its
object, and builds the IR only on a miss. A disk hit hands MCJIT the stored object through its
object-cache hooks: no IR is parsed, optimized or code-generated.
A ``CompiledModule`` shows the optimized IR and the host assembly of single functions: the
assembly of a few functions is generated on its own, never the whole module's.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import signal
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import llvmlite
import llvmlite.binding as llvm
from llvmlite import ir

import compiler.backends.llvm.target as target
from compiler.backends.llvm.cache import cache_dir, entry_path, read_entry, write_entry_later
from compiler.errors import CodegenError
from compiler.limits import MIB, ensure_headroom

_CTYPES = {
    "ptr": ctypes.c_void_p,
    "i64": ctypes.c_int64,
    "i32": ctypes.c_int32,
    "i8": ctypes.c_int8,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
}


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


_FUNC_RE = re.compile(r"^define [^\n]*@(\"?[\w.$]+\"?)\(.*?^}\n", re.M | re.S)


_REF_RE = re.compile(r"@\"?([\w.$]+)\"?")


def split_functions(ir_text: str) -> dict[str, str]:
    """The text of every function defined in an LLVM IR module, by name."""
    return {m.group(1).strip('"'): m.group(0) for m in _FUNC_RE.finditer(ir_text)}


def _asm_of(asm: str, name: str) -> str | None:
    """One function's code in a module's assembly: from its label to its end marker."""
    m = re.search(rf"^{re.escape(name)}:.*?^\.Lfunc_end\d+:", asm, re.M | re.S)
    return m.group(0) if m else None


class CompiledModule:
    """One JIT-compiled module: function addresses, ctypes callables, optimized IR and asm."""

    def __init__(
        self,
        key: str,
        engine: llvm.ExecutionEngine,
        mod: llvm.ModuleRef,
        optimized_ir: str | None,
        from_disk: bool,
        nbytes: int = 0,
    ) -> None:
        self.key = key
        self.from_disk = from_disk
        #: What it weighs in the memory cache: IR text and object code, in bytes.
        self.nbytes = nbytes
        self._engine = engine
        self._mod = mod
        self._optimized_ir = optimized_ir
        self._asm: str | None = None
        self._fn_ir: dict[str, str] | None = None
        self._decls: str | None = None  # the optimized IR without its function bodies
        self._fn_asm: dict[str, str] = {}
        self._asm_lock = threading.Lock()
        self._cfuncs: dict[str, Any] = {}
        #: Threads of the module's own pool (kernels/parallel.py); 1: none started.
        self.threads = 1
        self._finalizer: weakref.finalize | None = None
        #: (return type, argument types) of every exported function, as IR type text.
        self.signatures: dict[str, tuple[str, list[str]]] = {}
        self._optimized_raw: bytes | memoryview | None = None  # a disk hit's, decoded on use

    def address(self, name: str) -> int:
        addr = self._engine.get_function_address(name)
        if not addr:
            raise CodegenError(f"JIT: no function named {name!r} in module {self.key[:12]}")
        return addr

    def global_address(self, name: str) -> int:
        addr = self._engine.get_global_value_address(name)
        if not addr:
            raise CodegenError(f"JIT: no global named {name!r} in module {self.key[:12]}")
        return addr

    def cfunc(self, name: str) -> Any:
        """A ctypes callable for ``name``; pointer args take ints (addresses) or ctypes pointers."""
        if name not in self._cfuncs:
            sig = self.signatures.get(name)
            if sig is None:
                raise CodegenError(f"JIT: no function named {name!r} in module {self.key[:12]}")
            rt, args = sig
            argtypes = [_CTYPES.get(a, ctypes.c_void_p) for a in args]
            restype = None if rt == "void" else _CTYPES.get(rt, ctypes.c_void_p)
            proto = ctypes.CFUNCTYPE(restype, *argtypes)
            self._cfuncs[name] = proto(self.address(name))
        return self._cfuncs[name]

    def set_threads(self, n: int) -> None:
        """Run the module's parallel loops on ``n`` threads (the caller's and n - 1 workers of
        the module's pool; 1 stops the workers). Results do not depend on ``n``."""
        n = max(1, int(n))
        if n == self.threads:
            return
        if self._finalizer is None:
            try:
                stop = self.cfunc("glowviz_pool_stop")
            except (CodegenError, NameError):
                raise CodegenError("this module has no thread pool") from None
            # Workers run the module's code: stop them before the engine goes.
            self._finalizer = weakref.finalize(self, stop_pool, stop, self._engine)
        self.cfunc("glowviz_pool_start")(n)
        self.threads = n

    @property
    def optimized_ir(self) -> str:
        if self._optimized_ir is None and self._optimized_raw is not None:
            self._optimized_ir = bytes(self._optimized_raw).decode()
            self._optimized_raw = None
        return self._optimized_ir or ""

    def _source_ir(self) -> str:
        """The optimized IR (the unoptimized module when a read-only cache lost it)."""
        return self.optimized_ir or str(self._mod)

    def _functions(self) -> dict[str, str]:
        if self._fn_ir is None:
            self._fn_ir = split_functions(self._source_ir())
        return self._fn_ir

    def function_ir(self, name: str) -> str | None:
        """The optimized IR of function ``name``, or None when it has no body of its own
        (inlined away, or a declaration)."""
        return self._functions().get(name)

    def assembly(self, name: str | None = None) -> str:
        """Host assembly of the one function ``name`` (see ``assembly_of``), or of the whole
        module (seconds on a model of some size: prefer single functions)."""
        if name is not None:
            text = self.assembly_of([name]).get(name)
            if text is None:
                raise CodegenError(f"JIT: no assembly for function {name!r}")
            return text
        with self._asm_lock:
            if self._asm is None:
                mod = target.parse_and_verify(self._source_ir())
                self._asm = target.target_machine().emit_assembly(mod)
            return self._asm

    def assembly_of(self, names: Iterable[str]) -> dict[str, str]:
        """Host assembly of each function in ``names`` that has a body of its own, by name.

        Those functions (and what they call) are code-generated alone, in a module holding
        only them and the declarations, so the cost follows their size, not the module's
        (on a small ResNet: tens of ms for an element-wise entry instead of seconds for the
        module). Results are kept.
        """
        names = list(dict.fromkeys(names))
        with self._asm_lock:
            todo = [n for n in names if n not in self._fn_asm]
            asm = self._asm if todo and self._asm is not None else None
            if todo and asm is None:
                asm = target.target_machine().emit_assembly(self._module_of(todo))
            for n in todo:
                text = _asm_of(asm or "", n)
                if text is not None:
                    self._fn_asm[n] = text
            return {n: self._fn_asm[n] for n in names if n in self._fn_asm}

    def _module_of(self, names: list[str]) -> llvm.ModuleRef:
        """A module defining ``names`` and every function they reference, nothing else."""
        fns = self._functions()
        keep: dict[str, None] = {}
        work = [n for n in names if n in fns]
        while work:
            n = work.pop()
            if n in keep:
                continue
            keep[n] = None
            work.extend(r for r in _REF_RE.findall(fns[n]) if r in fns and r not in keep)
        if self._decls is None:
            self._decls = _FUNC_RE.sub("", self._source_ir())
        try:
            return llvm.parse_assembly(self._decls + "".join(fns[n] for n in keep))
        except RuntimeError:
            # Something outside the functions refers to one left out: keep the whole module
            # and have code generation skip the others (slower: their IR passes still run).
            mod = llvm.parse_assembly(self._source_ir())
            for fn in mod.functions:
                if not fn.is_declaration and fn.name not in keep:
                    fn.linkage = llvm.Linkage.available_externally
            return mod


def stop_pool(stop: Any, engine: llvm.ExecutionEngine) -> None:
    """Join a module's pool workers (``engine`` is passed to stay alive until then)."""
    stop()


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


class _Weighed(Protocol):
    @property
    def nbytes(self) -> int: ...


M = TypeVar("M", bound=_Weighed)


class ModuleCache(Generic[M]):
    """Compiled modules in memory by key, least recently used evicted first once there are more
    than ``max_entries`` of them or they weigh more than ``max_bytes`` (``CompiledModule.nbytes``).

    Eviction only forgets: executors keep the modules they run alive. Defaults: 64 modules,
    512 MiB; ``$GLOWVIZ_JIT_CACHE_ENTRIES`` and ``$GLOWVIZ_JIT_CACHE_MB`` change them.
    """

    def __init__(self, max_entries: int | None = None, max_bytes: int | None = None) -> None:
        self.max_entries = (
            max_entries if max_entries is not None else _env_int("GLOWVIZ_JIT_CACHE_ENTRIES", 64)
        )
        self.max_bytes = (
            max_bytes
            if max_bytes is not None
            else _env_int("GLOWVIZ_JIT_CACHE_MB", 512) * (1 << 20)
        )
        self._items: OrderedDict[str, M] = OrderedDict()
        self._lock = threading.Lock()
        self.nbytes = 0

    def get(self, key: str) -> M | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
            return hit

    def put(self, key: str, compiled: M) -> M:
        """Insert (unless another thread got there first: then that one), evict, return it."""
        with self._lock:
            have = self._items.get(key)
            if have is not None:
                self._items.move_to_end(key)
                return have
            self._items[key] = compiled
            self.nbytes += compiled.nbytes
            while len(self._items) > 1 and (
                len(self._items) > self.max_entries or self.nbytes > self.max_bytes
            ):
                _, old = self._items.popitem(last=False)
                self.nbytes -= old.nbytes
            return compiled

    def pop(self, key: str, default: M | None = None) -> M | None:
        with self._lock:
            item = self._items.pop(key, None)
            if item is None:
                return default
            self.nbytes -= item.nbytes
            return item

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.nbytes = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items


def jit_headroom(text: str) -> int:
    """Address space that O3 and MCJIT may want for a module of IR `text`: measured peaks are
    about 50 MiB for the sample models' modules (0.1-0.7 MiB of IR)."""
    return jit_headroom_bytes(len(text))


def jit_headroom_bytes(text_len: int) -> int:
    return 128 * MIB + 16 * text_len


def static_bytes(mod: llvm.ModuleRef, tm: llvm.TargetMachine) -> int:
    """Bytes of the module's global variables (its kernels' static buffers)."""
    td = tm.target_data
    return sum(td.get_abi_size(g.global_value_type) for g in mod.global_variables)


@dataclass
class ProgramModule:
    """What ``JITEngine.compile_keyed`` returns: the compiled module and the sections stored
    with the program (the executor's program info, the packed weights)."""

    key: str
    module: CompiledModule
    extras: Mapping[str, bytes | memoryview]
    #: The program's entry was found (in memory or on disk): nothing was generated.
    from_cache: bool

    @property
    def nbytes(self) -> int:
        return sum(len(v) for v in self.extras.values())


class JITEngine:
    """Compiles modules; one MCJIT engine per compiled module, with memory and disk caches.

    Two kinds of entries: an object (``<hash of the IR text>.gvz``: the object, the optimized
    IR, the exported signatures), and a program (``<program key>.gvz``: the key of its object
    and the sections the caller stores beside it). Programs whose IR comes out the same share
    one object, as they did when the IR text was the only key."""

    #: Shared by every engine (one process, one host target): objects by IR-text key ...
    _memory: ModuleCache[CompiledModule] = ModuleCache()
    #: ... and programs by their key (``ProgramModule``, holding its module).
    _programs: ModuleCache[ProgramModule] = ModuleCache()

    def __init__(self, *, disk_cache: bool = True, directory: Path | None = None) -> None:
        self.disk_cache = disk_cache and os.environ.get("GLOWVIZ_NO_DISK_CACHE") is None
        self.directory = directory

    def _path(self, key: str) -> Path | None:
        return entry_path(self.directory or cache_dir(), key) if self.disk_cache else None

    def compile(self, modules: ir.Module | str | Sequence[ir.Module | str]) -> CompiledModule:
        """Compile IR (modules are linked into one), keyed by the hash of its text."""
        text = _module_text(modules)
        compiled = self._object(module_key(text), lambda: text)
        assert compiled is not None
        return compiled

    def _object(self, key: str, text: Callable[[], str] | None) -> CompiledModule | None:
        """The object under ``key``: from memory, from disk, or (``text`` given) compiled."""
        hit = self._memory.get(key)
        if hit is not None:
            return hit
        path = self._path(key)
        loaded = self._load(key, path) if path is not None else None
        if loaded is None:
            if text is None:
                return None
            loaded = self._compile(text(), key, path)
        return self._memory.put(key, loaded)

    def forget(self, key: str) -> None:
        """Drop the program ``key`` and its module from the memory caches (benchmarks)."""
        program = self._programs.pop(key)
        if program is not None:
            self._memory.pop(program.module.key)

    def compile_keyed(
        self, key: str, build: Callable[[], tuple[str, Mapping[str, bytes | memoryview]]]
    ) -> ProgramModule:
        """The program under ``key`` (computed before any IR exists; it must determine what
        ``build`` returns): from memory, from its disk entry and its object's, or built:
        ``build()`` returns the IR text and the sections to store with the program, and is
        called only on a miss. A miss whose IR text has an object already loads that object."""
        hit = self._programs.get(key)
        if hit is not None:  # found: generated nothing now, whoever built it before
            return hit if hit.from_cache else replace(hit, from_cache=True)
        path = self._path(key)
        found = None
        if path is not None:
            entry = read_entry(path, key, required=("object_key",))
            if entry is not None:
                module = self._object(bytes(entry["object_key"]).decode(), None)
                if module is not None:
                    stored = {n: v for n, v in entry.items() if n != "object_key"}
                    found = ProgramModule(key, module, stored, True)
        if found is None:
            text, extras = build()
            module = self._object(module_key(text), lambda: text)
            assert module is not None
            if path is not None:
                write_entry_later(path, key, {"object_key": module.key.encode(), **extras})
            found = ProgramModule(key, module, dict(extras), False)
        return self._programs.put(key, found)

    def _load(self, key: str, path: Path) -> CompiledModule | None:
        """The module stored at ``path``, or None (no entry, a damaged or foreign one, an
        object MCJIT does not accept): the caller compiles afresh and rewrites the entry."""
        entry = read_entry(path, key, required=("meta", "object", "ir"))
        if entry is None:
            return None
        try:
            meta = json.loads(bytes(entry["meta"]))
            signatures = {
                str(n): (str(r), [str(a) for a in args]) for n, r, args in meta["signatures"]
            }
            text_len, statics = int(meta["text_len"]), int(meta["statics"])
        except (ValueError, KeyError, TypeError):
            return None
        ensure_headroom("loading the cached code", jit_headroom_bytes(text_len) + statics)
        obj = bytes(entry["object"])
        tm = target.new_target_machine()
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
        # MCJIT wants a module to load: an empty one named by the key, whose object the
        # cache hook hands over instead of generating one.
        mod = llvm.parse_assembly("")
        mod.name = key
        mod.triple = tm.triple
        mod.data_layout = str(tm.target_data)

        def getbuffer(m: llvm.ModuleRef) -> bytes | None:
            return obj if m.name == key else None

        engine.set_object_cache(lambda m, buf: None, getbuffer)
        try:
            with _interrupts_deferred():
                engine.add_module(mod)
                engine.finalize_object()
                engine.run_static_constructors()
        except RuntimeError:
            return None
        if any(not engine.get_function_address(n) for n in signatures):
            return None  # not the object its table describes
        nbytes = len(entry["ir"]) + len(obj)
        compiled = CompiledModule(key, engine, mod, None, True, nbytes)
        compiled.signatures = signatures
        compiled._optimized_raw = entry["ir"]
        return compiled

    def _compile(self, text: str, key: str, path: Path | None) -> CompiledModule:
        # LLVM aborts the whole process (SIGABRT) when one of its allocations fails, as under a
        # memory ulimit with a large arena already allocated: refuse cleanly first.
        ensure_headroom("JIT-compiling the generated code", jit_headroom(text))
        tm = target.new_target_machine()
        try:
            mod = target.parse_and_verify(text)
        except RuntimeError as e:
            raise CodegenError(f"LLVM rejected the generated IR: {e}") from e
        # The kernels' static scratch buffers (padded copies of an input, tiles) are sections
        # MCJIT allocates when it loads the object: 2.3 GB for a ResNet 100,000 pixels wide,
        # 275 GB for a conv with stride 2^31 (mutants 83 and 1909 of seed 2026 aborted).
        statics = static_bytes(mod, tm)
        if statics:
            ensure_headroom("JIT-compiling the generated code", jit_headroom(text) + statics)
        signatures = _signatures(mod)
        mod.name = key
        target.optimize(mod)
        optimized = str(mod)
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
        objects: list[bytes] = []

        # MCJIT calls both hooks for every module of the engine, the empty seed module
        # included, in an order it does not promise: only `mod` (named by its key) is kept.
        def notify(m: llvm.ModuleRef, buf: bytes) -> None:
            if m.name == key:
                objects.append(bytes(buf))

        engine.set_object_cache(notify, lambda m: None)
        with _interrupts_deferred():
            engine.add_module(mod)
            engine.finalize_object()
            engine.run_static_constructors()
        obj = objects[-1] if objects else b""
        if path is not None and obj:
            meta = {
                "text_len": len(text),
                "statics": statics,
                "signatures": [[n, r, a] for n, (r, a) in signatures.items()],
            }
            sections = {"meta": json.dumps(meta).encode(), "object": obj}
            write_entry_later(path, key, {**sections, "ir": optimized.encode()})
        nbytes = len(text) + len(optimized) + len(obj)
        compiled = CompiledModule(key, engine, mod, optimized, False, nbytes)
        compiled.signatures = signatures
        return compiled


def _signatures(mod: llvm.ModuleRef) -> dict[str, tuple[str, list[str]]]:
    """(return type, argument types) of every function the module exports, as IR type text:
    what ``CompiledModule.cfunc`` makes its ctypes prototypes of."""
    out = {}
    for fn in mod.functions:
        if fn.is_declaration or fn.linkage in (llvm.Linkage.internal, llvm.Linkage.private):
            continue
        fty = str(fn.global_value_type)
        ret = fty.split(" ", 1)[0] if fty else "void"
        out[fn.name] = (ret, [str(a.type) for a in fn.arguments])
    return out


@contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Hold Ctrl-C while MCJIT runs the object-cache callbacks: a KeyboardInterrupt raised inside
    a ctypes callback is printed and swallowed (a traceback, and the interrupt lost). It is
    raised once the compile returns. Only on the main thread and with Python's default handler
    (the IDE and others keep theirs)."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    pending: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: pending.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if pending:
        raise KeyboardInterrupt


_default: JITEngine | None = None


def default_engine() -> JITEngine:
    global _default
    if _default is None:
        _default = JITEngine()
    return _default
