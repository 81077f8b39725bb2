"""The IDE's widgets: one per file, each with its stylesheet beside it."""
