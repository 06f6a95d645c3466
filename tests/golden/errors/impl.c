#include <stdlib.h>
#include "errors.h"

struct err_queue_st { int queries; };

errStatus errInit(unsigned int flags) { return flags > 7 ? ERR_INVALID_VALUE : ERR_SUCCESS; }
errStatus errFail(errStatus status) { return status; }
errStatus errQuery(errQueue queue) { return (queue->queries++ % 2) ? ERR_SUCCESS : ERR_NOT_READY; }
errStatus errQueueCreate(errQueue *queue)
{
    *queue = calloc(1, sizeof **queue);
    return *queue ? ERR_SUCCESS : ERR_OUT_OF_MEMORY;
}
errStatus errGetErrorName(errStatus status, const char **name)
{
    switch (status) {
    case ERR_SUCCESS: *name = "ERR_SUCCESS"; return ERR_SUCCESS;
    case ERR_INVALID_VALUE: *name = "ERR_INVALID_VALUE"; return ERR_SUCCESS;
    case ERR_NOT_READY: *name = "ERR_NOT_READY"; return ERR_SUCCESS;
    default: *name = 0; return ERR_INVALID_VALUE;
    }
}
