"""Drive `onnx.backend.test.BackendTest` over `compiler.onnx_backend` and sort the outcomes.

The reference runner is used as any ONNX harness uses it: it calls `prepare(model, "CPU")` and
`rep.run(inputs)` and compares with its own `assert_similar_outputs` (dtype, shape, rtol/atol
of the case). Nothing is frozen or patched per case; the only choice made here is the executor
(a `Backend` subclass per executor, as a harness picks a device). Each case ends as one of:

    pass             the runner's comparison passed
    refused-op       UnsupportedOpError: an operator (or domain) without a converter
    refused-dtype    UnsupportedTypeError: an element type the compiler does not handle
    refused-feature  any other CompilerError (an attribute, a mode, a rank...)
    wrong            the runner's comparison failed
    crash            any other exception (or an assert inside the compiler)
    skip             the runner skipped it (not counted)
    excluded         not run (counted as not passed): a known issue elsewhere (KNOWN_ISSUES)

`python -m tests.conformance.harness [interpreter|llvm] [Node|Real|...] [-k PATTERN]` prints
every case's outcome, for working on the refusals.
"""

from __future__ import annotations

import fcntl
import functools
import os
import pickle
import re
import sys
import tempfile
import traceback
import unittest
import warnings
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

import compiler
from compiler import onnx_backend
from compiler.errors import CompilerError, UnsupportedOpError, UnsupportedTypeError

EXECUTORS = ("interpreter", "llvm")
#: BackendTest's categories: the node suite, and onnx's shipped model test data ("Real" is
#: the `light` models, run on local files with the runner's dummy inputs).
NODE = "Node"
MODEL_CATEGORIES = ("Real", "Simple", "PyTorchConverted", "PyTorchOperator")
STATUSES = (
    "pass",
    "refused-op",
    "refused-dtype",
    "refused-feature",
    "wrong",
    "crash",
)
_COMPILER_DIR = str(Path(compiler.__file__).resolve().parent)


#: Cases whose outcome is known not to be a pass for a reason outside the API, by (executor,
#: case): the status the test expects ("excluded": not run at all; "a|b": either, where the
#: outcome rests on the BLAS build) and why. The tests check the status stays exactly this, so
#: a fix shows up as a failure asking to drop the entry.
KNOWN_ISSUES: dict[tuple[str, str], tuple[str, str]] = {
    ("llvm", "test_MaxPool2d_stride_padding_dilation_cpu"): (
        "excluded",
        "the LLVM pool emitter unrolls the 60x80 dilated window: compiling takes 3 to 13 "
        "minutes (LLVM backend bug)",
    ),
    ("interpreter", "test_squeezenet_cpu"): (
        "wrong|pass",
        "ill-conditioned: the light model's logits are ~9.5e9, all equal in exact arithmetic; "
        "some BLAS builds' tail tile rounds 40 of the 1000 channels one ulp higher, and softmax "
        "turns that into 0.025 instead of 0.001 (LLVM and onnxruntime round every channel "
        "alike); numpy 2.4.6's OpenBLAS on Zen 5 rounds them alike too, so either is expected",
    ),
}


@dataclass(frozen=True)
class Outcome:
    status: str
    detail: str = ""


@functools.cache
def backend_for(executor: str) -> type[onnx_backend.Backend]:
    """`compiler.onnx_backend.Backend` with `executor` as its default, for the runner."""

    class ExecutorBackend(onnx_backend.Backend):
        @classmethod
        def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> Any:
            kwargs.setdefault("executor", executor)
            return onnx_backend.Backend.prepare(model, device, **kwargs)

    ExecutorBackend.__name__ = f"{executor.capitalize()}Backend"
    return ExecutorBackend


#: Where `node_cases` keeps onnx's node cases between processes and test sessions: set by
#: tests/conformance/conftest.py ($GLOWVIZ_NODE_CASE_DIR, else ~/.cache/glowviz/onnx-node-cases);
#: None generates them in each process.
NODE_CASE_DIR: Path | None = None
#: Lists kept in NODE_CASE_DIR (one per onnx / numpy / Python install that ran the tests).
KEEP_NODE_CASE_LISTS = 4


def _node_case_key() -> str:
    """What the generated node cases depend on: onnx's, numpy's and Python's versions, and
    the text of onnx's case generators and reference implementation (an edited onnx of the
    same version is not taken for the cached one; two virtual environments with the same onnx
    share the entry). ~15 ms."""
    import hashlib

    import numpy as np

    root = Path(onnx.__file__).resolve().parent
    h = hashlib.sha256(f"{onnx.__version__} {np.__version__} {sys.version}".encode())
    for sub in ("backend/test/case", "backend/test/loader", "reference"):
        for f in sorted((root / sub).rglob("*.py")):
            h.update(f"{f.relative_to(root)}\n".encode() + f.read_bytes())
    return h.hexdigest()[:24]


@functools.cache
def node_cases() -> list[Any]:
    """onnx's node test cases (`onnx.backend.test.loader.load_model_tests(kind="node")`, as
    BackendTest loads them). onnx 1.23 generates them in Python at first use -- every case's
    model and its expected outputs from onnx's reference implementation: ~6.5 s of CPU. The
    generators seed numpy's random state before each case (onnx's case/base.py), so the same
    onnx, numpy and Python give the same cases: the first process to need them pickles the
    list under NODE_CASE_DIR, keyed by those (`_node_case_key`), and every later process, of
    this test session or a later one, loads it (~0.05 s). A lock makes a second process wait
    for the first one's pickle instead of generating the same cases beside it."""
    from onnx.backend.test.loader import load_model_tests

    def generate() -> list[Any]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return load_model_tests(kind="node")

    if NODE_CASE_DIR is None:
        return generate()
    try:
        NODE_CASE_DIR.mkdir(parents=True, exist_ok=True)
        lock = (NODE_CASE_DIR / "lock").open("a")
    except OSError:
        return generate()  # no writable cache: each process generates them
    path = NODE_CASE_DIR / f"node-cases-{_node_case_key()}.pickle"
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.is_file():
            try:
                with path.open("rb") as f:
                    return pickle.load(f)
            except Exception:  # noqa: BLE001 - a damaged file: generated and written anew
                pass
        cases = generate()
        try:
            data = pickle.dumps(cases, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):
            return cases  # a later onnx whose cases do not pickle: each process generates them
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        # The newest few lists stay (~10 MB each): other onnx or numpy installs' too.
        kept = sorted(NODE_CASE_DIR.glob("node-cases-*.pickle"), key=lambda p: p.stat().st_mtime)
        for old in kept[:-KEEP_NODE_CASE_LISTS]:
            old.unlink(missing_ok=True)
        return cases


@functools.cache
def _runner(executor: str) -> Any:
    import onnx.backend.test
    import onnx.backend.test.runner as runner

    # BackendTest loads every category's cases in its constructor, the node cases through
    # the runner module's `load_model_tests`: hand it `node_cases()` (the same list).
    real_load = runner.load_model_tests

    def load(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("kind") == "node" and not args:
            return node_cases()
        return real_load(*args, **kwargs)

    runner.load_model_tests = load
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the node cases' own numpy warnings
            return onnx.backend.test.BackendTest(backend_for(executor), __name__)
    finally:
        runner.load_model_tests = real_load


def case_names(category: str) -> list[str]:
    """The CPU cases of a BackendTest category ("Node", "Real", ...), sorted."""
    items = _runner(EXECUTORS[0])._test_items[f"{category}Model"]
    return sorted(n for n in items if n.endswith("_cpu"))


def _raised_in_compiler(exc: BaseException) -> bool:
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and str(Path(frames[-1].filename).resolve()).startswith(_COMPILER_DIR)


def _names_in(model: onnx.ModelProto | None) -> set[str]:
    if model is None:
        return set()
    g = model.graph
    names = {vi.name for vi in g.input}
    for i, n in enumerate(g.node):
        names.add(n.name or f"{n.op_type}_{i}")
    return names


def _is_clear(err: CompilerError, model: onnx.ModelProto | None) -> bool:
    """The message names (in quotes) a node or an input of the model it refuses."""
    text = str(err)
    return any(f"'{n}'" in text for n in _names_in(model))


@functools.cache
def outcome(executor: str, category: str, name: str) -> Outcome:
    known = KNOWN_ISSUES.get((executor, name))
    if known and known[0] == "excluded":
        return Outcome("excluded", known[1])
    item = _runner(executor)._test_items[f"{category}Model"][name]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            item.func(None)
    except unittest.SkipTest as e:
        return Outcome("skip", str(e))
    except CompilerError as e:
        model = item.proto[0] if item.proto else None
        status = (
            "refused-op"
            if isinstance(e, UnsupportedOpError)
            else "refused-dtype"
            if isinstance(e, UnsupportedTypeError)
            else "refused-feature"
        )
        detail = f"{type(e).__name__}: {e}"
        if not _is_clear(e, model):
            return Outcome("crash", f"refusal names no node or input of the model: {detail}")
        return Outcome(status, detail)
    except AssertionError as e:
        if _raised_in_compiler(e):
            return Outcome("crash", traceback.format_exc(limit=-6))
        return Outcome("wrong", " ".join(str(e).split())[:400])
    except Exception:  # noqa: BLE001 - anything else is a crash to report
        return Outcome("crash", traceback.format_exc(limit=-6))
    return Outcome("pass")


def outcomes(executor: str, category: str, onnx_home: str | Path) -> dict[str, Outcome]:
    """Every case of `category` on `executor`; the runner writes the light models' dummy data
    under $ONNX_HOME, which is set to `onnx_home` meanwhile (keep it out of the user's ~)."""
    old = os.environ.get("ONNX_HOME")
    os.environ["ONNX_HOME"] = str(onnx_home)
    try:
        return {n: outcome(executor, category, n) for n in case_names(category)}
    finally:
        if old is None:
            os.environ.pop("ONNX_HOME", None)
        else:
            os.environ["ONNX_HOME"] = old


def counts(results: dict[str, Outcome]) -> Counter[str]:
    return Counter(o.status for o in results.values())


def summary(executor: str, category: str, results: dict[str, Outcome]) -> str:
    c = counts(results)
    total = sum(v for k, v in c.items() if k != "skip")
    rate = c["pass"] / total if total else 0.0
    parts = ", ".join(f"{s} {c[s]}" for s in STATUSES)
    skipped = "".join(f", {k} {c[k]}" for k in ("skip", "excluded") if c[k])
    return f"{category} [{executor}]: {rate:.1%} of {total} passed ({parts}{skipped})"


def refusal_reasons(results: dict[str, Outcome], top: int = 30) -> list[tuple[str, int]]:
    """The most common refusal reasons (op names for missing ops, messages otherwise)."""
    reasons: Counter[str] = Counter()
    for o in results.values():
        if not o.status.startswith("refused"):
            continue
        if o.status == "refused-op":
            m = re.search(r"op (\w+)", o.detail)
            reasons[f"op {m.group(1) if m else '?'}"] += 1
        elif o.status == "refused-dtype":
            m = re.search(r"(?:element type|cast to) (\w+)", o.detail)
            reasons[f"dtype {m.group(1) if m else '?'}"] += 1
        else:
            text = re.sub(r"^.*?\): |^\w+: unsupported: ", "", o.detail)
            reasons[re.sub(r"'[^']*'|\d+|<[^>]*>|\[[^\]]*\]", "_", text)[:90]] += 1
    return reasons.most_common(top)


def bad_cases(executor: str, results: dict[str, Outcome]) -> list[str]:
    """Wrong answers and crashes, and known issues whose status changed."""
    bad = []
    for n, o in results.items():
        known = KNOWN_ISSUES.get((executor, n))
        if known is not None:
            if o.status not in known[0].split("|"):
                bad.append(f"{n}: known issue is now {o.status} (update KNOWN_ISSUES): {known[1]}")
        elif o.status in ("wrong", "crash"):
            bad.append(f"{n}: {o.status}: {o.detail}")
    return bad


def main(argv: Iterable[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("executor", nargs="?", default="interpreter", choices=EXECUTORS)
    p.add_argument("category", nargs="?", default=NODE, choices=(NODE, *MODEL_CATEGORIES))
    p.add_argument("-k", default="", help="only cases whose name contains this")
    p.add_argument("--reasons", action="store_true", help="print the commonest refusals")
    args = p.parse_args(list(argv) if argv is not None else None)
    with tempfile.TemporaryDirectory() as home:
        os.environ["ONNX_HOME"] = home
        results = {
            n: outcome(args.executor, args.category, n)
            for n in case_names(args.category)
            if args.k in n
        }
    for n, o in results.items():
        print(f"{o.status:16} {n}  {o.detail[:200]}")
    print(summary(args.executor, args.category, results))
    if args.reasons:
        for reason, k in refusal_reasons(results):
            print(f"{k:5}  {reason}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
