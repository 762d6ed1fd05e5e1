"""Unitree G1: the package's own MJCF (``g1.xml``), mjlab's settings (``model``) and a reference clip (``clip``)."""
