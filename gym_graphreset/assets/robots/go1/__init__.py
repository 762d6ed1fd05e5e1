"""Unitree Go1: the package's own MJCF (``go1.xml``) and mjlab's settings applied to any Go1 MJCF (``model``)."""
