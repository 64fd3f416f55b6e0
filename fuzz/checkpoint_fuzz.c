/* libFuzzer target: the checkpoint reader on arbitrary bytes.
 *
 * Whatever the input, ge2_st_parse must return (OK or an error) without a
 * crash, leak or out-of-bounds access, and an accepted file's tensors must be
 * readable where the header says. fuzz/run.sh builds and runs it. */
#include <stdint.h>
#include <string.h>

#include "checkpoint/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ge2_st_file f;
    if (ge2_st_parse(data, size, "fuzz", &f) != GE2_OK)
        return 0;
    volatile uint8_t sink = 0;
    for (int i = 0; i < f.n_entries; i++) {
        const ge2_st_entry *e = &f.entries[i];
        for (uint64_t b = e->begin; b < e->end; b++)
            sink ^= f.data[b];
        /* the model-matching path the checkpoint loader takes */
        const uint8_t *p;
        ge2_shape shape = ge2_shape1(e->rank ? e->shape[0] : 1);
        if (ge2_st_expect_f32(&f, "fuzz", e->name, shape, &p) == GE2_OK && e->end > e->begin)
            sink ^= p[0]; /* an empty tensor's data pointer is one past the end: nothing to read */
    }
    (void)ge2_st_meta(&f, "step");
    ge2_st_release(&f);
    return 0;
}
