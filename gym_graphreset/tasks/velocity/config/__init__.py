"""gym_graphreset.tasks.velocity.velocity_env_cfg.config."""
