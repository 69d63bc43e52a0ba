"""``python -m ragtrim_bench``: the ``ragtrim-bench`` command (``ragtrim-bench <topic> <name> [args]``)."""

from ragtrim_bench.cli import main

raise SystemExit(main())
