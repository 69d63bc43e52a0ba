"""``python -m ragtrim.plan --config ...``: the planner without the rest of the CLI."""

from ragtrim.plan.cli import main

raise SystemExit(main())
