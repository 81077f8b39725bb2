"""glowviz's compiler: ONNX -> graph IR -> low-level IR -> CPU code."""

__all__: list[str] = []
