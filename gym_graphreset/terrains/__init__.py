"""gym_graphreset.terrains."""
