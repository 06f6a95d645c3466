/* Status codes mapped onto ErrorKind, a name function, codes returned as results, the default kind. */
#ifndef ERRORS_H
#define ERRORS_H

typedef enum errors_status_enum {
    ERR_SUCCESS = 0,
    ERR_INVALID_VALUE = 1,
    ERR_OUT_OF_MEMORY = 2,
    ERR_NOT_READY = 3,
    ERR_UNKNOWN = 999 /* defaulted: the spec's default kind (DRIVER) */
} errStatus;

typedef struct err_queue_st *errQueue;

/* INVALID_VALUE when flags > 7 */
errStatus errInit(unsigned int flags);
/* returns `status` as is */
errStatus errFail(errStatus status);
/* NOT_READY, SUCCESS, NOT_READY, ... (NOT_READY is a result, not an error: the spec's status:) */
errStatus errQuery(errQueue queue);
errStatus errQueueCreate(errQueue *queue);
/* the name of SUCCESS, INVALID_VALUE and NOT_READY; INVALID_VALUE for any other status */
errStatus errGetErrorName(errStatus status, const char **name);
#endif
