"""The LLVM backend's disk cache: program keys computed before code generation, and the entry
files that hold a compiled module with everything the executor needs to run it.

A JIT compile is keyed by what determines its machine code (``program_key``): the low-level
program (instructions, attributes, types), the memory plan's offsets the code bakes in, the
digests of the constants' bytes, the code generator's options and module-level switches, the
target CPU and features, the LLVM / llvmlite / numpy / ml_dtypes versions, and a digest of the
code generator's own sources (``codegen_version``). So a hit loads the object, the entry names,
the packed weights and the constants the kernels read in place (``ProgramInfo``) without
running a single emitter (``JITEngine.compile_keyed``: the program's entry names its object,
which is stored under the hash of its IR text, so programs with the same code share it). An
entry is one file written through a temporary file and a rename, checked on read (format, key,
every section's length and sha256): anything else is a miss.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import struct
import sys
import threading
import time
import types
import weakref
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import llvmlite
import llvmlite.binding as llvm
import ml_dtypes
import numpy as np

import compiler.backends.llvm.target as target
from compiler.errors import CompilerError
from compiler.lir.ir import LIRFunction, WeightVar, view_root
from compiler.graph.printer import format_attr
from compiler.memory.regions import ArenaLayout

if TYPE_CHECKING:
    from compiler.backends.llvm.codegen import Addresses, Program

#: Bumped whenever the entry layout or what a key covers changes.
FORMAT = 2
_MAGIC = b"GLOWVIZ-JIT\0"
_HEAD = struct.Struct("<12sII")  # magic, format, length of the JSON table of sections

_PACKAGE = Path(__file__).resolve().parent  # compiler/backends/llvm
_ROOT = _PACKAGE.parents[2]  # the directory holding the `compiler` package
#: The code generator's sources: the import closure of these decides the code (the bundle,
#: the executor and the benchmark peak only use it).
_ROOTS = ("codegen.py", "target.py", "jit.py", "cache.py", "emitters", "kernels")
_IMPORT_RE = re.compile(
    r"^[ \t]*(?:from[ \t]+(compiler(?:\.\w+)*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]*)"
    r"|import[ \t]+(compiler(?:\.\w+)*))",
    re.M,
)


# -- what decides the code ------------------------------------------------------------------------


@cache
def _module_file(name: str) -> Path | None:
    base = os.path.join(_ROOT, *name.split("."))
    for p in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(p):
            return Path(p)
    return None


def _imports(text: str) -> Iterator[str]:
    for m in _IMPORT_RE.finditer(text):
        if m.group(3):
            yield m.group(3)
            continue
        pkg = m.group(1)
        yield pkg
        for item in m.group(2).strip("() \t\n").split(","):
            name = item.split(" as ")[0].strip()
            if name.isidentifier():
                yield f"{pkg}.{name}"  # a submodule, when it is one (else no file: skipped)


@cache
def source_files() -> tuple[Path, ...]:
    """The Python files the generated code depends on: the code generator's modules and
    everything they import from ``compiler`` (function-level imports included), with the
    packages' ``__init__`` files on the way."""
    todo = [p for r in _ROOTS for p in sorted(_PACKAGE.joinpath(r).rglob("*.py"))]
    todo += [_PACKAGE / r for r in _ROOTS if r.endswith(".py")]
    seen: dict[Path, None] = {}
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        seen[path] = None
        text = path.read_text()
        for name in _imports(text):
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                f = _module_file(".".join(parts[:i]))
                if f is not None and f not in seen:
                    todo.append(f)
    return tuple(sorted(seen))


@cache
def codegen_version() -> str:
    """A digest of the code generator's sources (``source_files``) and of the versions of what
    else shapes the machine code, computed once per process: editing any emitter, kernel or
    module they import changes every key."""
    h = hashlib.sha256(sources_digest(source_files()).encode())
    versions = [
        f"format {FORMAT}",
        f"python {sys.version_info[0]}.{sys.version_info[1]}",
        f"llvm {'.'.join(map(str, llvm.llvm_version_info))}",
        f"llvmlite {llvmlite.__version__}",
        f"numpy {np.__version__}",
        f"ml_dtypes {ml_dtypes.__version__}",
    ]
    h.update("\n".join(versions).encode())
    return h.hexdigest()


def sources_digest(paths: Iterable[Path]) -> str:
    """A digest of the files' names (relative to the ``compiler`` package's parent when inside
    it) and bytes."""
    h = hashlib.sha256()
    for path in paths:
        name = path.relative_to(_ROOT) if path.is_relative_to(_ROOT) else path
        h.update(str(name).encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


@cache
def _own_files() -> frozenset[str]:
    return frozenset(str(p) for p in source_files() if p.is_relative_to(_PACKAGE))


#: sys.modules' values when `_loaded_codegen_modules` last looked, and what it found then.
_LOADED: tuple[tuple[Any, ...], list[types.ModuleType]] = ((), [])


def _loaded_codegen_modules() -> list[types.ModuleType]:
    """The code generator's own modules (those under ``compiler/backends/llvm``) loaded now.

    Every program key asks, and a look at each of the process's ~2,000 modules' ``__file__``
    was 1 ms of each small model's compile (a tenth of the ONNX node suite's LLVM time): the
    answer is kept while sys.modules holds the same module objects (compared by identity)."""
    global _LOADED
    now = tuple(sys.modules.values())
    if _unchanged(_LOADED[0], now):
        return _LOADED[1]
    files = _own_files()
    out = []
    for m in now:
        f = getattr(m, "__file__", None)
        if f and f in files:
            out.append(m)
    found = sorted(out, key=lambda m: m.__name__)
    _LOADED = (now, found)
    return found


_SIMPLE = (bool, int, float, str, type(None))
_FUNCTIONS: weakref.WeakKeyDictionary[types.FunctionType, str] = weakref.WeakKeyDictionary()


def _describe(value: Any, depth: int = 0) -> str | None:
    """A stable text for a module-level switch, or None for what is not one."""
    if isinstance(value, _SIMPLE):
        return repr(value)
    if depth > 3:
        return None
    if isinstance(value, (tuple, list)) and all(isinstance(v, _SIMPLE) for v in value):
        return repr(tuple(value))
    if isinstance(value, (frozenset, set)) and all(isinstance(v, _SIMPLE) for v in value):
        return repr(sorted(value, key=repr))
    if isinstance(value, dict):
        # tables of switches or of functions (the emitter table); not memo dicts of objects
        items = [(repr(k), _describe(v, depth + 1)) for k, v in value.items()]
        if any(d is None for _, d in items):
            return None
        return repr(sorted(items))
    if isinstance(value, types.FunctionType):
        known = _FUNCTIONS.get(value)
        if known is None:
            known = _describe_function(value, depth)
            if value.__module__.startswith("compiler."):
                _FUNCTIONS[value] = known  # fixed by its source (test stand-ins are not kept)
        return known
    if isinstance(value, types.BuiltinFunctionType):
        return f"{getattr(value, '__module__', None)}.{value.__qualname__}"
    return None


def _describe_function(fn: types.FunctionType, depth: int) -> str:
    """A function by its import path when that path leads back to it. Else (a closure made by
    a factory, a lambda, a test's stand-in) by its name, its code and what its closure holds;
    a closure value with no stable text is named by its identity, which no other process
    shares (such a compile never reads another process's entry). The code of ``compiler``'s
    own functions is covered by ``codegen_version``: their closures' objects are named by type."""
    mod, qual = fn.__module__ or "", fn.__qualname__
    obj: Any = sys.modules.get(mod)
    for part in qual.split("."):
        obj = getattr(obj, part, None)
    if obj is fn:
        return f"{mod}.{qual}"
    ours = mod.startswith("compiler.")
    code = fn.__code__
    where = f"{code.co_firstlineno}" if ours else _code_digest(code)
    values = []
    for cell in fn.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:
            values.append(None)
    values += fn.__defaults__ or ()
    values += (fn.__kwdefaults__ or {}).items()
    texts = []
    for v in values:
        text = _describe(v, depth + 1)
        if text is None:
            text = type(v).__qualname__ if ours else f"<{id(v):#x} pid {os.getpid()}>"
        texts.append(text)
    return f"{mod}.{qual}@{where}[{', '.join(texts)}]"


def _code_digest(code: types.CodeType) -> str:
    h = hashlib.sha256(code.co_code)
    for c in code.co_consts:
        h.update((_code_digest(c) if isinstance(c, types.CodeType) else repr(c)).encode())
    h.update(repr(code.co_names).encode())
    return h.hexdigest()[:16]


def _switch_values(m: types.ModuleType) -> list[tuple[str, Any]]:
    out = []
    for name, value in m.__dict__.items():
        if name.startswith("__"):
            continue
        if isinstance(value, dict) and name.startswith("_"):
            continue  # private dicts are memos (weight digests, task classes)
        if name.isupper() or isinstance(value, types.FunctionType):
            out.append((name, value))
    return out


#: Per module: its globals when last described (keys and values, held: compared by identity,
#: no id is reused meanwhile), its tables' entries then, and the digest of their texts.
_SEEN: dict[str, tuple[tuple[Any, ...], dict[str, tuple[Any, ...]], str]] = {}


def _unchanged(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    try:
        return a == b  # element by element, identity first: C speed when nothing changed
    except Exception:  # noqa: BLE001 - an array or other value without a plain truth value
        return False


def _module_digest(m: types.ModuleType) -> str:
    glob = (tuple(m.__dict__), tuple(m.__dict__.values()))
    seen = _SEEN.get(m.__name__)
    if seen is not None and _unchanged(seen[0], glob):
        tables = seen[1]
        if all(_unchanged(items, tuple(m.__dict__[n].items())) for n, items in tables.items()):
            return seen[2]
    texts = []
    tables = {}
    for name, value in _switch_values(m):
        text = _describe(value)
        if text is not None:
            texts.append(f"{m.__name__}.{name}={text}")
            if isinstance(value, dict):
                tables[name] = tuple(value.items())
    digest = hashlib.sha256("\0".join(texts).encode()).hexdigest()
    _SEEN[m.__name__] = (glob, tables, digest)
    return digest


def switches_digest() -> str:
    """A digest of the module-level values the code generator reads now, described as text
    (``_module_digest``: every upper-case constant -- tile sizes, chunk sizes, A/B switches,
    public tables such as the emitter table -- and every function): a test or benchmark that
    changes one (``monkeypatch.setattr(parallel, "CHUNK_FMAS", 64)``) gets keys of its own.
    A module's part is described again only when one of its values (or a table's entry) is
    another object than last time."""
    h = hashlib.sha256()
    for m in _loaded_codegen_modules():
        h.update(_module_digest(m).encode())
    return h.hexdigest()


def program_key(
    lir: LIRFunction, plan: ArenaLayout, *, fuse: bool, conv_strategy: str | None
) -> str:
    """The key of the module `CodeGen(lir, plan, fuse=..., conv_strategy=...)` generates,
    computed without generating it (``conv_strategy`` already resolved from the environment).

    Values are named by position (weights ``w<i>`` in declaration order, instructions by
    index): the code never depends on value names (entries are ``instr_<index>``), so programs
    that differ only in names share an entry, as they shared their IR text's."""
    cpu = target.host_cpu()
    h = hashlib.sha256()
    head = [
        "glowviz program",
        codegen_version(),
        switches_digest(),
        f"cpu {cpu.name} {cpu.features}",
        f"fuse {fuse} conv_strategy {conv_strategy}",
        f"alignment {plan.alignment}",
        "regions " + repr(sorted((k, int(v)) for k, v in plan.region_sizes.items())),
    ]
    h.update("\n".join(head).encode() + b"\n")
    ref: dict[int, str] = {}
    lines = []
    for i, w in enumerate(lir.weights.values()):
        ref[id(w)] = f"w{i}"
        lines.append(f"w{i} {w.mutability} {w.role} {w.type} {_where(plan, w.name)}")
        if w.data is not None:
            lines.append(f" data {w.digest} {w.data.dtype.str} {w.data.shape}")
    for i, ins in enumerate(lir.code):
        ref[id(ins)] = f"i{i}"
        ops = ", ".join(f"@{m} {ref.get(id(v)) or f'?{v.name}:{v.type}'}" for v, m in ins.operands)
        try:
            attrs = ", ".join(f"{k} = {format_attr(v)}" for k, v in ins.attrs.items())
        except TypeError:  # an attribute value the printer has no form for: by its repr
            attrs = repr(ins.attrs)
        line = f"i{i} {ins.kind} {ops} {{{attrs}}} : {ins.type}"
        if ins.is_alloc:
            line += f" @ {_where(plan, ins.name)}"
        lines.append(line)
    h.update("\n".join(lines).encode())
    return h.hexdigest()


def _where(plan: ArenaLayout, name: str) -> str:
    try:
        region, offset = plan.offset_of(name)
    except (KeyError, CompilerError):
        return "unplanned"  # code generation refuses it: nothing is cached
    return f"{region}+{int(offset)}"


# -- what the executor needs of a program ---------------------------------------------------------


@dataclass(frozen=True)
class InstrInfo:
    """One instruction's entry (None: no code) and the kernels it calls."""

    index: int
    kind: str
    entry: str | None
    kernels: tuple[str, ...]
    strategy: str


@dataclass(frozen=True)
class ProgramInfo:
    """What the executor reads of a generated program at run time, without its LLVM module:
    stored in the cache entry beside the object code."""

    instrs: tuple[InstrInfo, ...]
    #: Instruction indices run by each call of `@run_all`.
    groups: tuple[tuple[int, ...], ...]
    run_entries: frozenset[str]
    kernel_count: int
    #: Bytes of the extended constant region (the plan's, then the packed weights).
    constant_size: int
    #: Where the packed weights start in it (the plan's constant size, aligned).
    blob_start: int
    #: (offset in the constant region, weight's position in the declare section, byte offset
    #: in the weight, bytes) of every constant some kernel reads in place. No names: programs
    #: that differ only in names share an entry.
    constant_reads: tuple[tuple[int, int, int, int], ...]
    #: Whether the module has the status global (integer division by zero reports).
    has_status: bool

    @property
    def step_entries(self) -> list[str]:
        """The entries `@run_all` does not call (see ``Program.step_entries``)."""
        return [i.entry for i in self.instrs if i.entry and i.entry not in self.run_entries]

    @classmethod
    def of(
        cls,
        program: Program,
        addresses: Addresses,
        blob_start: int,
        weights: Iterable[WeightVar],
    ) -> ProgramInfo:
        from compiler.backends.llvm.emitters.common import STATUS_GLOBAL

        position = {id(w): i for i, w in enumerate(weights)}
        reads: dict[tuple[int, int], tuple[int, int, int, int]] = {}
        for ic in program.instrs:
            for call in ic.calls:
                for arg in call.args:
                    if arg.value is None:
                        continue
                    region, off, size = addresses.of(arg.value)
                    if region == 0 and (off, size) not in reads:
                        root, inner = view_root(arg.value)
                        assert isinstance(root, WeightVar) and root.data is not None, root.name
                        reads[(off, size)] = (off, position[id(root)], inner, size)
        return cls(
            instrs=tuple(
                InstrInfo(
                    ic.index,
                    ic.kind,
                    ic.entry,
                    tuple(dict.fromkeys(c.name for c in ic.calls)),
                    ic.strategy,
                )
                for ic in program.instrs
            ),
            groups=tuple(tuple(g) for g in program.groups),
            run_entries=program.run_entries,
            kernel_count=program.kernel_count,
            constant_size=program.constant_size,
            blob_start=blob_start,
            constant_reads=tuple(v for _, v in sorted(reads.items())),
            has_status=STATUS_GLOBAL in program.module.globals,
        )

    def to_json(self) -> bytes:
        d = {
            "instrs": [
                [i.index, i.kind, i.entry, list(i.kernels), i.strategy]
                for i in self.instrs
            ],
            "groups": [list(g) for g in self.groups],
            "run_entries": sorted(self.run_entries),
            "kernel_count": self.kernel_count,
            "constant_size": self.constant_size,
            "blob_start": self.blob_start,
            "constant_reads": [list(r) for r in self.constant_reads],
            "has_status": self.has_status,
        }
        return json.dumps(d, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes | memoryview) -> ProgramInfo:
        d = json.loads(bytes(raw))
        return cls(
            instrs=tuple(
                InstrInfo(int(i), str(k), e, tuple(ks), str(s)) for i, k, e, ks, s in d["instrs"]
            ),
            groups=tuple(tuple(int(x) for x in g) for g in d["groups"]),
            run_entries=frozenset(d["run_entries"]),
            kernel_count=int(d["kernel_count"]),
            constant_size=int(d["constant_size"]),
            blob_start=int(d["blob_start"]),
            constant_reads=tuple(
                (int(o), int(w), int(i), int(s)) for o, w, i, s in d["constant_reads"]
            ),
            has_status=bool(d["has_status"]),
        )


# -- entry files ----------------------------------------------------------------------------------


def cache_dir() -> Path:
    env = os.environ.get("GLOWVIZ_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "glowviz" / "llvm"


def entry_path(directory: Path, key: str) -> Path:
    return directory / f"{key}.gvz"


def write_entry(path: Path, key: str, sections: Mapping[str, bytes | memoryview]) -> bool:
    """Write an entry atomically (a temporary file of this process, then a rename: readers see
    the old file or the whole new one, and concurrent writers of one key each rename a whole
    file). False when the directory is not writable (a read-only cache only costs speed)."""
    table = [
        [name, len(data), hashlib.sha256(data).hexdigest()] for name, data in sections.items()
    ]
    head = json.dumps({"key": key, "sections": table}, separators=(",", ":")).encode()
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}.{id(sections):x}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(_HEAD.pack(_MAGIC, FORMAT, len(head)))
            f.write(head)
            for data in sections.values():
                f.write(data)
        os.replace(tmp, path)
        return True
    except OSError:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        return False


class _EntryWriter:
    """Writes entries on one background thread: a cold compile hands its entry over (the
    sections must stay unchanged: bytes, and the executor's packed weights, which nothing
    writes after packing) and its executor is ready without waiting for ~100 MB of
    checksums and file writes (ResNet-50: 0.1-0.4 s). A read of a path waits for that path's
    write, and the interpreter's exit waits for all of them, so a process still finds what it
    compiled, and a finished run leaves its entries on disk."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[Path, threading.Event] = {}
        self._queue: list[tuple[Path, str, Mapping[str, bytes | memoryview], threading.Event]] = []
        self._wake = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._written = PRUNE_EVERY_BYTES  # bytes written since the last prune: prune at once

    def submit(self, path: Path, key: str, sections: Mapping[str, bytes | memoryview]) -> None:
        done = threading.Event()
        with self._lock:
            self._pending[path] = done
            self._queue.append((path, key, sections, done))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="glowviz-cache-writer", daemon=True
                )
                self._thread.start()
                atexit.register(self.drain)
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue:
                    self._wake.wait()
                path, key, sections, done = self._queue.pop(0)
            try:
                if write_entry(path, key, sections):
                    self._written += sum(len(v) for v in sections.values())
                    if self._written >= PRUNE_EVERY_BYTES:
                        self._written = 0
                        prune(path.parent, cache_limit_bytes())
            finally:
                with self._lock:
                    if self._pending.get(path) is done:
                        del self._pending[path]
                done.set()

    def wait(self, path: Path) -> None:
        """Return once no write of ``path`` is pending."""
        with self._lock:
            done = self._pending.get(path)
        if done is not None:
            done.wait()

    def drain(self) -> None:
        """Return once every submitted entry is written."""
        with self._lock:
            pending = list(self._pending.values())
        for done in pending:
            done.wait()


#: The cache directory's size limit in MiB when ``$GLOWVIZ_CACHE_MAX_MB`` does not set one.
#: Entries hold the packed weights (ResNet-50: 110 MB), and each change to the code generator
#: makes every key new, so an unpruned cache grew by gigabytes a day of development.
DEFAULT_LIMIT_MB = 2048
#: The writer prunes after its first entry and then after every this many bytes written.
PRUNE_EVERY_BYTES = 256 << 20


def cache_limit_bytes() -> int:
    """``$GLOWVIZ_CACHE_MAX_MB`` (MiB; 0: no limit) or ``DEFAULT_LIMIT_MB``."""
    try:
        mb = int(os.environ.get("GLOWVIZ_CACHE_MAX_MB", DEFAULT_LIMIT_MB))
    except ValueError:
        mb = DEFAULT_LIMIT_MB
    return max(0, mb) << 20


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
        return True
    except OSError:
        return False


def prune(directory: Path, limit: int) -> int:
    """Delete files of the cache ``directory`` until the rest fit in 80% of ``limit`` bytes,
    once they exceed it; temporary files of writers gone for an hour go too. Returns the bytes
    freed. The order is bytes times the time since last use (modification time: a hit touches
    its entry), largest first: plain least-recently-used let a test run's dozen 100 MB model
    entries push out its 1,700 small node-test entries (a few MB in all) every run, and those
    are what a run compiles most. Safe beside readers (an unlinked file stays readable to
    whoever opened it) and writers (a pruned entry, or a program entry's pruned object, is a
    miss: compiled and written again)."""
    if limit <= 0:
        return 0
    files: list[tuple[float, int, Path]] = []
    try:
        with os.scandir(directory) as it:
            for e in it:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if e.is_file(follow_symlinks=False):
                    files.append((st.st_mtime, st.st_size, Path(e.path)))
    except OSError:
        return 0
    total = sum(size for _, size, _ in files)
    now = time.time()
    freed = 0
    entries = []
    for mtime, size, path in files:
        if ".tmp" not in path.name:
            entries.append((mtime, size, path))
        elif now - mtime > 3600 and _unlink(path):  # a writer's that died; fresh ones go on
            freed += size
    if total <= limit:
        return freed
    for mtime, size, path in sorted(entries, key=lambda f: -f[1] * max(now - f[0], 1.0)):
        if total - freed <= limit * 0.8:
            break
        if _unlink(path):
            freed += size
    return freed


_writer = _EntryWriter()


def write_entry_later(path: Path, key: str, sections: Mapping[str, bytes | memoryview]) -> None:
    """``write_entry`` on the cache's background writer (see ``_EntryWriter``)."""
    _writer.submit(path, key, sections)


def flush_writes() -> None:
    """Wait for every entry handed to ``write_entry_later``."""
    _writer.drain()


def read_entry(path: Path, key: str, required: Iterable[str] = ()) -> dict[str, memoryview] | None:
    """The sections of the entry at `path`, or None when there is none or it is not a whole,
    intact entry of this format for `key` (truncated, corrupted, another version): the caller
    compiles afresh and overwrites it."""
    _writer.wait(path)
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    try:
        magic, fmt, hlen = _HEAD.unpack_from(raw)
        if magic != _MAGIC or fmt != FORMAT:
            return None
        start = _HEAD.size + hlen
        head = json.loads(raw[_HEAD.size : start])
        if head["key"] != key:
            return None
        view = memoryview(raw)
        out: dict[str, memoryview] = {}
        pos = start
        for name, size, digest in head["sections"]:
            data = view[pos : pos + size]
            if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
                return None
            out[str(name)] = data
            pos += size
        if pos != len(raw) or any(r not in out for r in required):
            return None
        try:
            os.utime(path)  # used now: the last to go when the cache is pruned
        except OSError:
            pass
        return out
    except (struct.error, ValueError, KeyError, TypeError):
        return None


__all__ = [
    "FORMAT",
    "InstrInfo",
    "ProgramInfo",
    "cache_dir",
    "codegen_version",
    "entry_path",
    "program_key",
    "cache_limit_bytes",
    "flush_writes",
    "prune",
    "read_entry",
    "source_files",
    "sources_digest",
    "switches_digest",
    "write_entry",
    "write_entry_later",
]
