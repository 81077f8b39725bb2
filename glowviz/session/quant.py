"""The quantization view's data (the session layer): the per-node SQNR report of a model under
its `--quantize` options, each value's profile histogram with the range its scale and offset
cover, SQNR bands for colouring the graph, and what-if float markings (the output SQNR with
some nodes kept in float, without recompiling the session).

Textual-free: the IDE's Quant view uses it; the headless equivalent is `glowviz quant-report`.
Everything is computed on the graph interpreter (compiler.quantize), which the LLVM executor
matches bit for bit; results are cached, so the view only draws.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from compiler.graph.ops_quant import QMAX, QMIN
from compiler.pipeline import CompileOptions
from compiler.quantization import QuantizeOptions, as_quantize_options
from compiler.quantization.profile import Profile
from compiler.quantize import (
    NodeSQNR,
    QuantReport,
    model_input_types,
    output_sqnr,
    quant_report,
    random_samples,
)

#: SQNR bands (dB lower bounds, best first): the graph's node colours and the table's.
BANDS = (("sqnr-good", 40.0), ("sqnr-fair", 30.0), ("sqnr-poor", 20.0), ("sqnr-bad", -math.inf))
#: The band of a node kept in float.
FLOAT_BAND = "sqnr-float"


def band(db: float, threshold: float = 30.0) -> str:
    """The colour band of an SQNR: >= 40 good, >= threshold fair, >= 20 poor, else bad."""
    if math.isnan(db):
        return "sqnr-bad"
    for name, lo in BANDS:
        if db >= (threshold if name == "sqnr-fair" else lo):
            return name
    return "sqnr-bad"


@dataclass(frozen=True)
class Histogram:
    """A value's profile: counts over [lo, hi] in `bins` bins, the values' min/max, and the
    int8 grid's real range [qlo, qhi] (scale * (-128 - offset) .. scale * (127 - offset))."""

    value: str
    counts: np.ndarray
    lo: float
    hi: float
    vmin: float
    vmax: float
    scale: float
    offset: int

    @property
    def qlo(self) -> float:
        return self.scale * (QMIN - self.offset)

    @property
    def qhi(self) -> float:
        return self.scale * (QMAX - self.offset)

    @property
    def clipped(self) -> float:
        """Share of the profiled values outside the int8 range (saturated by quantization)."""
        total = float(self.counts.sum())
        if total <= 0:
            return 0.0
        edges = np.linspace(self.lo, self.hi, self.counts.size + 1)
        mids = (edges[:-1] + edges[1:]) / 2
        out = self.counts[(mids < self.qlo) | (mids > self.qhi)].sum()
        return float(out) / total


class QuantAnalysis:
    """The quantization data of one model and its quantize options (see the module docstring).

    `samples` random evaluation samples (seed `seed`) unless given. Thread-safe: the IDE
    computes in a worker while the view may ask for cached data."""

    def __init__(
        self,
        model: Any,
        options: CompileOptions,
        *,
        samples: list[dict[str, np.ndarray]] | None = None,
        count: int = 4,
        seed: int = 1,
        threshold: float = 30.0,
    ) -> None:
        if options.quantize is None:
            raise ValueError("no --quantize options: nothing to analyse")
        self.model = model
        self.qopts: QuantizeOptions = as_quantize_options(options.quantize)
        self.base = replace(options, quantize=None)
        self.threshold = threshold
        self._samples = samples
        self._count, self._seed = count, seed
        self._report: QuantReport | None = None
        self._profile: Profile | None = None
        self._what_if: dict[frozenset[str], float] = {}
        self._lock = threading.Lock()

    @property
    def samples(self) -> list[dict[str, np.ndarray]]:
        if self._samples is None:
            types = model_input_types(self.model, self.base)
            self._samples = random_samples(types, self._count, self._seed)
        return self._samples

    @property
    def profile(self) -> Profile:
        if self._profile is None:
            self._profile = self.qopts.load_profile()
        return self._profile

    def report(self) -> QuantReport:
        """Per-node local and propagated SQNR, outputs' SQNR (computed once)."""
        with self._lock:
            if self._report is None:
                self._report = quant_report(
                    self.model,
                    self.qopts,
                    self.samples,
                    options=self.base,
                    threshold=self.threshold,
                )
            return self._report

    def set_threshold(self, db: float) -> None:
        """The SQNR under which a node counts as imprecise (the report's first_below)."""
        self.threshold = db
        with self._lock:
            if self._report is not None:
                self._report.threshold = db

    @property
    def has_report(self) -> bool:
        return self._report is not None

    def node(self, name: str) -> NodeSQNR | None:
        return next((n for n in self.report().nodes if n.node == name), None)

    def histogram(self, node: NodeSQNR) -> Histogram | None:
        """The profile of the float value `node` computes, with its chosen parameters."""
        if node.value not in self.profile:
            return None
        tp = self.profile[node.value]
        return Histogram(
            node.value,
            np.asarray(tp.hist, np.float64),
            tp.hist_min,
            tp.hist_max,
            tp.min,
            tp.max,
            node.scale,
            node.offset,
        )

    def what_if(self, extra_float: frozenset[str]) -> float:
        """The output SQNR with `extra_float` (float-graph value names, as the report's
        `NodeSQNR.value`) kept in float besides the options' own (cached per set)."""
        if not extra_float:
            return self.report().output_sqnr
        with self._lock:
            cached = self._what_if.get(extra_float)
        if cached is not None:
            return cached
        trial = self.qopts.with_keep_float(set(self.qopts.keep_float) | extra_float)
        db = output_sqnr(self.model, trial, self.samples, options=self.base)
        with self._lock:
            self._what_if[extra_float] = db
        return db

    def node_bands(self, extra_float: frozenset[str] = frozenset()) -> dict[str, str]:
        """Colour band of every quantized node by its propagated SQNR (FLOAT_BAND for nodes
        marked float in the what-if), keyed by node name."""
        return {
            n.node: FLOAT_BAND if n.value in extra_float else band(n.propagated, self.threshold)
            for n in self.report().nodes
        }


__all__ = ["BANDS", "FLOAT_BAND", "Histogram", "QuantAnalysis", "band"]
