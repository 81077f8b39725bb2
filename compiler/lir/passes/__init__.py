"""Low-level IR optimisations (pipeline step 9), one module per pass family.

The passes are listed by name in `compiler.passes.registry`; the default order is
`compiler.lir.pipeline.DEFAULT_LIR_PASSES`.
"""
