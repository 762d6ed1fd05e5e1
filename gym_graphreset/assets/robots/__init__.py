"""gym_graphreset.assets.robots."""
