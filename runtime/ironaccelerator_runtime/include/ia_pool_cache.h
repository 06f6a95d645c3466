/* The MemoryPool free list in C (issue 27 item 3): vendor-neutral, hand-written (runtime/), included by both
 * families' compiled modules: ia_runtime.h (C libraries: in IA_PACKAGE._fast) and ia_objc.h (Objective-C
 * libraries: in IA_PACKAGE._objc_fast), each adding IA_POOL_CACHE_METHODS to its module's methods.  Needs
 * Python.h and IA_PACKAGE.  Both generators count this file in a library's build id (generator/render.py).
 */
#ifndef IA_POOL_CACHE_H
#define IA_POOL_CACHE_H

#if defined(__GNUC__)
#ifndef IA_LIKELY
#define IA_LIKELY(x) __builtin_expect(!!(x), 1)
#endif
#ifndef IA_UNLIKELY
#define IA_UNLIKELY(x) __builtin_expect(!!(x), 0)
#endif
#else
#ifndef IA_LIKELY
#define IA_LIKELY(x) (x)
#endif
#ifndef IA_UNLIKELY
#define IA_UNLIKELY(x) (x)
#endif
#endif

/* ======================================================================================================
 * BEGIN pool free list (issue 27 item 3; branch ocl27): the vendor-neutral MemoryPool's hot path in C.
 * Nothing here calls the library: it only moves blocks between the pool's free lists (Python lists, kept in
 * MemoryPool._free by size class) and its allocations.  runtime/ironaccelerator_runtime/traits/pool.py says
 * how it is used; the Python paths there remain the reference (ABI mode runs them alone).
 *
 *   _pool_cache_setup(PooledAllocation, slots, free, delete) -> (_PoolCache, free, __del__)
 *       once per process: the PooledAllocation class, its 9 slot descriptors (pool, block, nbytes, kind, device,
 *       stream, _freed, _views, _cache: the C reads and writes them at their offsets), its Python free and
 *       Allocation.__del__ (the slow paths); returns the cache type and the compiled free (a method) and
 *       __del__ (a slot wrapper of tp_finalize), both for any object (pool.py sets them on PooledAllocation:
 *       the class's tp_finalize is then the C one, so the drop of a freed allocation runs no Python code).
 *   _PoolCache(pool, device, kind, free_lists, alloc, min_block)
 *       a pool's lock (acquire/release/with, as threading.Lock) and its compiled alloc: the hits of a size
 *       class with a free block, taken with no Python code run; anything else (a stream, a miss, a closed
 *       device, a non-int size, the lock held) calls the Python MemoryPool.alloc.  It reads the device's flags
 *       (_closed; _dirty and _fence_events, the free's fence test) from the device's __dict__ (ia_pc_flag).
 *
 * Threads: the compiled paths never take the lock; they run with the GIL held and no Python code between
 * their test of `locked` and their change of a list, so they never interleave with Python code that holds
 * the lock (which sends them to the Python path, where they wait for it).  Python code may read and change
 * the free lists only while it holds the lock, and never replaces or removes a list once in free_lists (the
 * cache keeps them).  Free-threaded builds (no GIL) get no cache: the Python paths.
 * ---------------------------------------------------------------------------------------------------- */
#include "pythread.h"
#include "structmember.h"

#include "ia_memory_common.h"  /* (ia_mem_run_finalizer, ia_call_first) */

enum { IA_PA_POOL, IA_PA_BLOCK, IA_PA_NBYTES, IA_PA_KIND, IA_PA_DEVICE, IA_PA_STREAM, IA_PA_FREED, IA_PA_VIEWS,
       IA_PA_CACHE, IA_PA_SLOTS };
static Py_ssize_t ia_pa_offset[IA_PA_SLOTS];
static PyTypeObject *ia_pa_type = NULL;  /* PooledAllocation (exactly: a subclass takes the Python paths) */
static PyObject *ia_pa_free_py = NULL;   /* PooledAllocation.free in Python: the slow path */
static PyObject *ia_pa_del_py = NULL;    /* Allocation.__del__: a pooled allocation dropped unfreed */
static PyObject *ia_pc_str_closed = NULL, *ia_pc_str_dirty, *ia_pc_str_fence_events, *ia_pc_str_tracked,
                *ia_pc_str_drop, *ia_pc_str_del;
#define IA_PA_SLOT(o, i) (*(PyObject **)((char *)(o) + ia_pa_offset[i]))
#define IA_PC_CLASSES 64

typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    char locked;                         /* the lock is held (by Python code): the compiled paths stand aside */
    PyObject *pool, *device, *kind;
    PyObject *flags;                     /* the device's __dict__, where its flags are read (ia_pc_flag), or NULL */
    PyObject *free_lists;                /* MemoryPool._free: {size class: [block, ...]} */
    PyObject *alloc;                     /* MemoryPool.alloc (the function): the slow path */
    PyObject *lists[IA_PC_CLASSES];      /* free_lists[1 << k], once seen */
    Py_ssize_t hits;
    Py_ssize_t min_block;
} ia_pc_object;

static PyTypeObject ia_pc_type;

/* the size class index of nbytes (>= 1): k with 1 << k the next power of two >= max(nbytes, min_block) */
static int ia_pc_class(ia_pc_object *c, Py_ssize_t n)
{
    size_t v = (size_t)(n > c->min_block ? n : c->min_block) - 1;
    int k = 0;
    while (v) {
        v >>= 1;
        k++;
    }
    return k;
}

/* the free list of class k (a borrowed reference), or NULL where free_lists has none yet (no error set) */
static PyObject *ia_pc_list(ia_pc_object *c, int k)
{
    PyObject *key, *list;
    if (IA_LIKELY(c->lists[k] != NULL))
        return c->lists[k];
    if (c->free_lists == NULL || k >= (int)(8 * sizeof(Py_ssize_t)) - 1
        || (key = PyLong_FromSsize_t((Py_ssize_t)1 << k)) == NULL) {
        PyErr_Clear();
        return NULL;
    }
    list = PyDict_GetItemWithError(c->free_lists, key);
    Py_DECREF(key);
    if (list == NULL || !PyList_CheckExact(list)) {
        PyErr_Clear();
        return NULL;
    }
    Py_INCREF(list);
    c->lists[k] = list;
    return list;
}

/* an attribute's truth (0/1), or -1 with an exception set */
static int ia_pc_truth(PyObject *o, PyObject *name)
{
    int r;
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL)
        return -1;
    r = v == Py_False ? 0 : v == Py_True ? 1 : PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* the truth of the device's flag `name` (_closed, _dirty, _fence_events): 0/1, or -1 with an exception set.
   Read from the device's __dict__ where the cache holds it (a dict lookup: a generic getattr costs ~3x as
   much, a third of the alloc + free pair with three of them), as getattr would find it there: the device's
   class has no data descriptor of these names (ia_pc_new checks); absent there, the class's value. */
static int ia_pc_flag(ia_pc_object *c, PyObject *name)
{
    PyObject *v;
    int r;
    if (IA_LIKELY(c->flags != NULL)) {
        if ((v = PyDict_GetItemWithError(c->flags, name)) == NULL) {
            if (PyErr_Occurred())
                return -1;
            /* not the instance's: the class's plain value (Metal's and Vulkan's _dirty, the trait's _fence_events
               until first set), as getattr finds it; a descriptor (a method, say) is getattr's to bind */
            if ((v = _PyType_Lookup(Py_TYPE(c->device), name)) == NULL || Py_TYPE(v)->tp_descr_get != NULL)
                return ia_pc_truth(c->device, name);
        }
        if (IA_LIKELY(v == Py_False || v == Py_True))
            return v == Py_True;
        if (PyList_CheckExact(v) || PyTuple_CheckExact(v))  /* (_fence_events) */
            return Py_SIZE(v) != 0;
        Py_INCREF(v);  /* (its __bool__ may change the dict) */
        r = PyObject_IsTrue(v);
        Py_DECREF(v);
        return r;
    }
    return ia_pc_truth(c->device, name);
}

/* the device's __dict__ (a new reference) where getattr finds these flags in it (a generic getattr, no data
   descriptor of theirs on its class), else NULL (no exception set) */
static PyObject *ia_pc_flags_of(PyObject *device)
{
    PyTypeObject *t = Py_TYPE(device);
    PyObject *names[3] = {ia_pc_str_closed, ia_pc_str_dirty, ia_pc_str_fence_events}, *d, *dict;
    int i;
    if (t->tp_getattro != PyObject_GenericGetAttr || t->tp_dictoffset == 0)
        return NULL;
    for (i = 0; i < 3; i++)
        if ((d = _PyType_Lookup(t, names[i])) != NULL && Py_TYPE(d)->tp_descr_set != NULL)
            return NULL;
    if ((dict = PyObject_GenericGetDict(device, NULL)) == NULL || !PyDict_CheckExact(dict)) {
        PyErr_Clear();
        Py_XDECREF(dict);
        return NULL;
    }
    return dict;
}

/* the lock: 1 acquired, 0 not (non-blocking or timed out) */
static int ia_pc_lock(ia_pc_object *c, int blocking, PY_TIMEOUT_T microseconds)
{
    PyLockStatus r = PyThread_acquire_lock_timed(c->lock, 0, 0);
    if (r != PY_LOCK_ACQUIRED && blocking) {
        Py_BEGIN_ALLOW_THREADS
        r = PyThread_acquire_lock_timed(c->lock, microseconds, 0);
        Py_END_ALLOW_THREADS
    }
    if (r != PY_LOCK_ACQUIRED)
        return 0;
    c->locked = 1;
    return 1;
}

static PyObject *ia_pc_acquire(ia_pc_object *c, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"blocking", "timeout", NULL};
    int blocking = 1;
    double timeout = -1;
    PY_TIMEOUT_T us = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|pd:acquire", names, &blocking, &timeout))
        return NULL;
    if (timeout >= 0) {
        if (!blocking) {
            PyErr_SetString(PyExc_ValueError, "can't specify a timeout for a non-blocking call");
            return NULL;
        }
        us = (PY_TIMEOUT_T)(timeout * 1e6);
    } else if (timeout != -1) {
        PyErr_SetString(PyExc_ValueError, "timeout value must be a non-negative number");
        return NULL;
    }
    return PyBool_FromLong(ia_pc_lock(c, blocking, us));
}

static PyObject *ia_pc_enter(ia_pc_object *c, PyObject *Py_UNUSED(ignored))
{
    ia_pc_lock(c, 1, -1);
    Py_RETURN_TRUE;
}

static PyObject *ia_pc_release(ia_pc_object *c, PyObject *Py_UNUSED(ignored))
{
    if (!c->locked) {
        PyErr_SetString(PyExc_RuntimeError, "release unlocked lock");
        return NULL;
    }
    c->locked = 0;
    PyThread_release_lock(c->lock);
    Py_RETURN_NONE;
}

static PyObject *ia_pc_exit(ia_pc_object *c, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    (void)nargs;
    return ia_pc_release(c, NULL);
}

static PyObject *ia_pc_locked(ia_pc_object *c, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(c->locked);
}

/* cache.alloc(nbytes, stream=None): MemoryPool.alloc (bound in the pool's __dict__ as its alloc) */
static PyObject *ia_pc_alloc(ia_pc_object *c, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *list, *block, *a;
    Py_ssize_t n, size;
    int k, closed;
    if (IA_UNLIKELY(c->pool == NULL || c->alloc == NULL)) {  /* (cleared by the collector: a cycle's last act) */
        PyErr_SetString(PyExc_RuntimeError, "MemoryPool.alloc: the pool is being collected");
        return NULL;
    }
    if (IA_UNLIKELY(kwnames != NULL || nargs < 1 || nargs > 2 || (nargs == 2 && args[1] != Py_None)
                    || !PyLong_CheckExact(args[0]) || c->device == NULL || c->kind == NULL))
        goto slow;
    n = PyLong_AsSsize_t(args[0]);
    if (IA_UNLIKELY(n <= 0)) {
        PyErr_Clear();
        goto slow;
    }
    if ((closed = ia_pc_flag(c, ia_pc_str_closed)) != 0) {
        if (closed < 0)
            return NULL;
        goto slow;  /* (raises INVALID_HANDLE) */
    }
    if ((k = ia_pc_class(c, n)) >= IA_PC_CLASSES || (list = ia_pc_list(c, k)) == NULL)
        goto slow;
    /* the object first: allocating it may collect garbage, whose finalizers may run Python code */
    if ((a = ia_pa_type->tp_alloc(ia_pa_type, 0)) == NULL)
        return NULL;
    if (IA_UNLIKELY(c->locked || (size = PyList_GET_SIZE(list)) == 0)) {
        Py_DECREF(a);  /* (its _freed is NULL: the compiled __del__ does nothing) */
        goto slow;
    }
    block = PyList_GET_ITEM(list, size - 1);  /* popped: the list's reference moves to the allocation */
    Py_SET_SIZE(list, size - 1);
    c->hits++;
    Py_INCREF(c->pool);
    IA_PA_SLOT(a, IA_PA_POOL) = c->pool;
    IA_PA_SLOT(a, IA_PA_BLOCK) = block;
    Py_INCREF(args[0]);
    IA_PA_SLOT(a, IA_PA_NBYTES) = args[0];
    Py_INCREF(c->kind);
    IA_PA_SLOT(a, IA_PA_KIND) = c->kind;
    Py_INCREF(c->device);
    IA_PA_SLOT(a, IA_PA_DEVICE) = c->device;
    Py_INCREF(Py_None);
    IA_PA_SLOT(a, IA_PA_STREAM) = Py_None;
    Py_INCREF(Py_False);
    IA_PA_SLOT(a, IA_PA_FREED) = Py_False;
    Py_INCREF(Py_None);
    IA_PA_SLOT(a, IA_PA_VIEWS) = Py_None;
    Py_INCREF(c);
    IA_PA_SLOT(a, IA_PA_CACHE) = (PyObject *)c;
    return a;
slow:
    return ia_call_first(c->alloc, c->pool, args, (size_t)nargs, kwnames);
}

/* the block of a live pool allocation ordered on no stream, back on its free list where the device's fence is
   clear (two flag tests, as the Python path: _dirty, then _fence_events), and the allocation freed: 1; 0 where
   the Python path must do it (a stream, host views, work perhaps queued, the lock held ...); -1 on an error */
static int ia_pa_push(PyObject *self)
{
    ia_pc_object *c;
    PyObject *list, *nb;
    Py_ssize_t n;
    int k, busy;
    if (IA_UNLIKELY(Py_TYPE(self) != ia_pa_type || IA_PA_SLOT(self, IA_PA_FREED) != Py_False
                    || IA_PA_SLOT(self, IA_PA_VIEWS) != Py_None || IA_PA_SLOT(self, IA_PA_STREAM) != Py_None))
        return 0;
    c = (ia_pc_object *)IA_PA_SLOT(self, IA_PA_CACHE);
    nb = IA_PA_SLOT(self, IA_PA_NBYTES);
    if (IA_UNLIKELY(c == NULL || Py_TYPE(c) != &ia_pc_type || c->device == NULL || nb == NULL
                    || !PyLong_CheckExact(nb)))
        return 0;  /* (a pool without the C, or a cache the collector cleared: the Python path) */
    if ((n = PyLong_AsSsize_t(nb)) <= 0) {
        PyErr_Clear();
        return 0;
    }
    if ((k = ia_pc_class(c, n)) >= IA_PC_CLASSES || (list = ia_pc_list(c, k)) == NULL)
        return 0;
    if ((busy = ia_pc_flag(c, ia_pc_str_dirty)) == 0)
        busy = ia_pc_flag(c, ia_pc_str_fence_events);
    if (busy != 0)
        return busy < 0 ? -1 : 0;  /* (work may be queued: the Python path fences the block) */
    if (IA_UNLIKELY(c->locked))
        return 0;
    /* no Python code runs from here: the test of `locked` holds */
    if (PyList_Append(list, IA_PA_SLOT(self, IA_PA_BLOCK)) < 0)
        return -1;
    Py_INCREF(Py_True);
    Py_SETREF(IA_PA_SLOT(self, IA_PA_FREED), Py_True);
    return 1;
}

/* PooledAllocation.free(self, stream=None): ia_pa_push, else the Python free */
static PyObject *ia_pa_free(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    int r;
    if (IA_LIKELY(kwnames == NULL && (nargs == 0 || (nargs == 1 && args[0] == Py_None)))) {
        if ((r = ia_pa_push(self)) > 0)
            Py_RETURN_NONE;
        if (r < 0)
            return NULL;
    }
    return ia_call_first(ia_pa_free_py, self, args, (size_t)nargs, kwnames);
}

/* PooledAllocation.__del__'s work for an allocation dropped unfreed: ia_pa_push where it is tracked and releases
   by _release (no _drop); else Allocation.__del__ (`del_py`) */
static PyObject *ia_pa_del(PyObject *del_py, PyObject *self)
{
    PyObject *drop;
    int r;
    if (Py_TYPE(self) == ia_pa_type && IA_PA_SLOT(self, IA_PA_FREED) == Py_False) {
        if ((r = ia_pc_truth(self, ia_pc_str_tracked)) <= 0) {
            if (r == 0)
                Py_RETURN_NONE;  /* (untracked: nothing, as Allocation.__del__) */
            return NULL;
        }
        if ((drop = PyObject_GetAttr(self, ia_pc_str_drop)) == NULL)
            return NULL;
        Py_DECREF(drop);
        if (drop == Py_None && (r = ia_pa_push(self)) != 0) {
            if (r < 0)
                return NULL;
            Py_RETURN_NONE;
        }
    }
    return PyObject_CallOneArg(del_py, self);
}

/* PooledAllocation's tp_finalize (its __del__, a slot wrapper: see ia_pool_cache_setup), run by every drop: a
   pointer test once freed (the hot path: no Python code, no lookup of __del__), else ia_pa_del */
static void ia_pa_finalize(PyObject *self)
{
    PyObject *freed;
    if (IA_LIKELY(PyObject_TypeCheck(self, ia_pa_type))) {
        freed = IA_PA_SLOT(self, IA_PA_FREED);
        if (IA_LIKELY(freed == Py_True || freed == NULL))
            return;  /* (NULL: an allocation never made, see ia_pc_alloc) */
    }
    ia_mem_run_finalizer(self, ia_pa_del, ia_pa_del_py);
}

/* a never-made type whose tp_finalize gives ia_pool_cache_setup the __del__ slot's wrapperbase (CPython's, for a
   slot wrapper of ia_pa_finalize) */
static PyTypeObject ia_pa_finalizer_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = IA_PACKAGE "._PooledFinalizer",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .tp_doc = "(ia_pool_cache.h: the slot of PooledAllocation.__del__)",
    .tp_finalize = ia_pa_finalize,
};

static int ia_pc_traverse(PyObject *self, visitproc visit, void *arg)
{
    ia_pc_object *c = (ia_pc_object *)self;
    int k;
    Py_VISIT(c->pool);
    Py_VISIT(c->device);
    Py_VISIT(c->kind);
    Py_VISIT(c->flags);
    Py_VISIT(c->free_lists);
    Py_VISIT(c->alloc);
    for (k = 0; k < IA_PC_CLASSES; k++)
        Py_VISIT(c->lists[k]);
    return 0;
}

static int ia_pc_clear(PyObject *self)
{
    ia_pc_object *c = (ia_pc_object *)self;
    int k;
    Py_CLEAR(c->pool);
    Py_CLEAR(c->device);
    Py_CLEAR(c->kind);
    Py_CLEAR(c->flags);
    Py_CLEAR(c->free_lists);
    Py_CLEAR(c->alloc);
    for (k = 0; k < IA_PC_CLASSES; k++)
        Py_CLEAR(c->lists[k]);
    return 0;
}

static void ia_pc_dealloc(PyObject *self)
{
    ia_pc_object *c = (ia_pc_object *)self;
    PyObject_GC_UnTrack(self);
    ia_pc_clear(self);
    if (c->lock != NULL) {
        if (c->locked)
            PyThread_release_lock(c->lock);
        PyThread_free_lock(c->lock);
    }
    Py_TYPE(self)->tp_free(self);
}

static PyObject *ia_pc_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"pool", "device", "kind", "free_lists", "alloc", "min_block", NULL};
    PyObject *pool, *device, *kind, *lists, *alloc;
    Py_ssize_t min_block;
    ia_pc_object *c;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO!On:_PoolCache", names, &pool, &device, &kind,
                                     &PyDict_Type, &lists, &alloc, &min_block))
        return NULL;
    if (ia_pa_type == NULL || min_block < 1) {
        PyErr_SetString(PyExc_RuntimeError, "_PoolCache: _pool_cache_setup first; min_block >= 1");
        return NULL;
    }
    if ((c = (ia_pc_object *)type->tp_alloc(type, 0)) == NULL)
        return NULL;
    if ((c->lock = PyThread_allocate_lock()) == NULL) {
        Py_DECREF(c);
        PyErr_SetString(PyExc_MemoryError, "cannot allocate lock");
        return NULL;
    }
    Py_INCREF(pool);
    c->pool = pool;
    Py_INCREF(device);
    c->device = device;
    Py_INCREF(kind);
    c->kind = kind;
    c->flags = ia_pc_flags_of(device);
    Py_INCREF(lists);
    c->free_lists = lists;
    Py_INCREF(alloc);
    c->alloc = alloc;
    c->min_block = min_block;
    return (PyObject *)c;
}

static PyMethodDef ia_pc_methods[] = {
    {"alloc", (PyCFunction)(void (*)(void))ia_pc_alloc, METH_FASTCALL | METH_KEYWORDS,
     "alloc(nbytes, stream=None)\n--\n\nMemoryPool.alloc: a cached block in C, else the Python path."},
    {"acquire", (PyCFunction)(void (*)(void))ia_pc_acquire, METH_VARARGS | METH_KEYWORDS,
     "acquire(blocking=True, timeout=-1)\n--\n\nTake the pool's lock (as threading.Lock.acquire)."},
    {"release", (PyCFunction)ia_pc_release, METH_NOARGS, "Release the pool's lock."},
    {"locked", (PyCFunction)ia_pc_locked, METH_NOARGS, "Whether the pool's lock is held."},
    {"__enter__", (PyCFunction)ia_pc_enter, METH_NOARGS, "Take the pool's lock."},
    {"__exit__", (PyCFunction)(void (*)(void))ia_pc_exit, METH_FASTCALL, "Release the pool's lock."},
    {NULL, NULL, 0, NULL}
};

static PyMemberDef ia_pc_members[] = {
    {"hits", T_PYSSIZET, offsetof(ia_pc_object, hits), READONLY, "allocations the compiled path served"},
    {NULL, 0, 0, 0, NULL}
};

static PyTypeObject ia_pc_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = IA_PACKAGE "._PoolCache",
    .tp_basicsize = sizeof(ia_pc_object),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A MemoryPool's lock and its compiled alloc (see ia_runtime.h, 'pool free list').",
    .tp_new = ia_pc_new,
    .tp_dealloc = ia_pc_dealloc,
    .tp_traverse = ia_pc_traverse,
    .tp_clear = ia_pc_clear,
    .tp_methods = ia_pc_methods,
    .tp_members = ia_pc_members,
};

static PyMethodDef ia_pa_free_def = {
    "free", (PyCFunction)(void (*)(void))ia_pa_free, METH_FASTCALL | METH_KEYWORDS,
    "free(stream=None)\n--\n\nGive the block back to the pool, in the order of ``stream`` (default: the stream it "
    "was allocated on); see the Python PooledAllocation.free (traits/pool.py), which this runs for all but a "
    "block allocated and freed with no stream on an idle device."};

static PyObject *ia_pool_cache_setup(PyObject *ia_self, PyObject *const *ia_args, Py_ssize_t ia_nargs)
{
    PyObject *slots, *free_d, *del_d, *r;
    Py_ssize_t i;
    (void)ia_self;
#ifdef Py_GIL_DISABLED
    (void)ia_args;
    (void)ia_nargs;
    PyErr_SetString(PyExc_NotImplementedError, "_pool_cache_setup: the compiled pool needs the GIL");
    return NULL;
#else
    if (ia_nargs != 4 || !PyType_Check(ia_args[0]) || !PyTuple_CheckExact(ia_args[1])
        || PyTuple_GET_SIZE(ia_args[1]) != IA_PA_SLOTS) {
        PyErr_SetString(PyExc_TypeError, "_pool_cache_setup(PooledAllocation, slots: tuple of 9 slot descriptors, "
                        "free, delete)");
        return NULL;
    }
    slots = ia_args[1];
    for (i = 0; i < IA_PA_SLOTS; i++) {
        PyObject *d = PyTuple_GET_ITEM(slots, i);
        PyMemberDef *m;
        if (!Py_IS_TYPE(d, &PyMemberDescr_Type)
            || (m = ((PyMemberDescrObject *)d)->d_member)->type != T_OBJECT_EX || (m->flags & READONLY)) {
            PyErr_SetString(PyExc_TypeError, "_pool_cache_setup: each slot must be a writable __slots__ member");
            return NULL;
        }
        ia_pa_offset[i] = m->offset;
    }
    if (ia_pc_str_closed == NULL
        && ((ia_pc_str_closed = PyUnicode_InternFromString("_closed")) == NULL
            || (ia_pc_str_dirty = PyUnicode_InternFromString("_dirty")) == NULL
            || (ia_pc_str_fence_events = PyUnicode_InternFromString("_fence_events")) == NULL
            || (ia_pc_str_tracked = PyUnicode_InternFromString("_tracked")) == NULL
            || (ia_pc_str_drop = PyUnicode_InternFromString("_drop")) == NULL
            || (ia_pc_str_del = PyUnicode_InternFromString("__del__")) == NULL))
        return NULL;
    if (PyType_Ready(&ia_pc_type) < 0 || PyType_Ready(&ia_pa_finalizer_type) < 0)
        return NULL;
    /* __del__: a slot wrapper of ia_pa_finalize for any object (as the free below), so that setting it on the
       class makes ia_pa_finalize its tp_finalize (and its subclasses'), as a C base type's would be; a method
       would leave the class CPython's slot_tp_finalize, which looks __del__ up and calls it on every drop */
    del_d = PyDict_GetItemWithError(ia_pa_finalizer_type.tp_dict, ia_pc_str_del);  /* (borrowed) */
    if (del_d == NULL || !Py_IS_TYPE(del_d, &PyWrapperDescr_Type)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "_pool_cache_setup: no __del__ slot wrapper");
        return NULL;
    }
    if ((del_d = PyDescr_NewWrapper(&PyBaseObject_Type, ((PyWrapperDescrObject *)del_d)->d_base,
                                    (void *)ia_pa_finalize)) == NULL)
        return NULL;
    if ((free_d = PyDescr_NewMethod(&PyBaseObject_Type, &ia_pa_free_def)) == NULL) {
        Py_DECREF(del_d);
        return NULL;
    }
    Py_INCREF(ia_args[0]);
    Py_XSETREF(ia_pa_type, (PyTypeObject *)ia_args[0]);
    Py_INCREF(ia_args[2]);
    Py_XSETREF(ia_pa_free_py, ia_args[2]);
    Py_INCREF(ia_args[3]);
    Py_XSETREF(ia_pa_del_py, ia_args[3]);
    r = PyTuple_Pack(3, (PyObject *)&ia_pc_type, free_d, del_d);
    Py_DECREF(free_d);
    Py_DECREF(del_d);
    return r;
#endif
}
#define IA_POOL_CACHE_METHODS \
    {"_pool_cache_setup", (PyCFunction)(void (*)(void))ia_pool_cache_setup, METH_FASTCALL, \
     "_pool_cache_setup(PooledAllocation, slots, free, delete)\n--\n\nThe compiled MemoryPool free list (see " \
     "ia_runtime.h): returns (_PoolCache, free, __del__)."},
#define IA_POOL_CACHE_METHOD_COUNT 1
/* END pool free list (issue 27 item 3; branch ocl27)
 * ==================================================================================================== */

#endif /* IA_POOL_CACHE_H */
