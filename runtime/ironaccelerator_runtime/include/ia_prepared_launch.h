/* A prepared launch in C (issue 27 item 4): vendor-neutral, hand-written (runtime/), included by ia_runtime.h (C
 * libraries: in IA_PACKAGE._fast), which adds IA_PREPARED_LAUNCH_METHODS to its module's methods.  Needs Python.h
 * and IA_PACKAGE.  generator/render.py counts this file in a library's build id.
 *
 * For a backend whose launch, once a kernel's arguments are bound, is one library call whose arguments the kernel
 * keeps (QNN: QnnGraph_execute of a graph whose tensors were bound, in place, to the arguments' memory): a
 * stream's Stream.launch and launch_unchecked run in C for the KernelLaunch the stream ran last.  On the x86 HTP
 * emulation every Python bytecode run between two ~60 us executes runs cold (~10x its usual cost): the Python
 * launch, ~20 bytecodes, cost 1.04-1.05x the raw execute; this, one C call, 1.00-1.01x.  Nothing here is spec
 * data: the library's function is the kernel's (a cffi function), called as Python would.
 *
 *   _prepared_launcher(slow, error, check) -> a launcher
 *       the stream class's launch (check true) or launch_unchecked (check false), set on the class over the
 *       Python method `slow` (called as slow(stream, *args, **kwargs)); a method descriptor, so `stream.launch`
 *       binds it as a method would (no reference cycle, no per-stream object).  `error(stream, kernel, code)`
 *       is the Error of a failed call.
 *   launcher(stream, launch)
 *       where stream._prepared is (launch, kernel, args, device) (the Python method sets it after a launch it
 *       checked and ran synchronously with no profiler, and clears it when that changes) and the device's
 *       _closed is false: under kernel._lock (acquire/release), where kernel._bound is still `args` (no other
 *       launch rebound the kernel) and no allocation of kernel._blocks is freed (._freed false),
 *       kernel._execute(*kernel._call); then the code: 0 None, else the Error raised (check) or returned.
 *       Anything else (another launch, a rebind, a freed argument, a closed device, a profiler) calls
 *       slow(stream, launch), which launches or raises (returns) its own Error, and prepares again.
 * ==================================================================================================== */
#ifndef IA_PREPARED_LAUNCH_H
#define IA_PREPARED_LAUNCH_H

#include "ia_gc.h"  /* (the C types' garbage-collector functions) */

static PyObject *ia_pl_str_closed = NULL, *ia_pl_str_prepared, *ia_pl_str_lock, *ia_pl_str_bound, *ia_pl_str_blocks,
                *ia_pl_str_freed, *ia_pl_str_execute, *ia_pl_str_call, *ia_pl_str_acquire, *ia_pl_str_release;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *slow, *error;
    int check;
} ia_pl_object;

/* an attribute's truth (0/1), or -1 with an exception set */
static int ia_pl_truth(PyObject *o, PyObject *name)
{
    int r;
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL)
        return -1;
    r = v == Py_False ? 0 : v == Py_True ? 1 : PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* under the kernel's lock: 1 where the kernel is still bound to args and none of its blocks is freed, 0 where
   not, -1 on an error */
static int ia_pl_still_bound(PyObject *kernel, PyObject *args)
{
    PyObject *bound, *blocks;
    Py_ssize_t i;
    int r = 1, f;
    if ((bound = PyObject_GetAttr(kernel, ia_pl_str_bound)) == NULL)
        return -1;
    Py_DECREF(bound);  /* (only its identity is compared) */
    if (bound != args)
        return 0;
    if ((blocks = PyObject_GetAttr(kernel, ia_pl_str_blocks)) == NULL)
        return -1;
    if (!PyTuple_CheckExact(blocks)) {
        Py_DECREF(blocks);
        return 0;
    }
    for (i = 0; i < PyTuple_GET_SIZE(blocks) && r == 1; i++)
        if ((f = ia_pl_truth(PyTuple_GET_ITEM(blocks, i), ia_pl_str_freed)) != 0)
            r = f < 0 ? -1 : 0;
    Py_DECREF(blocks);
    return r;
}

/* the prepared launch, run: 1 with *code its code (a new reference), 0 where the slow path must take it (nothing
   run), -1 with an exception set */
static int ia_pl_run(PyObject *stream, PyObject *kernel, PyObject *args, PyObject *device, PyObject **code)
{
    PyObject *lock, *fn, *call, *r, *type, *value, *tb;
    int ok;
    (void)stream;
    *code = NULL;
    if ((ok = ia_pl_truth(device, ia_pl_str_closed)) != 0)
        return ok < 0 ? -1 : 0;
    if ((lock = PyObject_GetAttr(kernel, ia_pl_str_lock)) == NULL)
        return -1;
    if ((r = PyObject_CallMethodNoArgs(lock, ia_pl_str_acquire)) == NULL) {
        ok = -1;
        goto done;
    }
    Py_DECREF(r);
    if ((ok = ia_pl_still_bound(kernel, args)) == 1) {
        fn = PyObject_GetAttr(kernel, ia_pl_str_execute);
        call = fn == NULL ? NULL : PyObject_GetAttr(kernel, ia_pl_str_call);
        if (call == NULL)
            ok = -1;
        else if (!PyTuple_CheckExact(call))
            ok = 0;
        else if ((*code = PyObject_Call(fn, call, NULL)) == NULL)
            ok = -1;
        Py_XDECREF(fn);
        Py_XDECREF(call);
    }
    PyErr_Fetch(&type, &value, &tb);  /* (released whatever happened) */
    if ((r = PyObject_CallMethodNoArgs(lock, ia_pl_str_release)) == NULL) {
        Py_CLEAR(*code);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        ok = -1;
    } else {
        Py_DECREF(r);
        PyErr_Restore(type, value, tb);
    }
done:
    Py_DECREF(lock);
    return ok;
}

static PyObject *ia_pl_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    ia_pl_object *p = (ia_pl_object *)self;
    PyObject *stream, *prepared, *code, *kernel, *err, *r = NULL;
    int ran, failed;
    if (IA_LIKELY(PyVectorcall_NARGS(nargsf) == 2 && kwnames == NULL)) {
        stream = args[0];  /* (held by the caller) */
        if ((prepared = PyObject_GetAttr(stream, ia_pl_str_prepared)) == NULL)
            return NULL;
        /* (the tuple holds its objects: Python code run from here, another thread's say, may prepare another) */
        if (PyTuple_CheckExact(prepared) && PyTuple_GET_SIZE(prepared) == 4
            && PyTuple_GET_ITEM(prepared, 0) == args[1]) {
            kernel = PyTuple_GET_ITEM(prepared, 1);
            ran = ia_pl_run(stream, kernel, PyTuple_GET_ITEM(prepared, 2), PyTuple_GET_ITEM(prepared, 3), &code);
            if (ran != 0) {
                if (ran > 0) {
                    /* the code: as the Python method's `if code:` */
                    if ((failed = code == Py_False ? 0 : PyObject_IsTrue(code)) == 0) {
                        r = Py_None;
                        Py_INCREF(r);
                    } else if (failed > 0 && (err = PyObject_CallFunctionObjArgs(p->error, stream, kernel, code,
                                                                                 NULL)) != NULL) {
                        if (p->check) {
                            PyErr_SetObject((PyObject *)Py_TYPE(err), err);
                            Py_DECREF(err);
                        } else {
                            r = err;
                        }
                    }
                    Py_DECREF(code);
                }
                Py_DECREF(prepared);
                return r;
            }
        }
        Py_DECREF(prepared);
    }
    return PyObject_Vectorcall(p->slow, args, nargsf, kwnames);  /* the Python method */
}

/* stream.launch: bound as a method (the type is a method descriptor: `stream.launch(x)` calls it unbound) */
static PyObject *ia_pl_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    if (obj == NULL || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, obj);
}

/* __doc__, __name__, __qualname__, __module__, __wrapped__: the Python method's */
static PyObject *ia_pl_slow_attr(PyObject *self, void *closure)
{
    return PyObject_GetAttrString(((ia_pl_object *)self)->slow, (const char *)closure);
}

static PyObject *ia_pl_wrapped(PyObject *self, void *Py_UNUSED(closure))
{
    PyObject *slow = ((ia_pl_object *)self)->slow;
    Py_INCREF(slow);
    return slow;
}

static const Py_ssize_t ia_pl_refs[] = {IA_MEMBER(ia_pl_object, slow), IA_MEMBER(ia_pl_object, error),
                                       IA_MEMBERS_END};
IA_GC_TRAVERSE_CLEAR(ia_pl)
IA_GC_DEALLOC(ia_pl)

static PyGetSetDef ia_pl_getset[] = {
    {"__doc__", ia_pl_slow_attr, NULL, NULL, "__doc__"},
    {"__name__", ia_pl_slow_attr, NULL, NULL, "__name__"},
    {"__qualname__", ia_pl_slow_attr, NULL, NULL, "__qualname__"},
    {"__module__", ia_pl_slow_attr, NULL, NULL, "__module__"},
    {"__wrapped__", ia_pl_wrapped, NULL, "the Python method (the slow path)", NULL},
    {NULL, NULL, NULL, NULL, NULL}
};

static PyTypeObject ia_pl_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = IA_PACKAGE "._fast._PreparedLauncher",
    .tp_basicsize = sizeof(ia_pl_object),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_vectorcall_offset = offsetof(ia_pl_object, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = ia_pl_get,
    .tp_dealloc = ia_pl_dealloc,
    .tp_traverse = ia_pl_traverse,
    .tp_clear = ia_pl_clear,
    .tp_getset = ia_pl_getset,
};

static PyObject *ia_prepared_launcher(PyObject *ia_self, PyObject *const *ia_args, Py_ssize_t ia_nargs)
{
    ia_pl_object *p;
    int check;
    (void)ia_self;
    if (ia_nargs != 3 || !PyCallable_Check(ia_args[0]) || !PyCallable_Check(ia_args[1])) {
        PyErr_SetString(PyExc_TypeError, "_prepared_launcher(slow, error, check)");
        return NULL;
    }
    if ((check = PyObject_IsTrue(ia_args[2])) < 0)
        return NULL;
    if (ia_pl_str_closed == NULL
        && ((ia_pl_str_closed = PyUnicode_InternFromString("_closed")) == NULL
            || (ia_pl_str_prepared = PyUnicode_InternFromString("_prepared")) == NULL
            || (ia_pl_str_lock = PyUnicode_InternFromString("_lock")) == NULL
            || (ia_pl_str_bound = PyUnicode_InternFromString("_bound")) == NULL
            || (ia_pl_str_blocks = PyUnicode_InternFromString("_blocks")) == NULL
            || (ia_pl_str_freed = PyUnicode_InternFromString("_freed")) == NULL
            || (ia_pl_str_execute = PyUnicode_InternFromString("_execute")) == NULL
            || (ia_pl_str_call = PyUnicode_InternFromString("_call")) == NULL
            || (ia_pl_str_acquire = PyUnicode_InternFromString("acquire")) == NULL
            || (ia_pl_str_release = PyUnicode_InternFromString("release")) == NULL))
        return NULL;
    if (!(ia_pl_type.tp_flags & Py_TPFLAGS_READY) && PyType_Ready(&ia_pl_type) < 0)
        return NULL;
    if ((p = PyObject_GC_New(ia_pl_object, &ia_pl_type)) == NULL)
        return NULL;
    p->vectorcall = ia_pl_call;
    Py_INCREF(ia_args[0]);
    p->slow = ia_args[0];
    Py_INCREF(ia_args[1]);
    p->error = ia_args[1];
    p->check = check;
    PyObject_GC_Track(p);
    return (PyObject *)p;
}

#define IA_PREPARED_LAUNCH_METHODS \
    {"_prepared_launcher", (PyCFunction)(void (*)(void))ia_prepared_launcher, METH_FASTCALL, \
     "_prepared_launcher(slow, error, check)\n--\n\nA stream class's launch (or launch_unchecked) of a stream's last " \
     "KernelLaunch in C (see ia_prepared_launch.h)."},
#define IA_PREPARED_LAUNCH_METHOD_COUNT 1

#endif /* IA_PREPARED_LAUNCH_H */
