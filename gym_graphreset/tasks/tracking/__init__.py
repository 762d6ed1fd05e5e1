"""gym_graphreset.tasks.tracking."""
