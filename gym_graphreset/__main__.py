"""``python -m gym_graphreset``: see :mod:`gym_graphreset.cli`."""

from gym_graphreset.cli import main

raise SystemExit(main())
