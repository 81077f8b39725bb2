"""`python -m glowviz` is the `glowviz` command."""

import sys

from glowviz.cli import main

sys.exit(main())
