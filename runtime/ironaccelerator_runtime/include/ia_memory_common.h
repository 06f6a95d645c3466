/* What the compiled allocation types share (issue 27 item 4): vendor-neutral, hand-written (runtime/), included by
 * ia_host_memory.h (QNN's _HostMemory: calloc'ed host memory) and ia_handle_memory.h (Metal's _HandleMemory: a
 * vendor object one call returns and another releases), which keep only what differs: how the memory is obtained
 * and given back, and what a plain free is.  Needs Python.h, structmember.h and IA_PACKAGE.  generator/render.py
 * counts this file in a library's build id.  (CUDA's _DeviceMemory in ia_runtime.h predates it and has its own
 * fields and error paths: of this file it uses only ia_call_first, the slow path every compiled method shares.)
 *
 * An allocation type starts with IA_MEM_HEAD (device, kind, _views, _export, __dict__, weak references, nbytes,
 * _freed, _tracked), so that the functions here take any of them as an ia_mem_object; its own fields follow.
 * Everything but a plain free goes to the Python Allocation methods that _*_memory_setup hands in once
 * (ia_mem_setup): free and free_unchecked (a second free, exported views, ...) and __del__ (a drop unfreed).
 * IA_MEM_DEFINE_FREES writes a type's free() and free_unchecked() around its plain free, as macros and static
 * functions, so that the alloc/free pair costs what it did written out in each file.
 *
 * An allocator (a device's alloc or alloc_unchecked, bound over the method) starts with IA_MEM_ALLOCATOR_HEAD
 * (its vectorcall, cls, ref: a weak reference to the device, slow: the Python method, kind, max_bytes, shut):
 * called as alloc(nbytes[, kind]) with an int 1..max_bytes and kind omitted or `kind`, its type's vectorcall makes
 * the allocation (ia_mem_fast_size says whether the call is such); anything else calls slow(device, *args).
 * ==================================================================================================== */
#ifndef IA_MEMORY_COMMON_H
#define IA_MEMORY_COMMON_H

#include "ia_gc.h"  /* (the C types' garbage-collector functions) */

#if !defined(IA_LIKELY)
#if defined(__GNUC__)
#define IA_LIKELY(x) __builtin_expect(!!(x), 1)
#else
#define IA_LIKELY(x) (x)
#endif
#endif
#if !defined(IA_UNLIKELY)
#if defined(__GNUC__)
#define IA_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define IA_UNLIKELY(x) (x)
#endif
#endif

/* ---- the slow path of a compiled method ------------------------------------------------------------- */

/* fn(first, *args, **kwnames): the Python method a compiled one hands what it does not take (the allocators', the
   pool's, the host copier's), its receiver put before the vectorcall arguments on a small stack, no bound method
   made; the caller holds `first` for the call */
static PyObject *ia_call_first(PyObject *fn, PyObject *first, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames)
{
    PyObject *small[8], **stack = small, *r;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t total = nargs + (kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0);
    if (total + 1 > 8 && (stack = PyMem_Malloc((size_t)(total + 1) * sizeof(PyObject *))) == NULL)
        return PyErr_NoMemory();
    stack[0] = first;
    if (total > 0)
        memcpy(stack + 1, args, (size_t)total * sizeof(PyObject *));
    r = PyObject_Vectorcall(fn, stack, (size_t)(nargs + 1), kwnames);
    if (stack != small)
        PyMem_Free(stack);
    return r;
}

/* ---- the allocation ---------------------------------------------------------------------------------- */

#define IA_MEM_HEAD \
    PyObject_HEAD \
    PyObject *device;           /* the backend's device */ \
    PyObject *kind;             /* the MemoryKind */ \
    PyObject *views;            /* _views: the exported host views (weak references), or NULL */ \
    PyObject *export;           /* _export: a handle of the memory the Python side holds (per type), or NULL */ \
    PyObject *dict;             /* the instance dictionary */ \
    PyObject *weakrefs; \
    Py_ssize_t nbytes; \
    char freed; \
    char tracked;               /* released on drop unless freed */

typedef struct {
    IA_MEM_HEAD
} ia_mem_object;

/* the Python Allocation.free, .free_unchecked and .__del__ (ia_mem_setup) */
static PyObject *ia_mem_free_py = NULL, *ia_mem_free_unchecked_py = NULL, *ia_mem_del_py = NULL;

/* not freed, no views exported (a type may ask more: ia_handle_memory.h's no _export) */
#define IA_MEM_PLAIN(m) (!(m)->freed && ((m)->views == NULL || (m)->views == Py_None))

/* free() and free_unchecked() of the type `object` (PREFIX##_free, PREFIX##_free_unchecked): where PLAIN(m),
   PREFIX##_free_plain(m), which returns None (or NULL with an exception set); else the Python method */
#define IA_MEM_DEFINE_FREES(PREFIX, object, PLAIN) \
    static PyObject *PREFIX##_free(object *m, PyObject *Py_UNUSED(ignored)) \
    { \
        if (IA_LIKELY(PLAIN(m))) \
            return PREFIX##_free_plain(m); \
        return PyObject_CallOneArg(ia_mem_free_py, (PyObject *)m); \
    } \
    static PyObject *PREFIX##_free_unchecked(object *m, PyObject *Py_UNUSED(ignored)) \
    { \
        if (IA_LIKELY(PLAIN(m))) \
            return PREFIX##_free_plain(m); \
        return PyObject_CallOneArg(ia_mem_free_unchecked_py, (PyObject *)m); \
    }

/* their PyMethodDef entries */
#define IA_MEM_FREE_METHOD_DEFS(PREFIX) \
    {"free", (PyCFunction)PREFIX##_free, METH_NOARGS, "Free the memory (raises on a second free, or while views " \
     "are exported)."}, \
    {"free_unchecked", (PyCFunction)PREFIX##_free_unchecked, METH_NOARGS, "Free the memory; the Error, or None."},

/* a tp_finalize's slow part: fn(self, arg), the exception being handled (if any) kept, an error of fn's own
   unraisable (as a Python __del__'s); also ia_pool_cache.h's */
static void ia_mem_run_finalizer(PyObject *self, PyObject *(*fn)(PyObject *, PyObject *), PyObject *arg)
{
    PyObject *type, *value, *tb, *r;
    PyErr_Fetch(&type, &value, &tb);
    if ((r = fn(arg, self)) == NULL)
        PyErr_WriteUnraisable(self);
    Py_XDECREF(r);
    PyErr_Restore(type, value, tb);
}

/* dropped unfreed: Allocation.__del__ (the instance's _drop, or its _release) */
static void ia_mem_finalize(PyObject *self)
{
    ia_mem_object *m = (ia_mem_object *)self;
    if (IA_LIKELY(m->freed || !m->tracked))
        return;
    ia_mem_run_finalizer(self, PyObject_CallOneArg, ia_mem_del_py);
}

static int ia_mem_traverse(PyObject *self, visitproc visit, void *arg)
{
    ia_mem_object *m = (ia_mem_object *)self;
    Py_VISIT(m->device);  /* (a subclass's subtype_traverse visits the type) */
    Py_VISIT(m->kind);
    Py_VISIT(m->views);
    Py_VISIT(m->export);
    Py_VISIT(m->dict);
    return 0;
}

static int ia_mem_clear(PyObject *self)
{
    ia_mem_object *m = (ia_mem_object *)self;
    Py_CLEAR(m->export);
    Py_CLEAR(m->views);
    Py_CLEAR(m->dict);
    return 0;
}

/* a type's tp_dealloc: ia_mem_dealloc_begin (0: go on; -1: resurrected, return), its own fields, then
   ia_mem_dealloc_end */
static inline int ia_mem_dealloc_begin(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    if (PyObject_CallFinalizerFromDealloc(self) < 0)
        return -1;  /* resurrected */
    if (((ia_mem_object *)self)->weakrefs != NULL)
        PyObject_ClearWeakRefs(self);
    return 0;
}

static inline void ia_mem_dealloc_end(PyObject *self)
{
    ia_mem_object *m = (ia_mem_object *)self;
    Py_CLEAR(m->export);
    Py_CLEAR(m->device);
    Py_CLEAR(m->kind);
    Py_CLEAR(m->views);
    Py_CLEAR(m->dict);
    Py_TYPE(self)->tp_free(self);  /* (a subclass's subtype_dealloc drops its reference to the type) */
}

static PyObject *ia_mem_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)args;
    (void)kwds;
    PyErr_Format(PyExc_TypeError, "cannot create '%.100s' instances: Device.alloc makes them", type->tp_name);
    return NULL;
}

/* a new `cls` with the shared fields set (its own zeroed), or NULL */
static inline ia_mem_object *ia_mem_alloc(PyTypeObject *cls, PyObject *device, PyObject *kind, Py_ssize_t nbytes,
                                          int tracked)
{
    ia_mem_object *m;
    if ((m = (ia_mem_object *)cls->tp_alloc(cls, 0)) == NULL)
        return NULL;
    Py_INCREF(device);
    m->device = device;
    Py_INCREF(kind);
    m->kind = kind;
    m->nbytes = nbytes;
    m->tracked = (char)tracked;
    return m;
}

/* the PyMemberDef entries of the shared fields but _export (whose doc is the type's) */
#define IA_MEM_MEMBERS \
    {"nbytes", T_PYSSIZET, offsetof(ia_mem_object, nbytes), READONLY, "the size in bytes"}, \
    {"device", T_OBJECT, offsetof(ia_mem_object, device), READONLY, "the device it was allocated on"}, \
    {"kind", T_OBJECT, offsetof(ia_mem_object, kind), READONLY, "the MemoryKind"}, \
    {"_views", T_OBJECT, offsetof(ia_mem_object, views), 0, "the exported host views (weak references)"}, \
    {"_freed", T_BOOL, offsetof(ia_mem_object, freed), 0, "freed (or being released)"}, \
    {"_tracked", T_BOOL, offsetof(ia_mem_object, tracked), 0, "released on drop unless freed"}, \
    {"__dictoffset__", T_PYSSIZET, offsetof(ia_mem_object, dict), READONLY, NULL}, \
    {"__weaklistoffset__", T_PYSSIZET, offsetof(ia_mem_object, weakrefs), READONLY, NULL},
#define IA_MEM_EXPORT_MEMBER(doc) {"_export", T_OBJECT, offsetof(ia_mem_object, export), 0, doc},

#define IA_MEM_DICT_GETSET {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},

/* the PyTypeObject slots every allocation type has (a subclassable GC type with a dict and weak references);
   `finalize`: ia_mem_finalize, or a type's own that hands what it does not release to it */
#define IA_MEM_TYPE_SLOTS(finalize) \
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, \
    .tp_new = ia_mem_new, \
    .tp_finalize = (finalize), \
    .tp_dictoffset = offsetof(ia_mem_object, dict), \
    .tp_weaklistoffset = offsetof(ia_mem_object, weakrefs)

static int ia_mem_subtype(PyObject *cls, PyTypeObject *base)
{
    return PyType_Check(cls) && PyType_IsSubtype((PyTypeObject *)cls, base);
}

/* the start of _*_memory_setup: NotImplementedError (`message`) on a free-threaded build */
#ifdef Py_GIL_DISABLED
#define IA_MEM_NEEDS_GIL(message) do { \
        PyErr_SetString(PyExc_NotImplementedError, message); \
        return NULL; \
    } while (0)
#else
#define IA_MEM_NEEDS_GIL(message) do { } while (0)
#endif

/* the rest of _*_memory_setup(free, free_unchecked, delete): `type` ready and the Python paths held; a new
   reference to `type` */
static PyObject *ia_mem_setup(PyTypeObject *type, PyObject *free_py, PyObject *free_unchecked_py, PyObject *del_py)
{
    if (!(type->tp_flags & Py_TPFLAGS_READY) && PyType_Ready(type) < 0)
        return NULL;
    Py_INCREF(free_py);
    Py_XSETREF(ia_mem_free_py, free_py);
    Py_INCREF(free_unchecked_py);
    Py_XSETREF(ia_mem_free_unchecked_py, free_unchecked_py);
    Py_INCREF(del_py);
    Py_XSETREF(ia_mem_del_py, del_py);
    Py_INCREF(type);
    return (PyObject *)type;
}

/* ---- the allocator ----------------------------------------------------------------------------------- */

#define IA_MEM_ALLOCATOR_HEAD \
    PyObject_HEAD \
    vectorcallfunc vectorcall; \
    PyObject *cls, *ref, *slow, *kind; \
    size_t max_bytes; \
    int shut;

typedef struct {
    IA_MEM_ALLOCATOR_HEAD
} ia_mem_allocator;

/* the device (borrowed), or NULL with an exception set (ReferenceError where it is gone) */
static inline PyObject *ia_mem_allocator_device(ia_mem_allocator *a)
{
    PyObject *device = PyWeakref_GetObject(a->ref);
    if (IA_UNLIKELY(device == NULL))
        return NULL;
    if (IA_UNLIKELY(device == Py_None)) {
        PyErr_SetString(PyExc_ReferenceError, "Device.alloc: the device this allocator was bound to is gone");
        return NULL;
    }
    return device;
}

/* nbytes where the call is alloc(nbytes[, kind]) that the C makes (see above), else 0 (no exception set) */
static inline size_t ia_mem_fast_size(ia_mem_allocator *a, PyObject *const *args, Py_ssize_t n, PyObject *kwnames)
{
    size_t nbytes;
    if (IA_LIKELY(!a->shut && kwnames == NULL && (n == 1 || (n == 2 && args[1] == a->kind))
                  && PyLong_CheckExact(args[0]))) {
        nbytes = PyLong_AsSize_t(args[0]);
        if (IA_LIKELY(nbytes != (size_t)-1 && nbytes != 0 && nbytes <= a->max_bytes))
            return nbytes;
        PyErr_Clear();  /* (the Python method says what is wrong) */
    }
    return 0;
}

/* slow(device, *args, **kwargs): the Python method */
static PyObject *ia_mem_allocator_slow(ia_mem_allocator *a, PyObject *device, PyObject *const *args, size_t nargsf,
                                       PyObject *kwnames)
{
    PyObject *r;
    Py_INCREF(device);  /* (borrowed from the weak reference) */
    r = ia_call_first(a->slow, device, args, nargsf, kwnames);
    Py_DECREF(device);
    return r;
}

/* the shared fields set (the type's own are its to set) */
static void ia_mem_allocator_init(ia_mem_allocator *a, vectorcallfunc call, PyObject *cls, PyObject *ref,
                                 PyObject *slow, PyObject *kind, size_t max_bytes)
{
    a->vectorcall = call;
    Py_INCREF(cls);
    a->cls = cls;
    Py_INCREF(ref);
    a->ref = ref;
    Py_INCREF(slow);
    a->slow = slow;
    Py_INCREF(kind);
    a->kind = kind;
    a->max_bytes = max_bytes;
    a->shut = 0;
}

IA_SHUT_METHOD(ia_mem_allocator, ia_mem_allocator)

static const Py_ssize_t ia_mem_allocator_refs[] = {
    IA_MEMBER(ia_mem_allocator, cls), IA_MEMBER(ia_mem_allocator, ref), IA_MEMBER(ia_mem_allocator, slow),
    IA_MEMBER(ia_mem_allocator, kind), IA_MEMBERS_END};
IA_GC_TRAVERSE_CLEAR(ia_mem_allocator)

/* (the type's tp_clear clears its own fields and the shared ones) */
static void ia_mem_allocator_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    Py_TYPE(self)->tp_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyMethodDef ia_mem_allocator_methods[] = {
    IA_SHUT_METHOD_DEF(ia_mem_allocator),
    {NULL, NULL, 0, NULL}
};

/* the PyTypeObject slots every allocator type has (its tp_traverse and tp_clear are its own) */
#define IA_MEM_ALLOCATOR_TYPE_SLOTS \
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, \
    .tp_vectorcall_offset = offsetof(ia_mem_allocator, vectorcall), \
    .tp_call = PyVectorcall_Call, \
    .tp_dealloc = ia_mem_allocator_dealloc, \
    .tp_methods = ia_mem_allocator_methods

#endif /* IA_MEMORY_COMMON_H */
