"""Legged velocity tracking: the shared config (``velocity_env_cfg``), its env and the robots (``config``)."""
