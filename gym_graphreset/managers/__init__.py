"""gym_graphreset.managers."""
