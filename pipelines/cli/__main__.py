"""`python -m pipelines.cli` = `researchloop`."""
import sys

from pipelines.cli import main

sys.exit(main())
