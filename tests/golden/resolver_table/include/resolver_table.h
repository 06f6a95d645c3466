/* resolver: {kind: table}: the library exports only tbGetProviders, which lists provider structs; each holds
   an API version and, in an anonymous union, a table of function pointers.  The functions declared below are
   called through the selected provider's table entries, never looked up by name.  The table grows by
   appending entries: deviceScale came in API 2.4, so a 2.3 provider's table may end before it. */
#ifndef RESOLVER_TABLE_H
#define RESOLVER_TABLE_H
#include <stdint.h>

typedef enum { TB_SUCCESS = 0, TB_ERROR_INVALID_VALUE = 1, TB_ERROR_UNKNOWN = 999 } tbStatus;

typedef struct {
    uint32_t major;
    uint32_t minor;
    uint32_t patch;
} TbVersion_t;

typedef tbStatus (*TbDeviceGetVersionFn_t)(int *major, int *minor);

typedef struct {
    TbDeviceGetVersionFn_t deviceGetVersion;
    tbStatus (*deviceAdd)(int a, int b, int *sum);
    tbStatus (*deviceReset)(void);
    int (*calls)(void);
    tbStatus (*deviceScale)(int x, int *scaled); /* API 2.4 */
} TbTable_t;

typedef struct {
    uint32_t backendId;
    const char *providerName;
    TbVersion_t apiVersion;
    union {
        TbTable_t v1;
    };
} TbInterface_t;

tbStatus tbGetProviders(const TbInterface_t ***list, uint32_t *count);
tbStatus TbDevice_getVersion(int *major, int *minor);
tbStatus TbDevice_add(int a, int b, int *sum);
tbStatus TbDevice_reset(void);
tbStatus TbDevice_scale(int x, int *scaled);
int tbCallCount(void);
#endif
