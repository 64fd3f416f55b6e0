/* The op registry: every op, ge2's own and users', as its definition struct.
 * The engine (graph, autograd, planner, capture) reaches an op's inference,
 * backward rule and kernels only through here, never by its name.
 *
 * Ids are handed out in registration order and never reused. Registration
 * takes a lock; lookups do not, because an op is registered before any
 * graph uses it and a slot, once filled, never changes. */
#include <pthread.h>
#include <string.h>

#include "graph/alloc.h"
#include "graph/bf16.h"
#include "graph/graph_internal.h"

static const ge2_op_def *registry[GE2_OP_MAX];
static int registered;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

static ge2_status check_def(const ge2_op_def *def)
{
    if (!def || !def->name || !def->name[0])
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_op_register: the definition and its name must be given");
    if (strlen(def->name) >= GE2_NAME_MAX)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_op_register: op name '%.32s...' is longer than %d characters",
                         def->name, GE2_NAME_MAX - 1);
    if (!def->infer || !def->cpu)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_op_register: op '%s' has no %s", def->name,
                         !def->infer ? "infer function" : "CPU kernel");
    if (def->min_inputs < 0 || def->max_inputs < def->min_inputs || def->max_inputs > GE2_MAX_INPUTS)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_op_register: op '%s' takes %d..%d inputs; 0 <= min <= max <= %d",
                         def->name, def->min_inputs, def->max_inputs, GE2_MAX_INPUTS);
    if (def->max_outputs < 0 || def->max_outputs > GE2_MAX_OUTPUTS)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_op_register: op '%s' makes up to %d outputs; at most %d",
                         def->name, def->max_outputs, GE2_MAX_OUTPUTS);
    if ((def->flags & GE2_OPF_LIKE1) && def->max_inputs < 2)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_op_register: op '%s' is GE2_OPF_LIKE1 but takes no input 1",
                         def->name);
    /* the storage pass hands such an input a bf16 tensor: the op must take one there */
    if (def->bf16_with_outputs && (def->max_inputs >= 32 ? 0u : def->bf16_with_outputs >> def->max_inputs))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_op_register: op '%s' names inputs past its %d in "
                         "bf16_with_outputs (0x%x)", def->name, def->max_inputs, def->bf16_with_outputs);
    if (def->over_output < 0 || (def->over_output > 0 && def->over_output >= def->max_outputs))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_op_register: op '%s' has over_output %d; it makes %d outputs",
                         def->name, def->over_output, def->max_outputs);
    if (def->bf16_with_outputs && !def->reads_bf16)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_op_register: op '%s' has bf16_with_outputs but no reads_bf16 "
                         "that lets those inputs be bf16", def->name);
    return GE2_OK;
}

ge2_status ge2_op_register(const ge2_op_def *def, ge2_op *op)
{
    GE2_TRY(check_def(def));
    if (!op)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_op_register: op '%s': the id pointer is NULL", def->name);
    pthread_mutex_lock(&registry_lock);
    ge2_status st = GE2_OK;
    for (int i = 0; i < registered && st == GE2_OK; i++)
        if (strcmp(registry[i]->name, def->name) == 0)
            st = ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_op_register: an op named '%s' is registered already (id %d)",
                           def->name, i);
    if (st == GE2_OK && registered == GE2_OP_MAX)
        st = ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_op_register: op '%s': the registry is full (%d ops)", def->name,
                       GE2_OP_MAX);
    if (st == GE2_OK) {
        registry[registered] = def;
        *op = registered;
        __atomic_store_n(&registered, registered + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&registry_lock);
    return st;
}

ge2_status ge2_op_find(const char *name, ge2_op *op)
{
    if (!name || !op)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_op_find: name and op must not be NULL");
    const int n = ge2_op_count();
    for (int i = 0; i < n; i++)
        if (strcmp(registry[i]->name, name) == 0) {
            *op = i;
            return GE2_OK;
        }
    return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_op_find: no op named '%s' is registered", name);
}

const ge2_op_def *ge2_op_def_of(ge2_op op)
{
    return op >= 0 && op < ge2_op_count() ? registry[op] : NULL;
}

int ge2_op_count(void)
{
    return __atomic_load_n(&registered, __ATOMIC_ACQUIRE);
}

/* What an op's functions read of a node (extension.h). */
int ge2_node_id(const ge2_node *node) { return node->id; }
ge2_op ge2_node_op(const ge2_node *node) { return node->op; }
int ge2_node_input_count(const ge2_node *node) { return node->n_inputs; }
int ge2_node_output_count(const ge2_node *node) { return node->n_outputs; }
int ge2_node_input(const ge2_node *node, int i) { return i >= 0 && i < node->n_inputs ? node->inputs[i] : -1; }
int ge2_node_output(const ge2_node *node, int i) { return i >= 0 && i < node->n_outputs ? node->outputs[i] : -1; }
const void *ge2_node_attrs(const ge2_node *node) { return &node->attrs; }
const char *ge2_node_op_name(const ge2_node *node) { return ge2_op_name(node->op); }

bool ge2_op_bf16_operand(ge2_op op, int input)
{
    const ge2_op_def *def = ge2_op_def_of(op);
    if (!def || !(def->flags & GE2_OPF_BF16_OPERANDS) || input < 0 || input >= 32)
        return false;
    const unsigned operands = def->operands ? def->operands : 3u;
    return (operands >> input) & 1u;
}

bool ge2_launch_multiplies_half(const ge2_launch *l)
{
    for (int i = 0; i < l->n_in; i++)
        if (l->in[i].dtype == GE2_BF16 && ge2_op_bf16_operand(l->node->op, i))
            return true;
    return l->bf16_operands || l->f16_operands;
}

bool ge2_op_reads_bf16(const ge2_node *node, int input)
{
    const ge2_op_def *def = ge2_op_def_of(node->op);
    if (!def)
        return false;
    if (ge2_op_bf16_operand(node->op, input))
        return true;
    if (input == 1 && (def->flags & GE2_OPF_LIKE1)) /* a shape-only reference: never read */
        return true;
    return def->reads_bf16 && def->reads_bf16(node, input);
}

bool ge2_node_draws_random(const ge2_node *node)
{
    const ge2_op_def *def = ge2_op_def_of(node->op);
    if (!def)
        return false;
    return (def->flags & GE2_OPF_RANDOM) || (def->draws_random && def->draws_random(node));
}

int ge2_op_output_over_input(const ge2_graph *graph, const ge2_node *node)
{
    const ge2_op_def *def = ge2_op_def_of(node->op);
    if (!def)
        return -1;
    if (def->output_over_input)
        return def->output_over_input(graph, node);
    return (def->flags & GE2_OPF_ELEMENTWISE) && node->n_inputs > 0 ? 0 : -1;
}

int ge2_op_over_output(const ge2_node *node)
{
    const ge2_op_def *def = ge2_op_def_of(node->op);
    return def ? def->over_output : 0;
}

bool ge2_op_stores_bf16(const ge2_node *node, int output)
{
    const ge2_op_def *def = ge2_op_def_of(node->op);
    return def && def->stores_bf16 && def->stores_bf16(node, output);
}

bool ge2_stores_bf16_output0(const ge2_node *node, int output)
{
    (void)node;
    return output == 0;
}

bool ge2_reads_bf16_input0(const ge2_node *node, int input)
{
    (void)node;
    return input == 0;
}

bool ge2_reads_bf16_input1(const ge2_node *node, int input)
{
    (void)node;
    return input == 1;
}

bool ge2_reads_bf16_input2(const ge2_node *node, int input)
{
    (void)node;
    return input == 2;
}

/* Does the CPU kernel get input i of l as an f32 copy: a bf16 tensor the op
 * reads as such (a shape-only reference is never read: no copy)? */
static bool widened(const ge2_launch *l, int i)
{
    const bool like = i == 1 && (ge2_op_flags(l->node->op) & GE2_OPF_LIKE1);
    return l->in[i].dtype == GE2_BF16 && l->in[i].data && !like && ge2_op_reads_bf16(l->node, i);
}

/* f32 copies of launch l's widened inputs, swapped into l's views (a GEMM
 * given one then multiplies in bf16); *copies[i] to free */
static ge2_status widen_inputs(ge2_launch *l, float **copies)
{
    for (int i = 0; i < l->n_in; i++) {
        if (!widened(l, i))
            continue;
        const int64_t n = ge2_shape_numel(l->in[i].shape);
        copies[i] = ge2_malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
        if (!copies[i])
            return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_%s (node %d): no host memory to widen bf16 input %d",
                             ge2_op_name(l->node->op), l->node->id, i);
        const uint16_t *src = l->in[i].data;
        for (int64_t e = 0; e < n; e++)
            copies[i][e] = ge2_f32_from_bf16(src[e]);
        l->in[i].data = copies[i];
        l->in[i].dtype = GE2_F32;
        if (ge2_op_bf16_operand(l->node->op, i))
            l->bf16_operands = true;
    }
    return GE2_OK;
}

ge2_status ge2_op_run_cpu(const ge2_launch *launch)
{
    const ge2_op_def *def = ge2_op_def_of(launch->node->op);
    bool stored[GE2_MAX_OUTPUTS] = {false}, any = false;
    for (int k = 0; k < launch->n_out; k++) {
        stored[k] = launch->out[k].dtype == GE2_BF16 && launch->out[k].data && ge2_op_stores_bf16(launch->node, k);
        any |= stored[k];
    }
    for (int i = 0; i < launch->n_in && !any; i++)
        any = widened(launch, i);
    if (!any)
        return def->cpu(launch);
    ge2_launch l = *launch;
    float *wide[GE2_MAX_OUTPUTS] = {NULL}, *wide_in[GE2_MAX_INPUTS] = {NULL};
    ge2_status st = widen_inputs(&l, wide_in);
    for (int k = 0; k < l.n_out && st == GE2_OK; k++) {
        if (!stored[k])
            continue;
        const int64_t n = ge2_shape_numel(l.out[k].shape);
        wide[k] = ge2_malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
        if (!wide[k])
            st = ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_%s (node %d): no host memory for output %d in f32", def->name,
                           l.node->id, k);
        l.out[k].data = wide[k];
        l.out[k].dtype = GE2_F32;
    }
    if (st == GE2_OK)
        st = def->cpu(&l);
    for (int k = 0; k < l.n_out; k++) {
        if (wide[k] && st == GE2_OK) {
            uint16_t *dst = launch->out[k].data;
            const int64_t n = ge2_shape_numel(l.out[k].shape);
            for (int64_t i = 0; i < n; i++)
                dst[i] = ge2_bf16_from_f32(wide[k][i]);
        }
        ge2_free(wide[k]);
    }
    for (int i = 0; i < l.n_in; i++)
        ge2_free(wide_in[i]);
    return st;
}
