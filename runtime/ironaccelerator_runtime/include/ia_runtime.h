/* The vendor-neutral C of every generated library's cffi module: hand-written (runtime/), not generated.
 *
 * A library's trampolines.c (rendered from templates/library/trampolines.c.j2) defines its tables and
 * configuration, includes this file, then defines its per-function trampolines, its checked fast paths and
 * ia_fast_methods:
 *
 *   IA_COUNT, IA_SENTINEL, IA_PACKAGE, IA_FAST_COUNT    function count, failure sentinel, module, fast paths
 *   ia_symbol[], ia_symbol_per_thread[]                  each function's exported (and _ptds/_ptsz) symbol
 *   IA_RESOLVER                                          how a function is found once its library is open:
 *     IA_RESOLVER_DLSYM          dlsym of its symbol
 *     IA_RESOLVER_PROC_ADDRESS   the library's resolver (cuGetProcAddress) with the function's ABI pin, then
 *                                dlsym: ia_public[], ia_pin[], IA_PROC_SYMBOL, IA_PROC_INDEX,
 *                                IA_PROC_DEFAULT_FLAG, IA_PROC_PER_THREAD_FLAG, IA_PROC_STATUS_PARAM
 *     IA_RESOLVER_LOOKUP         the library's lookup by name (IA_LOOKUP_SYMBOL, function IA_LOOKUP_INDEX, of
 *                                the shape void (*)(void) (scope, const char *name)) asked with a NULL scope
 *                                for ia_public[i], then dlsym
 *     (a resolver kind is declared in resolver_kinds.py: trampolines.c defines IA_RESOLVER_VIA, its function
 *      void *via(int i) asked first for function i (NULL: dlsym of its symbol), and IA_RESOLVER_FORGET, its
 *      void forget(void) (ia_dlforget); the code of a kind not in this file follows it in trampolines.c)
 *     IA_RESOLVER_TABLE          the library exports only a provider function (IA_TABLE_PROVIDER_SYMBOL,
 *                                function IA_TABLE_PROVIDER_INDEX, of type ia_table_provider_t, taking an
 *                                ia_table_list_t and an ia_table_count_t *) listing ia_table_interface_t structs;
 *                                the first whose IA_TABLE_MAJOR(p) is IA_TABLE_REQUIRE_MAJOR, IA_TABLE_MINOR(p)
 *                                at least IA_TABLE_REQUIRE_MINOR and each IA_TABLE_MATCH(X) X(member, value)
 *                                equal is selected; every other function is the pointer at ia_table_offset[i]
 *                                in it, when its IA_TABLE_MINOR is at least ia_table_since[i]; never dlsym
 *   IA_LAUNCH (0/1)  the kernel-launch fast paths (_fast._launch, and the prepared launcher _fast._launcher):
 *                    IA_LAUNCH_INDEX, IA_LAUNCH_MAX_ARGS, IA_LAUNCH_MAX_BYTES,
 *                    IA_LAUNCH_RESULT, IA_LAUNCH_DIMS(X) (X(C type, i) for the 7 dimensions) and
 *                    IA_LAUNCH_CALL(function, d0, ..., d6, stream, params)
 *   IA_POOL (0/1)    stream-ordered pool memory: IA_POOL_ALLOC_INDEX, IA_POOL_FREE_INDEX, IA_POOL_DEVPTR,
 *                    IA_POOL_ALLOC_RESULT, IA_POOL_FREE_RESULT, IA_POOL_ALLOC_CALL(&out, nbytes, pool, stream),
 *                    IA_POOL_FREE_CALL(ptr, stream)
 *   IA_DEVMEM (0/1)  device memory (Device.alloc): IA_DEVMEM_ALLOC_INDEX, IA_DEVMEM_FREE_INDEX, IA_DEVMEM_DEVPTR,
 *                    IA_DEVMEM_ALLOC_RESULT, IA_DEVMEM_FREE_RESULT, IA_DEVMEM_BOUND,
 *                    IA_DEVMEM_ALLOCATE(&out, nbytes, bound, &status), IA_DEVMEM_FREE_CALL(ptr)
 *   IA_HOSTCOPY (0/1) host copies (Stream.copy_from_host/copy_to_host, with IA_DEVMEM): IA_HOSTCOPY_WRITE_INDEX,
 *                    IA_HOSTCOPY_READ_INDEX, IA_HOSTCOPY_RESULT, IA_HOSTCOPY_WRITE(queue, buffer, n, host),
 *                    IA_HOSTCOPY_READ(queue, buffer, n, host)
 *   the prototypes of the trampolines IA_LAUNCH_CALL / IA_POOL_*_CALL / IA_DEVMEM_*_CALL / IA_HOSTCOPY_* name
 *   (defined after this file)
 *
 * cffi compiles trampolines.c after Python.h; _cffi_build.py puts this directory on the include path and
 * counts this file in the library's build id.
 */
#ifndef IA_RUNTIME_H
#define IA_RUNTIME_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef _WIN32
#include <windows.h>
#else
#include <dlfcn.h>
#endif

#include "ia_gc.h"  /* (the C types' garbage-collector functions) */

#define IA_RESOLVER_DLSYM 0
#define IA_RESOLVER_PROC_ADDRESS 1
#define IA_RESOLVER_TABLE 2
#define IA_RESOLVER_LOOKUP 3
#ifndef IA_RESOLVER
#define IA_RESOLVER IA_RESOLVER_DLSYM
#endif
#ifndef IA_LAUNCH
#define IA_LAUNCH 0
#endif
#ifndef IA_POOL
#define IA_POOL 0
#endif
#ifndef IA_DEVMEM
#define IA_DEVMEM 0
#endif
#ifndef IA_HOSTCOPY
#define IA_HOSTCOPY 0
#endif

#if defined(__GNUC__)
#define IA_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define IA_UNLIKELY(x) (x)
#endif

/* ------------------------------------------------------------------------------------------------------
 * Loading: the library is opened on the first call of any of its functions (ia_open_library, in Python,
 * tries the candidate paths through ia_dlopen); each function is resolved on its own first call.
 * ---------------------------------------------------------------------------------------------------- */
static void *ia_handle = NULL;
static int ia_per_thread = 0;
static char ia_error[512];
static void *ia_ptr[IA_COUNT > 0 ? IA_COUNT : 1];
static unsigned char ia_state[IA_COUNT > 0 ? IA_COUNT : 1]; /* 0 unresolved, 1 resolved, 2 missing */
static void *ia_dlsym(const char *name);
#ifdef IA_RESOLVER_VIA
static void *IA_RESOLVER_VIA(int i);
#endif
#ifdef IA_RESOLVER_FORGET
static void IA_RESOLVER_FORGET(void);
#endif

#if IA_RESOLVER == IA_RESOLVER_PROC_ADDRESS
#if IA_PROC_STATUS_PARAM
typedef int (*ia_proc_t)(const char *, void **, int, unsigned long long, int *);
#else
typedef int (*ia_proc_t)(const char *, void **, int, unsigned long long);
#endif
static void *ia_proc = NULL;
static int ia_proc_state = 0; /* 0 unresolved, 1 resolved, 2 missing */

static void *ia_via_proc(int i)
{
    void *fp = NULL;
    unsigned long long flags = ia_per_thread ? IA_PROC_PER_THREAD_FLAG : IA_PROC_DEFAULT_FLAG;
    if (ia_pin[i] <= 0 || i == IA_PROC_INDEX)
        return NULL;
    if (ia_proc_state == 0) {
        ia_proc = ia_dlsym(IA_PROC_SYMBOL);
        ia_proc_state = ia_proc != NULL ? 1 : 2;
    }
    if (ia_proc == NULL)
        return NULL;
#if IA_PROC_STATUS_PARAM
    {
        int status = 0;
        if (((ia_proc_t)ia_proc)(ia_public[i], &fp, ia_pin[i], flags, &status) != 0)
            return NULL;
    }
#else
    if (((ia_proc_t)ia_proc)(ia_public[i], &fp, ia_pin[i], flags) != 0)
        return NULL;
#endif
    return fp;
}

static void ia_forget_proc(void)
{
    ia_proc = NULL;
    ia_proc_state = 0;
}
#endif

#if IA_RESOLVER == IA_RESOLVER_LOOKUP
typedef void (*(*ia_lookup_t)(void *, const char *))(void);
static void *ia_lookup = NULL;
static int ia_lookup_state = 0; /* 0 unresolved, 1 resolved, 2 missing */

static void *ia_via_lookup(int i)
{
    if (i == IA_LOOKUP_INDEX)
        return NULL;
    if (ia_lookup_state == 0) {
        ia_lookup = ia_dlsym(IA_LOOKUP_SYMBOL);
        ia_lookup_state = ia_lookup != NULL ? 1 : 2;
    }
    if (ia_lookup == NULL)
        return NULL;
    return (void *)((ia_lookup_t)ia_lookup)(NULL, ia_public[i]);
}

static void ia_forget_lookup(void)
{
    ia_lookup = NULL;
    ia_lookup_state = 0;
}
#endif

#if IA_RESOLVER == IA_RESOLVER_TABLE
static const ia_table_interface_t *ia_table = NULL; /* the selected provider */
static int ia_table_state = 0;                      /* 0 not yet asked, 1 asked (ia_table set, or NULL: none) */
#if defined(__GNUC__)
#define IA_TABLE_ASKED() __atomic_load_n(&ia_table_state, __ATOMIC_ACQUIRE)
#define IA_TABLE_SET_ASKED() __atomic_store_n(&ia_table_state, 1, __ATOMIC_RELEASE)
#else
#define IA_TABLE_ASKED() (*(volatile int *)&ia_table_state)
#define IA_TABLE_SET_ASKED() (*(volatile int *)&ia_table_state = 1)
#endif

#define IA_TABLE_EQ_(member, value) &&p->member == (value)
static int ia_table_selects(const ia_table_interface_t *p)
{
    return IA_TABLE_MAJOR(p) == IA_TABLE_REQUIRE_MAJOR && IA_TABLE_MINOR(p) >= IA_TABLE_REQUIRE_MINOR
        IA_TABLE_MATCH(IA_TABLE_EQ_);
}

/* The provider is asked once.  An entry is missing, as a symbol the library does not export is (the Python side,
   Binding.load_error, names the entry), when it is NULL (the provider does not implement the function) or newer
   than the provider's minor: tables grow by appending entries, so an older provider's may end before it and is
   never read there. */
static void *ia_via_table(int i)
{
    void *fn = NULL;
    if (!IA_TABLE_ASKED()) {
        const ia_table_interface_t **list = NULL, *chosen = NULL;
        ia_table_count_t n = 0, k;
        void *get = ia_dlsym(IA_TABLE_PROVIDER_SYMBOL);
        if (get != NULL && ((ia_table_provider_t)get)((ia_table_list_t)&list, &n) == 0 && list != NULL) {
            for (k = 0; k < n && chosen == NULL; k++) {
                if (list[k] != NULL && ia_table_selects(list[k]))
                    chosen = list[k];
            }
        }
        ia_table = chosen; /* published before the state: a concurrent first call asks again, never sees "none" */
        IA_TABLE_SET_ASKED();
    }
    if (ia_table == NULL || i < 0 || i >= IA_COUNT || i == IA_TABLE_PROVIDER_INDEX
        || IA_TABLE_MINOR(ia_table) < ia_table_since[i])
        return NULL;
    memcpy(&fn, (const char *)ia_table + ia_table_offset[i], sizeof fn);
    return fn;
}
#endif

static int ia_open_library(void);  /* extern "Python": tries the candidate paths via ia_dlopen */

static int ia_dlopen(const char *path)
{
    void *h;
#ifdef _WIN32
    h = (void *)LoadLibraryA(path);
    if (h == NULL) { strncpy(ia_error, "LoadLibrary failed", sizeof ia_error - 1); return 1; }
#else
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) { const char *e = dlerror(); strncpy(ia_error, e ? e : "dlopen failed", sizeof ia_error - 1); return 1; }
#endif
    ia_handle = h;
    return 0;
}

static const char *ia_dlerror(void) { return ia_error; }

static void *ia_dlsym(const char *name)
{
#ifdef _WIN32
    return (void *)GetProcAddress((HMODULE)ia_handle, name);
#else
    return dlsym(ia_handle, name);
#endif
}

static void *ia_resolve(int i)
{
    const char *name;
    void *p = NULL;
    if (ia_handle == NULL && ia_open_library() != 0)
        return NULL;
    if (ia_handle == NULL)
        return NULL;
#ifdef IA_RESOLVER_VIA
    p = IA_RESOLVER_VIA(i);
#endif
#if IA_RESOLVER == IA_RESOLVER_TABLE
    if (i != IA_TABLE_PROVIDER_INDEX) { /* a table entry or nothing: never the exported symbol */
        p = ia_via_table(i);
        ia_state[i] = p != NULL ? 1 : 2;
        ia_ptr[i] = p;
        return p;
    }
#endif
    if (p == NULL) {
        name = (ia_per_thread && ia_symbol_per_thread[i] != NULL) ? ia_symbol_per_thread[i] : ia_symbol[i];
        p = ia_dlsym(name);
    }
    ia_state[i] = p != NULL ? 1 : 2;
    ia_ptr[i] = p;
    return p;
}

static int ia_status(int i)
{
    if (i < 0 || i >= IA_COUNT)
        return 2;
    if (ia_ptr[i] != NULL || ia_resolve(i) != NULL)
        return 0;
    return ia_handle == NULL ? 1 : 2;
}

static void ia_set_per_thread(int enabled)
{
    ia_per_thread = enabled;
    memset(ia_ptr, 0, sizeof ia_ptr);
    memset(ia_state, 0, sizeof ia_state);
}

/* Forget the file just opened (the loader's abi_major refused it: another major version than the headers'), and
   all that was resolved in it, so that ia_open_library goes on to the next candidate.  It is not closed: a runtime
   that started threads when asked its version may not unload safely. */
static void ia_dlforget(void)
{
    ia_handle = NULL;
    memset(ia_ptr, 0, sizeof ia_ptr);
    memset(ia_state, 0, sizeof ia_state);
#ifdef IA_RESOLVER_FORGET
    IA_RESOLVER_FORGET();
#endif
#if IA_RESOLVER == IA_RESOLVER_TABLE
    ia_table = NULL;
    ia_table_state = 0;
#endif
}

/* ------------------------------------------------------------------------------------------------------
 * Checked fast path: the checked wrappers of functions (numbers, strings, handles, structs, arrays, nullable
 * pointers: wrappers.fast_path says which shapes) as CPython functions (generated per function, after this
 * file).  Each one does what its Python wrapper in __init__.py does -- same arguments (positional or keyword;
 * trailing nullable ones default to None), same results, same exceptions -- without running Python bytecode:
 * converts the arguments as cffi does (numbers here, C data with cffi's own functions: see ia_ct below),
 * calls the trampoline with the GIL released,
 * and on a failure status asks the Python side (BINDING.error in _binding.py, imported on the first
 * failure) for the exception.  ia_install_fast() registers them as the module IA_PACKAGE._fast, whose
 * functions __init__.py binds in place of the Python wrappers in API mode.  _cffi_build.py turns off
 * Py_LIMITED_API (METH_FASTCALL is not in the 3.2 stable ABI).
 * ---------------------------------------------------------------------------------------------------- */
#if defined(__GNUC__)
#define IA_LIKELY(x) __builtin_expect(!!(x), 1)
#else
#define IA_LIKELY(x) (x)
#endif

/* integer traits of a C type (enums included), as cffi's _cffi_to_c_int uses them */
#define IA_SIGNED(T) ((T)-1 < (T)0)
#define IA_SMAX(T) ((long long)(~0ULL >> (65 - 8 * sizeof(T))))
#define IA_SMIN(T) (-IA_SMAX(T) - 1)
#define IA_UMAX(T) (~0ULL >> (64 - 8 * sizeof(T)))
#define IA_FROM_INT(T, v) \
    (IA_SIGNED(T) ? PyLong_FromLongLong((long long)(v)) : PyLong_FromUnsignedLongLong((unsigned long long)(v)))
/* o converted into dst as cffi converts an argument of integer (or floating) type T; on failure (an exception
   set) the statement `fail` runs: `return NULL`, or in the generated fast paths `goto ia_done` (IA_IN_*) */
#define IA_ARG_INT_OR(T, o, dst, fail)                                                          \
    do {                                                                                        \
        if (IA_SIGNED(T)) {                                                                     \
            long long ia_s_;                                                                    \
            if (ia_arg_signed((o), IA_SMIN(T), IA_SMAX(T), #T, &ia_s_) < 0)                     \
                fail;                                                                           \
            (dst) = (T)ia_s_;                                                                   \
        } else {                                                                                \
            unsigned long long ia_u_;                                                           \
            if (ia_arg_unsigned((o), IA_UMAX(T), #T, &ia_u_) < 0)                               \
                fail;                                                                           \
            (dst) = (T)ia_u_;                                                                   \
        }                                                                                       \
    } while (0)
#define IA_ARG_FLOAT_OR(T, o, dst, fail)                                                        \
    do {                                                                                        \
        double ia_d_ = PyFloat_AsDouble(o);                                                     \
        if (ia_d_ == -1.0 && PyErr_Occurred())                                                  \
            fail;                                                                               \
        (dst) = (T)ia_d_;                                                                       \
    } while (0)
#define IA_ARG_INT(T, o, dst) IA_ARG_INT_OR(T, o, dst, return NULL)
#define IA_ARG_FLOAT(T, o, dst) IA_ARG_FLOAT_OR(T, o, dst, return NULL)
#define IA_IN_INT(T, o, dst) IA_ARG_INT_OR(T, o, dst, goto ia_done)
#define IA_IN_FLOAT(T, o, dst) IA_ARG_FLOAT_OR(T, o, dst, goto ia_done)
/* an inout number: ffi.new("T *", o) (the Python wrapper's _new) takes None as 0 */
#define IA_INOUT_INT(T, o, dst)                                                                 \
    do {                                                                                        \
        if ((o) == Py_None)                                                                     \
            (dst) = 0;                                                                          \
        else                                                                                    \
            IA_IN_INT(T, o, dst);                                                               \
    } while (0)
#define IA_INOUT_FLOAT(T, o, dst)                                                               \
    do {                                                                                        \
        if ((o) == Py_None)                                                                     \
            (dst) = 0;                                                                          \
        else                                                                                    \
            IA_IN_FLOAT(T, o, dst);                                                             \
    } while (0)
/* a length (len(items), never negative) as the integer argument of type T, or OverflowError as cffi */
#define IA_IN_LEN(T, n, dst)                                                                    \
    do {                                                                                        \
        if (IA_UNLIKELY((unsigned long long)(n) > (IA_SIGNED(T) ? (unsigned long long)IA_SMAX(T) : IA_UMAX(T)))) { \
            PyErr_Format(PyExc_OverflowError, "integer %zd does not fit '%s'", (Py_ssize_t)(n), #T); \
            goto ia_done;                                                                       \
        }                                                                                       \
        (dst) = (T)(n);                                                                         \
    } while (0)

/* o as a Python int the way cffi accepts integers: int and its subclasses (IntEnum), or anything with
   __int__ that is not a float; a new reference, or NULL with TypeError set */
static PyObject *ia_int_object(PyObject *o)
{
    PyNumberMethods *nb = Py_TYPE(o)->tp_as_number;
    PyObject *r;
    if (PyFloat_Check(o) || nb == NULL || nb->nb_int == NULL) {
        PyErr_SetString(PyExc_TypeError, "an integer is required");
        return NULL;
    }
    r = nb->nb_int(o);
    if (r != NULL && !PyLong_Check(r)) {
        Py_DECREF(r);
        PyErr_SetString(PyExc_TypeError, "__int__ returned non-int");
        return NULL;
    }
    return r;
}

static int ia_arg_signed(PyObject *o, long long lo, long long hi, const char *ctype, long long *out)
{
    PyObject *io = NULL;
    long long v;
    int overflow = 0;
    if (IA_UNLIKELY(!PyLong_Check(o))) {
        if ((io = ia_int_object(o)) == NULL)
            return -1;
        o = io;
    }
    v = PyLong_AsLongLongAndOverflow(o, &overflow);
    Py_XDECREF(io);
    if (IA_UNLIKELY(overflow != 0)) {
        PyErr_SetString(PyExc_OverflowError, "int too big to convert");
        return -1;
    }
    if (IA_UNLIKELY(v == -1 && PyErr_Occurred()))
        return -1;
    if (IA_UNLIKELY(v < lo || v > hi)) {
        PyErr_Format(PyExc_OverflowError, "integer %lld does not fit '%s'", v, ctype);
        return -1;
    }
    *out = v;
    return 0;
}

static int ia_arg_unsigned(PyObject *o, unsigned long long hi, const char *ctype, unsigned long long *out)
{
    PyObject *io = NULL;
    unsigned long long v;
    long long s;
    int overflow = 0;
    if (IA_UNLIKELY(!PyLong_Check(o))) {
        if ((io = ia_int_object(o)) == NULL)
            return -1;
        o = io;
    }
    s = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (IA_LIKELY(overflow == 0 && s >= 0)) {
        v = (unsigned long long)s;
    } else if (overflow > 0) {
        v = PyLong_AsUnsignedLongLong(o);  /* 2**63 .. 2**64-1, or OverflowError */
    } else {
        if (overflow != 0 || !PyErr_Occurred())
            PyErr_SetString(PyExc_OverflowError, "can't convert negative number to unsigned");
        v = (unsigned long long)-1;
    }
    Py_XDECREF(io);
    if (IA_UNLIKELY(v == (unsigned long long)-1 && PyErr_Occurred()))
        return -1;
    if (IA_UNLIKELY(v > hi)) {
        PyErr_Format(PyExc_OverflowError, "integer %llu does not fit '%s'", v, ctype);
        return -1;
    }
    *out = v;
    return 0;
}

/* Positional and keyword arguments into out[0..n-1] (the slow path: keywords, or a wrong count); the
   parameters from `required` on default to None (the Python wrappers' trailing nullable parameters). */
static int ia_fast_args(const char *fname, const char *const *names, Py_ssize_t n, Py_ssize_t required,
                        PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    Py_ssize_t i, k, nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs > n) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd positional argument%s but %zd %s given", fname, n,
                     n == 1 ? "" : "s", nargs, nargs == 1 ? "was" : "were");
        return -1;
    }
    for (i = 0; i < n; i++)
        out[i] = i < nargs ? args[i] : NULL;
    for (k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        for (i = 0; i < n; i++)
            if (PyUnicode_CompareWithASCIIString(key, names[i]) == 0)
                break;
        if (i == n) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fname, key);
            return -1;
        }
        if (out[i] != NULL) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fname, names[i]);
            return -1;
        }
        out[i] = args[nargs + k];
    }
    for (i = 0; i < n; i++) {
        if (out[i] == NULL && i >= required) {
            out[i] = Py_None;
        } else if (out[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", fname, names[i]);
            return -1;
        }
    }
    return 0;
}

/* a NUL-terminated string as str, decoded like the Python wrappers' _str(): UTF-8, "replace"; NULL is "" */
static PyObject *ia_str(const char *s)
{
    if (s == NULL)
        return PyUnicode_FromStringAndSize("", 0);
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

/* a char[size] buffer as str: up to its first NUL, or all of it (as ffi.string on a char array) */
static PyObject *ia_str_n(const char *s, size_t size)
{
    const char *end = (const char *)memchr(s, 0, size);
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)(end != NULL ? (size_t)(end - s) : size), "replace");
}

/* a tuple that steals items[0..n-1]; if any is NULL (an error is set), releases the others */
static PyObject *ia_tuple(Py_ssize_t n, PyObject **items)
{
    PyObject *t = NULL;
    Py_ssize_t i;
    for (i = 0; i < n; i++)
        if (items[i] == NULL)
            goto fail;
    if ((t = PyTuple_New(n)) == NULL)
        goto fail;
    for (i = 0; i < n; i++)
        PyTuple_SET_ITEM(t, i, items[i]);
    return t;
fail:
    for (i = 0; i < n; i++)
        Py_XDECREF(items[i]);
    return NULL;
}

static PyObject *ia_fast_binding = NULL; /* IA_PACKAGE._binding.BINDING, imported on the first failure */

static PyObject *ia_fast_get_binding(void)
{
    PyObject *mod, *b;
    if (ia_fast_binding != NULL)
        return ia_fast_binding;
    if ((mod = PyImport_ImportModule(IA_PACKAGE "._binding")) == NULL)
        return NULL;
    b = PyObject_GetAttrString(mod, "BINDING");
    Py_DECREF(mod);
    if (b == NULL)
        return NULL;
    if (ia_fast_binding == NULL)
        ia_fast_binding = b;
    else
        Py_DECREF(b);
    return ia_fast_binding;
}

/* raise BINDING.error(code, index) (the Python wrappers' `raise _error(_r, index)`); steals code; NULL */
/* raise err, an exception instance (a new reference, stolen) */
static void ia_raise(PyObject *err)
{
    if (PyExceptionInstance_Check(err))
        PyErr_SetObject((PyObject *)Py_TYPE(err), err);
    else
        PyErr_SetString(PyExc_TypeError, "exceptions must derive from BaseException");
    Py_DECREF(err);
}

static PyObject *ia_fast_fail(PyObject *code, int index)
{
    PyObject *b, *err;
    if (code == NULL)
        return NULL;
    if ((b = ia_fast_get_binding()) == NULL || Py_EnterRecursiveCall(" while building an error")) {
        Py_DECREF(code);
        return NULL;
    }
    err = PyObject_CallMethod(b, "error", "Oi", code, index);
    Py_LeaveRecursiveCall();
    Py_DECREF(code);
    if (err != NULL)
        ia_raise(err);
    return NULL;
}

/* BINDING.require(index): raises the loader error of a function that cannot be called; -1 if it did */
static int ia_fast_require(int index)
{
    PyObject *b, *r;
    if ((b = ia_fast_get_binding()) == NULL)
        return -1;
    if ((r = PyObject_CallMethod(b, "require", "i", index)) == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* raise BINDING.error_with_log(code, index, IA_PACKAGE.<log_function>, arg) (the Python wrappers'
   `raise _error(_r, index, _detail(log_function, arg))`: the log read by the module's function); steals code */
static PyObject *ia_fast_fail_log(PyObject *code, int index, const char *log_function, PyObject *arg)
{
    PyObject *b, *mod, *fn = NULL, *err;
    if (code == NULL)
        return NULL;
    if ((b = ia_fast_get_binding()) == NULL || (mod = PyImport_ImportModule(IA_PACKAGE)) == NULL) {
        Py_DECREF(code);
        return NULL;
    }
    fn = PyObject_GetAttrString(mod, log_function);
    Py_DECREF(mod);
    if (fn == NULL || Py_EnterRecursiveCall(" while building an error")) {
        Py_XDECREF(fn);
        Py_DECREF(code);
        return NULL;
    }
    err = PyObject_CallMethod(b, "error_with_log", "OiOO", code, index, fn, arg);
    Py_LeaveRecursiveCall();
    Py_DECREF(fn);
    Py_DECREF(code);
    if (err != NULL)
        ia_raise(err);
    return NULL;
}

/* raise BINDING.invalid(index, message): the INVALID_VALUE Error a Python wrapper raises itself (arrays whose
   lengths differ); -1 */
/* errors.null_handle: NULL passed for handle `param` of function `index` (Binding.null_handle builds the Error) */
static int ia_fast_null(int index, const char *param)
{
    PyObject *b, *err;
    if ((b = ia_fast_get_binding()) == NULL)
        return -1;
    if ((err = PyObject_CallMethod(b, "null_handle", "is", index, param)) != NULL)
        ia_raise(err);
    return -1;
}

static int ia_fast_invalid(int index, const char *message)
{
    PyObject *b, *err;
    if ((b = ia_fast_get_binding()) == NULL)
        return -1;
    if ((err = PyObject_CallMethod(b, "invalid", "is", index, message)) != NULL)
        ia_raise(err);
    return -1;
}

/* ------------------------------------------------------------------------------------------------------
 * C data (handles, pointers, structs) in the fast paths, converted by cffi's own functions (_cffi_exports,
 * set up when the cffi module was imported) with the C types of the library's cffi functions, so that a
 * fast path takes and returns exactly what its Python wrapper does:
 *
 *   ia_ctrefs[k]  (defined in trampolines.c, IA_CT_COUNT entries)  which C type ia_ct[k] is: argument `arg`
 *                 (-1: the result) of the cffi function `function`, or the type it points to (`item`)
 *   ia_ct[k]      that ctype (ffi.typeof(lib.<function>).args[arg][.item]), loaded on a fast path's first
 *                 call (ia_ct_load) and kept; IA_CT(k) is it as cffi's C functions take it
 * ---------------------------------------------------------------------------------------------------- */
#ifndef IA_CT_COUNT
#define IA_CT_COUNT 0
#endif
typedef struct {
    const char *function;  /* the cffi function's public name */
    int arg;               /* its argument, or -1 for its result */
    int item;              /* 1: the type that one points to */
} ia_ctref;
static const ia_ctref ia_ctrefs[IA_CT_COUNT > 0 ? IA_CT_COUNT : 1];
static PyObject *ia_ct[IA_CT_COUNT > 0 ? IA_CT_COUNT : 1];
#define IA_CT(k) ((struct _cffi_ctypedescr *)ia_ct[k])
static PyObject *ia_ffi = NULL, *ia_lib = NULL, *ia_ffi_new = NULL, *ia_zero = NULL; /* IA_PACKAGE._cffi's */

static int ia_ffi_load(void)
{
    PyObject *mod, *ffi = NULL, *lib = NULL, *fnew = NULL, *zero = NULL;
    if (ia_ffi != NULL)
        return 0;
    if ((mod = PyImport_ImportModule(IA_PACKAGE "._cffi")) == NULL)
        return -1;
    ffi = PyObject_GetAttrString(mod, "ffi");
    lib = PyObject_GetAttrString(mod, "lib");
    Py_DECREF(mod);
    if (ffi != NULL)
        fnew = PyObject_GetAttrString(ffi, "new");
    zero = PyLong_FromLong(0);
    if (ffi == NULL || lib == NULL || fnew == NULL || zero == NULL || ia_ffi != NULL) {
        Py_XDECREF(ffi);
        Py_XDECREF(lib);
        Py_XDECREF(fnew);
        Py_XDECREF(zero);
        return ia_ffi != NULL ? 0 : -1;
    }
    ia_lib = lib;
    ia_ffi_new = fnew;
    ia_zero = zero;
    ia_ffi = ffi;
    return 0;
}

/* ia_ct[k .. k+n-1] (one fast path's types), ia_ct[k] last: a fast path tests only that one */
static int ia_ct_load(int k, int n)
{
    int i;
    if (ia_ffi_load() < 0)
        return -1;
    for (i = n - 1; i >= 0; i--) {
        const ia_ctref *r = &ia_ctrefs[k + i];
        PyObject *fn, *ft, *t = NULL, *args;
        if (ia_ct[k + i] != NULL)
            continue;
        if ((fn = PyObject_GetAttrString(ia_lib, r->function)) == NULL)
            return -1;
        ft = PyObject_CallMethod(ia_ffi, "typeof", "O", fn);
        Py_DECREF(fn);
        if (ft == NULL)
            return -1;
        if (r->arg < 0) {
            t = PyObject_GetAttrString(ft, "result");
        } else if ((args = PyObject_GetAttrString(ft, "args")) != NULL) {
            t = PySequence_GetItem(args, r->arg);
            Py_DECREF(args);
        }
        Py_DECREF(ft);
        if (t != NULL && r->item) {
            PyObject *item = PyObject_GetAttrString(t, "item");
            Py_DECREF(t);
            t = item;
        }
        if (t == NULL)
            return -1;
        if (ia_ct[k + i] == NULL)
            ia_ct[k + i] = t;  /* kept for the module's life */
        else
            Py_DECREF(t);
    }
    return 0;
}

/* A pointer (or array) argument as cffi's compiled call converts it: a cdata of a compatible type, or what
   initialises an array of the pointed-to type (a list, a tuple; bytes for char *), copied into storage
   chained on *freeme (released with ia_free_args once the call returned); 0, or -1 with an exception */
static int ia_arg_ptr(struct _cffi_ctypedescr *ct, PyObject *o, char **dst, struct _cffi_freeme_s **freeme)
{
    Py_ssize_t size = _cffi_prepare_pointer_call_argument(ct, o, dst);
    if (IA_LIKELY(size == 0))
        return 0;
    if (size < 0)
        return -1;
    *dst = NULL;
    return _cffi_convert_array_argument(ct, o, dst, size, freeme);
}

static void ia_free_args(struct _cffi_freeme_s *freeme)
{
    if (freeme != NULL)
        _cffi_free_array_arguments(freeme);
}

/* ffi.new(ct) or ffi.new(ct, init) (init NULL: none): the owning cdata the Python wrappers' _new makes */
static PyObject *ia_new(PyObject *ct, PyObject *init)
{
    PyObject *argv[2];
    argv[0] = ct;
    argv[1] = init;
    return PyObject_Vectorcall(ia_ffi_new, argv, init != NULL ? 2 : 1, NULL);
}

/* p[0] of an owning cdata pointer (for a struct: the struct, which keeps the memory alive) */
static PyObject *ia_item0(PyObject *p)
{
    return PyObject_GetItem(p, ia_zero);
}

/* The array a Python wrapper builds with c_array(ffi, item, items, keep[, terminated]) (loader.py): NULL for
   None; else the items (and a zero one if terminated), every str or bytes first made a char[] cdata (kept
   alive in *keep), then converted as ffi.new("item[]", values) converts them.  The storage is PyMem_Calloc'ed
   into *mem (PyMem_Free it).  0, or -1 with an exception. */
static int ia_array(PyObject *items, PyObject *item_ct, size_t item_size, int terminated, void **mem,
                    PyObject **keep)
{
    static PyObject *char_array = NULL;
    PyObject *seq, *values, *x;
    Py_ssize_t i, count;
    char *p;
    int rc = -1;
    if (items == Py_None)
        return 0;
    if ((seq = PySequence_Fast(items, "an array argument must be iterable")) == NULL)
        return -1;
    values = seq;
    count = PySequence_Fast_GET_SIZE(seq);
    for (i = 0; i < count; i++) {
        PyObject *b, *c;
        x = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyUnicode_Check(x) && !PyBytes_Check(x))
            continue;
        if (values == seq && (values = PySequence_List(seq)) == NULL)
            goto done;
        if (*keep == NULL && (*keep = PyList_New(0)) == NULL)
            goto done;
        if (char_array == NULL && (char_array = PyObject_CallMethod(ia_ffi, "typeof", "s", "char[]")) == NULL)
            goto done;
        if ((b = PyUnicode_Check(x) ? PyUnicode_AsUTF8String(x) : (Py_INCREF(x), x)) == NULL)
            goto done;
        c = ia_new(char_array, b);
        Py_DECREF(b);
        if (c == NULL || PyList_Append(*keep, c) < 0) {
            Py_XDECREF(c);
            goto done;
        }
        PyList_SET_ITEM(values, i, c);  /* steals c's reference; the str was the list's, released */
        Py_DECREF(x);
    }
    if ((p = (char *)PyMem_Calloc((size_t)count + (terminated ? 1 : 0) + (count == 0), item_size)) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    *mem = p;
    for (i = 0; i < count; i++)
        if (_cffi_to_c(p + (size_t)i * item_size, (struct _cffi_ctypedescr *)item_ct,
                       PySequence_Fast_GET_ITEM(values, i)) < 0)
            goto done;
    rc = 0;
done:
    if (values != seq)
        Py_DECREF(values);
    Py_DECREF(seq);
    return rc;
}

#if IA_LAUNCH
/* ------------------------------------------------------------------------------------------------------
 * Kernel-launch fast path: _fast._launch(layouts, args, check, function, dims, stream) packs a launch's
 * arguments and calls the library's launch function through IA_LAUNCH_CALL (the backend's Stream.launch, in API mode).  The Python side keeps
 * the state and the reference packer (pack_args); this is only its hot loop.
 *
 *   layouts   dict: tuple of the arguments' types -> layout (bytes), filled by the backend for each tuple
 *             of types it has checked against the kernel's parameters
 *   args      tuple: the KernelLaunch's arguments
 *   check     whether the launch is checked (the Python side's path); either way an allocation whose ._freed
 *             is true is not launched (its address may be other memory by now: the Python side raises or
 *             returns the Error), and a tuple of another length has another key, so a missing argument
 *             never finds a layout
 *   function  int: the kernel's handle;  dims: 7 ints (grid x y z, block x y z, shared bytes);
 *   stream    int: the stream's handle
 *
 * A layout is a uint32 total size, then per argument: uint8 kind, uint8 0, uint16 size, uint32 offset,
 * little-endian.  Kind 0: an allocation, its .ptr (an int) as 8 bytes; kind 1: an object with the buffer
 * protocol (a numpy scalar) of exactly `size` bytes.  The values are packed into a buffer on the C stack
 * (the driver copies them before it returns), so there is no shared state and no lock.
 *
 * Returns the launch's status (an int), or None when it did not launch: no layout for these types, a
 * freed allocation, or a value it cannot read; the Python side then takes its own path,
 * which launches or raises its own error.
 * ---------------------------------------------------------------------------------------------------- */
#define IA_LAUNCH_ALLOC 0
#define IA_LAUNCH_BUFFER 1

static PyObject *ia_launch_str_ptr = NULL, *ia_launch_str_freed = NULL;

static unsigned long ia_le(const unsigned char *p, int n)
{
    unsigned long v = 0;
    while (n-- > 0)
        v = (v << 8) | p[n];
    return v;
}

static PyObject *ia_launch_bad_layout(void)
{
    PyErr_SetString(PyExc_ValueError, "_launch: a malformed argument layout");
    return NULL;
}

static PyObject *ia_launch(PyObject *ia_self, PyObject *const *ia_args, Py_ssize_t ia_nargs)
{
    union { unsigned char b[IA_LAUNCH_MAX_BYTES]; long double ld; long long ll; void *p; } ia_st;
    void *ia_params[IA_LAUNCH_MAX_ARGS];
    PyObject *ia_key, *ia_layout, *ia_a, *ia_v, *ia_dims;
    const unsigned char *ia_rec;
    Py_ssize_t ia_n, ia_i;
    unsigned long ia_total, ia_size, ia_off;
    unsigned long long ia_u;
    void *ia_func, *ia_stream;
    Py_buffer ia_view;
    int ia_check;
#define IA_DECLARE_DIM(T, i) T ia_d##i;
    IA_LAUNCH_DIMS(IA_DECLARE_DIM)
#undef IA_DECLARE_DIM
    IA_LAUNCH_RESULT ia_r;
    (void)ia_self;
    if (IA_UNLIKELY(ia_nargs != 6 || !PyDict_Check(ia_args[0]) || !PyTuple_CheckExact(ia_args[1])
                    || !PyTuple_CheckExact(ia_args[4]) || PyTuple_GET_SIZE(ia_args[4]) != 7)) {
        PyErr_SetString(PyExc_TypeError, "_launch(layouts: dict, args: tuple, check, function: int, "
                        "dims: 7-tuple, stream: int)");
        return NULL;
    }
    if (IA_UNLIKELY(ia_launch_str_freed == NULL)) {
        if ((ia_launch_str_ptr = PyUnicode_InternFromString("ptr")) == NULL)
            return NULL;
        if ((ia_launch_str_freed = PyUnicode_InternFromString("_freed")) == NULL)
            return NULL;
    }
    ia_n = PyTuple_GET_SIZE(ia_args[1]);
    if (ia_n > IA_LAUNCH_MAX_ARGS)
        Py_RETURN_NONE;
    if ((ia_check = PyObject_IsTrue(ia_args[2])) < 0)  /* (validated; the freed test is made either way) */
        return NULL;
    (void)ia_check;
    /* the layout of these argument types */
    if ((ia_key = PyTuple_New(ia_n)) == NULL)
        return NULL;
    for (ia_i = 0; ia_i < ia_n; ia_i++) {
        PyObject *ia_t = (PyObject *)Py_TYPE(PyTuple_GET_ITEM(ia_args[1], ia_i));
        Py_INCREF(ia_t);
        PyTuple_SET_ITEM(ia_key, ia_i, ia_t);
    }
    ia_layout = PyDict_GetItemWithError(ia_args[0], ia_key);
    Py_DECREF(ia_key);
    if (ia_layout == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    if (!PyBytes_Check(ia_layout) || PyBytes_GET_SIZE(ia_layout) != 4 + 8 * ia_n)
        return ia_launch_bad_layout();
    /* held: reading an argument's attributes can run Python code that changes the dict */
    Py_INCREF(ia_layout);
    ia_rec = (const unsigned char *)PyBytes_AS_STRING(ia_layout);
    ia_total = ia_le(ia_rec, 4);
    if (ia_total > IA_LAUNCH_MAX_BYTES)
        goto bad_layout;
    /* the values, each at its offset in ia_st */
    for (ia_i = 0; ia_i < ia_n; ia_i++) {
        const unsigned char *r = ia_rec + 4 + 8 * ia_i;
        ia_size = ia_le(r + 2, 2);
        ia_off = ia_le(r + 4, 4);
        if (ia_off > ia_total || ia_size > ia_total - ia_off)
            goto bad_layout;
        ia_a = PyTuple_GET_ITEM(ia_args[1], ia_i);
        if (r[0] == IA_LAUNCH_ALLOC) {
            int ia_freed;
            if (ia_size != 8)
                goto bad_layout;
            if ((ia_v = PyObject_GetAttr(ia_a, ia_launch_str_freed)) == NULL)
                goto not_launched;
            ia_freed = ia_v == Py_False ? 0 : PyObject_IsTrue(ia_v);  /* (a bool: no call) */
            Py_DECREF(ia_v);
            if (ia_freed != 0)
                goto not_launched;
            if ((ia_v = PyObject_GetAttr(ia_a, ia_launch_str_ptr)) == NULL)
                goto not_launched;
            ia_u = PyLong_Check(ia_v) ? PyLong_AsUnsignedLongLong(ia_v) : (unsigned long long)-1;
            Py_DECREF(ia_v);
            if (ia_u == (unsigned long long)-1)
                goto not_launched;  /* not an int, negative, too big (or really ~0: let Python pack it) */
            memcpy(ia_st.b + ia_off, &ia_u, 8);
        } else if (r[0] == IA_LAUNCH_BUFFER) {
            if (PyObject_GetBuffer(ia_a, &ia_view, PyBUF_SIMPLE) < 0)
                goto not_launched;
            if ((unsigned long)ia_view.len != ia_size) {
                PyBuffer_Release(&ia_view);
                goto not_launched;
            }
            memcpy(ia_st.b + ia_off, ia_view.buf, ia_size);
            PyBuffer_Release(&ia_view);
        } else {
            goto bad_layout;
        }
        ia_params[ia_i] = ia_st.b + ia_off;
    }
    Py_DECREF(ia_layout);
    ia_dims = ia_args[4];
#define IA_CONVERT_DIM(T, i) IA_ARG_INT(T, PyTuple_GET_ITEM(ia_dims, i), ia_d##i);
    IA_LAUNCH_DIMS(IA_CONVERT_DIM)
#undef IA_CONVERT_DIM
    ia_func = PyLong_AsVoidPtr(ia_args[3]);
    if (ia_func == NULL && PyErr_Occurred())
        return NULL;
    ia_stream = PyLong_AsVoidPtr(ia_args[5]);
    if (ia_stream == NULL && PyErr_Occurred())
        return NULL;
    if (IA_UNLIKELY(ia_status(IA_LAUNCH_INDEX) != 0) && ia_fast_require(IA_LAUNCH_INDEX) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    ia_r = IA_LAUNCH_CALL(ia_func, ia_d0, ia_d1, ia_d2, ia_d3, ia_d4, ia_d5, ia_d6, ia_stream, ia_n ? ia_params : NULL);
    Py_END_ALLOW_THREADS
    return IA_FROM_INT(IA_LAUNCH_RESULT, ia_r);
not_launched:
    Py_DECREF(ia_layout);
    PyErr_Clear();
    Py_RETURN_NONE;
bad_layout:
    Py_DECREF(ia_layout);
    return ia_launch_bad_layout();
}
/* ------------------------------------------------------------------------------------------------------
 * The prepared launch: _launcher(ref, slow, error, dim_args, gone, kernel_type, launch_type, tls, key,
 * stream, check) makes the callable a backend's stream binds as its launch (check true) or launch_unchecked
 * (check false).  It keeps the last KernelLaunch it launched, prepared: its arguments packed (into the
 * launcher's own buffer, by the layout _launch uses), its allocations, its kernel's handle and its 7
 * dimensions.  Calling it with that same KernelLaunch again is one C call: the device current on this
 * thread (tls.key is key), none of the allocations freed (._freed false), then the launch function, with
 * no Python object made.  Another KernelLaunch is prepared first (the kernel of exactly kernel_type, its
 * arguments a tuple, the dimensions converted once per LaunchDims by dim_args(stream, dims, check), the
 * layout found in kernel._layouts for the arguments' types); what it cannot prepare or launch here (a
 * first launch of these types, a freed allocation, another thread's device, dimensions dim_args refuses,
 * another thread inside this launcher, a call that is not one KernelLaunch) takes slow(stream, launch),
 * the Python method, which launches or raises (returns) its own Error.
 *
 *   ref       a weak reference to the stream (the stream holds the launcher: no cycle);  a dead stream:
 *             gone(check) is the Error (raised checked, returned unchecked)
 *   error     error(stream, status, kernel, dims): the failed launch's Error (checked: it raises)
 *   stream    int: the stream's handle
 *
 * _forget() drops the prepared launch (and what it holds); _shut() too, and every later call takes slow.
 * _pause(True) drops it too and sends every call to slow until _pause(False) (a capturing stream: its slow
 * path records the launch's allocations into the graph); a launcher _shut stays shut.
 * ---------------------------------------------------------------------------------------------------- */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *ref, *slow, *error, *dim_args, *gone, *kernel_type, *launch_type, *tls, *key;
    void *stream;
    int check, busy, shut;  /* shut: 1 _shut(), 2 _pause(True) (either: every call takes slow) */
    /* the prepared launch (last NULL: none) and what its preparation found, reused by the next one */
    PyObject *last;         /* the KernelLaunch */
    PyObject *kernel;       /* its kernel; func its handle */
    PyObject *dims;         /* its LaunchDims; d0..d6 its launch arguments */
    PyObject *layouts;      /* its kernel's _layouts, types the key found in it, layout the layout */
    PyObject *types, *layout;
    void *func;
#define IA_DECLARE_DIM(T, i) T d##i;
    IA_LAUNCH_DIMS(IA_DECLARE_DIM)
#undef IA_DECLARE_DIM
    Py_ssize_t nargs, nallocs;
    PyObject *allocs[IA_LAUNCH_MAX_ARGS];  /* borrowed: last's arguments */
    void *params[IA_LAUNCH_MAX_ARGS];
    union { unsigned char b[IA_LAUNCH_MAX_BYTES]; long double ld; long long ll; void *p; } st;
} ia_launcher;

static PyObject *ia_launch_str_key = NULL, *ia_launch_str_layouts = NULL, *ia_launch_str_address = NULL;

static void ia_launcher_forget(ia_launcher *l)
{
    Py_CLEAR(l->last);
    Py_CLEAR(l->kernel);
    Py_CLEAR(l->dims);
    Py_CLEAR(l->layouts);
    Py_CLEAR(l->types);
    Py_CLEAR(l->layout);
    l->nargs = l->nallocs = 0;
}

/* whether the stream's device is current on this thread (tls.key is key): 1, 0, -1 with an exception */
static int ia_launcher_current(ia_launcher *l)
{
    PyObject *cur = PyObject_GetAttr(l->tls, ia_launch_str_key);
    int same;
    if (cur == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();  /* nothing current on this thread yet */
        return 0;
    }
    same = cur == l->key ? 1 : PyObject_RichCompareBool(cur, l->key, Py_EQ);
    Py_DECREF(cur);
    return same;
}

/* the values of args packed by layout into l's buffer: 1; 0 when they cannot be (a freed allocation, a value
   it cannot read: no exception); -1 with an exception (a malformed layout) */
static int ia_launcher_pack(ia_launcher *l, PyObject *args, PyObject *layout)
{
    const unsigned char *rec = (const unsigned char *)PyBytes_AS_STRING(layout);
    Py_ssize_t n = PyTuple_GET_SIZE(args), i;
    unsigned long total = ia_le(rec, 4), size, off;
    unsigned long long u;
    PyObject *a, *v;
    Py_buffer view;
    if (total > IA_LAUNCH_MAX_BYTES)
        goto bad_layout;
    l->nallocs = 0;
    for (i = 0; i < n; i++) {
        const unsigned char *r = rec + 4 + 8 * i;
        size = ia_le(r + 2, 2);
        off = ia_le(r + 4, 4);
        if (off > total || size > total - off)
            goto bad_layout;
        a = PyTuple_GET_ITEM(args, i);
        if (r[0] == IA_LAUNCH_ALLOC) {
            if (size != 8)
                goto bad_layout;
            if ((v = PyObject_GetAttr(a, ia_launch_str_ptr)) == NULL)
                goto not_packed;
            u = PyLong_Check(v) ? PyLong_AsUnsignedLongLong(v) : (unsigned long long)-1;
            Py_DECREF(v);
            if (u == (unsigned long long)-1)
                goto not_packed;  /* as _launch */
            memcpy(l->st.b + off, &u, 8);
            l->allocs[l->nallocs++] = a;
        } else if (r[0] == IA_LAUNCH_BUFFER) {
            if (PyObject_GetBuffer(a, &view, PyBUF_SIMPLE) < 0)
                goto not_packed;
            if ((unsigned long)view.len != size) {
                PyBuffer_Release(&view);
                goto not_packed;
            }
            memcpy(l->st.b + off, view.buf, size);
            PyBuffer_Release(&view);
        } else {
            goto bad_layout;
        }
        l->params[i] = l->st.b + off;
    }
    l->nargs = n;
    return 1;
not_packed:
    PyErr_Clear();
    return 0;
bad_layout:
    ia_launch_bad_layout();
    return -1;
}

/* prepare `launch` (not l->last), with l->busy set (what it calls may run Python code): 1 prepared; 0 it
   takes the slow path (no exception); -1 an exception */
static int ia_launcher_prepare(ia_launcher *l, PyObject *launch, PyObject *stream)
{
    PyObject *kernel, *dims, *args, *layouts, *types = NULL, *layout, *v;
    Py_ssize_t n, i;
    int rc;
    if (Py_TYPE(launch) != (PyTypeObject *)l->launch_type || PyTuple_GET_SIZE(launch) != 3)
        return 0;
    kernel = PyTuple_GET_ITEM(launch, 0);
    dims = PyTuple_GET_ITEM(launch, 1);
    args = PyTuple_GET_ITEM(launch, 2);
    if (Py_TYPE(kernel) != (PyTypeObject *)l->kernel_type || !PyTuple_CheckExact(args)
        || (n = PyTuple_GET_SIZE(args)) > IA_LAUNCH_MAX_ARGS)
        return 0;
    Py_CLEAR(l->last);  /* (from here on l's buffer is rewritten) */
    /* the kernel's handle and layouts */
    if (kernel != l->kernel) {
        void *func;
        if ((v = PyObject_GetAttr(kernel, ia_launch_str_address)) == NULL)
            goto not_prepared;
        func = PyLong_Check(v) ? PyLong_AsVoidPtr(v) : NULL;
        Py_DECREF(v);
        if (func == NULL)
            goto not_prepared;
        if ((layouts = PyObject_GetAttr(kernel, ia_launch_str_layouts)) == NULL)
            goto not_prepared;
        if (!PyDict_CheckExact(layouts)) {
            Py_DECREF(layouts);
            return 0;
        }
        Py_INCREF(kernel);
        Py_XSETREF(l->kernel, kernel);
        Py_XSETREF(l->layouts, layouts);
        Py_CLEAR(l->types);
        Py_CLEAR(l->layout);
        l->func = func;
    }
    /* its dimensions, converted once per LaunchDims */
    if (dims != l->dims) {
        PyObject *d = PyObject_CallFunctionObjArgs(l->dim_args, stream, dims, l->check ? Py_True : Py_False, NULL);
        if (d == NULL)
            goto not_prepared;  /* (the slow path raises or returns the same Error) */
        if (!PyTuple_CheckExact(d) || PyTuple_GET_SIZE(d) != 7) {  /* None: launch options */
            Py_DECREF(d);
            return 0;
        }
        Py_CLEAR(l->dims);  /* (d0..d6 are rewritten: none of them are l->dims' until all are) */
#define IA_CONVERT_DIM(T, i) IA_ARG_INT_OR(T, PyTuple_GET_ITEM(d, i), l->d##i, { Py_DECREF(d); goto not_prepared; });
        IA_LAUNCH_DIMS(IA_CONVERT_DIM)
#undef IA_CONVERT_DIM
        Py_DECREF(d);
        Py_INCREF(dims);
        Py_XSETREF(l->dims, dims);
    }
    /* the layout of these argument types (the last one found, while the types are the same) */
    if (l->types != NULL && PyTuple_GET_SIZE(l->types) == n) {
        for (i = 0; i < n; i++)
            if (PyTuple_GET_ITEM(l->types, i) != (PyObject *)Py_TYPE(PyTuple_GET_ITEM(args, i)))
                break;
    } else {
        i = -1;
    }
    if (i != n) {
        Py_CLEAR(l->types);
        Py_CLEAR(l->layout);
        if ((types = PyTuple_New(n)) == NULL)
            return -1;
        for (i = 0; i < n; i++) {
            PyObject *t = (PyObject *)Py_TYPE(PyTuple_GET_ITEM(args, i));
            Py_INCREF(t);
            PyTuple_SET_ITEM(types, i, t);
        }
        layout = PyDict_GetItemWithError(l->layouts, types);
        if (layout == NULL) {
            Py_DECREF(types);
            return PyErr_Occurred() ? -1 : 0;
        }
        if (!PyBytes_Check(layout) || PyBytes_GET_SIZE(layout) != 4 + 8 * n) {
            Py_DECREF(types);
            ia_launch_bad_layout();
            return -1;
        }
        Py_INCREF(layout);
        l->layout = layout;
        l->types = types;
    }
    layout = l->layout;
    Py_INCREF(layout);
    rc = ia_launcher_pack(l, args, layout);
    Py_DECREF(layout);
    if (rc <= 0)
        return rc;
    Py_INCREF(launch);
    l->last = launch;
    return 1;
not_prepared:
    PyErr_Clear();
    return 0;
}

static PyObject *ia_launcher_slow(ia_launcher *l, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *stream = PyWeakref_GetObject(l->ref), *r, *small[3];
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (stream == NULL)
        return NULL;
    if (stream == Py_None) {  /* the stream is gone (and destroyed) */
        r = PyObject_CallOneArg(l->gone, l->check ? Py_True : Py_False);
        if (r != NULL && l->check) {
            ia_raise(r);
            return NULL;
        }
        return r;
    }
    Py_INCREF(stream);
    if (n == 1 && kwnames == NULL) {
        small[1] = stream;
        small[2] = args[0];
        r = PyObject_Vectorcall(l->slow, small + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    } else {
        PyObject *bound = PyMethod_New(l->slow, stream);
        r = bound == NULL ? NULL : PyObject_Vectorcall(bound, args, nargsf, kwnames);
        Py_XDECREF(bound);
    }
    Py_DECREF(stream);
    return r;
}

static PyObject *ia_launcher_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames);

/* ---- launch(kernel, dims, *args) (issue 27; cuda.core's launch(stream, config, kernel, *args)): the
   KernelLaunch (kernel, dims, args) built here, as launch_type's own __new__ would, then launched as one */
static PyObject *ia_launcher_call_parts(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    ia_launcher *l = (ia_launcher *)self;
    PyTypeObject *lt = (PyTypeObject *)l->launch_type;
    PyObject *launch, *rest, *r;
    Py_ssize_t i;
    if ((rest = PyTuple_New(n - 2)) == NULL)
        return NULL;
    for (i = 2; i < n; i++) {
        Py_INCREF(args[i]);
        PyTuple_SET_ITEM(rest, i - 2, args[i]);
    }
    if ((launch = lt->tp_alloc(lt, 3)) == NULL) {
        Py_DECREF(rest);
        return NULL;
    }
    Py_INCREF(args[0]);
    PyTuple_SET_ITEM(launch, 0, args[0]);
    Py_INCREF(args[1]);
    PyTuple_SET_ITEM(launch, 1, args[1]);
    PyTuple_SET_ITEM(launch, 2, rest);  /* (stolen) */
    r = ia_launcher_call(self, &launch, 1, NULL);
    Py_DECREF(launch);
    return r;
}
/* ---- (end of launch(kernel, dims, *args)) */

static PyObject *ia_launcher_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    ia_launcher *l = (ia_launcher *)self;
    PyObject *launch, *stream;
    Py_ssize_t i;
    int rc;
    IA_LAUNCH_RESULT r;
    if (IA_UNLIKELY(PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL || l->busy || l->shut)) {
        if (PyVectorcall_NARGS(nargsf) >= 2 && kwnames == NULL && Py_TYPE(args[0]) == (PyTypeObject *)l->kernel_type)
            return ia_launcher_call_parts(self, args, PyVectorcall_NARGS(nargsf));
        return ia_launcher_slow(l, args, nargsf, kwnames);
    }
    launch = args[0];
    stream = PyWeakref_GET_OBJECT(l->ref);
    if (IA_UNLIKELY(stream == Py_None))
        return ia_launcher_slow(l, args, nargsf, kwnames);
    /* (busy from here on: what this calls may run Python code, which finds the launcher in use) */
    l->busy = 1;
    if (IA_UNLIKELY(launch != l->last)) {
        Py_INCREF(stream);
        rc = ia_launcher_prepare(l, launch, stream);
        Py_DECREF(stream);
        if (rc <= 0)
            goto fail_or_slow;
    }
    /* the prepared launch: the device current here, its allocations live */
    if (IA_UNLIKELY((rc = ia_launcher_current(l)) <= 0))
        goto fail_or_slow;  /* (the slow path makes the device current) */
    for (i = 0; i < l->nallocs; i++) {
        PyObject *f = PyObject_GetAttr(l->allocs[i], ia_launch_str_freed);
        int freed;
        if (f == NULL)
            goto clear_slow;
        freed = f == Py_False ? 0 : PyObject_IsTrue(f);
        Py_DECREF(f);
        if (freed != 0)
            goto clear_slow;  /* (the slow path raises or returns INVALID_HANDLE) */
    }
    if (IA_UNLIKELY(ia_status(IA_LAUNCH_INDEX) != 0) && ia_fast_require(IA_LAUNCH_INDEX) < 0) {
        l->busy = 0;
        return NULL;
    }
    /* another thread finds the launcher busy (the GIL is released) and takes the slow path */
    Py_BEGIN_ALLOW_THREADS
    r = IA_LAUNCH_CALL(l->func, l->d0, l->d1, l->d2, l->d3, l->d4, l->d5, l->d6, l->stream,
                       l->nargs ? l->params : NULL);
    Py_END_ALLOW_THREADS
    l->busy = 0;
    if (IA_LIKELY(r == 0))
        Py_RETURN_NONE;
    {
        PyObject *code = IA_FROM_INT(IA_LAUNCH_RESULT, r), *e;
        if (code == NULL)
            return NULL;
        Py_INCREF(launch);  /* (error may run anything) */
        Py_INCREF(stream);
        e = PyObject_CallFunctionObjArgs(l->error, stream, code, PyTuple_GET_ITEM(launch, 0),
                                         PyTuple_GET_ITEM(launch, 1), NULL);
        Py_DECREF(stream);
        Py_DECREF(launch);
        Py_DECREF(code);
        return e;  /* (checked: it raised) */
    }
fail_or_slow:
    if (rc < 0) {
        l->busy = 0;
        return NULL;
    }
    goto slow;
clear_slow:
    PyErr_Clear();
slow:
    l->busy = 0;
    return ia_launcher_slow(l, args, nargsf, kwnames);
}

static PyObject *ia_launcher_forget_method(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    ia_launcher *l = (ia_launcher *)self;
    if (!l->busy)
        ia_launcher_forget(l);
    Py_RETURN_NONE;
}

static PyObject *ia_launcher_shut_method(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    ia_launcher *l = (ia_launcher *)self;
    l->shut |= 1;  /* (tested first by every call) */
    if (!l->busy)
        ia_launcher_forget(l);
    Py_RETURN_NONE;
}

static PyObject *ia_launcher_pause_method(PyObject *self, PyObject *on)
{
    ia_launcher *l = (ia_launcher *)self;
    int pause = PyObject_IsTrue(on);
    if (pause < 0)
        return NULL;
    if (pause) {
        l->shut |= 2;
        if (!l->busy)
            ia_launcher_forget(l);
    } else {
        l->shut &= ~2;
    }
    Py_RETURN_NONE;
}

/* its own members, and the prepared launch's (which ia_launcher_forget drops) */
static const Py_ssize_t ia_launcher_refs[] = {
    IA_MEMBER(ia_launcher, ref), IA_MEMBER(ia_launcher, slow), IA_MEMBER(ia_launcher, error),
    IA_MEMBER(ia_launcher, dim_args), IA_MEMBER(ia_launcher, gone), IA_MEMBER(ia_launcher, kernel_type),
    IA_MEMBER(ia_launcher, launch_type), IA_MEMBER(ia_launcher, tls), IA_MEMBER(ia_launcher, key), IA_MEMBERS_END};
static const Py_ssize_t ia_launcher_prepared[] = {
    IA_MEMBER(ia_launcher, last), IA_MEMBER(ia_launcher, kernel), IA_MEMBER(ia_launcher, dims),
    IA_MEMBER(ia_launcher, layouts), IA_MEMBER(ia_launcher, types), IA_MEMBER(ia_launcher, layout), IA_MEMBERS_END};

static int ia_launcher_traverse(PyObject *self, visitproc visit, void *arg)
{
    int r = ia_gc_visit(self, ia_launcher_refs, visit, arg);
    return r != 0 ? r : ia_gc_visit(self, ia_launcher_prepared, visit, arg);
}

static int ia_launcher_clear(PyObject *self)
{
    ia_launcher_forget((ia_launcher *)self);
    ia_gc_clear(self, ia_launcher_refs);
    return 0;
}

IA_GC_DEALLOC(ia_launcher)

static PyMethodDef ia_launcher_methods[] = {
    {"_forget", ia_launcher_forget_method, METH_NOARGS, "Drop the prepared launch (and what it holds)."},
    {"_shut", ia_launcher_shut_method, METH_NOARGS, "Drop the prepared launch; every later call takes the slow path."},
    {"_pause", ia_launcher_pause_method, METH_O, "_pause(True): drop the prepared launch, every call takes the slow "
     "path until _pause(False)."},
    {NULL, NULL, 0, NULL}
};

static PyTypeObject ia_launcher_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = IA_PACKAGE "._fast._Launcher",
    .tp_basicsize = sizeof(ia_launcher),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A stream's launch (or launch_unchecked) with its last KernelLaunch prepared (see ia_runtime.h).",
    .tp_vectorcall_offset = offsetof(ia_launcher, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = ia_launcher_dealloc,
    .tp_traverse = ia_launcher_traverse,
    .tp_clear = ia_launcher_clear,
    .tp_methods = ia_launcher_methods,
};

static PyObject *ia_launcher_new(PyObject *ia_self, PyObject *const *ia_args, Py_ssize_t ia_nargs)
{
    ia_launcher *l;
    void *stream;
    int check;
    (void)ia_self;
    if (ia_nargs != 11 || !PyWeakref_CheckRef(ia_args[0]) || !PyType_Check(ia_args[5]) || !PyType_Check(ia_args[6])
        || !PyType_IsSubtype((PyTypeObject *)ia_args[6], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "_launcher(ref, slow, error, dim_args, gone, kernel_type: type, "
                        "launch_type: type[tuple], tls, key, stream: int, check)");
        return NULL;
    }
    if (ia_launch_str_key == NULL) {
        if ((ia_launch_str_ptr == NULL && (ia_launch_str_ptr = PyUnicode_InternFromString("ptr")) == NULL)
            || (ia_launch_str_freed == NULL && (ia_launch_str_freed = PyUnicode_InternFromString("_freed")) == NULL)
            || (ia_launch_str_layouts = PyUnicode_InternFromString("_layouts")) == NULL
            || (ia_launch_str_address = PyUnicode_InternFromString("_address")) == NULL
            || (ia_launch_str_key = PyUnicode_InternFromString("key")) == NULL)
            return NULL;
    }
    if (!(ia_launcher_type.tp_flags & Py_TPFLAGS_READY) && PyType_Ready(&ia_launcher_type) < 0)
        return NULL;
    stream = PyLong_AsVoidPtr(ia_args[9]);
    if (stream == NULL && PyErr_Occurred())
        return NULL;
    if ((check = PyObject_IsTrue(ia_args[10])) < 0)
        return NULL;
    if ((l = PyObject_GC_New(ia_launcher, &ia_launcher_type)) == NULL)
        return NULL;
    l->vectorcall = ia_launcher_call;
#define IA_HOLD(field, i) (Py_INCREF(ia_args[i]), l->field = ia_args[i])
    IA_HOLD(ref, 0); IA_HOLD(slow, 1); IA_HOLD(error, 2); IA_HOLD(dim_args, 3); IA_HOLD(gone, 4);
    IA_HOLD(kernel_type, 5); IA_HOLD(launch_type, 6); IA_HOLD(tls, 7); IA_HOLD(key, 8);
#undef IA_HOLD
    l->stream = stream;
    l->check = check;
    l->busy = l->shut = 0;
    l->last = l->kernel = l->dims = l->layouts = l->types = l->layout = NULL;
    l->func = NULL;
    l->nargs = l->nallocs = 0;
    PyObject_GC_Track(l);
    return (PyObject *)l;
}

#define IA_LAUNCH_METHODS \
    {"_launch", (PyCFunction)(void (*)(void))ia_launch, METH_FASTCALL, \
     "_launch(layouts, args, check, function, dims, stream)\n--\n\nThe backend's kernel-launch fast path " \
     "(see ia_runtime.h): the launch's status, or None if it did not launch."}, \
    {"_launcher", (PyCFunction)(void (*)(void))ia_launcher_new, METH_FASTCALL, \
     "_launcher(ref, slow, error, dim_args, gone, kernel_type, launch_type, tls, key, stream, check)\n--\n\n" \
     "A stream's launch with its last KernelLaunch prepared (see ia_runtime.h)."},
#else
#define IA_LAUNCH_METHODS
#endif

#if IA_POOL
/* ------------------------------------------------------------------------------------------------------
 * Stream-ordered pool memory in C: the backend's MemoryPool.alloc calls
 *
 *   _pool_alloc(cls, pool, pool_handle, nbytes, stream, key)
 *
 * which calls the library's allocator, IA_POOL_ALLOC_CALL(&ptr, nbytes, pool_handle, stream), with the GIL released and returns a new
 * `cls` (a subclass of _PoolMemory) that owns the memory, or the status (an int) when it failed (the
 * Python side raises, or trims the pool and tries again).  pool_handle and stream are the native handles'
 * addresses (ints); `pool` is the backend's pool object, kept alive by the memory; `key` the .key of the
 * backend's thread-local (_pool_setup) when the pool's device is current on a thread.
 *
 * _PoolMemory holds ptr, nbytes, pool, _stream (the stream's address), _views, _freed and _tracked, and frees
 * with IA_POOL_FREE_CALL(ptr, stream) in the stream's order: free() raises, free_unchecked() and _release()
 * return the Error; exported views alive (_views, weak references) make both refuse (the instance's
 * _views_error); dropped unfreed while tracked, tp_finalize releases it (or calls the instance's _drop,
 * as Allocation.__del__ does).  Freeing makes the pool's device current first when the thread-local's
 * .key differs (pool.device.activate()).  Errors come from the Python side: pool._memory_error(memory,
 * status or None for a double free, function name).
 * ---------------------------------------------------------------------------------------------------- */
#include "structmember.h"

typedef struct {
    PyObject_HEAD
    unsigned long long ptr;     /* the device address */
    unsigned long long stream;  /* the native stream's address: freed in its order */
    PyObject *pool;             /* the backend's pool (kept alive while the memory is) */
    PyObject *key;              /* the thread-local's .key when the pool's device is current */
    PyObject *views;            /* _views: the exported views (weak references), or NULL: free refuses while any lives */
    Py_ssize_t nbytes;
    char freed;
    char tracked;               /* released on drop unless freed */
} ia_pm_object;

static PyObject *ia_pm_tls = NULL;    /* the backend's threading.local (_pool_setup) */
static PyObject *ia_pm_error = NULL;  /* the backend's Error class: what _release returns, not raises */
static PyObject *ia_pm_str_key = NULL, *ia_pm_str_device, *ia_pm_str_activate, *ia_pm_str_memory_error,
                *ia_pm_str_drop, *ia_pm_str_views_error;

static int ia_pm_strings(void)
{
    if (ia_pm_str_key != NULL)
        return 0;
    if ((ia_pm_str_device = PyUnicode_InternFromString("device")) == NULL
        || (ia_pm_str_activate = PyUnicode_InternFromString("activate")) == NULL
        || (ia_pm_str_memory_error = PyUnicode_InternFromString("_memory_error")) == NULL
        || (ia_pm_str_drop = PyUnicode_InternFromString("_drop")) == NULL
        || (ia_pm_str_views_error = PyUnicode_InternFromString("_views_error")) == NULL
        || (ia_pm_str_key = PyUnicode_InternFromString("key")) == NULL)
        return -1;
    return 0;
}

/* pool._memory_error(m, status or None, function): a new reference to the Error, or NULL (raised) */
static PyObject *ia_pm_make_error(ia_pm_object *m, long long status, int has_status, const char *function)
{
    PyObject *code, *fname, *err;
    if (has_status) {
        if ((code = PyLong_FromLongLong(status)) == NULL)
            return NULL;
    } else {
        code = Py_None;
        Py_INCREF(code);
    }
    if ((fname = PyUnicode_FromString(function)) == NULL) {
        Py_DECREF(code);
        return NULL;
    }
    err = PyObject_CallMethodObjArgs(m->pool, ia_pm_str_memory_error, (PyObject *)m, code, fname, NULL);
    Py_DECREF(code);
    Py_DECREF(fname);
    return err;
}

/* the pool's device current on this thread (as Device.activate): 0, or -1 with an exception set */
static int ia_pm_activate(ia_pm_object *m)
{
    PyObject *cur, *dev, *r;
    int same;
    if (ia_pm_tls != NULL) {
        if ((cur = PyObject_GetAttr(ia_pm_tls, ia_pm_str_key)) != NULL) {
            same = PyObject_RichCompareBool(cur, m->key, Py_EQ);
            Py_DECREF(cur);
            if (same != 0)
                return same < 0 ? -1 : 0;
        } else if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();  /* nothing current on this thread yet */
        } else {
            return -1;
        }
    }
    if ((dev = PyObject_GetAttr(m->pool, ia_pm_str_device)) == NULL)
        return -1;
    r = PyObject_CallMethodObjArgs(dev, ia_pm_str_activate, NULL);
    Py_DECREF(dev);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* free the memory (m->freed already set): 0 freed; 1 with *status the failure; -1 with an exception set
   (making the device current failed) */
static int ia_pm_release(ia_pm_object *m, long long *status)
{
    IA_POOL_FREE_RESULT ia_r;
    if (ia_pm_activate(m) < 0)
        return -1;
    if (IA_UNLIKELY(ia_status(IA_POOL_FREE_INDEX) != 0) && ia_fast_require(IA_POOL_FREE_INDEX) < 0)
        return -1;
    Py_BEGIN_ALLOW_THREADS
    ia_r = IA_POOL_FREE_CALL((uintptr_t)m->ptr, (uintptr_t)m->stream);
    Py_END_ALLOW_THREADS
    if (ia_r == 0)
        return 0;
    *status = (long long)ia_r;
    return 1;
}

/* the Error (a new reference) or None that releasing returns, as Allocation._release; NULL if raised */
static PyObject *ia_pm_release_result(ia_pm_object *m, const char *function)
{
    long long status = 0;
    int rc = ia_pm_release(m, &status);
    if (rc == 0)
        Py_RETURN_NONE;
    if (rc > 0)
        return ia_pm_make_error(m, status, 1, function);
    if (ia_pm_error != NULL && PyErr_ExceptionMatches(ia_pm_error)) {  /* an Error is returned, not raised */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        Py_XDECREF(type);
        Py_XDECREF(tb);
        return value;
    }
    return NULL;
}

/* the refusal of freeing while exported views live (the instance's _views_error(function), as
   Allocation.free asks): a new reference to the Error or None; NULL if raised */
static PyObject *ia_pm_views(ia_pm_object *m, const char *function)
{
    PyObject *fname, *r;
    int any;
    if ((any = PyObject_IsTrue(m->views)) <= 0) {
        if (any < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    if ((fname = PyUnicode_FromString(function)) == NULL)
        return NULL;
    r = PyObject_CallMethodOneArg((PyObject *)m, ia_pm_str_views_error, fname);
    Py_DECREF(fname);
    return r;
}

static PyObject *ia_pm_free(ia_pm_object *m, PyObject *Py_UNUSED(ignored))
{
    long long status = 0;
    int rc;
    PyObject *err;
    if (IA_UNLIKELY(m->freed)) {
        if ((err = ia_pm_make_error(m, 0, 0, "Allocation.free")) != NULL)
            ia_raise(err);
        return NULL;
    }
    if (IA_UNLIKELY(m->views != NULL && m->views != Py_None)) {
        if ((err = ia_pm_views(m, "Allocation.free")) == NULL)
            return NULL;
        if (err != Py_None) {
            ia_raise(err);
            return NULL;
        }
        Py_DECREF(err);
    }
    m->freed = 1;
    if (IA_LIKELY((rc = ia_pm_release(m, &status)) == 0))
        Py_RETURN_NONE;
    if (rc > 0 && (err = ia_pm_make_error(m, status, 1, "Allocation.free")) != NULL)
        ia_raise(err);
    return NULL;
}

static PyObject *ia_pm_free_unchecked(ia_pm_object *m, PyObject *Py_UNUSED(ignored))
{
    PyObject *err;
    if (IA_UNLIKELY(m->freed))  /* one flag test: freeing twice is undefined behaviour (a crash) */
        return ia_pm_make_error(m, 0, 0, "Allocation.free_unchecked");
    if (IA_UNLIKELY(m->views != NULL && m->views != Py_None)) {
        if ((err = ia_pm_views(m, "Allocation.free_unchecked")) != Py_None)
            return err;  /* the refusal (or NULL: raised) */
        Py_DECREF(err);
    }
    m->freed = 1;
    return ia_pm_release_result(m, "Allocation.free_unchecked");
}

static PyObject *ia_pm_release_method(ia_pm_object *m, PyObject *Py_UNUSED(ignored))
{
    return ia_pm_release_result(m, "Allocation.free");
}

/* dropped: released unless freed or untracked (the instance's _drop instead, if it has one) */
static void ia_pm_finalize(PyObject *self)
{
    ia_pm_object *m = (ia_pm_object *)self;
    PyObject *type, *value, *tb, *drop, *r = NULL;
    if (IA_LIKELY(m->freed || !m->tracked))
        return;
    m->freed = 1;
    PyErr_Fetch(&type, &value, &tb);
    if ((drop = PyObject_GetAttr(self, ia_pm_str_drop)) != NULL) {
        r = drop != Py_None ? PyObject_CallNoArgs(drop) : ia_pm_release_result(m, "Allocation.free");
        Py_DECREF(drop);
    }
    if (r == NULL)
        PyErr_WriteUnraisable(self);
    Py_XDECREF(r);
    PyErr_Restore(type, value, tb);
}

/* the garbage collector sees the pool (a cycle through the memory, e.g. memory kept in a structure the pool's
   device refers to, is collectable; without this it would hold the device and its context forever); no
   tp_clear: the cycle's Python objects are cleared instead, so `pool` is never NULL while the memory lives */
static const Py_ssize_t ia_pm_refs[] = {
    IA_MEMBER(ia_pm_object, pool), IA_MEMBER(ia_pm_object, key), IA_MEMBER(ia_pm_object, views), IA_MEMBERS_END};

static int ia_pm_traverse(PyObject *self, visitproc visit, void *arg)
{
    return ia_gc_visit(self, ia_pm_refs, visit, arg);
}

static void ia_pm_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    ia_gc_clear(self, ia_pm_refs);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *ia_pm_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)args;
    (void)kwds;
    PyErr_Format(PyExc_TypeError, "cannot create '%.100s' instances: MemoryPool.alloc makes them", type->tp_name);
    return NULL;
}

static PyMethodDef ia_pm_methods[] = {
    {"free", (PyCFunction)ia_pm_free, METH_NOARGS, "Free the memory in its stream's order (raises on failure)."},
    {"free_unchecked", (PyCFunction)ia_pm_free_unchecked, METH_NOARGS,
     "Free the memory in its stream's order; the Error, or None."},
    {"_release", (PyCFunction)ia_pm_release_method, METH_NOARGS, "Free the memory; the Error, or None."},
    {NULL, NULL, 0, NULL}
};

static PyMemberDef ia_pm_members[] = {
    {"ptr", T_ULONGLONG, offsetof(ia_pm_object, ptr), READONLY, "the device address"},
    {"nbytes", T_PYSSIZET, offsetof(ia_pm_object, nbytes), READONLY, "the size in bytes"},
    {"pool", T_OBJECT, offsetof(ia_pm_object, pool), READONLY, "the pool it came from"},
    {"_stream", T_ULONGLONG, offsetof(ia_pm_object, stream), READONLY, "the native stream's address"},
    {"_views", T_OBJECT, offsetof(ia_pm_object, views), 0, "the exported views (weak references)"},
    {"_freed", T_BOOL, offsetof(ia_pm_object, freed), 0, "freed (or being released)"},
    {"_tracked", T_BOOL, offsetof(ia_pm_object, tracked), 0, "released on drop unless freed"},
    {NULL, 0, 0, 0, NULL}
};

static PyTypeObject ia_pm_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = IA_PACKAGE "._fast._PoolMemory",
    .tp_basicsize = sizeof(ia_pm_object),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Memory from a stream-ordered pool, freed in its stream's order (the base of the backend's "
              "pool allocations; see ia_runtime.h).",
    .tp_new = ia_pm_new,
    .tp_dealloc = ia_pm_dealloc,
    .tp_traverse = ia_pm_traverse,
    .tp_finalize = ia_pm_finalize,
    .tp_methods = ia_pm_methods,
    .tp_members = ia_pm_members,
};

static PyObject *ia_pool_alloc(PyObject *ia_self, PyObject *const *ia_args, Py_ssize_t ia_nargs)
{
    PyTypeObject *cls;
    ia_pm_object *m;
    void *ia_pool, *ia_stream;
    size_t ia_n;
    IA_POOL_DEVPTR ia_out = 0;
    IA_POOL_ALLOC_RESULT ia_r;
    (void)ia_self;
    if (IA_UNLIKELY(ia_nargs != 6 || !PyType_Check(ia_args[0])
                    || !PyType_IsSubtype((PyTypeObject *)ia_args[0], &ia_pm_type))) {
        PyErr_SetString(PyExc_TypeError, "_pool_alloc(cls: type[_PoolMemory], pool, pool_handle: int, nbytes: int, "
                        "stream: int, key)");
        return NULL;
    }
    cls = (PyTypeObject *)ia_args[0];
    ia_pool = PyLong_AsVoidPtr(ia_args[2]);
    if (ia_pool == NULL && PyErr_Occurred())
        return NULL;
    ia_n = PyLong_AsSize_t(ia_args[3]);
    if (ia_n == (size_t)-1 && PyErr_Occurred())
        return NULL;
    ia_stream = PyLong_AsVoidPtr(ia_args[4]);
    if (ia_stream == NULL && PyErr_Occurred())
        return NULL;
    if (IA_UNLIKELY(ia_status(IA_POOL_ALLOC_INDEX) != 0) && ia_fast_require(IA_POOL_ALLOC_INDEX) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    ia_r = IA_POOL_ALLOC_CALL(&ia_out, ia_n, ia_pool, ia_stream);
    Py_END_ALLOW_THREADS
    if (ia_r != 0)
        return IA_FROM_INT(IA_POOL_ALLOC_RESULT, ia_r);
    if ((m = (ia_pm_object *)cls->tp_alloc(cls, 0)) == NULL) {
        Py_BEGIN_ALLOW_THREADS
        IA_POOL_FREE_CALL((uintptr_t)ia_out, (uintptr_t)ia_stream);
        Py_END_ALLOW_THREADS
        return NULL;
    }
    m->ptr = (unsigned long long)(uintptr_t)ia_out;
    m->stream = (unsigned long long)(uintptr_t)ia_stream;
    Py_INCREF(ia_args[1]);
    m->pool = ia_args[1];
    Py_INCREF(ia_args[5]);
    m->key = ia_args[5];
    m->views = NULL;
    m->nbytes = (Py_ssize_t)ia_n;
    m->tracked = 1;
    return (PyObject *)m;
}

/* _pool_setup(tls, error_type): the backend's thread-local (whose .key says which device is current) and
   Error class; the _PoolMemory type */
static PyObject *ia_pool_setup(PyObject *ia_self, PyObject *const *ia_args, Py_ssize_t ia_nargs)
{
    (void)ia_self;
    if (ia_nargs != 2 || !PyType_Check(ia_args[1])) {
        PyErr_SetString(PyExc_TypeError, "_pool_setup(tls, error_type: type)");
        return NULL;
    }
    if (ia_pm_strings() < 0)
        return NULL;
    Py_INCREF(ia_args[0]);
    Py_XSETREF(ia_pm_tls, ia_args[0]);
    Py_INCREF(ia_args[1]);
    Py_XSETREF(ia_pm_error, ia_args[1]);
    Py_INCREF(&ia_pm_type);
    return (PyObject *)&ia_pm_type;
}
#define IA_POOL_METHODS \
    {"_pool_alloc", (PyCFunction)(void (*)(void))ia_pool_alloc, METH_FASTCALL, \
     "_pool_alloc(cls, pool, pool_handle, nbytes, stream, key)\n--\n\nThe backend's pool allocation (see " \
     "ia_runtime.h): a new cls that owns the memory, or the status if it failed."}, \
    {"_pool_setup", (PyCFunction)(void (*)(void))ia_pool_setup, METH_FASTCALL, \
     "_pool_setup(tls, error_type)\n--\n\nThe backend's thread-local and Error class; returns the _PoolMemory type."},
#else
#define IA_POOL_METHODS
#endif

/* ------------------------------------------------------------------------------------------------------
 * The MemoryPool free list in C (issue 27 item 3; branch ocl27): ia_pool_cache.h, shared with ia_objc.h;
 * _fast._pool_cache_setup (IA_POOL_CACHE_METHODS below).
 * ---------------------------------------------------------------------------------------------------- */
#include "ia_pool_cache.h"
/* Host memory in C (issue 27 item 4; branch qm27): ia_host_memory.h, vendor-neutral; _fast._host_memory_setup,
   _host_allocator, _host_memory (IA_HOST_MEMORY_METHODS below). */
#include "structmember.h"
#include "ia_host_memory.h"
/* A stream's launch of its last KernelLaunch in C (issue 27 item 4; branch qnnpool): ia_prepared_launch.h,
   vendor-neutral; _fast._prepared_launcher (IA_PREPARED_LAUNCH_METHODS below). */
#include "ia_prepared_launch.h"


#if IA_DEVMEM
/* ======================================================================================================
 * Device memory in C (issue 27; this block is the device-memory allocator's alone): Device.alloc(n) and
 * Device.alloc_unchecked(n) of DEVICE memory are, in API mode, allocators made by
 *
 *   _devmem_allocator(cls, ref, slow, alloc_error, device_kind, tls, key, ctx, check[, bound])
 *
 * bound as the device's instance attributes (over the methods).  Called as alloc(nbytes[, kind]) with an
 * int nbytes in 1..SIZE_MAX, kind omitted or `device_kind` (MemoryKind.DEVICE), and the device current on
 * this thread (the thread-local `tls`'s .key is `key`; a `tls` of None: the library has no current device),
 * one calls IA_DEVMEM_ALLOCATE(&ptr, nbytes, bound, &status) with the GIL released and returns a new `cls` (a
 * subclass of _DeviceMemory) that owns the memory; anything else
 * (another kind, a bad size, another device current, keywords, a shut allocator) calls slow(device, *args),
 * the Python method.  A failed allocation: alloc_error(device, status, nbytes) is the Error, raised when
 * `check`, else returned.  `ref` is a weak reference to the device (the device holds its allocators).
 * `check` also says whether the memory is released on drop (Device.alloc's is; alloc_unchecked's is not).
 *
 * _DeviceMemory holds ptr, nbytes, device, _ctx (the context reference it keeps alive), _key, _views,
 * _freed and _tracked, and frees with IA_DEVMEM_FREE_CALL(ptr): free() raises, free_unchecked() and _release()
 * return the Error; exported host views (_views, weak references) make free refuse (device._views_error);
 * dropped unfreed while tracked, tp_finalize releases it (or calls the instance's _drop, as
 * Allocation.__del__ does).  Freeing makes the device current first when the thread-local's .key differs
 * (device.activate()).  Errors come from the Python side: device._memory_error(memory, status or None for
 * a double free, function name).
 *
 * The allocator's shape is the binder's (trampolines.c defines IA_DEVMEM_ALLOCATE): one that fills an
 * out-pointer and returns its status (cuMemAlloc(&ptr, n)), or one that returns the handle and its status
 * through an out-parameter (clCreateBuffer(ctx, flags, n, NULL, &status)), whose other parameters are the
 * IA_DEVMEM_BOUND integers `bound` (a tuple the device gives once, when it makes its allocator: a context's
 * address, flags) in the order the binder numbered them.  This block only needs `ptr` and `status` back.
 * ==================================================================================================== */
#include "structmember.h"

typedef struct {
    PyObject_HEAD
    unsigned long long ptr;     /* the device address */
    PyObject *device;           /* the backend's device */
    PyObject *key;              /* the thread-local's .key when the device is current */
    PyObject *ctx;              /* the device's context reference (the context lives while the memory does) */
    PyObject *views;            /* _views: the exported host views (weak references), or NULL */
    Py_ssize_t nbytes;
    char freed;
    char tracked;               /* released on drop unless freed */
} ia_dm_object;

static PyObject *ia_fast_module;      /* (defined below: _devmem_setup adds _DeviceMemory to it) */
static PyObject *ia_dm_tls = NULL;    /* the backend's threading.local (_devmem_setup) */
static PyObject *ia_dm_error = NULL;  /* the backend's Error class: what _release returns, not raises */
static PyObject *ia_dm_str_key = NULL, *ia_dm_str_activate, *ia_dm_str_memory_error, *ia_dm_str_drop,
                *ia_dm_str_views_error;

static int ia_dm_strings(void)
{
    if (ia_dm_str_key != NULL)
        return 0;
    if ((ia_dm_str_activate = PyUnicode_InternFromString("activate")) == NULL
        || (ia_dm_str_memory_error = PyUnicode_InternFromString("_memory_error")) == NULL
        || (ia_dm_str_drop = PyUnicode_InternFromString("_drop")) == NULL
        || (ia_dm_str_views_error = PyUnicode_InternFromString("_views_error")) == NULL
        || (ia_dm_str_key = PyUnicode_InternFromString("key")) == NULL)
        return -1;
    return 0;
}

/* whether the thread-local's .key is `key`: 1, 0, or -1 with an exception set */
static int ia_dm_current(PyObject *tls, PyObject *key)
{
    PyObject *cur;
    int same;
    if ((cur = PyObject_GetAttr(tls, ia_dm_str_key)) == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();  /* nothing current on this thread yet */
        return 0;
    }
    same = cur == key ? 1 : PyObject_RichCompareBool(cur, key, Py_EQ);
    Py_DECREF(cur);
    return same;
}

/* device._memory_error(m, status or None, function): a new reference to the Error, or NULL (raised) */
static PyObject *ia_dm_make_error(ia_dm_object *m, long long status, int has_status, const char *function)
{
    PyObject *code, *fname, *err;
    if (has_status) {
        if ((code = PyLong_FromLongLong(status)) == NULL)
            return NULL;
    } else {
        code = Py_None;
        Py_INCREF(code);
    }
    if ((fname = PyUnicode_FromString(function)) == NULL) {
        Py_DECREF(code);
        return NULL;
    }
    err = PyObject_CallMethodObjArgs(m->device, ia_dm_str_memory_error, (PyObject *)m, code, fname, NULL);
    Py_DECREF(code);
    Py_DECREF(fname);
    return err;
}

/* the refusal of freeing while host views are exported: a new reference to the Error or None; NULL if raised */
static PyObject *ia_dm_views(ia_dm_object *m, const char *function)
{
    PyObject *fname, *r;
    int any;
    if (IA_LIKELY(m->views == NULL || m->views == Py_None))
        Py_RETURN_NONE;
    if ((any = PyObject_IsTrue(m->views)) <= 0) {
        if (any < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    if ((fname = PyUnicode_FromString(function)) == NULL)
        return NULL;
    r = PyObject_CallMethodOneArg((PyObject *)m, ia_dm_str_views_error, fname);
    Py_DECREF(fname);
    return r;
}

/* free the memory (m->freed already set): 0 freed; 1 with *status the failure; -1 with an exception set
   (making the device current failed) */
static int ia_dm_release(ia_dm_object *m, long long *status)
{
    IA_DEVMEM_FREE_RESULT ia_r;
    /* (a tls of None: no device is ever current, nothing to make current) */
    int same = ia_dm_tls == NULL ? 0 : ia_dm_tls == Py_None ? 1 : ia_dm_current(ia_dm_tls, m->key);
    if (same < 0)
        return -1;
    if (!same) {
        PyObject *r = PyObject_CallMethodNoArgs(m->device, ia_dm_str_activate);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
    }
    if (IA_UNLIKELY(ia_status(IA_DEVMEM_FREE_INDEX) != 0) && ia_fast_require(IA_DEVMEM_FREE_INDEX) < 0)
        return -1;
    Py_BEGIN_ALLOW_THREADS
    ia_r = IA_DEVMEM_FREE_CALL((uintptr_t)m->ptr);
    Py_END_ALLOW_THREADS
    if (ia_r == 0)
        return 0;
    *status = (long long)ia_r;
    return 1;
}

/* the Error (a new reference) or None that releasing returns, as Allocation._release; NULL if raised */
static PyObject *ia_dm_release_result(ia_dm_object *m, const char *function)
{
    long long status = 0;
    int rc = ia_dm_release(m, &status);
    if (rc == 0)
        Py_RETURN_NONE;
    if (rc > 0)
        return ia_dm_make_error(m, status, 1, function);
    if (ia_dm_error != NULL && PyErr_ExceptionMatches(ia_dm_error)) {  /* an Error is returned, not raised */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        Py_XDECREF(type);
        Py_XDECREF(tb);
        if (value != NULL)
            PyException_SetTraceback(value, Py_None);  /* (a value: its frames would hold their objects) */
        return value;
    }
    return NULL;
}

static PyObject *ia_dm_free(ia_dm_object *m, PyObject *Py_UNUSED(ignored))
{
    long long status = 0;
    int rc;
    PyObject *err;
    if (IA_UNLIKELY(m->freed)) {
        if ((err = ia_dm_make_error(m, 0, 0, "Allocation.free")) != NULL)
            ia_raise(err);
        return NULL;
    }
    if (IA_UNLIKELY(m->views != NULL)) {
        if ((err = ia_dm_views(m, "Allocation.free")) == NULL)
            return NULL;
        if (err != Py_None) {
            ia_raise(err);
            return NULL;
        }
        Py_DECREF(err);
    }
    m->freed = 1;
    if (IA_LIKELY((rc = ia_dm_release(m, &status)) == 0))
        Py_RETURN_NONE;
    if (rc > 0 && (err = ia_dm_make_error(m, status, 1, "Allocation.free")) != NULL)
        ia_raise(err);
    return NULL;
}

static PyObject *ia_dm_free_unchecked(ia_dm_object *m, PyObject *Py_UNUSED(ignored))
{
    PyObject *err;
    if (IA_UNLIKELY(m->freed))  /* one flag test: freeing twice is undefined behaviour (a crash) */
        return ia_dm_make_error(m, 0, 0, "Allocation.free_unchecked");
    if (IA_UNLIKELY(m->views != NULL)) {
        if ((err = ia_dm_views(m, "Allocation.free_unchecked")) != Py_None)
            return err;  /* the refusal (or NULL: raised) */
        Py_DECREF(err);
    }
    m->freed = 1;
    return ia_dm_release_result(m, "Allocation.free_unchecked");
}

static PyObject *ia_dm_release_method(ia_dm_object *m, PyObject *Py_UNUSED(ignored))
{
    return ia_dm_release_result(m, "Allocation.free");
}

/* dropped: released unless freed or untracked (the instance's _drop instead, if it has one) */
static void ia_dm_finalize(PyObject *self)
{
    ia_dm_object *m = (ia_dm_object *)self;
    PyObject *type, *value, *tb, *drop, *r = NULL;
    if (IA_LIKELY(m->freed || !m->tracked))
        return;
    m->freed = 1;
    PyErr_Fetch(&type, &value, &tb);
    if ((drop = PyObject_GetAttr(self, ia_dm_str_drop)) != NULL) {
        r = drop != Py_None ? PyObject_CallNoArgs(drop) : ia_dm_release_result(m, "Allocation.free");
        Py_DECREF(drop);
    }
    if (r == NULL)
        PyErr_WriteUnraisable(self);
    Py_XDECREF(r);
    PyErr_Restore(type, value, tb);
}

/* the collector sees the device, the context reference and the views (cycles through the memory are
   collectable); no tp_clear: the cycle's Python objects are cleared instead, so `device` is never NULL */
static const Py_ssize_t ia_dm_refs[] = {
    IA_MEMBER(ia_dm_object, device), IA_MEMBER(ia_dm_object, key), IA_MEMBER(ia_dm_object, ctx),
    IA_MEMBER(ia_dm_object, views), IA_MEMBERS_END};

static int ia_dm_traverse(PyObject *self, visitproc visit, void *arg)
{
    return ia_gc_visit(self, ia_dm_refs, visit, arg);
}

static void ia_dm_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    ia_gc_clear(self, ia_dm_refs);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *ia_dm_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)args;
    (void)kwds;
    PyErr_Format(PyExc_TypeError, "cannot create '%.100s' instances: Device.alloc makes them", type->tp_name);
    return NULL;
}

static PyMethodDef ia_dm_methods[] = {
    {"free", (PyCFunction)ia_dm_free, METH_NOARGS, "Free the memory (raises on failure)."},
    {"free_unchecked", (PyCFunction)ia_dm_free_unchecked, METH_NOARGS, "Free the memory; the Error, or None."},
    {"_release", (PyCFunction)ia_dm_release_method, METH_NOARGS, "Free the memory; the Error, or None."},
    {NULL, NULL, 0, NULL}
};

static PyMemberDef ia_dm_members[] = {
    {"ptr", T_ULONGLONG, offsetof(ia_dm_object, ptr), READONLY, "the device address"},
    {"nbytes", T_PYSSIZET, offsetof(ia_dm_object, nbytes), READONLY, "the size in bytes"},
    {"device", T_OBJECT, offsetof(ia_dm_object, device), READONLY, "the device it was allocated on"},
    {"_ctx", T_OBJECT, offsetof(ia_dm_object, ctx), READONLY, "the context reference it keeps alive"},
    {"_key", T_OBJECT, offsetof(ia_dm_object, key), READONLY, "the thread-local's key of its device"},
    {"_views", T_OBJECT, offsetof(ia_dm_object, views), 0, "the exported host views (weak references)"},
    {"_freed", T_BOOL, offsetof(ia_dm_object, freed), 0, "freed (or being released)"},
    {"_tracked", T_BOOL, offsetof(ia_dm_object, tracked), 0, "released on drop unless freed"},
    {NULL, 0, 0, 0, NULL}
};

static PyTypeObject ia_dm_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = IA_PACKAGE "._fast._DeviceMemory",
    .tp_basicsize = sizeof(ia_dm_object),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Device memory allocated and freed in C (the base of the backend's device allocations; see "
              "ia_runtime.h).",
    .tp_new = ia_dm_new,
    .tp_dealloc = ia_dm_dealloc,
    .tp_traverse = ia_dm_traverse,
    .tp_finalize = ia_dm_finalize,
    .tp_methods = ia_dm_methods,
    .tp_members = ia_dm_members,
};

/* the allocator: Device.alloc or alloc_unchecked of one device (see above) */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *cls, *ref, *slow, *alloc_error, *device_kind, *tls, *key, *ctx;
    int check, shut;
    unsigned long long bound[IA_DEVMEM_BOUND > 0 ? IA_DEVMEM_BOUND : 1];  /* the allocator's other arguments */
} ia_da_object;

/* slow(device, *args, **kwargs): the Python method */
static PyObject *ia_da_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    ia_da_object *a = (ia_da_object *)self;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    PyObject *device = PyWeakref_GetObject(a->ref), *r;  /* borrowed */
    ia_dm_object *m;
    size_t nbytes;
    int same;
    IA_DEVMEM_DEVPTR ia_out = 0;
    IA_DEVMEM_ALLOC_RESULT ia_r = 0;
    if (IA_UNLIKELY(device == NULL))
        return NULL;
    if (IA_UNLIKELY(device == Py_None)) {
        PyErr_SetString(PyExc_ReferenceError, "Device.alloc: the device this allocator was bound to is gone");
        return NULL;
    }
    Py_INCREF(device);
    if (IA_UNLIKELY(a->shut || kwnames != NULL || n < 1 || n > 2 || !PyLong_CheckExact(args[0])
                    || (n == 2 && args[1] != a->device_kind)))
        goto slow;
    nbytes = PyLong_AsSize_t(args[0]);
    if (IA_UNLIKELY(nbytes == (size_t)-1 || nbytes == 0)) {
        PyErr_Clear();
        goto slow;  /* (its checks say what is wrong) */
    }
    if (a->tls != Py_None && IA_UNLIKELY((same = ia_dm_current(a->tls, a->key)) <= 0)) {
        if (same < 0) {
            Py_DECREF(device);
            return NULL;
        }
        goto slow;  /* (it makes the device current) */
    }
    if (IA_UNLIKELY(ia_status(IA_DEVMEM_ALLOC_INDEX) != 0) && ia_fast_require(IA_DEVMEM_ALLOC_INDEX) < 0) {
        PyErr_Clear();
        goto slow;  /* (it raises or returns the loader's error) */
    }
    Py_BEGIN_ALLOW_THREADS
    IA_DEVMEM_ALLOCATE(&ia_out, nbytes, a->bound, &ia_r);
    Py_END_ALLOW_THREADS
    if (IA_UNLIKELY(ia_r != 0 || ia_out == 0)) {  /* (no handle with success: the slow path says why) */
        if (ia_r == 0)
            goto slow;
        PyObject *code = IA_FROM_INT(IA_DEVMEM_ALLOC_RESULT, ia_r);
        r = code == NULL ? NULL : PyObject_CallFunctionObjArgs(a->alloc_error, device, code, args[0], NULL);
        Py_XDECREF(code);
        Py_DECREF(device);
        if (r != NULL && a->check) {
            ia_raise(r);
            return NULL;
        }
        return r;
    }
    if ((m = (ia_dm_object *)((PyTypeObject *)a->cls)->tp_alloc((PyTypeObject *)a->cls, 0)) == NULL) {
        Py_BEGIN_ALLOW_THREADS
        IA_DEVMEM_FREE_CALL((uintptr_t)ia_out);
        Py_END_ALLOW_THREADS
        Py_DECREF(device);
        return NULL;
    }
    m->ptr = (unsigned long long)(uintptr_t)ia_out;
    m->device = device;  /* (the reference taken above) */
    Py_INCREF(a->key);
    m->key = a->key;
    Py_INCREF(a->ctx);
    m->ctx = a->ctx;
    m->views = NULL;
    m->nbytes = (Py_ssize_t)nbytes;
    m->tracked = (char)a->check;
    return (PyObject *)m;
slow:
    r = ia_call_first(a->slow, device, args, nargsf, kwnames);
    Py_DECREF(device);
    return r;
}

static const Py_ssize_t ia_da_refs[] = {
    IA_MEMBER(ia_da_object, cls), IA_MEMBER(ia_da_object, ref), IA_MEMBER(ia_da_object, slow),
    IA_MEMBER(ia_da_object, alloc_error), IA_MEMBER(ia_da_object, device_kind), IA_MEMBER(ia_da_object, tls),
    IA_MEMBER(ia_da_object, key), IA_MEMBER(ia_da_object, ctx), IA_MEMBERS_END};
IA_GC_TRAVERSE_CLEAR(ia_da)
IA_GC_DEALLOC(ia_da)
IA_SHUT_METHOD(ia_da, ia_da_object)

static PyMethodDef ia_da_methods[] = {
    IA_SHUT_METHOD_DEF(ia_da),
    {NULL, NULL, 0, NULL}
};

static PyTypeObject ia_da_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = IA_PACKAGE "._fast._DeviceAllocator",
    .tp_basicsize = sizeof(ia_da_object),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A device's alloc (or alloc_unchecked) of DEVICE memory, in C (see ia_runtime.h).",
    .tp_vectorcall_offset = offsetof(ia_da_object, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = ia_da_dealloc,
    .tp_traverse = ia_da_traverse,
    .tp_clear = ia_da_clear,
    .tp_methods = ia_da_methods,
};

static PyObject *ia_devmem_allocator(PyObject *ia_self, PyObject *const *ia_args, Py_ssize_t ia_nargs)
{
    ia_da_object *a;
    int check;
    Py_ssize_t i;
    unsigned long long bound[IA_DEVMEM_BOUND > 0 ? IA_DEVMEM_BOUND : 1] = {0};
    (void)ia_self;
    if (ia_nargs < 9 || ia_nargs > 10 || !PyType_Check(ia_args[0])
        || !PyType_IsSubtype((PyTypeObject *)ia_args[0], &ia_dm_type) || !PyWeakref_CheckRef(ia_args[1])
        || (ia_nargs == 10 ? !PyTuple_Check(ia_args[9]) || PyTuple_GET_SIZE(ia_args[9]) != IA_DEVMEM_BOUND
                           : IA_DEVMEM_BOUND != 0)) {
        PyErr_Format(PyExc_TypeError, "_devmem_allocator(cls: type[_DeviceMemory], ref: weakref, slow, alloc_error, "
                     "device_kind, tls, key, ctx, check[, bound: a tuple of %d ints])", (int)IA_DEVMEM_BOUND);
        return NULL;
    }
    for (i = 0; i < IA_DEVMEM_BOUND; i++) {  /* (each an address or an integer the allocator takes as it is) */
        if ((bound[i] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(ia_args[9], i))) == (unsigned long long)-1
            && PyErr_Occurred())
            return NULL;
    }
    if (ia_dm_strings() < 0)
        return NULL;
    if (!(ia_da_type.tp_flags & Py_TPFLAGS_READY) && PyType_Ready(&ia_da_type) < 0)
        return NULL;
    if ((check = PyObject_IsTrue(ia_args[8])) < 0)
        return NULL;
    if ((a = PyObject_GC_New(ia_da_object, &ia_da_type)) == NULL)
        return NULL;
    a->vectorcall = ia_da_call;
#define IA_HOLD(field, i) (Py_INCREF(ia_args[i]), a->field = ia_args[i])
    IA_HOLD(cls, 0); IA_HOLD(ref, 1); IA_HOLD(slow, 2); IA_HOLD(alloc_error, 3); IA_HOLD(device_kind, 4);
    IA_HOLD(tls, 5); IA_HOLD(key, 6); IA_HOLD(ctx, 7);
#undef IA_HOLD
    a->check = check;
    a->shut = 0;
    memcpy(a->bound, bound, sizeof bound);
    PyObject_GC_Track(a);
    return (PyObject *)a;
}

/* _devmem_setup(tls, error_type): the backend's thread-local (whose .key says which device is current) and
   Error class; returns the _DeviceMemory type */
static PyObject *ia_devmem_setup(PyObject *ia_self, PyObject *const *ia_args, Py_ssize_t ia_nargs)
{
    (void)ia_self;
    if (ia_nargs != 2 || !PyType_Check(ia_args[1])) {
        PyErr_SetString(PyExc_TypeError, "_devmem_setup(tls, error_type: type)");
        return NULL;
    }
    if (ia_dm_strings() < 0)
        return NULL;
    if (!(ia_dm_type.tp_flags & Py_TPFLAGS_READY) && PyType_Ready(&ia_dm_type) < 0)
        return NULL;
    if (ia_fast_module != NULL && !PyObject_HasAttrString(ia_fast_module, "_DeviceMemory")
        && PyModule_AddObjectRef(ia_fast_module, "_DeviceMemory", (PyObject *)&ia_dm_type) < 0)
        return NULL;
    Py_INCREF(ia_args[0]);
    Py_XSETREF(ia_dm_tls, ia_args[0]);
    Py_INCREF(ia_args[1]);
    Py_XSETREF(ia_dm_error, ia_args[1]);
    Py_INCREF(&ia_dm_type);
    return (PyObject *)&ia_dm_type;
}
#if IA_HOSTCOPY
/* ======================================================================================================
 * Host copies in C (issue 27): a stream's copy_from_host(dst, src) and copy_to_host(dst, src) are, in API
 * mode, copiers made by
 *
 *   _host_copier(to_device, ref, cls, device, queue, host_types, slow, error, gone)
 *
 * bound as the stream's instance attributes (over the methods).  `ref` is a weak reference to the stream (which
 * holds its copiers): one kept after its stream was dropped raises gone(), INVALID_HANDLE, as a launcher does.
 * Called with two positional arguments, the allocation an exact `cls` (the device's compiled allocation
 * class) of `device`, unfreed, and the host object of an exact type in `host_types` whose buffer is contiguous
 * (writable, to the host), holds no Python objects (format 'O') and has 1..the allocation's nbytes bytes, one
 * calls IA_HOSTCOPY_WRITE (or _READ)(queue, the allocation's handle, nbytes, the buffer) -- blocking, at offset
 * 0, waiting for nothing -- with the GIL released, and sets the stream's _dirty and the device's _dirty, and
 * the stream's _pending: True after a write (the device may still be writing when the source was read), False
 * after a read (in order: everything before it completed), True after a failed read.  A failed call raises
 * error(code).  Anything else (keywords, offsets, another type or allocation, a bad size, a shut copier: the
 * device was closed) calls slow(stream, *args, **kwargs), the Python method, which copies or raises the
 * same Errors as before.  What the Python method does on these arguments, this does in C: ~0.3 us against
 * ~1.3 us (docs/performance.md).
 * ==================================================================================================== */
static PyObject *ia_hc_str_dirty = NULL, *ia_hc_str_pending;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *ref, *cls, *device, *host_types, *slow, *error, *gone;
    uintptr_t queue;
    int to_device, shut;
} ia_hc_object;

static PyObject *ia_hc_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    ia_hc_object *c = (ia_hc_object *)self;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf), i;
    PyObject *stream = PyWeakref_GetObject(c->ref), *alloc, *host, *r;  /* borrowed */
    ia_dm_object *m;
    Py_buffer view;
    int known = 0, failed;
    IA_HOSTCOPY_RESULT ia_r;
    if (IA_UNLIKELY(stream == NULL))
        return NULL;
    if (IA_UNLIKELY(stream == Py_None)) {
        if ((r = PyObject_CallNoArgs(c->gone)) != NULL)
            ia_raise(r);
        return NULL;
    }
    Py_INCREF(stream);
    if (IA_UNLIKELY(c->shut || kwnames != NULL || n != 2))
        goto slow;
    alloc = args[c->to_device ? 0 : 1];
    host = args[c->to_device ? 1 : 0];
    if (IA_UNLIKELY((PyObject *)Py_TYPE(alloc) != c->cls))
        goto slow;
    m = (ia_dm_object *)alloc;
    if (IA_UNLIKELY(m->freed || m->device != c->device))
        goto slow;
    for (i = 0; i < PyTuple_GET_SIZE(c->host_types); i++)
        if ((PyObject *)Py_TYPE(host) == PyTuple_GET_ITEM(c->host_types, i)) {
            known = 1;
            break;
        }
    if (IA_UNLIKELY(!known))
        goto slow;
    /* (C-contiguous: no strides asked for; the shape too, or a memoryview refuses to give its format) */
    if (IA_UNLIKELY(PyObject_GetBuffer(host, &view, PyBUF_ND | PyBUF_FORMAT | (c->to_device ? 0 : PyBUF_WRITABLE))
                    < 0)) {
        PyErr_Clear();
        goto slow;  /* (it says why: not contiguous, read-only) */
    }
    if (IA_UNLIKELY(view.len < 1 || view.len > m->nbytes || (view.format != NULL && strchr(view.format, 'O'))
                    || (ia_status(c->to_device ? IA_HOSTCOPY_WRITE_INDEX : IA_HOSTCOPY_READ_INDEX) != 0
                        && ia_fast_require(c->to_device ? IA_HOSTCOPY_WRITE_INDEX : IA_HOSTCOPY_READ_INDEX) < 0))) {
        PyErr_Clear();
        PyBuffer_Release(&view);
        goto slow;
    }
    Py_BEGIN_ALLOW_THREADS
    if (c->to_device)
        ia_r = IA_HOSTCOPY_WRITE(c->queue, (uintptr_t)m->ptr, (size_t)view.len, view.buf);
    else
        ia_r = IA_HOSTCOPY_READ(c->queue, (uintptr_t)m->ptr, (size_t)view.len, view.buf);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    failed = ia_r != 0;
    if (PyObject_SetAttr(stream, ia_hc_str_dirty, Py_True) < 0
        || PyObject_SetAttr(c->device, ia_hc_str_dirty, Py_True) < 0
        || PyObject_SetAttr(stream, ia_hc_str_pending, c->to_device || failed ? Py_True : Py_False) < 0) {
        Py_DECREF(stream);
        return NULL;
    }
    Py_DECREF(stream);
    if (IA_UNLIKELY(failed)) {
        PyObject *code = IA_FROM_INT(IA_HOSTCOPY_RESULT, ia_r);
        r = code == NULL ? NULL : PyObject_CallOneArg(c->error, code);
        Py_XDECREF(code);
        if (r != NULL)
            ia_raise(r);
        return NULL;
    }
    Py_RETURN_NONE;
slow:
    r = ia_call_first(c->slow, stream, args, nargsf, kwnames);
    Py_DECREF(stream);
    return r;
}

static const Py_ssize_t ia_hc_refs[] = {
    IA_MEMBER(ia_hc_object, ref), IA_MEMBER(ia_hc_object, cls), IA_MEMBER(ia_hc_object, device),
    IA_MEMBER(ia_hc_object, host_types), IA_MEMBER(ia_hc_object, slow), IA_MEMBER(ia_hc_object, error),
    IA_MEMBER(ia_hc_object, gone), IA_MEMBERS_END};
IA_GC_TRAVERSE_CLEAR(ia_hc)
IA_GC_DEALLOC(ia_hc)
IA_SHUT_METHOD(ia_hc, ia_hc_object)

static PyMethodDef ia_hc_methods[] = {
    IA_SHUT_METHOD_DEF(ia_hc),
    {NULL, NULL, 0, NULL}
};

static PyTypeObject ia_hc_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = IA_PACKAGE "._fast._HostCopier",
    .tp_basicsize = sizeof(ia_hc_object),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A stream's copy_from_host (or copy_to_host), in C (see ia_runtime.h).",
    .tp_vectorcall_offset = offsetof(ia_hc_object, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = ia_hc_dealloc,
    .tp_traverse = ia_hc_traverse,
    .tp_clear = ia_hc_clear,
    .tp_methods = ia_hc_methods,
};

static PyObject *ia_host_copier(PyObject *ia_self, PyObject *const *ia_args, Py_ssize_t ia_nargs)
{
    ia_hc_object *c;
    int to_device;
    unsigned long long queue;
    Py_ssize_t i;
    (void)ia_self;
    if (ia_nargs != 9 || !PyWeakref_CheckRef(ia_args[1]) || !PyType_Check(ia_args[2])
        || !PyType_IsSubtype((PyTypeObject *)ia_args[2], &ia_dm_type) || !PyTuple_Check(ia_args[5])) {
        PyErr_SetString(PyExc_TypeError, "_host_copier(to_device, ref: weakref, cls: type[_DeviceMemory], device, "
                        "queue: int, host_types: tuple of types, slow, error, gone)");
        return NULL;
    }
    for (i = 0; i < PyTuple_GET_SIZE(ia_args[5]); i++)
        if (!PyType_Check(PyTuple_GET_ITEM(ia_args[5], i))) {
            PyErr_SetString(PyExc_TypeError, "_host_copier: host_types must be types");
            return NULL;
        }
    if ((to_device = PyObject_IsTrue(ia_args[0])) < 0)
        return NULL;
    if ((queue = PyLong_AsUnsignedLongLong(ia_args[4])) == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    if (ia_hc_str_dirty == NULL && ((ia_hc_str_dirty = PyUnicode_InternFromString("_dirty")) == NULL
                                    || (ia_hc_str_pending = PyUnicode_InternFromString("_pending")) == NULL))
        return NULL;
    if (!(ia_hc_type.tp_flags & Py_TPFLAGS_READY) && PyType_Ready(&ia_hc_type) < 0)
        return NULL;
    if ((c = PyObject_GC_New(ia_hc_object, &ia_hc_type)) == NULL)
        return NULL;
    c->vectorcall = ia_hc_call;
#define IA_HOLD(field, i) (Py_INCREF(ia_args[i]), c->field = ia_args[i])
    IA_HOLD(ref, 1); IA_HOLD(cls, 2); IA_HOLD(device, 3); IA_HOLD(host_types, 5); IA_HOLD(slow, 6);
    IA_HOLD(error, 7); IA_HOLD(gone, 8);
#undef IA_HOLD
    c->queue = (uintptr_t)queue;
    c->to_device = to_device;
    c->shut = 0;
    PyObject_GC_Track(c);
    return (PyObject *)c;
}
#define IA_HOSTCOPY_METHODS \
    {"_host_copier", (PyCFunction)(void (*)(void))ia_host_copier, METH_FASTCALL, \
     "_host_copier(to_device, ref, cls, device, queue, host_types, slow, error, gone)\n--\n\n" \
     "A stream's copy_from_host or copy_to_host in C (see ia_runtime.h)."},
#define IA_HOSTCOPY_METHOD_COUNT 1
#endif
#define IA_DEVMEM_METHODS \
    {"_devmem_allocator", (PyCFunction)(void (*)(void))ia_devmem_allocator, METH_FASTCALL, \
     "_devmem_allocator(cls, ref, slow, alloc_error, device_kind, tls, key, ctx, check, bound=())\n--\n\n" \
     "A device's alloc or alloc_unchecked of DEVICE memory in C (see ia_runtime.h)."}, \
    {"_devmem_setup", (PyCFunction)(void (*)(void))ia_devmem_setup, METH_FASTCALL, \
     "_devmem_setup(tls, error_type)\n--\n\nThe backend's thread-local and Error class; returns the " \
     "_DeviceMemory type."},
#else
#define IA_DEVMEM_METHODS
#endif
#ifndef IA_HOSTCOPY_METHODS
#define IA_HOSTCOPY_METHODS
#define IA_HOSTCOPY_METHOD_COUNT 0
#endif
/* ====================================================================== (end of the device-memory block) */

/* The module _fast: the library's fast paths (in ia_fast_methods, defined after this file), then the
   runtime's own methods (IA_RUNTIME_METHODS ends the table). */
#define IA_RUNTIME_METHODS IA_LAUNCH_METHODS IA_POOL_METHODS IA_POOL_CACHE_METHODS IA_HOST_MEMORY_METHODS \
    IA_PREPARED_LAUNCH_METHODS IA_DEVMEM_METHODS IA_HOSTCOPY_METHODS {NULL, NULL, 0, NULL}
#define IA_FAST_METHODS (IA_FAST_COUNT + 7 + IA_POOL_CACHE_METHOD_COUNT + IA_HOST_MEMORY_METHOD_COUNT \
                         + IA_PREPARED_LAUNCH_METHOD_COUNT + IA_HOSTCOPY_METHOD_COUNT)
static PyMethodDef ia_fast_methods[IA_FAST_METHODS];

static struct PyModuleDef ia_fast_def = {
    PyModuleDef_HEAD_INIT, IA_PACKAGE "._fast",
    "Compiled checked wrappers of " IA_PACKAGE " (see ia_runtime.h); bound in its namespace in API mode.",
    -1, ia_fast_methods, NULL, NULL, NULL, NULL,
};
static PyObject *ia_fast_module = NULL;

/* Called (once) by __init__.py in API mode, through cffi, which has released the GIL: creates the module
   and puts it in sys.modules as IA_PACKAGE._fast.  0 on success; -1 leaves the Python wrappers in use. */
static int ia_install_fast(void)
{
    int rc = -1;
    PyGILState_STATE gil = PyGILState_Ensure();
#if IA_POOL
    if (ia_fast_module == NULL && PyType_Ready(&ia_pm_type) == 0) {
        ia_fast_module = PyModule_Create(&ia_fast_def);
        if (ia_fast_module != NULL) {
            Py_INCREF(&ia_pm_type);  /* PyModule_AddObject steals it on success */
            if (PyModule_AddObject(ia_fast_module, "_PoolMemory", (PyObject *)&ia_pm_type) < 0) {
                Py_DECREF(&ia_pm_type);
                Py_CLEAR(ia_fast_module);
            }
        }
    }
#else
    if (ia_fast_module == NULL)
        ia_fast_module = PyModule_Create(&ia_fast_def);
#endif
    if (ia_fast_module != NULL && PyDict_SetItemString(PyImport_GetModuleDict(), IA_PACKAGE "._fast",
                                                       ia_fast_module) == 0)
        rc = 0;
    if (rc != 0)
        PyErr_Clear();
    PyGILState_Release(gil);
    return rc;
}

#endif /* IA_RUNTIME_H */
