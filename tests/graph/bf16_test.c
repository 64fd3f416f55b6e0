/* graph/bf16.h's rounding against a reference that works on values, not
 * bits (ge2_ref_bf16: the nearer of the two bf16 values around f by exact
 * distances in double, the even one on a tie). Every bf16 pattern (the upper 16 bits) with
 * the lower halves that decide rounding (zero, just above zero, just below,
 * at and just past one half, the largest), then random floats; widening is
 * exact and narrowing a widened bf16 gives it back. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "graph/bf16.h"
#include "graph/rng.h"
#include "tests/support/check_main.h"
#include "tests/support/reference.h"

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The reference's value (tests/support/reference.c, worked out on values),
 * as the bf16 pattern that holds it; any NaN as CUDA's */
static uint16_t reference(float f)
{
    if (isnan(f))
        return 0x7fff;
    const float r = (float)ge2_ref_bf16(f);
    uint32_t u;
    memcpy(&u, &r, sizeof u);
    return (uint16_t)(u >> 16);
}

START_TEST(every_pattern_and_its_rounding_boundaries)
{
    static const uint16_t lows[] = {0x0000, 0x0001, 0x3fff, 0x7fff, 0x8000, 0x8001, 0xbfff, 0xffff};
    long checked = 0;
    for (uint32_t high = 0; high <= 0xffff; high++)
        for (size_t k = 0; k < sizeof lows / sizeof lows[0]; k++) {
            const float f = from_bits(high << 16 | lows[k]);
            const uint16_t got = ge2_bf16_from_f32(f), want = reference(f);
            if (got != want) /* not ck_assert_msg: Check marks every passing assert through a pipe */
                ck_abort_msg("%a (0x%08x): 0x%04x, the reference 0x%04x", (double)f, (unsigned)(high << 16 | lows[k]),
                             got, want);
            checked++;
        }
    ck_assert_int_eq(checked, 65536L * 8);
}
END_TEST

START_TEST(random_floats)
{
    uint64_t state = 20261125;
    for (int i = 0; i < 2000000; i++) {
        const uint32_t u = (uint32_t)ge2_splitmix64_next(&state);
        const float f = from_bits(u);
        if (ge2_bf16_from_f32(f) != reference(f))
            ck_abort_msg("0x%08x: 0x%04x, the reference 0x%04x", (unsigned)u, ge2_bf16_from_f32(f), reference(f));
    }
}
END_TEST

START_TEST(widening_is_exact_and_round_trips)
{
    for (uint32_t h = 0; h <= 0xffff; h++) {
        const float f = ge2_f32_from_bf16((uint16_t)h);
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        ck_assert_uint_eq(u, h << 16);
        if (!isnan(f))
            ck_assert_uint_eq(ge2_bf16_from_f32(f), h);
    }
    /* values a reader can check by hand */
    ck_assert_uint_eq(ge2_bf16_from_f32(1.0f), 0x3f80);
    ck_assert_uint_eq(ge2_bf16_from_f32(-2.0f), 0xc000);
    ck_assert_uint_eq(ge2_bf16_from_f32(1.0f + 0x1p-8f), 0x3f80);       /* half a unit above 1: the even one, 1 */
    ck_assert_uint_eq(ge2_bf16_from_f32(1.0f + 0x3p-8f), 0x3f82);       /* half a unit above 1 + 2^-7: up, even */
    ck_assert_uint_eq(ge2_bf16_from_f32(FLT_MAX), 0x7f80);              /* past the largest bf16: infinity */
    ck_assert_uint_eq(ge2_bf16_from_f32(-INFINITY), 0xff80);
    ck_assert_uint_eq(ge2_bf16_from_f32(from_bits(0xffc00001u)), 0x7fff); /* any NaN: CUDA's */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bf16");
    TCase *tc = tcase_create("bf16");
    tcase_add_test(tc, every_pattern_and_its_rounding_boundaries);
    tcase_add_test(tc, random_floats);
    tcase_add_test(tc, widening_is_exact_and_round_trips);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
