"""The velocity task per robot: ``go1`` and ``g1``, flat and rough."""
