"""gym_graphreset.tasks.tracking.config."""
