/* Exports tbGetProviders (and a decoy TbDevice_add, which the binding must never call: it answers 1000 more).
   The providers, in list order: 2.0 (too old a minor), 1.9 and 3.0 (other majors), 2.5 of another backend
   (backendId 99), then 2.3 of backend 23, the one to select: its deviceReset entry is NULL, and its
   deviceScale slot, an entry of API 2.4, is not NULL but must never be read (a 2.3 library's table may end
   before it).  Built with -DGOLDEN_NO_MATCH, the 2.3 provider is left out. */
#include <stddef.h>
#include "resolver_table.h"

static int calls = 0;
static int call_count(void) { return calls; }

static tbStatus v20_version(int *major, int *minor) { *major = 2; *minor = 0; calls++; return TB_SUCCESS; }
static tbStatus v19_version(int *major, int *minor) { *major = 1; *minor = 9; calls++; return TB_SUCCESS; }
static tbStatus v30_version(int *major, int *minor) { *major = 3; *minor = 0; calls++; return TB_SUCCESS; }
static tbStatus v25_version(int *major, int *minor) { *major = 2; *minor = 5; calls++; return TB_SUCCESS; }
static tbStatus other_add(int a, int b, int *sum) { *sum = -(a + b); calls++; return TB_SUCCESS; }
static tbStatus other_reset(void) { calls++; return TB_SUCCESS; }
static tbStatus other_scale(int x, int *scaled) { *scaled = 2 * x; calls++; return TB_SUCCESS; }

static const TbInterface_t early = {23, "early", {2, 0, 0}, {{v20_version, other_add, other_reset, call_count, NULL}}};
static const TbInterface_t legacy = {23, "legacy", {1, 9, 4}, {{v19_version, other_add, other_reset, call_count, NULL}}};
static const TbInterface_t next = {23, "next", {3, 0, 0}, {{v30_version, other_add, other_reset, call_count, other_scale}}};
static const TbInterface_t other = {99, "other", {2, 5, 0}, {{v25_version, other_add, other_reset, call_count, other_scale}}};
#ifdef GOLDEN_NO_MATCH
static const TbInterface_t *providers[] = {&early, &legacy, &next, &other};
#else
static tbStatus v23_version(int *major, int *minor) { *major = 2; *minor = 3; calls++; return TB_SUCCESS; }
static tbStatus v23_add(int a, int b, int *sum) { *sum = a + b; calls++; return TB_SUCCESS; }
static tbStatus v23_past_the_end(int x, int *scaled) { *scaled = -1; calls += 1000; return TB_SUCCESS; }
static const TbInterface_t current = {23, "current", {2, 3, 1},
                                      {{v23_version, v23_add, NULL, call_count, v23_past_the_end}}};
static const TbInterface_t *providers[] = {&early, &legacy, &next, &other, &current};
#endif

tbStatus tbGetProviders(const TbInterface_t ***list, uint32_t *count)
{
    if (list == NULL || count == NULL)
        return TB_ERROR_INVALID_VALUE;
    *list = providers;
    *count = (uint32_t)(sizeof providers / sizeof providers[0]);
    return TB_SUCCESS;
}

tbStatus TbDevice_add(int a, int b, int *sum) { *sum = a + b + 1000; return TB_SUCCESS; }
