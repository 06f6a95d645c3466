"""The Python side of the objc resolver kind: loading an Objective-C runtime and its frameworks, object handles,
autorelease pools and NSError outputs.

A generated Objective-C library (``templates/objc/``) renders its classes' Python wrappers and a table of its
methods; this module does the rest, in both binding modes:

- API mode: the compiled trampolines (``ia_objc.h``) send each message; ``ia_checked_<i>`` guards it (nil
  receiver, ``class_respondsToSelector``, the autorelease pool, retaining a kept +0 result) and reports a refusal
  through ``ia_objc_failed()``.
- ABI mode (no compiler): the same contract in Python over cffi's ABI mode: the IMP is looked up with
  ``objc_msg_lookup`` (GNU) or is ``objc_msgSend`` (Apple) and called cast to the method's prototype.

The runtime and frameworks are opened with ``RTLD_GLOBAL`` (dlsym(RTLD_DEFAULT) must see them, and a framework
linked only by name would be dropped by ``--as-needed``: its classes would come back nil).
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import threading
from typing import Any, Callable, Iterator, Sequence

from ironaccelerator._core import ErrorKind

from .errors import Error, fail
from .loader import ABI, API, library_candidates, load_module  # (the binding modes: one loader's)

# ia_objc.h's refusals (ia_objc_failed())
NIL, SELECTOR, OPEN, CLASS, FUNCTION = 1, 2, 3, 4, 5
EXCEPTION = 8  # the method raised an Objective-C exception, caught (API mode): ia_objc_caught() returns it
# the kind of a caught exception by its name (any other: UNKNOWN)
EXCEPTION_KINDS = {"NSInvalidArgumentException": ErrorKind.INVALID_VALUE, "NSRangeException": ErrorKind.INVALID_VALUE,
                   "NSMallocException": ErrorKind.OUT_OF_MEMORY}
# (class, selector, class method, result kind, argument kinds, ownership, consumes self, error arg, autoreleases,
#  fpret) -- see generator/objc.py's BoundMethod
MethodRow = tuple[str, str, bool, str, tuple[str, ...], str, bool, int, bool, str]
# (C function, result kind, argument kinds, ownership, autoreleases) -- generator/objc.py's BoundFunction.  The
# checked wrappers name function i ``~i`` (a negative index) where they name method i ``i`` (describe, fail, the
# argument checks).
FunctionRow = tuple[str, str, tuple[str, ...], str, bool]


class NSErrorError(Error):
    """An ``NSError *`` output of a checked call: an :class:`Error` whose ``.code`` is the NSError's code, with its
    ``.domain`` and ``.localized_description``; ``.kind`` from the spec's ``errors:`` mapping."""

    def __init__(self, kind: ErrorKind, message: str, *, domain: str, localized_description: str, code: int,
                 function: str | None = None, backend: str | None = None) -> None:
        super().__init__(kind, message, code=code, function=function, backend=backend)
        self.domain = domain
        self.localized_description = localized_description

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_nserror, (self.kind, str(self), self.domain, self.localized_description, self.code,
                                   self.function, self.backend))


def _rebuild_nserror(kind: ErrorKind, message: str, domain: str, desc: str, code: int, function: str | None,
                     backend: str | None) -> NSErrorError:
    return NSErrorError(kind, message, domain=domain, localized_description=desc, code=code, function=function,
                        backend=backend)


class ObjCExceptionError(Error):
    """An Objective-C exception raised inside a checked call (API mode; ia_objc.h catches it where the process
    would have ended): an :class:`Error` with the exception's ``.name`` and ``.reason``; ``.kind`` INVALID_VALUE for
    NSInvalidArgumentException and NSRangeException, OUT_OF_MEMORY for NSMallocException, else UNKNOWN."""

    def __init__(self, kind: ErrorKind, message: str, *, name: str, reason: str, function: str | None = None,
                 backend: str | None = None) -> None:
        super().__init__(kind, message, function=function, backend=backend)
        self.name = name
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_exception, (self.kind, str(self), self.name, self.reason, self.function, self.backend))


def _rebuild_exception(kind: ErrorKind, message: str, name: str, reason: str, function: str | None,
                       backend: str | None) -> ObjCExceptionError:
    return ObjCExceptionError(kind, message, name=name, reason=reason, function=function, backend=backend)


class Object:
    """A handle to an Objective-C object (``id``) that owns one reference to it: released by :meth:`close` or
    when the handle is dropped.  Results of the checked calls are handles of the bound class the object's run-time
    class derives from (a ``GSCBufferString`` is an ``NSString``); an object no bound class covers is an
    ``Object``."""

    __slots__ = ("_id", "__weakref__")
    _id: Any
    _binding: ObjcBinding
    _ci = -1  # the generated class's index in _binding.CLASSES (the receiver of its class methods)

    def __init__(self, handle: Any) -> None:
        """Own ``handle`` (a cdata ``id`` whose reference the caller gives to this handle)."""
        self._id = handle

    @property
    def handle(self) -> Any:
        """The ``id`` (a cdata pointer; NULL once closed), for the unchecked functions."""
        return self._id

    def close(self) -> None:
        """Release the reference now; every checked call on the handle then raises INVALID_HANDLE."""
        h, self._id = self._id, self._binding.ffi.NULL
        if h != self._binding.ffi.NULL:
            self._binding.release(h)

    def __enter__(self) -> Object:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the binding may be half torn down
            pass

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Object) and self._id == other._id

    def __hash__(self) -> int:
        return hash(int(self._binding.ffi.cast("uintptr_t", self._id)))

    def __repr__(self) -> str:
        b = self._binding
        if self._id == b.ffi.NULL:
            return f"<{type(self).__name__} (closed)>"
        return f"<{type(self).__name__} {b.class_name(self._id)} at 0x{int(b.ffi.cast('uintptr_t', self._id)):x}>"


class ObjcBinding:
    """The loaded form of one Objective-C library: its cffi module (API or ABI), the runtime and frameworks, and
    the table of its methods (``_binding.py``)."""

    def __init__(self, *, package: str, build_id: str, backend: str, library: str,
                 runtime: dict[str, tuple[str, ...]], frameworks: dict[str, tuple[str, ...]],
                 classes: Sequence[str], methods: Sequence[MethodRow], functions: Sequence[FunctionRow] = (),
                 wheel_dirs: Sequence[str] = (), sdk_dirs: Sequence[str] = (), sdk_env: Sequence[str] = (),
                 sdk_roots: Sequence[str] = (), errors: dict[tuple[str, int | None], ErrorKind], error_default: ErrorKind) -> None:
        self.package = package
        self.build_id = build_id
        self.backend = backend
        self.library = library
        self.runtime_names = runtime
        self.framework_names = frameworks
        # where else to look: the spec's loader: (wheel_dirs, sdk_dirs, sdk_env, sdk_roots), as a C library's Binding
        self.search = (tuple(wheel_dirs), tuple(sdk_dirs), tuple(sdk_env), tuple(sdk_roots))
        self.classes = tuple(classes)
        self.methods = tuple(methods)
        self.functions = tuple(functions)
        self.errors = errors
        self.error_default = error_default
        self.handles: list[Any] = []  # the opened runtime and frameworks (kept open)
        self.paths: list[str] = []
        self.tried: list[str] = []
        self.load_error: Error | None = None
        self.py_classes: dict[str, type[Object]] = {}
        self._by_class: dict[int, type[Object]] = {}
        self._lock = threading.Lock()
        self.Object: type[Object] = type("Object", (Object,), {"__slots__": (), "_binding": self,
                                                                "__module__": package})
        # one loader for both families (loader.load_module): the compiled module opens the runtime and
        # frameworks through open(), ABI mode calls them through _AbiLib
        self.mode, self.ffi, self.lib = load_module(self, lambda lib: self.open(),
                                                    lambda ffi: _AbiLib(self, ffi))
        self.NULL = self.ffi.NULL

    # ------------------------------------------------------------ loading
    def _platform(self) -> str:
        return "windows" if sys.platform == "win32" else "darwin" if sys.platform == "darwin" else "linux"

    def open(self) -> bool:
        """Open the runtime, then each framework, RTLD_GLOBAL (once; True when all are open)."""
        with self._lock:
            if self.handles or self.load_error is not None:
                return self.load_error is None
            plat = self._platform()
            groups = [("runtime", self.runtime_names.get(plat, ()))]
            groups += [("framework", (name,)) for name in self.framework_names.get(plat, ())]
            opened: list[Any] = []
            for what, names in groups:
                handle = None
                failures = []
                wheel_dirs, sdk_dirs, sdk_env, sdk_roots = self.search
                paths = [p for name in names for p in library_candidates({plat: (name,)}, wheel_dirs, sdk_dirs,
                                                                          sdk_env, sdk_roots)]
                for name in paths:
                    self.tried.append(name)
                    try:
                        handle = self._dlopen(name)
                    except OSError as exc:
                        failures.append(f"{name}: {exc}")
                        continue
                    self.paths.append(name)
                    break
                if handle is None:
                    self.load_error = Error(
                        ErrorKind.LIBRARY_NOT_FOUND,
                        f"{self.backend} {self.library}: cannot load the Objective-C {what} "
                        f"({'; '.join(failures) or 'none named for ' + plat})", backend=self.backend)
                    return False
                opened.append(handle)
            self.handles = opened
            return True

    def _dlopen(self, name: str) -> Any:
        flags = getattr(os, "RTLD_GLOBAL", 0) | getattr(os, "RTLD_NOW", 0)
        if self.mode == ABI and not self.handles:  # the runtime: its functions are called through this handle
            try:
                return self.ffi.dlopen(name, flags)
            except OSError:
                raise
        import ctypes

        return ctypes.CDLL(name, mode=flags)

    def ready(self) -> None:
        """Load the runtime (if not yet); raise its error when it cannot be."""
        if self.lib.ia_objc_load() != 0:
            raise self.load_error or Error(ErrorKind.SYMBOL_NOT_FOUND, f"{self.backend} {self.library}: the "
                                           "Objective-C runtime lacks a function the binding needs "
                                           "(objc_msg_lookup or objc_msgSend, sel_registerName, objc_getClass, "
                                           "class_respondsToSelector, class_getName, class_getSuperclass)",
                                           backend=self.backend)

    # ------------------------------------------------------------ handles
    def register(self, *classes: type[Object]) -> None:
        """The generated Python classes, by Objective-C class name (what :meth:`wrap` returns)."""
        for c in classes:
            self.py_classes[c.__name__] = c

    def install_fast(self, classes: tuple[type[Object], ...]) -> dict[str, Any]:
        """API mode: replace the checked methods that take no argument and return a number by their compiled
        twins (``ia_py_<index>``, ia_objc.h); returns the Python ones replaced (``Class.name`` -> function)."""
        lib = self.lib
        if self.mode != API or lib.ia_objc_install_fast() != 0:
            return {}
        fast = sys.modules.get(self.package + "._objc_fast")
        if fast is None:
            return {}
        before = {f"{c.__name__}.{name}": f for c in classes for name, f in vars(c).items() if callable(f)}
        fast.install(classes, Object, Object.__dict__["_id"], type(self.ffi.NULL), self.fail)
        return {key: f for key, f in before.items()
                if vars(classes[[c.__name__ for c in classes].index(key.split(".")[0])])[key.split(".")[1]] is not f}

    def wrap(self, handle: Any) -> Object:
        """A handle owning ``handle``'s reference (the caller's +1), of the nearest bound class."""
        lib = self.lib
        cls_ptr = lib.ia_objc_class_of(handle)
        key = int(self.ffi.cast("uintptr_t", cls_ptr))
        py = self._by_class.get(key)
        if py is None:
            py = self.Object
            c = cls_ptr
            while c != self.NULL:
                name = self.ffi.string(lib.ia_objc_class_name_of(c)).decode("utf-8", "replace")
                if name in self.py_classes:
                    py = self.py_classes[name]
                    break
                c = lib.ia_objc_superclass(c)
            self._by_class[key] = py
        obj = object.__new__(py)
        obj._id = handle
        return obj

    def wrap_as(self, handle: Any, cls: type[Object]) -> Any:
        """A ``cls`` handle owning ``handle``'s reference (alloc/new class methods, init: of the receiver's class,
        whatever private class the object has)."""
        obj = object.__new__(cls)
        obj._id = handle
        return obj

    def release(self, handle: Any) -> None:
        self.lib.ia_objc_release(handle)

    def class_name(self, handle: Any) -> str:
        p = self.lib.ia_objc_class_name_of(self.lib.ia_objc_class_of(handle))
        return "?" if p == self.NULL else self.ffi.string(p).decode("utf-8", "replace")

    def retain_count(self, obj: Object) -> int:
        """``[obj retainCount]`` (tests: no leak, no over-release)."""
        return int(self.lib.ia_objc_retain_count(obj._id))

    # ------------------------------------------------------------ arguments
    def obj_arg(self, value: Any, index: int, position: int) -> Any:
        """An object argument of a checked call: a live handle (never nil: a nil argument is an Objective-C
        exception in most methods, which would end the process)."""
        if isinstance(value, Object) and value._id != self.NULL:
            return value._id
        what = "a closed handle" if isinstance(value, Object) else type(value).__name__
        raise fail(ErrorKind.INVALID_VALUE, self.describe(index), f"argument {position + 1} must be an open "
                   f"Objective-C object handle, not {what}", self.backend)

    def str_arg(self, value: Any, index: int, position: int) -> bytes:
        """A ``const char *`` argument: str (UTF-8) or bytes, without NUL."""
        if isinstance(value, str):
            try:
                data = value.encode("utf-8")
            except UnicodeEncodeError as exc:  # a lone surrogate
                raise fail(ErrorKind.INVALID_VALUE, self.describe(index), f"argument {position + 1} is not "
                           f"UTF-8 encodable ({exc.reason})", self.backend) from None
        elif isinstance(value, (bytes, bytearray)):
            data = bytes(value)
        else:
            raise fail(ErrorKind.INVALID_VALUE, self.describe(index), f"argument {position + 1} must be str or "
                       f"bytes, not {type(value).__name__}", self.backend)
        if b"\0" in data:
            raise fail(ErrorKind.INVALID_VALUE, self.describe(index), f"argument {position + 1} contains NUL",
                       self.backend)
        return data

    def bad_value(self, index: int, exc: BaseException) -> Error:
        return fail(ErrorKind.INVALID_VALUE, self.describe(index), str(exc), self.backend)

    def string(self, p: Any) -> str | None:
        return None if p == self.NULL else self.ffi.string(p).decode("utf-8", "replace")

    # ------------------------------------------------------------ failures
    def describe(self, index: int) -> str:
        """``-[NSString length]`` for method ``index``; the C function's name for ``~index``."""
        if index < 0:
            return self.functions[~index][0]
        row = self.methods[index]
        return f"{'+' if row[2] else '-'}[{row[0]} {row[1]}]"

    def fail(self, index: int, receiver: Object | type[Object] | None, why: int) -> Error:
        """The Error of a checked call (method ``index``, C function ``~index``) that ``ia_objc_failed()`` says
        was refused."""
        name = self.describe(index)
        if why == OPEN:
            err = self.load_error
            if err is None:
                try:
                    self.ready()
                except Error as e:
                    err = e
            return err or fail(ErrorKind.LIBRARY_NOT_FOUND, name, "the runtime is not loaded", self.backend)
        if why == EXCEPTION:
            return self.exception(name)
        if index < 0:  # a C function: a missing symbol
            return fail(ErrorKind.SYMBOL_NOT_FOUND, name, "no such function in the loaded libraries "
                        f"({', '.join(self.paths)}; looked up with dlsym(RTLD_DEFAULT))", self.backend)
        row = self.methods[index]
        if why == NIL:
            return fail(ErrorKind.INVALID_HANDLE, name, "the receiver is nil (a closed handle?)", self.backend)
        if isinstance(receiver, type):  # a class method, sent to this class
            name = f"+[{receiver.__name__} {row[1]}]"
        if why == CLASS:
            cname = receiver.__name__ if isinstance(receiver, type) else row[0]
            return fail(ErrorKind.SYMBOL_NOT_FOUND, name, f"class {cname} is not in the loaded frameworks "
                        f"({', '.join(self.paths)})", self.backend)
        if isinstance(receiver, type):
            cls = f"{receiver.__name__} (its metaclass)"
        else:
            cls = self.class_name(receiver._id) if receiver is not None and receiver._id != self.NULL else row[0]
        return fail(ErrorKind.SYMBOL_NOT_FOUND, name, f"class {cls} does not respond to selector '{row[1]}'",
                    self.backend)

    def exception(self, name: str) -> ObjCExceptionError:
        """The Objective-C exception the last refused call caught (``ia_objc_caught()``, +1) as an Error."""
        lib = self.lib
        exc = lib.ia_objc_caught()
        ename, reason = "?", ""
        if exc != self.NULL:
            pool = lib.ia_objc_push()
            try:
                ename = self.string(lib.ia_objc_send_utf8(exc, b"name")) or "?"
                reason = self.string(lib.ia_objc_send_utf8(exc, b"reason")) or ""
            finally:
                lib.ia_objc_pop(pool)
                lib.ia_objc_release(exc)
        kind = EXCEPTION_KINDS.get(ename, ErrorKind.UNKNOWN)
        return ObjCExceptionError(kind, f"{name} raised {ename}: {reason}", name=ename, reason=reason, function=name,
                                  backend=self.backend)

    def nserror(self, handle: Any, index: int) -> NSErrorError:
        """An ``NSError *`` output (retained by the call) as an Error: ``.domain``, ``.code``,
        ``.localized_description``; the kind from the spec's ``errors:`` (domain and code, then domain)."""
        lib = self.lib
        pool = lib.ia_objc_push()
        try:
            domain = self.string(lib.ia_objc_send_utf8(handle, b"domain")) or "?"
            code = int(lib.ia_objc_send_long(handle, b"code"))
            desc = self.string(lib.ia_objc_send_utf8(handle, b"localizedDescription")) or ""
        finally:
            lib.ia_objc_pop(pool)
            lib.ia_objc_release(handle)
        kind = self.errors.get((domain, code)) or self.errors.get((domain, None)) or self.error_default
        name = self.describe(index)
        return NSErrorError(kind, f"{name}: {domain} {code}: {desc}", domain=domain, localized_description=desc,
                            code=code, function=name, backend=self.backend)

    @contextlib.contextmanager
    def autorelease_pool(self) -> Iterator[None]:
        """An autorelease pool around unchecked calls that return autoreleased objects."""
        self.ready()
        pool = self.lib.ia_objc_push()
        try:
            yield
        finally:
            self.lib.ia_objc_pop(pool)

    def objc_class(self, name: str) -> Any:
        """The ``Class`` named ``name`` (NULL when no loaded framework has it): the receiver of an unchecked
        class method."""
        self.ready()
        return self.lib.ia_objc_lookup_class(name.encode())

    def checked(self, index: int) -> Callable[..., Any]:
        return getattr(self.lib, f"ia_checked_{index}")  # type: ignore[no-any-return]

    def checked_function(self, index: int) -> Callable[..., Any]:
        """The checked trampoline of C function ``index`` (``ia_fn_checked_<index>``)."""
        return getattr(self.lib, f"ia_fn_checked_{index}")  # type: ignore[no-any-return]


class _AbiLib:
    """ABI mode's stand-in for the compiled module's ``lib``: the same functions (the unchecked ``<Class>_<name>``,
    ``ia_checked_<index>``, ``ia_objc_*``) written in Python over the runtime's own functions."""

    def __init__(self, binding: ObjcBinding, ffi: Any) -> None:
        self._b = binding
        self._ffi = ffi
        self._ready = False
        self._failure = threading.local()
        self._rt: Any = None
        self._apple = False
        self._sels: list[Any] = []
        self._classes: list[Any] = []
        self._ok: list[Any] = []
        self._sel_cache: dict[bytes, Any] = {}
        self._pool_class: Any = None
        self._push: Any = None
        self._pop: Any = None

    # ------------------------------------------------------------ set-up (ia_objc_setup)
    def ia_objc_load(self) -> int:
        if self._ready:
            return 0
        if not self._b.open():
            return 1
        rt = self._b.handles[0]
        ffi = self._ffi
        # a symbol the library lacks: ffi.error (a pre-parsed module's FFI) or AttributeError (cffi.FFI)
        missing = (AttributeError, getattr(ffi, "error", AttributeError))
        try:
            self._lookup = rt.objc_msg_lookup
            self._apple = False
        except missing:
            try:
                self._msgSend = rt.objc_msgSend
                self._msgSend_stret = _optional(rt, "objc_msgSend_stret")
                self._msgSend_fpret = _optional(rt, "objc_msgSend_fpret")
                self._object_getClass = rt.object_getClass
                self._apple = True
            except missing:
                return 2
        try:
            self._sel = rt.sel_registerName
            self._getClass = rt.objc_getClass
            self._responds = rt.class_respondsToSelector
            self._getName = rt.class_getName
            self._super = rt.class_getSuperclass
        except missing:
            return 2
        try:
            self._push, self._pop = rt.objc_autoreleasePoolPush, rt.objc_autoreleasePoolPop
        except missing:
            self._push = self._pop = None
            self._pool_class = self._getClass(b"NSAutoreleasePool")
        self._rt = rt
        self._sels = [self._sel(row[1].encode()) for row in self._b.methods]
        self._classes = [self._getClass(name.encode()) for name in self._b.classes]
        self._ok = [ffi.NULL] * len(self._b.methods)
        self._types = [ffi.typeof(f"ia_send_{i}") for i in range(len(self._b.methods))]
        self._fns = [self._function(i, row[0]) for i, row in enumerate(self._b.functions)]
        self._ready = True
        return 0

    def _function(self, index: int, name: str) -> Any:
        """C function ``index`` as ``ia_fn_<index>`` (its prototype), found as ia_objc_setup() finds it: in the
        global namespace (dlopen(NULL): the runtime and frameworks are open RTLD_GLOBAL); None when missing."""
        import ctypes

        try:
            address = ctypes.cast(getattr(ctypes.CDLL(None), name), ctypes.c_void_p).value
        except AttributeError:
            return None
        return self._ffi.cast(f"ia_fn_{index}", address) if address else None

    def _selector(self, name: bytes) -> Any:
        s = self._sel_cache.get(name)
        if s is None:
            s = self._sel_cache[name] = self._sel(name)
        return s

    def _class_of(self, obj: Any) -> Any:
        if self._apple:
            return self._object_getClass(obj)
        return self._ffi.cast("Class *", obj)[0]  # the GNU runtime: the isa is the object's first word

    def _imp(self, obj: Any, sel: Any, index: int = -1) -> Any:
        if not self._apple:
            return self._lookup(self._ffi.cast("id", obj), sel)
        row = self._b.methods[index] if index >= 0 else None
        machine = platform.machine().lower()
        if row is not None and row[3] == "struct" and machine in ("x86_64", "amd64") and self._msgSend_stret:
            if self._ffi.sizeof(self._types[index].result) > 16:
                return self._msgSend_stret
        if row is not None and row[9] == "long double" and machine in ("x86_64", "amd64") and self._msgSend_fpret:
            return self._msgSend_fpret
        return self._msgSend

    def _send(self, index: int, obj: Any, *args: Any) -> Any:
        sel = self._sels[index]
        return self._ffi.cast(self._types[index], self._imp(obj, sel, index))(obj, sel, *args)

    def _send0(self, obj: Any, name: bytes, ctype: str = "id(*)(id, SEL)") -> Any:
        sel = self._selector(name)
        return self._ffi.cast(ctype, self._imp(obj, sel))(obj, sel)

    def _zero(self, index: int) -> Any:
        result = self._types[index].result
        if result.kind == "void":
            return None
        return self._ffi.new(self._ffi.getctype(result, "[1]"))[0]

    def _pool_push(self) -> Any:
        if self._push is not None:
            return self._push()
        if self._pool_class == self._ffi.NULL:
            return self._ffi.NULL
        return self._send0(self._send0(self._ffi.cast("id", self._pool_class), b"alloc"), b"init")

    def _pool_pop(self, pool: Any) -> None:
        if self._pop is not None:
            self._pop(pool)
        elif pool != self._ffi.NULL:
            self._send0(pool, b"release", "void(*)(id, SEL)")

    # ------------------------------------------------------------ the compiled module's functions
    def ia_objc_failed(self) -> int:
        f: int = getattr(self._failure, "why", 0)
        self._failure.why = 0
        return f

    def ia_objc_caught(self) -> Any:
        return self._ffi.NULL  # ABI mode catches nothing: an exception ends the process (no C frame to catch in)

    def ia_objc_retain(self, obj: Any) -> Any:
        if obj == self._ffi.NULL or self.ia_objc_load():
            return obj
        return self._send0(obj, b"retain")

    def ia_objc_release(self, obj: Any) -> None:
        if obj != self._ffi.NULL and self._ready:
            self._send0(obj, b"release", "void(*)(id, SEL)")

    def ia_objc_retain_count(self, obj: Any) -> int:
        if obj == self._ffi.NULL or self.ia_objc_load():
            return 0
        return int(self._send0(obj, b"retainCount", "size_t(*)(id, SEL)"))

    def ia_objc_class_of(self, obj: Any) -> Any:
        return self._ffi.NULL if obj == self._ffi.NULL or self.ia_objc_load() else self._class_of(obj)

    def ia_objc_superclass(self, c: Any) -> Any:
        return self._ffi.NULL if c == self._ffi.NULL or self.ia_objc_load() else self._super(c)

    def ia_objc_class_name_of(self, c: Any) -> Any:
        return self._ffi.NULL if c == self._ffi.NULL or self.ia_objc_load() else self._getName(c)

    def ia_objc_lookup_class(self, name: bytes) -> Any:
        return self._ffi.NULL if self.ia_objc_load() else self._getClass(name)

    def ia_objc_send_utf8(self, obj: Any, selector: bytes) -> Any:
        if obj == self._ffi.NULL or self.ia_objc_load():
            return self._ffi.NULL
        if not self._responds(self._class_of(obj), self._selector(selector)):
            return self._ffi.NULL
        s = self._send0(obj, selector)
        if s == self._ffi.NULL:
            return self._ffi.NULL
        return self._send0(s, b"UTF8String", "const char *(*)(id, SEL)")

    def ia_objc_send_long(self, obj: Any, selector: bytes) -> int:
        if obj == self._ffi.NULL or self.ia_objc_load():
            return 0
        if not self._responds(self._class_of(obj), self._selector(selector)):
            return 0
        return int(self._send0(obj, selector, "long(*)(id, SEL)"))

    def ia_objc_push(self) -> Any:
        return self._ffi.NULL if self.ia_objc_load() else self._pool_push()

    def ia_objc_pop(self, pool: Any) -> None:
        if self._ready:
            self._pool_pop(pool)

    def __getattr__(self, name: str) -> Any:
        """``ia_checked_<index>`` and the unchecked ``<Class>_<name>``, made on first use."""
        b = self._b
        if name.startswith("ia_checked_") and name[11:].isdigit() and int(name[11:]) < len(b.methods):
            fn = self._checked(int(name[11:]))
        elif name.startswith("ia_fn_checked_") and name[14:].isdigit() and int(name[14:]) < len(b.functions):
            fn = self._checked_function(int(name[14:]))
        elif name.startswith("ia_fn_") and any(row[0] == name[6:] for row in b.functions):
            fn = self._unchecked_function(next(i for i, row in enumerate(b.functions) if row[0] == name[6:]))
        else:
            index = next((i for i, row in enumerate(b.methods) if f"{row[0]}_{_py_name(row[1])}" == name), None)
            if index is None:
                raise AttributeError(name)
            fn = self._unchecked(index)
        setattr(self, name, fn)
        return fn

    def _unchecked(self, index: int) -> Callable[..., Any]:
        def call(receiver: Any, *args: Any) -> Any:
            if self.ia_objc_load() or receiver == self._ffi.NULL:
                return self._zero(index)
            return self._send(index, receiver, *args)

        call.__name__ = f"{self._b.methods[index][0]}_{_py_name(self._b.methods[index][1])}"
        return call

    def _checked(self, index: int) -> Callable[..., Any]:
        row = self._b.methods[index]
        class_method, kind, ownership, error_arg, autoreleases = row[2], row[3], row[5], row[7], row[8]
        ffi = self._ffi

        def refuse(why: int) -> Any:
            self._failure.why = why
            return self._zero(index)

        def call(*args: Any) -> Any:
            if self.ia_objc_load():
                return refuse(OPEN)
            if class_method:
                k, args = args[0], args[1:]
                if not 0 <= k < len(self._classes) or self._classes[k] == ffi.NULL:
                    return refuse(CLASS)
                receiver = self._classes[k]
            else:
                receiver, args = args[0], args[1:]
                if not isinstance(receiver, ffi.CData) or receiver == ffi.NULL:
                    return refuse(NIL)  # (a handle whose _id is not a pointer: never dereferenced)
            cls = self._class_of(ffi.cast("id", receiver))
            if cls != self._ok[index]:
                if not self._responds(cls, self._sels[index]):
                    return refuse(SELECTOR)
                self._ok[index] = cls
            pool = self._pool_push() if autoreleases else None
            try:
                r = self._send(index, receiver, *args)
                if kind == "object" and ownership == "+0" and r != ffi.NULL:
                    r = self._send0(r, b"retain")
                if error_arg >= 0:
                    err = args[error_arg]
                    if err != ffi.NULL and err[0] != ffi.NULL:
                        self._send0(err[0], b"retain")
            finally:
                if autoreleases:
                    self._pool_pop(pool)
            return r

        return call


    def _function_zero(self, index: int) -> Any:
        result = self._ffi.typeof(f"ia_fn_{index}").result
        return None if result.kind == "void" else self._ffi.new(self._ffi.getctype(result, "[1]"))[0]

    def _unchecked_function(self, index: int) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            if self.ia_objc_load() or self._fns[index] is None:
                return self._function_zero(index)
            return self._fns[index](*args)

        call.__name__ = self._b.functions[index][0]
        return call

    def _checked_function(self, index: int) -> Callable[..., Any]:
        _, kind, _, ownership, autoreleases = self._b.functions[index]
        ffi = self._ffi

        def call(*args: Any) -> Any:
            if self.ia_objc_load():
                self._failure.why = OPEN
                return self._function_zero(index)
            fn = self._fns[index]
            if fn is None:
                self._failure.why = FUNCTION
                return self._function_zero(index)
            pool = self._pool_push() if autoreleases else None
            try:
                r = fn(*args)
                if kind == "object" and ownership == "+0" and r != ffi.NULL:
                    r = self._send0(r, b"retain")
            finally:
                if autoreleases:
                    self._pool_pop(pool)
            return r

        return call


def _py_name(selector: str) -> str:
    import keyword

    name = selector.replace(":", "_")
    return name + "_" if keyword.iskeyword(name) or keyword.issoftkeyword(name) else name


def _optional(lib: Any, name: str) -> Any:
    try:
        return getattr(lib, name)
    except Exception:  # AttributeError, or cffi's ffi.error for a symbol the library lacks
        return None
