"""`python -m glowviz` is the `glowviz` command."""

import sys

from glowviz.entry import main

sys.exit(main())
