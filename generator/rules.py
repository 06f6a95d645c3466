"""A spec's ``rules:``: a library's convention stated once over many parameters, turned into the per-parameter
entries the binder reads (``functions: <f>: params: <p>:``).

A rule matches the parameters of bound functions whose public name matches one of its ``functions`` globs, whose C
type is spelled as one of its ``types`` and whose name matches one of its ``names`` globs (an absent ``types`` or
``names`` matches any).  ex) cuBLAS's "every ``float *`` named A, B or C of a ``cublas*`` function is a device
pointer" is ``{functions: ["cublas*"], types: ["float *", "const float *"], names: [A, B, C], device: true}``.

As for every other name in a spec, a rule that matches nothing is an error, and so is each of its patterns and
types that takes part in no match (a typo must never be a rule that silently matches nothing).  A parameter the
spec lists under ``functions:`` is the spec's own word and no rule touches it; a parameter may take a key
(``direction``, ``device``, ``nullable``, ``len``) from one rule only.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import replace
from typing import Mapping

from .ctypes_util import declare
from .diagnostics import Collector, suggest
from .ir import Function, Location
from .spec import FunctionSpec, Name, ParamSpec, RuleSpec

_TOKEN = re.compile(r"[A-Za-z0-9_]+|\*")


def spelling(c_type: str) -> str:
    """A C type's spelling with its spaces normalised: ``float*`` and ``float  *`` are ``float *``."""
    return " ".join(_TOKEN.findall(c_type))


def _where(loc: Location) -> str:
    return f"{loc.line}:{loc.col}"


def apply_rules(rules: tuple[RuleSpec, ...], functions: Mapping[str, Function],
                fspecs: Mapping[str, FunctionSpec], err: Collector, header: str) -> dict[str, FunctionSpec]:
    """``fspecs`` with each rule's keys added as parameter entries of the bound ``functions`` (public name ->
    declaration) it matches; every rule that matches nothing, pattern or type that takes part in no match, and
    parameter given one key by two rules is an error in ``err``."""
    listed = {(f, p.name.value) for f, fs in fspecs.items() for p in fs.params}
    # (function, parameter) -> key -> (what the rule gives: a Name, or True for a flag; the rule)
    taken: dict[tuple[str, str], dict[str, tuple[Name | bool, RuleSpec]]] = {}
    for rule in rules:
        used: set[int] = set()  # id() of each pattern and type that took part in a match
        matched: list[str] = []  # the functions its patterns match
        count = 0
        for fname in sorted(functions):
            fpats = [p for p in rule.functions if fnmatch.fnmatchcase(fname, p.value)]
            if not fpats:
                continue
            matched.append(fname)
            for p in functions[fname].params:
                if not p.name:
                    continue  # (an unnamed parameter has no entry to give)
                spelled = spelling(declare(p.type))
                types = [t for t in rule.types if spelling(t.value) == spelled]
                names = [n for n in rule.names if fnmatch.fnmatchcase(p.name, n.value)]
                if rule.types and not types or rule.names and not names:
                    continue
                count += 1
                used.update(id(x) for x in (*fpats, *types, *names))
                if (fname, p.name) in listed:
                    continue  # the spec's own entry for this parameter overrides every rule
                have = taken.setdefault((fname, p.name), {})
                for key, value in (("direction", rule.direction), ("device", rule.device),
                                   ("nullable", rule.nullable), ("len", rule.len)):
                    if value is None:
                        continue
                    if key in have and have[key][1] is not rule:
                        err.error(rule.location, f"rule: parameter '{p.name}' of '{fname}' already takes {key} from "
                                  f"the rule at {_where(have[key][1].location)}; narrow one of the rules, or list the "
                                  f"parameter under functions: {fname}: params:")
                        continue
                    have[key] = (value if key in ("direction", "len") else True, rule)
        if not matched:
            for pat in rule.functions:
                err.error(pat.location, f"rule: function pattern '{pat}' matches no bound function of {header}"
                          f"{suggest(pat.value, functions)}")
            continue
        if count == 0:
            _nothing(rule, matched, functions, err)
            continue
        for x in (*rule.functions, *rule.types, *rule.names):
            if id(x) not in used:
                what = ("function pattern" if x in rule.functions else "type" if x in rule.types
                        else "parameter pattern")
                err.error(x.location, f"rule: {what} '{x}' takes part in no match of this rule (every other key "
                          "of the rule must match the same parameter): remove it or fix its spelling")
    out = dict(fspecs)
    for (fname, pname), keys in sorted(taken.items()):
        rule = next(iter(keys.values()))[1]
        fs = out.get(fname) or FunctionSpec(name=Name(value=fname, location=rule.location))
        given = {k: v for k, (v, _) in keys.items()}
        direction, length = given.get("direction"), given.get("len")
        ps = ParamSpec(name=Name(value=pname, location=rule.location),
                       direction=direction.value if isinstance(direction, Name) else None,
                       len=length if isinstance(length, Name) else None,
                       device="device" in keys, nullable="nullable" in keys)
        out[fname] = replace(fs, params=fs.params + (ps,))
    return out


def _nothing(rule: RuleSpec, matched: list[str], functions: Mapping[str, Function], err: Collector) -> None:
    """The error of a rule whose functions match but none of whose parameters do, saying what is there."""
    params = [p for f in matched for p in functions[f].params if p.name]
    spellings = sorted({spelling(declare(p.type)) for p in params})
    names = sorted({str(p.name) for p in params})
    hints = [f"'{t}'{suggest(spelling(t.value), spellings)}" for t in rule.types
             if spelling(t.value) not in spellings]
    hints += [f"'{n}'{suggest(n.value, names)}" for n in rule.names
              if not any(fnmatch.fnmatchcase(x, n.value) for x in names)]
    shown = ", ".join(matched[:3]) + (f" and {len(matched) - 3} more" if len(matched) > 3 else "")
    detail = f": no parameter there is {'; '.join(hints)}" if hints else (
        ": its types and names each occur, but never on one parameter")
    err.error(rule.location, f"rule matches no parameter of the functions its patterns match ({shown}){detail}")
