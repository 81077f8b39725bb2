"""Quantization profiles (Glow's `-dump-profile` / `-load-profile`): per tensor, the range and
a histogram of the values seen on calibration inputs, keyed by a hash of the graph they were
measured on, so a profile of another (or an edited) graph is refused instead of misapplied.

The JSON form (`glowviz.profile/1`, docs/QUANTIZATION.md):

    {"format": "glowviz.profile/1", "graph_hash": "sha256:...", "source": "resnet50.onnx",
     "inputs": 32, "bins": 2048,
     "tensors": {"conv_0_relu": {"min": 0.0, "max": 5.1, "count": 802816, "nonfinite": 0,
                                  "hist_min": 0.0, "hist_max": 5.1, "hist": [12, 0, ...],
                                  "zeros": 401000, "axis_sums": {"1": [...], "-1": [...]},
                                  "axis_counts": {"1": 12544, "-1": 14336}}, ...}}

Histograms have `bins` equal bins over [hist_min, hist_max]; when later data falls outside, the
range grows and the old counts are spread over the new bins in proportion to their overlap.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from compiler.errors import QuantizationError
from compiler.graph.ir import Module
from compiler.quantization.gptq import HessianSet, LayerHessian

FORMAT = "glowviz.profile/1"
DEFAULT_BINS = 2048
#: Channel sums are kept for axes of at most this many channels (the JSON stays small).
MAX_CHANNELS = 8192


def graph_hash(module: Module) -> str:
    """A hash of the graph a profile belongs to: its text (ops, attributes, types, names and
    the constants' digests), so any change to structure or weights changes it."""
    from compiler.graph.printer import print_module

    return "sha256:" + hashlib.sha256(print_module(module).encode()).hexdigest()


@dataclass
class TensorProfile:
    """What one tensor did on the calibration inputs: range, count and histogram."""

    min: float = math.inf
    max: float = -math.inf
    count: int = 0
    nonfinite: int = 0
    hist_min: float = 0.0
    hist_max: float = 0.0
    hist: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    #: Values exactly 0 (a Relu's): exact in every quantization, so the MSE calibration does
    #: not count them as rounding error.
    zeros: int = 0
    #: Per-channel sums of the finite values along axis 1 ("1") and along the last axis
    #: ("-1") of tensors of rank >= 2, and how many values each channel summed: the channel
    #: means that bias correction of the quantized Conv / FullyConnected weights uses.
    axis_sums: dict[str, np.ndarray] = field(default_factory=dict)
    axis_counts: dict[str, int] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return self.count == 0

    def update(self, data: np.ndarray, bins: int = DEFAULT_BINS) -> None:
        """Add one tensor's values (non-finite ones are only counted)."""
        flat = np.asarray(data, dtype=np.float32).reshape(-1)
        finite = flat[np.isfinite(flat)]
        self.nonfinite += int(flat.size - finite.size)
        if finite.size == 0:
            return
        lo, hi = float(finite.min()), float(finite.max())
        self.min, self.max = min(self.min, lo), max(self.max, hi)
        self.count += int(finite.size)
        self.zeros += int(np.count_nonzero(finite == 0.0))
        self._add_axis_sums(np.asarray(data, dtype=np.float32))
        if self.hist.size == 0:
            self.hist_min, self.hist_max = _nonempty(lo, hi)
            self.hist = np.zeros(bins, np.float64)
        elif lo < self.hist_min or hi > self.hist_max:
            self._grow(min(lo, self.hist_min), max(hi, self.hist_max))
        # In float64: a narrow range far from zero has bins finer than float32 resolves.
        counts, _ = np.histogram(
            finite.astype(np.float64), bins=self.hist.size, range=(self.hist_min, self.hist_max)
        )
        self.hist += counts

    def _add_axis_sums(self, data: np.ndarray) -> None:
        if data.ndim < 2:
            return
        for key, axis in (("1", 1), ("-1", data.ndim - 1)):
            n = data.shape[axis]
            if n > MAX_CHANNELS or (key in self.axis_sums and self.axis_sums[key].size != n):
                continue
            moved = np.moveaxis(data, axis, -1).reshape(-1, n).astype(np.float64)
            sums = np.where(np.isfinite(moved), moved, 0.0).sum(axis=0)
            self.axis_sums[key] = self.axis_sums.get(key, np.zeros(n)) + sums
            self.axis_counts[key] = self.axis_counts.get(key, 0) + moved.shape[0]

    def channel_means(self, axis: str) -> np.ndarray | None:
        """The mean of each channel along axis "1" or "-1" (None: not recorded)."""
        sums, count = self.axis_sums.get(axis), self.axis_counts.get(axis, 0)
        return None if sums is None or count <= 0 else sums / count

    def _grow(self, lo: float, hi: float) -> None:
        """Spread the counts over bins covering [lo, hi] (proportional to the overlap)."""
        lo, hi = _nonempty(lo, hi)
        n = self.hist.size
        old = np.linspace(self.hist_min, self.hist_max, n + 1)
        new = np.linspace(lo, hi, n + 1)
        cdf = np.concatenate([[0.0], np.cumsum(self.hist)])
        self.hist = np.diff(np.interp(new, old, cdf))
        self.hist_min, self.hist_max = lo, hi

    def merge(self, other: TensorProfile) -> None:
        """Add another profile of the same tensor (e.g. from another process)."""
        if other.empty:
            self.nonfinite += other.nonfinite
            return
        if self.empty:
            self.__dict__.update(other.copy().__dict__)
            return
        lo, hi = min(self.hist_min, other.hist_min), max(self.hist_max, other.hist_max)
        if (lo, hi) != (self.hist_min, self.hist_max):
            self._grow(lo, hi)
        theirs = other.copy()
        if theirs.hist.size != self.hist.size or (lo, hi) != (theirs.hist_min, theirs.hist_max):
            theirs.hist = _rebin(theirs, self.hist.size, lo, hi)
        self.hist += theirs.hist
        self.min, self.max = min(self.min, other.min), max(self.max, other.max)
        self.count += other.count
        self.nonfinite += other.nonfinite
        self.zeros += other.zeros
        for key, sums in other.axis_sums.items():
            mine = self.axis_sums.get(key)
            if mine is None or mine.size == sums.size:
                self.axis_sums[key] = sums.copy() if mine is None else mine + sums
                self.axis_counts[key] = self.axis_counts.get(key, 0) + other.axis_counts[key]

    def copy(self) -> TensorProfile:
        return TensorProfile(
            self.min,
            self.max,
            self.count,
            self.nonfinite,
            self.hist_min,
            self.hist_max,
            self.hist.copy(),
            self.zeros,
            {k: v.copy() for k, v in self.axis_sums.items()},
            dict(self.axis_counts),
        )

    def bin_edges(self) -> np.ndarray:
        return np.linspace(self.hist_min, self.hist_max, self.hist.size + 1)

    def to_json(self) -> dict[str, Any]:
        return {
            "min": self.min if self.count else None,
            "max": self.max if self.count else None,
            "count": self.count,
            "nonfinite": self.nonfinite,
            "hist_min": self.hist_min,
            "hist_max": self.hist_max,
            "hist": [round(float(c), 3) for c in self.hist],
            "zeros": self.zeros,
            "axis_sums": {k: [float(x) for x in v] for k, v in self.axis_sums.items()},
            "axis_counts": dict(self.axis_counts),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TensorProfile:
        return cls(
            math.inf if d.get("min") is None else float(d["min"]),
            -math.inf if d.get("max") is None else float(d["max"]),
            int(d.get("count", 0)),
            int(d.get("nonfinite", 0)),
            float(d.get("hist_min", 0.0)),
            float(d.get("hist_max", 0.0)),
            np.asarray(d.get("hist", []), dtype=np.float64),
            int(d.get("zeros", 0)),
            {k: np.asarray(v, np.float64) for k, v in d.get("axis_sums", {}).items()},
            {k: int(v) for k, v in d.get("axis_counts", {}).items()},
        )


def _nonempty(lo: float, hi: float) -> tuple[float, float]:
    """A histogram range of positive width around a constant tensor."""
    if hi > lo:
        return lo, hi
    pad = max(abs(lo) * 1e-3, 1e-6)
    return lo - pad, hi + pad


def _rebin(tp: TensorProfile, n: int, lo: float, hi: float) -> np.ndarray:
    cdf = np.concatenate([[0.0], np.cumsum(tp.hist)])
    return np.diff(np.interp(np.linspace(lo, hi, n + 1), tp.bin_edges(), cdf))


@dataclass
class Profile:
    """Profiles of every activation of one graph (see the module docstring)."""

    graph_hash: str
    tensors: dict[str, TensorProfile] = field(default_factory=dict)
    source: str = ""
    inputs: int = 0
    bins: int = DEFAULT_BINS
    executor: str = ""
    #: The weighted layers' input Hessians (GPTQ weight rounding), when profiled with them;
    #: stored beside the JSON (`hessian_file`) and read when first asked for.
    hessians: HessianSet | None = None
    hessian_file: Path | None = None
    hessian_digest: str = ""

    def load_hessians(self) -> HessianSet | None:
        """The layers' Hessians (None: profiled without them). Reads the file beside the
        JSON once; a missing or altered file is an error naming the fix."""
        if self.hessians is None and self.hessian_file is not None:
            self.hessians = _read_hessians(self.hessian_file, self.hessian_digest)
        return self.hessians

    def update(self, values: dict[str, np.ndarray]) -> None:
        """Add one calibration input's values (tensor name -> array)."""
        for name, data in values.items():
            self.tensors.setdefault(name, TensorProfile()).update(data, self.bins)
        self.inputs += 1

    def merge(self, other: Profile) -> None:
        self.check_hash(other.graph_hash, "merging profiles")
        for name, tp in other.tensors.items():
            self.tensors.setdefault(name, TensorProfile()).merge(tp)
        self.inputs += other.inputs
        theirs = other.load_hessians()
        if theirs is not None:
            mine = self.load_hessians()
            if mine is None:
                self.hessians = mine = HessianSet()
            mine.merge(theirs)

    def check_hash(self, expected: str, what: str = "this graph") -> None:
        """Refuse a profile measured on another graph (or on other weights)."""
        if self.graph_hash != expected:
            raise QuantizationError(
                f"the profile belongs to another graph ({self.graph_hash[:19]}..., "
                f"{what} is {expected[:19]}...)",
                hint="profile the model again with the same compile options "
                "(`glowviz profile`): the graph or its weights changed since",
            )

    def __getitem__(self, name: str) -> TensorProfile:
        return self.tensors[name]

    def __contains__(self, name: object) -> bool:
        return name in self.tensors

    def to_json(self, hessian_file: str | None = None) -> dict[str, Any]:
        """The JSON form; `hessian_file` (the Hessians' file name beside it) when they are
        written too (`save`)."""
        extra: dict[str, Any] = {}
        if hessian_file is not None and self.hessians is not None:
            extra["hessians"] = {
                "file": hessian_file,
                "sha256": self.hessian_digest,
                "layers": len(self.hessians.layers),
            }
        return {
            "format": FORMAT,
            "graph_hash": self.graph_hash,
            "source": self.source,
            "inputs": self.inputs,
            "bins": self.bins,
            "executor": self.executor,
            "tensors": {k: v.to_json() for k, v in sorted(self.tensors.items())},
            **extra,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any], base: Path | None = None) -> Profile:
        """From the JSON form; `base` is the directory its Hessians' file is relative to."""
        if d.get("format") != FORMAT:
            raise QuantizationError(
                f"not a quantization profile (format {d.get('format')!r}, expected {FORMAT!r})"
            )
        hess = d.get("hessians") or {}
        hfile = None
        if hess.get("file"):
            hfile = (base or Path(".")) / str(hess["file"])
        return cls(
            str(d["graph_hash"]),
            {k: TensorProfile.from_json(v) for k, v in d.get("tensors", {}).items()},
            str(d.get("source", "")),
            int(d.get("inputs", 0)),
            int(d.get("bins", DEFAULT_BINS)),
            str(d.get("executor", "")),
            hessian_file=hfile,
            hessian_digest=str(hess.get("sha256", "")),
        )

    def encoded(self, path: str | Path) -> list[tuple[Path, bytes]]:
        """The files of this profile saved as `path`, in the order to write them: with
        Hessians, `<stem>.hessians.npz` beside it first, then the JSON naming that file and
        its digest. (`save` writes them; the CLI writes them with its own atomic writer.)"""
        path = Path(path)
        files: list[tuple[Path, bytes]] = []
        name = None
        hs = self.load_hessians()
        if hs is not None:
            data = _hessian_bytes(hs)
            self.hessian_digest = "sha256:" + hashlib.sha256(data).hexdigest()
            self.hessian_file = path.with_name(path.stem + ".hessians.npz")
            name = self.hessian_file.name
            files.append((self.hessian_file, data))
        text = json.dumps(self.to_json(name), separators=(",", ":")) + "\n"
        files.append((path, text.encode()))
        return files

    def save(self, path: str | Path) -> None:
        """Writes the files of `encoded`, each to a temporary file renamed into place."""
        for target, data in self.encoded(path):
            _atomic_write_bytes(target, data)

    @classmethod
    def load(cls, path: str | Path) -> Profile:
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise QuantizationError(f"cannot read profile {path}: {e.strerror or e}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise QuantizationError(f"profile {path} is not JSON: {e}") from None
        return cls.from_json(data, Path(path).parent)

    @classmethod
    def merged(cls, profiles: Iterable[Profile]) -> Profile:
        it = iter(profiles)
        first = next(it)
        out = Profile(first.graph_hash, {}, first.source, 0, first.bins, first.executor)
        out.merge(first)
        for p in it:
            out.merge(p)
        return out


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _hessian_bytes(hs: HessianSet) -> bytes:
    """The Hessians as an .npz: `names` (the layers), `rows`, and per layer `h<i>`: the
    upper triangles (they are symmetric) in float32, [G, K (K + 1) / 2], row by row."""
    names = sorted(hs.layers)
    arrays: dict[str, np.ndarray] = {
        "names": np.array(names, dtype=np.str_),
        "rows": np.array([hs.layers[n].rows for n in names], np.int64),
    }
    for i, n in enumerate(names):
        h = hs.layers[n].h
        upper = np.triu_indices(h.shape[1])
        arrays[f"h{i}"] = h[:, upper[0], upper[1]].astype(np.float32)
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]
    return buf.getvalue()


def _unpack_upper(packed: np.ndarray) -> np.ndarray:
    """[G, K (K + 1) / 2] upper triangles -> [G, K, K] symmetric float64."""
    g, m = packed.shape
    k = int(round((math.isqrt(8 * m + 1) - 1) / 2))
    if k * (k + 1) // 2 != m:
        raise ValueError(f"{m} values are not a triangle")
    h = np.zeros((g, k, k), np.float64)
    i, j = np.triu_indices(k)
    h[:, i, j] = packed
    h[:, j, i] = packed
    return h


def _read_hessians(path: Path, digest: str) -> HessianSet:
    hint = "profile the model again (`glowviz profile --hessians`) and keep both files together"
    try:
        data = path.read_bytes()
    except OSError as e:
        raise QuantizationError(
            f"cannot read the profile's Hessians {path}: {e.strerror or e}", hint=hint
        ) from None
    if digest and "sha256:" + hashlib.sha256(data).hexdigest() != digest:
        raise QuantizationError(
            f"{path} is not the Hessians file this profile was written with", hint=hint
        )
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            names = [str(n) for n in z["names"]]
            rows = z["rows"]
            layers = {
                n: LayerHessian(_unpack_upper(z[f"h{i}"]), int(rows[i]))
                for i, n in enumerate(names)
            }
    except (OSError, ValueError, KeyError) as e:
        raise QuantizationError(f"{path} is not a Hessians file: {e}", hint=hint) from None
    return HessianSet(layers)


__all__ = ["DEFAULT_BINS", "FORMAT", "Profile", "TensorProfile", "graph_hash"]
