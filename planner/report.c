/* Human-readable views of a plan: a text report, a DOT drawing of its
 * schedule and fused groups, and an SVG of the arena. */
#include <stdio.h>
#include <stdlib.h>

#include "graph/alloc.h"
#include "graph/error.h"
#include "planner/plan_internal.h"

static const char *const mode_names[GE2_MODE_COUNT] = {"train", "eval"};

static double ratio(size_t a, size_t b) { return b ? (double)a / (double)b : 1.0; }

static double mib(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

static int by_bytes_desc(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b; /* the first field of both rows below */
    return x < y ? 1 : x > y ? -1 : 0;
}

typedef struct { size_t bytes; int count, op, dtype; } peak_kind;
typedef struct { size_t bytes; int tensor; } peak_tensor;

enum { PEAK_LARGEST = 8 };

/* Where the arena's memory goes: the blocks live where the planner's lower
 * bound is (each a tensor and what runs in place on it or views it), by
 * producing op and dtype, and the largest of them. */
static void report_peak(const ge2_plan *plan, const ge2_graph *graph, FILE *out)
{
    if (plan->n_steps <= 0 || plan->n_tensors <= 0)
        return;
    int n_ops = ge2_op_count() + 1; /* the last row: leaves (no producer) */
    int *chain_last = ge2_malloc((size_t)plan->n_tensors * sizeof *chain_last);
    peak_kind *kinds = ge2_calloc((size_t)n_ops * GE2_DTYPE_COUNT, sizeof *kinds);
    peak_tensor *largest = ge2_calloc((size_t)plan->n_tensors, sizeof *largest);
    if (!chain_last || !kinds || !largest) {
        fprintf(out, "  peak: not reported (out of host memory)\n");
        goto done;
    }
    for (int t = 0; t < plan->n_tensors; t++)
        chain_last[t] = -1;
    for (int t = 0; t < plan->n_tensors; t++) {
        if (plan->tensors[t].pool != GE2_POOL_ARENA || plan->tensors[t].first < 0)
            continue;
        int m = ge2_plan_memory_of(plan, t);
        if (plan->tensors[t].last > chain_last[m])
            chain_last[m] = plan->tensors[t].last;
    }
    int at = plan->peak_position, n_live = 0;
    size_t most = 0;
    for (int t = 0; t < plan->n_tensors; t++) {
        const ge2_plan_tensor *pt = &plan->tensors[t];
        if (pt->pool != GE2_POOL_ARENA || ge2_plan_memory_of(plan, t) != t || pt->first < 0 || pt->first > at ||
            chain_last[t] < at)
            continue;
        const ge2_tensor *tensor = graph->tensors[t];
        size_t bytes = ge2_plan_align(pt->bytes ? pt->bytes : 1, GE2_ARENA_ALIGN); /* as assign.c counts it */
        int op = tensor->producer >= 0 ? (int)graph->nodes[tensor->producer].op : n_ops - 1;
        peak_kind *k = &kinds[(size_t)op * GE2_DTYPE_COUNT + (size_t)tensor->dtype];
        k->bytes += bytes;
        k->count++;
        k->op = op;
        k->dtype = (int)tensor->dtype;
        most += bytes;
        largest[n_live++] = (peak_tensor){pt->bytes, t};
    }
    /* the scratch of the launch there (scratch.c) */
    const size_t scratch = plan->scratch_bytes ? ge2_plan_align(plan->scratch_bytes[at], GE2_ARENA_ALIGN) : 0;
    most += scratch;
    const ge2_node *node = &graph->nodes[plan->schedule[at]];
    fprintf(out, "  peak: %.1f MiB (%zu B) in %d tensors%s live at schedule position %d (%s, node %d); by producer:\n",
            mib(most), most, n_live, scratch ? " and the launch's scratch" : "", at, ge2_op_name(node->op), node->id);
    if (scratch)
        fprintf(out, "    %-24s %-4s %21.1f MiB\n", "(launch scratch)", "", mib(scratch));
    size_t n_kinds = (size_t)n_ops * GE2_DTYPE_COUNT;
    qsort(kinds, n_kinds, sizeof *kinds, by_bytes_desc);
    for (size_t k = 0; k < n_kinds && kinds[k].count > 0; k++)
        fprintf(out, "    %-24s %-4s %3d tensor(s) %9.1f MiB\n",
                kinds[k].op == n_ops - 1 ? "(leaf)" : ge2_op_name((ge2_op)kinds[k].op),
                ge2_dtype_name((ge2_dtype)kinds[k].dtype), kinds[k].count, mib(kinds[k].bytes));
    qsort(largest, (size_t)n_live, sizeof *largest, by_bytes_desc);
    fprintf(out, "  the largest there:\n");
    for (int i = 0; i < n_live && i < PEAK_LARGEST; i++) {
        const ge2_tensor *tensor = graph->tensors[largest[i].tensor];
        char s[64];
        fprintf(out, "    %s %s %s %.1f MiB\n", tensor->name, ge2_dtype_name(tensor->dtype),
                ge2_shape_str(plan->tensors[largest[i].tensor].shape, s, sizeof s), mib(largest[i].bytes));
    }
done:
    ge2_free(chain_last);
    ge2_free(kinds);
    ge2_free(largest);
}

/* The launches that have scratch in the arena: how many, how much, the largest. */
static void report_scratch(const ge2_plan *plan, const ge2_graph *graph, FILE *out)
{
    int n = 0, largest = -1;
    size_t total = 0;
    for (int p = 0; plan->scratch_bytes && p < plan->n_steps; p++) {
        if (!plan->scratch_bytes[p])
            continue;
        n++;
        total += plan->scratch_bytes[p];
        if (largest < 0 || plan->scratch_bytes[p] > plan->scratch_bytes[largest])
            largest = p;
    }
    if (!n)
        return;
    const ge2_node *node = &graph->nodes[plan->schedule[largest]];
    fprintf(out, "  launch scratch in the arena: %d launch(es), %zu B in all; the largest %zu B @%zu (node %d %s)\n", n,
            total, plan->scratch_bytes[largest], plan->scratch_offset[largest], node->id, ge2_op_name(node->op));
}

void ge2_plan_report(const ge2_plan *plan, const ge2_graph *graph, FILE *out)
{
    int in_place = 0, views = 0, arena_tensors = 0, used = 0;
    size_t pool_bytes[GE2_POOL_COUNT] = {0};
    for (int t = 0; t < plan->n_tensors; t++) {
        const ge2_plan_tensor *pt = &plan->tensors[t];
        pool_bytes[pt->pool] += pt->bytes;
        arena_tensors += pt->pool == GE2_POOL_ARENA;
        used += pt->pool != GE2_POOL_NONE;
        in_place += pt->reuses >= 0;
        views += pt->view_of >= 0;
    }
    fprintf(out, "key %016llx: mode=%s feeds:", (unsigned long long)plan->key.hash, mode_names[plan->key.mode]);
    for (int f = 0; f < plan->key.n_feeds; f++) {
        char s[64];
        fprintf(out, " %s%s", graph->tensors[plan->key.feed_ids[f]]->name,
                ge2_shape_str(plan->key.feed_shapes[f], s, sizeof s));
    }
    fprintf(out, "\n  nodes=%d tensors=%d (of %d in the graph) arena_tensors=%d in_place=%d views=%d\n",
            plan->n_steps, used, plan->n_tensors, arena_tensors, in_place, views);
    fprintf(out, "  arena %zu B = %.4f x lower bound %zu B; naive %zu B (%.2f x arena)\n", plan->arena_bytes,
            ratio(plan->arena_bytes, plan->lower_bound_bytes), plan->lower_bound_bytes, plan->naive_bytes,
            ratio(plan->naive_bytes, plan->arena_bytes));
    fprintf(out, "  tensor bytes by pool:");
    for (int p = GE2_POOL_PARAMS; p < GE2_POOL_COUNT; p++)
        fprintf(out, " %s=%zu", ge2_pool_name((ge2_pool)p), pool_bytes[p]);
    fprintf(out, "; io buffer %zu B\n", plan->input_bytes);
    report_scratch(plan, graph, out);
    fprintf(out, "plan: arena_bytes=%zu lower_bound_bytes=%zu naive_bytes=%zu\n", plan->arena_bytes,
            plan->lower_bound_bytes, plan->naive_bytes);
    report_peak(plan, graph, out);
}

/* Writes s with the five XML specials escaped (tensor names are user text). */
static void xml_escaped(FILE *out, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&apos;", out); break;
        default: fputc(*s, out);
        }
    }
}

enum { SVG_LEFT = 70, SVG_TOP = 40, SVG_BOTTOM = 30, SVG_HEIGHT = 600, SVG_MIN_COL = 6, SVG_WIDTH = 1200 };

ge2_status ge2_plan_svg(const ge2_plan *plan, const ge2_graph *graph, FILE *out)
{
    if (!plan || !graph || !out)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_plan_svg: plan, graph and out must not be NULL");
    int steps = plan->n_steps > 0 ? plan->n_steps : 1;
    double col = (double)SVG_WIDTH / steps;
    if (col < SVG_MIN_COL)
        col = SVG_MIN_COL;
    double width = SVG_LEFT + col * steps + 20;
    double height = SVG_TOP + SVG_HEIGHT + SVG_BOTTOM;
    double scale = plan->arena_bytes ? (double)SVG_HEIGHT / (double)plan->arena_bytes : 0.0;

    fprintf(out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "font-family=\"monospace\" font-size=\"10\">\n",
            width, height, width, height);
    char heading[160];
    snprintf(heading, sizeof heading, "%s arena: %zu B, lower bound %zu B (%.4f x), naive %zu B",
             mode_names[plan->key.mode], plan->arena_bytes, plan->lower_bound_bytes,
             ratio(plan->arena_bytes, plan->lower_bound_bytes), plan->naive_bytes);
    fprintf(out, "<title>ge2 plan: %s</title>\n<text x=\"%d\" y=\"16\" font-size=\"13\">%s</text>\n", heading,
            SVG_LEFT, heading);
    fprintf(out,
            "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n"
            "<text x=\"4\" y=\"%d\">%zu B</text><text x=\"4\" y=\"%d\">0</text>\n"
            "<text x=\"%d\" y=\"%.0f\">schedule position 0..%d</text>\n",
            SVG_LEFT, SVG_TOP, col * steps, SVG_HEIGHT, SVG_TOP + 10, plan->arena_bytes, SVG_TOP + SVG_HEIGHT,
            SVG_LEFT, height - 8, plan->n_steps - 1);

    for (int t = 0; t < plan->n_tensors; t++) {
        const ge2_plan_tensor *pt = &plan->tensors[t];
        if (pt->pool != GE2_POOL_ARENA)
            continue;
        const ge2_tensor *tensor = graph->tensors[t];
        bool backward = tensor->producer >= 0 && graph->nodes[tensor->producer].phase != GE2_PHASE_FORWARD;
        size_t bytes = ge2_plan_align(pt->bytes, GE2_ARENA_ALIGN);
        double x = SVG_LEFT + col * pt->first, w = col * (pt->last - pt->first + 1);
        double h = (double)bytes * scale, y = SVG_TOP + SVG_HEIGHT - (double)(pt->offset + bytes) * scale;
        char s[64];
        fprintf(out, "<g><title>");
        xml_escaped(out, tensor->name);
        fprintf(out, " %s %zu B @%zu, steps %d..%d%s</title>", ge2_shape_str(pt->shape, s, sizeof s), pt->bytes,
                pt->offset, pt->first, pt->last,
                pt->reuses >= 0 ? ", in place" : pt->view_of >= 0 ? ", a view" : "");
        fprintf(out,
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" fill-opacity=\"0.7\" "
                "stroke=\"#333\" stroke-width=\"0.5\"/>",
                x, y, w, h, backward ? "#e8a05c" : "#5c9ee8");
        if (h >= 10 && w >= 30) {
            fprintf(out, "<text x=\"%.1f\" y=\"%.1f\">", x + 2, y + h / 2 + 3);
            xml_escaped(out, tensor->name);
            fprintf(out, "</text>");
        }
        fprintf(out, "</g>\n");
    }
    for (int p = 0; plan->scratch_bytes && p < plan->n_steps; p++) {
        if (!plan->scratch_bytes[p])
            continue;
        size_t bytes = ge2_plan_align(plan->scratch_bytes[p], GE2_ARENA_ALIGN);
        double x = SVG_LEFT + col * p, w = col;
        double h = (double)bytes * scale, y = SVG_TOP + SVG_HEIGHT - (double)(plan->scratch_offset[p] + bytes) * scale;
        fprintf(out,
                "<g><title>scratch of node %d %s: %zu B @%zu, step %d</title><rect x=\"%.1f\" y=\"%.1f\" "
                "width=\"%.1f\" height=\"%.1f\" fill=\"#999\" fill-opacity=\"0.7\" stroke=\"#333\" "
                "stroke-width=\"0.5\"/></g>\n",
                plan->schedule[p], ge2_op_name(graph->nodes[plan->schedule[p]].op), plan->scratch_bytes[p],
                plan->scratch_offset[p], p, x, y, w, h);
    }
    fprintf(out, "</svg>\n");
    return ferror(out) ? ge2_error(GE2_ERR_IO, "ge2_plan_svg: write failed") : GE2_OK;
}

ge2_status ge2_plan_dot(const ge2_plan *plan, const ge2_graph *graph, FILE *out)
{
    if (!plan || !graph || !out)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_plan_dot: plan, graph and out must not be NULL");
    fprintf(out, "digraph ge2_key {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n");
    int g = 0;
    for (int p = 0; p < plan->n_steps; p++) {
        const ge2_fusion_group *grp = g < plan->n_groups ? &plan->groups[g] : NULL;
        if (grp && p == grp->first)
            fprintf(out, "  subgraph cluster_%d {\n    label=\"%s\"; style=filled; color=lightgrey;\n", g,
                    ge2_fusion_pattern_at(grp->pattern)->name);
        const ge2_node *node = &graph->nodes[plan->schedule[p]];
        fprintf(out, "  n%d [label=\"%d: %s (node %d)\"];\n", p, p, ge2_op_name(node->op), node->id);
        if (grp && p == grp->first + grp->count - 1) {
            fprintf(out, "  }\n");
            g++;
        }
    }
    for (int p = 0; p < plan->n_steps; p++)
        for (int q = p + 1; q < plan->n_steps; q++) {
            const ge2_node *a = &graph->nodes[plan->schedule[p]], *b = &graph->nodes[plan->schedule[q]];
            if (ge2_node_reads_output_of(b, a))
                fprintf(out, "  n%d -> n%d;\n", p, q);
        }
    fprintf(out, "}\n");
    return ferror(out) ? ge2_error(GE2_ERR_IO, "ge2_plan_dot: write failed") : GE2_OK;
}
