"""The robots: one folder each, holding its MJCF and the module that builds the task's model from it."""
