"""glowviz's core layer: Textual-free helpers the session, the exports, the CLI and the IDE share
(shape arguments, the memory-report diff). It imports only the compiler; `glowviz.themes` and
`glowviz.diff` (the graph diff) belong to this layer too. See docs/ARCHITECTURE.md, "Layers".
"""
