/* The message for a label or token id outside its range (control.h). */
#include "graph/control.h"
#include "graph/error.h"

ge2_status ge2_bad_index_error(const char *op_name, int node, ge2_bad_index_kind kind, int64_t position, int32_t value,
                        int64_t bound)
{
    static const char *const what[GE2_BAD_INDEX_KIND_COUNT] = {[GE2_BAD_LABEL] = "labels", [GE2_BAD_ID] = "ids",
                                                                      [GE2_BAD_POSITION] = "positions"};
    const char *name = (unsigned)kind < GE2_BAD_INDEX_KIND_COUNT ? what[kind] : "index";
    return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_%s (node %d): %s[%lld] is %d, outside [0, %lld)", op_name, node,
                     name, (long long)position, (int)value, (long long)bound);
}
