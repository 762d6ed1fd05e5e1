"""gym_graphreset.assets.robots.g1."""
