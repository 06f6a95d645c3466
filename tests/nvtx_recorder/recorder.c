/* A test fixture, not part of IronAccelerator: an NVTX tool ("injection library") that records the NVTX calls a
 * process makes, so tests can check what ironaccelerator.nvtx and IRONACCEL_TRACE=nvtx emit.  NVTX loads it from
 * NVTX_INJECTION64_PATH on the first NVTX call and calls InitializeInjectionNvtx2, which fills the core callback
 * tables with the functions below.  Each call appends one line to the file NVTX_RECORD_PATH names:
 *   push <message> | pop | mark <message> | domain <name> | dpush <domain> <message> <argb or -> | dpop <domain>
 *   | dmark <domain> <message> | ddestroy <domain>
 * Written from NVTX's documented injection interface (nvToolsExt.h declares it, from nvtxDetail/nvtxTypes.h). */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *out;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int depth;  /* per process: the tests push and pop on one thread */

struct domain { char name[128]; };

static void emit(const char *fmt, const char *a, const char *b, const char *c) {
    pthread_mutex_lock(&lock);
    if (out) {
        fprintf(out, fmt, a, b, c);
        fputc('\n', out);
        fflush(out);
    }
    pthread_mutex_unlock(&lock);
}

static const char *message(const nvtxEventAttributes_t *a) {
    if (a == NULL || a->messageType != NVTX_MESSAGE_TYPE_ASCII || a->message.ascii == NULL) return "?";
    return a->message.ascii;
}

static const char *dname(nvtxDomainHandle_t d) {
    return d ? ((struct domain *)(void *)d)->name : "(global)";
}

static int NVTX_API push_a(const char *m) { emit("push %s%s%s", m ? m : "?", "", ""); return depth++; }
static int NVTX_API pop(void) { emit("pop%s%s%s", "", "", ""); return depth > 0 ? --depth : -1; }
static void NVTX_API mark_a(const char *m) { emit("mark %s%s%s", m ? m : "?", "", ""); }

static nvtxDomainHandle_t NVTX_API domain_create_a(const char *name) {
    struct domain *d = calloc(1, sizeof *d);
    if (d == NULL) return NULL;
    snprintf(d->name, sizeof d->name, "%s", name ? name : "?");
    emit("domain %s%s%s", d->name, "", "");
    return (nvtxDomainHandle_t)(void *)d;
}

static void NVTX_API domain_destroy(nvtxDomainHandle_t d) { emit("ddestroy %s%s%s", dname(d), "", ""); free(d); }

static int NVTX_API domain_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    char color[16] = "-";
    if (a && a->colorType == NVTX_COLOR_ARGB) snprintf(color, sizeof color, "%08x", (unsigned)a->color);
    emit("dpush %s %s %s", dname(d), message(a), color);
    return depth++;
}

static int NVTX_API domain_pop(nvtxDomainHandle_t d) { emit("dpop %s%s%s", dname(d), "", ""); return depth > 0 ? --depth : -1; }
static void NVTX_API domain_mark_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    emit("dmark %s %s%s", dname(d), message(a), "");
}

static int install(NvtxGetExportTableFunc_t get, NvtxCallbackModule module, unsigned int id, NvtxFunctionPointer fn) {
    const NvtxExportTableCallbacks *cb = (const NvtxExportTableCallbacks *)get(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;
    if (cb == NULL || !cb->GetModuleFunctionTable(module, &table, &size) || table == NULL || id >= size) return 0;
    *table[id] = fn;
    return 1;
}

#define FN(f) ((NvtxFunctionPointer)(void (*)(void))(f))

NVTX_DYNAMIC_EXPORT int NVTX_API InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
    const char *path = getenv("NVTX_RECORD_PATH");
    out = path ? fopen(path, "a") : NULL;
    return out != NULL
        && install(get, NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushA, FN(push_a))
        && install(get, NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePop, FN(pop))
        && install(get, NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_MarkA, FN(mark_a))
        && install(get, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainCreateA, FN(domain_create_a))
        && install(get, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainDestroy, FN(domain_destroy))
        && install(get, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePushEx, FN(domain_push_ex))
        && install(get, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePop, FN(domain_pop))
        && install(get, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainMarkEx, FN(domain_mark_ex));
}
