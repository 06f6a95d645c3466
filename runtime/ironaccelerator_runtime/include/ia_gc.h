/* The garbage collector's side of the runtime's C types (ia_runtime.h, ia_memory_common.h, ia_prepared_launch.h):
 * a type lists its object members once, as offsets, in `<prefix>_refs` (`<prefix>_members` is its PyMemberDef
 * table, where it has one),
 *
 *     static const Py_ssize_t ia_xx_refs[] = {IA_MEMBER(ia_xx_object, ref), IA_MEMBER(ia_xx_object, slow),
 *                                             IA_MEMBERS_END};
 *
 * and its tp_traverse visits them, its tp_clear clears them (ia_gc_visit, ia_gc_clear; in the list's order), and
 * its tp_dealloc untracks, clears and frees the object: IA_GC_TRAVERSE_CLEAR(ia_xx) and IA_GC_DEALLOC(ia_xx)
 * define ia_xx_traverse, ia_xx_clear and ia_xx_dealloc so.  A type whose clear or dealloc does more (frees a
 * vendor object, drops a prepared launch, releases a lock) calls ia_gc_visit / ia_gc_clear from its own.
 * IA_SHUT_METHOD(ia_xx, ia_xx_object) defines ia_xx_shut_method, the `_shut()` of an object that the device
 * it serves shuts when it closes (every later call takes the slow path), and IA_SHUT_METHOD_DEF(ia_xx) its
 * PyMethodDef row. */
#ifndef IA_GC_H
#define IA_GC_H

#include <stddef.h>

#define IA_MEMBER(type, field) ((Py_ssize_t)offsetof(type, field))
#define IA_MEMBERS_END ((Py_ssize_t)-1)

static inline int ia_gc_visit(PyObject *self, const Py_ssize_t *members, visitproc visit, void *arg)
{
    for (; *members >= 0; members++)
        Py_VISIT(*(PyObject **)((char *)self + *members));
    return 0;
}

static inline void ia_gc_clear(PyObject *self, const Py_ssize_t *members)
{
    for (; *members >= 0; members++)
        Py_CLEAR(*(PyObject **)((char *)self + *members));
}

#define IA_GC_TRAVERSE_CLEAR(prefix)                                                                        \
    static int prefix##_traverse(PyObject *self, visitproc visit, void *arg)                                \
    {                                                                                                       \
        return ia_gc_visit(self, prefix##_refs, visit, arg);                                             \
    }                                                                                                       \
    static int prefix##_clear(PyObject *self)                                                               \
    {                                                                                                       \
        ia_gc_clear(self, prefix##_refs);                                                                \
        return 0;                                                                                           \
    }

#define IA_GC_DEALLOC(prefix)                                                                               \
    static void prefix##_dealloc(PyObject *self)                                                            \
    {                                                                                                       \
        PyObject_GC_UnTrack(self);                                                                          \
        prefix##_clear(self);                                                                               \
        Py_TYPE(self)->tp_free(self);                                                                       \
    }

#define IA_SHUT_METHOD(prefix, ctype)                                                                       \
    static PyObject *prefix##_shut_method(PyObject *self, PyObject *Py_UNUSED(ignored))                     \
    {                                                                                                       \
        ((ctype *)self)->shut = 1;                                                                          \
        Py_RETURN_NONE;                                                                                     \
    }

#define IA_SHUT_METHOD_DEF(prefix)                                                                          \
    {"_shut", prefix##_shut_method, METH_NOARGS, "Every later call takes the slow path (the device was closed)."}

#endif /* IA_GC_H */
