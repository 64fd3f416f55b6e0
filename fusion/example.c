/* The graphs the patterns' examples build (fusion.h: ge2_fusion_example_mlp). */
#include <stdio.h>

#include "fusion/fusion.h"
#include "graph/error.h"

ge2_status ge2_fusion_example_train(ge2_graph *g, ge2_status st, ge2_tensor *logits, ge2_tensor *labels,
                                    ge2_graph **graph)
{
    ge2_tensor *loss, *correct;
    if (st == GE2_OK)
        st = ge2_cross_entropy(g, logits, labels, 0.0f, &loss);
    if (st == GE2_OK)
        st = ge2_accuracy(g, logits, labels, &correct);
    if (st == GE2_OK)
        st = ge2_mark_output(g, correct);
    if (st == GE2_OK)
        st = ge2_backward(g, loss);
    ge2_optimizer_config adam = ge2_optimizer_defaults(GE2_OPT_ADAM);
    if (st == GE2_OK)
        st = ge2_optimizer(g, &adam);
    if (st != GE2_OK) {
        ge2_graph_free(g);
        return st;
    }
    *graph = g;
    return GE2_OK;
}

ge2_status ge2_fusion_example_rows(int64_t width, ge2_graph **g, ge2_tensor **labels, ge2_tensor **h)
{
    ge2_tensor *x, *w;
    GE2_TRY(ge2_graph_new(g));
    ge2_status st = ge2_input(*g, "x", GE2_F32, ge2_shape2(100, 40), &x);
    if (st == GE2_OK)
        st = ge2_label(*g, "labels", GE2_I32, ge2_shape1(100), labels);
    if (st == GE2_OK)
        st = ge2_parameter(*g, "fc.weight", GE2_F32, ge2_shape2(width, 40),
                           (ge2_init){GE2_INIT_UNIFORM, -0.2, 0.2, 0}, &w);
    if (st == GE2_OK)
        st = ge2_linear(*g, x, w, NULL, GE2_ACT_NONE, 0.0f, h);
    if (st != GE2_OK) {
        ge2_graph_free(*g);
        *g = NULL;
    }
    return st;
}

ge2_status ge2_fusion_example_head(ge2_graph *g, ge2_status st, ge2_tensor *h, int64_t classes, ge2_tensor *labels,
                                   ge2_graph **graph)
{
    ge2_tensor *w, *b, *logits = NULL;
    const int64_t in = st == GE2_OK ? h->shape.dim[h->shape.ndim - 1] : 0;
    if (st == GE2_OK)
        st = ge2_parameter(g, "head.weight", GE2_F32, ge2_shape2(classes, in),
                           (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, 0}, &w);
    if (st == GE2_OK)
        st = ge2_parameter(g, "head.bias", GE2_F32, ge2_shape1(classes), (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, in},
                           &b);
    if (st == GE2_OK)
        st = ge2_linear(g, h, w, b, GE2_ACT_NONE, 0.0f, &logits);
    return ge2_fusion_example_train(g, st, logits, labels, graph);
}

ge2_status ge2_fusion_example_mlp(const int64_t *widths, int n, int64_t batch, ge2_activation act, ge2_graph **graph)
{
    ge2_graph *g;
    ge2_tensor *x, *labels, *h;
    GE2_TRY(ge2_graph_new(&g));
    ge2_status st = ge2_input(g, "x", GE2_F32, ge2_shape2(batch, widths[0]), &x);
    if (st == GE2_OK)
        st = ge2_label(g, "labels", GE2_I32, ge2_shape1(batch), &labels);
    h = x;
    for (int l = 1; st == GE2_OK && l < n; l++) {
        char wn[32], bn[32];
        snprintf(wn, sizeof wn, "fc%d.weight", l);
        snprintf(bn, sizeof bn, "fc%d.bias", l);
        ge2_tensor *w, *b;
        st = ge2_parameter(g, wn, GE2_F32, ge2_shape2(widths[l], widths[l - 1]),
                           (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, 0}, &w);
        if (st == GE2_OK)
            st = ge2_parameter(g, bn, GE2_F32, ge2_shape1(widths[l]),
                               (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, widths[l - 1]}, &b);
        if (st == GE2_OK)
            st = ge2_linear(g, h, w, b, l == n - 1 ? GE2_ACT_NONE : act, 0.0f, &h);
    }
    return ge2_fusion_example_train(g, st, h, labels, graph);
}

ge2_status ge2_fusion_example_prenorm(ge2_status (*norm)(ge2_graph *g, ge2_tensor *x, ge2_tensor **y),
                                      ge2_graph **graph)
{
    ge2_graph *g;
    ge2_tensor *labels, *h, *act = NULL, *sum = NULL, *normed = NULL, *out = NULL;
    GE2_TRY(ge2_fusion_example_rows(48, &g, &labels, &h));
    ge2_status st = ge2_activate(g, h, GE2_ACT_GELU_TANH, 0.0f, &act);
    if (st == GE2_OK)
        st = ge2_add(g, h, act, &sum);
    if (st == GE2_OK)
        st = norm(g, sum, &normed);
    if (st == GE2_OK)
        st = ge2_add(g, sum, normed, &out);
    return ge2_fusion_example_head(g, st, out, 10, labels, graph);
}
