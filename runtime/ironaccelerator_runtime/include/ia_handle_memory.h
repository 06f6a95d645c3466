/* Memory held by a vendor object, in C (issue 27 item 4): vendor-neutral, hand-written (runtime/), included by
 * ia_objc.h (Objective-C libraries: in IA_PACKAGE._objc_fast), which adds IA_HANDLE_MEMORY_METHODS to its
 * module's methods.  Needs Python.h, structmember.h and IA_PACKAGE.  generator/render.py counts this file in a
 * library's build id.  What it shares with ia_host_memory.h (the fields, the Python paths, the drop, the
 * allocator's argument test and slow path) is ia_memory_common.h's; this file keeps how the memory is obtained
 * (new) and given back (release).
 *
 * For a backend whose allocation is an object one vendor call returns and another releases (Metal: the MTLBuffer
 * of -[MTLDevice newBufferWithLength:options:], released by -release), the two calls are the generated binding's
 * own unchecked functions, which the backend passes in: this file names no vendor, and calls them as any Python
 * caller would (their C trampolines run the message sends).  What it saves is the Python around them: the
 * method frames of alloc and free, the allocation's __init__ and its __del__ on every drop (Metal's Python pair
 * cost ~1.5-1.7x the two raw calls, issue 27).
 *
 *   _handle_memory_setup(free, free_unchecked, delete) -> _HandleMemory
 *       once per process: the Python Allocation.free, .free_unchecked and .__del__ (the paths of everything
 *       but a plain free: a second free, exported views, a handle the Python side made, a drop unfreed);
 *   _handle_allocator(cls, ref, slow, new, before, after, release, kind, max_bytes) -> an allocator
 *       one device's alloc or alloc_unchecked, bound over the method: called as alloc(nbytes[, kind]) with an
 *       int 1..max_bytes and kind omitted or `kind`, it calls new(*before, nbytes, *after) and, if that returns
 *       a true value (a non-NULL cdata), a new `cls` (a subclass of _HandleMemory) holding it, released on drop;
 *       anything else (keywords, another kind, another size, a NULL handle, the device gone, after _shut())
 *       calls slow(device, *args), the Python method (which reports the failure); `ref`: a weak reference to
 *       the device;
 *   _handle_memory(cls, device, handle, nbytes, kind, release) -> a new `cls` holding `handle` (the Python
 *       paths' allocation, so that every allocation of the device has the one class).
 *
 * _HandleMemory holds _handle (the vendor object), nbytes, device, kind, _views, _export (a handle of the memory
 * the Python side made, which its _release closes), _freed and _tracked (always true: released on drop unless
 * freed).  free() and free_unchecked() of a plain allocation (not freed, no views, no _export) call
 * release(_handle) and return None; everything else goes to the Python methods, which call the subclass's
 * _release.
 * ==================================================================================================== */
#ifndef IA_HANDLE_MEMORY_H
#define IA_HANDLE_MEMORY_H

#include "ia_memory_common.h"

typedef struct {
    IA_MEM_HEAD                 /* (_export: a handle the Python side made, closed by its _release) */
    PyObject *handle;           /* _handle: the vendor object (a cdata) */
    PyObject *release;          /* what releases it: release(handle) */
} ia_hdm_object;

/* the plain case: not freed, no views exported, no _export (else the Python method's checks and errors) */
#define IA_HDM_PLAIN(m) (IA_MEM_PLAIN(m) && ((m)->export == NULL || (m)->export == Py_None))

/* release(handle): the plain free; NULL with an exception set where release raised */
static inline PyObject *ia_hdm_free_plain(ia_hdm_object *m)
{
    PyObject *r;
    m->freed = 1;
    if ((r = PyObject_CallOneArg(m->release, m->handle)) == NULL)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

IA_MEM_DEFINE_FREES(ia_hdm, ia_hdm_object, IA_HDM_PLAIN)

static int ia_hdm_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((ia_hdm_object *)self)->release);
    return ia_mem_traverse(self, visit, arg);
}

static void ia_hdm_dealloc(PyObject *self)
{
    ia_hdm_object *m = (ia_hdm_object *)self;
    if (ia_mem_dealloc_begin(self) < 0)
        return;  /* resurrected */
    Py_CLEAR(m->handle);
    Py_CLEAR(m->release);
    ia_mem_dealloc_end(self);
}

static PyMethodDef ia_hdm_methods[] = {
    IA_MEM_FREE_METHOD_DEFS(ia_hdm)
    {NULL, NULL, 0, NULL}
};

static PyMemberDef ia_hdm_members[] = {
    {"_handle", T_OBJECT, offsetof(ia_hdm_object, handle), READONLY, "the vendor object holding the memory"},
    IA_MEM_MEMBERS
    IA_MEM_EXPORT_MEMBER("a handle the Python side made (its _release closes it)")
    {NULL, 0, 0, 0, NULL}
};

static PyGetSetDef ia_hdm_getset[] = {
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
    .tp_traverse = ia_hdm_traverse,
    .tp_clear = ia_mem_clear,
    .tp_methods = ia_hdm_methods,
    .tp_members = ia_hdm_members,
    .tp_getset = ia_hdm_getset,
    IA_MEM_TYPE_SLOTS,
};

/* a new `cls` holding `handle` (a new reference), or NULL */
static PyObject *ia_hdm_make(PyTypeObject *cls, PyObject *device, PyObject *handle, Py_ssize_t nbytes,
                             PyObject *kind, PyObject *release)
{
    ia_hdm_object *m;
    if ((m = (ia_hdm_object *)ia_mem_alloc(cls, device, kind, nbytes, 1)) == NULL)
        return NULL;
    Py_INCREF(handle);
    m->handle = handle;
    Py_INCREF(release);
    m->release = release;
    return (PyObject *)m;
}

/* the allocator: one device's alloc or alloc_unchecked (see above) */
typedef struct {
    IA_MEM_ALLOCATOR_HEAD
    PyObject *new, *before, *after, *release;
} ia_hda_object;

#define IA_HDA_MAX_ARGS 8

static PyObject *ia_hda_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    ia_hda_object *a = (ia_hda_object *)self;
    Py_ssize_t nb = PyTuple_GET_SIZE(a->before), na = PyTuple_GET_SIZE(a->after), i;
    PyObject *device = ia_mem_allocator_device((ia_mem_allocator *)a), *r, *handle;  /* (device: borrowed) */
    PyObject *call[IA_HDA_MAX_ARGS];
    size_t nbytes;
    int ok;
    if (IA_UNLIKELY(device == NULL))
        return NULL;
    if (IA_LIKELY((nbytes = ia_mem_fast_size((ia_mem_allocator *)a, args, PyVectorcall_NARGS(nargsf), kwnames))
                  != 0)) {
        for (i = 0; i < nb; i++)
            call[i] = PyTuple_GET_ITEM(a->before, i);
        call[nb] = args[0];
        for (i = 0; i < na; i++)
            call[nb + 1 + i] = PyTuple_GET_ITEM(a->after, i);
        if ((handle = PyObject_Vectorcall(a->new, call, (size_t)(nb + 1 + na), NULL)) == NULL)
            return NULL;
        if ((ok = PyObject_IsTrue(handle)) > 0) {  /* (a NULL cdata is false: the method reports it) */
            Py_INCREF(device);
            r = ia_hdm_make((PyTypeObject *)a->cls, device, handle, (Py_ssize_t)nbytes, a->kind, a->release);
            Py_DECREF(device);
            if (r == NULL) {
                PyObject *type, *value, *tb, *rr;
                PyErr_Fetch(&type, &value, &tb);
                rr = PyObject_CallOneArg(a->release, handle);
                Py_XDECREF(rr);
                PyErr_Clear();
                PyErr_Restore(type, value, tb);
            }
            Py_DECREF(handle);
            return r;
        }
        Py_DECREF(handle);
        if (ok < 0)
            return NULL;
    }
    return ia_mem_allocator_slow((ia_mem_allocator *)a, device, args, nargsf, kwnames);
}

static int ia_hda_traverse(PyObject *self, visitproc visit, void *arg)
{
    ia_hda_object *a = (ia_hda_object *)self;
    Py_VISIT(a->new);
    Py_VISIT(a->before);
    Py_VISIT(a->after);
    Py_VISIT(a->release);
    return ia_mem_allocator_traverse(self, visit, arg);
}

static int ia_hda_clear(PyObject *self)
{
    ia_hda_object *a = (ia_hda_object *)self;
    Py_CLEAR(a->new);
    Py_CLEAR(a->before);
    Py_CLEAR(a->after);
    Py_CLEAR(a->release);
    return ia_mem_allocator_clear(self);
}

static PyTypeObject ia_hda_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = IA_PACKAGE "._objc_fast._HandleAllocator",
    .tp_basicsize = sizeof(ia_hda_object),
    .tp_doc = "A device's alloc (or alloc_unchecked) of memory held by a vendor object, in C (see "
              "ia_handle_memory.h).",
    .tp_traverse = ia_hda_traverse,
    .tp_clear = ia_hda_clear,
    IA_MEM_ALLOCATOR_TYPE_SLOTS,
};

static PyObject *ia_handle_allocator(PyObject *ia_self, PyObject *args)
{
    ia_hda_object *a;
    PyObject *cls, *ref, *slow, *new, *before, *after, *release, *kind, *max_obj;
    size_t max_bytes;
    (void)ia_self;
    if (!PyArg_ParseTuple(args, "OOOOO!O!OOO!:_handle_allocator", &cls, &ref, &slow, &new, &PyTuple_Type, &before,
                          &PyTuple_Type, &after, &release, &kind, &PyLong_Type, &max_obj))
        return NULL;
    if (!ia_mem_subtype(cls, &ia_hdm_type) || !PyWeakref_CheckRef(ref)
        || PyTuple_GET_SIZE(before) + 1 + PyTuple_GET_SIZE(after) > IA_HDA_MAX_ARGS) {
        PyErr_SetString(PyExc_TypeError, "_handle_allocator(cls: type[_HandleMemory], ref: weakref, slow, new, "
                        "before: tuple, after: tuple, release, kind, max_bytes: int), at most 8 arguments to new");
        return NULL;
    }
    if ((max_bytes = PyLong_AsSize_t(max_obj)) == (size_t)-1 && PyErr_Occurred())
        return NULL;
    if (!(ia_hda_type.tp_flags & Py_TPFLAGS_READY) && PyType_Ready(&ia_hda_type) < 0)
        return NULL;
    if ((a = PyObject_GC_New(ia_hda_object, &ia_hda_type)) == NULL)
        return NULL;
    ia_mem_allocator_init((ia_mem_allocator *)a, ia_hda_call, cls, ref, slow, kind, max_bytes);
#define IA_HOLD(field, v) (Py_INCREF(v), a->field = (v))
    IA_HOLD(new, new); IA_HOLD(before, before); IA_HOLD(after, after); IA_HOLD(release, release);
#undef IA_HOLD
    PyObject_GC_Track(a);
    return (PyObject *)a;
}

static PyObject *ia_handle_memory(PyObject *ia_self, PyObject *args)
{
    PyObject *cls, *device, *handle, *kind, *release;
    Py_ssize_t nbytes;
    (void)ia_self;
    if (!PyArg_ParseTuple(args, "OOOnOO:_handle_memory", &cls, &device, &handle, &nbytes, &kind, &release))
        return NULL;
    if (!ia_mem_subtype(cls, &ia_hdm_type) || nbytes < 1) {
        PyErr_SetString(PyExc_TypeError, "_handle_memory(cls: type[_HandleMemory], device, handle, nbytes >= 1, "
                        "kind, release)");
        return NULL;
    }
    return ia_hdm_make((PyTypeObject *)cls, device, handle, nbytes, kind, release);
}

static PyObject *ia_handle_memory_setup(PyObject *ia_self, PyObject *args)
{
    PyObject *f, *fu, *d;
    (void)ia_self;
    IA_MEM_NEEDS_GIL("_handle_memory_setup: the compiled allocations need the GIL");
    if (!PyArg_ParseTuple(args, "OOO:_handle_memory_setup", &f, &fu, &d))
        return NULL;
    return ia_mem_setup(&ia_hdm_type, f, fu, d);
}

#define IA_HANDLE_MEMORY_METHODS \
    {"_handle_memory_setup", ia_handle_memory_setup, METH_VARARGS, \
     "_handle_memory_setup(free, free_unchecked, delete) -> _HandleMemory (see ia_handle_memory.h)"}, \
    {"_handle_allocator", ia_handle_allocator, METH_VARARGS, \
     "_handle_allocator(cls, ref, slow, new, before, after, release, kind, max_bytes): a device's alloc or " \
     "alloc_unchecked in C (see ia_handle_memory.h)"}, \
    {"_handle_memory", ia_handle_memory, METH_VARARGS, \
     "_handle_memory(cls, device, handle, nbytes, kind, release): one allocation (see ia_handle_memory.h)"},

#endif /* IA_HANDLE_MEMORY_H */
