/* ge2_checkpoint_save / _load / _load_parameters: a program's training state
 * as safetensors (safetensors.h does the container).
 *
 * Tensors: every parameter and persistent buffer (batch norm's running
 * statistics, its i64 num_batches_tracked) under its own name in its graph
 * shape (a padded parameter's real rows only, ge2_parameter_padding; the
 * image a load fills starts zeroed, so its padding comes back zero) (PyTorch layout, so safetensors.torch.load_file + load_state_dict
 * takes them), and each optimizer state slot as "optim.<param>.<torch state name>"
 * (exp_avg, exp_avg_sq, max_exp_avg_sq, momentum_buffer; grad_accum for the
 * accumulation buffer). __metadata__ (strings, as the format requires):
 * format, optimizer, step, micro_step, base_lr, rng_offset, epoch,
 * batch_in_epoch, data_seed, examples_in_epoch (optional on load: older
 * files lack it). Loading checks the whole file against the model
 * before it touches the program, so a rejected file leaves it as it was.
 *
 * In PyTorch: sd = safetensors.torch.load_file(path);
 * model.load_state_dict({k: v for k, v in sd.items() if not k.startswith("optim.")}).
 * A file saved from a state_dict loads with ge2_checkpoint_load_parameters.
 */
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/safetensors.h"
#include "capture/program_state.h"
#include "graph/alloc.h"
#include "graph/error.h"
#include "optim/optimizer_math.h"

#define CK_FORMAT "ge2"

/* The tensors a checkpoint of this program holds, each with its place in a
 * host image of the pools. */
typedef struct ck_layout {
    int n;
    ge2_st_tensor *tensors;         /* [n] names and shapes; data into the images */
    char (*names)[GE2_ST_MAX_NAME]; /* [n] storage for the names */
    int64_t *offset;                /* [n] element offset in the joint image */
    const ge2_tensor **source;      /* [n] the graph's tensor each entry holds (a parameter, its state, a buffer) */
    int n_params;                   /* tensors [0, n_params) are parameters */
    /* [first_alias, first_alias + n_aliases): parameters again under their
     * aliases (the same image data); optional when loading */
    int first_alias, n_aliases;
    float *image;                   /* [(1 + slots) * pools.n]: params, then the state slots */
    int64_t image_n;
    unsigned char *buffer_image;    /* [layout->buffer_bytes]: the persistent buffers, last in tensors */
} ck_layout;

static void ck_layout_free(ck_layout *l)
{
    ge2_free(l->tensors);
    ge2_free(l->names);
    ge2_free(l->offset);
    ge2_free(l->source);
    ge2_free(l->image);
    ge2_free(l->buffer_image);
    memset(l, 0, sizeof *l);
}

/* A parameter's shape in a file: its real rows only (ge2_parameter_padding) */
static ge2_shape ck_stored_shape(const ge2_tensor *t)
{
    ge2_shape s = t->shape;
    if (t->real_rows > 0)
        s.dim[0] = t->real_rows;
    return s;
}

static ge2_status ck_layout_new(ge2_program *program, bool with_state, ck_layout *l)
{
    memset(l, 0, sizeof *l);
    /* the user's graph: an alias set after ge2_compile is there */
    const ge2_graph *g = ge2_program_source_graph(program);
    const ge2_layout *layout = ge2_program_layout(program);
    const ge2_optimizer_config *cfg = ge2_program_optimizer_config(program);
    ge2_flat_pools pools = ge2_program_pools(program);
    ge2_opt_slots slots = {-1, -1, -1, -1, -1, 0};
    if (cfg && with_state)
        slots = ge2_opt_slots_of(cfg);
    int n_params = 0, n_buffers = 0, n_aliases = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        n_params += g->tensors[i]->role == GE2_ROLE_PARAMETER;
        n_buffers += g->tensors[i]->role == GE2_ROLE_BUFFER;
        n_aliases += g->tensors[i]->role == GE2_ROLE_PARAMETER && g->tensors[i]->alias[0];
    }
    int n = n_params * (1 + slots.count) + n_buffers + n_aliases;
    l->image_n = (1 + slots.count) * pools.n;
    l->tensors = ge2_calloc((size_t)(n ? n : 1), sizeof *l->tensors);
    l->names = ge2_calloc((size_t)(n ? n : 1), sizeof *l->names);
    l->offset = ge2_calloc((size_t)(n ? n : 1), sizeof *l->offset);
    l->source = ge2_calloc((size_t)(n ? n : 1), sizeof *l->source);
    l->image = ge2_calloc((size_t)(l->image_n ? l->image_n : 1), sizeof(float));
    l->buffer_image = ge2_calloc(layout->buffer_bytes ? layout->buffer_bytes : 1, 1);
    if (!l->tensors || !l->names || !l->offset || !l->source || !l->image || !l->buffer_image) {
        ck_layout_free(l);
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_checkpoint: out of memory for %lld parameters",
                         (long long)pools.n);
    }
    for (int slot = -1; slot < slots.count; slot++)
        for (int i = 0; i < g->n_tensors; i++) {
            const ge2_tensor *t = g->tensors[i];
            if (t->role != GE2_ROLE_PARAMETER)
                continue;
            int k = l->n++;
            int len = slot < 0 ? snprintf(l->names[k], GE2_ST_MAX_NAME, "%s", t->name)
                               : snprintf(l->names[k], GE2_ST_MAX_NAME, "optim.%s.%s", t->name,
                                          ge2_opt_slot_name(&slots, slot));
            if (len >= GE2_ST_MAX_NAME) {
                ck_layout_free(l);
                return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_checkpoint: parameter name '%s' too long", t->name);
            }
            l->offset[k] = (int64_t)(1 + slot) * pools.n + (int64_t)(layout->offset[i] / sizeof(float));
            l->tensors[k] = (ge2_st_tensor){l->names[k], ck_stored_shape(t), l->image + l->offset[k], GE2_F32};
            l->source[k] = t;
        }
    for (int i = 0; i < g->n_tensors; i++) {
        const ge2_tensor *t = g->tensors[i];
        if (t->role != GE2_ROLE_BUFFER)
            continue;
        int k = l->n++;
        snprintf(l->names[k], GE2_ST_MAX_NAME, "%s", t->name); /* names are shorter than GE2_NAME_MAX */
        l->tensors[k] = (ge2_st_tensor){l->names[k], t->shape, l->buffer_image + layout->offset[i], t->dtype};
        l->source[k] = t;
    }
    l->first_alias = l->n;
    for (int i = 0; i < g->n_tensors; i++) {
        const ge2_tensor *t = g->tensors[i];
        if (t->role != GE2_ROLE_PARAMETER || !t->alias[0])
            continue;
        int k = l->n++;
        snprintf(l->names[k], GE2_ST_MAX_NAME, "%s", t->alias);
        l->tensors[k] = (ge2_st_tensor){l->names[k], ck_stored_shape(t), l->image + layout->offset[i] / sizeof(float),
                                        GE2_F32};
        l->source[k] = t;
    }
    l->n_aliases = n_aliases;
    l->n_params = n_params;
    return GE2_OK;
}

static bool ck_with_state(ge2_program *program)
{
    return ge2_program_optimizer_config(program) != NULL;
}

/* Pools -> images, or images -> pools (then waits: the images are freed
 * next). The persistent buffers travel with the parameters. */
static ge2_status ck_transfer(ge2_program *program, ck_layout *l, bool to_device, bool params_only)
{
    ge2_backend_ctx *bctx;
    const ge2_backend *b = ge2_program_backend(program, &bctx);
    ge2_flat_pools pools = ge2_program_pools(program);
    size_t bytes = (size_t)pools.n * sizeof(float), buffer_bytes = ge2_program_layout(program)->buffer_bytes;
    void *buffers = ge2_program_buffers(program);
    int64_t slots = params_only ? 0 : l->image_n / (pools.n ? pools.n : 1) - 1;
    if (to_device) {
        GE2_TRY(b->upload(bctx, pools.params, l->image, bytes));
        if (slots > 0)
            GE2_TRY(b->upload(bctx, pools.state, l->image + pools.n, (size_t)slots * bytes));
        if (buffer_bytes)
            GE2_TRY(b->upload(bctx, buffers, l->buffer_image, buffer_bytes));
        GE2_TRY(ge2_program_parameters_written(program));
        return b->sync(bctx);
    }
    GE2_TRY(b->download(bctx, l->image, pools.params, bytes));
    if (slots > 0)
        GE2_TRY(b->download(bctx, l->image + pools.n, pools.state, (size_t)slots * bytes));
    if (buffer_bytes)
        GE2_TRY(b->download(bctx, l->buffer_image, buffers, buffer_bytes));
    return GE2_OK;
}

ge2_status ge2_checkpoint_alias(ge2_graph *graph, ge2_tensor *param, const char *name)
{
    if (!graph || !param || !name || !name[0])
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_checkpoint_alias: graph, param and a name are required");
    if (param->graph != graph || param->role != GE2_ROLE_PARAMETER)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_checkpoint_alias: '%s' is not a parameter of this graph",
                         param->name);
    if (strlen(name) >= sizeof param->alias || strlen(name) >= GE2_ST_MAX_NAME)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_checkpoint_alias: name '%.32s...' is too long", name);
    for (int i = 0; i < graph->n_tensors; i++)
        if (!strcmp(graph->tensors[i]->name, name) || !strcmp(graph->tensors[i]->alias, name))
            return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_checkpoint_alias: '%s' already names a tensor", name);
    snprintf(param->alias, sizeof param->alias, "%s", name);
    return GE2_OK;
}

ge2_status ge2_checkpoint_conv1d(ge2_graph *graph, ge2_tensor *param)
{
    if (!graph || !param)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_checkpoint_conv1d: graph and param are required");
    if (param->graph != graph || param->role != GE2_ROLE_PARAMETER || param->shape.ndim != 2)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_checkpoint_conv1d: '%s' is not a 2-D parameter of this graph",
                         param->name);
    param->conv1d = true;
    return GE2_OK;
}

ge2_status ge2_checkpoint_save(ge2_program *program, const char *path, const ge2_resume_state *resume)
{
    return ge2_checkpoint_save_with(program, path, resume, NULL, 0);
}

/* ge2's own entries in a file's __metadata__ */
#define CK_OWN_META 13
#define CK_MAX_ENTRIES 32

/* The caller's __metadata__ entries: keys in "model." or "train.", values that fit, no key twice */
static ge2_status ck_check_entries(const char *fn, ge2_program *program, const char *path,
                                   const ge2_checkpoint_entry *entries, int n)
{
    if (!program || !path || n < 0 || (n > 0 && !entries))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: program, path and the %d entries must be given", fn, n);
    if (n > CK_MAX_ENTRIES)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: %d entries of the caller's; at most %d", fn, n, CK_MAX_ENTRIES);
    for (int i = 0; i < n; i++) {
        const char *key = entries[i].key;
        if (!key || (strncmp(key, "model.", 6) != 0 && strncmp(key, "train.", 6) != 0) ||
            strlen(key) >= GE2_ST_MAX_NAME || !entries[i].value || strlen(entries[i].value) >= GE2_ST_MAX_VALUE)
            return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: entry %d ('%s'): a key beginning with \"model.\" or "
                             "\"train.\" and a value of at most %d bytes", fn, i, key ? key : "",
                             GE2_ST_MAX_VALUE - 1);
        for (int j = 0; j < i; j++) /* a reader refuses a key that appears twice */
            if (!strcmp(entries[j].key, entries[i].key))
                return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: entry %d repeats the key '%s'", fn, i, entries[i].key);
    }
    return GE2_OK;
}

/* The caller's entries after ge2's own n_own in meta */
static void ck_put_entries(ge2_st_kv *meta, int n_own, const ge2_checkpoint_entry *entries, int n)
{
    for (int i = 0; i < n; i++) {
        snprintf(meta[n_own + i].key, GE2_ST_MAX_NAME, "%s", entries[i].key);
        snprintf(meta[n_own + i].value, GE2_ST_MAX_VALUE, "%s", entries[i].value);
    }
}

ge2_status ge2_checkpoint_save_with(ge2_program *program, const char *path, const ge2_resume_state *resume,
                                    const ge2_checkpoint_entry *entries, int n)
{
    GE2_TRY(ck_check_entries("ge2_checkpoint_save", program, path, entries, n));
    if (resume && (resume->epoch < 0 || resume->batch_in_epoch < 0 || resume->examples_in_epoch < 0))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT,
                         "ge2_checkpoint_save: %s: the resume state's epoch %lld, batch_in_epoch %lld, "
                         "examples_in_epoch %lld must not be negative (a ge2_resume_state not zeroed first?)",
                         path, (long long)resume->epoch, (long long)resume->batch_in_epoch,
                         (long long)resume->examples_in_epoch);
    ck_layout l;
    GE2_TRY(ck_layout_new(program, ck_with_state(program), &l));
    ge2_status st = ck_transfer(program, &l, false, false);
    if (st == GE2_OK)
        st = ge2_program_download_control(program);
    if (st == GE2_OK) {
        const ge2_control *c = ge2_program_control_host(program);
        const ge2_optimizer_config *cfg = ge2_program_optimizer_config(program);
        ge2_resume_state r = resume ? *resume : (ge2_resume_state){0, 0, 0, 0};
        ge2_st_kv meta[CK_OWN_META + CK_MAX_ENTRIES] = {
            {"format", CK_FORMAT}, {"optimizer", ""}, {"step", ""}, {"micro_step", ""}, {"base_lr", ""},
            {"rng_offset", ""}, {"epoch", ""}, {"batch_in_epoch", ""}, {"data_seed", ""}, {"examples_in_epoch", ""},
            {"loss_scale", ""}, {"scale_good_steps", ""}, {"skipped_steps", ""}};
        snprintf(meta[1].value, GE2_ST_MAX_VALUE, "%s", cfg ? ge2_optimizer_name(cfg->kind) : "none");
        snprintf(meta[2].value, GE2_ST_MAX_VALUE, "%" PRId64, c->step);
        snprintf(meta[3].value, GE2_ST_MAX_VALUE, "%" PRId32, c->micro_step);
        snprintf(meta[4].value, GE2_ST_MAX_VALUE, "%.9g", (double)c->base_lr);
        snprintf(meta[5].value, GE2_ST_MAX_VALUE, "%" PRIu64, c->rng_offset);
        snprintf(meta[6].value, GE2_ST_MAX_VALUE, "%" PRId64, r.epoch);
        snprintf(meta[7].value, GE2_ST_MAX_VALUE, "%" PRId64, r.batch_in_epoch);
        snprintf(meta[8].value, GE2_ST_MAX_VALUE, "%" PRIu64, r.data_seed);
        snprintf(meta[9].value, GE2_ST_MAX_VALUE, "%" PRId64, r.examples_in_epoch);
        /* dynamic loss scaling's state (GradScaler's state_dict): 1, 0, 0 without it */
        snprintf(meta[10].value, GE2_ST_MAX_VALUE, "%.9g", (double)c->loss_scale);
        snprintf(meta[11].value, GE2_ST_MAX_VALUE, "%" PRId32, c->scale_good_steps);
        snprintf(meta[12].value, GE2_ST_MAX_VALUE, "%" PRId64, c->skipped_steps);
        ck_put_entries(meta, CK_OWN_META, entries, n);
        st = ge2_st_write(path, l.tensors, l.n, meta, CK_OWN_META + n);
    }
    ck_layout_free(&l);
    return st;
}

static ge2_shape ck_swapped(ge2_shape s)
{
    const int64_t rows = s.dim[0];
    s.dim[0] = s.dim[1];
    s.dim[1] = rows;
    return s;
}

/* [cols, rows] f32 (unaligned) -> [rows, cols] */
static void ck_transpose_into(float *dst, const uint8_t *src, ge2_shape dst_shape)
{
    const int64_t rows = dst_shape.dim[0], cols = dst_shape.dim[1];
    for (int64_t c = 0; c < cols; c++)
        for (int64_t r = 0; r < rows; r++)
            memcpy(&dst[r * cols + c], src + sizeof(float) * (size_t)(c * rows + r), sizeof(float));
}

ge2_status ge2_checkpoint_export(ge2_program *program, const char *path, const ge2_checkpoint_export_options *options)
{
    const ge2_checkpoint_export_options none = {false, NULL, 0};
    const ge2_checkpoint_export_options *o = options ? options : &none;
    GE2_TRY(ck_check_entries("ge2_checkpoint_export", program, path, o->entries, o->n_entries));
    ck_layout l;
    GE2_TRY(ck_layout_new(program, false, &l));
    /* the transposed copies, one image beside the layout's */
    float *flipped = ge2_calloc((size_t)(l.image_n ? l.image_n : 1), sizeof(float));
    ge2_status st = flipped ? ck_transfer(program, &l, false, true)
                            : ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_checkpoint_export: out of memory for %s", path);
    int n = 0;
    for (int k = 0; st == GE2_OK && k < l.first_alias; k++) {
        ge2_st_tensor t = l.tensors[k];
        if (o->conv1d_transposed && l.source[k]->conv1d) {
            float *dst = flipped + l.offset[k];
            const ge2_shape s = ck_swapped(t.shape);
            ck_transpose_into(dst, (const uint8_t *)t.data, s); /* [rows, cols] read as the [cols, rows] source */
            t.shape = s;
            t.data = dst;
        }
        l.tensors[n++] = t;
    }
    if (st == GE2_OK) {
        ge2_st_kv meta[1 + CK_MAX_ENTRIES] = {{"format", "pt"}}; /* what transformers requires of a file */
        ck_put_entries(meta, 1, o->entries, o->n_entries);
        st = ge2_st_write(path, l.tensors, n, meta, 1 + o->n_entries);
    }
    ge2_free(flipped);
    ck_layout_free(&l);
    return st;
}

/* A tensor that holds a NaN or an infinity (a run that diverged) would
 * train on silently and spread through batch norm's statistics and Adam's
 * state: refused by name and element. */
static ge2_status ck_finite(const ge2_st_tensor *t, const char *path)
{
    const int64_t n = ge2_shape_numel(t->shape);
    for (int64_t i = 0; i < n; i++) {
        const double v = t->dtype == GE2_F32 ? ((const float *)t->data)[i]
                         : t->dtype == GE2_F64 ? ((const double *)t->data)[i]
                                               : 0.0;
        if (!isfinite(v))
            return ge2_error(GE2_ERR_FORMAT, "%s: tensor %s holds %s at element %lld (a run that diverged?); "
                             "refusing to train from it",
                             path, t->name, isnan(v) ? "a NaN" : "an infinity", (long long)i);
    }
    return GE2_OK;
}

/* Every expected tensor present with its dtype and shape, finite, copied
 * into the image; then no tensor the model lacks (ignoring "optim." ones
 * when asked). */
/* Whether the file holds the Conv1D parameters (ge2_checkpoint_conv1d)
 * transposed, [in, out], as Hugging Face's GPT-2 does: the first such
 * parameter that is not square decides (the shape checks then hold the
 * others to it); none, or all square: as the model holds them. */
static bool ck_file_transposed(const ge2_st_file *f, const ck_layout *l)
{
    for (int k = 0; k < l->first_alias; k++) {
        const ge2_shape s = l->tensors[k].shape;
        if (!l->source[k]->conv1d || s.dim[0] == s.dim[1])
            continue;
        const ge2_st_entry *e = ge2_st_find(f, l->tensors[k].name);
        return e && e->rank == 2 && e->shape[0] == s.dim[1] && e->shape[1] == s.dim[0];
    }
    return false;
}

static ge2_status ck_match(const ge2_st_file *f, const char *path, ck_layout *l, bool ignore_optim)
{
    const bool transposed = ck_file_transposed(f, l);
    for (int k = 0; k < l->first_alias; k++) {
        const ge2_st_tensor *t = &l->tensors[k];
        const uint8_t *data;
        if (transposed && l->source[k]->conv1d) {
            const ge2_st_entry *e = ge2_st_find(f, t->name);
            if (e && (e->rank != 2 || e->shape[0] != t->shape.dim[1] || e->shape[1] != t->shape.dim[0]))
                return ge2_error(GE2_ERR_FORMAT, "%s: tensor %s is not [%lld, %lld], the [in, out] layout the file's "
                                 "other Conv1D weights have (the model's is [%lld, %lld])", path, t->name,
                                 (long long)t->shape.dim[1], (long long)t->shape.dim[0], (long long)t->shape.dim[0],
                                 (long long)t->shape.dim[1]);
            GE2_TRY(ge2_st_expect(f, path, t->name, t->dtype, ck_swapped(t->shape), &data));
            ck_transpose_into((float *)t->data, data, t->shape);
        } else {
            GE2_TRY(ge2_st_expect(f, path, t->name, t->dtype, t->shape, &data));
            memcpy((void *)t->data, data, (size_t)ge2_shape_numel(t->shape) * ge2_dtype_size(t->dtype));
        }
        GE2_TRY(ck_finite(t, path));
    }
    /* an alias, when the file has it, must hold what its parameter got */
    for (int k = l->first_alias; k < l->first_alias + l->n_aliases; k++) {
        const ge2_st_tensor *t = &l->tensors[k];
        const uint8_t *data;
        if (!ge2_st_find(f, t->name))
            continue;
        GE2_TRY(ge2_st_expect(f, path, t->name, t->dtype, t->shape, &data));
        if (memcmp(t->data, data, (size_t)ge2_shape_numel(t->shape) * sizeof(float)) != 0)
            return ge2_error(GE2_ERR_FORMAT, "%s: tensor %s differs from the parameter it is tied to in this model",
                             path, t->name);
    }
    for (int i = 0; i < f->n_entries; i++) {
        const char *name = f->entries[i].name;
        if (ignore_optim && !strncmp(name, "optim.", 6))
            continue;
        bool known = false;
        for (int k = 0; k < l->n && !known; k++)
            known = !strcmp(name, l->tensors[k].name);
        if (!known)
            return ge2_error(GE2_ERR_FORMAT, "%s: tensor %s is not in the model", path, name);
    }
    return GE2_OK;
}

/* A __metadata__ integer in [lo, hi]; all digits, nothing else. */
static ge2_status ck_meta_int(const ge2_st_file *f, const char *path, const char *key, int64_t lo, int64_t hi,
                              int64_t *out)
{
    const char *v = ge2_st_meta(f, key);
    if (!v)
        return ge2_error(GE2_ERR_FORMAT, "%s: __metadata__ lacks \"%s\"", path, key);
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi)
        return ge2_error(GE2_ERR_FORMAT, "%s: __metadata__ \"%s\" is \"%s\", expected an integer in [%lld, %lld]",
                         path, key, v, (long long)lo, (long long)hi);
    *out = x;
    return GE2_OK;
}

static ge2_status ck_meta_u64(const ge2_st_file *f, const char *path, const char *key, uint64_t *out)
{
    const char *v = ge2_st_meta(f, key);
    if (!v)
        return ge2_error(GE2_ERR_FORMAT, "%s: __metadata__ lacks \"%s\"", path, key);
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (!*v || *v == '-' || *end || errno)
        return ge2_error(GE2_ERR_FORMAT, "%s: __metadata__ \"%s\" is \"%s\", expected an unsigned integer", path, key,
                         v);
    *out = x;
    return GE2_OK;
}

/* A __metadata__ number, finite, in [lo, hi]; nothing after it. */
static ge2_status ck_meta_double(const ge2_st_file *f, const char *path, const char *key, double lo, double hi,
                                 double *out)
{
    const char *v = ge2_st_meta(f, key);
    if (!v)
        return ge2_error(GE2_ERR_FORMAT, "%s: __metadata__ lacks \"%s\"", path, key);
    char *end;
    const double x = strtod(v, &end);
    if (!*v || *end || !isfinite(x) || x < lo || x > hi)
        return ge2_error(GE2_ERR_FORMAT, "%s: __metadata__ \"%s\" is %s, expected a finite number in [%g, %g]",
                         path, key, v, lo, hi);
    *out = x;
    return GE2_OK;
}

/* Largest step a checkpoint may carry: the optimizer computes t = step + 1 in
 * int64 and uses t as a double exponent (bias correction), so an untrusted
 * step must leave room for the + 1 and stay exact in a double. */
#define CK_MAX_STEP (INT64_C(1) << 53)

/* The training state the metadata carries, all validated before use. */
typedef struct ck_meta {
    int64_t step, micro_step, epoch, batch_in_epoch, examples_in_epoch;
    uint64_t rng_offset, data_seed;
    double base_lr;
    bool has_scale; /* the loss scaling keys are there (files before them lack them) */
    double loss_scale;
    int64_t scale_good_steps, skipped_steps;
} ck_meta;

static ge2_status ck_read_meta(ge2_program *program, const ge2_st_file *f, const char *path, ck_meta *m)
{
    const char *format = ge2_st_meta(f, "format");
    if (!format || strcmp(format, CK_FORMAT))
        return ge2_error(GE2_ERR_FORMAT, "%s: not a ge2 checkpoint (__metadata__ format is %s%s%s); "
                                         "--init / ge2_checkpoint_load_parameters reads parameters only",
                         path, format ? "\"" : "", format ? format : "missing", format ? "\"" : "");
    const ge2_optimizer_config *cfg = ge2_program_optimizer_config(program);
    const char *kind = ge2_st_meta(f, "optimizer");
    const char *want = cfg ? ge2_optimizer_name(cfg->kind) : "none";
    if (!kind || strcmp(kind, want))
        return ge2_error(GE2_ERR_FORMAT, "%s: checkpoint optimizer is %s, the program's is %s", path,
                         kind ? kind : "missing", want);
    int accumulation = cfg ? cfg->accumulation_steps : 1;
    GE2_TRY(ck_meta_int(f, path, "step", 0, CK_MAX_STEP, &m->step));
    GE2_TRY(ck_meta_int(f, path, "micro_step", 0, accumulation - 1, &m->micro_step));
    GE2_TRY(ck_meta_int(f, path, "epoch", 0, INT64_MAX, &m->epoch));
    GE2_TRY(ck_meta_int(f, path, "batch_in_epoch", 0, INT64_MAX, &m->batch_in_epoch));
    m->examples_in_epoch = 0; /* optional: files before data parallelism lack it */
    if (ge2_st_meta(f, "examples_in_epoch"))
        GE2_TRY(ck_meta_int(f, path, "examples_in_epoch", 0, INT64_MAX, &m->examples_in_epoch));
    GE2_TRY(ck_meta_u64(f, path, "rng_offset", &m->rng_offset));
    GE2_TRY(ck_meta_u64(f, path, "data_seed", &m->data_seed));
    GE2_TRY(ck_meta_double(f, path, "base_lr", 0.0, DBL_MAX, &m->base_lr));
    m->has_scale = ge2_st_meta(f, "loss_scale") != NULL;
    if (!m->has_scale)
        return GE2_OK;
    /* a float scale: from its smallest positive value to its largest */
    GE2_TRY(ck_meta_double(f, path, "loss_scale", FLT_TRUE_MIN, FLT_MAX, &m->loss_scale));
    GE2_TRY(ck_meta_int(f, path, "scale_good_steps", 0, INT32_MAX, &m->scale_good_steps));
    return ck_meta_int(f, path, "skipped_steps", 0, INT64_MAX, &m->skipped_steps);
}

/* Most data bytes a usable file can hold: parameters, every state slot
 * (a parameter-only load tolerates a full checkpoint's "optim." tensors)
 * and the persistent buffers. */
static uint64_t ck_max_data(ge2_program *program)
{
    ge2_flat_pools pools = ge2_program_pools(program);
    return (uint64_t)(1 + GE2_OPT_MAX_SLOTS) * (uint64_t)pools.n * sizeof(float) +
           ge2_program_layout(program)->buffer_bytes;
}

ge2_status ge2_checkpoint_load(ge2_program *program, const char *path, ge2_resume_state *resume)
{
    if (!program || !path)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_checkpoint_load: program and path must not be NULL");
    ge2_st_file f;
    GE2_TRY(ge2_st_read(path, ck_max_data(program), &f));
    ck_layout l;
    ck_meta m;
    ge2_status st = ck_read_meta(program, &f, path, &m);
    if (st == GE2_OK)
        st = ck_layout_new(program, ck_with_state(program), &l);
    if (st != GE2_OK) {
        ge2_st_release(&f);
        return st;
    }
    st = ck_match(&f, path, &l, false);
    /* From here on the file is known good: the program changes. */
    if (st == GE2_OK)
        st = ck_transfer(program, &l, true, false);
    if (st == GE2_OK)
        st = ge2_program_download_control(program);
    if (st == GE2_OK) {
        ge2_control *c = ge2_program_control_host(program);
        c->step = m.step;
        c->micro_step = (int32_t)m.micro_step;
        c->base_lr = (float)m.base_lr;
        c->rng_offset = m.rng_offset;
        const ge2_optimizer_config *cfg = ge2_program_optimizer_config(program);
        if (m.has_scale && cfg && cfg->loss_scaling.dynamic) { /* GradScaler.load_state_dict */
            c->loss_scale = (float)m.loss_scale;
            c->scale_good_steps = (int32_t)m.scale_good_steps;
            c->skipped_steps = m.skipped_steps;
        }
        st = ge2_program_upload_control(program);
    }
    if (st == GE2_OK && resume)
        *resume = (ge2_resume_state){m.epoch, m.batch_in_epoch, m.data_seed, m.examples_in_epoch};
    ck_layout_free(&l);
    ge2_st_release(&f);
    return st;
}

ge2_status ge2_checkpoint_load_parameters(ge2_program *program, const char *path)
{
    if (!program || !path)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT,
                         "ge2_checkpoint_load_parameters: program and path must not be NULL");
    ge2_st_file f;
    GE2_TRY(ge2_st_read(path, ck_max_data(program), &f));
    ck_layout l;
    ge2_status st = ck_layout_new(program, false, &l);
    if (st == GE2_OK) {
        st = ck_match(&f, path, &l, true);
        if (st == GE2_OK)
            st = ck_transfer(program, &l, true, true);
        ck_layout_free(&l);
    }
    ge2_st_release(&f);
    return st;
}

ge2_status ge2_checkpoint_read_entries(const char *path, const char *const *keys, int n, char *const *values,
                                       size_t size, bool *found)
{
    if (!path || n < 0 || (n > 0 && (!keys || !values || !found)) || size == 0)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_checkpoint_read_entries: path, %d keys, values and found "
                         "are required", n);
    ge2_st_file f;
    GE2_TRY(ge2_st_read(path, UINT64_MAX, &f));
    ge2_status st = GE2_OK;
    for (int i = 0; i < n && st == GE2_OK; i++) {
        const char *v = ge2_st_meta(&f, keys[i]);
        found[i] = v && strlen(v) < size;
        values[i][0] = '\0';
        if (v && !found[i])
            st = ge2_error(GE2_ERR_FORMAT, "%s: __metadata__ %s is %zu bytes, more than %zu", path, keys[i], strlen(v),
                           size - 1);
        else if (v)
            memcpy(values[i], v, strlen(v) + 1);
    }
    ge2_st_release(&f);
    return st;
}
