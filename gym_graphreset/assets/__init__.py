"""gym_graphreset.assets."""
