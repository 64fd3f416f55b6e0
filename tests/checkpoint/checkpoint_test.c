/* Checkpoints of a real program on the CPU backend: round trip, resume
 * exactness against an uninterrupted run, model mismatches, corrupt files,
 * atomic save, and parameter-only loads of PyTorch-style files. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/safetensors.h"
#include "capture/program_state.h"
#include "data/dataset.h"
#include "ge2/ge2.h"
#include "tests/data/testutil.h"

#define API(call) ck_assert_msg((call) == GE2_OK, "%s: %s", #call, ge2_last_error())

enum { IN = 8, HID = 6, CLS = 3, N_EX = 50 };

typedef struct net {
    ge2_context *ctx;
    ge2_graph *graph;
    ge2_program *program;
    ge2_tensor *x, *y, *loss, *params[4];
} net;

static const char *const pnames[4] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};

static void net_open(net *n, const ge2_optimizer_config *cfg, int hidden)
{
    memset(n, 0, sizeof *n);
    API(ge2_context_new(GE2_DEVICE_CPU, &n->ctx));
    API(ge2_graph_new(&n->graph));
    API(ge2_graph_set_seed(n->graph, 7));
    API(ge2_input(n->graph, "x", GE2_F32, ge2_shape2(8, IN), &n->x));
    API(ge2_label(n->graph, "y", GE2_I32, ge2_shape1(8), &n->y));
    ge2_init wi = {GE2_INIT_LINEAR_DEFAULT, 0, 0, 0};
    ge2_init b1 = {GE2_INIT_LINEAR_DEFAULT, 0, 0, IN}, b2 = {GE2_INIT_LINEAR_DEFAULT, 0, 0, hidden};
    ge2_tensor *h, *logits, *correct;
    API(ge2_parameter(n->graph, pnames[0], GE2_F32, ge2_shape2(hidden, IN), wi, &n->params[0]));
    API(ge2_parameter(n->graph, pnames[1], GE2_F32, ge2_shape1(hidden), b1, &n->params[1]));
    API(ge2_parameter(n->graph, pnames[2], GE2_F32, ge2_shape2(CLS, hidden), wi, &n->params[2]));
    API(ge2_parameter(n->graph, pnames[3], GE2_F32, ge2_shape1(CLS), b2, &n->params[3]));
    API(ge2_linear(n->graph, n->x, n->params[0], n->params[1], GE2_ACT_TANH, 0, &h));
    API(ge2_linear(n->graph, h, n->params[2], n->params[3], GE2_ACT_NONE, 0, &logits));
    API(ge2_cross_entropy(n->graph, logits, n->y, 0, &n->loss));
    API(ge2_accuracy(n->graph, logits, n->y, &correct));
    API(ge2_mark_output(n->graph, correct));
    API(ge2_backward(n->graph, n->loss));
    API(ge2_optimizer(n->graph, cfg));
    ge2_compile_options opt = ge2_compile_defaults();
    API(ge2_compile(n->ctx, n->graph, &opt, &n->program));
}

static void net_close(net *n)
{
    ge2_program_free(n->program);
    ge2_graph_free(n->graph);
    ge2_context_free(n->ctx);
}

/* Host copy of params followed by optimizer state: the whole persistent state. */
static float *net_state(net *n, size_t *count)
{
    ge2_flat_pools p = ge2_program_pools(n->program);
    ge2_backend_ctx *b;
    const ge2_backend *be = ge2_program_backend(n->program, &b);
    *count = (size_t)(p.n * (1 + p.slots));
    float *out = malloc(*count * sizeof(float));
    API(be->download(b, out, p.params, (size_t)p.n * sizeof(float)));
    if (p.slots)
        API(be->download(b, out + p.n, p.state, (size_t)(p.n * p.slots) * sizeof(float)));
    return out;
}

static ge2_dataset *make_data(void)
{
    ge2_dataset *ds;
    API(ge2_dataset_new(N_EX, IN, CLS, &ds));
    for (int i = 0; i < N_EX; i++) {
        for (int j = 0; j < IN; j++)
            ds->images[i * IN + j] = (float)(0.5 * __builtin_sin(1.1 * i + 0.7 * j));
        ds->labels[i] = (i * 7) % CLS;
    }
    return ds;
}

/* Runs `steps` batches from the batcher's position, rolling over epochs. */
static void train(net *n, ge2_batcher *b, int steps)
{
    ge2_batch batch;
    for (int s = 0; s < steps; s++) {
        while (!ge2_batcher_next(b, &batch)) {
            int64_t e, k;
            ge2_batcher_position(b, &e, &k);
            API(ge2_batcher_seek(b, e + 1, 0));
        }
        ge2_feed feeds[2] = {{n->x, batch.images, ge2_shape2(batch.size, IN)},
                             {n->y, batch.labels, ge2_shape1(batch.size)}};
        API(ge2_program_step(n->program, GE2_MODE_TRAIN, feeds, 2));
    }
}

#define tmp_path tu_path

/* Cases 2 and 3 save from one update mode and load into the other: both
 * keep the state pool's layout, so the file and the resumed run are the
 * same (the straight run is flat). */
static ge2_optimizer_config resume_configs(int i, ge2_update_mode *saved, ge2_update_mode *loaded)
{
    ge2_optimizer_config c;
    *saved = *loaded = GE2_UPDATE_AUTO;
    if (i == 0 || i == 2) {
        c = ge2_optimizer_defaults(i == 0 ? GE2_OPT_ADAM : GE2_OPT_ADAMW);
        c.lr = 0.01;
        c.amsgrad = true;
        c.schedule = (ge2_schedule){GE2_SCHEDULE_COSINE, 0, 0, 3, 40, 0.001};
    } else {
        c = ge2_optimizer_defaults(GE2_OPT_SGD);
        c.lr = 0.1;
        c.momentum = 0.9;
        c.nesterov = true;
        if (i == 1) {
            c.clip_norm = 0.5;
            c.accumulation_steps = 2;
        }
    }
    if (i == 2)
        *saved = GE2_UPDATE_PER_PARAMETER, *loaded = GE2_UPDATE_FLAT;
    if (i == 3)
        *saved = GE2_UPDATE_FLAT, *loaded = GE2_UPDATE_PER_PARAMETER;
    return c;
}

/* N steps, save, load into a fresh program, M steps == N + M straight, bitwise. */
START_TEST(resume_is_exact)
{
    ge2_update_mode saved_mode, loaded_mode;
    ge2_optimizer_config cfg = resume_configs(_i, &saved_mode, &loaded_mode);
    const int N = 9, M = 8; /* N odd: with accumulation the save lands mid-update */
    ge2_dataset *ds = make_data();
    ge2_batcher_options bo = {.batch_size = 8, .shuffle = true, .seed = 1234, .drop_last = false};

    net straight;
    ge2_batcher *b;
    net_open(&straight, &cfg, HID);
    API(ge2_batcher_new(ds, &bo, &b));
    train(&straight, b, N + M);
    ge2_batcher_free(b);

    net first;
    cfg.update_mode = saved_mode;
    net_open(&first, &cfg, HID);
    ck_assert_int_eq(first.graph->per_parameter_updates, saved_mode == GE2_UPDATE_PER_PARAMETER);
    API(ge2_batcher_new(ds, &bo, &b));
    train(&first, b, N);
    ge2_resume_state rs = {0}; /* examples_in_epoch 0: the batch position alone */
    ge2_batcher_position(b, &rs.epoch, &rs.batch_in_epoch);
    rs.data_seed = bo.seed;
    const char *path = tmp_path("resume.safetensors");
    API(ge2_set_lr(first.program, cfg.lr)); /* unchanged value: exercise the host write path */
    API(ge2_checkpoint_save(first.program, path, &rs));
    ge2_batcher_free(b);
    net_close(&first);

    net second;
    cfg.update_mode = loaded_mode;
    net_open(&second, &cfg, HID);
    ck_assert_int_eq(second.graph->per_parameter_updates, loaded_mode == GE2_UPDATE_PER_PARAMETER);
    ge2_resume_state got;
    API(ge2_checkpoint_load(second.program, path, &got));
    ck_assert_int_eq(got.epoch, rs.epoch);
    ck_assert_int_eq(got.batch_in_epoch, rs.batch_in_epoch);
    ck_assert_uint_eq(got.data_seed, 1234);
    bo.seed = got.data_seed;
    API(ge2_batcher_new(ds, &bo, &b));
    API(ge2_batcher_seek(b, got.epoch, got.batch_in_epoch));
    train(&second, b, M);
    ge2_batcher_free(b);

    size_t na, nb;
    float *a = net_state(&straight, &na), *c = net_state(&second, &nb);
    ck_assert_uint_eq(na, nb);
    for (size_t i = 0; i < na; i++)
        ck_assert_msg(memcmp(&a[i], &c[i], sizeof(float)) == 0, "element %zu: straight %.9g, resumed %.9g", i, a[i],
                      c[i]);
    int64_t sa, sc;
    API(ge2_program_step_count(straight.program, &sa));
    API(ge2_program_step_count(second.program, &sc));
    ck_assert_int_eq(sa, sc);
    ck_assert_int_eq(sa, (N + M) / cfg.accumulation_steps);
    free(a);
    free(c);
    net_close(&straight);
    net_close(&second);
    ge2_dataset_free(ds);
}
END_TEST

START_TEST(saved_file_layout)
{
    ge2_optimizer_config cfg = ge2_optimizer_defaults(GE2_OPT_ADAMW);
    net n;
    net_open(&n, &cfg, HID);
    ge2_dataset *ds = make_data();
    ge2_batcher_options bo = {.batch_size = 8, .shuffle = false};
    ge2_batcher *b;
    API(ge2_batcher_new(ds, &bo, &b));
    train(&n, b, 3);
    const char *path = tmp_path("layout.safetensors");
    API(ge2_checkpoint_save(n.program, path, NULL));
    ge2_st_file f;
    API(ge2_st_read(path, UINT64_MAX, &f));
    ck_assert_int_eq(f.n_entries, 12);
    ck_assert_str_eq(ge2_st_meta(&f, "optimizer"), "adamw");
    ck_assert_str_eq(ge2_st_meta(&f, "step"), "3");
    ck_assert_str_eq(ge2_st_meta(&f, "format"), "ge2");
    const uint8_t *data;
    API(ge2_st_expect_f32(&f, path, "fc1.weight", ge2_shape2(HID, IN), &data));
    API(ge2_st_expect_f32(&f, path, "optim.fc2.bias.exp_avg_sq", ge2_shape1(CLS), &data));
    /* the parameter bytes are the program's */
    float w[HID * IN];
    API(ge2_program_get_parameter(n.program, n.params[0], w, sizeof w));
    API(ge2_st_expect_f32(&f, path, "fc1.weight", ge2_shape2(HID, IN), &data));
    ck_assert_int_eq(memcmp(data, w, sizeof w), 0);
    /* Adam's v is a running mean of squares: positive after 3 steps */
    float v[CLS];
    API(ge2_st_expect_f32(&f, path, "optim.fc2.bias.exp_avg_sq", ge2_shape1(CLS), &data));
    memcpy(v, data, sizeof v);
    for (int i = 0; i < CLS; i++)
        ck_assert(v[i] > 0);
    ge2_st_release(&f);
    ge2_batcher_free(b);
    ge2_dataset_free(ds);
    net_close(&n);
}
END_TEST

/* Writes a file of the model's parameters (as torch would), with edits. */
typedef struct edit {
    const char *skip;        /* leave this tensor out */
    const char *extra;       /* add this tensor */
    const char *reshape;     /* give this tensor shape [1, numel] */
} edit;

static const char *write_params(net *n, const char *name, edit e, const ge2_st_kv *meta, int n_meta)
{
    ge2_st_tensor t[5];
    float *bufs[5] = {0};
    int k = 0;
    for (int i = 0; i < 4; i++) {
        if (e.skip && !strcmp(e.skip, pnames[i]))
            continue;
        ge2_shape s = ge2_tensor_shape(n->params[i]);
        size_t bytes = (size_t)ge2_shape_numel(s) * sizeof(float);
        bufs[k] = malloc(bytes);
        API(ge2_program_get_parameter(n->program, n->params[i], bufs[k], bytes));
        if (e.reshape && !strcmp(e.reshape, pnames[i]))
            s = ge2_shape2(1, ge2_shape_numel(s));
        t[k] = (ge2_st_tensor){pnames[i], s, bufs[k], GE2_F32};
        k++;
    }
    static float extra[2] = {1, 2};
    if (e.extra)
        t[k++] = (ge2_st_tensor){e.extra, ge2_shape1(2), extra, GE2_F32};
    const char *path = tmp_path(name);
    API(ge2_st_write(path, t, k, meta, n_meta));
    for (int i = 0; i < 5; i++)
        free(bufs[i]);
    return path;
}

static void expect_load_error(net *n, const char *path, bool params_only, ge2_status status, const char *needle)
{
    size_t c0, c1;
    float *before = net_state(n, &c0);
    ge2_status st = params_only ? ge2_checkpoint_load_parameters(n->program, path)
                                : ge2_checkpoint_load(n->program, path, NULL);
    ck_assert_msg(st == status, "%s: got %s (%s), wanted %s", path, ge2_status_name(st), ge2_last_error(),
                  ge2_status_name(status));
    ck_assert_msg(strstr(ge2_last_error(), needle) != NULL, "message \"%s\" lacks \"%s\"", ge2_last_error(), needle);
    float *after = net_state(n, &c1);
    ck_assert_int_eq(memcmp(before, after, c0 * sizeof(float)), 0); /* a rejected file changes nothing */
    free(before);
    free(after);
}

START_TEST(parameter_files)
{
    ge2_optimizer_config cfg = ge2_optimizer_defaults(GE2_OPT_SGD);
    net src, dst;
    net_open(&src, &cfg, HID);
    net_open(&dst, &cfg, HID);
    float w0[HID * IN];
    API(ge2_program_get_parameter(dst.program, dst.params[0], w0, sizeof w0));
    /* a torch-style file: parameters only, no metadata; perturb first so src != dst */
    float w[HID * IN];
    for (int i = 0; i < HID * IN; i++)
        w[i] = (float)i / 10;
    API(ge2_program_set_parameter(src.program, src.params[0], w, sizeof w));
    const char *good = write_params(&src, "torch.safetensors", (edit){0}, NULL, 0);
    API(ge2_checkpoint_load_parameters(dst.program, good));
    float got[HID * IN];
    API(ge2_program_get_parameter(dst.program, dst.params[0], got, sizeof got));
    ck_assert_int_eq(memcmp(got, w, sizeof w), 0);
    API(ge2_program_set_parameter(dst.program, dst.params[0], w0, sizeof w0));

    expect_load_error(&dst, write_params(&src, "missing", (edit){.skip = "fc2.bias"}, NULL, 0), true, GE2_ERR_FORMAT,
                      "missing tensor fc2.bias");
    expect_load_error(&dst, write_params(&src, "extra", (edit){.extra = "fc3.weight"}, NULL, 0), true,
                      GE2_ERR_FORMAT, "tensor fc3.weight is not in the model");
    expect_load_error(&dst, write_params(&src, "shape", (edit){.reshape = "fc1.bias"}, NULL, 0), true, GE2_ERR_SHAPE,
                      "tensor fc1.bias has shape [1,6], the model has [6]");
    /* optimizer state in a full checkpoint is ignored by a parameter-only load */
    const char *full = tmp_path("full.safetensors");
    API(ge2_checkpoint_save(src.program, full, NULL));
    API(ge2_checkpoint_load_parameters(dst.program, full));
    /* a model of another width */
    net other;
    net_open(&other, &cfg, HID + 1);
    expect_load_error(&other, good, true, GE2_ERR_SHAPE, "tensor fc1.weight has shape [6,8], the model has [7,8]");
    /* a parameter-only file is not a resumable checkpoint */
    expect_load_error(&dst, good, false, GE2_ERR_FORMAT, "not a ge2 checkpoint");
    expect_load_error(&dst, tmp_path("absent.safetensors"), true, GE2_ERR_IO, "absent.safetensors");
    net_close(&other);
    net_close(&src);
    net_close(&dst);
}
END_TEST

/* The tensors of f as a write list, leaving out `skip` (NULL: none). */
static int file_tensors(const ge2_st_file *f, const char *skip, ge2_st_tensor *t)
{
    int k = 0;
    for (int i = 0; i < f->n_entries; i++) {
        const ge2_st_entry *e = &f->entries[i];
        if (skip && !strcmp(e->name, skip))
            continue;
        ge2_shape shape = {e->rank, {0}};
        for (int d = 0; d < e->rank; d++)
            shape.dim[d] = e->shape[d];
        t[k++] = (ge2_st_tensor){e->name, shape, (const float *)(f->data + e->begin), GE2_F32};
    }
    return k;
}

/* f's metadata with key's value replaced. */
static const ge2_st_kv *meta_with(const ge2_st_file *f, const char *key, const char *value, ge2_st_kv *meta)
{
    memcpy(meta, f->meta, (size_t)f->n_meta * sizeof *meta);
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(meta[i].key, key))
            snprintf(meta[i].value, sizeof meta[i].value, "%s", value);
    return meta;
}

START_TEST(full_checkpoint_mismatches)
{
    ge2_optimizer_config adam = ge2_optimizer_defaults(GE2_OPT_ADAM), sgd = ge2_optimizer_defaults(GE2_OPT_SGD);
    sgd.momentum = 0.9;
    net a, s;
    net_open(&a, &adam, HID);
    net_open(&s, &sgd, HID);
    const char *pa = tmp_path("adam.safetensors");
    API(ge2_checkpoint_save(a.program, pa, NULL));
    expect_load_error(&s, pa, false, GE2_ERR_FORMAT, "checkpoint optimizer is adam, the program's is sgd");
    /* same kind, but the state of one parameter is gone */
    ge2_st_file f;
    API(ge2_st_read(pa, UINT64_MAX, &f));
    ge2_st_tensor t[16];
    int k = file_tensors(&f, "optim.fc1.bias.exp_avg", t);
    const char *pb = tmp_path("edited.safetensors");
    API(ge2_st_write(pb, t, k, f.meta, f.n_meta));
    expect_load_error(&a, pb, false, GE2_ERR_FORMAT, "missing tensor optim.fc1.bias.exp_avg");
    /* every tensor, bad metadata values */
    ge2_st_kv meta[16];
    k = file_tensors(&f, NULL, t);
    API(ge2_st_write(pb, t, k, meta_with(&f, "micro_step", "1", meta), f.n_meta));
    expect_load_error(&a, pb, false, GE2_ERR_FORMAT, "\"micro_step\" is \"1\", expected an integer in [0, 0]");
    API(ge2_st_write(pb, t, k, meta_with(&f, "step", "12x", meta), f.n_meta));
    expect_load_error(&a, pb, false, GE2_ERR_FORMAT, "\"step\" is \"12x\"");
    /* the optimizer computes step + 1: INT64_MAX would overflow it */
    API(ge2_st_write(pb, t, k, meta_with(&f, "step", "9223372036854775807", meta), f.n_meta));
    expect_load_error(&a, pb, false, GE2_ERR_FORMAT,
                      "edited.safetensors: __metadata__ \"step\" is \"9223372036854775807\", "
                      "expected an integer in [0, 9007199254740992]");
    API(ge2_st_write(pb, t, k, meta_with(&f, "step", "9007199254740993", meta), f.n_meta));
    expect_load_error(&a, pb, false, GE2_ERR_FORMAT, "\"step\" is \"9007199254740993\"");
    API(ge2_st_write(pb, t, k, meta_with(&f, "base_lr", "nan", meta), f.n_meta));
    expect_load_error(&a, pb, false, GE2_ERR_FORMAT, "\"base_lr\" is nan");
    /* dynamic loss scaling's state: a finite float scale > 0, counts in range */
    static const char *const bad_scales[] = {"nan", "0", "-2", "1e39", "inf", "65536x", ""};
    for (size_t b = 0; b < sizeof bad_scales / sizeof bad_scales[0]; b++) {
        API(ge2_st_write(pb, t, k, meta_with(&f, "loss_scale", bad_scales[b], meta), f.n_meta));
        expect_load_error(&a, pb, false, GE2_ERR_FORMAT, "\"loss_scale\" is");
    }
    API(ge2_st_write(pb, t, k, meta_with(&f, "scale_good_steps", "-1", meta), f.n_meta));
    expect_load_error(&a, pb, false, GE2_ERR_FORMAT, "\"scale_good_steps\" is \"-1\"");
    API(ge2_st_write(pb, t, k, meta_with(&f, "skipped_steps", "1.5", meta), f.n_meta));
    expect_load_error(&a, pb, false, GE2_ERR_FORMAT, "\"skipped_steps\" is \"1.5\"");
    API(ge2_st_write(pb, t, k, meta, 0));
    expect_load_error(&a, pb, false, GE2_ERR_FORMAT, "not a ge2 checkpoint");
    ge2_st_release(&f);
    net_close(&a);
    net_close(&s);
}
END_TEST

/* Every truncation and many single-byte corruptions of a real checkpoint:
 * each load either fails cleanly (program untouched) or, where the damage
 * hits only tensor data, succeeds. Never a crash. */
START_TEST(corrupt_files)
{
    ge2_optimizer_config cfg = ge2_optimizer_defaults(GE2_OPT_ADAM);
    net n;
    net_open(&n, &cfg, HID);
    const char *path = tmp_path("c.safetensors");
    API(ge2_checkpoint_save(n.program, path, NULL));
    FILE *fp = fopen(path, "rb");
    static uint8_t buf[1 << 16];
    size_t size = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | buf[i];
    const char *bad = tmp_path("bad.safetensors");
    for (size_t cut = 0; cut < size; cut += (cut < 8 + hl ? 7 : 61)) {
        tu_write(bad, buf, cut);
        ck_assert_int_eq(ge2_checkpoint_load(n.program, bad, NULL), GE2_ERR_FORMAT);
    }
    expect_load_error(&n, bad, false, GE2_ERR_FORMAT, "bad.safetensors");
    /* header length far beyond the file */
    uint8_t saved[8];
    memcpy(saved, buf, 8);
    buf[5] = 0x10;
    tu_write(bad, buf, size);
    expect_load_error(&n, bad, false, GE2_ERR_FORMAT, "exceeds");
    memcpy(buf, saved, 8);
    for (size_t pos = 8; pos < 8 + hl; pos += 3) {
        uint8_t old = buf[pos];
        buf[pos] = (uint8_t)(old ^ 0x5a);
        tu_write(bad, buf, size);
        ge2_status st = ge2_checkpoint_load(n.program, bad, NULL);
        ck_assert_msg(st == GE2_OK || st == GE2_ERR_FORMAT || st == GE2_ERR_SHAPE, "byte %zu: %s", pos,
                      ge2_last_error());
        buf[pos] = old;
    }
    net_close(&n);
}
END_TEST

/* A tied weight's second name (ge2_checkpoint_alias: nanoGPT's
 * lm_head.weight): saved under both names with the same values; a file
 * without the alias loads; one whose alias differs is refused. */
START_TEST(aliases_save_both_names)
{
    ge2_optimizer_config cfg = ge2_optimizer_defaults(GE2_OPT_SGD);
    net src, dst;
    net_open(&src, &cfg, HID);
    net_open(&dst, &cfg, HID);
    API(ge2_checkpoint_alias(src.graph, src.params[2], "head.weight"));
    API(ge2_checkpoint_alias(dst.graph, dst.params[2], "head.weight"));
    ck_assert_int_eq(ge2_checkpoint_alias(src.graph, src.params[0], "fc2.bias"), GE2_ERR_INVALID_ARGUMENT);
    const char *path = tmp_path("alias.safetensors");
    API(ge2_checkpoint_save(src.program, path, NULL));
    ge2_st_file f;
    API(ge2_st_read(path, 1u << 20, &f));
    const ge2_st_entry *a = ge2_st_find(&f, "head.weight"), *w = ge2_st_find(&f, "fc2.weight");
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(a->end - a->begin, w->end - w->begin);
    ck_assert_int_eq(memcmp(f.data + a->begin, f.data + w->begin, (size_t)(w->end - w->begin)), 0);
    API(ge2_checkpoint_load_parameters(dst.program, path));

    /* without the alias: loads */
    ge2_st_tensor t[64];
    int n = file_tensors(&f, "head.weight", t);
    const char *without = tmp_path("without.safetensors");
    API(ge2_st_write(without, t, n, f.meta, f.n_meta));
    API(ge2_checkpoint_load_parameters(dst.program, without));
    /* an alias that differs from its parameter: refused */
    n = file_tensors(&f, NULL, t);
    static float other[CLS * HID];
    for (int k = 0; k < n; k++)
        if (!strcmp(t[k].name, "head.weight")) {
            for (int e = 0; e < CLS * HID; e++)
                other[e] = 1.5f;
            t[k].data = other;
        }
    const char *differs = tmp_path("differs.safetensors");
    API(ge2_st_write(differs, t, n, f.meta, f.n_meta));
    ck_assert_int_eq(ge2_checkpoint_load_parameters(dst.program, differs), GE2_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "head.weight differs"));
    ge2_st_release(&f);
    net_close(&src);
    net_close(&dst);
}
END_TEST

START_TEST(atomic_save)
{
    ge2_optimizer_config cfg = ge2_optimizer_defaults(GE2_OPT_ADAM);
    net n;
    net_open(&n, &cfg, HID);
    const char *path = tmp_path("keep.safetensors");
    API(ge2_checkpoint_save(n.program, path, NULL));
    struct stat before, after;
    ck_assert_int_eq(stat(path, &before), 0);
    char tmp[600];
    ck_assert(ge2_st_temp_name(path, (long)getpid(), tmp, sizeof tmp));
    ck_assert_int_eq(mkdir(tmp, 0700), 0);
    ck_assert_int_eq(ge2_checkpoint_save(n.program, path, NULL), GE2_ERR_IO);
    ck_assert_int_eq(stat(path, &after), 0);
    ck_assert_int_eq(before.st_ino, after.st_ino);
    ck_assert_int_eq(before.st_size, after.st_size);
    API(ge2_checkpoint_load(n.program, path, NULL));
    rmdir(tmp);
    ck_assert_int_eq(ge2_checkpoint_save(n.program, tmp_path("no/such/dir.safetensors"), NULL), GE2_ERR_IO);
    net_close(&n);
}
END_TEST

/* A resume state with a negative position (a struct not zeroed first) is
 * refused at save, naming the field, and nothing is written: the file
 * would be refused at load. */
START_TEST(negative_resume_state)
{
    ge2_optimizer_config cfg = ge2_optimizer_defaults(GE2_OPT_ADAM);
    net n;
    net_open(&n, &cfg, HID);
    const char *path = tmp_path("negative.safetensors");
    ge2_resume_state rs = {.epoch = 1, .batch_in_epoch = 2, .data_seed = 3, .examples_in_epoch = -5};
    ck_assert_int_eq(ge2_checkpoint_save(n.program, path, &rs), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(ge2_last_error(), "examples_in_epoch -5"), "%s", ge2_last_error());
    struct stat st;
    ck_assert_int_ne(stat(path, &st), 0);
    net_close(&n);
}
END_TEST

/* A padded parameter (ge2_parameter_padding) starts with zero padding,
 * is saved as its real rows (and so is its optimizer state), and a load
 * zeroes the padding again; a Conv1D parameter (ge2_checkpoint_conv1d) is
 * exported [in, out] when asked and loads from either layout. */
START_TEST(padding_and_conv1d)
{
    ge2_optimizer_config cfg = ge2_optimizer_defaults(GE2_OPT_ADAM);
    net src, dst;
    net_open(&src, &cfg, HID);
    net_open(&dst, &cfg, HID);
    ck_assert_int_eq(ge2_parameter_padding(src.graph, src.params[2], CLS + 1), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(ge2_parameter_padding(src.graph, src.x, 1), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(ge2_checkpoint_conv1d(src.graph, src.params[1]), GE2_ERR_INVALID_ARGUMENT); /* 1-D */
    for (int i = 0; i < 2; i++) {
        net *n = i ? &dst : &src;
        API(ge2_parameter_padding(n->graph, n->params[2], CLS - 1));
        API(ge2_checkpoint_conv1d(n->graph, n->params[0]));
        ge2_program_free(n->program); /* compiled again: the padding's zeros are an initialisation */
        ge2_compile_options opt = ge2_compile_defaults();
        API(ge2_compile(n->ctx, n->graph, &opt, &n->program));
    }
    float w2[CLS * HID], w1[HID * IN], back[HID * IN];
    API(ge2_program_get_parameter(src.program, src.params[2], w2, sizeof w2));
    for (int e = (CLS - 1) * HID; e < CLS * HID; e++)
        ck_assert_float_eq(w2[e], 0.0f);
    ck_assert_float_ne(w2[0], 0.0f);

    const char *path = tmp_path("padded.safetensors");
    API(ge2_checkpoint_save(src.program, path, NULL));
    ge2_st_file f;
    API(ge2_st_read(path, 1u << 20, &f));
    const char *const padded[2] = {"fc2.weight", "optim.fc2.weight.exp_avg"};
    for (int i = 0; i < 2; i++) {
        const ge2_st_entry *e = ge2_st_find(&f, padded[i]);
        ck_assert_ptr_nonnull(e);
        ck_assert_int_eq(e->rank, 2);
        ck_assert_int_eq(e->shape[0], CLS - 1);
        ck_assert_int_eq(e->shape[1], HID);
    }
    ge2_st_release(&f);
    for (int e = 0; e < CLS * HID; e++)
        w2[e] = 9.0f;
    API(ge2_program_set_parameter(dst.program, dst.params[2], w2, sizeof w2));
    API(ge2_checkpoint_load(dst.program, path, NULL));
    API(ge2_program_get_parameter(dst.program, dst.params[2], w2, sizeof w2));
    ck_assert_float_eq(w2[(CLS - 1) * HID], 0.0f);
    ck_assert_float_ne(w2[0], 9.0f);

    /* the export: fc1.weight [HID, IN] stored [IN, HID], its transpose */
    API(ge2_program_get_parameter(src.program, src.params[0], w1, sizeof w1));
    const char *hf = tmp_path("hf.safetensors");
    const ge2_checkpoint_entry entry = {"model.kind", "test"};
    const ge2_checkpoint_export_options export = {true, &entry, 1};
    API(ge2_checkpoint_export(src.program, hf, &export));
    API(ge2_st_read(hf, 1u << 20, &f));
    const ge2_st_entry *e = ge2_st_find(&f, "fc1.weight");
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->shape[0], IN);
    ck_assert_int_eq(e->shape[1], HID);
    for (int r = 0; r < HID; r++)
        for (int c = 0; c < IN; c++) {
            float v;
            memcpy(&v, f.data + e->begin + sizeof(float) * (size_t)(c * HID + r), sizeof v);
            ck_assert_float_eq(v, w1[r * IN + c]);
        }
    ck_assert_ptr_null(ge2_st_find(&f, "optim.fc1.weight.exp_avg"));
    ck_assert_str_eq(ge2_st_meta(&f, "format"), "pt");
    ck_assert_str_eq(ge2_st_meta(&f, "model.kind"), "test");
    ge2_st_release(&f);
    /* the caller's keys are "model." and "train." ones; the rest is ge2's */
    const ge2_checkpoint_entry run_setting = {"train.accum", "2"}, ours = {"step", "7"};
    const char *with = tmp_path("with.safetensors");
    API(ge2_checkpoint_save_with(src.program, with, NULL, &run_setting, 1));
    API(ge2_st_read(with, 1u << 20, &f));
    ck_assert_str_eq(ge2_st_meta(&f, "train.accum"), "2");
    ge2_st_release(&f);
    ck_assert_int_eq(ge2_checkpoint_save_with(src.program, with, NULL, &ours, 1), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "a key beginning with \"model.\" or \"train.\""));
    for (int i = 0; i < 2; i++) { /* either layout loads back */
        memset(back, 0, sizeof back);
        API(ge2_program_set_parameter(dst.program, dst.params[0], back, sizeof back));
        API(ge2_checkpoint_load_parameters(dst.program, i ? path : hf));
        API(ge2_program_get_parameter(dst.program, dst.params[0], back, sizeof back));
        ck_assert_int_eq(memcmp(back, w1, sizeof w1), 0);
    }
    net_close(&src);
    net_close(&dst);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("checkpoint");
    tcase_add_checked_fixture(tc, tu_tmpdir_setup, tu_tmpdir_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, resume_is_exact, 0, 4);
    tcase_add_test(tc, saved_file_layout);
    tcase_add_test(tc, parameter_files);
    tcase_add_test(tc, full_checkpoint_mismatches);
    tcase_add_test(tc, corrupt_files);
    tcase_add_test(tc, atomic_save);
    tcase_add_test(tc, negative_resume_state);
    tcase_add_test(tc, aliases_save_both_names);
    tcase_add_test(tc, padding_and_conv1d);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
