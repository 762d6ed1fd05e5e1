"""Motion tracking: clips (``motion_clips``), the motion command and its terms, and robots (``config``)."""
