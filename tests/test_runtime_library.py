"""The hand-written support every generated library module calls at import (ironaccelerator_runtime.loader):
tested directly, over a stand-in binding, besides through every generated library (test_golden.py runs
both modes, test_fast_path.py the compiled wrappers)."""

from __future__ import annotations

import types
from typing import Any

from ironaccelerator_runtime import loader


class _Lib:
    """A library whose functions say which symbol set they came from."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.generation = 0

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        self.calls.append(name)
        gen = self.generation
        return lambda *args: (name, gen, args)


class _Binding:
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.lib = _Lib()
        self.functions = (("fA", "fA", None, None), ("fB", "fB", "fB_ptds", None))
        self.per_thread = False

    def set_per_thread_default_stream(self, enabled: bool) -> None:
        self.per_thread = enabled
        self.lib.generation += 1


def test_api_mode_binds_every_function_once_at_import() -> None:
    b, ns = _Binding("api"), {}  # type: ignore[var-annotated]
    loader.bind_functions(ns, b)  # type: ignore[arg-type]
    assert sorted(ns) == ["_f_fA", "_f_fB"] and b.lib.calls == ["fA", "fB"]
    assert ns["_f_fA"](1) == ("fA", 0, (1,))


def test_abi_mode_resolves_on_first_call_and_again_after_the_per_thread_switch() -> None:
    b, ns = _Binding("abi"), {}  # type: ignore[var-annotated]
    unchecked = types.ModuleType("unchecked")
    loader.bind_functions(ns, b)  # type: ignore[arg-type]
    assert b.lib.calls == []  # nothing resolved at import
    stand_in = ns["_f_fB"]
    assert stand_in(7) == ("fB", 0, (7,)) and b.lib.calls == ["fB"]
    assert ns["_f_fB"] is not stand_in and ns["_f_fB"](8) == ("fB", 0, (8,)) and b.lib.calls == ["fB"]
    setattr(unchecked, "fB", ns["_f_fB"])  # what unchecked's __getattr__ caches
    loader.switch_per_thread(ns, b, unchecked, True)  # type: ignore[arg-type]
    assert b.per_thread and "fB" not in vars(unchecked)
    assert ns["_f_fB"](9) == ("fB", 1, (9,))  # resolved again, under the new symbols


def test_install_fast_leaves_abi_mode_alone() -> None:
    ns = {"fA": object()}
    assert loader.install_fast(ns, _Binding("abi"), "x") == (None, {})  # type: ignore[arg-type]


def test_detail_never_masks_the_error_it_accompanies() -> None:
    assert loader.detail(lambda a, b: a + b, "log ", "text") == "log text"

    def broken() -> str:
        raise RuntimeError("no program")
    assert loader.detail(broken) == "(no log: no program)"


def test_library_search_order(tmp_path: Any, monkeypatch: Any) -> None:
    """An SDK root named by the environment (the user's choice, ex: QNN_SDK_ROOT) comes before a pip wheel of the
    active environment, which comes before a standard prefix; the bare name (system loader) is last."""
    import sys

    env_root, site, prefix = tmp_path / "sdk", tmp_path / "site", tmp_path / "opt" / "sdk-2.1"
    for d in (env_root / "lib", site / "vendor_wheel", prefix / "lib"):
        d.mkdir(parents=True)
        (d / "libvendor.so").write_bytes(b"")
    monkeypatch.setattr(sys, "path", [str(site)])
    monkeypatch.setenv("IA_TEST_SDK_ROOT", str(env_root))
    files: tuple[str, ...] = ("libvendor.so",)
    args = ({"linux": files, "darwin": files, "windows": files},
            ("vendor_wheel",), ("lib",), ("IA_TEST_SDK_ROOT",), (str(tmp_path / "opt" / "sdk-*"),))
    assert loader.library_candidates(*args) == [str(env_root / "lib" / "libvendor.so"),
                                                str(site / "vendor_wheel" / "libvendor.so"),
                                                str(prefix / "lib" / "libvendor.so"), "libvendor.so"]
    monkeypatch.delenv("IA_TEST_SDK_ROOT")
    assert loader.library_candidates(*args)[0] == str(site / "vendor_wheel" / "libvendor.so")


def test_library_search_prefers_the_newest_version_by_number(tmp_path: Any, monkeypatch: Any) -> None:
    """Issue 24 item 8, at run time: of /opt/sdk-9.2 and /opt/sdk-12.9 the 12.9 one comes first (a lexical
    newest-first sort put 9.2 first), and of libvendor.so.9 and libvendor.so.13 the .13."""
    import sys

    for v in ("9.2", "12.9"):
        (tmp_path / "opt" / f"sdk-{v}" / "lib").mkdir(parents=True)
        (tmp_path / "opt" / f"sdk-{v}" / "lib" / "libvendor.so").write_bytes(b"")
    monkeypatch.setattr(sys, "path", [])
    files: tuple[str, ...] = ("libvendor.so",)
    args = ({"linux": files, "darwin": files, "windows": files}, (), ("lib",), (), (str(tmp_path / "opt" / "sdk-*"),))
    assert loader.library_candidates(*args)[:2] == [str(tmp_path / "opt" / "sdk-12.9" / "lib" / "libvendor.so"),
                                                    str(tmp_path / "opt" / "sdk-9.2" / "lib" / "libvendor.so")]
    for n in ("9", "13"):
        (tmp_path / "opt" / "sdk-12.9" / "lib" / f"libvendor.so.{n}").write_bytes(b"")
    files = ("libvendor.so.*",)
    args = ({"linux": files, "darwin": files, "windows": files}, (), ("lib",), (), (str(tmp_path / "opt" / "sdk-12.9"),))
    assert loader.library_candidates(*args) == [str(tmp_path / "opt" / "sdk-12.9" / "lib" / "libvendor.so.13"),
                                                str(tmp_path / "opt" / "sdk-12.9" / "lib" / "libvendor.so.9")]
