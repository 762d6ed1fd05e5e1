"""The engine-neutral core: the autoreset wrapper, its step body and reset paths, and what they are built on.

Configuration (:mod:`~gym_graphreset.core.config`), contracts (:mod:`~gym_graphreset.core.protocols`), the
reset selection, the validation latch, persistent buffers and the publication ring, counter-based draws,
reset terms, and :class:`~gym_graphreset.core.autoreset_env.FixedShapeAutoresetVectorEnv` itself. Nothing
here imports an engine, a task, an integration or a tool.
"""
