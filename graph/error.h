/* Status and message plumbing shared by every module.
 *
 * A failing function records a message with ge2_error() and returns its
 * status; the public ge2_last_error() reads the message back. The message is
 * thread-local, so concurrent programs on different threads don't mix them.
 */
#ifndef GE2_GRAPH_ERROR_H
#define GE2_GRAPH_ERROR_H

#include "ge2/ge2.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GE2_PRINTF(fmt_index, args_index) __attribute__((format(printf, fmt_index, args_index)))
#else
#define GE2_PRINTF(fmt_index, args_index)
#endif

/* Records "fmt ..." as the last error and returns status (never GE2_OK). */
ge2_status ge2_error(ge2_status status, const char *fmt, ...) GE2_PRINTF(2, 3);
void ge2_clear_error(void);

#define GE2_TRY(expr)                  \
    do {                               \
        ge2_status ge2_try_ = (expr);  \
        if (ge2_try_ != GE2_OK)        \
            return ge2_try_;           \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif /* GE2_GRAPH_ERROR_H */
