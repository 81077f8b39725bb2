"""LLVM CPU backend: target setup (`target`), the JIT engine (`jit`, `cache`), the code
generator (`codegen`, `emitters`, `kernels`), the executor and AOT bundles.

Importing the package imports none of them: the lowering contract reads the emitter table
(`emitters`) in every compile, and `glowviz mem` or `glowviz export` then need neither the
JIT nor LLVM's library (llvmlite.binding loads it), which `target`, `jit` and `cache` load
only when used.
"""
