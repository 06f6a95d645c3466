"""Prototype sources: where the selectors an objc spec lists alone take their prototypes from.

An objc spec's class may list selectors without their C prototypes (``methods: [length, "newBufferWithLength:
options:"]``); the resolver's ``prototypes:`` section names the source that gives them and says everything
particular to it (:class:`PrototypeSource`): for ``kind: cpp-wrappers``, C++ wrapper headers whose inline methods
send each message (generator/frontend/objc_cpp.py reads them), the SDK's name, how a copy is found and its version
read, the headers, the namespace prefixes, the selector and class symbols, the send functions and the shims.  This
module reads that section (:func:`read_prototypes`, located errors with suggestions) and fills a spec's listed
selectors from what the front-end read (:func:`fill_spec`): no SDK is named in code, the spec declares it."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import yaml

from .diagnostics import Collector, Diagnostic, UserError, suggest
from .ir import Location

if TYPE_CHECKING:
    from .frontend.objc_cpp import Model
    from .spec import LibrarySpec, Name, SpecReader

__all__ = ["PROTOTYPE_KINDS", "PrototypeSource", "Request", "c_type_names", "fill_spec", "ownership",
           "read_prototypes", "render_classes", "requests_from_yaml"]

PROTOTYPE_KINDS = ("cpp-wrappers",)  # the front-ends that read a source of prototypes (frontend/objc_cpp.py)
SECTION = "library > resolver (objc) > prototypes"

# a path relative to a copy's root (a header): no absolute path, no '..' (components start with a letter, digit, _)
REL_PATH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+\-]*(/[A-Za-z0-9_][A-Za-z0-9_.+\-]*)*\Z")
# the cache directory, relative to the generator's root: a hidden first component (.venv) is allowed
CACHE_PATH = re.compile(r"\.?[A-Za-z0-9_][A-Za-z0-9_.+\-]*(/\.?[A-Za-z0-9_][A-Za-z0-9_.+\-]*)*\Z")
SCOPED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*::)+[A-Za-z_][A-Za-z0-9_]*\Z")  # ex) Private::Selector::s_k
SDK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*\Z")


@dataclass(frozen=True, slots=True, kw_only=True)
class PrototypeSource:
    """``resolver: {kind: objc, prototypes: {...}}``: a source of prototypes and what is particular to it.
    ex) metal-cpp (specs/metal/metal.yaml): C++ wrapper headers, ``MTL::Device`` -> ``MTLDevice``"""

    kind: str  # cpp-wrappers
    sdk: Name  # ex) metal-cpp: --sdk metal-cpp=PATH, the sdks listing, SDK_VERSION "metal-cpp 367.4.2"
    marker: str  # ex) Metal/Metal.hpp: a copy is the directory holding it
    headers: tuple[str, ...]  # parsed in order, as one translation unit
    env: str | None = None  # ex) IRONACCEL_METAL_CPP: names a copy
    cache: str | None = None  # ex) .venv/sdk/metal-cpp, relative to the generator's root (data.ROOT)
    fetch: str | None = None  # ex) make metal-cpp
    version_header: str | None = None  # ex) Metal/MTLVersion.hpp
    version_macros: tuple[str, ...] = ()  # ex) (METALCPP_VERSION_MAJOR, _MINOR, _PATCH)
    defines: tuple[str, ...] = ()  # ex) (MTL_PRIVATE_IMPLEMENTATION, ...)
    namespaces: tuple[tuple[str, str], ...] = ()  # (C++ namespace, C prefix)  ex) (MTL, MTL)
    renamed: tuple[tuple[str, str], ...] = ()  # (prefixed name, C name)  ex) (NSunichar, unichar)
    root_name: str = ""  # ex) NSObject
    root_cxx: str = ""  # ex) NS::Object
    root_templates: tuple[str, ...] = ()  # ex) (Object, Referencing, Copying, SecureCoding)
    selector_symbols: str = ""  # ex) Private::Selector::s_k
    class_symbols: str = ""  # ex) Private::Class::s_k
    sends: tuple[str, ...] = ()  # ex) (sendMessage, sendMessageSafe)
    plumbing: tuple[str, ...] = ()  # ex) (Private, SharedPtr)
    shims: tuple[tuple[str, str], ...] = ()  # (header path, text)
    location: Location  # the section in the spec

    def __str__(self) -> str:
        return self.sdk.value


def read_prototypes(r: SpecReader, node: yaml.Node) -> PrototypeSource | None:
    """The resolver's ``prototypes:`` section (schema section ``library > resolver (objc) > prototypes``), or None
    after located errors."""
    if isinstance(node, yaml.ScalarNode) and node.tag != "tag:yaml.org,2002:null":
        r.errors.error(r.loc(node), f"prototypes: {node.value!r}: expected a mapping saying how the prototypes are "
                       f"read (kind: {PROTOTYPE_KINDS[0]}, sdk, marker, headers, namespaces, ...: section '{SECTION}' "
                       "of docs/SPEC_KEYS.md)")
        return None
    m = r.section(node, SECTION, "prototypes")
    if m is None:
        return None
    bad = False

    def need(x: Any) -> Any:
        nonlocal bad
        bad = bad or x is None
        return x

    kind = r.scalar(m.get("kind"), "kind")
    if kind is not None and kind not in PROTOTYPE_KINDS:
        r.errors.error(r.loc(m["kind"]), f"prototypes: kind '{kind}' is not a source of prototypes"
                       f"{suggest(kind, PROTOTYPE_KINDS)}; expected one of: {', '.join(PROTOTYPE_KINDS)}")
        kind = None
    need(kind)
    sdk = need(r.string(m.get("sdk"), "sdk", SDK_NAME, ": expected a name of letters, digits, '.', '_' and '-', "
                        "ex. 'metal-cpp'"))
    path_hint = ": expected a path relative to the copy's root, ex. 'Metal/Metal.hpp'"
    marker = need(r.string(m.get("marker"), "marker", REL_PATH, path_hint))
    headers = r.seq(m.get("headers"), "headers", lambda n: need(r.string(n, "header", REL_PATH, path_hint)))
    if "headers" in m and not headers:
        r.errors.error(r.loc(m["headers"]), "headers: name at least one header")
        bad = True
    env = r.ident(m.get("env"), "env")
    cache = r.string(m.get("cache"), "cache", CACHE_PATH, ": expected a directory relative to the generator's "
                     "root, without '..', ex. '.venv/sdk/<name>'")
    fetch = r.scalar(m.get("fetch"), "fetch")
    vheader: Name | None = None
    vmacros: tuple[Name, ...] = ()
    if "version" in m:
        vm = r.section(m["version"], f"{SECTION} > version", "version") or {}
        vheader = r.string(vm.get("header"), "version header", REL_PATH, path_hint)
        vmacros = r.seq(vm.get("macros"), "version macros", lambda n: r.ident(n, "macro"))
    defines = r.seq(m.get("defines"), "defines", lambda n: need(r.ident(n, "macro")))
    namespaces = [(k, need(r.ident(v, f"prefix of namespace {k}"))) for k, v in r.keyed(m.get("namespaces"),
                                                                                          "namespace")]
    renamed = [(k, need(r.ident(v, f"C name of {k}"))) for k, v in r.keyed(m.get("renamed"), "renamed name")]
    root = r.section(m.get("root_class"), f"{SECTION} > root_class", "root_class") or {}
    root_name = need(r.ident(root.get("name"), "root class"))
    root_cxx = need(r.string(root.get("cxx"), "root class's C++ class", SCOPED, ": expected a C++ name with its "
                             "namespace, ex. 'NS::Object'"))
    templates = r.seq(root.get("templates"), "templates", lambda n: need(r.ident(n, "template")))
    known = [k.value for k, _ in namespaces]
    if root_cxx is not None and known and root_cxx.value.split("::")[0] not in known:
        ns = root_cxx.value.split("::")[0]
        r.errors.error(root_cxx.location, f"root_class: '{root_cxx}' is not in one of the namespaces read: '{ns}' is "
                       f"not a key of namespaces:{suggest(ns, known)}; known: {', '.join(known)}")
        bad = True
    scoped_hint = ": expected the enclosing classes and the name's prefix, ex. 'Private::Selector::s_k'"
    selector_symbols = need(r.string(m.get("selector_symbols"), "selector_symbols", SCOPED, scoped_hint))
    class_symbols = need(r.string(m.get("class_symbols"), "class_symbols", SCOPED, scoped_hint))
    sends = r.seq(m.get("sends"), "sends", lambda n: need(r.ident(n, "send function")))
    plumbing = r.seq(m.get("plumbing"), "plumbing", lambda n: need(r.ident(n, "class")))
    shims: list[tuple[str, str]] = []
    if "shims" in m:
        snode = m["shims"]
        if not isinstance(snode, yaml.MappingNode):
            r.errors.error(r.loc(snode), f"shims must be a mapping of header path -> text, got {_kind(snode)}")
            bad = True
        else:
            for k, v in snode.value:
                path = r.string(k, "shim", REL_PATH, ": expected a header path such as 'objc/runtime.h' (relative, "
                                "without '..')")
                text = r.scalar(v, f"shim {k.value}")
                if path is None or text is None:
                    bad = True
                    continue
                if path.value in dict(shims):
                    r.errors.error(path.location, f"duplicate shim {path.value!r}")
                    bad = True
                    continue
                shims.append((path.value, text))
    if bad or kind is None or sdk is None or marker is None or root_name is None or root_cxx is None or \
            selector_symbols is None or class_symbols is None:
        return None
    return PrototypeSource(
        kind=kind, sdk=sdk, marker=marker.value, headers=tuple(h.value for h in headers),
        env=env.value if env else None, cache=cache.value if cache else None, fetch=fetch,
        version_header=vheader.value if vheader else None, version_macros=tuple(x.value for x in vmacros),
        defines=tuple(x.value for x in defines), namespaces=tuple((k.value, v.value) for k, v in namespaces),
        renamed=tuple((k.value, v.value) for k, v in renamed), root_name=root_name.value,
        root_cxx=root_cxx.value, root_templates=tuple(x.value for x in templates),
        selector_symbols=selector_symbols.value, class_symbols=class_symbols.value,
        sends=tuple(x.value for x in sends), plumbing=tuple(x.value for x in plumbing), shims=tuple(shims),
        location=r.loc(node))


OWNED_FAMILIES = ("alloc", "new", "copy", "mutableCopy")


def ownership(selector: str, returns: str) -> str:
    """+1 for the alloc/new/copy/mutableCopy families returning an object, +0 otherwise (the spec's default)."""
    if returns != "id":
        return "+0"
    for fam in OWNED_FAMILIES:
        if selector.startswith(fam) and (len(selector) == len(fam) or not selector[len(fam)].islower()):
            return "+1"
    return "+0"


def _kind(node: yaml.Node) -> str:
    return "a list" if isinstance(node, yaml.SequenceNode) else f"{node.value!r}"


# ---------------------------------------------------------------------------------------- filling a spec's selectors
@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """One selector a spec asks for.  ex) MTLDevice "newBufferWithLength:options:" at metal.yaml:12:7"""

    cls: str
    key: str  # +sel for a class method, sel or -sel for an instance method
    location: Location
    ownership: str | None = None  # the spec's override, if any


def render_classes(model: Model, requests: Iterable[Request],
                   bases: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """The contract's ``classes:`` block for the selectors a spec lists, filled from the source's model::

        {"MTLDevice": {"base": "NSObject", "methods": {"newBufferWithLength:options:":
                                                       {"returns": "id", "args": ["NSUInteger", ...]}}}}

    Class methods keep their ``+`` key.  A class or selector the source does not have is a located error with the
    closest name; every such error of the batch is reported."""
    errors = Collector()
    out: dict[str, dict[str, Any]] = {}
    for req in requests:
        key = req.key[1:] if req.key.startswith("-") else req.key
        m = model.lookup(req.cls, key)
        if m is None:
            errors.error(req.location, _not_found(model, req.cls, key))
            continue
        cls = out.setdefault(req.cls, {"base": (bases or {}).get(req.cls) or model.classes[req.cls].base or
                                       model.root_class, "methods": {}})
        entry: dict[str, Any] = {"returns": m.returns}
        if m.args:
            entry["args"] = list(m.args)
        own = req.ownership or ownership(m.selector, m.returns)
        if req.ownership or own != "+0":
            entry["ownership"] = own
        cls["methods"][m.key] = entry
    errors.check()
    return {k: {"base": v["base"], "methods": dict(sorted(v["methods"].items()))} for k, v in sorted(out.items())}


def _not_found(model: Model, cls: str, key: str) -> str:
    """Why ``key`` (+sel / sel) of ``cls`` is not in the source, with the closest class, method or selector."""
    if cls not in model.classes:
        return f"{model.sdk} has no class '{cls}'{suggest(cls, model.classes)}"
    keys = model.keys(cls)
    hint = suggest(key, keys)
    other = ("+" + key) if not key.startswith("+") else key[1:]
    if not hint and other in keys:
        hint = f" (did you mean '{other}'?: it is {'a class' if other.startswith('+') else 'an instance'} method)"
    if not hint and key.lstrip("+") not in model.selectors.values():
        hint = suggest(key.lstrip("+"), model.selectors.values())
        hint = hint.replace("did you mean", f"no such selector in {model.sdk}; did you mean") if hint else \
            f" (no such selector in {model.sdk})"
    return f"{cls} has no method '{key}' in {model.sdk} {model.version}{hint}"


def _spelled(t: str) -> str:
    return " ".join(t.replace("*", " * ").split()).replace("* *", "**")


def fill_spec(spec: LibrarySpec, model: Model) -> LibrarySpec:
    """``spec`` (resolver objc with ``prototypes:``) with the prototype of every selector it lists without one
    read from the source's ``model``, located at the selector in the spec.  A class or selector the source lacks is
    a located error with the closest name; a method the spec declares itself (returns:/args:) that the source also
    declares must agree with it, else a located error shows both.  Every problem of the spec is reported at once."""
    from .spec import Name

    assert spec.objc is not None
    errors = Collector()
    classes = []
    for c in spec.objc.classes:
        methods = []
        for m in c.methods:
            key = ("+" if m.class_method else "") + m.selector.value
            found = model.lookup(c.name.value, key)
            at = m.selector.location
            if not m.declared:
                if found is None:
                    errors.error(at, _not_found(model, c.name.value, key))
                    continue
                m = replace(m, returns=Name(value=found.returns, location=at), declared=True,
                            args=tuple(Name(value=a, location=at) for a in found.args))
            elif found is not None:
                mine = [_spelled(t.value) for t in (m.returns, *m.args)]
                theirs = [_spelled(t) for t in (found.returns, *found.args)]
                if mine != theirs:
                    errors.error(at, f"{c.name} '{key}' is declared here as {mine[0]} ({', '.join(mine[1:])}) but "
                                 f"{model.sdk} {model.version} declares {theirs[0]} ({', '.join(theirs[1:])}) "
                                 f"({found.location.file}:{found.location.line}): list the selector alone to take "
                                 f"{model.sdk}'s prototype, or fix the spec's")
            methods.append(m)
        classes.append(replace(c, methods=tuple(methods)))
    errors.check()
    return replace(spec, objc=replace(spec.objc, classes=tuple(classes)))


def requests_from_yaml(path: str, text: str) -> list[Request]:
    """The selectors listed by a spec's ``classes:`` block in its selector-only form::

        classes:
          MTLDevice:
            methods: [name, "newBufferWithLength:options:", {"+new": {ownership: "+1"}}]

    (a list of selector strings, or one-key mappings carrying an ``ownership:`` override), each with its spec
    location.  A ``methods:`` mapping (the contract's full form) is also read: its keys are the selectors."""
    from .spec import compose

    root = compose(path, text)
    errors = Collector()
    out: list[Request] = []

    def loc(node: yaml.Node) -> Location:
        return Location(file=path, line=node.start_mark.line + 1, col=node.start_mark.column + 1)

    if not isinstance(root, yaml.MappingNode):
        raise UserError([Diagnostic(location=Location(file=path, line=1, col=1), message="expected a mapping")])
    classes = next((v for k, v in root.value if isinstance(k, yaml.ScalarNode) and k.value == "classes"), None)
    if not isinstance(classes, yaml.MappingNode):
        raise UserError([Diagnostic(location=loc(classes or root), message="expected a 'classes:' mapping")])
    for cname, cnode in classes.value:
        if not isinstance(cnode, yaml.MappingNode):
            errors.error(loc(cnode), f"{cname.value}: expected a mapping with 'methods:'")
            continue
        methods = next((v for k, v in cnode.value if k.value == "methods"), None)
        items: list[tuple[yaml.Node, yaml.Node | None]] = []
        if isinstance(methods, yaml.SequenceNode):
            for it in methods.value:
                if isinstance(it, yaml.MappingNode) and len(it.value) == 1:
                    items.append(it.value[0])
                else:
                    items.append((it, None))
        elif isinstance(methods, yaml.MappingNode):
            items = list(methods.value)
        else:
            errors.error(loc(methods or cnode), f"{cname.value}: expected 'methods:' (a list of selectors)")
            continue
        for key, val in items:
            if not isinstance(key, yaml.ScalarNode) or not isinstance(key.value, str) or not key.value:
                errors.error(loc(key), "expected a selector string")
                continue
            own = None
            if isinstance(val, yaml.MappingNode):
                own = next((v.value for k, v in val.value if k.value == "ownership"), None)
            out.append(Request(cls=cname.value, key=key.value, location=loc(key), ownership=own))
    errors.check()
    return out


def c_type_names(rendered: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The C type names a rendered ``classes:`` block uses (what the spec's ``declarations`` must declare)."""
    names: set[str] = set()
    for cls in rendered.values():
        for m in cls["methods"].values():
            for t in [m["returns"], *m.get("args", [])]:
                names.update(w for w in re.findall(r"[A-Za-z_]\w*", t) if w not in ("const", "void", "char"))
    return sorted(names)


