"""``gym_graphreset/G1-Tracking-Flat-v0``: the G1 tracks a reference clip (``flat_env_cfg``: config and env)."""
