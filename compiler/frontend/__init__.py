"""The ONNX frontend: load a model file and import it into the graph IR (pipeline stage 1)."""

from compiler.frontend import (  # noqa: F401 - converter modules register on import
    converters_attention,
    converters_control,
    converters_index,
    converters_loss,
    converters_math,
    converters_misc,
    converters_nn,
    converters_norm,
    converters_quant,
    converters_recurrent,
    converters_sequence,
    converters_tensor,
    converters_training,
)
from compiler.frontend.loader import load_model
from compiler.frontend.onnx_importer import import_onnx
from compiler.frontend.registry import CONVERTERS

__all__ = ["CONVERTERS", "import_onnx", "load_model"]
