"""The hand-written runtime of ``ironaccelerator``: the vendor-neutral code that the generated package
(``generated/ironaccelerator``, rendered from ``specs/`` by ``ironaccel-gen generate``) imports.

Nothing here is generated: edit these modules directly.  What they read of the specs (``ErrorKind``,
``BackendKind``, ``DType``, ... from ``specs/core.yaml``) comes from the generated ``ironaccelerator._core``.

- :mod:`.errors`: :class:`Error`
- :mod:`.traits`: the trait surface's base classes (``Backend``, ``Device``, ``Stream``, ``MemoryPool``, ...)
- :mod:`.loader`: how a generated library binding loads (``Binding``: API or ABI mode, library search, errors)
- :mod:`.capability_match`: the named capability matchers a backend spec chooses (``capabilities: {match: ...}``)
- :mod:`.resolver_kinds`: the resolver kinds a library spec names (``resolver: {kind: ...}``), declared as data
- :mod:`.records`: ``record``, the value classes' dataclass behaviour without importing ``dataclasses``

Users import ``ironaccelerator``, which re-exports the public names.
"""

# The generated package first: it imports this package's modules in the order their imports of its data
# need (ironaccelerator._core before .errors before .traits), whichever of the two a program imports first.
import ironaccelerator as _ironaccelerator  # noqa: F401
