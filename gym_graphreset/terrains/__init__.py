"""Terrain generation: a grid of sub-terrains (``terrain_generator``, ``sub_terrains``) and its state in a task."""
