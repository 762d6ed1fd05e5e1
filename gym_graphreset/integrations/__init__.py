"""Adapters to RL libraries (each imports its library lazily, as an optional extra)."""
