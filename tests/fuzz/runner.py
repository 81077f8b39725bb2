"""Running campaign cases under a time and a memory cap, and classifying what happened.

A case is one model (a mutant of a sample model, or a random valid graph). Each case goes
through every CLI command (`compile`, `run --executor interpreter|llvm`, `mem`, `export
--format dot`) and, when the model runs, the differential `check`. Commands run in-process in
long-lived workers (`worker.py`, capped with RLIMIT_AS; a hang is killed after the time cap
and its Python stack kept), or as real `glowviz` subprocesses for a sample.

The time cap is CPU time (user + system, all threads, read from /proc): a loaded machine
stretches wall time, not the work a case does, and a 30 s wall cap at load 10-20 called
cases hangs that needed 8 s of CPU. A wall-clock backstop (`WALL_FACTOR` times the cap) still
ends a case that sleeps or blocks without using CPU.

Outcome classes: ok, refusal (exit 2 with exactly one `glowviz: error:` line on stderr),
unclean (a non-zero exit that is neither: several lines, exit 1 without a traceback...),
traceback, hang, crash (killed by a signal), memory (a MemoryError or the allocator giving
up), wrong (a wrong answer found by `check`), invalid (onnxruntime refuses the model too, so
there is nothing to compare; not a failure). A failure's signature is (class, command, cause)
with the cause reduced to the exception type and the deepest frame in the project's code.
"""

from __future__ import annotations

import os
import queue
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .worker import read_msg, write_msg

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_models"
GIB = 1 << 30

#: The commands every case goes through, as argv templates ({model}, {out} filled by the worker).
COMMANDS: dict[str, list[str]] = {
    "compile": ["compile", "{model}"],
    "run-interpreter": ["run", "{model}", "--executor", "interpreter"],
    "run-llvm": ["run", "{model}", "--executor", "llvm"],
    "mem": ["mem", "{model}"],
    "export-dot": [
        "export",
        "{model}",
        "--view",
        "graph",
        "--stage",
        "final",
        "--format",
        "dot",
        "-o",
        "{out}.dot",
    ],
}
FAILURES = ("traceback", "hang", "crash", "memory", "wrong", "unclean")
#: float32-range: the check's outputs follow values float32 cannot hold (docs/fuzzing.md); ours
#: equal the float32-rounded reference there, onnxruntime and the float64 reference cannot decide
CLASSES = ("ok", "refusal", "invalid", "float32-range", *FAILURES)


@dataclass
class Case:
    id: str
    source: str  # "mutant" | "graph"
    family: str  # the mutation family, or "graph"
    desc: str
    model: bytes
    feeds: dict[str, np.ndarray] | None = None
    seed: int = 0


@dataclass
class Outcome:
    case: str
    command: str
    cls: str
    cause: str = ""
    detail: str = ""
    seconds: float = 0.0
    wrong_outputs: list[str] = field(default_factory=list)

    @property
    def signature(self) -> str:
        return f"{self.cls} | {self.command} | {self.cause}"


# -- classification --------------------------------------------------------------------------------

_FRAME = re.compile(r'File "([^"]+)", line (\d+),? in (\S+)')
_PROJECT = re.compile(r"/(compiler|glowviz)/(.+\.py)$")


#: IR core modules: a hang sampled inside one of them is blamed on the pass that called it.
_IR_CORE = ("compiler/lir/ir.py", "compiler/graph/ir.py", "compiler/graph/types.py")


def project_frame(text: str, *, skip: tuple[str, ...] = ()) -> str:
    """The deepest frame of a Python traceback or faulthandler dump inside compiler/ or glowviz/
    (and not in a `skip` file)."""
    frames = _FRAME.findall(text)
    if "most recent call first" in text:
        frames = frames[::-1]  # faulthandler lists the innermost frame first
    for path, _line, func in reversed(frames):
        m = _PROJECT.search(path)
        if m and f"{m.group(1)}/{m.group(2)}" not in skip:
            return f"{m.group(1)}/{m.group(2)}:{func}"
    return frames[-1][2] if frames else "?"


def _exc_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Warning)\b", ln):
            return ln.strip()
    return lines[-1].strip() if lines else ""


def classify_cli(
    code: int | None,
    stderr: str,
    *,
    timed_out: bool = False,
    sig: int | None = None,
    dump: str = "",
) -> tuple[str, str, str]:
    """(class, cause, detail) of one CLI run."""
    if timed_out:
        return "hang", project_frame(dump, skip=_IR_CORE), _ends(dump)
    if sig is not None:
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if any(m in dump for m in _OOM_MARKS):
            return "memory", f"{name} {project_frame(dump)}", _ends(dump)
        return "crash", f"{name} {project_frame(dump)}", _ends(dump)
    if "Traceback (most recent call last)" in stderr:
        exc = _exc_line(stderr)
        etype = exc.split(":")[0]
        cls = "memory" if etype.endswith("MemoryError") else "traceback"
        return cls, f"{etype} at {project_frame(stderr)}", exc[:300]
    if code == 0:
        return "ok", "", ""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    if code == 2 and len(lines) == 1 and lines[0].startswith("glowviz: error:"):
        return "refusal", "", lines[0][:300]
    if lines and "MemoryError" in stderr:
        return "memory", lines[-1][:120], stderr[-800:]
    first = lines[0] if lines else "(no message)"
    return "unclean", f"exit {code}: " + _normalize(first), stderr[-800:]


#: What a process killed by running out of memory leaves on stderr (numpy, C++, LLVM's JIT).
_OOM_MARKS = ("MemoryError", "bad_alloc", "out of memory", "Unable to allocate", "Cannot allocate")


def _ends(text: str) -> str:
    """The start (what the process said) and the end (the outer frames) of a long dump."""
    return text if len(text) <= 1500 else f"{text[:600]}\n...\n{text[-900:]}"


def _normalize(line: str) -> str:
    line = re.sub(r"/tmp/[^\s'\"]+", "<tmp>", line)
    line = re.sub(r"\d+", "N", line)
    return line[:100]


# -- the worker process ----------------------------------------------------------------------------


class WorkerDied(Exception):
    pass


#: A case blocked without using CPU (a sleep, a read that never returns) is a hang too, after
#: this many times the CPU cap in wall time.
WALL_FACTOR = 10.0
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of every thread of process `pid` (None: no /proc entry)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: fields count from its end
    fields = stat[stat.rindex(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


class CpuClock:
    """Has process `pid` used `cap` seconds of CPU since now, or `WALL_FACTOR * cap` of wall
    time? Without /proc (not Linux) the CPU reading falls back to wall time."""

    def __init__(self, pid: int, cap: float) -> None:
        self.pid, self.cap = pid, cap
        self.wall0 = time.monotonic()
        self.cpu0 = cpu_seconds(pid)

    def used(self) -> float:
        now = cpu_seconds(self.pid)
        if self.cpu0 is None or now is None:
            return time.monotonic() - self.wall0
        return now - self.cpu0

    def expired(self) -> bool:
        return self.used() >= self.cap or time.monotonic() - self.wall0 >= WALL_FACTOR * self.cap

    def poll(self) -> float:
        """Seconds to wait before asking again: at least what is left of the CPU cap can not
        be used up any faster than in the same wall time (one thread; onnxruntime runs on
        one), at most 1 s so the reading stays fresh."""
        return max(0.05, min(1.0, self.cap - self.used()))


class Worker:
    """One `worker.py` child: requests in, replies out; killed and restarted on hangs/crashes."""

    def __init__(
        self, mem_limit: int, recycle_after: int = 600, llvm_cache: Path | None = None
    ) -> None:
        self.mem_limit = mem_limit
        self.recycle_after = recycle_after
        self.llvm_cache = llvm_cache
        self.proc: subprocess.Popen | None = None
        self.log = tempfile.NamedTemporaryFile(
            prefix="glowviz-fuzz-worker-", suffix=".log", delete=False
        )
        self.served = 0

    def start(self) -> None:
        c_r, p_w = os.pipe()
        p_r, c_w = os.pipe()
        env = dict(os.environ, PYTHONFAULTHANDLER="1")
        if self.llvm_cache is None:
            env["GLOWVIZ_NO_DISK_CACHE"] = "1"
        else:
            env["GLOWVIZ_CACHE_DIR"] = str(self.llvm_cache)
            env.pop("GLOWVIZ_NO_DISK_CACHE", None)
        env.pop("PYTEST_XDIST_WORKER", None)
        self.log.seek(0)
        self.log.truncate()
        # The case files' folder is ours to remove: a worker killed on a hang cannot.
        self.tmp = tempfile.mkdtemp(prefix="glowviz-fuzz-")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.fuzz.worker",
                str(c_r),
                str(c_w),
                str(self.mem_limit),
                self.tmp,
            ],
            cwd=ROOT,
            pass_fds=(c_r, c_w),
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
            env=env,
            start_new_session=True,
        )
        os.close(c_r)
        os.close(c_w)
        self.rfd, self.wfd = p_r, p_w
        self.served = 0
        hello = self._read(120.0)
        if not isinstance(hello, dict) or "ready" not in hello:
            self.stop()
            raise RuntimeError(f"fuzz worker did not start: {self._log_tail(0)[-2000:]}")

    def _read(self, timeout: float) -> Any:
        ready, _, _ = select.select([self.rfd], [], [], timeout)
        if not ready:
            raise TimeoutError
        msg = read_msg(self.rfd)
        if msg is None:
            raise WorkerDied
        return msg

    def _log_tail(self, since: int) -> str:
        try:
            with open(self.log.name, "rb") as f:
                f.seek(since)
                return f.read()[-20000:].decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
            for fd in (self.rfd, self.wfd):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.proc = None
            shutil.rmtree(self.tmp, ignore_errors=True)

    def close(self) -> None:
        self.stop()
        try:
            os.unlink(self.log.name)
        except OSError:
            pass

    def request(self, req: dict[str, Any], timeout: float) -> tuple[str, Any, str]:
        """("reply", reply, "") | ("hang", None, stack) | ("crash", signal, log); `timeout`
        is CPU seconds (see CpuClock)."""
        if self.proc is None or self.served >= self.recycle_after:
            self.stop()
            self.start()
        assert self.proc is not None
        self.served += 1
        self.log.flush()
        since = os.path.getsize(self.log.name)
        try:
            write_msg(self.wfd, req)
            clock = CpuClock(self.proc.pid, timeout)
            while True:
                try:
                    return "reply", self._read(clock.poll()), ""
                except TimeoutError:
                    if clock.expired():
                        raise
        except TimeoutError:
            try:
                os.kill(self.proc.pid, signal.SIGUSR1)  # faulthandler: where is it stuck?
                time.sleep(0.5)
            except ProcessLookupError:
                pass
            dump = self._log_tail(since)
            self.stop()
            return "hang", None, dump
        except (WorkerDied, BrokenPipeError, OSError):
            self.proc.wait()
            code = self.proc.returncode
            dump = self._log_tail(since)
            self.stop()
            return "crash", -code if code and code < 0 else code, dump


# -- running a case --------------------------------------------------------------------------------


@dataclass
class Settings:
    timeout: float = 30.0  # CPU seconds per command (the check gets twice as much)
    mem_limit: int = 3 * GIB
    check: bool = True  # the differential check on models that run
    commands: tuple[str, ...] = tuple(COMMANDS)
    #: The workers' LLVM disk cache (None: none, every command compiles its module). The test
    #: gives the kept one of the LLVM tests (tests/llvm_cache.py): a hit is what compiling
    #: gives, and LLVM's O3 was two thirds of the seeded run's CPU.
    llvm_cache: Path | None = None


#: Refusals that depend on how much memory the worker has left.
MEMORY_REFUSALS = ("out of memory", "does not fit in memory", "which this process cannot get")


def _memory_refusal(status: str, reply: Any) -> bool:
    return (
        status == "reply"
        and reply.get("exit") == 2
        and any(m in reply.get("stderr", "") for m in MEMORY_REFUSALS)
    )


def run_case(worker: Worker, case: Case, st: Settings) -> list[Outcome]:
    outcomes: list[Outcome] = []
    runs = False
    for cmd in st.commands:
        t0 = time.perf_counter()
        req = {"task": "cli", "id": f"{case.id} {cmd}", "argv": COMMANDS[cmd], "model": case.model}
        status, reply, dump = worker.request(req, st.timeout)
        if _memory_refusal(status, reply) and worker.served > 1:
            # What earlier cases left in this worker's heap counts against the cap too (a long
            # run saw eight cases in a row refused "does not fit in memory"): decide in a
            # fresh worker, so no refusal hides what the case itself does.
            worker.stop()
            status, reply, dump = worker.request(req, st.timeout)
        dt = time.perf_counter() - t0
        if status == "hang":
            cls, cause, detail = classify_cli(None, "", timed_out=True, dump=dump)
        elif status == "crash":
            cls, cause, detail = classify_cli(
                None, "", sig=reply if isinstance(reply, int) and reply > 0 else None, dump=dump
            )
            if status == "crash" and not (isinstance(reply, int) and reply > 0):
                cls, cause = "crash", f"worker exited {reply} {project_frame(dump)}"
        elif "exit" not in reply:
            cls, cause, detail = classify_cli(1, reply.get("error", ""))
        else:
            cls, cause, detail = classify_cli(reply["exit"], reply["stderr"])
        outcomes.append(Outcome(case.id, cmd, cls, cause, detail, dt))
        runs |= cmd.startswith("run-") and cls == "ok"
    if st.check and (runs or case.source == "graph"):
        outcomes.append(run_check(worker, case, st))
    return outcomes


def run_check(worker: Worker, case: Case, st: Settings) -> Outcome:
    t0 = time.perf_counter()
    status, reply, dump = worker.request(
        {
            "task": "check",
            "id": f"{case.id} check",
            "model": case.model,
            "feeds": case.feeds,
            "seed": case.seed,
        },
        st.timeout * 2,
    )
    dt = time.perf_counter() - t0
    if status == "hang":
        cls, cause, detail = classify_cli(None, "", timed_out=True, dump=dump)
    elif status == "crash":
        sig = reply if isinstance(reply, int) and reply > 0 else None
        cls, cause, detail = classify_cli(None, "", sig=sig, dump=dump)
    elif reply.get("cls") in ("traceback", "memory"):
        err = reply.get("error", "")
        exc = _exc_line(err)
        cls, cause, detail = reply["cls"], f"{exc.split(':')[0]} at {project_frame(err)}", exc[:300]
    else:
        cls, cause, detail = reply["cls"], reply.get("cause", ""), reply.get("detail", "")
        return Outcome(case.id, "check", cls, cause, detail, dt, reply.get("wrong_outputs", []))
    return Outcome(case.id, "check", cls, cause, detail, dt)


def run_cases(
    cases: Iterable[Case], st: Settings, *, jobs: int = 2
) -> Iterator[tuple[Case, list[Outcome]]]:
    """Run cases on `jobs` workers (cases are generated lazily); yields (case, outcomes) in
    completion order."""
    it = iter(cases)
    lock = threading.Lock()
    results: queue.Queue[Any] = queue.Queue()
    stop = threading.Event()

    def loop() -> None:
        w = Worker(st.mem_limit, llvm_cache=st.llvm_cache)
        try:
            while not stop.is_set():
                with lock:
                    case = next(it, None)
                if case is None:
                    break
                results.put((case, run_case(w, case, st)))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            results.put(e)
        finally:
            w.close()
            results.put(None)

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(jobs)]
    for t in threads:
        t.start()
    running = jobs
    try:
        while running:
            item = results.get()
            if item is None:
                running -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield item
    finally:
        stop.set()
        for t in threads:
            t.join()


# -- real subprocesses -----------------------------------------------------------------------------

_ENTRY = (
    "import faulthandler, signal, sys; faulthandler.register(signal.SIGUSR1); "
    "from glowviz.cli import main; sys.exit(main())"
)


def run_cli_subprocess(model: bytes, command: str, st: Settings) -> Outcome:
    """One CLI command as the user runs it: a fresh process with the memory and time caps."""
    with tempfile.TemporaryDirectory(prefix="glowviz-fuzz-cli-") as d:
        path = Path(d) / "model.onnx"
        path.write_bytes(model)
        argv = [
            a.replace("{model}", str(path)).replace("{out}", str(Path(d) / "out"))
            for a in COMMANDS[command]
        ]
        limit = st.mem_limit

        def cap() -> None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        env = dict(os.environ, GLOWVIZ_NO_DISK_CACHE="1", PYTHONFAULTHANDLER="1")
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-c", _ENTRY, *argv],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=cap,
            env=env,
            start_new_session=True,
        )
        clock = CpuClock(proc.pid, st.timeout + 10)  # + the imports
        try:
            while True:
                try:
                    _out, err = proc.communicate(timeout=clock.poll())
                    break
                except subprocess.TimeoutExpired:
                    if clock.expired():
                        raise
            timed_out = False
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGUSR1)
            time.sleep(0.5)
            os.killpg(proc.pid, signal.SIGKILL)
            _out, err = proc.communicate()
            timed_out = True
        dt = time.perf_counter() - t0
        text = err.decode("utf-8", "replace")
        code = proc.returncode
        sig = -code if code is not None and code < 0 and not timed_out else None
        cls, cause, detail = classify_cli(code, text, timed_out=timed_out, sig=sig, dump=text)
        return Outcome("", command, cls, cause, detail, dt)


# -- case generation -------------------------------------------------------------------------------

SAMPLE_NAMES = (
    "mlp",
    "lenet",
    "resnet_small",
    "mobilenet_small",
    "transformer_block",
    "unet_small",
    "mlp_opset9",
)


def sample_bytes() -> dict[str, bytes]:
    return {n: (SAMPLES / f"{n}.onnx").read_bytes() for n in SAMPLE_NAMES}


def mutant_cases(
    seed: int, count: int, *, slow: bool = True, start: int = 0, only: set[int] | None = None
) -> Iterator[Case]:
    """`count` mutants of the sample models from number `start` (each is seeded by its number:
    a run cut short resumes where it stopped); `slow=False` skips those marked mutator.SLOW;
    `only`: just these numbers."""
    from .mutator import SLOW, mutate

    samples = sample_bytes()
    names = sorted(samples)
    for i in range(start, start + count):
        if only is not None and i not in only:
            continue
        s = seed * 1_000_003 + i
        base = names[s % len(names)]
        data, fam, desc = mutate(samples[base], s)
        while not slow and SLOW in desc:
            s += 7_919_000_000  # deterministic: another mutant in the same slot
            data, fam, desc = mutate(samples[base], s)
        yield Case(f"mut-{seed}-{i}", "mutant", fam, f"{base}: {desc}", data, seed=i)


def graph_cases(
    seed: int, count: int, *, start: int = 0, only: set[int] | None = None
) -> Iterator[Case]:
    from .graphgen import random_graph

    for i in range(start, start + count):
        if only is not None and i not in only:
            continue
        s = seed * 1_000_003 + i
        model, feeds, desc = random_graph(s)
        yield Case(
            f"gen-{seed}-{i}", "graph", "graph", desc, model.SerializeToString(), feeds, seed=s
        )


@dataclass
class Tally:
    by_class: dict[str, int] = field(default_factory=dict)
    by_command: dict[str, dict[str, int]] = field(default_factory=dict)
    signatures: dict[str, list[Outcome]] = field(default_factory=dict)
    cases: dict[str, Case] = field(default_factory=dict)
    classes: dict[tuple[str, str], str] = field(default_factory=dict)

    def add(self, case: Case, outcomes: list[Outcome]) -> None:
        self.cases[case.id] = case
        for o in outcomes:
            self.classes[(case.id, o.command)] = o.cls
            self.by_class[o.cls] = self.by_class.get(o.cls, 0) + 1
            row = self.by_command.setdefault(o.command, {})
            row[o.cls] = row.get(o.cls, 0) + 1
            if o.cls in FAILURES:
                self.signatures.setdefault(o.signature, []).append(o)

    def table(self) -> str:
        cols = [c for c in CLASSES if any(r.get(c) for r in self.by_command.values())]
        w = {c: max(10, len(c) + 2) for c in cols}
        head = f"{'command':<16}" + "".join(f"{c:>{w[c]}}" for c in cols)
        lines = [head]
        for cmd in [*COMMANDS, "check"]:
            r = self.by_command.get(cmd)
            if r:
                lines.append(f"{cmd:<16}" + "".join(f"{r.get(c, 0):>{w[c]}}" for c in cols))
        total = "".join(f"{self.by_class.get(c, 0):>{w[c]}}" for c in cols)
        lines.append(f"{'total':<16}" + total)
        return "\n".join(lines)


__all__ = [
    "CLASSES",
    "COMMANDS",
    "FAILURES",
    "Case",
    "Outcome",
    "Settings",
    "Tally",
    "Worker",
    "classify_cli",
    "graph_cases",
    "mutant_cases",
    "project_frame",
    "run_case",
    "run_cases",
    "run_cli_subprocess",
]
