/* Counts the calls into CPython's memory allocators, for bench/bench_launch_cpu.py (section 4: the hot path
 * never allocates) and tests/launch_stub_child.py.
 *
 * count_start() wraps the allocators of the PYMEM_DOMAIN_MEM and PYMEM_DOMAIN_OBJ domains (every Python
 * object that is not served from a free list, and PyMem_Malloc's buffers) with counting ones that call the
 * originals; count_stop() restores them; count_calls() is the number of malloc, calloc and realloc calls
 * seen so far.  Load it with ctypes.PyDLL (the GIL held: the allocators are swapped under it).  Built by
 * bench_launch_cpu.build_counter() with gcc against this Python's headers.
 */
#include <Python.h>
static PyMemAllocatorEx ia_old[2];
static unsigned long long ia_calls;
static void *ia_malloc(void *ctx, size_t n) { PyMemAllocatorEx *o = ctx; ia_calls++; return o->malloc(o->ctx, n); }
static void *ia_calloc(void *ctx, size_t e, size_t n) { PyMemAllocatorEx *o = ctx; ia_calls++; return o->calloc(o->ctx, e, n); }
static void *ia_realloc(void *ctx, void *p, size_t n) { PyMemAllocatorEx *o = ctx; ia_calls++; return o->realloc(o->ctx, p, n); }
static void ia_free(void *ctx, void *p) { PyMemAllocatorEx *o = ctx; o->free(o->ctx, p); }
static const PyMemAllocatorDomain ia_domains[2] = {PYMEM_DOMAIN_MEM, PYMEM_DOMAIN_OBJ};
void count_start(void) {
    for (int i = 0; i < 2; i++) {
        PyMemAllocatorEx a = {&ia_old[i], ia_malloc, ia_calloc, ia_realloc, ia_free};
        PyMem_GetAllocator(ia_domains[i], &ia_old[i]);
        PyMem_SetAllocator(ia_domains[i], &a);
    }
}
void count_stop(void) { for (int i = 0; i < 2; i++) PyMem_SetAllocator(ia_domains[i], &ia_old[i]); }
unsigned long long count_calls(void) { return ia_calls; }
