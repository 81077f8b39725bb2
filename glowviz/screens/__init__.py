"""The IDE's screens: the main workspace, help, node detail, open-model; and the palette."""
