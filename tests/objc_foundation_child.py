"""Checks of the generated Foundation binding (specs/foundation/foundation.yaml) against the real GNU Objective-C
runtime and GNUstep Foundation, run in a child process (``objc_foundation_child.py MODE``) so that the ABI-mode
run imports a copy of the package without its compiled module, and so that a crash fails the test rather than
ending pytest.  Prints one JSON object: check name -> "ok" or the traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from typing import Any, Callable

import copy
import pickle

from ironaccelerator import Error, ErrorKind
from ironaccelerator_runtime.objc import NSErrorError, ObjCExceptionError
from ironaccelerator.backends.foundation import foundation as F

CHECKS: dict[str, Callable[[], None]] = {}


def check(fn: Callable[[], None]) -> Callable[[], None]:
    CHECKS[fn.__name__] = fn
    return fn


def error(call: Callable[[], object]) -> Error:
    try:
        call()
    except Error as e:
        return e
    raise AssertionError("no ironaccelerator.Error")


def s(text: Any) -> Any:
    return F.NSString.stringWithUTF8String_(text)


@check
def mode() -> None:
    assert F.BINDING_MODE == sys.argv[1], (F.BINDING_MODE, sys.argv[1])


@check
def utf8_round_trips() -> None:
    for text in ("", "plain ascii", "héllo wörld", "日本語のテキスト", "emoji 🎉 and 𝄞", "Ωμέγα\u00a0ß"):
        ns = s(text)
        assert isinstance(ns, F.NSString), type(ns)
        assert ns.UTF8String() == text, (ns.UTF8String(), text)
        assert ns.length() == len(text.encode("utf-16-le")) // 2  # NSString counts UTF-16 units
    ns = s("añb")
    assert ns.characterAtIndex_(1) == ord("ñ")
    raw = "dåta".encode()
    made = F.NSString.alloc().initWithBytes_length_encoding_(F.ffi.from_buffer(raw), len(raw), F.NSUTF8StringEncoding)
    assert made is not None and made.UTF8String() == "dåta"
    joined = s("ab").stringByAppendingString_(s("çd"))
    assert joined.UTF8String() == "abçd" and joined.isEqualToString_(s("abçd")) is True
    assert s("x").isEqualToString_(s("y")) is False


@check
def counts() -> None:
    a = F.NSMutableArray.array()
    assert isinstance(a, F.NSMutableArray) and a.count() == 0
    items = [s(f"item {i} ü") for i in range(100)]
    for it in items:
        a.addObject_(it)
    assert a.count() == 100
    assert a.objectAtIndex_(42) == items[42]  # the same object: handles compare by id
    assert a.objectAtIndex_(99).UTF8String() == "item 99 ü"
    a.removeAllObjects()
    assert a.count() == 0


@check
def nsrange_by_value() -> None:
    hay = s("the quick brown föx")
    r = hay.rangeOfString_(s("brown"))
    assert (r.location, r.length) == (10, 5), (r.location, r.length)
    r = hay.rangeOfString_(s("föx"))
    assert (r.location, r.length) == (16, 3)
    missing = hay.rangeOfString_(s("cat"))
    assert missing.length == 0 and missing.location > 1 << 31  # NSNotFound
    sub = F.ffi.new("NSRange *", {"location": 4, "length": 5})[0]
    assert hay.substringWithRange_(sub).UTF8String() == "quick"


@check
def nserror_out() -> None:
    fm = F.NSFileManager.defaultManager()
    e = error(lambda: fm.contentsOfDirectoryAtPath_error_(s("/nonexistent/ia-objc-test")))
    assert isinstance(e, NSErrorError), type(e)
    assert e.kind == ErrorKind.INVALID_VALUE, e
    assert e.domain == "NSPOSIXErrorDomain" and e.code == 2, (e.domain, e.code)
    assert "No such file" in e.localized_description, e
    assert "contentsOfDirectoryAtPath:error:" in str(e) and e.backend == "METAL"
    for twin in (pickle.loads(pickle.dumps(e)), copy.copy(e)):
        assert isinstance(twin, NSErrorError) and (twin.domain, twin.code, str(twin)) == (e.domain, e.code, str(e))
    listing = fm.contentsOfDirectoryAtPath_error_(s("/"))
    assert listing is not None and F.NSMutableArray.count(listing) > 0 if hasattr(listing, "count") else True
    assert fm.fileExistsAtPath_(s("/")) is True and fm.fileExistsAtPath_(s("/nonexistent/x")) is False


@check
def class_and_instance_methods() -> None:
    o = F.NSObject.new()
    assert type(o) is F.NSObject and F.retain_count(o) == 1
    cls = o.class_()
    assert cls == F.objc_class("NSObject")
    assert o.isKindOfClass_(cls) is True
    assert s("x").isKindOfClass_(F.objc_class("NSString")) is True
    assert o.isKindOfClass_(F.objc_class("NSString")) is False
    assert isinstance(F.NSString.alloc(), F.NSString)  # NSObject's +alloc sent to NSString
    assert isinstance(F.NSMutableArray.new(), F.NSMutableArray)
    assert F.NSObject.alloc().init() is not None
    desc = o.description()
    assert isinstance(desc, F.NSString) and "NSObject" in (desc.UTF8String() or "")


@check
def retain_counts_balance() -> None:
    target = s("kept across 10,000 rounds")
    a = F.NSMutableArray.array()
    a.addObject_(target)
    before = F.retain_count(target)
    for _ in range(10_000):
        got = a.objectAtIndex_(0)  # +0: retained while the handle lives, released when dropped
        assert got == target
        del got
        c = target.copy()  # +1 (an immutable string's copy is itself, retained)
        c.close()
        r = target.retain()  # +1 by its ownership: override
        del r
        d = target.description()  # +0, autoreleased inside the call's pool
        del d
    assert F.retain_count(target) == before, (F.retain_count(target), before)
    o = F.NSObject.new()
    for _ in range(10_000):
        o.retain()
        F.unchecked.NSObject_retain(o.handle)
        F.unchecked.NSObject_release(o.handle)
    assert F.retain_count(o) == 1


@check
def init_consumes_receiver() -> None:
    allocated = F.NSObject.alloc()
    inited = allocated.init()
    assert inited is not None and F.retain_count(inited) == 1
    assert allocated.handle == F.ffi.NULL  # its reference went to init's result
    assert error(lambda: allocated.init()).kind == ErrorKind.INVALID_HANDLE


@check
def nil_receivers() -> None:
    NULL = F.ffi.NULL
    assert F.unchecked.NSString_length(NULL) == 0
    assert F.unchecked.NSString_UTF8String(NULL) == NULL
    r = F.unchecked.NSString_rangeOfString_(NULL, NULL)
    assert (r.location, r.length) == (0, 0)
    assert F.unchecked.NSMutableArray_objectAtIndex_(NULL, 3) == NULL
    ns = s("closing")
    ns.close()
    for call in (ns.length, ns.UTF8String, lambda: ns.rangeOfString_(s("x")), ns.copy):
        e = error(call)
        assert e.kind == ErrorKind.INVALID_HANDLE, e
    ns.close()  # twice: nothing


@check
def unknown_selector_refused() -> None:
    text = s("not an array")
    e = error(lambda: F.NSMutableArray.count(text))
    assert e.kind == ErrorKind.SYMBOL_NOT_FOUND and "count" in str(e), e
    assert "does not respond" in str(e) and "String" in str(e), e  # names the receiver's class
    e = error(lambda: F.NSError.domain(text))
    assert e.kind == ErrorKind.SYMBOL_NOT_FOUND
    assert text.length() == 12  # the process and the object are fine


@check
def bad_python_values() -> None:
    cases: list[Callable[[], object]] = [
        lambda: s("nul\0inside"), lambda: s(42), lambda: s("\ud800"), lambda: s(None),
        lambda: F.NSMutableArray.array().objectAtIndex_(-1), lambda: F.NSMutableArray.array().objectAtIndex_("0"),
        lambda: F.NSMutableArray.array().addObject_(None), lambda: F.NSMutableArray.array().addObject_("str"),
        lambda: s("a").rangeOfString_(object()),
    ]
    closed = s("closed")
    closed.close()
    cases.append(lambda: s("a").rangeOfString_(closed))
    for call in cases:
        assert error(call).kind == ErrorKind.INVALID_VALUE


@check
def nullable_arguments() -> None:
    """nullable: [userInfo] lets that argument be None (nil); an argument not declared nullable still refuses it."""
    err = F.NSError.errorWithDomain_code_userInfo_(s("IADomain"), 7, None)
    assert err.code() == 7 and err.domain().UTF8String() == "IADomain" and F.retain_count(err) == 1
    e = error(lambda: F.NSError.errorWithDomain_code_userInfo_(None, 7, None))
    assert e.kind == ErrorKind.INVALID_VALUE and "argument 1" in str(e), e


@check
def compiled_methods() -> None:
    # API mode: the checked methods without arguments that return a number are compiled method descriptors
    kind = type(F.NSString.__dict__["length"]).__name__
    assert kind == ("method_descriptor" if F.BINDING_MODE == "api" else "function"), kind
    assert sorted(F._python) == (["NSError.code", "NSMutableArray.count", "NSObject.hash", "NSObject.retainCount",
                                  "NSString.length"] if F.BINDING_MODE == "api" else [])
    ns = s("compiled ✓")
    assert ns.length() == 10 and F.NSString.length(ns) == 10
    blank = object.__new__(F.NSString)  # no _id at all: nil in C; the Python wrapper cannot read it
    try:
        blank.length()
    except Error as refused:
        assert refused.kind == ErrorKind.INVALID_HANDLE and F.BINDING_MODE == "api"
    except AttributeError:
        assert F.BINDING_MODE == "abi"
    odd = F.NSString.__new__(F.NSString)
    odd._id = 12345  # not a cdata: nil, never dereferenced
    assert error(odd.length).kind == ErrorKind.INVALID_HANDLE
    odd._id = F.ffi.NULL
    assert error(odd.length).kind == ErrorKind.INVALID_HANDLE
    e = error(lambda: F.NSMutableArray.count(ns))  # another class's method: refused, not a TypeError
    assert e.kind == ErrorKind.SYMBOL_NOT_FOUND
    try:
        F.NSString.length(object())  # type: ignore[arg-type]  # not a handle at all: the descriptor's own TypeError (API mode)
    except (TypeError, AttributeError, Error):
        pass
    else:
        raise AssertionError("a non-handle was accepted")


@check
def exceptions_become_errors() -> None:
    """An Objective-C exception inside a checked call: API mode catches it (ia_objc.h) and raises an Error with the
    exception's name and reason, 1,000 times over, leaving the objects usable; ABI mode cannot catch it (no C frame
    to catch in), and the process ends with the runtime's message, as documented: checked in a child."""
    if F.BINDING_MODE == "abi":
        code = ("from ironaccelerator.backends.foundation import foundation as F\n"
                "F.NSMutableArray.array().objectAtIndex_(5)\nprint('not ended')")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, timeout=120)
        assert r.returncode != 0 and "not ended" not in r.stdout and "NSRangeException" in r.stderr, r
        return
    arr = F.NSMutableArray.array()
    arr.addObject_(s("one"))
    text = s("ab")
    for i in range(1000):
        e = error(lambda: arr.objectAtIndex_(5 + i))
        assert isinstance(e, ObjCExceptionError) and e.kind == ErrorKind.INVALID_VALUE, e
        assert e.name == "NSRangeException" and str(5 + i) in e.reason, (e.name, e.reason)
        assert "-[NSMutableArray objectAtIndex:] raised NSRangeException" in str(e), e
        with F.autorelease_pool():  # a method of numbers only runs without a pool: the exception is the caller's
            e = error(lambda: text.characterAtIndex_(7))
        assert isinstance(e, ObjCExceptionError) and e.name == "NSRangeException", e
    assert isinstance(e, ObjCExceptionError) and pickle.loads(pickle.dumps(e)).reason == e.reason
    assert arr.count() == 1 and text.length() == 2 and F.retain_count(arr) == 1  # usable, nothing over-retained
    assert arr.objectAtIndex_(0).UTF8String() == "one"


@check
def pool_and_unchecked() -> None:
    with F.autorelease_pool():
        raw = F.unchecked.NSString_stringWithUTF8String_(F.objc_class("NSString"), "ünchecked".encode())
        assert F.ffi.string(F.unchecked.NSString_UTF8String(raw)).decode() == "ünchecked"
        assert F.unchecked.NSString_length(raw) == 9


@check
def c_functions() -> None:
    """functions: of the spec: GNUstep's own C functions, found with dlsym(RTLD_DEFAULT), +0 results retained."""
    import os
    import tempfile

    for _ in range(1000):
        tmp = F.NSTemporaryDirectory()  # +0: retained for the handle, released with it (no pool warning)
        assert isinstance(tmp, F.NSString) and F.retain_count(tmp) >= 1
        tmp.close()
    tmp = F.NSTemporaryDirectory()
    assert os.path.isdir(tmp.UTF8String()), tmp.UTF8String()  # GNUstep's own choice (GNUstepSecure<uid> under
    assert tmp.UTF8String().startswith(tempfile.gettempdir().rstrip("/"))  # the system temporary directory)
    name = F.NSStringFromClass(F.objc_class("NSMutableArray"))
    assert isinstance(name, F.NSString) and name.UTF8String() == "NSMutableArray"
    counted = F.retain_count(name)
    del name
    assert F.NSStringFromClass(F.ffi.NULL) is None  # nil in, nil out: None
    cls = F.NSClassFromString(s("NSMutableArray"))  # a Class result: the raw pointer
    assert cls == F.objc_class("NSMutableArray")
    assert F.NSClassFromString(s("NoSuchClassAnywhere")) == F.ffi.NULL
    assert error(lambda: F.NSClassFromString(None)).kind == ErrorKind.INVALID_VALUE
    assert error(lambda: F.NSStringFromClass("NSString")).kind == ErrorKind.INVALID_VALUE
    assert counted >= 1
    with F.autorelease_pool():  # unchecked: the raw autoreleased id
        raw = F.unchecked.NSStringFromClass(F.objc_class("NSString"))
        assert F.ffi.string(F.unchecked.NSString_UTF8String(raw)).decode() == "NSString"
    assert "NSTemporaryDirectory" in F.__all__ and F.NSTemporaryDirectory.__doc__ and \
        "+0" in F.NSTemporaryDirectory.__doc__


if __name__ == "__main__":
    out = {}
    for name, fn in CHECKS.items():
        try:
            fn()
            out[name] = "ok"
        except BaseException:
            out[name] = traceback.format_exc()
    print(json.dumps(out))
