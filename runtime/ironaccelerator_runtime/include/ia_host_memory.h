/* Host memory in C (issue 27 item 4): vendor-neutral, hand-written (runtime/), included by ia_runtime.h (C
 * libraries: in IA_PACKAGE._fast), which adds IA_HOST_MEMORY_METHODS to its module's methods.  Needs Python.h,
 * structmember.h and IA_PACKAGE.  generator/render.py counts this file in a library's build id.  What it shares
 * with ia_handle_memory.h (the fields, the Python paths, the drop, the allocator's argument test and slow path) is
 * ia_memory_common.h's; this file keeps how the memory is obtained (calloc) and given back (free, or the block).
 *
 * For a backend whose device memory is plain host memory that the library never allocates (QNN: graph tensors
 * bound to RAW client buffers, an address and a size), Device.alloc is calloc and free is free: no vendor call,
 * so nothing here is spec data (as for the pool's free list, ia_pool_cache.h).  The Python alternative, a cffi
 * `uint8_t[]` in a Python object, cost ~0.55 us a pair against ~0.15 us for `ffi.new` + drop alone.
 *
 *   _host_memory_setup(free, free_unchecked, delete) -> _HostMemory
 *       once per process: the Python Allocation.free, .free_unchecked and .__del__ (the paths of everything
 *       but a plain free: a second free, exported views, a drop unfreed);
 *   _host_allocator(cls, ref, slow, kind, max_bytes, check) -> an allocator
 *       one device's alloc (check true: the memory is released on drop) or alloc_unchecked (check false),
 *       bound over the method: called as alloc(nbytes[, kind]) with an int 1..max_bytes and kind omitted or
 *       `kind`, it returns a new `cls` (a subclass of _HostMemory) owning calloc(1, nbytes); anything else
 *       (keywords, another kind, another size, calloc failing, the device gone, after _shut()) calls
 *       slow(device, *args), the Python method; `ref` is a weak reference to the device;
 *   _host_memory(cls, device, nbytes, kind, tracked) -> a new `cls` (MemoryError if calloc fails): the
 *       allocation the Python paths make, so that every allocation of the device has the one class.
 *
 * _HostMemory holds ptr (the address, an int; 0 once freed), nbytes, device, kind, _views, _freed and _tracked,
 * and _export, a slot for the Python side's handle of the memory (a cffi `uint8_t[]`: the buffer a launch binds
 * to a tensor), which free() drops.  Such a handle comes from _block(): the first call moves the memory into a
 * _HostBlock, a small object that exports it through the buffer protocol (`ffi.from_buffer`) and frees it when
 * the last reference goes.  So the memory of an allocation that was never handed out is freed by free() at once,
 * and that of one handed out (bound to a graph, say) when the last holder lets it go: a graph still bound to a
 * freed allocation never reads freed memory (a launch refuses a freed argument anyway), and no handle refers
 * back to its allocation (no cycle: a dropped allocation is released at once, not by the collector).
 * ==================================================================================================== */
#ifndef IA_HOST_MEMORY_H
#define IA_HOST_MEMORY_H

#include <stdlib.h>

#include "ia_memory_common.h"

/* the memory once handed out: freed with the last reference */
typedef struct {
    PyObject_HEAD
    char *ptr;
    Py_ssize_t nbytes;
    PyObject *weakrefs;
} ia_hb_object;

static int ia_hb_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    ia_hb_object *b = (ia_hb_object *)self;
    return PyBuffer_FillInfo(view, self, b->ptr, b->nbytes, 0, flags);
}

static PyBufferProcs ia_hb_as_buffer = {ia_hb_getbuffer, NULL};

static void ia_hb_dealloc(PyObject *self)
{
    ia_hb_object *b = (ia_hb_object *)self;
    if (b->weakrefs != NULL)
        PyObject_ClearWeakRefs(self);
    free(b->ptr);
    Py_TYPE(self)->tp_free(self);
}

static PyTypeObject ia_hb_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = IA_PACKAGE "._fast._HostBlock",
    .tp_basicsize = sizeof(ia_hb_object),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Host memory handed out by a _HostMemory (see ia_host_memory.h): a writable buffer, freed with "
              "its last reference.",
    .tp_dealloc = ia_hb_dealloc,
    .tp_as_buffer = &ia_hb_as_buffer,
    .tp_weaklistoffset = offsetof(ia_hb_object, weakrefs),
};

typedef struct {
    IA_MEM_HEAD                 /* (_export: the Python side's handle of the memory, dropped by free) */
    char *ptr;                  /* the memory (calloc's, or the block's); NULL once freed */
    PyObject *block;            /* the _HostBlock that owns the memory once handed out, else NULL */
} ia_hm_object;

/* let the memory go: now, or with the last holder of its block */
static void ia_hm_give_back(ia_hm_object *m)
{
    Py_CLEAR(m->export);
    if (m->block != NULL)
        Py_CLEAR(m->block);
    else
        free(m->ptr);
    m->ptr = NULL;
}

/* the plain free (IA_MEM_PLAIN: not freed, no views exported; else the Python method's checks and errors) */
static inline PyObject *ia_hm_free_plain(ia_hm_object *m)
{
    m->freed = 1;
    ia_hm_give_back(m);
    Py_RETURN_NONE;
}

IA_MEM_DEFINE_FREES(ia_hm, ia_hm_object, IA_MEM_PLAIN)

/* Allocation._release: the memory goes (now, or with its last export); never an Error */
static PyObject *ia_hm_release(ia_hm_object *m, PyObject *Py_UNUSED(ignored))
{
    ia_hm_give_back(m);
    Py_RETURN_NONE;
}

/* _block(): the _HostBlock owning the memory (made on the first call); BufferError once freed */
static PyObject *ia_hm_block(ia_hm_object *m, PyObject *Py_UNUSED(ignored))
{
    ia_hb_object *b;
    if (m->freed || m->ptr == NULL) {
        PyErr_SetString(PyExc_BufferError, "the allocation was freed");
        return NULL;
    }
    if (m->block == NULL) {
        if ((b = PyObject_New(ia_hb_object, &ia_hb_type)) == NULL)
            return NULL;
        b->ptr = m->ptr;
        b->nbytes = m->nbytes;
        b->weakrefs = NULL;
        m->block = (PyObject *)b;
    }
    Py_INCREF(m->block);
    return m->block;
}

static void ia_hm_dealloc(PyObject *self)
{
    ia_hm_object *m = (ia_hm_object *)self;
    if (ia_mem_dealloc_begin(self) < 0)
        return;  /* resurrected */
    if (m->ptr != NULL)
        ia_hm_give_back(m);
    ia_mem_dealloc_end(self);
}

static PyObject *ia_hm_get_ptr(PyObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromVoidPtr(((ia_hm_object *)self)->ptr);
}

static PyMethodDef ia_hm_methods[] = {
    IA_MEM_FREE_METHOD_DEFS(ia_hm)
    {"_release", (PyCFunction)ia_hm_release, METH_NOARGS, "Let the memory go (with its block's last holder); None."},
    {"_block", (PyCFunction)ia_hm_block, METH_NOARGS, "The _HostBlock owning the memory, made on the first call."},
    {NULL, NULL, 0, NULL}
};

static PyMemberDef ia_hm_members[] = {
    IA_MEM_MEMBERS
    IA_MEM_EXPORT_MEMBER("the Python side's handle of the memory (free drops it)")
    {NULL, 0, 0, 0, NULL}
};

static PyGetSetDef ia_hm_getset[] = {
    {"ptr", ia_hm_get_ptr, NULL, "the host address (0 once the memory was given back)", NULL},
    IA_MEM_DICT_GETSET
    {NULL, NULL, NULL, NULL, NULL}
};

static PyTypeObject ia_hm_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = IA_PACKAGE "._fast._HostMemory",
    .tp_basicsize = sizeof(ia_hm_object),
    .tp_doc = "Host memory allocated and freed in C (the base of a backend's host-memory allocations; see "
              "ia_host_memory.h).",
    .tp_dealloc = ia_hm_dealloc,
    .tp_traverse = ia_mem_traverse,  /* (the block is not a GC object, and refers to nothing) */
    .tp_clear = ia_mem_clear,
    .tp_methods = ia_hm_methods,
    .tp_members = ia_hm_members,
    .tp_getset = ia_hm_getset,
    IA_MEM_TYPE_SLOTS(ia_mem_finalize),
};

/* a new `cls` owning calloc(1, nbytes), or NULL (MemoryError where calloc failed, `*no_memory` set) */
static PyObject *ia_hm_make(PyTypeObject *cls, PyObject *device, PyObject *kind, size_t nbytes, int tracked,
                            int *no_memory)
{
    ia_hm_object *m;
    char *ptr = (char *)calloc(1, nbytes);
    if (IA_UNLIKELY(ptr == NULL)) {
        *no_memory = 1;
        PyErr_NoMemory();
        return NULL;
    }
    if ((m = (ia_hm_object *)ia_mem_alloc(cls, device, kind, (Py_ssize_t)nbytes, tracked)) == NULL) {
        free(ptr);
        return NULL;
    }
    m->ptr = ptr;
    return (PyObject *)m;
}

/* the allocator: one device's alloc or alloc_unchecked (see above) */
typedef struct {
    IA_MEM_ALLOCATOR_HEAD
    int check;
} ia_ha_object;

static PyObject *ia_ha_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    ia_ha_object *a = (ia_ha_object *)self;
    PyObject *device = ia_mem_allocator_device((ia_mem_allocator *)a), *r;  /* borrowed */
    size_t nbytes;
    int no_memory = 0;
    if (IA_UNLIKELY(device == NULL))
        return NULL;
    if (IA_LIKELY((nbytes = ia_mem_fast_size((ia_mem_allocator *)a, args, PyVectorcall_NARGS(nargsf), kwnames))
                  != 0)) {
        r = ia_hm_make((PyTypeObject *)a->cls, device, a->kind, nbytes, a->check, &no_memory);
        if (IA_LIKELY(r != NULL) || !no_memory)
            return r;
        PyErr_Clear();  /* (the Python method says what is wrong) */
    }
    return ia_mem_allocator_slow((ia_mem_allocator *)a, device, args, nargsf, kwnames);
}

static PyTypeObject ia_ha_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = IA_PACKAGE "._fast._HostAllocator",
    .tp_basicsize = sizeof(ia_ha_object),
    .tp_doc = "A device's alloc (or alloc_unchecked) of host memory, in C (see ia_host_memory.h).",
    .tp_traverse = ia_mem_allocator_traverse,
    .tp_clear = ia_mem_allocator_clear,
    IA_MEM_ALLOCATOR_TYPE_SLOTS,
};

static PyObject *ia_host_allocator(PyObject *ia_self, PyObject *const *ia_args, Py_ssize_t ia_nargs)
{
    ia_ha_object *a;
    size_t max_bytes;
    int check;
    (void)ia_self;
    if (ia_nargs != 6 || !ia_mem_subtype(ia_args[0], &ia_hm_type) || !PyWeakref_CheckRef(ia_args[1])
        || !PyLong_CheckExact(ia_args[4])) {
        PyErr_SetString(PyExc_TypeError, "_host_allocator(cls: type[_HostMemory], ref: weakref, slow, kind, "
                        "max_bytes: int, check)");
        return NULL;
    }
    if ((max_bytes = PyLong_AsSize_t(ia_args[4])) == (size_t)-1 && PyErr_Occurred())
        return NULL;
    if ((check = PyObject_IsTrue(ia_args[5])) < 0)
        return NULL;
    if (!(ia_ha_type.tp_flags & Py_TPFLAGS_READY) && PyType_Ready(&ia_ha_type) < 0)
        return NULL;
    if ((a = PyObject_GC_New(ia_ha_object, &ia_ha_type)) == NULL)
        return NULL;
    ia_mem_allocator_init((ia_mem_allocator *)a, ia_ha_call, ia_args[0], ia_args[1], ia_args[2], ia_args[3],
                          max_bytes);
    a->check = check;
    PyObject_GC_Track(a);
    return (PyObject *)a;
}

static PyObject *ia_host_memory(PyObject *ia_self, PyObject *const *ia_args, Py_ssize_t ia_nargs)
{
    size_t nbytes;
    int tracked, no_memory = 0;
    (void)ia_self;
    if (ia_nargs != 5 || !ia_mem_subtype(ia_args[0], &ia_hm_type) || !PyLong_CheckExact(ia_args[2])) {
        PyErr_SetString(PyExc_TypeError, "_host_memory(cls: type[_HostMemory], device, nbytes: int, kind, tracked)");
        return NULL;
    }
    if ((nbytes = PyLong_AsSize_t(ia_args[2])) == (size_t)-1 && PyErr_Occurred())
        return NULL;
    if (nbytes == 0) {
        PyErr_SetString(PyExc_ValueError, "_host_memory: nbytes must be >= 1");
        return NULL;
    }
    if ((tracked = PyObject_IsTrue(ia_args[4])) < 0)
        return NULL;
    return ia_hm_make((PyTypeObject *)ia_args[0], ia_args[1], ia_args[3], nbytes, tracked, &no_memory);
}

static PyObject *ia_host_memory_setup(PyObject *ia_self, PyObject *const *ia_args, Py_ssize_t ia_nargs)
{
    (void)ia_self;
    IA_MEM_NEEDS_GIL("_host_memory_setup: the compiled host memory needs the GIL");
    if (ia_nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "_host_memory_setup(free, free_unchecked, delete)");
        return NULL;
    }
    if ((!(ia_hm_type.tp_flags & Py_TPFLAGS_READY) && PyType_Ready(&ia_hm_type) < 0)
        || (!(ia_hb_type.tp_flags & Py_TPFLAGS_READY) && PyType_Ready(&ia_hb_type) < 0))
        return NULL;
    return ia_mem_setup(&ia_hm_type, ia_args[0], ia_args[1], ia_args[2]);
}

#define IA_HOST_MEMORY_METHODS \
    {"_host_memory_setup", (PyCFunction)(void (*)(void))ia_host_memory_setup, METH_FASTCALL, \
     "_host_memory_setup(free, free_unchecked, delete)\n--\n\nThe Python Allocation paths the C defers to; "\
     "returns the _HostMemory type (see ia_host_memory.h)."}, \
    {"_host_allocator", (PyCFunction)(void (*)(void))ia_host_allocator, METH_FASTCALL, \
     "_host_allocator(cls, ref, slow, kind, max_bytes, check)\n--\n\nA device's alloc or alloc_unchecked of " \
     "host memory in C (see ia_host_memory.h)."}, \
    {"_host_memory", (PyCFunction)(void (*)(void))ia_host_memory, METH_FASTCALL, \
     "_host_memory(cls, device, nbytes, kind, tracked)\n--\n\nOne host-memory allocation (see " \
     "ia_host_memory.h)."},
#define IA_HOST_MEMORY_METHOD_COUNT 3

#endif /* IA_HOST_MEMORY_H */
