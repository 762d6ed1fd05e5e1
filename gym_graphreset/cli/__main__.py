"""``python -m gym_graphreset.cli``: the same as ``python -m gym_graphreset``."""

from gym_graphreset.cli import main

raise SystemExit(main())
