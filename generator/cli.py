"""Command line: ``ironaccel-gen generate|build|sdks|spec-keys|drift|scaffold`` (also ``python -m ironaccelerator_gen``)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from . import data
from .diagnostics import UserError

EXIT_USER_ERROR = 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ironaccel-gen", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="generate generated/ironaccelerator from specs and SDK headers")
    g.add_argument("--specs", type=Path, default=None, help="spec directory (default: the specs shipped with the generator)")
    g.add_argument("--out", type=Path, default=Path("generated"), help="output directory (default: generated)")
    g.add_argument("--check", action="store_true", help="regenerate in memory; exit 1 and list changes if any")
    g.add_argument("--sdk", action="append", default=[], metavar="KIND=PATH",
                   help="use this SDK root or include directory, e.g. cuda=/usr/local/cuda-12.9")
    g.add_argument("--only", action="append", default=[], metavar="VENDOR.LIBRARY", help="generate only these")
    g.add_argument("--frontend", choices=("clang", "pycparser"), default=None,
                   help="the C front-end for every library (default: each spec's frontend:, else clang)")
    g.add_argument("--build", action="store_true", help="also build the cffi modules")
    g.add_argument("--force", action="store_true", help="regenerate even if no input changed")
    g.add_argument("--require-sdks", action="store_true",
                   help="a library whose SDK is not found is an error (exit 2, naming the package that provides "
                        "it), not skipped; the default when the environment has CI=true")
    _add_verbosity(g)
    g.add_argument("--runtime", choices=("auto", "copy", "omit"), default="auto",
                   help="also write the hand-written runtime package (ironaccelerator_runtime) into --out, making it a "
                        "self-contained tree (copy), or not (omit); auto (the default): copy when the generator is "
                        "installed, omit in a checkout (whose runtime/ the checkout's .pth puts on the path)")
    b = sub.add_parser("build", help="build the cffi modules of a generated package")
    b.add_argument("--out", type=Path, default=Path("generated"),
                   help="the generated package's directory, as generate's --out (default: generated)")
    b.add_argument("--abi-only", action="store_true", help="skip the C compile (ABI-mode modules only)")
    b.add_argument("-j", "--jobs", type=int, default=None, metavar="N",
                   help="build N modules at a time (default: the number of CPUs)")
    b.add_argument("--force", action="store_true", help="rebuild every module, even those whose inputs are unchanged")
    b.add_argument("--require-api", action="store_true",
                   help="a module whose C compile fails is an error (exit 1), not left in ABI mode: where a compiler "
                        "is there, that is a bug in the generated C or the runtime's headers (make test passes it)")
    _add_verbosity(b)
    sub.add_parser("spec-keys", help="print the reference of every spec key (docs/SPEC_KEYS.md) from the loaders' schema")
    s = sub.add_parser("sdks", help="list the SDKs the library specs declare that are found, with version and path")
    s.add_argument("--specs", type=Path, default=None, help="spec directory (default: the specs shipped with the generator)")
    _add_drift_parser(sub)
    _add_scaffold_parser(sub)
    return p


def _add_verbosity(p: argparse.ArgumentParser) -> None:
    """-q / -v: the progress lines (a line as each library or module starts and finishes, with its time) are
    printed by default; -q keeps only problems and the summary; -v adds where headers come from and the
    compiler's output of builds that succeed."""
    v = p.add_mutually_exclusive_group()
    v.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const=0, default=1,
                   help="no progress lines: only problems and the summary line")
    v.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const=2,
                   help="more detail: each library's SDK headers, the compiler's output")


def _say(line: str) -> None:
    print(line, flush=True)  # as it goes, also into a pipe (make, CI logs)


def _add_scaffold_parser(sub: Any) -> None:
    """The ``scaffold`` subcommand's arguments (here, so that a CLI start does not import generator/scaffold.py)."""
    s = sub.add_parser("scaffold", help="write a starting spec for a library not yet bound (--missing: what an "
                       "existing spec leaves unbound or inferred)")
    s.add_argument("library", metavar="VENDOR.LIBRARY", help="the library the spec binds, ex. opencl.cl")
    s.add_argument("--header", type=Path, help="the library's main header")
    s.add_argument("--sdk", action="append", default=[], metavar="KIND=PATH",
                   help="the SDK kind and its root or include directory (the header is named relative to it)")
    s.add_argument("--include-dir", action="append", default=[], type=Path, metavar="DIR",
                   help="a further include directory the header needs (written as the sdk: declaration's "
                        "extra_includes:, sdk:KIND where a declared SDK is found there)")
    s.add_argument("--define", action="append", default=[], metavar="NAME[=VALUE]", help="a macro to define")
    s.add_argument("--undefine", action="append", default=[], metavar="NAME", help="a predefined macro to drop")
    s.add_argument("--backend", help="the core backend kind (default: guessed from the vendor)")
    s.add_argument("--lib-dir", action="append", default=[], type=Path, metavar="DIR",
                   help="also look for the library file here")
    s.add_argument("--specs", type=Path, default=Path("specs"), help="spec directory (default: specs)")
    s.add_argument("--out", help="the file to write (default: SPECS/VENDOR/LIBRARY.yaml; - for stdout)")
    s.add_argument("--force", action="store_true", help="overwrite an existing --out")
    s.add_argument("--missing", action="store_true",
                   help="report on the existing spec: functions not bound nor excluded, inferred pointer directions")


def _add_drift_parser(sub: Any) -> None:
    """The ``drift`` subcommand's arguments (here, so that a CLI start does not import generator/drift.py)."""
    d = sub.add_parser(
        "drift", help="report API drift of the bound libraries between two SDKs or generated trees",
        description="Compare two versions of the bound libraries: two SDKs of one kind (--sdk KIND=OLD --sdk "
                    "KIND=NEW), two generated trees (--old-tree DIR --new-tree DIR), or a generated tree against an "
                    "SDK (--old-tree generated: the checked-in output against the installed SDK or --sdk). Exit "
                    "status 1 when something a spec refers to disappears, 0 otherwise, 2 on a user error.")
    d.add_argument("--specs", type=Path, default=None, help="spec directory (default: the specs shipped with the generator)")
    d.add_argument("--sdk", action="append", default=[], metavar="KIND=PATH",
                   help="an SDK root or include directory; a kind given twice: the first is old, the second new")
    d.add_argument("--old-tree", type=Path, default=None, metavar="DIR", help="the old side: a generated tree")
    d.add_argument("--new-tree", type=Path, default=None, metavar="DIR", help="the new side: a generated tree")
    d.add_argument("--only", action="append", default=[], metavar="VENDOR.LIBRARY", help="compare only these")
    d.add_argument("--frontend", choices=("clang", "pycparser"), default=None, help="the C front-end for SDK sides")
    d.add_argument("--json", action="store_true", help="print JSON (sorted keys and rows) instead of text")


def _generate(args: argparse.Namespace) -> int:
    from . import cache

    overrides = {}
    for item in args.sdk:
        kind, sep, path = item.partition("=")
        if not sep:
            print(f"ironaccel-gen: --sdk expects KIND=PATH, got {item!r}", file=sys.stderr)
            return EXIT_USER_ERROR
        overrides[kind] = path
    if args.out.exists() and not args.out.is_dir():
        print(f"ironaccel-gen: --out {str(args.out)!r} exists and is not a directory", file=sys.stderr)
        return EXIT_USER_ERROR
    cache_path = args.out / ".ironaccel-gen.json"
    if os.path.lexists(cache_path) and not cache_path.is_file():
        print(f"ironaccel-gen: {cache_path}: not a regular file; this name is the generator's cache "
              "(remove what is there and run again)", file=sys.stderr)
        return EXIT_USER_ERROR
    copy_runtime = args.runtime == "copy" or (args.runtime == "auto" and data.INSTALLED)
    argv = [str(args.specs), sorted(overrides.items()), sorted(args.only), args.frontend, *(["runtime"] * copy_runtime)]

    def with_env(names: list[str]) -> list[object]:
        """The arguments plus the SDK environment variables the specs name (their values choose the headers)."""
        return [*argv, [(k, os.environ.get(k)) for k in names]]
    t0 = time.perf_counter()
    from . import output

    if args.check:
        if output.pending(args.out):
            print(f"generate --check: {args.out} is half-switched: a `generate` was killed after it committed "
                  f"{args.out / output.JOURNAL}; run `generate` to finish it")
            return 1
    else:
        try:
            if output.recover(args.out):
                print(f"generate: finished the switch of {args.out} that an interrupted run had committed")
        except (OSError, output.OutputError) as exc:
            print(f"ironaccel-gen: {exc}", file=sys.stderr)
            return EXIT_USER_ERROR
    if not args.check and not args.force:
        state = cache.load(cache_path)
        listed = state.get("inputs", [])
        # a cache whose inputs are not a list of paths (damaged, or written otherwise) is stale, like an unreadable one
        inputs = ([Path(p) for p in listed]
                  if isinstance(listed, list) and all(isinstance(p, str) for p in listed) else [])
        listed_env = state.get("sdk_env", [])
        names = listed_env if isinstance(listed_env, list) and all(isinstance(k, str) for k in listed_env) else []
        if state.get("fingerprint") == cache.fingerprint(args.specs, inputs, with_env(names)):
            if (args.out / "ironaccelerator" / "__init__.py").is_file():
                print(f"generate: up to date ({time.perf_counter() - t0:.3f}s)")
                if args.build:
                    from .build import build_all
                    return 1 if build_all(args.out, log=_say, verbosity=args.verbosity).failed else 0
                return 0
    from . import pipeline

    try:
        result = pipeline.compile_specs(args.specs, overrides, args.frontend, args.only or None,
                                        progress=_say if args.verbosity else None, verbose=args.verbosity > 1)
    except UserError as e:
        raise _as_given(e, args.specs) from None
    if copy_runtime:  # the hand-written package the generated one imports, beside it: one tree to put on the path
        result.files.update(data.runtime_files())
    if result.missing and (args.require_sdks or _under_ci()):
        # CI must notice a library whose checked-in output nothing verified: every spec'd SDK is installed there
        raise _as_given(UserError(result.missing), args.specs)
    for s in result.skipped:
        print(f"skipped {s}")
    if args.check:
        changes = output.diff(result.files, args.out, result.keep)
        if args.only:
            changes = [c for c in changes if not c.startswith("- ")]
        if changes:
            print(f"generate --check: {len(changes)} file(s) would change:")
            for c in changes:
                print(f"  {c}")
            return 1
        print(f"generate --check: {args.out} is up to date ({len(result.files)} files)")
        return 0
    keep = result.keep
    if args.only:  # leave the libraries that were not asked for as they are
        keep += tuple(f"ironaccelerator/backends/{n.replace('.', '/')}/" for n in _all_libraries(args.out)
                      if n not in args.only)
    try:
        changes = output.write(result.files, args.out, keep)
        pruned = output.prune(result.files, args.out, keep)
    except OSError as exc:  # ex) a path component of --out is a file, or no permission, or the disk is full
        print(f"ironaccel-gen: cannot write the output to {str(args.out)!r}: {exc}"
              f"{'' if not output.pending(args.out) else ' (the switch is committed: run generate again to finish it)'}",
              file=sys.stderr)
        return EXIT_USER_ERROR
    except output.OutputError as exc:
        print(f"ironaccel-gen: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    for lib in result.libraries if args.verbosity else ():
        print(f"generated {lib.module}: {len(lib.functions)} functions, {len(lib.enums)} enums "
              f"from {lib.header.name} ({lib.spec.backend} {lib.sdk_version})")
    for rel in pruned:
        print(f"removed {rel}/: no spec generates it any more (its build outputs went with it)")
    print(f"generate: {len(changes)} file(s) changed in {time.perf_counter() - t0:.2f}s")
    watched = result.inputs + [args.out / rel for rel in sorted(result.files)]
    try:
        if result.skipped:  # an SDK may be installed later: only a complete generation is cached
            cache_path.unlink(missing_ok=True)
        else:
            cache.save(cache_path, {"fingerprint": cache.fingerprint(args.specs, watched, with_env(result.sdk_env)),
                                    "inputs": [str(p) for p in watched], "sdk_env": result.sdk_env})
    except OSError as exc:  # the output is complete; only the no-op shortcut of the next run is lost
        print(f"ironaccel-gen: warning: {cache_path}: cache not saved ({exc}); the next generate will "
              "regenerate", file=sys.stderr)
    if args.build:
        from .build import build_all
        return 1 if build_all(args.out, log=_say, verbosity=args.verbosity).failed else 0
    return 0


def _install_hint(install: tuple[tuple[str, str], ...]) -> str:
    """``; install: apt libze-dev`` for an SDK declaration's ``install:``, or ''."""
    return "; install: " + ", ".join(f"{manager} {package}" for manager, package in install) if install else ""


def _under_ci() -> bool:
    """The environment is a CI run (``CI=true``, as GitHub Actions, GitLab and .ci/run's callers set it)."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def _as_given(e: UserError, spec_dir: Path) -> UserError:
    """``e`` with each spec named as the user named the spec directory (:func:`diagnostics.as_given`)."""
    from dataclasses import replace

    from .diagnostics import as_given

    return UserError([replace(d, location=as_given(d.location, spec_dir)) for d in e.diagnostics])


def _all_libraries(out: Path) -> list[str]:
    return [f"{p.parent.parent.name}.{p.parent.name}"
            for p in (out / "ironaccelerator" / "backends").glob("*/*/_cffi_build.py")]


def _prototype_lines(spec_dir: Path) -> list[str]:
    """The ``sdks`` lines of the prototype sources the objc specs of ``spec_dir`` read (``resolver: {prototypes:
    {sdk: ...}}``): one per source, ``not found: ...`` where no copy is."""
    from .frontend import objc_cpp
    from .pipeline import spec_paths
    from .prototypes import PrototypeSource
    from .spec import load_library

    users: dict[str, tuple[PrototypeSource, list[str]]] = {}
    for p in spec_paths(spec_dir) if spec_dir.is_dir() else []:
        try:
            sp = load_library(p, p.name)
        except UserError:
            continue
        if sp.objc is not None and sp.objc.prototypes is not None:
            source = sp.objc.prototypes
            users.setdefault(source.sdk.value, (source, []))[1].append(p.relative_to(spec_dir).as_posix())
    lines = []
    for name, (source, specs) in sorted(users.items()):
        root = objc_cpp.find_root(source)
        if root is None:
            how = ", ".join(x for x in (f"`{source.fetch}`" if source.fetch else "",
                                        f"${source.env}" if source.env else "") if x)
            lines.append(f"not found: {name} ({source.marker}; {how + '; ' if how else ''}prototypes of "
                         f"{', '.join(specs)})")
        else:
            lines.append(f"{name} {objc_cpp.version_of(source, root):<8} {root}  (prototypes of {', '.join(specs)})")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if getattr(args, "specs", False) is None:  # generate, sdks, drift: the generator's own specs (generator/data.py)
        args.specs = data.default_specs()
    try:
        if args.command == "generate":
            return _generate(args)
        if args.command == "build":
            from .build import build_all
            if args.jobs is not None and args.jobs < 1:
                print(f"ironaccel-gen: --jobs must be at least 1, got {args.jobs}", file=sys.stderr)
                return EXIT_USER_ERROR
            report = build_all(args.out, api=not args.abi_only, jobs=args.jobs, force=args.force, log=_say,
                               verbosity=args.verbosity)
            if report.failed:
                print(f"ironaccel-gen build: no module built for {', '.join(report.failed)}: importing "
                      f"{'it' if len(report.failed) == 1 else 'them'} would fail (see above)", file=sys.stderr)
                return 1
            if args.require_api and report.api_failed:
                print(f"ironaccel-gen build: the C compile failed for {', '.join(report.api_failed)} (the compiler's "
                      "errors are above); --require-api makes that an error, not a fallback to ABI mode",
                      file=sys.stderr)
                return 1
            return 0
        if args.command == "spec-keys":
            from .schema import render_markdown
            sys.stdout.write(render_markdown(data.RUNTIME_PACKAGE / "backends"))
            return 0
        if args.command == "drift":
            from .drift import run as drift
            try:
                return drift(args)
            except UserError as e:
                raise _as_given(e, args.specs) from None
        if args.command == "scaffold":
            from .scaffold import run as scaffold
            return scaffold(args)
        if args.command == "sdks":
            from .sdk import descriptions, discover
            if not args.specs.is_dir():
                print(f"ironaccel-gen: --specs {str(args.specs)!r} is not a directory", file=sys.stderr)
                return EXIT_USER_ERROR
            descs = descriptions(args.specs)
            found = discover(descs)
            for s in found:
                print(s)
            missing = sorted(set(descs) - {s.kind for s in found})
            lines = _prototype_lines(args.specs)
            for line in lines:
                if line.startswith("not found: "):
                    missing.append(line[len("not found: "):])
                else:
                    print(line)
            if missing:
                print("not found: " + "; ".join(k if k not in descs else f"{k} ({descs[k].marker}; see "
                                                f"{descs[k].path}{_install_hint(descs[k].install)})" for k in missing))
            if not found and not lines and not missing:  # never a silent success
                print(f"no SDK: no library spec in {args.specs} declares one (sdk:)")
            return 0
    except UserError as e:
        for d in e.diagnostics:
            print(d, file=sys.stderr)
        n = sum(1 for d in e.diagnostics if d.severity == "error")
        print(f"ironaccel-gen: {n} error(s)", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        return 130
    return 0
