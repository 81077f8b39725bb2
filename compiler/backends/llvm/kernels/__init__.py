"""Fast float32 kernels emitted with llvmlite, specialised for constant shapes and strides."""

from __future__ import annotations

from compiler.backends.llvm.kernels.conv import ConvKernel, emit_conv2d, pack_conv_weights
from compiler.backends.llvm.kernels.gemm import (
    GemmConfig,
    emit_matmul,
    gemm_config,
    pack_b_constant,
)

__all__ = [
    "ConvKernel",
    "GemmConfig",
    "emit_conv2d",
    "emit_matmul",
    "gemm_config",
    "pack_b_constant",
    "pack_conv_weights",
]
