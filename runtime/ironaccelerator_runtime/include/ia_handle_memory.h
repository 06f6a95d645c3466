/* Memory held by a vendor object, in C (issue 27 item 4): vendor-neutral, hand-written (runtime/), included by
 * ia_objc.h (Objective-C libraries: in IA_PACKAGE._objc_fast), which adds IA_HANDLE_MEMORY_METHODS to its
 * module's methods.  Needs Python.h, structmember.h and IA_PACKAGE.  generator/render.py counts this file in a
 * library's build id.  What it shares with ia_host_memory.h (the fields, the Python paths, the drop, the
 * allocator's argument test and slow path) is ia_memory_common.h's; this file keeps how the memory is obtained
 * (new) and given back (release).
 *
 * For a backend whose allocation is an object one vendor call returns and another releases (an Objective-C
 * framework's buffer object: a `new...` message's +1 result, given back by -release), the two calls are C
 * functions of the generated binding (its unchecked trampoline of the message, ia_objc.h's ia_objc_release) that
 * the backend names by their addresses, in two C shapes this file declares and no vendor's header does:
 *
 *   object = new(owner, nbytes, option)     void *(*)(void *owner, size_t nbytes, uintptr_t option)
 *   release(object)                         void (*)(void *object)
 *
 * (an object pointer and integers of pointer width: the binding's `id` and NSUInteger parameters pass in the same
 * registers on every ABI it runs on; ironaccelerator_runtime.traits.memory.handle_calls checks the functions'
 * cffi types against these shapes before it hands their addresses in).  They are called directly from C: no
 * cffi argument conversion, no cdata per object.  The allocation keeps the object's address and makes `_handle`,
 * the binding's cdata of it, only when Python code first reads it (then the same object on every read).  What is
 * saved is all but the two calls and one object: the method frames of alloc and free, the allocation's __init__
 * and __del__, and the two calls' cffi wrappers (the allocator that called those through PyObject_Call cost
 * ~1.3-1.4x the two raw calls at 256 B, issue 27).
 *
 * The GIL is released around both calls, as cffi releases it around the raw calls and CUDA's allocator
 * (ia_runtime.h) around its own: a real device's allocation may block (a driver lock, wiring or zeroing pages:
 * the simulated device's own 4 MiB pair takes ~1.5 ms) and the last release of an object frees its memory, and
 * other threads should run meanwhile.  Holding it would save ~80 ns a pair where the calls are short (the
 * simulated device at 256 B: ~480 against ~560 ns, the raw pair ~620 ns; bench/bench_alloc_floor.py, 2026-12-06),
 * which the targets do not need and a real device's driver call (a kernel call) would dwarf.  The allocator takes
 * a strong reference to the device and has checked everything before it lets the GIL go; free flags the
 * allocation freed before it does.
 *
 *   _handle_memory_setup(free, free_unchecked, delete) -> _HandleMemory
 *       once per process: the Python Allocation.free, .free_unchecked and .__del__ (the paths of everything
 *       but a plain free: a second free, exported views, a handle the Python side made, a drop unfreed);
 *   _handle_calls(new, release, wrap) -> _HandleCalls
 *       the two functions' addresses (ints, of the shapes above) and wrap(address: int) -> the handle object
 *       (`_handle`: the binding's cdata of the returned type);
 *   _handle_allocator(cls, ref, slow, calls, owner, option, kind, max_bytes) -> an allocator
 *       one device's alloc or alloc_unchecked, bound over the method: called as alloc(nbytes[, kind]) with an
 *       int 1..max_bytes and kind omitted or `kind`, it calls new(owner, nbytes, option) (`owner`, `option`:
 *       ints) and, if that returns non-NULL, a new `cls` (a subclass of _HandleMemory) holding it, released on
 *       drop; anything else (keywords, another kind, another size, a NULL handle, the device gone, after
 *       _shut()) calls slow(device, *args), the Python method (which reports the failure); `ref`: a weak
 *       reference to the device, which must _shut() its allocators before `owner` goes;
 *   _handle_memory(cls, device, address, nbytes, kind, calls) -> a new `cls` holding the object at `address`
 *       (the Python paths' allocation, so that every allocation of the device has the one class).
 *
 * _HandleMemory holds the object's address, _handle (made on first read), nbytes, device, kind, _views, _export
 * (a handle of the memory the Python side made, which its _release closes), _freed and _tracked (always true:
 * released on drop unless freed).  free() and free_unchecked() of a plain allocation (not freed, no views, no
 * _export) call release(address) and return None, and so does its drop unfreed if it has no instance attributes
 * (no _drop); everything else goes to the Python methods, which call the subclass's _release (through _handle).
 * ==================================================================================================== */
#ifndef IA_HANDLE_MEMORY_H
#define IA_HANDLE_MEMORY_H

#include <stdint.h>

#include "ia_memory_common.h"

/* the two calls' C shapes (see above) */
typedef void *(*ia_hdm_new_fn)(void *owner, size_t nbytes, uintptr_t option);
typedef void (*ia_hdm_release_fn)(void *handle);

/* a call of a vendor function, the GIL released (see above) */
#define IA_HDM_CALL(statement) do { \
        Py_BEGIN_ALLOW_THREADS \
        statement; \
        Py_END_ALLOW_THREADS \
    } while (0)

/* the calls: shared by a device's allocators and their allocations */
typedef struct {
    PyObject_HEAD
    ia_hdm_new_fn new_fn;
    ia_hdm_release_fn release_fn;
    PyObject *wrap;             /* wrap(address) -> the handle object */
} ia_hdc_object;

static void ia_hdc_dealloc(PyObject *self)
{
    Py_CLEAR(((ia_hdc_object *)self)->wrap);
    Py_TYPE(self)->tp_free(self);
}

static PyTypeObject ia_hdc_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = IA_PACKAGE "._objc_fast._HandleCalls",
    .tp_basicsize = sizeof(ia_hdc_object),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The new and release functions of handle memory, and the wrap of a handle (see ia_handle_memory.h).",
    .tp_dealloc = ia_hdc_dealloc,
};

typedef struct {
    IA_MEM_HEAD                 /* (_export: a handle the Python side made, closed by its _release) */
    void *object;               /* the vendor object (its address) */
    PyObject *handle;           /* _handle: wrap(object), made on first read; NULL until then */
    ia_hdc_object *calls;       /* how it is released and wrapped */
} ia_hdm_object;

/* the plain case: not freed, no views exported, no _export (else the Python method's checks and errors) */
#define IA_HDM_PLAIN(m) (IA_MEM_PLAIN(m) && ((m)->export == NULL || (m)->export == Py_None))

/* release(object): the plain free */
static inline PyObject *ia_hdm_free_plain(ia_hdm_object *m)
{
    ia_hdm_release_fn release = m->calls->release_fn;
    void *object = m->object;
    m->freed = 1;  /* (before the GIL is released: another thread's free of it takes the Python path) */
    IA_HDM_CALL(release(object));
    Py_RETURN_NONE;
}

IA_MEM_DEFINE_FREES(ia_hdm, ia_hdm_object, IA_HDM_PLAIN)

/* dropped unfreed: a plain allocation with no instance attributes (so no _drop given to _track) is released here,
   as free() would release it; anything else goes to Allocation.__del__ (ia_mem_finalize) */
static void ia_hdm_finalize(PyObject *self)
{
    ia_hdm_object *m = (ia_hdm_object *)self;
    if (IA_LIKELY(m->freed || !m->tracked))
        return;
    if (IA_LIKELY(IA_HDM_PLAIN(m) && m->dict == NULL)) {
        ia_hdm_release_fn release = m->calls->release_fn;
        void *object = m->object;
        m->freed = 1;
        IA_HDM_CALL(release(object));
        return;
    }
    ia_mem_finalize(self);
}

/* _handle: wrap(address), made once */
static PyObject *ia_hdm_get_handle(PyObject *self, void *Py_UNUSED(closure))
{
    ia_hdm_object *m = (ia_hdm_object *)self;
    if (m->handle == NULL) {
        PyObject *address, *h;
        if ((address = PyLong_FromVoidPtr(m->object)) == NULL)
            return NULL;
        h = PyObject_CallOneArg(m->calls->wrap, address);
        Py_DECREF(address);
        if (h == NULL)
            return NULL;
        if (m->handle == NULL)  /* (else another thread's, made meanwhile, is the one kept) */
            m->handle = h;
        else
            Py_DECREF(h);
    }
    Py_INCREF(m->handle);
    return m->handle;
}

static void ia_hdm_dealloc(PyObject *self)
{
    ia_hdm_object *m = (ia_hdm_object *)self;
    if (ia_mem_dealloc_begin(self) < 0)
        return;  /* resurrected */
    Py_CLEAR(m->handle);
    Py_CLEAR(m->calls);
    ia_mem_dealloc_end(self);
}

static PyMethodDef ia_hdm_methods[] = {
    IA_MEM_FREE_METHOD_DEFS(ia_hdm)
    {NULL, NULL, 0, NULL}
};

static PyMemberDef ia_hdm_members[] = {
    IA_MEM_MEMBERS
    IA_MEM_EXPORT_MEMBER("a handle the Python side made (its _release closes it)")
    {NULL, 0, 0, 0, NULL}
};

static PyGetSetDef ia_hdm_getset[] = {
    {"_handle", ia_hdm_get_handle, NULL, "the vendor object holding the memory (the binding's handle, made on "
     "first read)", NULL},
    IA_MEM_DICT_GETSET
    {NULL, NULL, NULL, NULL, NULL}
};

static PyTypeObject ia_hdm_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = IA_PACKAGE "._objc_fast._HandleMemory",
    .tp_basicsize = sizeof(ia_hdm_object),
    .tp_doc = "Memory held by a vendor object, allocated and released from C (the base of a backend's "
              "allocations; see ia_handle_memory.h).",
    .tp_dealloc = ia_hdm_dealloc,
    .tp_traverse = ia_mem_traverse,
    .tp_clear = ia_mem_clear,
    .tp_methods = ia_hdm_methods,
    .tp_members = ia_hdm_members,
    .tp_getset = ia_hdm_getset,
    IA_MEM_TYPE_SLOTS(ia_hdm_finalize),
};

/* a new `cls` holding `object`, or NULL (the caller still owns the object) */
static PyObject *ia_hdm_make(PyTypeObject *cls, PyObject *device, void *object, Py_ssize_t nbytes, PyObject *kind,
                             ia_hdc_object *calls)
{
    ia_hdm_object *m;
    if ((m = (ia_hdm_object *)ia_mem_alloc(cls, device, kind, nbytes, 1)) == NULL)
        return NULL;
    m->object = object;
    Py_INCREF(calls);
    m->calls = calls;
    return (PyObject *)m;
}

/* the allocator: one device's alloc or alloc_unchecked (see above) */
typedef struct {
    IA_MEM_ALLOCATOR_HEAD
    ia_hdc_object *calls;
    void *owner;
    uintptr_t option;
} ia_hda_object;

static PyObject *ia_hda_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    ia_hda_object *a = (ia_hda_object *)self;
    PyObject *device = ia_mem_allocator_device((ia_mem_allocator *)a), *r;  /* (device: borrowed) */
    ia_hdc_object *calls;
    ia_hdm_new_fn new_fn;
    void *owner, *object;
    uintptr_t option;
    size_t nbytes;
    if (IA_UNLIKELY(device == NULL))
        return NULL;
    if (IA_LIKELY((nbytes = ia_mem_fast_size((ia_mem_allocator *)a, args, PyVectorcall_NARGS(nargsf), kwnames))
                  != 0)) {
        calls = a->calls;
        new_fn = calls->new_fn;
        owner = a->owner;
        option = a->option;
        Py_INCREF(device);  /* (held while the GIL is released: another thread may drop it) */
        IA_HDM_CALL(object = new_fn(owner, nbytes, option));
        if (IA_LIKELY(object != NULL)) {
            r = ia_hdm_make((PyTypeObject *)a->cls, device, object, (Py_ssize_t)nbytes, a->kind, calls);
            Py_DECREF(device);
            if (IA_UNLIKELY(r == NULL)) {
                ia_hdm_release_fn release = calls->release_fn;
                IA_HDM_CALL(release(object));
            }
            return r;
        }
        r = ia_mem_allocator_slow((ia_mem_allocator *)a, device, args, nargsf, kwnames);  /* (it reports the NULL) */
        Py_DECREF(device);
        return r;
    }
    return ia_mem_allocator_slow((ia_mem_allocator *)a, device, args, nargsf, kwnames);
}

static int ia_hda_clear(PyObject *self)
{
    Py_CLEAR(((ia_hda_object *)self)->calls);  /* (not collected itself: it holds no allocator) */
    return ia_mem_allocator_clear(self);
}

static PyTypeObject ia_hda_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = IA_PACKAGE "._objc_fast._HandleAllocator",
    .tp_basicsize = sizeof(ia_hda_object),
    .tp_doc = "A device's alloc (or alloc_unchecked) of memory held by a vendor object, in C (see "
              "ia_handle_memory.h).",
    .tp_traverse = ia_mem_allocator_traverse,
    .tp_clear = ia_hda_clear,
    IA_MEM_ALLOCATOR_TYPE_SLOTS,
};

static int ia_hdm_ready(PyTypeObject *type)
{
    return (type->tp_flags & Py_TPFLAGS_READY) || PyType_Ready(type) == 0 ? 0 : -1;
}

/* an int argument as an address (0 allowed: the caller says whether it may be) */
static int ia_hdm_address(PyObject *v, void **out)
{
    if (!PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "an address must be an int, not %.100s", Py_TYPE(v)->tp_name);
        return -1;
    }
    *out = PyLong_AsVoidPtr(v);
    return *out == NULL && PyErr_Occurred() ? -1 : 0;
}

static PyObject *ia_handle_calls(PyObject *ia_self, PyObject *args)
{
    PyObject *new_obj, *release_obj, *wrap;
    void *new_fn, *release_fn;
    ia_hdc_object *c;
    (void)ia_self;
    if (!PyArg_ParseTuple(args, "OOO:_handle_calls", &new_obj, &release_obj, &wrap))
        return NULL;
    if (ia_hdm_address(new_obj, &new_fn) < 0 || ia_hdm_address(release_obj, &release_fn) < 0)
        return NULL;
    if (new_fn == NULL || release_fn == NULL || !PyCallable_Check(wrap)) {
        PyErr_SetString(PyExc_TypeError, "_handle_calls(new: address, release: address, wrap: callable)");
        return NULL;
    }
    if (ia_hdm_ready(&ia_hdc_type) < 0 || (c = PyObject_New(ia_hdc_object, &ia_hdc_type)) == NULL)
        return NULL;
    *(void **)&c->new_fn = new_fn;  /* (an object pointer to a function pointer: POSIX's dlsym convention) */
    *(void **)&c->release_fn = release_fn;
    Py_INCREF(wrap);
    c->wrap = wrap;
    return (PyObject *)c;
}

static PyObject *ia_handle_allocator(PyObject *ia_self, PyObject *args)
{
    ia_hda_object *a;
    PyObject *cls, *ref, *slow, *calls, *owner_obj, *option_obj, *kind, *max_obj;
    void *owner, *option;
    size_t max_bytes;
    (void)ia_self;
    if (!PyArg_ParseTuple(args, "OOOO!OOOO!:_handle_allocator", &cls, &ref, &slow, &ia_hdc_type, &calls, &owner_obj,
                          &option_obj, &kind, &PyLong_Type, &max_obj))
        return NULL;
    if (!ia_mem_subtype(cls, &ia_hdm_type) || !PyWeakref_CheckRef(ref)) {
        PyErr_SetString(PyExc_TypeError, "_handle_allocator(cls: type[_HandleMemory], ref: weakref, slow, "
                        "calls: _HandleCalls, owner: address, option: int, kind, max_bytes: int)");
        return NULL;
    }
    if (ia_hdm_address(owner_obj, &owner) < 0 || ia_hdm_address(option_obj, &option) < 0)
        return NULL;
    if ((max_bytes = PyLong_AsSize_t(max_obj)) == (size_t)-1 && PyErr_Occurred())
        return NULL;
    if (ia_hdm_ready(&ia_hda_type) < 0 || (a = PyObject_GC_New(ia_hda_object, &ia_hda_type)) == NULL)
        return NULL;
    ia_mem_allocator_init((ia_mem_allocator *)a, ia_hda_call, cls, ref, slow, kind, max_bytes);
    Py_INCREF(calls);
    a->calls = (ia_hdc_object *)calls;
    a->owner = owner;
    a->option = (uintptr_t)option;
    PyObject_GC_Track(a);
    return (PyObject *)a;
}

static PyObject *ia_handle_memory(PyObject *ia_self, PyObject *args)
{
    PyObject *cls, *device, *address, *kind, *calls;
    void *object;
    Py_ssize_t nbytes;
    (void)ia_self;
    if (!PyArg_ParseTuple(args, "OOOnOO!:_handle_memory", &cls, &device, &address, &nbytes, &kind, &ia_hdc_type,
                          &calls))
        return NULL;
    if (ia_hdm_address(address, &object) < 0)
        return NULL;
    if (!ia_mem_subtype(cls, &ia_hdm_type) || nbytes < 1 || object == NULL) {
        PyErr_SetString(PyExc_TypeError, "_handle_memory(cls: type[_HandleMemory], device, address: nonzero int, "
                        "nbytes >= 1, kind, calls: _HandleCalls)");
        return NULL;
    }
    return ia_hdm_make((PyTypeObject *)cls, device, object, nbytes, kind, (ia_hdc_object *)calls);
}

static PyObject *ia_handle_memory_setup(PyObject *ia_self, PyObject *args)
{
    PyObject *f, *fu, *d;
    (void)ia_self;
    IA_MEM_NEEDS_GIL("_handle_memory_setup: the compiled allocations need the GIL");
    if (!PyArg_ParseTuple(args, "OOO:_handle_memory_setup", &f, &fu, &d))
        return NULL;
    if (ia_hdm_ready(&ia_hdc_type) < 0)
        return NULL;
    return ia_mem_setup(&ia_hdm_type, f, fu, d);
}

#define IA_HANDLE_MEMORY_METHODS \
    {"_handle_memory_setup", ia_handle_memory_setup, METH_VARARGS, \
     "_handle_memory_setup(free, free_unchecked, delete) -> _HandleMemory (see ia_handle_memory.h)"}, \
    {"_handle_calls", ia_handle_calls, METH_VARARGS, \
     "_handle_calls(new, release, wrap) -> _HandleCalls: the two functions' addresses (see ia_handle_memory.h)"}, \
    {"_handle_allocator", ia_handle_allocator, METH_VARARGS, \
     "_handle_allocator(cls, ref, slow, calls, owner, option, kind, max_bytes): a device's alloc or " \
     "alloc_unchecked in C (see ia_handle_memory.h)"}, \
    {"_handle_memory", ia_handle_memory, METH_VARARGS, \
     "_handle_memory(cls, device, address, nbytes, kind, calls): one allocation (see ia_handle_memory.h)"},

#endif /* IA_HANDLE_MEMORY_H */
