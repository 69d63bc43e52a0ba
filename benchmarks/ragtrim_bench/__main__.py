"""``python -m ragtrim_bench``: the ``ragtrim-bench`` command."""

from ragtrim_bench.cli import main

raise SystemExit(main())
