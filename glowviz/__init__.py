"""glowviz: a terminal IDE, CLI and figure exporter built on the `compiler` package."""

__version__ = "0.1.0"
