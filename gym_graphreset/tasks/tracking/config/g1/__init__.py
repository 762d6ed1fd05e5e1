"""gym_graphreset.tasks.tracking.config.g1."""
