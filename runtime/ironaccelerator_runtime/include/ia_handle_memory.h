/* Memory held by a vendor object, in C (issue 27 item 4): vendor-neutral, hand-written (runtime/), included by
 * ia_objc.h (Objective-C libraries: in IA_PACKAGE._objc_fast), which adds IA_HANDLE_MEMORY_METHODS to its
 * module's methods.  Needs Python.h, structmember.h and IA_PACKAGE.  generator/render.py counts this file in a
 * library's build id.
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

typedef struct {
    PyObject_HEAD
    PyObject *handle;           /* _handle: the vendor object (a cdata) */
    PyObject *release;          /* what releases it: release(handle) */
    PyObject *device;           /* the backend's device */
    PyObject *kind;             /* the MemoryKind */
    PyObject *views;            /* _views: the exported host views (weak references), or NULL */
    PyObject *export;           /* _export: a handle the Python side made (closed by its _release), or NULL */
    PyObject *dict;             /* the instance dictionary */
    PyObject *weakrefs;
    Py_ssize_t nbytes;
    char freed;
    char tracked;               /* released on drop unless freed */
} ia_hdm_object;

static PyObject *ia_hdm_free_py = NULL, *ia_hdm_free_unchecked_py = NULL, *ia_hdm_del_py = NULL;

#define IA_HDM_PLAIN(m) (!(m)->freed && ((m)->views == NULL || (m)->views == Py_None) \
                         && ((m)->export == NULL || (m)->export == Py_None))

/* release(handle): the plain free; NULL with an exception set where release raised */
static PyObject *ia_hdm_release_plain(ia_hdm_object *m)
{
    PyObject *r;
    m->freed = 1;
    if ((r = PyObject_CallOneArg(m->release, m->handle)) == NULL)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

static PyObject *ia_hdm_free(ia_hdm_object *m, PyObject *Py_UNUSED(ignored))
{
    if (IA_LIKELY(IA_HDM_PLAIN(m)))
        return ia_hdm_release_plain(m);
    return PyObject_CallOneArg(ia_hdm_free_py, (PyObject *)m);
}

static PyObject *ia_hdm_free_unchecked(ia_hdm_object *m, PyObject *Py_UNUSED(ignored))
{
    if (IA_LIKELY(IA_HDM_PLAIN(m)))
        return ia_hdm_release_plain(m);
    return PyObject_CallOneArg(ia_hdm_free_unchecked_py, (PyObject *)m);
}

/* dropped unfreed: Allocation.__del__ (the instance's _drop, or its _release) */
static void ia_hdm_finalize(PyObject *self)
{
    ia_hdm_object *m = (ia_hdm_object *)self;
    PyObject *type, *value, *tb, *r;
    if (IA_LIKELY(m->freed || !m->tracked))
        return;
    PyErr_Fetch(&type, &value, &tb);
    if ((r = PyObject_CallOneArg(ia_hdm_del_py, self)) == NULL)
        PyErr_WriteUnraisable(self);
    Py_XDECREF(r);
    PyErr_Restore(type, value, tb);
}

static int ia_hdm_traverse(PyObject *self, visitproc visit, void *arg)
{
    ia_hdm_object *m = (ia_hdm_object *)self;
    Py_VISIT(m->device);  /* (a subclass's subtype_traverse visits the type) */
    Py_VISIT(m->kind);
    Py_VISIT(m->release);
    Py_VISIT(m->views);
    Py_VISIT(m->export);
    Py_VISIT(m->dict);
    return 0;
}

static int ia_hdm_clear(PyObject *self)
{
    ia_hdm_object *m = (ia_hdm_object *)self;
    Py_CLEAR(m->views);
    Py_CLEAR(m->export);
    Py_CLEAR(m->dict);
    return 0;
}

static void ia_hdm_dealloc(PyObject *self)
{
    ia_hdm_object *m = (ia_hdm_object *)self;
    PyObject_GC_UnTrack(self);
    if (PyObject_CallFinalizerFromDealloc(self) < 0)
        return;  /* resurrected */
    if (m->weakrefs != NULL)
        PyObject_ClearWeakRefs(self);
    Py_CLEAR(m->handle);
    Py_CLEAR(m->release);
    Py_CLEAR(m->device);
    Py_CLEAR(m->kind);
    Py_CLEAR(m->views);
    Py_CLEAR(m->export);
    Py_CLEAR(m->dict);
    Py_TYPE(self)->tp_free(self);  /* (a subclass's subtype_dealloc drops its reference to the type) */
}

static PyObject *ia_hdm_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)args;
    (void)kwds;
    PyErr_Format(PyExc_TypeError, "cannot create '%.100s' instances: Device.alloc makes them", type->tp_name);
    return NULL;
}

static PyMethodDef ia_hdm_methods[] = {
    {"free", (PyCFunction)ia_hdm_free, METH_NOARGS, "Free the memory (raises on a second free, or while views "
     "are exported)."},
    {"free_unchecked", (PyCFunction)ia_hdm_free_unchecked, METH_NOARGS, "Free the memory; the Error, or None."},
    {NULL, NULL, 0, NULL}
};

static PyMemberDef ia_hdm_members[] = {
    {"_handle", T_OBJECT, offsetof(ia_hdm_object, handle), READONLY, "the vendor object holding the memory"},
    {"nbytes", T_PYSSIZET, offsetof(ia_hdm_object, nbytes), READONLY, "the size in bytes"},
    {"device", T_OBJECT, offsetof(ia_hdm_object, device), READONLY, "the device it was allocated on"},
    {"kind", T_OBJECT, offsetof(ia_hdm_object, kind), READONLY, "the MemoryKind"},
    {"_views", T_OBJECT, offsetof(ia_hdm_object, views), 0, "the exported host views (weak references)"},
    {"_export", T_OBJECT, offsetof(ia_hdm_object, export), 0, "a handle the Python side made (its _release "
     "closes it)"},
    {"_freed", T_BOOL, offsetof(ia_hdm_object, freed), 0, "freed (or being released)"},
    {"_tracked", T_BOOL, offsetof(ia_hdm_object, tracked), 0, "released on drop unless freed"},
    {"__dictoffset__", T_PYSSIZET, offsetof(ia_hdm_object, dict), READONLY, NULL},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(ia_hdm_object, weakrefs), READONLY, NULL},
    {NULL, 0, 0, 0, NULL}
};

static PyGetSetDef ia_hdm_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}
};

static PyTypeObject ia_hdm_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = IA_PACKAGE "._objc_fast._HandleMemory",
    .tp_basicsize = sizeof(ia_hdm_object),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Memory held by a vendor object, allocated and released from C (the base of a backend's "
              "allocations; see ia_handle_memory.h).",
    .tp_new = ia_hdm_new,
    .tp_dealloc = ia_hdm_dealloc,
    .tp_traverse = ia_hdm_traverse,
    .tp_clear = ia_hdm_clear,
    .tp_finalize = ia_hdm_finalize,
    .tp_methods = ia_hdm_methods,
    .tp_members = ia_hdm_members,
    .tp_getset = ia_hdm_getset,
    .tp_dictoffset = offsetof(ia_hdm_object, dict),
    .tp_weaklistoffset = offsetof(ia_hdm_object, weakrefs),
};

/* a new `cls` holding `handle` (a new reference), or NULL */
static PyObject *ia_hdm_make(PyTypeObject *cls, PyObject *device, PyObject *handle, Py_ssize_t nbytes,
                             PyObject *kind, PyObject *release)
{
    ia_hdm_object *m;
    if ((m = (ia_hdm_object *)cls->tp_alloc(cls, 0)) == NULL)
        return NULL;
    Py_INCREF(handle);
    m->handle = handle;
    Py_INCREF(release);
    m->release = release;
    Py_INCREF(device);
    m->device = device;
    Py_INCREF(kind);
    m->kind = kind;
    m->nbytes = nbytes;
    m->tracked = 1;
    return (PyObject *)m;
}

/* the allocator: one device's alloc or alloc_unchecked (see above) */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *cls, *ref, *slow, *new, *before, *after, *release, *kind;
    size_t max_bytes;
    int shut;
} ia_hda_object;

#define IA_HDA_MAX_ARGS 8

static PyObject *ia_hda_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    ia_hda_object *a = (ia_hda_object *)self;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf), nb = PyTuple_GET_SIZE(a->before), na = PyTuple_GET_SIZE(a->after), i;
    PyObject *device = PyWeakref_GetObject(a->ref), *bound, *r, *handle;  /* (device: borrowed) */
    PyObject *call[IA_HDA_MAX_ARGS];
    size_t nbytes;
    int ok;
    if (IA_UNLIKELY(device == NULL))
        return NULL;
    if (IA_UNLIKELY(device == Py_None)) {
        PyErr_SetString(PyExc_ReferenceError, "Device.alloc: the device this allocator was bound to is gone");
        return NULL;
    }
    if (IA_LIKELY(!a->shut && kwnames == NULL && (n == 1 || (n == 2 && args[1] == a->kind))
                  && PyLong_CheckExact(args[0]))) {
        nbytes = PyLong_AsSize_t(args[0]);
        if (IA_LIKELY(nbytes != (size_t)-1 && nbytes != 0 && nbytes <= a->max_bytes)) {
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
        PyErr_Clear();  /* (the Python method says what is wrong) */
    }
    Py_INCREF(device);
    bound = PyMethod_New(a->slow, device);
    r = bound == NULL ? NULL : PyObject_Vectorcall(bound, args, nargsf, kwnames);
    Py_XDECREF(bound);
    Py_DECREF(device);
    return r;
}

static PyObject *ia_hda_shut_method(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    ((ia_hda_object *)self)->shut = 1;
    Py_RETURN_NONE;
}

static int ia_hda_traverse(PyObject *self, visitproc visit, void *arg)
{
    ia_hda_object *a = (ia_hda_object *)self;
    Py_VISIT(a->cls);
    Py_VISIT(a->ref);
    Py_VISIT(a->slow);
    Py_VISIT(a->new);
    Py_VISIT(a->before);
    Py_VISIT(a->after);
    Py_VISIT(a->release);
    Py_VISIT(a->kind);
    return 0;
}

static int ia_hda_clear(PyObject *self)
{
    ia_hda_object *a = (ia_hda_object *)self;
    Py_CLEAR(a->cls);
    Py_CLEAR(a->ref);
    Py_CLEAR(a->slow);
    Py_CLEAR(a->new);
    Py_CLEAR(a->before);
    Py_CLEAR(a->after);
    Py_CLEAR(a->release);
    Py_CLEAR(a->kind);
    return 0;
}

static void ia_hda_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    ia_hda_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyMethodDef ia_hda_methods[] = {
    {"_shut", ia_hda_shut_method, METH_NOARGS, "Every later call takes the slow path (the device was closed)."},
    {NULL, NULL, 0, NULL}
};

static PyTypeObject ia_hda_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = IA_PACKAGE "._objc_fast._HandleAllocator",
    .tp_basicsize = sizeof(ia_hda_object),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A device's alloc (or alloc_unchecked) of memory held by a vendor object, in C (see "
              "ia_handle_memory.h).",
    .tp_vectorcall_offset = offsetof(ia_hda_object, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = ia_hda_dealloc,
    .tp_traverse = ia_hda_traverse,
    .tp_clear = ia_hda_clear,
    .tp_methods = ia_hda_methods,
};

static int ia_hdm_subtype(PyObject *cls)
{
    return PyType_Check(cls) && PyType_IsSubtype((PyTypeObject *)cls, &ia_hdm_type);
}

static PyObject *ia_handle_allocator(PyObject *ia_self, PyObject *args)
{
    ia_hda_object *a;
    PyObject *cls, *ref, *slow, *new, *before, *after, *release, *kind, *max_obj;
    size_t max_bytes;
    (void)ia_self;
    if (!PyArg_ParseTuple(args, "OOOOO!O!OOO!:_handle_allocator", &cls, &ref, &slow, &new, &PyTuple_Type, &before,
                          &PyTuple_Type, &after, &release, &kind, &PyLong_Type, &max_obj))
        return NULL;
    if (!ia_hdm_subtype(cls) || !PyWeakref_CheckRef(ref)
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
    a->vectorcall = ia_hda_call;
#define IA_HOLD(field, v) (Py_INCREF(v), a->field = (v))
    IA_HOLD(cls, cls); IA_HOLD(ref, ref); IA_HOLD(slow, slow); IA_HOLD(new, new); IA_HOLD(before, before);
    IA_HOLD(after, after); IA_HOLD(release, release); IA_HOLD(kind, kind);
#undef IA_HOLD
    a->max_bytes = max_bytes;
    a->shut = 0;
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
    if (!ia_hdm_subtype(cls) || nbytes < 1) {
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
#ifdef Py_GIL_DISABLED
    (void)args;
    PyErr_SetString(PyExc_NotImplementedError, "_handle_memory_setup: the compiled allocations need the GIL");
    return NULL;
#else
    if (!PyArg_ParseTuple(args, "OOO:_handle_memory_setup", &f, &fu, &d))
        return NULL;
    if (!(ia_hdm_type.tp_flags & Py_TPFLAGS_READY) && PyType_Ready(&ia_hdm_type) < 0)
        return NULL;
    Py_INCREF(f);
    Py_XSETREF(ia_hdm_free_py, f);
    Py_INCREF(fu);
    Py_XSETREF(ia_hdm_free_unchecked_py, fu);
    Py_INCREF(d);
    Py_XSETREF(ia_hdm_del_py, d);
    Py_INCREF(&ia_hdm_type);
    return (PyObject *)&ia_hdm_type;
#endif
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
