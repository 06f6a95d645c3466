#include <stdint.h>
#include "host_copy.h"

static unsigned long long hc_value[12];
static hcStatus fail_status;
static int fail_count;
static unsigned long long created;

hcMem hcCreateBuffer(hcContext context, unsigned long long flags, size_t size, void *host_ptr, hcStatus *errcode_ret)
{
    (void)context; (void)flags; (void)size; (void)host_ptr;
    if (errcode_ret) *errcode_ret = HC_SUCCESS;
    return (hcMem)(uintptr_t)(0x500000 + ++created * 0x1000);
}
hcStatus hcReleaseMem(hcMem mem)
{
    (void)mem;
    return HC_SUCCESS;
}
static hcStatus record(int which, hcQueue queue, hcMem buffer, hcBool blocking, size_t offset, size_t size,
                       const void *ptr, unsigned int nwait, const hcEvent *wait, hcEvent *event)
{
    hc_value[which]++;
    hc_value[2] = (unsigned long long)(uintptr_t)queue;
    hc_value[3] = (unsigned long long)(uintptr_t)buffer;
    hc_value[4] = blocking;
    hc_value[5] = offset;
    hc_value[6] = size;
    hc_value[7] = (unsigned long long)(uintptr_t)ptr;
    hc_value[8] = nwait;
    hc_value[9] = (unsigned long long)(uintptr_t)wait;
    hc_value[10] = (unsigned long long)(uintptr_t)event;
    if (fail_count > 0) {
        fail_count--;
        return fail_status;
    }
    return HC_SUCCESS;
}
hcStatus hcWriteBuffer(hcQueue queue, hcMem buffer, hcBool blocking_write, size_t offset, size_t size,
                       const void *ptr, unsigned int num_events_in_wait_list, const hcEvent *event_wait_list,
                       hcEvent *event)
{
    hcStatus s = record(0, queue, buffer, blocking_write, offset, size, ptr, num_events_in_wait_list,
                        event_wait_list, event);
    size_t i;
    if (s == HC_SUCCESS) {
        hc_value[11] = 0;
        for (i = 0; i < size; i++)
            hc_value[11] += ((const unsigned char *)ptr)[i];
    }
    return s;
}
hcStatus hcReadBuffer(hcQueue queue, hcMem buffer, hcBool blocking_read, size_t offset, size_t size, void *ptr,
                      unsigned int num_events_in_wait_list, const hcEvent *event_wait_list, hcEvent *event)
{
    hcStatus s = record(1, queue, buffer, blocking_read, offset, size, ptr, num_events_in_wait_list,
                        event_wait_list, event);
    size_t i;
    if (s == HC_SUCCESS)
        for (i = 0; i < size; i++)
            ((unsigned char *)ptr)[i] = (unsigned char)(i * 7 + 1);
    return s;
}
hcStatus hcValue(int index, unsigned long long *value)
{
    if (index < 0 || index >= 12) return HC_ERROR_INVALID_VALUE;
    *value = hc_value[index];
    return HC_SUCCESS;
}
hcStatus hcFail(hcStatus status, int count)
{
    fail_status = status;
    fail_count = count;
    return HC_SUCCESS;
}
