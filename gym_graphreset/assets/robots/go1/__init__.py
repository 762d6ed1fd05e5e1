"""gym_graphreset.assets.robots.go1."""
