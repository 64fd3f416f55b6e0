/* The op-case harness (op_cases.h): the helpers case bodies use, and the
 * registry of cases, which each op's folder fills (ops/<family>/test.c). */
#include "ops/elementwise/elementwise.h"
#include "tests/support/op_cases.h"

#include <stdio.h>
#include <string.h>

#include "graph/alloc.h"
#include "graph/error.h"
#include "graph/init.h"

double ge2_case_uniform(ge2_case_ctx *c, double lo, double hi) { return lo + (hi - lo) * ge2_init_uniform01(c->key, c->counter++); }
int64_t ge2_case_irange(ge2_case_ctx *c, int64_t lo, int64_t hi) { return lo + (int64_t)(ge2_case_uniform(c, 0, 1) * (double)(hi - lo + 1)); }
bool ge2_case_coin(ge2_case_ctx *c) { return ge2_case_uniform(c, 0, 1) < 0.5; }

ge2_shape ge2_case_random_shape(ge2_case_ctx *c, int min_nd, int max_nd)
{
    ge2_shape s = ge2_shape0();
    s.ndim = (int)ge2_case_irange(c, min_nd, max_nd);
    for (int i = 0; i < s.ndim; i++)
        s.dim[i] = ge2_case_irange(c, 1, 4);
    return s;
}

static void ge2_case_next_name(ge2_case_ctx *c, char *buf, const char *stem) { snprintf(buf, GE2_NAME_MAX, "%s%d", stem, c->n_names++); }

/* A fed tensor with random data: float operands in [-1, 1), labels in [0, classes). */
ge2_status ge2_case_feed(ge2_case_ctx *c, ge2_role role, ge2_dtype dtype, ge2_shape s, int64_t classes, bool wrt, ge2_tensor **out)
{
    ge2_op_instance *inst = c->inst;
    char name[GE2_NAME_MAX];
    ge2_case_next_name(c, name, role == GE2_ROLE_LABEL ? "label" : "x");
    GE2_TRY(role == GE2_ROLE_LABEL ? ge2_label(inst->graph, name, dtype, s, out)
                                   : ge2_input(inst->graph, name, dtype, s, out));
    int64_t n = ge2_shape_numel(s);
    void *data = ge2_malloc((size_t)n * ge2_dtype_size(dtype) + 1);
    if (!data)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "op_cases: out of memory");
    for (int64_t i = 0; i < n; i++) {
        if (dtype == GE2_I32)
            ((int32_t *)data)[i] = (int32_t)ge2_case_irange(c, 0, classes - 1);
        else if (dtype == GE2_U8)
            ((uint8_t *)data)[i] = (uint8_t)ge2_case_irange(c, 0, 255);
        else if (dtype == GE2_F64)
            ((double *)data)[i] = ge2_case_uniform(c, -1, 1);
        else
            ((float *)data)[i] = (float)ge2_case_uniform(c, -1, 1);
    }
    inst->feeds[inst->n_feeds++] = (ge2_feed){*out, data, s};
    if (wrt) {
        GE2_TRY(ge2_require_grad(inst->graph, *out));
        inst->wrt[inst->n_wrt++] = *out;
    }
    return GE2_OK;
}

/* A differentiated float operand: a PARAMETER the first time (ge2_backward
 * needs one), a required INPUT after that, so both paths are exercised. */
ge2_status ge2_case_operand(ge2_case_ctx *c, ge2_shape s, ge2_tensor **out)
{
    ge2_op_instance *inst = c->inst;
    if (inst->graph->n_parameters > 0)
        return ge2_case_feed(c, GE2_ROLE_INPUT, c->dtype, s, 0, true, out);
    char name[GE2_NAME_MAX];
    ge2_case_next_name(c, name, "p");
    ge2_init init = {GE2_INIT_UNIFORM, -1.0, 1.0, 0};
    GE2_TRY(ge2_parameter(inst->graph, name, c->dtype, s, init, out));
    inst->wrt[inst->n_wrt++] = *out;
    return GE2_OK;
}

/* A float operand nobody differentiates (shape references, backward-op inputs). */
ge2_status ge2_case_plain(ge2_case_ctx *c, ge2_shape s, ge2_tensor **out) { return ge2_case_feed(c, GE2_ROLE_INPUT, c->dtype, s, 0, false, out); }

ge2_status ge2_case_buffer(ge2_case_ctx *c, ge2_dtype dtype, ge2_shape s, ge2_init init, ge2_tensor **out)
{
    char name[GE2_NAME_MAX];
    ge2_case_next_name(c, name, "buf");
    return ge2_buffer(c->inst->graph, name, dtype, s, init, out);
}

ge2_status ge2_case_last_node(ge2_case_ctx *c)
{
    c->inst->node = c->inst->graph->n_nodes - 1;
    return GE2_OK;
}

ge2_status ge2_case_direct(ge2_case_ctx *c, ge2_op op, ge2_tensor *const *ts, int n, int n_out, const ge2_attrs *a)
{
    int ids[GE2_MAX_INPUTS];
    for (int i = 0; i < n; i++)
        ids[i] = ts[i]->id;
    return ge2_graph_add_node(c->inst->graph, op, GE2_PHASE_FORWARD, ids, n, n_out, a, &c->inst->node);
}

ge2_activation ge2_case_random_act(ge2_case_ctx *c, float *slope)
{
    *slope = ge2_case_coin(c) ? 0.1f : -0.2f;
    return (ge2_activation)ge2_case_irange(c, 0, GE2_ACT_COUNT - 1);
}

/* Attrs of an activation derivative: any activation, from y where y allows it, else from z. */
ge2_attrs ge2_case_random_act_backward(ge2_case_ctx *c)
{
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_act_attrs, a)->act = ge2_case_random_act(c, &GE2_ATTRS(ge2_act_attrs, a)->slope);
    GE2_ATTRS(ge2_act_attrs, a)->from_output = ge2_case_coin(c) && (GE2_ATTRS(ge2_act_attrs, a)->act == GE2_ACT_RELU || GE2_ATTRS(ge2_act_attrs, a)->act == GE2_ACT_SIGMOID ||
                                    GE2_ATTRS(ge2_act_attrs, a)->act == GE2_ACT_TANH || (GE2_ATTRS(ge2_act_attrs, a)->act == GE2_ACT_LEAKY_RELU && GE2_ATTRS(ge2_act_attrs, a)->slope >= 0));
    return a;
}

/* big, and small that broadcasts to it: a suffix of big with some dims set to 1. */
void ge2_case_broadcast_shapes(ge2_case_ctx *c, ge2_shape *big, ge2_shape *small)
{
    *big = ge2_case_random_shape(c, 1, 4);
    *small = ge2_shape0();
    small->ndim = (int)ge2_case_irange(c, 0, big->ndim);
    for (int i = 0; i < small->ndim; i++)
        small->dim[i] = ge2_case_coin(c) ? big->dim[big->ndim - small->ndim + i] : 1;
}

/* ------------------------------------------------------------ the registry */

static const ge2_op_case *cases[GE2_OP_MAX];
static int n_cases;

void ge2_op_case_register(const ge2_op_case *c)
{
    if (n_cases < GE2_OP_MAX)
        cases[n_cases++] = c;
}

const ge2_op_case *ge2_op_case_of(ge2_op op)
{
    static const ge2_op_case missing = {"?", GE2_CASE_GRADIENT, NULL, NULL};
    const ge2_op_def *def = ge2_op_def_of(op);
    for (int i = 0; def && i < n_cases; i++)
        if (strcmp(cases[i]->op, def->name) == 0)
            return cases[i];
    return &missing;
}

void ge2_op_instance_free(ge2_op_instance *inst)
{
    if (!inst)
        return;
    for (int i = 0; i < inst->n_feeds; i++)
        ge2_free((void *)inst->feeds[i].data);
    ge2_graph_free(inst->graph);
    memset(inst, 0, sizeof *inst);
}

/* A fresh graph seeded like the data, the RNG keyed by the op's name, cleanup on failure. */
ge2_status ge2_op_case_build(const ge2_op_case *c, uint64_t seed, ge2_dtype dtype, ge2_op_instance *out)
{
    memset(out, 0, sizeof *out);
    if (!c->body)
        return ge2_error(GE2_ERR_UNSUPPORTED, "op case %s: no body", c->op);
    GE2_TRY(ge2_graph_new(&out->graph));
    ge2_graph_set_seed(out->graph, seed);
    ge2_case_ctx ctx = {out, dtype, ge2_init_key(seed, c->op), 0, 0};
    ge2_status st = c->body(&ctx);
    if (st != GE2_OK)
        ge2_op_instance_free(out);
    return st;
}
