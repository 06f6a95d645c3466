"""The C++-wrappers front-end (generator/frontend/objc_cpp.py) with the metal-cpp data of specs/metal/metal.yaml's
``prototypes:``, on the real headers `make` fetches (pymetal-cpp 0.1.5's thirdparty/metal-cpp): Metal's minimal
compute surface comes out with the right prototypes in C terms."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from ironaccelerator_gen.diagnostics import UserError
from ironaccelerator_gen import prototypes as protos
from ironaccelerator_gen.frontend import objc_cpp as mc
from ironaccelerator_gen.ir import Location
from ironaccelerator_gen.spec import LibrarySpec, load_library

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "specs" / "metal" / "metal.yaml"
WHERE = Location(file="metal.yaml", line=7, col=9)

_spec = load_library(SPEC, "specs/metal/metal.yaml")
assert _spec.objc is not None and _spec.objc.prototypes is not None
SOURCE = _spec.objc.prototypes  # metal-cpp, as the Metal spec describes it

if mc.find_root(SOURCE) is None:
    pytest.skip(f"metal-cpp is not fetched ({SOURCE.cache}: `make metal-cpp` downloads it; offline it cannot)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def model() -> mc.Model:
    return mc.parse(SOURCE)


def proto(model: mc.Model, cls: str, key: str) -> tuple[bool, str, tuple[str, ...]]:
    m = model.lookup(cls, key)
    assert m is not None, f"{cls} {key} not found"
    return m.class_method, m.returns, m.args


# (class, selector) -> (class method?, returns, args): the minimal compute surface
SURFACE = {
    ("MTLDevice", "name"): (False, "id", ()),
    ("MTLDevice", "registryID"): (False, "uint64_t", ()),
    ("MTLDevice", "recommendedMaxWorkingSetSize"): (False, "uint64_t", ()),
    ("MTLDevice", "hasUnifiedMemory"): (False, "BOOL", ()),
    ("MTLDevice", "maxThreadsPerThreadgroup"): (False, "MTLSize", ()),
    ("MTLDevice", "maxBufferLength"): (False, "NSUInteger", ()),
    ("MTLDevice", "supportsFamily:"): (False, "BOOL", ("MTLGPUFamily",)),
    ("MTLDevice", "newCommandQueue"): (False, "id", ()),
    ("MTLDevice", "newBufferWithLength:options:"): (False, "id", ("NSUInteger", "MTLResourceOptions")),
    ("MTLDevice", "newBufferWithBytesNoCopy:length:options:deallocator:"):
        (False, "id", ("const void *", "NSUInteger", "MTLResourceOptions", "id")),
    ("MTLDevice", "newLibraryWithSource:options:error:"): (False, "id", ("id", "id", "NSError **")),
    ("MTLDevice", "newComputePipelineStateWithFunction:error:"): (False, "id", ("id", "NSError **")),
    ("MTLDevice", "newSharedEvent"): (False, "id", ()),
    ("MTLDevice", "newEvent"): (False, "id", ()),
    ("MTLBuffer", "contents"): (False, "void *", ()),
    ("MTLBuffer", "length"): (False, "NSUInteger", ()),
    ("MTLBuffer", "didModifyRange:"): (False, "void", ("NSRange",)),
    ("MTLBuffer", "storageMode"): (False, "MTLStorageMode", ()),  # inherited from MTLResource
    ("MTLBuffer", "setLabel:"): (False, "void", ("id",)),
    ("MTLCommandQueue", "commandBuffer"): (False, "id", ()),
    ("MTLCommandBuffer", "commit"): (False, "void", ()),
    ("MTLCommandBuffer", "waitUntilCompleted"): (False, "void", ()),
    ("MTLCommandBuffer", "status"): (False, "MTLCommandBufferStatus", ()),
    ("MTLCommandBuffer", "error"): (False, "id", ()),
    ("MTLCommandBuffer", "GPUStartTime"): (False, "CFTimeInterval", ()),
    ("MTLCommandBuffer", "GPUEndTime"): (False, "CFTimeInterval", ()),
    ("MTLCommandBuffer", "addCompletedHandler:"): (False, "void", ("id",)),  # a block: an object
    ("MTLCommandBuffer", "computeCommandEncoder"): (False, "id", ()),
    ("MTLCommandBuffer", "blitCommandEncoder"): (False, "id", ()),
    ("MTLCommandBuffer", "encodeSignalEvent:value:"): (False, "void", ("id", "uint64_t")),
    ("MTLCommandBuffer", "encodeWaitForEvent:value:"): (False, "void", ("id", "uint64_t")),
    ("MTLComputeCommandEncoder", "setComputePipelineState:"): (False, "void", ("id",)),
    ("MTLComputeCommandEncoder", "setBuffer:offset:atIndex:"): (False, "void", ("id", "NSUInteger", "NSUInteger")),
    ("MTLComputeCommandEncoder", "setBytes:length:atIndex:"):
        (False, "void", ("const void *", "NSUInteger", "NSUInteger")),
    ("MTLComputeCommandEncoder", "dispatchThreadgroups:threadsPerThreadgroup:"): (False, "void", ("MTLSize", "MTLSize")),
    ("MTLComputeCommandEncoder", "dispatchThreads:threadsPerThreadgroup:"): (False, "void", ("MTLSize", "MTLSize")),
    ("MTLComputeCommandEncoder", "setBuffers:offsets:withRange:"):
        (False, "void", ("id const *", "const NSUInteger *", "NSRange")),
    ("MTLComputeCommandEncoder", "endEncoding"): (False, "void", ()),  # inherited from MTLCommandEncoder
    ("MTLBlitCommandEncoder", "copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:"):
        (False, "void", ("id", "NSUInteger", "id", "NSUInteger", "NSUInteger")),
    ("MTLBlitCommandEncoder", "fillBuffer:range:value:"): (False, "void", ("id", "NSRange", "uint8_t")),
    ("MTLLibrary", "newFunctionWithName:"): (False, "id", ("id",)),
    ("MTLComputePipelineState", "maxTotalThreadsPerThreadgroup"): (False, "NSUInteger", ()),
    ("MTLComputePipelineState", "threadExecutionWidth"): (False, "NSUInteger", ()),
    ("MTLSharedEvent", "signaledValue"): (False, "uint64_t", ()),
    ("MTLSharedEvent", "setSignaledValue:"): (False, "void", ("uint64_t",)),
    ("MTLSharedEvent", "waitUntilSignaledValue:timeoutMS:"): (False, "BOOL", ("uint64_t", "uint64_t")),
    ("MTLCompileOptions", "+alloc"): (True, "id", ()),  # NSObject's, inherited
    ("MTLCompileOptions", "init"): (False, "id", ()),
    ("MTLCompileOptions", "setFastMathEnabled:"): (False, "void", ("BOOL",)),
    ("NSString", "+stringWithCString:encoding:"): (True, "id", ("const char *", "NSStringEncoding")),
    ("NSString", "UTF8String"): (False, "const char *", ()),
    ("NSError", "localizedDescription"): (False, "id", ()),
    ("NSError", "code"): (False, "NSInteger", ()),
    ("NSObject", "release"): (False, "void", ()),
    ("NSObject", "retain"): (False, "id", ()),
    ("NSObject", "retainCount"): (False, "NSUInteger", ()),
}


@pytest.mark.parametrize("cls,key", sorted(SURFACE))
def test_the_compute_surface(model: mc.Model, cls: str, key: str) -> None:
    assert proto(model, cls, key) == SURFACE[(cls, key)]


def test_the_method_and_its_selector_definition(model: mc.Model) -> None:
    m = model.classes["MTLDevice"].methods["newBufferWithLength:options:"]
    assert m.cxx == "MTL::Device::newBuffer(NS::UInteger, MTL::ResourceOptions)"
    assert m.location.file == "Metal/MTLDevice.hpp" and m.location.line > 1
    assert m.contract() == {"class_method": False, "returns": "id", "args": ["NSUInteger", "MTLResourceOptions"]}
    assert model.selectors["newBufferWithLength_options_"] == "newBufferWithLength:options:"
    assert model.selectors["alloc"] == "alloc"  # _NS_PRIVATE_DEF_SEL
    assert {"MTLCompileOptions", "MTLComputePipelineDescriptor", "NSString"} <= set(model.class_symbols)
    assert model.classes["MTLDevice"].cxx == "MTL::Device" and model.classes["MTLDevice"].base == "NSObject"
    assert model.classes["MTLBuffer"].base == "MTLResource"
    assert model.classes["MTLComputeCommandEncoder"].base == "MTLCommandEncoder"
    # a class method sent to _MTL_PRIVATE_CLS/_NS_PRIVATE_CLS: '+' on the class it names
    assert model.classes["NSString"].methods["+stringWithCString:encoding:"].class_method


def test_enums(model: mc.Model) -> None:
    opts = model.enums["MTLResourceOptions"]  # an options enum: `enum : ResourceOptions`, named by its typedef
    assert opts["MTLResourceStorageModeShared"] == 0 and opts["MTLResourceStorageModePrivate"] == 32
    assert opts["MTLResourceStorageModeManaged"] == 16 and opts["MTLResourceCPUCacheModeWriteCombined"] == 1
    assert opts["MTLResourceHazardTrackingModeUntracked"] == 256
    assert model.enums["MTLStorageMode"]["MTLStorageModeShared"] == 0
    assert model.enums["MTLStorageMode"]["MTLStorageModePrivate"] == 2
    assert model.enums["MTLGPUFamily"]["MTLGPUFamilyApple7"] == 1007
    assert model.enums["MTLGPUFamily"]["MTLGPUFamilyMetal3"] == 5001
    assert model.enums["MTLCommandBufferStatus"]["MTLCommandBufferStatusCompleted"] == 4
    assert model.enums["MTLCommandBufferStatus"]["MTLCommandBufferStatusError"] == 5
    assert model.enums["NSStringEncoding"]["NSUTF8StringEncoding"] == 4


def test_c_entry_points(model: mc.Model) -> None:
    f = model.functions["MTLCreateSystemDefaultDevice"]
    assert (f.returns, f.args, f.ownership) == ("id", (), "+1")
    assert model.functions["MTLCopyAllDevices"].ownership == "+1"
    assert model.functions["MTLRemoveDeviceObserver"].ownership == "+0"


def test_render_classes(model: mc.Model) -> None:
    reqs = [protos.Request(cls="MTLDevice", key=k, location=WHERE) for k in ("name", "newBufferWithLength:options:")]
    reqs += [protos.Request(cls="MTLCompileOptions", key="+alloc", location=WHERE),
             protos.Request(cls="NSObject", key="-release", location=WHERE),
             protos.Request(cls="NSString", key="UTF8String", location=WHERE, ownership="+0")]
    assert protos.render_classes(model, reqs) == {
        "MTLCompileOptions": {"base": "NSObject", "methods": {"+alloc": {"returns": "id", "ownership": "+1"}}},
        "MTLDevice": {"base": "NSObject", "methods": {
            "name": {"returns": "id"},
            "newBufferWithLength:options:": {"returns": "id", "args": ["NSUInteger", "MTLResourceOptions"],
                                             "ownership": "+1"}}},
        "NSObject": {"base": "NSObject", "methods": {"release": {"returns": "void"}}},
        "NSString": {"base": "NSObject", "methods": {"UTF8String": {"returns": "const char *", "ownership": "+0"}}},
    }


def test_a_misspelled_selector_is_located_with_a_suggestion(model: mc.Model) -> None:
    with pytest.raises(UserError) as e:
        protos.render_classes(model, [
            protos.Request(cls="MTLDevice", key="newBufferWithLenght:options:", location=WHERE),
            protos.Request(cls="MTLDevise", key="name", location=Location(file="metal.yaml", line=9, col=3)),
            protos.Request(cls="MTLDevice", key="+newCommandQueue", location=Location(file="metal.yaml", line=10, col=9)),
            protos.Request(cls="MTLDevice", key="frobnicate:", location=Location(file="metal.yaml", line=11, col=9)),
        ])
    msgs = [str(d) for d in e.value.diagnostics]
    assert msgs[0] == ("metal.yaml:7:9: MTLDevice has no method 'newBufferWithLenght:options:' in metal-cpp "
                       "367.4.2 (did you mean 'newBufferWithLength:options:'?)")
    assert msgs[1] == "metal.yaml:9:3: metal-cpp has no class 'MTLDevise' (did you mean 'MTLDevice'?)"
    assert msgs[2].startswith("metal.yaml:10:9: MTLDevice has no method '+newCommandQueue'")
    assert "did you mean 'newCommandQueue'?" in msgs[2]
    assert msgs[3].startswith("metal.yaml:11:9: ") and "no such selector in metal-cpp" in msgs[3]


def filled(model: mc.Model, text: str) -> LibrarySpec:
    return protos.fill_spec(load_library(SPEC, "specs/metal/metal.yaml", text=text), model)


def test_the_metal_spec_is_filled_from_metal_cpp(model: mc.Model) -> None:
    """specs/metal/metal.yaml lists selectors; each one listed alone is found in metal-cpp, the few it declares
    itself are ones metal-cpp lacks, and a typo in it is located with the closest selector."""
    text = SPEC.read_text(encoding="utf-8")
    spec = filled(model, text)
    assert spec.objc is not None
    methods = {(c.name.value, m.selector.value): m for c in spec.objc.classes for m in c.methods}
    assert len(methods) > 40
    size = methods[("MTLDevice", "maxThreadsPerThreadgroup")]
    assert size.returns.value == "MTLSize" and size.returns.location.file == "specs/metal/metal.yaml"
    own = {k for k, m in methods.items() if model.lookup(k[0], ("+" if m.class_method else "") + k[1]) is None}
    assert own == {("NSObject", "isKindOfClass:"), ("NSString", "stringWithUTF8String:"), ("MTLCompileOptions", "new")}
    bad = text.replace('"setBuffer:offset:atIndex:"', '"setBufer:offset:atIndex:"', 1)
    assert bad != text
    line = next(i for i, ln in enumerate(bad.splitlines(), 1) if "setBufer:" in ln)
    with pytest.raises(UserError) as e:
        filled(model, bad)
    (d,) = e.value.diagnostics
    assert d.location.line == line and "did you mean 'setBuffer:offset:atIndex:'" in d.message


def test_deterministic_and_timed(model: mc.Model) -> None:
    t0 = time.perf_counter()
    again = mc.parse(SOURCE)
    seconds = time.perf_counter() - t0
    assert again == model  # frozen dataclasses: every class, selector, enum and function alike, in the same order
    assert list(again.classes) == list(model.classes)
    assert [list(c.methods) for c in again.classes.values()] == [list(c.methods) for c in model.classes.values()]
    n = sum(len(c.methods) for c in model.classes.values())
    assert len(model.classes) > 150 and n > 1500 and len(model.selectors) > 1300
    print(f"metal-cpp {model.version}: {len(model.classes)} classes, {n} methods, {len(model.selectors)} selectors, "
          f"{len(model.enums)} enums parsed in {seconds:.2f} s")
    assert seconds < 60


def test_missing_metal_cpp_is_a_located_error(tmp_path: Path) -> None:
    with pytest.raises(UserError) as e:
        mc.parse(SOURCE, tmp_path)
    assert "metal-cpp not found (Metal/Metal.hpp under $IRONACCEL_METAL_CPP or " in str(e.value)
    assert "`make metal-cpp` fetches it" in str(e.value)


def test_the_shims_are_ours_and_minimal() -> None:
    """The Linux stand-ins for Apple's platform headers (the Metal spec's prototypes: shims:) declare only what
    metal-cpp uses."""
    assert set(dict(SOURCE.shims)) == {"TargetConditionals.h", "objc/runtime.h", "objc/message.h", "IOSurface/IOSurfaceRef.h",
                             "CoreFoundation/CoreFoundation.h", "mach/mach.h"}
    assert sum(len(t.splitlines()) for _, t in SOURCE.shims) < 40


def test_headers_that_do_not_parse_are_located(tmp_path: Path) -> None:
    (tmp_path / "Metal").mkdir()
    (tmp_path / "Metal" / "Metal.hpp").write_text("#pragma once\nnamespace MTL {\nclass Device : public {};\n}\n")
    (tmp_path / "Foundation").mkdir()
    (tmp_path / "Foundation" / "Foundation.hpp").write_text("#pragma once\n")
    with pytest.raises(UserError) as e:
        mc.parse(SOURCE, tmp_path)
    d = e.value.diagnostics[0]
    assert (d.location.file, d.location.line) == ("Metal/Metal.hpp", 3) and "does not parse" in d.message


def test_every_method_is_consistent(model: mc.Model) -> None:
    """Across all of metal-cpp: one argument per colon of the selector; a class method's class is one the headers
    define with _PRIVATE_DEF_CLS (NSObject's +alloc aside); no C++ spelling is left in a C type."""
    methods = [(c.name, m) for c in model.classes.values() for m in c.methods.values()]
    assert [(c, m.key) for c, m in methods if len(m.args) != m.selector.count(":")] == []
    assert {c for c, m in methods if m.class_method} - {"NSObject"} <= set(model.class_symbols)
    assert [(c, m.key) for c, m in methods if any(s in t for t in (m.returns, *m.args) for s in ("::", "<", "&"))] \
        == []
    # what was passed over is said, and is only what has no message send of its own (std::function overloads ...)
    assert "MTL::CommandBuffer::addCompletedHandler(const HandlerFunction &): no message send" in model.skipped
    assert not any(s.startswith(("MTL::Size::", "NS::SharedPtr::")) for s in model.skipped)


@pytest.mark.parametrize("fe", ["clang", "pycparser"])
def test_the_metal_spec_declares_what_metal_cpp_declares(model: mc.Model, tmp_path: Path, fe: str) -> None:
    """The spec's ``declarations:`` parse as C (both front-ends) and declare every C type name its filled
    prototypes use; its enums' typedefs have metal-cpp's integer types, its constants metal-cpp's values, its value
    structs metal-cpp's fields, and its C entry points metal-cpp's prototypes."""
    import yaml

    from ironaccelerator_gen.frontend import ParseRequest, parse
    from ironaccelerator_gen.objc import BUILTIN_TYPEDEFS

    text = SPEC.read_text(encoding="utf-8")
    decls = yaml.safe_load(text)["declarations"]
    (tmp_path / "metal_decls.h").write_text(decls, encoding="utf-8")
    header = parse(ParseRequest(headers=("metal_decls.h",), include_dirs=(tmp_path,), where=WHERE), fe)
    typedefs = {t.name for t in header.typedefs}
    spec = filled(model, text)
    assert spec.objc is not None
    used = {w for c in spec.objc.classes for m in c.methods for t in (m.returns, *m.args)
            for w in re.findall(r"[A-Za-z_]\w*", t.value)}
    assert used - typedefs - set(BUILTIN_TYPEDEFS) - {"const", "void", "char", "unsigned", "long", "double"} == set()
    # an enum's typedef has metal-cpp's integer type (MTLGPUFamily is an NSInteger, MTLResourceOptions NSUInteger)
    enum_decls = dict((name, under) for under, name in re.findall(r"typedef (\w+) (\w+);", decls)
                      if name in model.enum_types)
    assert len(enum_decls) >= 4 and enum_decls == {k: model.enum_types[k] for k in enum_decls}
    # every constant metal-cpp also has carries metal-cpp's value (typed by hand from Apple's documentation)
    theirs = {name: v for values in model.enums.values() for name, v in values.items()}
    ours = {c.name: c.value for e in header.enums for c in e.constants}
    common = sorted(set(ours) & set(theirs))
    assert len(common) >= 40 and {k: ours[k] for k in common} == {k: theirs[k] for k in common}
    # its value structs have metal-cpp's fields, in order
    structs = {name: tuple(tuple(f.strip().rsplit(" ", 1)[::-1]) for f in body.split(";") if f.strip())
               for body, name in re.findall(r"typedef struct \{([^}]*)\} (\w+);", decls)}
    assert set(structs) == {"NSRange", "MTLSize"}
    assert structs == {k: model.structs[k] for k in structs}
    for f in header.functions:
        cf = model.functions[f.name]
        assert (cf.returns, cf.args) == ("id", ()) and not f.params
    assert {f.name for f in header.functions} == {"MTLCreateSystemDefaultDevice", "MTLCopyAllDevices"}