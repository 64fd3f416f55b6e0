/* Parameter initialisation: a pure function of (seed, name, index), with the
 * distributions' bounds and moments. */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "graph/init.h"
#include "tests/support/check_main.h"

static const ge2_init uniform01 = {GE2_INIT_UNIFORM, 0, 1, 0};

static float *fill(uint64_t seed, const char *name, ge2_shape s, ge2_init init)
{
    ge2_graph *g;
    ge2_tensor *p;
    ck_assert_int_eq(ge2_graph_new(&g), GE2_OK);
    ge2_graph_set_seed(g, seed);
    /* a decoy first, so the tensor id differs from graph to graph: ids must not matter */
    ge2_tensor *decoy;
    ck_assert_int_eq(ge2_parameter(g, seed % 2 ? "decoy_a" : "decoy_bb", GE2_F32, ge2_shape1(3), uniform01, &decoy), GE2_OK);
    ck_assert_int_eq(ge2_parameter(g, name, GE2_F32, s, init, &p), GE2_OK);
    float *v = malloc(sizeof(float) * (size_t)ge2_shape_numel(s));
    ge2_init_fill(g, p, v);
    ge2_graph_free(g);
    return v;
}


START_TEST(same_seed_same_values_names_and_seeds_change_them)
{
    ge2_shape s = ge2_shape2(16, 8);
    float *a = fill(7, "w", s, uniform01), *b = fill(7, "w", s, uniform01);
    float *c = fill(7, "v", s, uniform01), *d = fill(8, "w", s, uniform01);
    int same_c = 0, same_d = 0;
    for (int i = 0; i < 128; i++) {
        ck_assert(a[i] == b[i]);
        same_c += a[i] == c[i];
        same_d += a[i] == d[i];
    }
    ck_assert_int_lt(same_c, 2);
    ck_assert_int_lt(same_d, 2);
    free(a), free(b), free(c), free(d);
}
END_TEST

START_TEST(f64_fill_is_the_f32_fill_rounded)
{
    ge2_graph *g;
    ge2_tensor *p32, *p64;
    ck_assert_int_eq(ge2_graph_new(&g), GE2_OK);
    ge2_init n = {GE2_INIT_NORMAL, 0.5, 2.0, 0};
    ck_assert_int_eq(ge2_parameter(g, "p", GE2_F32, ge2_shape1(64), n, &p32), GE2_OK);
    ck_assert_int_eq(ge2_parameter(g, "q", GE2_F64, ge2_shape1(64), n, &p64), GE2_OK);
    float f[64];
    double d[64];
    ge2_init_fill(g, p32, f);
    /* same name, other dtype: fill p64's buffer as if named "p" */
    snprintf(p64->name, sizeof p64->name, "p");
    ge2_init_fill(g, p64, d);
    for (int i = 0; i < 64; i++)
        ck_assert(f[i] == (float)d[i]);
    ge2_graph_free(g);
}
END_TEST

START_TEST(linear_default_bounds)
{
    ge2_init w = {GE2_INIT_LINEAR_DEFAULT, 0, 0, 0}, b = {GE2_INIT_LINEAR_DEFAULT, 0, 0, 100};
    float *wv = fill(1, "w", ge2_shape2(50, 400), w), *bv = fill(1, "b", ge2_shape1(4000), b);
    double wb = 1 / sqrt(400.0), bb = 1 / sqrt(100.0), wmax = 0, bmax = 0;
    for (int i = 0; i < 20000; i++) {
        ck_assert(fabs(wv[i]) <= wb);
        wmax = fmax(wmax, fabs(wv[i]));
    }
    for (int i = 0; i < 4000; i++) {
        ck_assert(fabs(bv[i]) <= bb);
        bmax = fmax(bmax, fabs(bv[i]));
    }
    /* the whole interval is used */
    ck_assert(wmax > 0.99 * wb);
    ck_assert(bmax > 0.99 * bb);
    free(wv), free(bv);
}
END_TEST

static void moments(const float *v, int n, double *mean, double *var)
{
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    *mean = s / n;
    for (int i = 0; i < n; i++)
        ss += (v[i] - *mean) * (v[i] - *mean);
    *var = ss / (n - 1);
}

START_TEST(uniform_and_normal_moments)
{
    enum { N = 200000 };
    double mean, var;
    float *u = fill(3, "u", ge2_shape1(N), (ge2_init){GE2_INIT_UNIFORM, -2, 4, 0});
    moments(u, N, &mean, &var);
    /* U[-2, 4): mean 1, variance 36/12 = 3; 5 standard errors */
    ck_assert_double_eq_tol(mean, 1.0, 5 * sqrt(3.0 / N));
    ck_assert_double_eq_tol(var, 3.0, 0.03);
    for (int i = 0; i < N; i++)
        ck_assert(u[i] >= -2 && u[i] < 4);
    free(u);
    float *z = fill(3, "z", ge2_shape1(N), (ge2_init){GE2_INIT_NORMAL, 1.5, 0.5, 0});
    moments(z, N, &mean, &var);
    ck_assert_double_eq_tol(mean, 1.5, 5 * 0.5 / sqrt(N));
    ck_assert_double_eq_tol(sqrt(var), 0.5, 0.01);
    free(z);
    float *c = fill(3, "c", ge2_shape1(10), (ge2_init){GE2_INIT_CONSTANT, 0.25, 0, 0});
    float *o = fill(3, "o", ge2_shape1(10), (ge2_init){GE2_INIT_ZEROS, 9, 9, 0});
    for (int i = 0; i < 10; i++) {
        ck_assert(c[i] == 0.25f);
        ck_assert(o[i] == 0.0f);
    }
    free(c), free(o);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("init");
    TCase *tc = tcase_create("init");
    tcase_add_test(tc, same_seed_same_values_names_and_seeds_change_them);
    tcase_add_test(tc, f64_fill_is_the_f32_fill_rounded);
    tcase_add_test(tc, linear_default_bounds);
    tcase_add_test(tc, uniform_and_normal_moments);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
