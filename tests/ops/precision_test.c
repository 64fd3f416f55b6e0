/* ge2_compile_options.precision on the CPU backend. BF16: a linear layer's
 * output equals a float64 product of its operands rounded to bf16 (the
 * bias and the sums unrounded), and differs from the fp32 program's; its
 * weight gradient likewise; a linear layer trained in bf16 lands near its
 * fp32 twin without matching it; a convolution (its im2col GEMM) rounds
 * its operands too, and its results (y, dw) to bf16; a precision out of
 * range is refused. The storage pass gives each
 * f32 tensor a GEMM reads one bf16 copy, on the program's own graph; a
 * bias gradient then sums the rounded output gradient, as PyTorch's
 * autocast does. (op_agreement_test holds CUDA to these on the GPU.) */
#include <check.h>
#include <math.h>
#include <string.h>

#include "capture/program_state.h"
#include "fusion/recompute_act/recompute_act.h"
#include "ge2/ge2.h"
#include "graph/ir.h"
#include "ops/ops.h"
#include "tests/support/check_main.h"
#include "tests/support/reference.h"

#define API(call) ck_assert_msg((call) == GE2_OK, "%s: %s", #call, ge2_last_error())

enum { B = 6, K = 40, N = 7 };

typedef struct net {
    ge2_context *ctx;
    ge2_graph *graph;
    ge2_program *program;
    ge2_tensor *x, *t, *w, *b, *y, *loss;
} net;

/* x [B, K] -> linear (w [N, K][, b [N]]) -> y [B, N] (an output), mean
 * squared error against t, trained by cfg; not compiled */
static void net_build(net *m, bool bias, const ge2_optimizer_config *cfg)
{
    API(ge2_context_new(GE2_DEVICE_CPU, &m->ctx));
    API(ge2_graph_new(&m->graph));
    API(ge2_graph_set_seed(m->graph, 5));
    API(ge2_input(m->graph, "x", GE2_F32, ge2_shape2(B, K), &m->x));
    API(ge2_label(m->graph, "t", GE2_F32, ge2_shape2(B, N), &m->t));
    API(ge2_parameter(m->graph, "w", GE2_F32, ge2_shape2(N, K), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &m->w));
    m->b = NULL;
    if (bias)
        API(ge2_parameter(m->graph, "b", GE2_F32, ge2_shape1(N), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &m->b));
    API(ge2_linear(m->graph, m->x, m->w, m->b, GE2_ACT_NONE, 0, &m->y));
    API(ge2_mark_output(m->graph, m->y));
    API(ge2_mse_loss(m->graph, m->y, m->t, &m->loss));
    API(ge2_backward(m->graph, m->loss));
    API(ge2_optimizer(m->graph, cfg));
}

/* The net with a bias, SGD, compiled in precision */
static void net_open(net *m, ge2_precision precision)
{
    ge2_optimizer_config sgd = ge2_optimizer_defaults(GE2_OPT_SGD);
    sgd.lr = 0.05;
    net_build(m, true, &sgd);
    ge2_compile_options o = ge2_compile_defaults();
    o.precision = precision;
    API(ge2_compile(m->ctx, m->graph, &o, &m->program));
}

static void net_close(net *m)
{
    ge2_program_free(m->program);
    ge2_graph_free(m->graph);
    ge2_context_free(m->ctx);
}

/* batch s: x and t, values with more than bf16's 8 significant bits */
static void batch(int s, float *x, float *t)
{
    for (int i = 0; i < B * K; i++)
        x[i] = (float)sin(0.731 * i + 1.3 * s) * 1.7f;
    for (int i = 0; i < B * N; i++)
        t[i] = (float)cos(0.377 * i - 0.5 * s);
}

static void run(net *m, ge2_mode mode, int s)
{
    float x[B * K], t[B * N];
    batch(s, x, t);
    ge2_feed f[2] = {{m->x, x, m->x->shape}, {m->t, t, m->t->shape}};
    API(ge2_program_step(m->program, mode, f, 2));
    API(ge2_program_sync(m->program));
}

static double unrounded(double v) { return v; }

/* Output [r, c] of round(x) · round(w)ᵀ + b in float64 (x [B, K], w [N, K]);
 * *scale: |b| + Σ |x·w|, the size an fp32 sum of the terms errs by */
static double product_at(double (*round)(double), const float *x, const float *w, const float *b, int r, int c,
                         double *scale)
{
    double sum = b[c];
    *scale = fabs((double)b[c]);
    for (int k = 0; k < K; k++) {
        sum += round(x[r * K + k]) * round(w[c * K + k]);
        *scale += fabs((double)x[r * K + k] * w[c * K + k]);
    }
    return sum;
}

/* y [B, N] = round(x) · round(w)ᵀ + b (round: ge2_ref_bf16 or
 * ge2_ref_f16), as a float64 product of the rounded operands with the
 * sums' fp32 tolerance; returns how many outputs differ from the unrounded
 * product by more than the tolerance (so tell the rounding from fp32) */
static int assert_rounded_by(const char *what, double (*round)(double), const float *x, const float *w,
                             const float *b, const float *y)
{
    int differ = 0;
    for (int r = 0; r < B; r++)
        for (int c = 0; c < N; c++) {
            double scale;
            const double rounded = product_at(round, x, w, b, r, c, &scale);
            const double exact = product_at(unrounded, x, w, b, r, c, &scale);
            const double tol = 1e-6 * scale; /* fp32 sums of K terms */
            ck_assert_msg(fabs(y[r * N + c] - rounded) <= tol, "%s y[%d,%d] %.9g, rounded product %.9g", what, r, c,
                          (double)y[r * N + c], rounded);
            differ += fabs(rounded - exact) > 10 * tol;
        }
    return differ;
}

static int assert_rounded_product(const char *what, const float *x, const float *w, const float *b, const float *y)
{
    return assert_rounded_by(what, ge2_ref_bf16, x, w, b, y);
}

START_TEST(bf16_linear_is_the_rounded_product)
{
    net bf, fp;
    net_open(&bf, GE2_PRECISION_BF16);
    net_open(&fp, GE2_PRECISION_FP32);
    float x[B * K], t[B * N], w[N * K], b[N], y_bf[B * N], y_fp[B * N];
    batch(0, x, t);
    API(ge2_program_get_parameter(bf.program, bf.w, w, sizeof w));
    API(ge2_program_get_parameter(bf.program, bf.b, b, sizeof b));
    run(&bf, GE2_MODE_EVAL, 0);
    run(&fp, GE2_MODE_EVAL, 0);
    API(ge2_program_read_output(bf.program, GE2_MODE_EVAL, bf.y, y_bf, sizeof y_bf));
    API(ge2_program_read_output(fp.program, GE2_MODE_EVAL, fp.y, y_fp, sizeof y_fp));
    assert_rounded_product("bf16", x, w, b, y_bf);
    int differ = 0;
    for (int r = 0; r < B; r++)
        for (int c = 0; c < N; c++) {
            double scale;
            const double exact = product_at(unrounded, x, w, b, r, c, &scale);
            const double tol = 1e-6 * scale; /* fp32 sums of K terms */
            ck_assert_msg(fabs(y_fp[r * N + c] - exact) <= tol, "fp32 y[%d,%d] %.9g, product %.9g", r, c,
                          (double)y_fp[r * N + c], exact);
            differ += fabs(y_bf[r * N + c] - y_fp[r * N + c]) > 10 * tol;
        }
    ck_assert_msg(differ > B * N / 2, "only %d of %d outputs tell bf16 from fp32", differ, B * N);
    net_close(&bf);
    net_close(&fp);
}
END_TEST

/* Precision FP16: the operands rounded to fp16 (ge2_ref_f16's grid, 10
 * mantissa bits), fp32 sums: the product of the fp16 operands, which for
 * most outputs is neither fp32's nor bf16's */
START_TEST(fp16_linear_is_the_rounded_product)
{
    net h;
    net_open(&h, GE2_PRECISION_FP16);
    float x[B * K], t[B * N], w[N * K], b[N], y[B * N];
    batch(0, x, t);
    API(ge2_program_get_parameter(h.program, h.w, w, sizeof w));
    API(ge2_program_get_parameter(h.program, h.b, b, sizeof b));
    run(&h, GE2_MODE_EVAL, 0);
    API(ge2_program_read_output(h.program, GE2_MODE_EVAL, h.y, y, sizeof y));
    const int from_fp32 = assert_rounded_by("fp16", ge2_ref_f16, x, w, b, y);
    ck_assert_msg(from_fp32 > B * N / 2, "only %d of %d outputs tell fp16 from fp32", from_fp32, B * N);
    int from_bf16 = 0;
    for (int r = 0; r < B; r++)
        for (int c = 0; c < N; c++) {
            double scale;
            const double bf = product_at(ge2_ref_bf16, x, w, b, r, c, &scale);
            from_bf16 += fabs(y[r * N + c] - bf) > 1e-5 * scale;
        }
    ck_assert_msg(from_bf16 > B * N / 2, "only %d of %d outputs tell fp16 from bf16", from_bf16, B * N);
    net_close(&h);
}
END_TEST


/* A user's bf16 tensor (ge2_cast) as a linear layer's input: inference sees
 * the f32 it stands for (ge2_infer_input_dtype), and the layer multiplies in
 * bf16 even in an fp32 program (its weight rounded too) */
START_TEST(a_bf16_tensor_makes_a_bf16_linear)
{
    ge2_context *ctx;
    ge2_graph *g;
    ge2_program *p;
    ge2_tensor *x, *xb, *w, *b, *y;
    API(ge2_context_new(GE2_DEVICE_CPU, &ctx));
    API(ge2_graph_new(&g));
    API(ge2_graph_set_seed(g, 12));
    API(ge2_input(g, "x", GE2_F32, ge2_shape2(B, K), &x));
    API(ge2_cast(g, x, GE2_BF16, &xb));
    API(ge2_parameter(g, "w", GE2_F32, ge2_shape2(N, K), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &w));
    API(ge2_parameter(g, "b", GE2_F32, ge2_shape1(N), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &b));
    API(ge2_linear(g, xb, w, b, GE2_ACT_NONE, 0, &y));
    ck_assert_int_eq(y->dtype, GE2_F32);
    API(ge2_mark_output(g, y));
    API(ge2_compile(ctx, g, NULL, &p));
    float xv[B * K], t[B * N], wv[N * K], bv[N], yv[B * N];
    batch(0, xv, t);
    API(ge2_program_get_parameter(p, w, wv, sizeof wv));
    API(ge2_program_get_parameter(p, b, bv, sizeof bv));
    ge2_feed f = {x, xv, x->shape};
    API(ge2_program_step(p, GE2_MODE_EVAL, &f, 1));
    API(ge2_program_read_output(p, GE2_MODE_EVAL, y, yv, sizeof yv));
    ck_assert_int_gt(assert_rounded_product("bf16 input", xv, wv, bv, yv), B * N / 2);
    ge2_program_free(p);
    ge2_graph_free(g);
    ge2_context_free(ctx);
}
END_TEST

/* A linear layer, 30 SGD steps each: the loss falls in bf16 as in fp32, and the two land
 * near each other (the rounding is small) but not on each other (the
 * backward's GEMMs round too). */
START_TEST(a_layer_trains_in_bf16)
{
    net bf, fp;
    net_open(&bf, GE2_PRECISION_BF16);
    net_open(&fp, GE2_PRECISION_FP32);
    float first = 0, last = 0;
    for (int s = 0; s < 30; s++) {
        run(&bf, GE2_MODE_TRAIN, s % 3);
        run(&fp, GE2_MODE_TRAIN, s % 3);
        float loss;
        API(ge2_program_read_output(bf.program, GE2_MODE_TRAIN, bf.loss, &loss, sizeof loss));
        if (s == 0)
            first = loss;
        last = loss;
    }
    ck_assert_msg(isfinite(last) && last < 0.5f * first, "bf16 loss %g -> %g", first, last);
    float wb[N * K], wf[N * K];
    API(ge2_program_get_parameter(bf.program, bf.w, wb, sizeof wb));
    API(ge2_program_get_parameter(fp.program, fp.w, wf, sizeof wf));
    double diff = 0, norm = 0;
    for (int i = 0; i < N * K; i++) {
        diff += (wb[i] - wf[i]) * (double)(wb[i] - wf[i]);
        norm += wf[i] * (double)wf[i];
    }
    const double rel = sqrt(diff / norm);
    ck_assert_msg(rel > 1e-5 && rel < 2e-2, "bf16 and fp32 weights differ by %.3g (normwise)", rel);
    net_close(&bf);
    net_close(&fp);
}
END_TEST

/* A linear layer (bias optional) with loss = sum(y * c), so dy = c, one
 * SGD step at lr 1 in precision BF16 on the CPU: what the weight and bias
 * gradient tests read their moves from */
typedef struct dot_net {
    ge2_context *ctx;
    ge2_graph *graph;
    ge2_program *program;
    ge2_tensor *x, *w, *b;
} dot_net;

/* loss = sum(y * c), its backward, SGD at lr 1, compiled in precision:
 * one step moves each parameter by its gradient */
static void compile_dot_loss(ge2_context *ctx, ge2_graph *g, ge2_tensor *y, ge2_tensor *c, ge2_precision precision,
                             ge2_program **program)
{
    ge2_tensor *m, *loss;
    API(ge2_mul(g, y, c, &m));
    API(ge2_sum_all(g, m, &loss));
    API(ge2_backward(g, loss));
    ge2_optimizer_config sgd = ge2_optimizer_defaults(GE2_OPT_SGD);
    sgd.lr = 1.0;
    API(ge2_optimizer(g, &sgd));
    ge2_compile_options o = ge2_compile_defaults();
    o.precision = precision;
    API(ge2_compile(ctx, g, &o, program));
}

static void dot_net_open(dot_net *d, bool bias, const float *cv /* [B, N] */)
{
    ge2_tensor *y, *c;
    API(ge2_context_new(GE2_DEVICE_CPU, &d->ctx));
    API(ge2_graph_new(&d->graph));
    ge2_graph *g = d->graph;
    API(ge2_graph_set_seed(g, 6));
    API(ge2_input(g, "x", GE2_F32, ge2_shape2(B, K), &d->x));
    API(ge2_parameter(g, "w", GE2_F32, ge2_shape2(N, K), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &d->w));
    d->b = NULL;
    if (bias)
        API(ge2_parameter(g, "b", GE2_F32, ge2_shape1(N), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &d->b));
    API(ge2_constant(g, "c", GE2_F32, ge2_shape2(B, N), cv, &c));
    API(ge2_linear(g, d->x, d->w, d->b, GE2_ACT_NONE, 0, &y));
    compile_dot_loss(d->ctx, g, y, c, GE2_PRECISION_BF16, &d->program);
}

/* Parameter p before and after one step on batch 0's x (xv) */
static void dot_net_step(dot_net *d, ge2_tensor *p, float *before, float *after, size_t bytes, float *xv)
{
    float t[B * N];
    batch(0, xv, t);
    API(ge2_program_get_parameter(d->program, p, before, bytes));
    ge2_feed f = {d->x, xv, d->x->shape};
    API(ge2_program_step(d->program, GE2_MODE_TRAIN, &f, 1));
    API(ge2_program_sync(d->program));
    API(ge2_program_get_parameter(d->program, p, after, bytes));
}

static void dot_net_close(dot_net *d)
{
    ge2_program_free(d->program);
    ge2_graph_free(d->graph);
    ge2_context_free(d->ctx);
}

/* The weight gradient's GEMM rounds its operands: loss = sum(y * c) with c
 * exact in bf16, so dy = c whatever the rounding, and one SGD step at lr 1
 * moves w by dW = dyᵀ · x = the sum over rows of c times bf16(x), not x. */
START_TEST(bf16_weight_gradient_is_the_rounded_product)
{
    float cv[B * N];
    for (int i = 0; i < B * N; i++)
        cv[i] = (float)((i * 5) % 9 - 4) / 8.0f; /* eighths: exact in bf16 */
    dot_net d;
    dot_net_open(&d, false, cv);
    float xv[B * K], w0[N * K], w1[N * K];
    dot_net_step(&d, d.w, w0, w1, sizeof w0, xv);
    int differ = 0;
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            double rounded = 0, exact = 0, scale = 0;
            for (int r = 0; r < B; r++) {
                rounded += cv[r * N + n] * ge2_ref_bf16(xv[r * K + k]);
                exact += cv[r * N + n] * (double)xv[r * K + k];
                scale += fabs(cv[r * N + n] * (double)xv[r * K + k]);
            }
            const double moved = (double)w0[n * K + k] - w1[n * K + k], tol = 1e-6 * (scale + fabs(w0[n * K + k]));
            ck_assert_msg(fabs(moved - rounded) <= tol, "w[%d,%d] moved %.9g, the rounded gradient is %.9g", n, k,
                          moved, rounded);
            differ += fabs(rounded - exact) > 10 * tol;
        }
    ck_assert_msg(differ > N * K / 2, "only %d of %d gradients tell bf16 from fp32", differ, N * K);
    dot_net_close(&d);
}
END_TEST

/* Whether got is exact rounded (to_half: ge2_ref_bf16 or ge2_ref_f16),
 * within tol: the float64 reference and the kernel's fp32 sums may
 * straddle a rounding boundary, so the roundings of exact ± tol count too */
static bool is_rounded(double (*to_half)(double), double got, double exact, double tol)
{
    return fabs(got - to_half(exact)) <= tol || fabs(got - to_half(exact - tol)) <= tol ||
           fabs(got - to_half(exact + tol)) <= tol;
}

/* conv2d under BF16 (FP16) multiplies rounded operands (its im2col GEMM)
 * with fp32 sums and rounds each convolution to bf16 (fp16), as cuDNN's
 * engines of that type write it: x [1, 2, 5, 5], w [3, 2, 3, 3], padding
 * 1, bias. The forward y = to_half(conv) + b, against a float64 convolution
 * of the rounded values; then loss = sum(y * c) with c exact in both types
 * (so dy = c), and one SGD step at lr 1 moves w by to_half(Σ c · to_half(x)),
 * the rounded weight gradient. */
static void check_rounded_convolution(ge2_precision precision, double (*to_half)(double))
{
    enum { C = 2, H = 5, O = 3, KS = 3 };
    ge2_context *ctx;
    ge2_graph *g;
    ge2_program *p;
    ge2_tensor *x, *w, *b, *y, *c;
    float xv[C * H * H], cv[O * H * H], w0[O * C * KS * KS], w1[O * C * KS * KS], bv[O], yv[O * H * H];
    for (int i = 0; i < C * H * H; i++)
        xv[i] = (float)sin(0.913 * i) * 2.3f;
    for (int i = 0; i < O * H * H; i++)
        cv[i] = (float)((i * 5) % 9 - 4) / 8.0f; /* eighths: exact in bf16 */
    API(ge2_context_new(GE2_DEVICE_CPU, &ctx));
    API(ge2_graph_new(&g));
    API(ge2_graph_set_seed(g, 8));
    API(ge2_input(g, "x", GE2_F32, ge2_shape4(1, C, H, H), &x));
    API(ge2_parameter(g, "w", GE2_F32, ge2_shape4(O, C, KS, KS), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &w));
    API(ge2_parameter(g, "b", GE2_F32, ge2_shape1(O), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &b));
    API(ge2_constant(g, "c", GE2_F32, ge2_shape4(1, O, H, H), cv, &c));
    ge2_conv2d_params cp = ge2_conv2d_defaults();
    cp.padding[0] = cp.padding[1] = 1;
    API(ge2_conv2d(g, x, w, b, &cp, &y));
    API(ge2_mark_output(g, y));
    compile_dot_loss(ctx, g, y, c, precision, &p);
    API(ge2_program_get_parameter(p, w, w0, sizeof w0));
    API(ge2_program_get_parameter(p, b, bv, sizeof bv));
    ge2_feed f = {x, xv, x->shape};
    API(ge2_program_step(p, GE2_MODE_EVAL, &f, 1));
    API(ge2_program_read_output(p, GE2_MODE_EVAL, y, yv, sizeof yv));
    API(ge2_program_step(p, GE2_MODE_TRAIN, &f, 1));
    API(ge2_program_sync(p));
    API(ge2_program_get_parameter(p, w, w1, sizeof w1));
    int rounded_y = 0, rounded_dw = 0;
    for (int o2 = 0; o2 < O; o2++)
        for (int r = 0; r < H; r++)
            for (int col = 0; col < H; col++) {
                double conv = 0, scale = fabs((double)bv[o2]);
                for (int ci = 0; ci < C; ci++)
                    for (int i = 0; i < KS; i++)
                        for (int j = 0; j < KS; j++) {
                            const int iy = r + i - 1, ix = col + j - 1;
                            if (iy < 0 || iy >= H || ix < 0 || ix >= H)
                                continue;
                            const double term = to_half(xv[(ci * H + iy) * H + ix]) *
                                                to_half(w0[((o2 * C + ci) * KS + i) * KS + j]);
                            conv += term;
                            scale += fabs(term);
                        }
                const double got = yv[(o2 * H + r) * H + col], tol = 1e-6 * scale;
                ck_assert_msg(is_rounded(to_half, got - bv[o2], conv, tol),
                              "%s y[%d,%d,%d] %.9g, the rounded convolution + b %.9g", ge2_precision_name(precision),
                              o2, r, col, got, to_half(conv) + bv[o2]);
                rounded_y += fabs(to_half(conv) - conv) > 10 * tol;
            }
    for (int o2 = 0; o2 < O; o2++)
        for (int ci = 0; ci < C; ci++)
            for (int i = 0; i < KS; i++)
                for (int j = 0; j < KS; j++) {
                    double dw = 0, scale = 0;
                    for (int r = 0; r < H; r++)
                        for (int col = 0; col < H; col++) {
                            const int iy = r + i - 1, ix = col + j - 1;
                            if (iy < 0 || iy >= H || ix < 0 || ix >= H)
                                continue;
                            const double term = cv[(o2 * H + r) * H + col] * to_half(xv[(ci * H + iy) * H + ix]);
                            dw += term;
                            scale += fabs(term);
                        }
                    const int k = ((o2 * C + ci) * KS + i) * KS + j;
                    const double moved = (double)w0[k] - w1[k], tol = 1e-6 * (scale + fabs(w0[k]));
                    ck_assert_msg(is_rounded(to_half, moved, dw, tol),
                                  "%s w[%d,%d,%d,%d] moved %.9g, the rounded gradient is %.9g",
                                  ge2_precision_name(precision), o2, ci, i, j, moved, to_half(dw));
                    rounded_dw += fabs(to_half(dw) - dw) > 10 * tol;
                }
    /* the roundings are seen: most values are not 16-bit values already */
    ck_assert_msg(rounded_y > O * H * H / 2 && rounded_dw > O * C * KS * KS / 2,
                  "only %d outputs and %d weight gradients tell the rounding apart", rounded_y, rounded_dw);
    ge2_program_free(p);
    ge2_graph_free(g);
    ge2_context_free(ctx);
}

START_TEST(bf16_conv2d_is_the_rounded_convolution)
{
    check_rounded_convolution(GE2_PRECISION_BF16, ge2_ref_bf16);
    check_rounded_convolution(GE2_PRECISION_FP16, ge2_ref_f16);
}
END_TEST

/* logits -> mean cross-entropy (marked), its backward, Adam at lr 1e-2,
 * compiled on ctx in precision */
static void classify_and_compile(ge2_context *ctx, ge2_graph *g, ge2_tensor *logits, ge2_tensor *labels,
                                 ge2_precision precision, ge2_tensor **loss, ge2_program **p)
{
    API(ge2_cross_entropy(g, logits, labels, 0.0f, loss));
    API(ge2_mark_output(g, *loss));
    API(ge2_backward(g, *loss));
    ge2_optimizer_config adam = ge2_optimizer_defaults(GE2_OPT_ADAM);
    adam.lr = 1e-2;
    API(ge2_optimizer(g, &adam));
    ge2_compile_options o = ge2_compile_defaults();
    o.precision = precision;
    API(ge2_compile(ctx, g, &o, p));
}

/* steps train steps of p on the feeds f (logits' labels), then an eval
 * step (batch norm's running statistics) whose loss must be finite; frees
 * p, g and ctx and returns the last train loss */
static float train_and_free(ge2_context *ctx, ge2_graph *g, ge2_program *p, ge2_tensor *loss, const ge2_feed *f,
                            int steps)
{
    float last = 0, eval = 0;
    for (int s = 0; s < steps; s++) {
        API(ge2_program_step(p, GE2_MODE_TRAIN, f, 2));
        API(ge2_program_read_output(p, GE2_MODE_TRAIN, loss, &last, sizeof last));
    }
    API(ge2_program_step(p, GE2_MODE_EVAL, f, 2));
    API(ge2_program_read_output(p, GE2_MODE_EVAL, loss, &eval, sizeof eval));
    ck_assert_msg(isfinite(eval), "eval loss %g", (double)eval);
    ge2_program_free(p);
    ge2_graph_free(g);
    ge2_context_free(ctx);
    return last;
}

/* A bf16 model trained (its last train loss bf16) lands near its fp32
 * twin's loss (fp32) without matching it */
static void expect_near_fp32(float bf16, float fp32)
{
    ck_assert_msg(isfinite(bf16) && bf16 < 0.5f && fabsf(bf16 - fp32) < 0.1f && bf16 != fp32,
                  "after 30 steps: bf16 loss %g, fp32 %g", (double)bf16, (double)fp32);
}

/* A small CNN under BF16 on the CPU (conv -> batch norm -> ReLU -> max
 * pool, twice, then a linear head): every operand of the convolutions and
 * their backward ops (x, w; dy, w; dy, x) is a bf16 tensor, a weight's
 * through its copy, and 30 Adam steps train it as far as its fp32 twin,
 * without landing on the same loss. */
static float cnn_train(ge2_precision precision, bool check_operands)
{
    enum { NB = 8, HW = 8, CLASSES = 4, STEPS = 30 };
    ge2_context *ctx;
    ge2_graph *g;
    ge2_program *p;
    ge2_tensor *x, *labels, *h, *loss, *w1, *w2, *fw, *fb;
    API(ge2_context_new(GE2_DEVICE_CPU, &ctx));
    API(ge2_graph_new(&g));
    API(ge2_graph_set_seed(g, 12));
    API(ge2_input(g, "x", GE2_F32, ge2_shape4(NB, 1, HW, HW), &x));
    API(ge2_label(g, "labels", GE2_I32, ge2_shape1(NB), &labels));
    h = x;
    for (int l = 0; l < 2; l++) {
        const int64_t in = l ? 4 : 1, out = l ? 8 : 4;
        ge2_tensor **w = l ? &w2 : &w1;
        API(ge2_parameter(g, l ? "conv2.weight" : "conv1.weight", GE2_F32, ge2_shape4(out, in, 3, 3),
                          (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, in * 9}, w));
        ge2_conv2d_params conv = ge2_conv2d_defaults();
        conv.padding[0] = conv.padding[1] = 1;
        API(ge2_conv2d(g, h, *w, NULL, &conv, &h));
        API(ge2_batch_norm_layer(g, l ? "bn2" : "bn1", h, 0.1, 1e-5, &h));
        API(ge2_activate(g, h, GE2_ACT_RELU, 0.0f, &h));
        ge2_pool2d_params pool = ge2_pool2d_square(2, 2, 0);
        API(ge2_max_pool2d(g, h, &pool, &h));
    }
    API(ge2_flatten(g, h, &h));
    const int64_t features = ge2_tensor_shape(h).dim[1];
    API(ge2_parameter(g, "fc.weight", GE2_F32, ge2_shape2(CLASSES, features),
                      (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, features}, &fw));
    API(ge2_parameter(g, "fc.bias", GE2_F32, ge2_shape1(CLASSES), (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, features},
                      &fb));
    API(ge2_linear(g, h, fw, fb, GE2_ACT_NONE, 0, &h));
    classify_and_compile(ctx, g, h, labels, precision, &loss, &p);
    if (check_operands) {
        const ge2_graph *pg = ge2_program_graph(p);
        int convs = 0;
        for (int n = 0; n < pg->n_nodes; n++) {
            const ge2_node *node = &pg->nodes[n];
            if (node->op != GE2_OP_CONV2D && node->op != GE2_OP_CONV2D_GRAD_INPUT &&
                node->op != GE2_OP_CONV2D_GRAD_WEIGHT)
                continue;
            convs++;
            /* the operands: x, w; dy, w; dy, x (input 1 of the backward ops is a shape) */
            for (int k = 0; k < 2; k++) {
                const int slot = k == 0 ? 0 : node->op == GE2_OP_CONV2D ? 1 : 2;
                const ge2_tensor *in = pg->tensors[node->inputs[slot]];
                const bool weight = in->copy_of == w1->id || in->copy_of == w2->id;
                ck_assert_msg(in->dtype == GE2_BF16 && (weight || (in->producer >= 0 && in->producer < n)),
                              "node %d (%s) operand %d '%s' is %s, not a bf16 tensor made before it", n,
                              ge2_op_name(node->op), slot, in->name, ge2_dtype_name(in->dtype));
                ck_assert_msg(in->role == GE2_ROLE_PARAMETER_COPY || !weight, "'%s' is no parameter copy", in->name);
            }
        }
        ck_assert_int_eq(convs, 5); /* conv1 needs no input gradient */
        /* stored in bf16 by their producers, no cast: both convolutions' y
         * (only batch norm reads them) and batch norm's input gradients
         * (only the convolutions' backward GEMMs read them) */
        int stored_y = 0, stored_dx = 0;
        for (int n = 0; n < pg->n_nodes; n++) {
            const ge2_tensor *out = pg->tensors[pg->nodes[n].outputs[0]];
            stored_y += pg->nodes[n].op == GE2_OP_CONV2D && out->dtype == GE2_BF16;
            const char *op = ge2_op_name(pg->nodes[n].op); /* the plain op or fusion/bn_relu's */
            const bool bn_dx = !strcmp(op, "batch_norm_grad_input") || !strcmp(op, "batch_norm_relu_grad_input");
            stored_dx += bn_dx && out->dtype == GE2_BF16;
        }
        ck_assert_msg(stored_y == 2 && stored_dx == 2, "%d convolution outputs and %d batch-norm input gradients in bf16",
                      stored_y, stored_dx);
    }
    float xv[NB * HW * HW];
    int32_t yv[NB];
    for (int i = 0; i < NB * HW * HW; i++)
        xv[i] = (float)sin(0.37 * i) + 0.5f * (float)((i / (HW * HW)) % CLASSES);
    for (int i = 0; i < NB; i++)
        yv[i] = i % CLASSES;
    const ge2_feed f[2] = {{x, xv, x->shape}, {labels, yv, labels->shape}};
    return train_and_free(ctx, g, p, loss, f, STEPS);
}

START_TEST(bf16_cnn_trains_on_bf16_operands)
{
    expect_near_fp32(cnn_train(GE2_PRECISION_BF16, true), cnn_train(GE2_PRECISION_FP32, false));
}
END_TEST

/* A linear layer read only by batch norm (BatchNorm1d) is stored in bf16
 * too: batch norm reads any bf16 x. linear -> batch norm -> ReLU -> linear,
 * cross-entropy, 30 Adam steps under BF16 on the CPU: the first linear's
 * y is a bf16 tensor, train and eval steps run, and the loss lands near the
 * fp32 twin's without equalling it. */
static float bn_mlp_train(ge2_precision precision, bool check_stored)
{
    enum { NB = 16, IN = 12, HID = 24, CLASSES = 3, STEPS = 30 };
    ge2_context *ctx;
    ge2_graph *g;
    ge2_program *p;
    ge2_tensor *x, *labels, *h, *loss, *w1, *w2, *b2;
    API(ge2_context_new(GE2_DEVICE_CPU, &ctx));
    API(ge2_graph_new(&g));
    API(ge2_graph_set_seed(g, 14));
    API(ge2_input(g, "x", GE2_F32, ge2_shape2(NB, IN), &x));
    API(ge2_label(g, "labels", GE2_I32, ge2_shape1(NB), &labels));
    API(ge2_parameter(g, "fc1.weight", GE2_F32, ge2_shape2(HID, IN), (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, IN},
                      &w1));
    API(ge2_linear(g, x, w1, NULL, GE2_ACT_NONE, 0, &h));
    ge2_tensor *z = h;
    API(ge2_batch_norm_layer(g, "bn1", h, 0.1, 1e-5, &h));
    API(ge2_activate(g, h, GE2_ACT_RELU, 0.0f, &h));
    API(ge2_parameter(g, "fc2.weight", GE2_F32, ge2_shape2(CLASSES, HID),
                      (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, HID}, &w2));
    API(ge2_parameter(g, "fc2.bias", GE2_F32, ge2_shape1(CLASSES), (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, HID},
                      &b2));
    API(ge2_linear(g, h, w2, b2, GE2_ACT_NONE, 0, &h));
    classify_and_compile(ctx, g, h, labels, precision, &loss, &p);
    if (check_stored) {
        const ge2_graph *pg = ge2_program_graph(p);
        ck_assert_msg(pg->tensors[z->id]->dtype == GE2_BF16, "the first linear's y (read only by batch norm) is %s",
                      ge2_dtype_name(pg->tensors[z->id]->dtype));
    }
    float xv[NB * IN];
    int32_t yv[NB];
    for (int i = 0; i < NB * IN; i++)
        xv[i] = (float)sin(0.53 * i) + 0.7f * (float)((i / IN) % CLASSES);
    for (int i = 0; i < NB; i++)
        yv[i] = i % CLASSES;
    const ge2_feed f[2] = {{x, xv, x->shape}, {labels, yv, labels->shape}};
    return train_and_free(ctx, g, p, loss, f, STEPS);
}

START_TEST(bf16_linear_before_batch_norm_is_stored)
{
    expect_near_fp32(bn_mlp_train(GE2_PRECISION_BF16, true), bn_mlp_train(GE2_PRECISION_FP32, false));
}
END_TEST

/* How many distinct f32 tensors g's GEMM-class nodes read as operands */
static int f32_gemm_operands(const ge2_graph *g)
{
    int count = 0;
    for (int t = 0; t < g->n_tensors; t++) {
        bool read = false;
        for (int n = 0; n < g->n_nodes && !read; n++)
            for (int slot = 0; slot < g->nodes[n].n_inputs; slot++)
                read |= ge2_op_bf16_operand(g->nodes[n].op, slot) && g->nodes[n].inputs[slot] == t;
        count += read && g->tensors[t]->dtype == GE2_F32;
    }
    return count;
}

/* Two layers, x -> gelu(x·w1ᵀ + b1) -> ·w2ᵀ + b2, trained with SGD: under
 * BF16 every GEMM operand of the program's graph is a bf16 tensor, one per
 * f32 tensor the user's graph's GEMMs read: made by a cast, or stored in
 * bf16 by its producer where only GEMMs read it (the gelu layer's output,
 * the input gradient); the user's graph keeps its nodes and compiles
 * again in fp32 without casts. */
START_TEST(bf16_storage_rounds_each_operand_once)
{
    ge2_context *ctx;
    ge2_graph *g;
    ge2_program *p16, *p32;
    ge2_tensor *x, *t, *w1, *b1, *w2, *b2, *h, *y, *loss;
    API(ge2_context_new(GE2_DEVICE_CPU, &ctx));
    API(ge2_graph_new(&g));
    API(ge2_graph_set_seed(g, 9));
    API(ge2_input(g, "x", GE2_F32, ge2_shape2(B, K), &x));
    API(ge2_label(g, "t", GE2_F32, ge2_shape2(B, N), &t));
    API(ge2_parameter(g, "w1", GE2_F32, ge2_shape2(K, K), (ge2_init){GE2_INIT_UNIFORM, -0.3, 0.3, 0}, &w1));
    API(ge2_parameter(g, "b1", GE2_F32, ge2_shape1(K), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &b1));
    API(ge2_parameter(g, "w2", GE2_F32, ge2_shape2(N, K), (ge2_init){GE2_INIT_UNIFORM, -0.3, 0.3, 0}, &w2));
    API(ge2_parameter(g, "b2", GE2_F32, ge2_shape1(N), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &b2));
    API(ge2_linear(g, x, w1, b1, GE2_ACT_GELU_TANH, 0, &h));
    API(ge2_linear(g, h, w2, b2, GE2_ACT_NONE, 0, &y));
    API(ge2_mark_output(g, y));
    API(ge2_mse_loss(g, y, t, &loss));
    API(ge2_backward(g, loss));
    ge2_optimizer_config sgd = ge2_optimizer_defaults(GE2_OPT_SGD);
    sgd.lr = 0.05;
    API(ge2_optimizer(g, &sgd));
    ge2_compile_options o = ge2_compile_defaults();
    o.precision = GE2_PRECISION_BF16;
    API(ge2_compile(ctx, g, &o, &p16));
    const int user_nodes = g->n_nodes, operands = f32_gemm_operands(g);
    /* x, w1, h, w2, and the output gradients of both layers at least */
    ck_assert_int_ge(operands, 6);
    const ge2_graph *pg = ge2_program_graph(p16);
    ck_assert_ptr_ne(pg, g);
    int casts = 0, gemms = 0, stored = 0, copies = 0;
    for (int t = 0; t < pg->n_tensors; t++)
        copies += pg->tensors[t]->role == GE2_ROLE_PARAMETER_COPY;
    for (int n = 0; n < pg->n_nodes; n++) {
        const ge2_node *node = &pg->nodes[n];
        casts += node->op == GE2_OP_CAST;
        for (int o = 0; node->op != GE2_OP_CAST && o < node->n_outputs; o++) {
            if (pg->tensors[node->outputs[o]]->dtype != GE2_BF16)
                continue;
            /* stored in bf16 by its producer (the gelu layer's z stash and
             * y, the input gradient and the y it makes again for the weight
             * gradient, fusion/recompute_act): only GEMM operands read it,
             * and the saved z the input gradient's act' reads */
            const ge2_op_def *def = ge2_op_def_of(node->op);
            ck_assert_msg(def->stores_bf16 && def->stores_bf16(node, o), "node %d (%s) writes bf16 output %d", n,
                          ge2_op_name(node->op), o);
            for (int r = 0; r < pg->n_nodes; r++)
                for (int i = 0; i < pg->nodes[r].n_inputs; i++)
                    if (pg->nodes[r].inputs[i] == node->outputs[o])
                        ck_assert_msg(ge2_op_bf16_operand(pg->nodes[r].op, i) ||
                                          ((pg->nodes[r].op == GE2_OP_LINEAR_GRAD_INPUT ||
                                            pg->nodes[r].op == ge2_op_linear_grad_input_recompute()) &&
                                           i == 2),
                                      "bf16 '%s' is read by node %d (%s) input %d",
                                      pg->tensors[node->outputs[o]]->name, r, ge2_op_name(pg->nodes[r].op), i);
            stored += o != 1 || node->op != GE2_OP_LINEAR; /* (a z stash is no GEMM operand) */
        }
        if (!(ge2_op_flags(node->op) & GE2_OPF_BF16_OPERANDS))
            continue;
        gemms++;
        for (int slot = 0; slot < node->n_inputs; slot++) {
            if (!ge2_op_bf16_operand(node->op, slot))
                continue;
            /* a bf16 tensor made before it, or a weight's bf16 copy (the optimizer writes it) */
            const ge2_tensor *in = pg->tensors[node->inputs[slot]];
            const bool copy = in->role == GE2_ROLE_PARAMETER_COPY && in->copy_of >= 0 &&
                              pg->tensors[in->copy_of]->role == GE2_ROLE_PARAMETER;
            ck_assert_msg(in->dtype == GE2_BF16 && (copy || (in->producer >= 0 && in->producer < n)),
                          "node %d (%s) operand %d '%s' is %s, not a bf16 tensor made before it", n,
                          ge2_op_name(node->op), slot, in->name, ge2_dtype_name(in->dtype));
        }
    }
    ck_assert_int_ge(gemms, 5);
    /* the gelu layer's activation (beside its z) and its input gradient */
    ck_assert_int_ge(stored, 2);
    /* both weights through their copies, no cast of either; and b1, whose
     * layer's GEMM writes its bf16 z and y itself (cuBLASLt's bias then
     * takes bf16, as autocast rounds it) */
    ck_assert_int_eq(copies, 3);
    ck_assert_int_eq(casts + stored + copies, operands + 1);
    const ge2_tensor *b1_copy = NULL;
    for (int i = 0; i < pg->n_tensors; i++)
        if (pg->tensors[i]->copy_of == b1->id)
            b1_copy = pg->tensors[i];
    ck_assert_ptr_nonnull(b1_copy);
    /* (tensor ids are kept: h is the gelu layer's y in the program's graph too) */
    ck_assert_int_eq(pg->nodes[pg->tensors[h->id]->producer].inputs[2], b1_copy->id);
    ck_assert_int_eq(pg->n_nodes, user_nodes + casts);
    for (int n = 0; n < g->n_nodes; n++)
        ck_assert_int_ne(g->nodes[n].op, GE2_OP_CAST);

    /* the same user graph in fp32: no casts, other numbers */
    o.precision = GE2_PRECISION_FP32;
    API(ge2_compile(ctx, g, &o, &p32));
    ck_assert_ptr_eq(ge2_program_graph(p32), g);
    ck_assert_int_eq(g->n_nodes, user_nodes);
    float xv[B * K], tv[B * N], y16[B * N], y32[B * N];
    batch(0, xv, tv);
    ge2_feed f[2] = {{x, xv, x->shape}, {t, tv, t->shape}};
    API(ge2_program_step(p16, GE2_MODE_TRAIN, f, 2));
    API(ge2_program_step(p32, GE2_MODE_TRAIN, f, 2));
    API(ge2_program_read_output(p16, GE2_MODE_TRAIN, y, y16, sizeof y16));
    API(ge2_program_read_output(p32, GE2_MODE_TRAIN, y, y32, sizeof y32));
    int differ = 0;
    for (int i = 0; i < B * N; i++) {
        ck_assert_msg(fabs(y16[i] - y32[i]) <= 0.05 * (1 + fabs(y32[i])), "y[%d]: bf16 %g, fp32 %g", i, y16[i], y32[i]);
        differ += y16[i] != y32[i];
    }
    ck_assert_int_gt(differ, B * N / 2);
    ge2_program_free(p16);
    ge2_program_free(p32);
    ge2_graph_free(g);
    ge2_context_free(ctx);
}
END_TEST

/* q, k and v sliced from one projection and reshaped for attention, the
 * heads merged into another, as the GPT makes them: under BF16 the slices
 * and attention's output are stored in bf16 (attention and the GEMMs read
 * them so, through the reshapes, and so do the reshape backward's shape
 * references), and a step matches the fp32 program's loss to bf16's
 * precision. */
/* A weight's bf16 copy (GE2_ROLE_PARAMETER_COPY) follows the weight: the
 * optimizer writes it as it updates, ge2_program_set_parameter refreshes
 * it. The reference is the same graph compiled without the storage pass,
 * whose GEMMs round the weight itself every step; a linear layer without
 * bias, whose only other bf16 operands are an input and a loss gradient
 * (cast each step either way), so the two runs must agree bit for bit. A
 * copy left behind by one update would not. */
START_TEST(bf16_parameter_copies_follow_the_parameters)
{
    enum { STEPS = 6 };
    net m;
    ge2_optimizer_config adamw = ge2_optimizer_defaults(GE2_OPT_ADAMW);
    adamw.lr = 0.02;
    net_build(&m, false, &adamw);
    ge2_graph *g = m.graph;
    ge2_tensor *x = m.x, *t = m.t, *w = m.w, *loss = m.loss;
    ge2_compile_options o = ge2_compile_defaults();
    o.precision = GE2_PRECISION_BF16;
    ge2_program *copies, *rounding;
    API(ge2_compile(m.ctx, g, &o, &copies));
    o.bf16_storage = false;
    API(ge2_compile(m.ctx, g, &o, &rounding));
    m.program = copies;
    const ge2_graph *pg = ge2_program_graph(copies);
    int n_copies = 0;
    for (int i = 0; i < pg->n_tensors; i++)
        if (pg->tensors[i]->role == GE2_ROLE_PARAMETER_COPY) {
            ck_assert_int_eq(pg->tensors[i]->copy_of, w->id);
            n_copies++;
        }
    ck_assert_int_eq(n_copies, 1);
    for (int n = 0; n < pg->n_nodes; n++)
        ck_assert_msg(pg->nodes[n].op != GE2_OP_CAST || pg->nodes[n].inputs[0] != w->id, "w is cast each step");

    float wc[N * K], wr[N * K];
    for (int s = 0; s <= STEPS; s++) {
        if (s == STEPS / 2) { /* the host writes new weights into both */
            for (int i = 0; i < N * K; i++)
                wc[i] = (float)cos(0.41 * i) * 0.9f;
            API(ge2_program_set_parameter(copies, w, wc, sizeof wc));
            API(ge2_program_set_parameter(rounding, w, wc, sizeof wc));
        }
        float xv[B * K], tv[B * N], lc, lr;
        batch(s, xv, tv);
        ge2_feed f[2] = {{x, xv, x->shape}, {t, tv, t->shape}};
        API(ge2_program_step(copies, GE2_MODE_TRAIN, f, 2));
        API(ge2_program_step(rounding, GE2_MODE_TRAIN, f, 2));
        API(ge2_program_read_output(copies, GE2_MODE_TRAIN, loss, &lc, sizeof lc));
        API(ge2_program_read_output(rounding, GE2_MODE_TRAIN, loss, &lr, sizeof lr));
        ck_assert_msg(memcmp(&lc, &lr, sizeof lc) == 0, "step %d: loss %.9g through the copy, %.9g rounding w", s,
                      (double)lc, (double)lr);
        API(ge2_program_get_parameter(copies, w, wc, sizeof wc));
        API(ge2_program_get_parameter(rounding, w, wr, sizeof wr));
        ck_assert_msg(memcmp(wc, wr, sizeof wc) == 0, "step %d: w differs between the two programs", s);
    }
    ge2_program_free(rounding);
    net_close(&m);
}
END_TEST

START_TEST(bf16_storage_gives_attention_bf16_slices)
{
    enum { BB = 2, T = 8, H = 2, D = 4, C = H * D };
    ge2_context *ctx;
    ge2_graph *g;
    ge2_program *p16, *p32;
    ge2_tensor *x, *w, *qkv, *part[3], *view[3], *y, *c, *m, *loss;
    API(ge2_context_new(GE2_DEVICE_CPU, &ctx));
    API(ge2_graph_new(&g));
    API(ge2_graph_set_seed(g, 11));
    API(ge2_input(g, "x", GE2_F32, ge2_shape2(BB * T, C), &x));
    API(ge2_parameter(g, "w", GE2_F32, ge2_shape2(3 * C, C), (ge2_init){GE2_INIT_UNIFORM, -0.5, 0.5, 0}, &w));
    API(ge2_linear(g, x, w, NULL, GE2_ACT_NONE, 0, &qkv));
    ge2_tensor *w_o;
    API(ge2_parameter(g, "w_o", GE2_F32, ge2_shape2(C, C), (ge2_init){GE2_INIT_UNIFORM, -0.5, 0.5, 0}, &w_o));
    for (int i = 0; i < 3; i++) {
        API(ge2_slice(g, qkv, 1, i * C, (i + 1) * C, &part[i]));
        API(ge2_reshape(g, part[i], ge2_shape4(BB, T, H, D), &view[i]));
    }
    ge2_tensor *att, *merged;
    API(ge2_attention_bthd(g, view[0], view[1], view[2], true, &att));
    API(ge2_reshape(g, att, ge2_shape2(BB * T, C), &merged));
    API(ge2_linear(g, merged, w_o, NULL, GE2_ACT_NONE, 0, &y));
    float cv[BB * T * C];
    for (int i = 0; i < BB * T * C; i++)
        cv[i] = (float)cos(0.37 * i);
    API(ge2_constant(g, "c", GE2_F32, y->shape, cv, &c));
    API(ge2_mul(g, y, c, &m));
    API(ge2_sum_all(g, m, &loss));
    API(ge2_backward(g, loss));
    ge2_optimizer_config sgd = ge2_optimizer_defaults(GE2_OPT_SGD);
    API(ge2_optimizer(g, &sgd));
    ge2_compile_options o = ge2_compile_defaults();
    o.precision = GE2_PRECISION_BF16;
    API(ge2_compile(ctx, g, &o, &p16));
    o.precision = GE2_PRECISION_FP32;
    API(ge2_compile(ctx, g, &o, &p32));
    const ge2_graph *pg = ge2_program_graph(p16);
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(pg->tensors[part[i]->id]->dtype == GE2_BF16, "slice %d is %s", i,
                      ge2_dtype_name(pg->tensors[part[i]->id]->dtype));
        ck_assert_int_eq(pg->tensors[view[i]->id]->dtype, GE2_BF16);
        ck_assert_int_eq(part[i]->dtype, GE2_F32); /* the user's graph is as built */
    }
    /* the projection itself: only the slices read it */
    ck_assert_int_eq(pg->tensors[qkv->id]->dtype, GE2_BF16);
    /* attention's output too: only the merged heads' projection and the backward read it */
    ck_assert_int_eq(pg->tensors[att->id]->dtype, GE2_BF16);
    ck_assert_int_eq(pg->tensors[merged->id]->dtype, GE2_BF16);
    float xv[BB * T * C];
    for (int i = 0; i < BB * T * C; i++)
        xv[i] = (float)sin(0.51 * i + 0.3);
    ge2_feed f = {x, xv, x->shape};
    float l16, l32;
    API(ge2_program_step(p16, GE2_MODE_TRAIN, &f, 1));
    API(ge2_program_step(p32, GE2_MODE_TRAIN, &f, 1));
    API(ge2_program_read_output(p16, GE2_MODE_TRAIN, loss, &l16, sizeof l16));
    API(ge2_program_read_output(p32, GE2_MODE_TRAIN, loss, &l32, sizeof l32));
    ck_assert_msg(fabs(l16 - l32) <= 2e-2 * (1 + fabs(l32)) && l16 != l32, "loss bf16 %.9g, fp32 %.9g", (double)l16,
                  (double)l32);
    ge2_program_free(p16);
    ge2_program_free(p32);
    ge2_graph_free(g);
    ge2_context_free(ctx);
}
END_TEST

/* What the user reads back stays f32: a layer norm's output, reshaped,
 * marked as a step result and read by a linear layer, is neither stored in
 * bf16 nor is the norm's output under it (the view would share its bytes);
 * the GEMM gets a cast instead, and the result reads back as f32. */
START_TEST(bf16_storage_leaves_step_results_f32)
{
    ge2_context *ctx;
    ge2_graph *g;
    ge2_program *p;
    ge2_tensor *x, *t, *ln, *r, *y, *loss;
    API(ge2_context_new(GE2_DEVICE_CPU, &ctx));
    API(ge2_graph_new(&g));
    API(ge2_input(g, "x", GE2_F32, ge2_shape2(B, K), &x));
    API(ge2_label(g, "t", GE2_F32, ge2_shape2(B, N), &t));
    API(ge2_layer_norm_layer(g, "ln", x, true, 1e-5, &ln));
    API(ge2_reshape(g, ln, ge2_shape2(B, K), &r));
    API(ge2_mark_output(g, r));
    ge2_tensor *w, *b;
    API(ge2_parameter(g, "w", GE2_F32, ge2_shape2(N, K), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &w));
    API(ge2_parameter(g, "b", GE2_F32, ge2_shape1(N), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &b));
    API(ge2_linear(g, r, w, b, GE2_ACT_NONE, 0, &y));
    API(ge2_mse_loss(g, y, t, &loss));
    API(ge2_backward(g, loss));
    ge2_optimizer_config sgd = ge2_optimizer_defaults(GE2_OPT_SGD);
    API(ge2_optimizer(g, &sgd));
    ge2_compile_options o = ge2_compile_defaults();
    o.precision = GE2_PRECISION_BF16;
    API(ge2_compile(ctx, g, &o, &p));
    const ge2_graph *pg = ge2_program_graph(p);
    ck_assert_int_eq(pg->tensors[ln->id]->dtype, GE2_F32);
    ck_assert_int_eq(pg->tensors[r->id]->dtype, GE2_F32);
    float xv[B * K], tv[B * N], rv[B * K];
    batch(0, xv, tv);
    ge2_feed f[2] = {{x, xv, x->shape}, {t, tv, t->shape}};
    API(ge2_program_step(p, GE2_MODE_TRAIN, f, 2));
    API(ge2_program_read_output(p, GE2_MODE_TRAIN, r, rv, sizeof rv));
    /* a layer norm's row: mean 0 (weight 1, bias 0 at init), in f32 */
    double mean = 0;
    for (int k = 0; k < K; k++)
        mean += rv[k];
    ck_assert_msg(fabs(mean / K) < 1e-5, "row mean %g", mean / K);
    ge2_program_free(p);
    ge2_graph_free(g);
    ge2_context_free(ctx);
}
END_TEST

/* A bias gradient under BF16 sums the output gradient the weight gradient's
 * GEMM reads, its bf16 copy: loss = sum(y * c) with c not exact in bf16, so
 * dy = c, and one SGD step at lr 1 moves b by the column sums of bf16(c). */
START_TEST(bf16_bias_gradient_sums_the_rounded_gradient)
{
    float cv[B * N];
    for (int i = 0; i < B * N; i++)
        cv[i] = (float)sin(1.37 * i + 0.2) * 1.9f;
    dot_net d;
    dot_net_open(&d, true, cv);
    float xv[B * K], b0[N], b1[N];
    dot_net_step(&d, d.b, b0, b1, sizeof b0, xv);
    int differ = 0;
    for (int n = 0; n < N; n++) {
        double rounded = 0, exact = 0, scale = 0;
        for (int r = 0; r < B; r++) {
            rounded += ge2_ref_bf16(cv[r * N + n]);
            exact += cv[r * N + n];
            scale += fabs(cv[r * N + n]);
        }
        const double moved = (double)b0[n] - b1[n], tol = 1e-6 * (scale + fabs(b0[n]));
        ck_assert_msg(fabs(moved - rounded) <= tol, "b[%d] moved %.9g, the rounded gradient's sum is %.9g", n, moved,
                      rounded);
        differ += fabs(rounded - exact) > 10 * tol;
    }
    ck_assert_msg(differ > N / 2, "only %d of %d bias gradients tell bf16 from fp32", differ, N);
    dot_net_close(&d);
}
END_TEST

START_TEST(a_precision_out_of_range_is_refused)
{
    ge2_context *ctx;
    ge2_graph *g;
    ge2_tensor *x, *y;
    ge2_program *p = NULL;
    API(ge2_context_new(GE2_DEVICE_CPU, &ctx));
    API(ge2_graph_new(&g));
    API(ge2_input(g, "x", GE2_F32, ge2_shape1(3), &x));
    API(ge2_activate(g, x, GE2_ACT_RELU, 0, &y));
    API(ge2_mark_output(g, y));
    ge2_compile_options o = ge2_compile_defaults();
    o.precision = GE2_PRECISION_COUNT;
    ck_assert_int_eq(ge2_compile(ctx, g, &o, &p), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(ge2_last_error(), "precision"), "%s", ge2_last_error());
    ge2_graph_free(g);
    ge2_context_free(ctx);
}
END_TEST

/* A bf16 tensor (the user's cast) as a GEMM operand: precision FP16,
 * which rounds operands to fp16 itself, refuses it, naming the op and the
 * tensor; BF16 takes it */
START_TEST(fp16_refuses_bf16_operands)
{
    ge2_context *ctx;
    ge2_graph *g;
    ge2_program *p;
    ge2_tensor *x, *xh, *w, *y, *loss;
    API(ge2_context_new(GE2_DEVICE_CPU, &ctx));
    API(ge2_graph_new(&g));
    API(ge2_input(g, "x", GE2_F32, ge2_shape2(B, K), &x));
    API(ge2_cast(g, x, GE2_BF16, &xh));
    API(ge2_parameter(g, "w", GE2_F32, ge2_shape2(N, K), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &w));
    API(ge2_linear(g, xh, w, NULL, GE2_ACT_NONE, 0, &y));
    API(ge2_sum_all(g, y, &loss));
    ge2_compile_options o = ge2_compile_defaults();
    o.precision = GE2_PRECISION_FP16;
    ck_assert_int_eq(ge2_compile(ctx, g, &o, &p), GE2_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(ge2_last_error(), "fp16") && strstr(ge2_last_error(), "linear") &&
                      strstr(ge2_last_error(), ge2_tensor_name(xh)),
                  "%s", ge2_last_error());
    o.precision = GE2_PRECISION_BF16;
    API(ge2_compile(ctx, g, &o, &p));
    ge2_program_free(p);
    ge2_graph_free(g);
    ge2_context_free(ctx);
}
END_TEST

/* The names the trainers' --precision takes, both ways */
START_TEST(precision_names_parse_back)
{
    for (int p = 0; p < GE2_PRECISION_COUNT; p++) {
        ge2_precision back = GE2_PRECISION_COUNT;
        API(ge2_precision_parse(ge2_precision_name((ge2_precision)p), &back));
        ck_assert_int_eq(back, p);
    }
    ck_assert_str_eq(ge2_precision_name(GE2_PRECISION_BF16), "bf16");
    ck_assert_str_eq(ge2_precision_name(GE2_PRECISION_FP16), "fp16");
    ge2_precision out;
    ck_assert_int_eq(ge2_precision_parse("fp8", &out), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(ge2_last_error(), "fp8") && strstr(ge2_last_error(), "fp16"), "%s", ge2_last_error());
    ck_assert_str_eq(ge2_precision_name(GE2_PRECISION_COUNT), "?");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("precision");
    TCase *tc = tcase_create("precision");
    tcase_add_test(tc, bf16_linear_is_the_rounded_product);
    tcase_add_test(tc, a_bf16_tensor_makes_a_bf16_linear);
    tcase_add_test(tc, a_layer_trains_in_bf16);
    tcase_add_test(tc, bf16_conv2d_is_the_rounded_convolution);
    tcase_add_test(tc, fp16_linear_is_the_rounded_product);
    tcase_add_test(tc, fp16_refuses_bf16_operands);
    tcase_add_test(tc, bf16_cnn_trains_on_bf16_operands);
    tcase_add_test(tc, bf16_linear_before_batch_norm_is_stored);
    tcase_add_test(tc, bf16_weight_gradient_is_the_rounded_product);
    tcase_add_test(tc, bf16_storage_rounds_each_operand_once);
    tcase_add_test(tc, bf16_bias_gradient_sums_the_rounded_gradient);
    tcase_add_test(tc, bf16_parameter_copies_follow_the_parameters);
    tcase_add_test(tc, bf16_storage_gives_attention_bf16_slices);
    tcase_add_test(tc, bf16_storage_leaves_step_results_f32);
    tcase_add_test(tc, a_precision_out_of_range_is_refused);
    tcase_add_test(tc, precision_names_parse_back);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
