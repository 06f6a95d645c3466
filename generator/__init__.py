"""ironaccel-gen: the IronAccelerator binding compiler (specs + vendor headers -> cffi bindings)."""

__version__ = "0.1.0"
