/* ia_objc.h: the hand-written C side of the objc resolver kind (API mode), included by each Objective-C
 * library's generated trampolines.c after its tables:
 *   id, SEL, Class            from the spec's declarations (types.cdef)
 *   IA_OBJC_METHODS           the number of bound methods; ia_objc_selector[i] each one's selector
 *   IA_OBJC_CLASSES           the number of bound classes; ia_objc_class_name[k] each one's name
 *   IA_OBJC_FUNCTIONS         the number of bound C functions (functions:); ia_objc_function_name[f] each one's
 *                             symbol, found with dlsym(RTLD_DEFAULT) by ia_objc_setup() (the frameworks are open
 *                             by then) into ia_objc_fn[f]; NULL: missing, refused as IA_OBJC_FUNCTION
 *
 * Nothing is linked: the Python loader dlopens the runtime and the frameworks RTLD_GLOBAL (Debian links with
 * --as-needed, so a framework only named at link time would not be loaded and every class would be nil), then
 * ia_objc_setup() finds the runtime's functions with dlsym(RTLD_DEFAULT), registers each selector once and
 * looks each class up once.
 *
 * Two flavours of message send, chosen here (IA_OBJC_APPLE, default: __APPLE__):
 *   GNU    IMP = objc_msg_lookup(receiver, sel), then the IMP called cast to the method's exact prototype
 *   Apple  objc_msgSend cast to the exact prototype; objc_msgSend_stret for a struct result larger than 16
 *          bytes on x86-64 (never on arm64: there the caller passes x8 itself), objc_msgSend_fpret for a long
 *          double result on x86-64 (and float/double on i386).
 *
 * An Objective-C exception raised inside a checked call (-[NSArray objectAtIndex:] out of range) would end the
 * process: no frame between Python and the method can catch it.  So each checked call links a catch frame
 * (jmp_buf) before it sends, and the uncaught-exception handler installed by ia_objc_setup() -- Foundation's
 * NSSetUncaughtExceptionHandler where it exists, and the runtime's objc_setUncaughtExceptionHandler -- longjmps
 * to the innermost frame of its thread, keeping the exception (retained) for ia_objc_caught().  The runtime calls
 * that handler only once it has found no handler in any frame, so no cleanup of the method's frames would have
 * run anyway: they are abandoned as the process's end would have abandoned them (a lock the method held stays
 * held; the runtime's exception record, a few dozen bytes, is not freed).  With no catch frame of this module
 * on the thread the handler passes the exception on to the one it replaced.  ABI mode has no C frame to catch
 * in: there an exception still ends the process.  The exception object is autoreleased when raised: into the
 * call's own pool where it has one, else the caller's (a method taking and returning only numbers runs without
 * one; with no pool at all GNUstep logs and leaks it).
 */
#include <stddef.h>
#include <string.h>
#include <setjmp.h>
#if !defined(_WIN32)
#include <dlfcn.h>
#endif

#ifndef IA_OBJC_APPLE
#if defined(__APPLE__)
#define IA_OBJC_APPLE 1
#else
#define IA_OBJC_APPLE 0
#endif
#endif

#if defined(__GNUC__) || defined(__clang__)
#define IA_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define IA_TLS __thread
#else
#define IA_UNLIKELY(x) (x)
#define IA_TLS
#endif

/* why a checked call returned zero without sending (ia_objc_failed() reads and clears it) */
#define IA_OBJC_OK 0
#define IA_OBJC_NIL 1        /* nil receiver (or a closed handle): INVALID_HANDLE */
#define IA_OBJC_SELECTOR 2   /* the receiver's class does not respond to the selector: SYMBOL_NOT_FOUND */
#define IA_OBJC_OPEN 3       /* the runtime or a framework could not be loaded: LIBRARY_NOT_FOUND */
#define IA_OBJC_CLASS 4      /* the class of a '+' method is not in the loaded frameworks: SYMBOL_NOT_FOUND */
#define IA_OBJC_FUNCTION 5   /* a C function of functions: is not in the loaded libraries: SYMBOL_NOT_FOUND */
#define IA_OBJC_EXCEPTION 8  /* the method raised an Objective-C exception: ia_objc_caught() returns it */

#if defined(__APPLE__)  /* no signal mask saved or restored (Darwin's setjmp would: a system call) */
#define IA_SETJMP(b) _setjmp(b)
#define IA_LONGJMP(b) _longjmp(b, 1)
#else  /* glibc's setjmp saves no signal mask */
#define IA_SETJMP(b) setjmp(b)
#define IA_LONGJMP(b) longjmp(b, 1)
#endif
struct ia_objc_catch {
    jmp_buf buf;
    struct ia_objc_catch *prev;
};
/* A checked trampoline's catch frame: IA_OBJC_ENTER(frame) links it, then `if (IA_SETJMP(frame.buf) != 0)`
 * (setjmp must be the whole controlling expression, compared with a constant: C11 7.13.1.1, so no
 * IA_UNLIKELY around it), and IA_OBJC_LEAVE(frame) unlinks it after the send. */
#define IA_OBJC_ENTER(f) ((f).prev = ia_objc_catch_top, ia_objc_catch_top = &(f))
#define IA_OBJC_LEAVE(f) (ia_objc_catch_top = (f).prev)

typedef void (*ia_objc_imp_t)(void);
static IA_TLS int ia_objc_failure;
static IA_TLS struct ia_objc_catch *ia_objc_catch_top;  /* this thread's innermost checked call */
static IA_TLS id ia_objc_exception;                     /* the exception it caught, retained */
static void (*ia_objc_prev_ns_handler)(id);             /* the handlers replaced (called when no frame is ours) */
static void (*ia_objc_prev_rt_handler)(id);
static volatile int ia_objc_ready;

static SEL ia_objc_sel[IA_OBJC_METHODS > 0 ? IA_OBJC_METHODS : 1];
static Class ia_objc_class[IA_OBJC_CLASSES > 0 ? IA_OBJC_CLASSES : 1];
static Class ia_objc_ok[IA_OBJC_METHODS > 0 ? IA_OBJC_METHODS : 1];  /* the last class seen to respond */
static void *ia_objc_fn[IA_OBJC_FUNCTIONS > 0 ? IA_OBJC_FUNCTIONS : 1];  /* the C functions' addresses */

static SEL (*ia_sel_registerName)(const char *);
static Class (*ia_objc_getClass)(const char *);
static unsigned char (*ia_class_respondsToSelector)(Class, SEL);
static Class (*ia_object_getClass)(id);  /* Apple; the GNU runtime has it inline only: the isa is read */
static const char *(*ia_class_getName)(Class);
static Class (*ia_class_getSuperclass)(Class);
static void *(*ia_pool_push_fn)(void);   /* objc_autoreleasePoolPush, where the runtime has it */
static void (*ia_pool_pop_fn)(void *);
static Class ia_pool_class;              /* else NSAutoreleasePool */
static SEL ia_sel_alloc, ia_sel_init, ia_sel_release, ia_sel_retain, ia_sel_retainCount, ia_sel_utf8;
#if IA_OBJC_APPLE
static void *ia_msgSend, *ia_msgSend_stret, *ia_msgSend_fpret;
#if defined(__x86_64__)
#define IA_STRET(R) (sizeof(R) > 16)
#define IA_FPRET_LONG_DOUBLE 1
#define IA_FPRET_FLOAT 0
#elif defined(__i386__)
#define IA_STRET(R) (sizeof(R) > 8)
#define IA_FPRET_LONG_DOUBLE 1
#define IA_FPRET_FLOAT 1
#else /* arm64: no stret, no fpret */
#define IA_STRET(R) 0
#define IA_FPRET_LONG_DOUBLE 0
#define IA_FPRET_FLOAT 0
#endif
/* T: the method's exact pointer type; R: its result type */
#define IA_SEND(T, recv, sel) ((T)ia_msgSend)
#define IA_SEND_STRUCT(T, R, recv, sel) ((T)(IA_STRET(R) ? ia_msgSend_stret : ia_msgSend))
#define IA_SEND_FP(T, LONG_DOUBLE, recv, sel) \
    ((T)(((LONG_DOUBLE) ? IA_FPRET_LONG_DOUBLE : IA_FPRET_FLOAT) ? ia_msgSend_fpret : ia_msgSend))
#define IA_CLASS_OF(obj) ia_object_getClass(obj)
#else
static ia_objc_imp_t (*ia_msg_lookup)(id, SEL);
#define IA_SEND(T, recv, sel) ((T)ia_msg_lookup((id)(recv), (sel)))
#define IA_SEND_STRUCT(T, R, recv, sel) IA_SEND(T, recv, sel)
#define IA_SEND_FP(T, LONG_DOUBLE, recv, sel) IA_SEND(T, recv, sel)
/* an object's first word is its class (a class's: its metaclass, which answers for the class methods) */
#define IA_CLASS_OF(obj) (*(Class *)(obj))
#endif

/* extern "Python", the same callback as ia_runtime.h's (loader.load_module): dlopens the runtime and the frameworks
   RTLD_GLOBAL */
static int ia_open_library(void);

static void *ia_objc_sym(const char *name)
{
#if defined(_WIN32)
    (void)name;
    return NULL;
#else
    return dlsym(RTLD_DEFAULT, name);
#endif
}

static id ia_objc_send0(id obj, SEL sel);

/* the uncaught-exception handler: to this thread's innermost checked call, if any */
static void ia_objc_catch_exception(id exc, void (*prev)(id))
{
    struct ia_objc_catch *c = ia_objc_catch_top;
    if (c == NULL) {
        if (prev != NULL)
            prev(exc);
        return;  /* the runtime then ends the process, as without us */
    }
    ia_objc_catch_top = c->prev;
    if (ia_objc_exception != NULL)  /* one not read (a caller that ignored the failure): not kept twice */
        IA_SEND(void (*)(id, SEL), ia_objc_exception, ia_sel_release)(ia_objc_exception, ia_sel_release);
    ia_objc_exception = exc != NULL ? ia_objc_send0(exc, ia_sel_retain) : NULL;
    IA_LONGJMP(c->buf);
}
static void ia_objc_ns_handler(id exc) { ia_objc_catch_exception(exc, ia_objc_prev_ns_handler); }
static void ia_objc_rt_handler(id exc) { ia_objc_catch_exception(exc, ia_objc_prev_rt_handler); }

static void ia_objc_install_handlers(void)
{
    typedef void (*handler_t)(id);
    void (*ns_set)(handler_t);
    handler_t (*ns_get)(void);
    handler_t (*rt_set)(handler_t);
    *(void **)&ns_set = ia_objc_sym("NSSetUncaughtExceptionHandler");  /* Foundation: after the runtime's own */
    *(void **)&ns_get = ia_objc_sym("NSGetUncaughtExceptionHandler");
    *(void **)&rt_set = ia_objc_sym("objc_setUncaughtExceptionHandler");
    if (ns_set != NULL && ns_get != NULL) {
        ia_objc_prev_ns_handler = ns_get();
        ns_set(ia_objc_ns_handler);
    }
    if (rt_set != NULL)  /* Foundation may replace this one when its NSException class initializes */
        ia_objc_prev_rt_handler = rt_set(ia_objc_rt_handler);
}

/* 0, or which runtime function is missing (1-based) */
static int ia_objc_setup(void)
{
    int i;
#if IA_OBJC_APPLE
    ia_msgSend = ia_objc_sym("objc_msgSend");
    ia_msgSend_stret = ia_objc_sym("objc_msgSend_stret");
    ia_msgSend_fpret = ia_objc_sym("objc_msgSend_fpret");
    *(void **)&ia_object_getClass = ia_objc_sym("object_getClass");
    if (ia_msgSend == NULL || ia_object_getClass == NULL)
        return 1;
#else
    *(void **)&ia_msg_lookup = ia_objc_sym("objc_msg_lookup");
    if (ia_msg_lookup == NULL)
        return 1;
#endif
    *(void **)&ia_sel_registerName = ia_objc_sym("sel_registerName");
    *(void **)&ia_objc_getClass = ia_objc_sym("objc_getClass");
    *(void **)&ia_class_respondsToSelector = ia_objc_sym("class_respondsToSelector");
    *(void **)&ia_class_getName = ia_objc_sym("class_getName");
    *(void **)&ia_class_getSuperclass = ia_objc_sym("class_getSuperclass");
    *(void **)&ia_pool_push_fn = ia_objc_sym("objc_autoreleasePoolPush");
    *(void **)&ia_pool_pop_fn = ia_objc_sym("objc_autoreleasePoolPop");
    if (ia_sel_registerName == NULL || ia_objc_getClass == NULL || ia_class_respondsToSelector == NULL
        || ia_class_getName == NULL || ia_class_getSuperclass == NULL)
        return 2;
    if (ia_pool_push_fn == NULL || ia_pool_pop_fn == NULL) {
        ia_pool_push_fn = NULL;
        ia_pool_class = ia_objc_getClass("NSAutoreleasePool");
    }
    ia_sel_alloc = ia_sel_registerName("alloc");
    ia_sel_init = ia_sel_registerName("init");
    ia_sel_release = ia_sel_registerName("release");
    ia_sel_retain = ia_sel_registerName("retain");
    ia_sel_retainCount = ia_sel_registerName("retainCount");
    ia_sel_utf8 = ia_sel_registerName("UTF8String");
    for (i = 0; i < IA_OBJC_METHODS; i++)
        ia_objc_sel[i] = ia_sel_registerName(ia_objc_selector[i]);
    for (i = 0; i < IA_OBJC_CLASSES; i++)
        ia_objc_class[i] = ia_objc_getClass(ia_objc_class_name[i]);
    for (i = 0; i < IA_OBJC_FUNCTIONS; i++)
        ia_objc_fn[i] = ia_objc_sym(ia_objc_function_name[i]);
    ia_objc_install_handlers();
    return 0;
}

/* 0 once the runtime is usable; the first call opens it (Python), then sets up (C) */
static int ia_objc_start(void)
{
    if (ia_objc_ready)
        return 0;
    if (ia_open_library() != 0 || ia_objc_setup() != 0)
        return 1;
    ia_objc_ready = 1;
    return 0;
}
#define IA_OBJC_START() (IA_UNLIKELY(!ia_objc_ready) && ia_objc_start() != 0)

/* the checked calls' guard: the receiver's class responds to method i's selector (one class remembered) */
static int ia_objc_responds(int i, id obj)
{
    Class c = IA_CLASS_OF(obj);
    if (c == ia_objc_ok[i])
        return 1;
    if (!ia_class_respondsToSelector(c, ia_objc_sel[i]))
        return 0;
    ia_objc_ok[i] = c;
    return 1;
}

static id ia_objc_send0(id obj, SEL sel)
{
    return IA_SEND(id (*)(id, SEL), obj, sel)(obj, sel);
}

static void *ia_objc_pool_push(void)
{
    if (ia_pool_push_fn != NULL)
        return ia_pool_push_fn();
    if (ia_pool_class == NULL)
        return NULL;
    return ia_objc_send0(ia_objc_send0((id)ia_pool_class, ia_sel_alloc), ia_sel_init);
}

static void ia_objc_pool_pop(void *pool)
{
    if (ia_pool_push_fn != NULL)
        ia_pool_pop_fn(pool);
    else if (pool != NULL)
        IA_SEND(void (*)(id, SEL), pool, ia_sel_release)((id)pool, ia_sel_release);
}

/* ------------------------------------------------------------------ what the Python side calls (api.cdef) */

int ia_objc_failed(void)
{
    int f = ia_objc_failure;
    ia_objc_failure = IA_OBJC_OK;
    return f;
}

/* the exception the last refused call (IA_OBJC_EXCEPTION) caught, +1 (the caller releases it); NULL: none */
id ia_objc_caught(void)
{
    id e = ia_objc_exception;
    ia_objc_exception = NULL;
    return e;
}

/* 0: loaded and set up (loading on this call if needed) */
int ia_objc_load(void)
{
    return ia_objc_start();
}

id ia_objc_retain(id obj)
{
    if (obj == NULL || IA_OBJC_START())
        return obj;
    return ia_objc_send0(obj, ia_sel_retain);
}

void ia_objc_release(id obj)
{
    if (obj == NULL || !ia_objc_ready)
        return;
    IA_SEND(void (*)(id, SEL), obj, ia_sel_release)(obj, ia_sel_release);
}

size_t ia_objc_retain_count(id obj)
{
    if (obj == NULL || IA_OBJC_START())
        return 0;
    return IA_SEND(size_t (*)(id, SEL), obj, ia_sel_retainCount)(obj, ia_sel_retainCount);
}

Class ia_objc_class_of(id obj)
{
    return obj == NULL || IA_OBJC_START() ? NULL : IA_CLASS_OF(obj);
}

Class ia_objc_superclass(Class c)
{
    return c == NULL || IA_OBJC_START() ? NULL : ia_class_getSuperclass(c);
}

const char *ia_objc_class_name_of(Class c)
{
    return c == NULL || IA_OBJC_START() ? NULL : ia_class_getName(c);
}

Class ia_objc_lookup_class(const char *name)
{
    return IA_OBJC_START() ? NULL : ia_objc_getClass(name);
}

/* sends `selector` (returning an object) to obj, then UTF8String to the result: for NSError's domain and
   localizedDescription; call inside a pool (ia_objc_push) */
const char *ia_objc_send_utf8(id obj, const char *selector)
{
    SEL sel;
    id s;
    if (obj == NULL || IA_OBJC_START())
        return NULL;
    sel = ia_sel_registerName(selector);
    if (!ia_class_respondsToSelector(IA_CLASS_OF(obj), sel))
        return NULL;
    s = IA_SEND(id (*)(id, SEL), obj, sel)(obj, sel);
    if (s == NULL)
        return NULL;
    return IA_SEND(const char *(*)(id, SEL), s, ia_sel_utf8)(s, ia_sel_utf8);
}

long ia_objc_send_long(id obj, const char *selector)
{
    SEL sel;
    if (obj == NULL || IA_OBJC_START())
        return 0;
    sel = ia_sel_registerName(selector);
    if (!ia_class_respondsToSelector(IA_CLASS_OF(obj), sel))
        return 0;
    return IA_SEND(long (*)(id, SEL), obj, sel)(obj, sel);
}

void *ia_objc_push(void)
{
    return IA_OBJC_START() ? NULL : ia_objc_pool_push();
}

void ia_objc_pop(void *pool)
{
    if (ia_objc_ready)
        ia_objc_pool_pop(pool);
}

#ifdef Py_PYTHON_H
/* ---------------------------------------------------------------- the checked fast path (API mode, CPython)
 * The checked methods that take no argument and return a number (-[NSString length], -[NSArray count]) are
 * also compiled as method descriptors of the handle classes: the Python wrapper's frame is most of a checked
 * call's cost.  Each reads the handle's id from its _id slot (a cffi pointer cdata: its pointer is the cdata's
 * data field), calls ia_checked_<i> and raises binding.fail(index, handle, why) on a refusal.  The descriptors
 * are made for the run-time Object base class, so a handle of another class is refused by the responds check
 * (SYMBOL_NOT_FOUND), never by a TypeError.  ia_objc_install_fast() creates the module IA_PACKAGE._objc_fast,
 * whose install(classes, base, id_slot, cdata_type, fail) puts them in the classes (the trampolines define
 * ia_py_methods[] and ia_py_class[]). */
#include <structmember.h>  /* PyMemberDef (the _id slot's offset) */
static Py_ssize_t ia_py_id_offset = -1;
static PyTypeObject *ia_py_cdata_type;
static PyObject *ia_py_fail;

typedef struct { PyObject_HEAD void *ia_ctype; char *ia_data; } ia_py_cdata_t;  /* cffi's CDataObject head */

static id ia_py_self(PyObject *self)
{
    PyObject *cd = *(PyObject **)((char *)self + ia_py_id_offset);
    if (cd == NULL || !PyObject_TypeCheck(cd, ia_py_cdata_type))
        return NULL;  /* a closed or broken handle: nil, refused as INVALID_HANDLE */
    return (id)((ia_py_cdata_t *)cd)->ia_data;
}

static PyObject *ia_py_raise(int index, PyObject *self)
{
    int why = ia_objc_failure;
    PyObject *e;
    ia_objc_failure = IA_OBJC_OK;
    e = PyObject_CallFunction(ia_py_fail, "iOi", index, self, why);
    if (e != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(e), e);
        Py_DECREF(e);
    }
    return NULL;
}

static PyMethodDef ia_py_methods[IA_PY_METHODS + 1];
static int ia_py_class[IA_PY_METHODS + 1];

static PyObject *ia_py_install(PyObject *module, PyObject *args)
{
    PyObject *classes, *base, *slot, *cdata_type, *fail;
    int i;
    (void)module;
    if (!PyArg_ParseTuple(args, "O!O!OO!O:install", &PyTuple_Type, &classes, &PyType_Type, &base, &slot,
                          &PyType_Type, &cdata_type, &fail))
        return NULL;
    if (Py_TYPE(slot) != &PyMemberDescr_Type) {
        PyErr_SetString(PyExc_TypeError, "install: id_slot must be the handle class's _id member descriptor");
        return NULL;
    }
    ia_py_id_offset = ((PyMemberDescrObject *)slot)->d_member->offset;
    Py_INCREF(cdata_type);
    ia_py_cdata_type = (PyTypeObject *)cdata_type;
    Py_INCREF(fail);
    ia_py_fail = fail;
    for (i = 0; i < IA_PY_METHODS; i++) {
        PyObject *cls, *descr;
        if (ia_py_class[i] >= PyTuple_GET_SIZE(classes)) {
            PyErr_SetString(PyExc_IndexError, "install: fewer classes than the methods name");
            return NULL;
        }
        cls = PyTuple_GET_ITEM(classes, ia_py_class[i]);
        descr = PyDescr_NewMethod((PyTypeObject *)base, &ia_py_methods[i]);
        if (descr == NULL || PyObject_SetAttrString(cls, ia_py_methods[i].ml_name, descr) < 0) {
            Py_XDECREF(descr);
            return NULL;
        }
        Py_DECREF(descr);
    }
    return PyLong_FromLong(IA_PY_METHODS);
}

/* the MemoryPool free list in C (issue 27 item 3): _objc_fast._pool_cache_setup, as the C libraries' _fast has */
#include "ia_pool_cache.h"
/* allocations held by a vendor object, in C (issue 27 item 4; branch qm27): _objc_fast._handle_allocator */
#include "ia_handle_memory.h"

static PyMethodDef ia_py_module_methods[] = {
    {"install", ia_py_install, METH_VARARGS, "install(classes, base, id_slot, cdata_type, fail) -> count"},
    IA_POOL_CACHE_METHODS
    IA_HANDLE_MEMORY_METHODS
    {NULL, NULL, 0, NULL},
};
static struct PyModuleDef ia_py_module_def = {
    PyModuleDef_HEAD_INIT, IA_PACKAGE "._objc_fast", "The compiled checked methods of " IA_PACKAGE " (ia_objc.h).",
    -1, ia_py_module_methods, NULL, NULL, NULL, NULL,
};

/* Called once by __init__.py in API mode, through cffi (the GIL released): 0 once IA_PACKAGE._objc_fast is in
   sys.modules; -1 leaves the Python wrappers in use. */
int ia_objc_install_fast(void)
{
    int rc = -1;
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *m = PyModule_Create(&ia_py_module_def);
    if (m != NULL && PyDict_SetItemString(PyImport_GetModuleDict(), IA_PACKAGE "._objc_fast", m) == 0)
        rc = 0;
    Py_XDECREF(m);
    if (rc != 0)
        PyErr_Clear();
    PyGILState_Release(gil);
    return rc;
}
#endif /* Py_PYTHON_H */
