"""CUDA graph capture of the reset body or the whole step: the graph, host transitions, ``torch.compile``.

Engine-neutral: an engine that launches its own kernels (MuJoCo Warp) joins a capture through the
participant's ``graph_capture_scope`` (:func:`gym_graphreset.envs.mjwarp.runtime.warp_external_capture`).
"""
