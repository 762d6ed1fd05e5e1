"""GPU peers timed on the same machine in their own interpreter (:mod:`gym_graphreset.bench.peers.compare`).

Each peer has a standalone runner script here (``mjlab_runner.py``) that imports only the standard
library, torch and the peer, so it can run with the peer's Python by path.
"""
