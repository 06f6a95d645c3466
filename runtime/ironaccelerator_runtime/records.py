"""Value classes that behave as dataclasses without importing :mod:`dataclasses` (issue 27: the first device).

``dataclasses`` imports ``inspect`` (with ``ast``, ``dis``, ``tokenize`` ...), ~6 ms, and Python 3.11 compiles each
generated method of each class with its own ``exec`` (``slots=True`` builds the class twice), ~1 ms a class: the
runtime's value classes on the way to the first device cost ~18 ms that way.  :func:`record` gives a class whose
``__init__`` is written by hand the rest of what ``@dataclass`` would: ``__repr__``, ``__eq__`` and ``__hash__`` over
the fields in order, ``__match_args__``, the frozen ``__setattr__``/``__delattr__`` (raising
``dataclasses.FrozenInstanceError``), pickling of a ``__slots__`` class, and ``__dataclass_fields__`` /
``__dataclass_params__`` made on first use (importing ``dataclasses`` then), so ``dataclasses.fields``,
``dataclasses.replace``, ``dataclasses.asdict`` and ``dataclasses.is_dataclass`` work on the class and its
instances as on the dataclass it replaces.

The fields are the class's own annotations, in order; their defaults are the hand-written ``__init__``'s, where
:data:`FACTORY` marks a field made by ``factories[name]()`` (dataclasses' ``field(default_factory=...)``, shown as
``<factory>`` in the signature as dataclasses shows it).

Imports nothing of the runtime (the generator uses :mod:`ironaccelerator_runtime.capability_match`).
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Callable, Mapping, TypeVar, dataclass_transform

C = TypeVar("C", bound=type)


class _Factory:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


FACTORY: Any = _Factory()  # a field's default in a hand-written __init__: made by its factory


def _frozen_error(what: str) -> AttributeError:
    import dataclasses  # (only when the mistake is made)
    return dataclasses.FrozenInstanceError(what)


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise _frozen_error(f"cannot assign to field {name!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise _frozen_error(f"cannot delete field {name!r}")


def _repr(self: Any) -> str:
    return f"{self.__class__.__qualname__}(" + ", ".join(
        f"{n}={getattr(self, n)!r}" for n in self._record_fields) + ")"


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        return self._record_key(self) == other._record_key(other)
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(self._record_key(self))


def _getstate(self: Any) -> list[Any]:
    return [getattr(self, n) for n in self._record_fields]


def _setstate(self: Any, state: list[Any]) -> None:
    for n, v in zip(self._record_fields, state):
        object.__setattr__(self, n, v)


class _DataclassInfo:
    """``__dataclass_fields__`` (or ``__dataclass_params__``) of a record class, made on first use from the class's
    annotations and its ``__init__``'s defaults through :func:`dataclasses.make_dataclass`, then cached on it."""

    __slots__ = ("attr",)

    def __init__(self, attr: str) -> None:
        self.attr = attr

    def __get__(self, obj: Any, cls: type | None = None) -> Any:
        if cls is None:
            cls = type(obj)
        import dataclasses

        spec: dict[str, Any] = cls.__dict__["_record_spec"]
        init = cls.__dict__["__init__"]
        code = init.__code__
        names = code.co_varnames[1:code.co_argcount + code.co_kwonlyargcount]
        defaults = dict(zip(names[code.co_argcount - 1 - len(init.__defaults__ or ()):code.co_argcount - 1],
                            init.__defaults__ or ()))
        defaults.update(init.__kwdefaults__ or {})
        annotations = cls.__dict__.get("__annotations__", {})
        fields = []
        for n in cls.__dict__["_record_fields"]:
            if n in spec["factories"]:
                f = dataclasses.field(default_factory=spec["factories"][n])
            elif n in defaults:
                f = dataclasses.field(default=defaults[n])
            else:
                f = dataclasses.field()
            fields.append((n, annotations.get(n, "Any"), f))
        shadow = dataclasses.make_dataclass(cls.__name__, fields, frozen=spec["frozen"], kw_only=spec["kw_only"],
                                            eq=True, namespace={"__module__": cls.__module__})
        type.__setattr__(cls, "__dataclass_fields__", shadow.__dataclass_fields__)  # type: ignore[attr-defined]
        type.__setattr__(cls, "__dataclass_params__", shadow.__dataclass_params__)  # type: ignore[attr-defined]
        return cls.__dict__[self.attr]


@dataclass_transform(frozen_default=True)  # (type checkers: the class's fields, frozen unless frozen=False)
def record(*, frozen: bool = True, kw_only: bool = False,
           factories: Mapping[str, Callable[[], Any]] | None = None) -> Callable[[C], C]:
    """Make ``cls`` (fields: its annotations; ``__init__`` written by hand, ``__slots__`` where it wants them)
    behave as ``@dataclass(frozen=frozen, kw_only=kw_only)`` would: see the module's doc.  Methods the class
    defines itself (``__repr__`` ...) are kept."""

    def make(cls: C) -> C:
        own = cls.__dict__
        names = tuple(own.get("__annotations__", {}))
        type.__setattr__(cls, "_record_fields", names)
        type.__setattr__(cls, "_record_key", attrgetter(*names) if len(names) != 1 else
                         staticmethod(lambda obj, _g=attrgetter(names[0]): (_g(obj),)))
        type.__setattr__(cls, "_record_spec", {"frozen": frozen, "kw_only": kw_only,
                                               "factories": dict(factories or {})})
        methods: dict[str, Any] = {"__repr__": _repr, "__eq__": _eq}
        methods["__hash__"] = _hash if frozen else None  # (dataclasses: eq without frozen is unhashable)
        if frozen:
            methods["__setattr__"] = _frozen_setattr
            methods["__delattr__"] = _frozen_delattr
        if "__slots__" in own and "__dict__" not in own["__slots__"]:
            methods["__getstate__"] = _getstate
            methods["__setstate__"] = _setstate
        for name, fn in methods.items():
            if name not in own or (name == "__hash__" and own[name] is None):
                type.__setattr__(cls, name, fn)
        if "__match_args__" not in own:
            type.__setattr__(cls, "__match_args__", () if kw_only else names)
        type.__setattr__(cls, "__dataclass_fields__", _DataclassInfo("__dataclass_fields__"))
        type.__setattr__(cls, "__dataclass_params__", _DataclassInfo("__dataclass_params__"))
        return cls

    return make


__all__ = ["FACTORY", "record"]
