/* Sampling from a GPT (gpt_generate.h). */
#include "examples/gpt_generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ge2/extension.h" /* ge2_error */
#include "graph/clock.h"
#include "graph/rng.h"

/* The k-th largest of x [n] (k in [1, n]); x is reordered. Quickselect. */
static float kth_largest(float *x, int64_t n, int64_t k)
{
    int64_t lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        const float pivot = x[lo + (hi - lo) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (x[i] > pivot)
                i++;
            while (x[j] < pivot)
                j--;
            if (i <= j) {
                const float t = x[i];
                x[i++] = x[j];
                x[j--] = t;
            }
        }
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            return x[want];
    }
    return x[want];
}

/* A token drawn from logits [V]: nanoGPT's logits / temperature, those
 * below the k-th largest dropped, softmax, a multinomial draw. scratch [V]. */
static int32_t draw(const float *logits, int64_t V, const gpt_sampling *s, uint64_t *rng, float *scratch)
{
    float floor = -INFINITY;
    if (s->top_k > 0 && s->top_k < V) {
        memcpy(scratch, logits, sizeof(float) * (size_t)V);
        floor = kth_largest(scratch, V, s->top_k);
    }
    double top = -INFINITY, z = 0;
    for (int64_t v = 0; v < V; v++)
        if (logits[v] >= floor)
            top = fmax(top, logits[v] / s->temperature);
    for (int64_t v = 0; v < V; v++)
        z += logits[v] >= floor ? exp(logits[v] / s->temperature - top) : 0.0;
    const double u = (double)(ge2_splitmix64_next(rng) >> 11) * 0x1.0p-53 * z;
    double acc = 0;
    int32_t last = 0;
    for (int64_t v = 0; v < V; v++) {
        if (logits[v] < floor)
            continue;
        last = (int32_t)v;
        if ((acc += exp(logits[v] / s->temperature - top)) > u)
            return (int32_t)v;
    }
    return last; /* u at the very top of the sum's rounding */
}

/* One decoder step: token at position; logits [V] read back when wanted */
static ge2_status decode(ge2_program *program, const gpt_decoder *d, int32_t token, int32_t position, float *logits,
                         int64_t V)
{
    ge2_feed f[2] = {{d->token, &token, ge2_shape1(1)}, {d->position, &position, ge2_shape1(1)}};
    ge2_status st = ge2_program_step(program, GE2_MODE_EVAL, f, 2);
    if (st == GE2_OK && logits)
        st = ge2_program_read_output(program, GE2_MODE_EVAL, d->logits, logits, sizeof(float) * (size_t)V);
    return st;
}

ge2_status gpt_generate_cached(ge2_program *program, const gpt_decoder *d, const gpt_config *cfg,
                               const int32_t *prompt, int64_t n_prompt, const gpt_sampling *s, int32_t *out,
                               double *seconds)
{
    const int64_t V = cfg->vocab, T = cfg->block_size, keep = T / 2 > 0 ? T / 2 : 1;
    int32_t *text = malloc(sizeof(int32_t) * (size_t)(n_prompt + s->tokens));
    float *logits = malloc(sizeof(float) * (size_t)V * 2);
    uint64_t rng = s->seed;
    ge2_status st = n_prompt < 1 ? ge2_error(GE2_ERR_INVALID_ARGUMENT, "generation needs a prompt of a token at least")
                    : text && logits ? GE2_OK
                                     : ge2_error(GE2_ERR_OUT_OF_MEMORY, "generation: %lld tokens", (long long)s->tokens);
    /* a first step captures the key: the rate counts the steps after it
     * (this one writes row 0 of the caches as the loop's first step will) */
    if (st == GE2_OK)
        st = decode(program, d, prompt[0], 0, logits, V);
    const double t0 = ge2_now_s();
    /* the caches hold text[base, base + cached) at positions 0, 1, ... */
    int64_t n = n_prompt, base = 0, cached = 0;
    if (st == GE2_OK)
        memcpy(text, prompt, sizeof(int32_t) * (size_t)n_prompt);
    for (int64_t i = 0; st == GE2_OK && i < s->tokens; i++) {
        if (n - base > T) { /* full: the last half of the text again, from position 0 */
            base = n - keep;
            cached = 0;
        }
        for (; st == GE2_OK && base + cached < n; cached++) /* the newest token last, its logits read */
            st = decode(program, d, text[base + cached], (int32_t)cached, base + cached + 1 == n ? logits : NULL, V);
        if (st == GE2_OK)
            out[i] = text[n++] = draw(logits, V, s, &rng, logits + V);
    }
    *seconds = ge2_now_s() - t0;
    free(text);
    free(logits);
    return st;
}

ge2_status gpt_generate_recompute(ge2_program *program, const gpt_model *m, const gpt_config *cfg,
                                  const int32_t *prompt, int64_t n_prompt, const gpt_sampling *s, int32_t *out,
                                  double *seconds)
{
    const int64_t T = cfg->block_size, V = cfg->vocab;
    float *logits = malloc(sizeof(float) * (size_t)(T * V + V));
    int32_t *window = calloc((size_t)T, sizeof(int32_t)), *targets = calloc((size_t)T, sizeof(int32_t));
    uint64_t rng = s->seed;
    ge2_status st = n_prompt < 1 ? ge2_error(GE2_ERR_INVALID_ARGUMENT, "generation needs a prompt of a token at least")
                    : logits && window && targets ? GE2_OK
                                                  : ge2_error(GE2_ERR_OUT_OF_MEMORY, "generation: a window of %lld "
                                                              "logits", (long long)(T * V));
    int64_t len = n_prompt < T ? n_prompt : T;
    if (st == GE2_OK)
        memcpy(window, prompt + n_prompt - len, sizeof(int32_t) * (size_t)len);
    /* the causal mask keeps the padding after len out of row len - 1 */
    ge2_feed f[2] = {{m->idx, window, ge2_shape2(1, T)}, {m->targets, targets, ge2_shape1(T)}};
    if (st == GE2_OK) /* a first step captures the key: the rate counts the steps after it */
        st = ge2_program_step(program, GE2_MODE_EVAL, f, 2);
    if (st == GE2_OK)
        st = ge2_program_sync(program);
    const double t1 = ge2_now_s();
    for (int64_t i = 0; st == GE2_OK && i < s->tokens; i++) {
        st = ge2_program_step(program, GE2_MODE_EVAL, f, 2);
        if (st == GE2_OK)
            st = ge2_program_read_output(program, GE2_MODE_EVAL, m->logits, logits, sizeof(float) * (size_t)(T * V));
        if (st != GE2_OK)
            break;
        const int32_t pick = draw(logits + (len - 1) * V, V, s, &rng, logits + T * V);
        out[i] = pick;
        if (len < T) {
            window[len++] = pick;
        } else {
            memmove(window, window + 1, sizeof(int32_t) * (size_t)(T - 1));
            window[T - 1] = pick;
        }
    }
    *seconds = ge2_now_s() - t1;
    free(logits);
    free(window);
    free(targets);
    return st;
}
