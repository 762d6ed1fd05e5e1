"""Files the tasks are built from: robot models (MJCF and their settings) and reference clips."""
