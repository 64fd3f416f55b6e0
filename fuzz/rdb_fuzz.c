/* libFuzzer target: the .rdb reader (data/rdb.h) on arbitrary bytes. An
 * accepted input gives text of exactly `lines` lines, each ended by '\n'. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/rdb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ge2_rdb_text t;
    if (ge2_rdb_read_text(data, size, "fuzz", &t) != GE2_OK)
        return 0;
    int64_t newlines = 0;
    for (size_t i = 0; i < t.len; i++)
        newlines += t.text[i] == '\n';
    if (newlines != t.lines || (t.len > 0 && t.text[t.len - 1] != '\n') || t.records < 1)
        abort();
    ge2_rdb_text_release(&t);
    return 0;
}
