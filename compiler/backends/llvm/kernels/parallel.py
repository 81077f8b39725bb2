"""The generated code's own thread pool: ``parallel_loop`` splits a kernel loop into chunks that
worker threads and the calling thread take in turn, and each thread gets its own copy of the
kernels' scratch buffers.

Everything is in the module itself (LLVM IR over a few libc calls: pthread_create/join, the
futex syscall, aligned_alloc, memset, free), so a compiled module, from the JIT or an AOT bundle,
runs single-threaded with no set-up and gets threads when the host calls
``glowviz_pool_start(n)`` (``glowviz_pool_stop()`` joins them; both are idempotent).

Chunks are fixed at compile time from the loop's shape, never from the thread count, and
every chunk computes its outputs with the same arithmetic in the same order whichever thread
runs it: results are bit-identical for any number of threads.

Protocol: the caller publishes (task, context), then the claim word (generation, chunk count,
next chunk) and the count of finished chunks, then bumps the generation counter; workers spin on
the generation for a while (``SPIN`` pauses) and then sleep on it (futex); every thread claims
chunks by compare-and-swap on the claim word, only while it still holds the generation it woke
for, until they run out; the caller returns once every chunk has finished. It never waits for a
worker that claimed nothing: on a loaded machine a worker that has lost its core leaves its
chunks to the caller instead of holding every parallel loop until the scheduler runs it again
(which made two threads slower than one at load 2+ on two cores). Calls never nest: a kernel
running inside a chunk calls no ``parallel_loop``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from llvmlite import ir

from compiler.backends.llvm.kernels.common import (
    F32,
    HAND_TILED,
    I32,
    I64,
    PTR,
    VOID,
    hand_tiled,
    i64,
    loop,
    loop_blocks,
    smin,
)
from compiler.memory.regions import ALIGNMENT

#: The most threads a pool starts (the size of its handle and scratch tables).
MAX_THREADS = 64
#: Pause instructions a worker spins for before it sleeps on the futex.
SPIN = 20000
#: Symbols the generated code takes from libc (the JIT resolves them, see executor.py).
LIBC = (
    "pthread_create",
    "pthread_join",
    "syscall",
    "aligned_alloc",
    "memset",
    "free",
    "sched_yield",
)

SYS_FUTEX = 202  # x86-64 Linux
FUTEX_WAIT_PRIVATE = 128
FUTEX_WAKE_PRIVATE = 129

#: A task: void (ptr context, i64 chunk, i64 thread id).
TASK = ir.FunctionType(VOID, [PTR, I64, I64])
Body = Callable[[ir.IRBuilder, ir.Value, ir.Value, list[ir.Value]], None]


#: Multiply-adds per parallel chunk, at least (tens of microseconds of work).
CHUNK_FMAS = 1 << 21
#: Work of one element of a memory-bound loop (a copy, an element-wise step), in multiply-adds.
ELEMENT_WORK = 64
#: The most chunks a kernel's work is cut into.
MAX_CHUNKS = 64

#: ``glowviz_parallel_for`` is never inlined. Inlined into a kernel, its serial path called
#: the task directly with each constant chunk index, and O3 inlined the task into every
#: iteration of a fully unrolled chunk loop: a 284-byte ReLU kernel of DenseNet-121 came out
#: of O3 as 158 KB (15 vectorised copies), and the module's O3 + machine code took 4.0 s
#: instead of 2.6 (ResNet-50 2.4 -> 2.1 s). One call per parallel loop costs nothing measurable.
NOINLINE_PARALLEL_FOR = True


def work_chunks(fmas: int, units: int) -> int:
    """Chunks for ``fmas`` multiply-adds (or an equivalent amount of work) spread over
    ``units`` independent pieces: about CHUNK_FMAS each, at most one per piece. Compile-time
    shapes only, never the thread count: the chunks are the same on every host and run."""
    return max(1, min(MAX_CHUNKS, units, fmas // CHUNK_FMAS))


_TASK_CLASSES: dict[type, type] = {}


def _as_task(v: ir.Value) -> ir.Value:
    """``v`` (an opaque ``ptr``) made callable as a task: llvmlite takes an indirect callee's
    type from its ``function_type``, which a ``ptr`` value does not have."""
    cls = type(v)
    if cls not in _TASK_CLASSES:
        _TASK_CLASSES[cls] = type(f"Task{cls.__name__}", (cls,), {"function_type": TASK})
    v.__class__ = _TASK_CLASSES[cls]
    return v


class _Runtime:
    """The pool's globals and functions in one module, and the layout of the per-thread scratch
    copies (every scratch buffer at a fixed offset of one block per extra thread)."""

    def __init__(self, module: ir.Module) -> None:
        self.module = module
        self.scratch_floats = 0
        self.offsets: dict[str, int] = {}
        self.emitted = False
        #: Tasks built by ``parallel_loop`` under a ``task_key``.
        self.tasks: dict[Hashable, ir.Function] = {}

    def emit(self) -> None:
        """The pool itself, on the first kernel loop that runs in chunks: a module whose loops
        all run in one chunk never starts a thread and gets only ``finish``'s entry points.
        (The pool's code costs three times a small kernel's to compile: most of the JIT time of
        a model of a few small ops.)"""
        if self.emitted:
            return
        self.emitted = True
        module = self.module

        def var(name: str, ty: ir.Type, init=None) -> ir.GlobalVariable:
            g = ir.GlobalVariable(module, ty, f"glowviz.pool.{name}")
            g.initializer = ir.Constant(ty, init)
            g.linkage = "internal"
            g.align = ALIGNMENT  # each on its own cache line: no false sharing between them
            return g

        self.nthreads = var("nthreads", I64, 1)
        self.gen = var("gen", I32, 0)
        self.start_gen = var("start_gen", I32, 0)
        self.sleeping = var("sleeping", I32, 0)
        self.quit = var("quit", I32, 0)
        self.task = var("task", PTR, None)
        self.ctx = var("ctx", PTR, None)
        #: (generation << 32) | (chunk count << 16) | next chunk: claimed by compare-and-swap.
        self.claim = var("claim", I64, 0)
        self.finished = var("finished", I64, 0)
        self.handles = var("handles", ir.ArrayType(I64, MAX_THREADS), None)
        self.scratch_tab = var("scratch", ir.ArrayType(PTR, MAX_THREADS), None)
        self.scratch_bytes = var("scratch_bytes", I64, self.scratch_floats * 4)
        self._declare_libc()
        self.run_chunks = self._emit_run_chunks()
        self.worker = self._emit_worker()
        self.parallel_for = self._emit_parallel_for()
        self._emit_start_stop()

    def finish(self) -> None:
        """Give a module without the pool its entry points, doing nothing: the host and AOT
        bundles call ``glowviz_pool_start``/``glowviz_pool_stop`` on every module."""
        if self.emitted:
            return
        for name, args in (("glowviz_pool_stop", []), ("glowviz_pool_start", [I32])):
            _, b = self._fn(name, VOID, args, internal=False)
            b.ret_void()

    # -- helpers -----------------------------------------------------------------------------
    def _declare_libc(self) -> None:
        m = self.module
        self.pthread_create = ir.Function(
            m, ir.FunctionType(I32, [PTR, PTR, PTR, PTR]), "pthread_create"
        )
        self.pthread_join = ir.Function(m, ir.FunctionType(I32, [I64, PTR]), "pthread_join")
        self.syscall = ir.Function(m, ir.FunctionType(I64, [I64], var_arg=True), "syscall")
        self.aligned_alloc = ir.Function(m, ir.FunctionType(PTR, [I64, I64]), "aligned_alloc")
        self.memset = ir.Function(m, ir.FunctionType(PTR, [PTR, I32, I64]), "memset")
        self.free = ir.Function(m, ir.FunctionType(VOID, [PTR]), "free")
        self.sched_yield = ir.Function(m, ir.FunctionType(I32, []), "sched_yield")
        self.pause = ir.Function(m, ir.FunctionType(VOID, []), "llvm.x86.sse2.pause")

    def _fn(self, name: str, ret: ir.Type, args: Sequence[ir.Type], internal: bool = True):
        fn = ir.Function(self.module, ir.FunctionType(ret, list(args)), name)
        if internal:
            fn.linkage = "internal"
        fn.attributes.add("nounwind")
        return fn, ir.IRBuilder(fn.append_basic_block("entry"))

    def _futex(self, b: ir.IRBuilder, op: int, val: ir.Value) -> None:
        null = ir.Constant(PTR, None)
        args = [
            i64(SYS_FUTEX),
            self.gen,
            ir.Constant(I32, op),
            val,
            null,
            null,
            ir.Constant(I32, 0),
        ]
        b.call(self.syscall, args)

    def _while(
        self,
        b: ir.IRBuilder,
        cond: Callable[[], ir.Value],
        body: Callable[[], None],
        name: str,
    ) -> None:
        _, hdr, bod, end = loop_blocks(b, name)
        b.cbranch(cond(), bod, end)
        b.position_at_end(bod)
        body()
        b.branch(hdr)
        b.position_at_end(end)

    # -- the functions -----------------------------------------------------------------------
    def _emit_run_chunks(self) -> ir.Function:
        """Claim chunks of generation ``gen`` and run them until none are left (or the caller
        has moved on to another generation: this thread woke too late for that one)."""
        fn, b = self._fn("glowviz.pool.run_chunks", VOID, [I64, I32])
        tid, gen = fn.args
        want = b.shl(b.zext(gen, I64), i64(32))
        hdr = b.append_basic_block("take")
        check = b.append_basic_block("check")
        swap = b.append_basic_block("swap")
        run = b.append_basic_block("run")
        end = b.append_basic_block("done")
        b.branch(hdr)
        b.position_at_end(hdr)
        c = b.load_atomic(self.claim, "acquire", 8, typ=I64)
        same_gen = b.icmp_unsigned("==", b.and_(c, i64(-(1 << 32))), want)
        b.cbranch(same_gen, check, end)
        b.position_at_end(check)
        idx = b.and_(c, i64(0xFFFF))
        count = b.and_(b.lshr(c, i64(16)), i64(0xFFFF))
        b.cbranch(b.icmp_unsigned("<", idx, count), swap, end)
        b.position_at_end(swap)
        res = b.cmpxchg(self.claim, c, b.add(c, i64(1)), "acq_rel", "acquire")
        b.cbranch(b.extract_value(res, 1), run, hdr)
        b.position_at_end(run)
        # The generation cannot move on while this claimed chunk is unfinished: task and
        # context are still its own.
        task = _as_task(b.load(self.task, typ=PTR))
        ctx = b.load(self.ctx, typ=PTR)
        b.call(task, [ctx, idx, tid])
        b.atomic_rmw("add", self.finished, i64(1), "release")
        b.branch(hdr)
        b.position_at_end(end)
        b.ret_void()
        return fn

    def _emit_worker(self) -> ir.Function:
        """ptr worker(ptr tid): wait for a new generation, run chunks, report, until quit."""
        fn, b = self._fn("glowviz.pool.worker", PTR, [PTR])
        tid = b.ptrtoint(fn.args[0], I64)
        seen = b.alloca(I32)
        spins = b.alloca(I64)
        # The generation when the pool started, not the current one: a thread that starts late
        # must not miss the first task.
        b.store(b.load(self.start_gen, typ=I32), seen)
        top = b.append_basic_block("top")
        b.branch(top)
        b.position_at_end(top)
        b.store(i64(0), spins)

        def unchanged() -> ir.Value:
            g = b.load_atomic(self.gen, "acquire", 4, typ=I32)
            return b.icmp_unsigned("==", g, b.load(seen, typ=I32))

        def wait() -> None:
            n = b.load(spins, typ=I64)
            with b.if_else(b.icmp_signed("<", n, i64(SPIN))) as (spin, sleep):
                with spin:
                    b.call(self.pause, [])
                    b.store(b.add(n, i64(1)), spins)
                with sleep:
                    b.atomic_rmw("add", self.sleeping, ir.Constant(I32, 1), "seq_cst")
                    self._futex(b, FUTEX_WAIT_PRIVATE, b.load(seen, typ=I32))
                    b.atomic_rmw("sub", self.sleeping, ir.Constant(I32, 1), "seq_cst")

        self._while(b, unchanged, wait, "wait")
        b.store(b.load_atomic(self.gen, "acquire", 4, typ=I32), seen)
        quit_ = b.icmp_unsigned(
            "!=", b.load_atomic(self.quit, "acquire", 4, typ=I32), ir.Constant(I32, 0)
        )
        work = b.append_basic_block("work")
        done = b.append_basic_block("exit")
        b.cbranch(quit_, done, work)
        b.position_at_end(work)
        b.call(self.run_chunks, [tid, b.load(seen, typ=I32)])
        b.branch(top)
        b.position_at_end(done)
        b.ret(ir.Constant(PTR, None))
        return fn

    def _emit_parallel_for(self) -> ir.Function:
        """void glowviz_parallel_for(ptr task, ptr ctx, i64 n): every chunk 0..n-1, on the pool
        if it has threads, else in order on the calling thread."""
        fn, b = self._fn("glowviz_parallel_for", VOID, [PTR, PTR, I64])
        if NOINLINE_PARALLEL_FOR:
            fn.attributes.add("noinline")
        task, ctx, n = fn.args
        _as_task(task)
        i = b.alloca(I64)
        spins = b.alloca(I64)
        nt = b.load(self.nthreads, typ=I64)
        serial = b.or_(b.icmp_signed("<=", nt, i64(1)), b.icmp_signed("<=", n, i64(1)))
        # The claim word holds 16 bits of chunk index (loops have at most a few hundred).
        serial = b.or_(serial, b.icmp_signed(">=", n, i64(1 << 16)))
        with b.if_else(serial) as (one, many):
            with one:
                b.store(i64(0), i)

                def more() -> ir.Value:
                    return b.icmp_signed("<", b.load(i, typ=I64), n)

                def step() -> None:
                    iv = b.load(i, typ=I64)
                    b.call(task, [ctx, iv, i64(0)])
                    b.store(b.add(iv, i64(1)), i)

                self._while(b, more, step, "serial")
            with many:
                b.store(task, self.task)
                b.store(ctx, self.ctx)
                b.store_atomic(i64(0), self.finished, "release", 8)
                gen = b.add(b.load_atomic(self.gen, "acquire", 4, typ=I32), ir.Constant(I32, 1))
                word = b.or_(b.shl(b.zext(gen, I64), i64(32)), b.shl(n, i64(16)))
                b.store_atomic(word, self.claim, "release", 8)
                b.atomic_rmw("add", self.gen, ir.Constant(I32, 1), "seq_cst")
                asleep = b.load_atomic(self.sleeping, "seq_cst", 4, typ=I32)
                with b.if_then(b.icmp_signed(">", asleep, ir.Constant(I32, 0))):
                    self._futex(b, FUTEX_WAKE_PRIVATE, b.trunc(nt, I32))
                b.call(self.run_chunks, [i64(0), gen])
                b.store(i64(0), spins)

                def busy() -> ir.Value:
                    done = b.load_atomic(self.finished, "acquire", 8, typ=I64)
                    return b.icmp_signed("<", done, n)

                def wait() -> None:
                    k = b.add(b.load(spins, typ=I64), i64(1))
                    b.store(k, spins)
                    with b.if_else(b.icmp_signed("<", k, i64(SPIN))) as (spin, yield_):
                        with spin:
                            b.call(self.pause, [])
                        with yield_:
                            b.call(self.sched_yield, [])  # a worker lost its core

                self._while(b, busy, wait, "join")
        b.ret_void()
        return fn

    def _emit_start_stop(self) -> None:
        stop, b = self._fn("glowviz_pool_stop", VOID, [], internal=False)
        t = b.alloca(I64)
        nt = b.load(self.nthreads, typ=I64)
        with b.if_then(b.icmp_signed(">", nt, i64(1))):
            b.store_atomic(ir.Constant(I32, 1), self.quit, "release", 4)
            b.atomic_rmw("add", self.gen, ir.Constant(I32, 1), "seq_cst")
            self._futex(b, FUTEX_WAKE_PRIVATE, ir.Constant(I32, 0x7FFFFFFF))
            b.store(i64(1), t)

            def more() -> ir.Value:
                return b.icmp_signed("<", b.load(t, typ=I64), nt)

            def join() -> None:
                tv = b.load(t, typ=I64)
                h = b.load(b.gep(self.handles, [i64(0), tv]), typ=I64)
                b.call(self.pthread_join, [h, ir.Constant(PTR, None)])
                slot = b.gep(self.scratch_tab, [i64(0), tv])
                b.call(self.free, [b.load(slot, typ=PTR)])
                b.store(ir.Constant(PTR, None), slot)
                b.store(b.add(tv, i64(1)), t)

            self._while(b, more, join, "join")
            b.store(i64(1), self.nthreads)
            b.store_atomic(ir.Constant(I32, 0), self.quit, "release", 4)
        b.ret_void()

        start, b = self._fn("glowviz_pool_start", VOID, [I32], internal=False)
        t = b.alloca(I64)
        want = b.sext(start.args[0], I64)
        want = b.select(b.icmp_signed(">", want, i64(MAX_THREADS)), i64(MAX_THREADS), want)
        want = b.select(b.icmp_signed("<", want, i64(1)), i64(1), want)
        same = b.icmp_signed("==", want, b.load(self.nthreads, typ=I64))
        with b.if_then(b.not_(same)):
            b.call(stop, [])
            with b.if_then(b.icmp_signed(">", want, i64(1))):
                nbytes = b.load(self.scratch_bytes, typ=I64)
                nbytes = b.and_(b.add(nbytes, i64(ALIGNMENT + ALIGNMENT - 1)), i64(-ALIGNMENT))
                b.store(ir.Constant(I32, 0), self.sleeping)
                b.store(b.load(self.gen, typ=I32), self.start_gen)
                b.store(want, self.nthreads)
                b.store(i64(1), t)

                def more() -> ir.Value:
                    return b.icmp_signed("<", b.load(t, typ=I64), want)

                def spawn() -> None:
                    tv = b.load(t, typ=I64)
                    buf = b.call(self.aligned_alloc, [i64(ALIGNMENT), nbytes])
                    b.call(self.memset, [buf, ir.Constant(I32, 0), nbytes])
                    b.store(buf, b.gep(self.scratch_tab, [i64(0), tv]))
                    h = b.gep(self.handles, [i64(0), tv])
                    b.call(
                        self.pthread_create,
                        [h, ir.Constant(PTR, None), self.worker, b.inttoptr(tv, PTR)],
                    )
                    b.store(b.add(tv, i64(1)), t)

                self._while(b, more, spawn, "spawn")
        b.ret_void()

    # -- scratch -----------------------------------------------------------------------------
    def register_scratch(self, g: ir.GlobalVariable, nfloats: int) -> None:
        self.offsets[g.name] = self.scratch_floats
        # 64-byte aligned slots, so each copy keeps the alignment of the global.
        self.scratch_floats += -(-nfloats // 16) * 16
        if self.emitted:
            self.scratch_bytes.initializer = ir.Constant(I64, self.scratch_floats * 4)


#: The attribute of an ``ir.Module`` that holds its pool. The pool lives on the module, not in a
#: module-keyed table: a ``WeakKeyDictionary`` whose values (the pool and its functions) refer
#: back to their key never lets a key go, and kept every compiled module's IR alive for the
#: life of the process (4.7 million objects after the ONNX node suite on the LLVM executor).
_POOL_ATTR = "_glowviz_pool"


def runtime(module: ir.Module) -> _Runtime:
    """The module's pool (its code is emitted by the first loop that needs it, see
    ``_Runtime.emit``; ``finish_runtime`` completes a module that never did)."""
    rt: _Runtime | None = getattr(module, _POOL_ATTR, None)
    if rt is None:
        rt = _Runtime(module)
        setattr(module, _POOL_ATTR, rt)
    return rt


def finish_runtime(module: ir.Module) -> None:
    """The pool's entry points, as no-ops, in a module none of whose loops needed the pool."""
    runtime(module).finish()


def scratch(module: ir.Module, name: str, nfloats: int) -> ir.GlobalVariable:
    """A zero-initialised, 64-byte aligned module-level float buffer: thread 0's copy of a
    kernel's scratch buffer (``thread_scratch`` gives the others theirs). A kernel may rely on
    the parts it never writes staying zero."""
    ty = ir.ArrayType(F32, max(1, nfloats))
    g = ir.GlobalVariable(module, ty, name)
    g.initializer = ir.Constant(ty, None)
    g.align = ALIGNMENT
    g.linkage = "internal"
    g.type = PTR  # opaque pointer, so vector and scalar accesses need no casts
    runtime(module).register_scratch(g, max(1, nfloats))
    return g


def shared_scratch(module: ir.Module, tag: str, nfloats: int) -> ir.GlobalVariable:
    """A ``scratch`` buffer shared by every kernel asking for ``tag`` and this size: only for
    buffers a kernel writes in full before it reads them (never relying on zeros), which the
    kernels, run one after another, can then share. Two convs of one shape then name the same
    buffer, so their code is the same and codegen compiles it once
    (``merge_identical_functions``)."""
    name = f"glowviz.scratch.{tag}.{nfloats}"
    g = module.globals.get(name)
    if isinstance(g, ir.GlobalVariable):
        return g
    return scratch(module, name, nfloats)


def scratch_ptr(b: ir.IRBuilder, g: ir.GlobalVariable) -> ir.Value:
    """A float pointer to the start of thread 0's copy of a ``scratch`` buffer."""
    return g


def thread_scratch(b: ir.IRBuilder, g: ir.GlobalVariable, tid: ir.Value) -> ir.Value:
    """The calling thread's copy of scratch buffer ``g``: ``g`` itself on thread 0 (and with no
    pool), its slot in the thread's block otherwise."""
    if isinstance(tid, ir.Constant) and tid.constant == 0:
        return g
    rt = runtime(b.module)
    rt.emit()
    block = b.load(b.gep(rt.scratch_tab, [i64(0), tid]), typ=PTR)
    mine = b.gep(block, [i64(rt.offsets[g.name])], source_etype=F32)
    return b.select(b.icmp_signed("==", tid, i64(0)), g, mine)


def parallel_loop(
    b: ir.IRBuilder,
    n: int,
    captures: Sequence[ir.Value],
    body: Body,
    name: str = "par",
    *,
    pass_constants: bool = False,
    task_key: Hashable | None = None,
) -> None:
    """``for i in range(n)``, the iterations spread over the pool: ``body(builder, i, tid,
    values)`` emits one iteration into a task function, where ``values`` stand for
    ``captures`` (values of the enclosing function; nothing else of it may be used). With one
    chunk the body is emitted in place (thread 0). Constant captures are pasted into the task
    as they are, unless ``pass_constants``: then they too come through the context, so tasks
    that differ only in those constants are the same function (the GEMM chunks' shapes).

    ``task_key``: a key that determines the task's code given the captures' types (and the
    constants pasted in): a loop with the key of an earlier one of the module reuses its task
    instead of building an equal one for ``merge_identical_functions`` to drop (ResNet-50's
    GEMM chunks: 27 built, 7 kept)."""
    if n <= 1:
        body(b, i64(0), i64(0), list(captures))
        return
    rt = runtime(b.module)
    rt.emit()
    # Constants go to the task as they are; other captures through a context struct.
    inline = (lambda c: False) if pass_constants else (lambda c: isinstance(c, ir.Constant))
    passed = [c for c in captures if not inline(c)]
    ctx_ty = ir.LiteralStructType([c.type for c in passed] or [I64])
    tiled = HAND_TILED in b.function.attributes
    key = None
    if task_key is not None:
        key = (task_key, tiled, tuple(str(c) if inline(c) else str(c.type) for c in captures))
    task = rt.tasks.get(key) if key is not None else None
    if task is None:
        task = ir.Function(b.module, TASK, b.module.get_unique_name(f"{b.function.name}.{name}"))
        task.linkage = "internal"
        task.attributes.add("nounwind")
        if tiled:
            hand_tiled(task)  # the chunk is the kernel's own code
        tb = ir.IRBuilder(task.append_basic_block("entry"))
        values = []
        j = 0
        for c in captures:
            if inline(c):
                values.append(c)
                continue
            idx = [ir.Constant(I32, 0), ir.Constant(I32, j)]
            values.append(tb.load(tb.gep(task.args[0], idx, source_etype=ctx_ty), typ=c.type))
            j += 1
        body(tb, task.args[1], task.args[2], values)
        if not tb.block.is_terminated:
            tb.ret_void()
        if key is not None:
            rt.tasks[key] = task
    # The caller: the captures into a context on its stack, then the pool.
    entry = b.function.entry_basic_block
    with b.goto_block(entry):
        if entry.instructions:
            b.position_before(entry.instructions[0])
        ctx = b.alloca(ctx_ty)
        ctx.type = PTR  # opaque, so the field GEPs below yield plain pointers
    for j, c in enumerate(passed):
        b.store(c, b.gep(ctx, [ir.Constant(I32, 0), ir.Constant(I32, j)], source_etype=ctx_ty))
    b.call(rt.parallel_for, [task, ctx, i64(n)])


def parallel_range(
    b: ir.IRBuilder,
    count: int,
    work: int,
    captures: Sequence[ir.Value],
    body: Body,
    name: str = "items",
) -> None:
    """``for i in range(count)`` over independent items worth ``work`` multiply-adds in all:
    contiguous runs of items form the chunks (``work_chunks``); ``body(builder, i, tid,
    values)`` emits one item (``values`` stand for ``captures``, as in ``parallel_loop``)."""
    chunks = work_chunks(work, count)
    if chunks == 1:
        with loop(b, 0, count, 1, name) as i:
            body(b, i, i64(0), list(captures))
        return
    per = -(-count // chunks)

    def chunk(bb: ir.IRBuilder, c: ir.Value, tid: ir.Value, vals: list[ir.Value]) -> None:
        lo = bb.mul(c, i64(per))
        with loop(bb, lo, smin(bb, bb.add(lo, i64(per)), count), 1, name) as i:
            body(bb, i, tid, vals)

    parallel_loop(b, -(-count // per), captures, chunk, name)


__all__ = [
    "CHUNK_FMAS",
    "ELEMENT_WORK",
    "LIBC",
    "MAX_THREADS",
    "parallel_loop",
    "parallel_range",
    "runtime",
    "scratch",
    "scratch_ptr",
    "shared_scratch",
    "thread_scratch",
    "work_chunks",
]
