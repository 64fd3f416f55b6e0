/* graph/f16.h's fp16 rounding against a reference that works on values,
 * not bits (ge2_ref_f16: the nearer of the two fp16 values around f on the
 * fp16 grid, the even one on a tie, 65520 and past to infinity). Every
 * fp16 pattern: its widened value against the pattern's definition
 * (m · 2^(e - 25), subnormals m · 2^-24), narrowing it back gives the
 * pattern, and the midpoint to the next pattern with a float ulp either
 * side rounds as the reference does; then random floats over the whole
 * range, the overflow boundary and the subnormals. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "graph/f16.h"
#include "graph/rng.h"
#include "tests/support/check_main.h"
#include "tests/support/reference.h"

/* The pattern holding the reference's value (any NaN as 0x7fff) */
static uint16_t reference(float f)
{
    if (isnan(f))
        return 0x7fff;
    const double r = ge2_ref_f16(f);
    const uint16_t sign = signbit(r) ? 0x8000 : 0;
    const double a = fabs(r);
    if (isinf(a))
        return sign | 0x7c00;
    if (a < ldexp(1.0, -14)) /* subnormal or zero: a multiple of 2^-24 */
        return sign | (uint16_t)(a * ldexp(1.0, 24));
    const int e = ilogb(a);
    return sign | (uint16_t)((e + 15) << 10) | (uint16_t)((a / ldexp(1.0, e) - 1.0) * 1024.0);
}

/* A finite pattern's value from the format's definition */
static double value_of(uint16_t h)
{
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    const double v = e ? ldexp(1024.0 + m, e - 25) : ldexp((double)m, -24);
    return h & 0x8000 ? -v : v;
}

static void expect_rounds(float f)
{
    const uint16_t got = ge2_f16_from_f32(f), want = reference(f);
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    ck_assert_msg(got == want, "%.9g (0x%08x) rounds to 0x%04x, the reference to 0x%04x", (double)f, bits, got, want);
}

START_TEST(every_pattern_and_its_midpoints)
{
    for (uint32_t h = 0; h <= 0xffff; h++) {
        if (((h >> 10) & 0x1f) == 0x1f) { /* inf and NaN */
            const float w = ge2_f32_from_f16((uint16_t)h);
            ck_assert(h & 0x3ff ? isnan(w) : isinf(w));
            ck_assert_int_eq(ge2_f16_from_f32(w), h & 0x3ff ? 0x7fff : h);
            continue;
        }
        const float w = ge2_f32_from_f16((uint16_t)h);
        ck_assert_msg((double)w == value_of((uint16_t)h), "0x%04x widens to %.9g, is %.9g", h, (double)w,
                      value_of((uint16_t)h));
        ck_assert_msg(ge2_f16_from_f32(w) == h || (w == 0 && (h & 0x7fff) == 0), "0x%04x does not come back", h);
        /* halfway to the next magnitude up (exact in float: 12 significant bits) and a float ulp around it */
        const uint16_t next = (uint16_t)(h + 1);
        const double up = ((next >> 10) & 0x1f) == 0x1f ? copysign(65520.0, value_of((uint16_t)h)) : value_of(next);
        const float mid = (float)((value_of((uint16_t)h) + up) / 2);
        expect_rounds(mid);
        expect_rounds(nextafterf(mid, 0.0f));
        expect_rounds(nextafterf(mid, copysignf(INFINITY, mid)));
    }
}
END_TEST

START_TEST(random_floats_round_as_the_reference)
{
    uint64_t state = 16;
    for (int i = 0; i < 2000000; i++) {
        /* exponents from far below the subnormals to past the overflow */
        const uint64_t bits = ge2_splitmix64_next(&state);
        const double u = (double)(bits >> 11) * 0x1.0p-53;
        const float f = (float)((2 * u - 1) * ldexp(1.0, (int)(bits & 63) % 48 - 30));
        expect_rounds(f);
    }
    expect_rounds(65519.99f);
    expect_rounds(65520.0f);
    expect_rounds(-65520.0f);
    expect_rounds(0x1p-25f);
    expect_rounds(0x1.000002p-25f);
    expect_rounds(INFINITY);
    expect_rounds(NAN);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("f16");
    TCase *tc = tcase_create("f16");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, every_pattern_and_its_midpoints);
    tcase_add_test(tc, random_floats_round_as_the_reference);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
