"""``python -m ragtrim`` runs the CLI."""

import sys

from ragtrim.cli import main

sys.exit(main())
