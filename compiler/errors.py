"""One error hierarchy for the whole compiler: every failure a user can cause is a CompilerError.

Messages say what went wrong, where (model file, ONNX node, op, pass, instruction) and what to do.
The CLI prints `str(err)` as one line and exits 2; the IDE shows it in a pane.
"""

from __future__ import annotations


class CompilerError(Exception):
    """Base class of every error the compiler raises on purpose."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message} ({hint})")


class ModelLoadError(CompilerError):
    """The model file is missing, unreadable, truncated or not ONNX."""


class UnsupportedError(CompilerError):
    """The model uses an op, attribute, dtype or opset the compiler does not support."""

    kind = "unsupported"  # the message's first word(s)

    def __init__(
        self,
        message: str,
        *,
        node: str | None = None,
        op: str | None = None,
        opset: int | None = None,
        model: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.node, self.op, self.opset, self.model = node, op, opset, model
        where = []
        if model:
            where.append(f"model {model}")
        if node is not None:
            where.append(f"node '{node}'")
        if op:
            where.append(f"op {op}" + (f" (opset {opset})" if opset is not None else ""))
        prefix = f"{self.kind}: " + (", ".join(where) + ": " if where else "")
        super().__init__(prefix + message, hint=hint)


class InvalidModelError(UnsupportedError):
    """The model breaks ONNX's own rules in a way the ONNX checker lets through: initializer
    data that does not match its shape and type, out-of-range attributes (a stride of 0, a group
    that does not divide the channels, an axis past the rank), impossible dims. Raised by the
    import-time validation (compiler/frontend/validate.py)."""

    kind = "invalid model"


class ResourceLimitError(CompilerError):
    """A compile would need more memory than its limits allow (the planned arena above
    `CompileOptions.max_memory`, a tensor larger than the whole budget, a constant to fold above
    `CompileOptions.fold_limit`). The message says how much and how to raise the limit."""


class ShapeError(CompilerError):
    """Shapes do not agree: a wrong input shape, or a symbolic dim without a concrete value."""


class InputError(CompilerError):
    """Inputs given at run time do not match the model (count, name, dtype or shape)."""


class VerifyError(CompilerError):
    """An IR failed verification; the message names the node or instruction."""


class ParseError(CompilerError):
    """IR text could not be parsed; the message gives line and column."""

    def __init__(self, message: str, *, line: int | None = None, col: int | None = None) -> None:
        self.line, self.col = line, col
        loc = f"line {line}" + (f", col {col}" if col is not None else "") if line else ""
        super().__init__(f"{loc}: {message}" if loc else message)


class PassError(CompilerError):
    """A pass failed; wraps the cause with the pass name and, where known, the node."""

    def __init__(self, message: str, *, pass_name: str, node: str | None = None) -> None:
        self.pass_name, self.node = pass_name, node
        where = f"pass {pass_name}" + (f", node '{node}'" if node else "")
        super().__init__(f"{where}: {message}")


class CodegenError(CompilerError):
    """The LLVM backend cannot generate code for an instruction."""

    def __init__(self, message: str, *, instruction: str | None = None) -> None:
        self.instruction = instruction
        super().__init__(
            f"codegen: instruction '{instruction}': {message}"
            if instruction
            else f"codegen: {message}"
        )


class ExecutionError(CompilerError):
    """Running compiled code failed (bad plan, kernel fault caught, wrong state)."""


class QuantizationError(CompilerError):
    """A quantization profile or option cannot be used: a stale or unreadable profile, a tensor
    the profile never saw, an unknown schema or calibration."""


class UnsupportedOpError(UnsupportedError):
    """The model uses an operator (or an operator domain) the frontend has no converter for."""


class UnsupportedTypeError(UnsupportedError):
    """A tensor of the model (input, output, initializer, attribute) has an unsupported dtype."""


class InputValueRequiredError(UnsupportedError):
    """A shape-like operand (Reshape's shape, Pad's pads, ...) depends on graph inputs.

    The graph stays static only once those inputs' values are known: `inputs` names them (ONNX
    names). `compiler.onnx_backend` catches this and specializes the model on the values given
    at run time; `CompileOptions.const_inputs` gives them up front.
    """

    def __init__(self, message: str, *, inputs: tuple[str, ...], **where: object) -> None:
        self.inputs = tuple(inputs)
        super().__init__(message, **where)  # type: ignore[arg-type]
