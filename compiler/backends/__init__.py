"""Backends: the numpy interpreter (reference) and the LLVM CPU executor."""
