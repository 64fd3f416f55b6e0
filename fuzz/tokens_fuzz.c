/* libFuzzer target: llm.c's token shard reader (data/tokens.c) on
 * arbitrary bytes, with GPT-2's vocabulary. An accepted shard holds
 * exactly the tokens its header counts, each below the vocabulary, and a
 * batch over it reads only those. */
#include <stdint.h>
#include <stdlib.h>

#include "data/tokens.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum { VOCAB = 50257, B = 2, T = 4 };
    ge2_tokens *t;
    if (ge2_tokens_from_memory(data, size, "fuzz.bin", VOCAB, &t) != GE2_OK)
        return 0;
    const int64_t n = ge2_tokens_count(t);
    if (size != 1024 + 2 * (size_t)n)
        abort();
    for (int64_t i = 0; i < n; i++)
        if (ge2_tokens_at(t, i) >= VOCAB)
            abort();
    if (n > T + 1) {
        int32_t x[B * T], y[B * T];
        uint64_t rng = 1;
        ge2_tokens_batch(t, B, T, false, 0, &rng, x, y);
        ge2_tokens_batch(t, B, T, true, 3, NULL, x, y);
    }
    ge2_tokens_free(t);
    return 0;
}
