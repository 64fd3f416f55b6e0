/* train_mlp: a Fashion-MNIST multi-layer perceptron, trained end to end with ge2.
 *
 *   bazel run //examples:train_mlp -- --device cpu --epochs 10
 *
 * Model: fc1..fcK linear layers (fcI.weight [out, in], fcI.bias [out], the
 * names and layout of a PyTorch nn.Linear stack, so --save/--init files
 * round-trip with safetensors.torch), the activation fused into every layer
 * but the last, mean cross-entropy, and an accuracy metric. Inputs are
 * pixel / 255, flattened to 784. The loop, flags and output are the shared
 * trainer's (trainer.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "examples/trainer.h"

#define MAX_LAYERS 8

typedef struct mlp_options {
    int n_hidden;
    int64_t hidden[MAX_LAYERS - 1];
    ge2_activation act;
} mlp_options;

enum { FLAG_HIDDEN = TRAINER_MODEL_FLAG, FLAG_ACT };

static bool parse_hidden(const char *s, mlp_options *o)
{
    o->n_hidden = 0;
    if (!*s)
        return true;
    char buf[256];
    if (strlen(s) >= sizeof buf)
        return false;
    strcpy(buf, s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        errno = 0;
        long long v = strtoll(tok, &end, 10);
        if (o->n_hidden == MAX_LAYERS - 1 || !*tok || *end || errno || v < 1 || v > (1 << 20))
            return false;
        o->hidden[o->n_hidden++] = v;
    }
    return true;
}

static const trainer_spec spec;

static int parse_flag(void *model, int flag, const char *arg)
{
    mlp_options *o = model;
    if (flag == FLAG_HIDDEN && !parse_hidden(arg, o))
        return trainer_fail(&spec, 2, "--hidden: expected up to %d comma-separated widths in [1, 1048576], got '%s'",
                            MAX_LAYERS - 1, arg);
    if (flag == FLAG_ACT && (ge2_activation_parse(arg, &o->act) != GE2_OK || o->act == GE2_ACT_NONE))
        return trainer_fail(&spec, 2, "--act: expected relu, tanh, gelu or sigmoid, got '%s'", arg);
    return 0;
}

static ge2_status build(const void *model, const trainer_options *o, const ge2_optimizer_config *opt,
                        trainer_model *m)
{
    const mlp_options *mo = model;
    TRY(ge2_graph_new(&m->graph));
    TRY(ge2_graph_set_seed(m->graph, o->seed));
    TRY(ge2_input(m->graph, "x", GE2_F32, ge2_shape2(o->batch, TRAINER_FEATURES), &m->x));
    TRY(ge2_label(m->graph, "labels", GE2_I32, ge2_shape1(o->batch), &m->labels));
    ge2_tensor *h = m->x;
    int64_t in = TRAINER_FEATURES;
    for (int layer = 0; layer <= mo->n_hidden; layer++) {
        bool last = layer == mo->n_hidden;
        int64_t out = last ? TRAINER_CLASSES : mo->hidden[layer];
        char wname[32], bname[32];
        snprintf(wname, sizeof wname, "fc%d.weight", layer + 1);
        snprintf(bname, sizeof bname, "fc%d.bias", layer + 1);
        ge2_tensor *w, *b;
        TRY(ge2_parameter(m->graph, wname, GE2_F32, ge2_shape2(out, in),
                          (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, 0}, &w));
        TRY(ge2_parameter(m->graph, bname, GE2_F32, ge2_shape1(out), (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, in},
                          &b));
        TRY(ge2_linear(m->graph, h, w, b, last ? GE2_ACT_NONE : mo->act, 0.0f, &h));
        in = out;
    }
    TRY(ge2_cross_entropy(m->graph, h, m->labels, (float)o->label_smoothing, &m->loss));
    TRY(ge2_accuracy(m->graph, h, m->labels, &m->correct));
    TRY(ge2_mark_output(m->graph, m->correct));
    TRY(ge2_backward(m->graph, m->loss));
    TRY(ge2_optimizer(m->graph, opt));
    return GE2_OK;
}

static void describe(const void *model, FILE *out)
{
    const mlp_options *mo = model;
    fprintf(out, "model 784");
    for (int i = 0; i < mo->n_hidden; i++)
        fprintf(out, "-%lld", (long long)mo->hidden[i]);
    fprintf(out, "-10 %s", ge2_activation_name(mo->act));
}

static mlp_options model = {.n_hidden = 2, .hidden = {256, 128}, .act = GE2_ACT_RELU};

static const struct option model_flags[] = {
    {"hidden", required_argument, NULL, FLAG_HIDDEN},
    {"act", required_argument, NULL, FLAG_ACT},
    {NULL, 0, NULL, 0},
};

static const trainer_spec spec = {
    .name = "train_mlp",
    .summary = "Trains an MLP on Fashion-MNIST and prints its test accuracy.",
    .model_usage = "  --hidden LIST            hidden layer widths, comma-separated (256,128)\n"
                   "  --act NAME               relu|tanh|gelu|sigmoid after each hidden layer (relu)\n",
    .init_names = "fcI.weight, fcI.bias",
    .fusion_names = "backward_gemm,mlp_step,head,tail_copies",
    .default_epochs = 10,
    .default_schedule = GE2_SCHEDULE_CONSTANT,
    .default_optimizer = GE2_OPT_ADAM,
    .default_weight_decay = -1,
    .model_flags = model_flags,
    .model = &model,
    .parse_flag = parse_flag,
    .build = build,
    .describe = describe,
};

int main(int argc, char **argv) { return trainer_main(argc, argv, &spec); }
