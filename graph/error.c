/* The last error message, one per thread. */
#include <stdarg.h>
#include <stdio.h>

#include "graph/error.h"

static _Thread_local char last_error[1024];

ge2_status ge2_error(ge2_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

void ge2_clear_error(void) { last_error[0] = '\0'; }

const char *ge2_last_error(void) { return last_error; }

const char *ge2_status_name(ge2_status status)
{
    static const char *const names[GE2_STATUS_COUNT] = {
        [GE2_OK] = "ok",
        [GE2_ERR_INVALID_ARGUMENT] = "invalid argument",
        [GE2_ERR_SHAPE] = "shape error",
        [GE2_ERR_DTYPE] = "dtype error",
        [GE2_ERR_GRAPH] = "graph error",
        [GE2_ERR_UNSUPPORTED] = "unsupported",
        [GE2_ERR_OUT_OF_MEMORY] = "out of memory",
        [GE2_ERR_IO] = "I/O error",
        [GE2_ERR_FORMAT] = "format error",
        [GE2_ERR_NO_DEVICE] = "no CUDA device",
        [GE2_ERR_CUDA] = "CUDA error",
        [GE2_ERR_STATE] = "invalid state",
        [GE2_ERR_COLLECTIVE] = "collective failed",
    };
    if ((unsigned)status >= GE2_STATUS_COUNT)
        return "unknown status";
    return names[status];
}
