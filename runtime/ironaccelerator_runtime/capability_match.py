"""Capability matchers: how the keys of a backend spec's ``capabilities.flags`` / ``tiers`` compare with a device.

A backend spec chooses one by name (``capabilities: {match: <name>}``, default ``exact``).  Each :class:`Matcher`
holds both halves of its key grammar, so it is written once:

- for the generator (``ironaccel-gen generate``): :meth:`Matcher.key_problem`, what is wrong with a key of the
  spec's tables (``None``: nothing), and what else the matcher takes: ``options`` (further keys of
  ``capabilities``, ex. ``arch_field``), ``sections`` (top-level spec sections only it reads, ex. ``soc_models``,
  with ``soc_name`` / ``value``, the grammars of their names and values) and ``constant_prefix`` (the tables'
  keys name constants ``<prefix><key>`` of the backend's Objective-C libraries, whose values the generated
  tables carry);
- for the runtime (the backend's tables): :meth:`Matcher.flags` and :meth:`Matcher.tier`, the flags and tier a
  device's facts select.

This module is pure (the standard library only): the generator loads it from its file, without importing the
runtime package (which imports the generated one).  A new backend with a new grammar adds a matcher here; the
generator names none of them.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Mapping, TypeVar

if __package__:
    from .records import FACTORY, record
else:  # the generator loads this file alone, outside the package (generator/surface.py): records.py beside it
    import importlib.util as _util
    import os as _os

    _spec = _util.spec_from_file_location("_ironaccel_gen_records",
                                          _os.path.join(_os.path.dirname(__file__), "records.py"))
    assert _spec is not None and _spec.loader is not None
    _records = _util.module_from_spec(_spec)
    _spec.loader.exec_module(_records)
    FACTORY, record = _records.FACTORY, _records.record

F = TypeVar("F")  # a flag set (CapabilityFlags): combined with |
T = TypeVar("T")  # a tier (ComputeTier)

_NAME_TIER = re.compile(r"name [A-Za-z0-9_.+\-]+\Z")


# Matcher's defaults
def _same(raw: Any) -> Any:
    return raw


def _text(raw: Any) -> str:
    return str(raw)


def _equal(key: Any, fact: Any) -> bool:
    return bool(key == fact)


def _the_fact(keys: Iterable[Any], fact: Any) -> Any:
    return fact


def _no_special() -> Mapping[str, tuple[str, ...]]:
    return {"flags": (), "tiers": ()}


@record(kw_only=True, factories={"special": _no_special, "options": dict})
class Matcher:
    """One capability-key grammar (see the module's doc).

    ``special``: per table (``flags``, ``tiers``), the reserved keys any spec may use (``always``, ``default``,
    ...); ``key``: the grammar of the other keys (None: free-form); ``what``: a key's description in errors (ex.
    ``a compute capability like '8.0'``); ``name_tiers``: tier keys may also be ``name <token>``; ``flag_applies``
    (key, fact) and ``tier_key`` (keys, fact): which keys a device's fact selects; ``fact`` / ``version``: the
    device's reported architecture (ex. ``"8.6"``, ``"gfx90a:sramecc+:xnack-"``) as the fact keys compare with,
    and as the Capability's ``vendor_version``."""

    name: str
    doc: str
    special: Mapping[str, tuple[str, ...]]
    key: re.Pattern[str] | None
    what: str
    name_tiers: bool
    only_first_special: bool  # only the first reserved key of each table is allowed (always / default)
    options: Mapping[str, str]  # capabilities key -> what it is (each required)
    sections: tuple[str, ...]  # top-level spec sections only this matcher reads
    soc_name: re.Pattern[str] | None  # sections' entry names  ex) SM8350
    soc_example: str
    value: re.Pattern[str] | None  # an architecture value in those sections (the key grammar's)
    constant_prefix: str | None  # keys name constants <prefix><key> of the backend's Objective-C libraries
    constant_what: str  # what such a constant is, in errors  ex) a GPU family
    constant_table: str  # the tables' argument carrying those constants' values  ex) families
    numbered: bool  # the generated tables key by the number a key carries (v68 -> 68), reserved keys kept
    ordered_tiers: bool  # the tiers table is a tuple of (key, tier) in spec order (the first key wins)
    fact: Callable[[Any], Any]  # the device's reported architecture -> what keys compare with
    version: Callable[[Any], str]  # -> the Capability's vendor_version
    flag_applies: Callable[[Any, Any], bool]
    tier_key: Callable[[Iterable[Any], Any], Any]

    def __init__(self, *, name: str, doc: str, special: Mapping[str, tuple[str, ...]] = FACTORY,
                 key: re.Pattern[str] | None = None, what: str = "", name_tiers: bool = False,
                 only_first_special: bool = False, options: Mapping[str, str] = FACTORY, sections: tuple[str, ...] = (),
                 soc_name: re.Pattern[str] | None = None, soc_example: str = "", value: re.Pattern[str] | None = None,
                 constant_prefix: str | None = None, constant_what: str = "", constant_table: str = "",
                 numbered: bool = False, ordered_tiers: bool = False, fact: Callable[[Any], Any] = _same,
                 version: Callable[[Any], str] = _text, flag_applies: Callable[[Any, Any], bool] = _equal,
                 tier_key: Callable[[Iterable[Any], Any], Any] = _the_fact) -> None:
        d = self.__dict__  # (frozen: set past the frozen __setattr__)
        d["name"] = name
        d["doc"] = doc
        d["special"] = _no_special() if special is FACTORY else special
        d["key"] = key
        d["what"] = what
        d["name_tiers"] = name_tiers
        d["only_first_special"] = only_first_special
        d["options"] = {} if options is FACTORY else options
        d["sections"] = sections
        d["soc_name"] = soc_name
        d["soc_example"] = soc_example
        d["value"] = value
        d["constant_prefix"] = constant_prefix
        d["constant_what"] = constant_what
        d["constant_table"] = constant_table
        d["numbered"] = numbered
        d["ordered_tiers"] = ordered_tiers
        d["fact"] = fact
        d["version"] = version
        d["flag_applies"] = flag_applies
        d["tier_key"] = tier_key

    # ---------------------------------------------------------------- generate time

    def key_problem(self, section: str, key: str) -> str | None:
        """What is wrong with ``key`` of the spec's ``section`` (``flags`` / ``tiers``) table, or None."""
        if self.key is None:
            return None
        special = self.special.get(section, ())
        allowed = special[:1] if self.only_first_special else special
        if key in allowed or (self.name_tiers and section == "tiers" and _NAME_TIER.match(key)):
            return None
        if self.key.match(key):
            return None
        others = ", ".join(allowed) + (", name <token>" if self.name_tiers and section == "tiers" else "")
        joiner = "" if self.only_first_special else "one of "
        return f"{section} key '{key}' is not {self.what} (or {joiner}{others})"

    # ---------------------------------------------------------------- run time

    def flags(self, table: Mapping[Any, F], fact: Any, none: F) -> F:
        """The union of the flags of every key of ``table`` that ``fact`` (the device's) selects, reserved keys
        left out (the caller adds ``always`` and the like)."""
        out = none
        special = self.special.get("flags", ())
        for key, f in table.items():
            if key not in special and self.flag_applies(key, fact):
                out = out | f  # type: ignore[operator]
        return out

    def tier(self, table: Mapping[Any, T], fact: Any) -> T | None:
        """The tier of the key ``fact`` selects (None: no key: the caller falls back to its defaults)."""
        special = self.special.get("tiers", ())
        keys = [k for k in table if k not in special and not (isinstance(k, str) and k.startswith("name "))]
        key = self.tier_key(keys, fact)
        return table.get(key) if key is not None else None


def _cc(key: str) -> tuple[int, int]:
    major, _, minor = key.partition(".")
    return int(major), int(minor or 0)


def _longest_prefix(keys: Iterable[str], base: str) -> str | None:
    found = sorted((k for k in keys if base.startswith(k)), key=len, reverse=True)
    return found[0] if found else None


def _first_supported(keys: Iterable[str], names: Any) -> str | None:
    return next((k for k in keys if k in names), None)


MATCHERS: dict[str, Matcher] = {m.name: m for m in (
    Matcher(name="exact", doc="keys are compared whole (extension names, device types)",
            flag_applies=lambda key, present: key in present),
    Matcher(name="compute_capability",
            doc="keys are compute capabilities `X.Y`: a device has the flags of every key at or below its own; "
                "tier keys are exact, or `name <token>`",
            special={"flags": ("always", "integrated"), "tiers": ("default", "integrated")},
            key=re.compile(r"[0-9]+\.[0-9]+\Z"), what="a compute capability like '8.0'", name_tiers=True,
            flag_applies=lambda key, cc: key[:1].isdigit() and _cc(key) <= cc,
            tier_key=lambda keys, cc: f"{cc[0]}.{cc[1]}",
            fact=_cc, version=lambda arch: "sm_{}{}".format(*_cc(arch))),
    Matcher(name="arch_prefix",
            doc="keys are prefixes of the architecture name (read from the properties field `arch_field`): a "
                "device has the flags of every key its name starts with, the longest tier key wins",
            special={"flags": ("always", "integrated"), "tiers": ("default", "integrated")},
            key=re.compile(r"[a-z][a-z0-9]*\Z"), what="an architecture prefix like 'gfx90a'", name_tiers=True,
            options={"arch_field": "the properties field naming the architecture, ex. gcnArchName"},
            flag_applies=lambda key, base: base.startswith(key),
            tier_key=_longest_prefix,
            fact=lambda arch: arch.split(":")[0].strip().lower(), version=lambda arch: arch or "unknown"),
    Matcher(name="hexagon_arch",
            doc="keys are HTP architectures `v<N>`: flag keys are thresholds (at least), tier keys exact; SoCs "
                "named in `soc_models`",
            special={"flags": ("always",), "tiers": ("default",)},
            key=re.compile(r"v[0-9]+\Z"), what="an HTP architecture like 'v68'", only_first_special=True,
            sections=("soc_models",), soc_name=re.compile(r"[A-Z][A-Z0-9]+\Z"), soc_example="SM8350",
            value=re.compile(r"v[0-9]+\Z"), numbered=True,
            flag_applies=lambda key, arch: arch >= key,
            tier_key=lambda keys, arch: arch),
    Matcher(name="gpu_family",
            doc="keys are GPU families (constants `MTLGPUFamily<key>` of the backend's Objective-C libraries, "
                "asked with supportsFamily:): a device has the flags of every family it supports and the tier of "
                "the first tier key, in spec order, it supports",
            special={"flags": ("always", "integrated"), "tiers": ("default", "integrated")},
            key=re.compile(r"[A-Z][A-Za-z]*[0-9]+\Z"), what="a Metal GPU family like 'Apple7' or 'Metal3'",
            constant_prefix="MTLGPUFamily", constant_what="a GPU family", constant_table="families",
            ordered_tiers=True,
            flag_applies=lambda key, names: key in names,
            tier_key=_first_supported),
)}


def matcher(name: str) -> Matcher:
    """The matcher named ``name`` (KeyError if none is)."""
    return MATCHERS[name]


__all__ = ["MATCHERS", "Matcher", "matcher"]
