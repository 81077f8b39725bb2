"""Profile-guided int8 quantization (pipeline stage "quantize", Glow's flow): profiles, the
choice of scale and offset, and the passes that instrument and quantize the graph.

The driver that runs profiles, measures SQNR and searches the float fallback set is
`compiler/quantize.py` (it needs the executors); the arithmetic of the quantized ops is
`compiler/kernels/reference_quant.py`. docs/QUANTIZATION.md describes all of it.
"""

from compiler.quantization.options import DEFAULT_OPS, QuantizeOptions, as_quantize_options
from compiler.quantization.params import CALIBRATIONS, SCHEMAS, QParams, choose_params
from compiler.quantization.passes import (
    PROFILE_PREFIX,
    InstrumentProfile,
    QuantCleanup,
    QuantizeGraph,
)
from compiler.quantization.profile import Profile, TensorProfile, graph_hash

__all__ = [
    "CALIBRATIONS",
    "DEFAULT_OPS",
    "PROFILE_PREFIX",
    "SCHEMAS",
    "InstrumentProfile",
    "Profile",
    "QParams",
    "QuantCleanup",
    "QuantizeGraph",
    "QuantizeOptions",
    "TensorProfile",
    "as_quantize_options",
    "choose_params",
    "graph_hash",
]
