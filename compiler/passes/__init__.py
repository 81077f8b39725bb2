"""Graph passes (one module per family), and what both IRs' passes share: the pass manager
(`manager`), the rewriter and its worklist driver (`rewriter`), and the registry of every pass
by name (`registry`). The default graph pipelines are in `pipelines`.
"""
