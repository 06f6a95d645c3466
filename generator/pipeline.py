"""The whole compile: specs -> SDK headers -> IR -> bound API -> files (written by :mod:`.output`)."""

from __future__ import annotations

import os
import re
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from . import __version__
from . import sdk as sdks
from .bind import BoundLibrary, bind
from .diagnostics import Collector, Diagnostic, UserError, suggest
from .frontend import FRONTENDS, ParseRequest, objc_cpp, parse
from .ir import Header, Location
from .output import diff, existing_files, write
from .prototypes import PrototypeSource, fill_spec
from .objc import ObjcLibrary, bind_objc
from .render import banner_text, environment, render_library, render_objc_library, render_package
from .surface import BackendSpec, Surface, load_backend, load_surface, render_surface
from .spec import CoreSpec, LibrarySpec, LoaderSpec, SdkSpec, check_backends, check_library_set, load_core, load_library, sdk_declarations



@dataclass
class Result:
    files: dict[str, str]
    libraries: list[BoundLibrary]
    skipped: list[str] = field(default_factory=list)
    inputs: list[Path] = field(default_factory=list)
    keep: tuple[str, ...] = ()  # output directories of skipped libraries: left as they are
    backends: list[BackendSpec] = field(default_factory=list)
    sdk_env: list[str] = field(default_factory=list)  # the environment variables the SDK descriptions read
    objc: list[ObjcLibrary] = field(default_factory=list)  # Objective-C libraries (resolver kind objc)
    # one located error per skipped library (the spec's sdk: and the package providing it): what
    # `generate --require-sdks` (or CI=true) fails with
    missing: list[Diagnostic] = field(default_factory=list)


def spec_paths(spec_dir: Path) -> list[Path]:
    """Library specs: every YAML file but core.yaml and the backend specs."""
    return sorted(p for p in spec_dir.rglob("*.yaml") if p.name not in ("core.yaml", "backend.yaml"))


def backend_paths(spec_dir: Path) -> list[Path]:
    # (by listing, as spec_paths: rglob("backend.yaml") checks that the name exists, and so silently passes
    # over a backend.yaml that is a dangling symlink or a symlink loop)
    return sorted(p for p in spec_dir.rglob("*.yaml") if p.name == "backend.yaml")


def _display(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` for messages and banners: resolved, or else as found (a symlink to a
    file elsewhere, or a symlink loop: RuntimeError before Python 3.13), or else its name."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):  # a symlink loop: named as found, and refused when read
        resolved = Path(os.path.abspath(path))
    for candidate, root in ((resolved, base.resolve()), (Path(os.path.abspath(path)), Path(os.path.abspath(base)))):
        try:  # a spec symlinked out of the tree (to /dev/zero, say) is named where it was found
            return candidate.relative_to(root).as_posix()
        except ValueError:
            continue
    return path.name


def parse_declared(spec: LibrarySpec, parser: str) -> Header:
    """``frontend: declared``: the spec's own C declarations, parsed by ``parser`` (clang or pycparser) as the
    virtual header ``<library>.declared.h``; a diagnostic in them is located in the spec."""
    assert spec.declarations is not None
    d = spec.declarations
    name = spec.headers[0].value
    with tempfile.TemporaryDirectory(prefix="ia-declared-") as tmp:
        # indented as in the spec, so that columns are the spec's too (C does not mind leading blanks)
        body = "".join((" " * d.indent + line if line.strip() else line) + "\n" for line in d.text.splitlines())
        (Path(tmp) / name).write_text(body, encoding="utf-8")
        request = ParseRequest(headers=(name,), include_dirs=(Path(tmp),), defines=spec.defines,
                               undefines=spec.undefines, where=spec.location)
        try:
            return parse(request, parser)
        except UserError as e:
            raise UserError([replace(x, location=Location(file=spec.path, line=x.location.line + d.line - 1,
                                                          col=x.location.col))
                             if x.location.file == name else x for x in e.diagnostics]) from None


def load_specs(spec_dir: Path, base: Path) -> tuple[CoreSpec, list[LibrarySpec], list[Diagnostic]]:
    """The core spec and every library spec that loads, and the problems of those that do not (named relative to
    ``base``); a core spec that does not load raises."""
    core = load_core(spec_dir / "core.yaml", _display(spec_dir / "core.yaml", base))
    specs: list[LibrarySpec] = []
    problems: list[Diagnostic] = []
    for p in spec_paths(spec_dir):
        try:
            specs.append(load_library(p, _display(p, base)))
        except UserError as e:
            problems += e.diagnostics
    return core, specs, problems


def load_backends(spec_dir: Path, base: Path) -> tuple[Surface, list[BackendSpec], list[Diagnostic]]:
    """The core surface and every backend spec that loads, and the problems of those that do not."""
    surface = load_surface(spec_dir / "core.yaml", _display(spec_dir / "core.yaml", base))
    backends: list[BackendSpec] = []
    problems: list[Diagnostic] = []
    for p in backend_paths(spec_dir):
        try:
            backends.append(load_backend(p, _display(p, base), surface))
        except UserError as e:
            problems += e.diagnostics
    return surface, backends, problems


def provenance(spec_dir: Path, specs: list[LibrarySpec], backends: list[BackendSpec]) -> dict[str, Any]:
    """What the package is generated from, recorded in ``_core.GENERATED_FROM`` (``python -m ironaccelerator
    --json`` shows it): the generator's version; each spec file's sha256, named relative to the spec directory;
    each library's and backend's spec file and backend kind.  Deterministic: no time, no absolute path, and the
    same whichever SDKs this machine has (each library's SDK version is its module's ``SDK_VERSION``).  The
    specs and backends are those of :func:`load_specs` and :func:`load_backends` (in the order of
    :func:`spec_paths` and :func:`backend_paths`: every one loaded, or compile_specs raised)."""
    import hashlib

    lib_paths, backend_files = spec_paths(spec_dir), backend_paths(spec_dir)
    assert len(lib_paths) == len(specs) and len(backend_files) == len(backends)
    digests = {p.relative_to(spec_dir).as_posix(): "sha256:" + hashlib.sha256(p.read_bytes()).hexdigest()
               for p in [spec_dir / "core.yaml", *lib_paths, *backend_files]}
    return {
        "generator": f"ironaccel-gen {__version__}",
        "specs": dict(sorted(digests.items())),
        "libraries": {f"{sp.vendor}.{sp.library}": {"backend": str(sp.backend),
                                                    "spec": p.relative_to(spec_dir).as_posix()}
                      for sp, p in sorted(zip(specs, lib_paths), key=lambda t: (str(t[0].vendor), str(t[0].library)))},
        "backends": {b.kind: {"vendor": b.vendor, "spec": p.relative_to(spec_dir).as_posix()}
                     for b, p in sorted(zip(backends, backend_files), key=lambda t: t[0].kind)},
    }


def missing_sdk(name: str, spec: LibrarySpec, desc: SdkSpec | None) -> Diagnostic:
    """The error for library ``name`` whose SDK is not found: at its spec's ``sdk:``, naming the package that
    provides the SDK (the declaration's ``install:``) and where the install step goes."""
    if desc is None or not desc.install:
        how = (f"add an install: hint to {desc.path if desc else 'its sdk: block'} ({{apt: [package]}} or "
               "{pip: [requirement]}) and install it")
    else:
        how = "install " + " or ".join(
            f"apt package {pkg} (scripts/install-system-sdks.sh)" if manager == "apt" else
            f"pip {pkg} (the Makefile's GEN_SDKS/TEST_SDKS)" for manager, pkg in desc.install)
    marker = desc.marker if desc else spec.headers[0].value
    return Diagnostic(location=spec.sdk.location, message=(
        f"{name}: no {spec.sdk} SDK found ({marker}), so its checked-in output is not verified: {how}, "
        f"or give --sdk {spec.sdk}=PATH"))


NOT_FOUND = re.compile(r"'([^']+)' file not found")


def not_found_hint(d: Diagnostic, spec: LibrarySpec, desc: SdkSpec | None) -> Diagnostic:
    """``d``, where it is a header that none of the include directories holds (``'driver_types.h' file not
    found``), with the key that adds a directory: the SDK declaration's ``extra_includes``."""
    m = NOT_FOUND.search(d.message)
    if m is None:
        return d
    where = desc.path if desc is not None else f"the spec declaring sdk '{spec.sdk}'"
    return replace(d, message=f"{d.message}: no include directory of {spec.vendor}.{spec.library} has it; add the "
                              f"one that does to extra_includes: of the sdk: declaration in {where} (sdk:KIND for "
                              f"another SDK's, ex. [sdk:cuda]; a directory relative to the {spec.sdk} include "
                              f"directory; or an absolute one)")


def compile_specs(spec_dir: Path, sdk_overrides: dict[str, str] | None = None, frontend: str | None = None,
                  only: list[str] | None = None, base: Path | None = None,
                  progress: Callable[[str], None] | None = None, verbose: bool = False) -> Result:
    """Run the compiler in memory; raise :class:`UserError` on any user error.  ``frontend``: the C front-end
    for every library (clang or pycparser); None: each spec's ``frontend:``, else clang.  ``progress``: called
    with a line as each library starts and finishes (its time) and as the package is rendered; ``verbose`` adds
    where each library's headers come from."""
    base = base or spec_dir.parent
    say: Callable[[str], None] = progress or (lambda line: None)
    t_all = time.perf_counter()
    core, specs, problems = load_specs(spec_dir, base)
    for p in sorted(spec_dir.rglob("core.yaml")):
        if p.parent != spec_dir:  # (spec_paths passes over it: it would silently generate nothing)
            problems.append(Diagnostic(location=Location(file=_display(p, base), line=1, col=1),
                                       message=f"only {_display(spec_dir / 'core.yaml', base)} is a core spec, and a "
                                               "library spec cannot be named core.yaml: name the file after its "
                                               "library (the library: key names the module)"))
    descs, conflicts = sdk_declarations(specs)
    problems += conflicts + check_backends(specs, core)
    if not problems:  # (a spec that did not load may be the one using an --sdk kind)
        problems += check_library_set(specs, sdk_overrides or {}, descs)
    if problems:
        raise UserError(problems)
    libraries: list[BoundLibrary] = []
    # library -> (the header its declarations are derived from, the license notice it opens with: sdk.header_notice)
    notices: dict[str, tuple[str, str]] = {}
    objc_libraries: list[ObjcLibrary] = []
    models: dict[tuple[Path, PrototypeSource], objc_cpp.Model] = {}  # each prototype source, parsed once per copy
    skipped: list[str] = []
    missing: list[Diagnostic] = []
    keep: list[str] = []
    inputs: list[Path] = [spec_dir / "core.yaml", *spec_paths(spec_dir)]
    known = [f"{sp.vendor}.{sp.library}" for sp in specs]
    for want in only or ():
        if want not in known:  # a typo must not quietly generate nothing
            raise UserError([Diagnostic(location=Location(file="--only", line=1, col=1),
                                        message=f"no library spec '{want}' in {_display(spec_dir, base)}"
                                                f"{suggest(want, known)}")])
    selected = [sp for sp in specs if not only or f"{sp.vendor}.{sp.library}" in only]
    for number, spec in enumerate(selected, 1):
        name = f"{spec.vendor}.{spec.library}"
        parser = frontend or (spec.frontend if spec.frontend in FRONTENDS else None) or "clang"
        started, count = time.perf_counter(), (len(libraries), len(objc_libraries))

        def finished(name: str = name, started: float = started, count: tuple[int, int] = count) -> None:
            new = libraries[count[0]:] or objc_libraries[count[1]:]
            if new:  # (a library that failed says so in the errors raised after the loop)
                n = len(new[0].functions)
                say(f"generate {name}: bound {n} functions in {time.perf_counter() - started:.2f}s")
        say(f"generate {name} [{number}/{len(selected)}]: parsing "
            f"{', '.join(h.value for h in spec.headers) if spec.declarations is None else 'its declared header'} "
            f"({parser})")
        if spec.declarations is not None:
            sdk_version = None
            if spec.objc is not None and spec.objc.prototypes is not None:  # prototypes: {kind: cpp-wrappers, ...}
                source = spec.objc.prototypes
                given = (sdk_overrides or {}).get(source.sdk.value)  # --sdk <sdk>=PATH: that copy or none
                root = objc_cpp.find_root(source) if given is None else \
                    Path(given) if (Path(given) / source.marker).is_file() else None
                if root is None:
                    how = [f"`{source.fetch}`"] * bool(source.fetch) + [f"${source.env}"] * bool(source.env)
                    skipped.append(f"{name}: no {source.sdk} headers found ({', '.join(how)}{' or ' if how else ''}"
                                   f"--sdk {source.sdk}=PATH): its selectors' prototypes come from them")
                    missing.append(Diagnostic(location=source.sdk.location, message=(
                        f"{name}: no {source.sdk} headers found ({source.marker}), so its checked-in output is not "
                        f"verified: get them with {' or '.join(how) or 'its source'}, or give --sdk {source.sdk}=PATH")))
                    keep.append(f"ironaccelerator/backends/{spec.vendor}/{spec.library}/")
                    continue
                try:
                    if (root, source) not in models:
                        models[root, source] = objc_cpp.parse(source, root)
                        inputs += sorted(root.rglob("*.hpp"))
                    spec = fill_spec(spec, models[root, source])
                except UserError as e:
                    problems += e.diagnostics
                    continue
                sdk_version = f"{source.sdk} {models[root, source].version}"
                notice = sdks.header_notice(root / source.marker)  # the prototypes are derived from its headers
                if notice is not None:
                    notices[name] = (f"{sdk_version} ({source.marker})", notice)
            try:
                header = parse_declared(spec, parser)
                if spec.objc is not None:
                    objc_libraries.append(bind_objc(spec, core, header, sdk_version))
                else:
                    libraries.append(bind(spec, core, header, sdk_version=None if spec.version_macro else "declared"))
            except UserError as e:
                problems += e.diagnostics
            finished()
            continue
        found = sdks.find(spec.sdk.value, (sdk_overrides or {}).get(spec.sdk.value), spec.headers[0].value, descs)
        if found is None:
            skipped.append(f"{name}: no {spec.sdk} SDK headers found ({', '.join(h.value for h in spec.headers)})")
            missing.append(missing_sdk(name, spec, descs.get(spec.sdk.value)))
            keep.append(f"ironaccelerator/backends/{spec.vendor}/{spec.library}/")
            continue
        desc = descs.get(spec.sdk.value)
        include_dirs, absent = sdks.include_path(desc, found, sdk_overrides, descs)
        if absent:  # extra_includes: [sdk:KIND] whose SDK is not here
            skipped.append(f"{name}: no {', '.join(absent)} SDK headers found (its {spec.sdk} headers include them)")
            missing += [missing_sdk(name, replace(spec, sdk=replace(spec.sdk, value=k)), descs.get(k)) for k in absent]
            keep.append(f"ironaccelerator/backends/{spec.vendor}/{spec.library}/")
            continue
        if verbose:
            say(f"generate {name}: {spec.sdk} {found.version} headers from {found.include_dir} ({found.source})"
                + "".join(f", {d}" for d in include_dirs[1:]))
        request = ParseRequest(headers=tuple(h.value for h in spec.headers + spec.version_headers),
                               include_dirs=include_dirs, defines=spec.defines, undefines=spec.undefines,
                               where=spec.location)
        try:
            try:
                header = parse(request, parser)
            except UserError as e:
                raise UserError([not_found_hint(d, spec, desc) for d in e.diagnostics]) from None
            libraries.append(bind(spec, core, header, sdk_version=None if spec.version_macro else found.version))
            notice = sdks.header_notice(found.include_dir / spec.headers[0].value)
            if notice is not None:
                notices[name] = (spec.headers[0].value, notice)
        except UserError as e:
            problems += e.diagnostics
        finished()
        inputs += [found.include_dir / h.value for h in spec.headers + spec.version_headers]
    if problems:
        raise UserError(problems)
    surface, backends, problems = load_backends(spec_dir, base)
    inputs += backend_paths(spec_dir)
    if problems:
        raise UserError(problems)
    started = time.perf_counter()
    say(f"generate: rendering the package ({len(libraries) + len(objc_libraries)} libraries, "
        f"{len(backends)} backends)")
    env = environment()
    loaders: dict[str, list[tuple[str, LoaderSpec]]] = {}
    for sp in specs:
        loaders.setdefault(sp.vendor.value, []).append((sp.library.value, sp.loader))
    files = render_package(env, core, (sp.vendor.value for sp in specs), {b.vendor: b.class_prefix for b in backends},
                           loaders)
    for lib in libraries:
        files.update(render_library(env, lib, notices.get(f"{lib.spec.vendor}.{lib.spec.library}")))
    for olib in objc_libraries:
        files.update(render_objc_library(env, olib, notices.get(f"{olib.spec.vendor}.{olib.spec.library}")))
    bound = {f"{lib.spec.vendor}.{lib.spec.library}": lib for lib in libraries}
    objc_bound = {f"{lib.spec.vendor}.{lib.spec.library}": lib for lib in objc_libraries}
    files.update(render_surface(env, surface, backends, bound, lambda source: "# " + banner_text(source), core,
                                objc_bound, generated_from=provenance(spec_dir, specs, backends)))
    for b in backends:
        if f"ironaccelerator/backends/{b.vendor}/_backend.py" not in files:
            keep.append(f"ironaccelerator/backends/{b.vendor}/_backend.py")
    say(f"generate: rendered {len(files)} files in {time.perf_counter() - started:.2f}s "
        f"({time.perf_counter() - t_all:.2f}s in all)")
    return Result(files=files, libraries=libraries, skipped=skipped, missing=missing, inputs=inputs, keep=tuple(keep),
                  backends=backends, sdk_env=sorted({e for d in descs.values() for e in d.env} | {s.env for _, s in models if s.env}), objc=objc_libraries)


# --------------------------------------------------------------------- writing: see output.py

__all__ = ["compile_specs", "write", "diff", "existing_files", "Result", "Collector", "CoreSpec"]
