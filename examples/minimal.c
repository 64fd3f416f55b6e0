/* The smallest complete ge2 program: an MLP learns a fixed random batch.
 * It is the README's API example, and CI runs it (//examples:minimal_test),
 * so the documentation cannot drift from the API.
 *
 * Exit status 0 when the loss falls below a tenth of where it started.
 */
#include <stdio.h>
#include <stdlib.h>

#include "ge2/ge2.h"

#define CHECK(call)                                                       \
    do {                                                                  \
        if ((call) != GE2_OK) {                                           \
            fprintf(stderr, "minimal: %s\n", ge2_last_error());           \
            return EXIT_FAILURE;                                          \
        }                                                                 \
    } while (0)

enum { BATCH = 32, IN = 20, HIDDEN = 64, CLASSES = 4, STEPS = 200 };

int main(void)
{
    /* 1. Build: x [32,20] -> linear+relu [32,64] -> linear [32,4] -> cross-entropy. */
    ge2_graph *g;
    ge2_tensor *x, *labels, *w1, *b1, *w2, *b2, *h, *logits, *loss;
    CHECK(ge2_graph_new(&g));
    CHECK(ge2_input(g, "x", GE2_F32, ge2_shape2(BATCH, IN), &x));
    CHECK(ge2_label(g, "labels", GE2_I32, ge2_shape1(BATCH), &labels));
    ge2_init torch_linear = {GE2_INIT_LINEAR_DEFAULT, 0, 0, 0};
    ge2_init torch_bias1 = {GE2_INIT_LINEAR_DEFAULT, 0, 0, IN};
    ge2_init torch_bias2 = {GE2_INIT_LINEAR_DEFAULT, 0, 0, HIDDEN};
    CHECK(ge2_parameter(g, "fc1.weight", GE2_F32, ge2_shape2(HIDDEN, IN), torch_linear, &w1));
    CHECK(ge2_parameter(g, "fc1.bias", GE2_F32, ge2_shape1(HIDDEN), torch_bias1, &b1));
    CHECK(ge2_parameter(g, "fc2.weight", GE2_F32, ge2_shape2(CLASSES, HIDDEN), torch_linear, &w2));
    CHECK(ge2_parameter(g, "fc2.bias", GE2_F32, ge2_shape1(CLASSES), torch_bias2, &b2));
    CHECK(ge2_linear(g, x, w1, b1, GE2_ACT_RELU, 0.0f, &h));
    CHECK(ge2_linear(g, h, w2, b2, GE2_ACT_NONE, 0.0f, &logits));
    CHECK(ge2_cross_entropy(g, logits, labels, 0.0f, &loss));

    /* 2. Backward and optimizer become nodes of the same graph. */
    CHECK(ge2_backward(g, loss));
    ge2_optimizer_config adam = ge2_optimizer_defaults(GE2_OPT_ADAM);
    adam.lr = 1e-2;
    CHECK(ge2_optimizer(g, &adam));

    /* 3. Compile once: CUDA when a GPU is present (one captured graph per step), else CPU. */
    ge2_context *ctx;
    ge2_program *program;
    CHECK(ge2_context_new(GE2_DEVICE_AUTO, &ctx));
    CHECK(ge2_compile(ctx, g, NULL, &program));

    /* 4. Train many: each step stages the batch and runs forward, loss, backward and update. */
    static float xs[BATCH * IN];
    static int32_t ys[BATCH];
    srand(1);
    for (int i = 0; i < BATCH * IN; i++)
        xs[i] = (float)rand() / RAND_MAX - 0.5f;
    for (int i = 0; i < BATCH; i++)
        ys[i] = rand() % CLASSES;
    ge2_feed feeds[] = {{x, xs, ge2_shape2(BATCH, IN)}, {labels, ys, ge2_shape1(BATCH)}};
    float first = 0, last = 0;
    for (int step = 0; step < STEPS; step++) {
        CHECK(ge2_program_step(program, GE2_MODE_TRAIN, feeds, 2));
        if (step == 0)
            CHECK(ge2_program_read_output(program, GE2_MODE_TRAIN, loss, &first, sizeof first));
    }
    CHECK(ge2_program_read_output(program, GE2_MODE_TRAIN, loss, &last, sizeof last));
    printf("minimal: %s, loss %.4f -> %.4f after %d steps\n", ge2_device_name(ge2_context_device(ctx)), first, last,
           STEPS);

    ge2_program_free(program);
    ge2_context_free(ctx);
    ge2_graph_free(g);
    return last < 0.1f * first ? EXIT_SUCCESS : EXIT_FAILURE;
}
