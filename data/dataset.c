/* Data sets from IDX files, and the deterministic batcher. */
#include "data/dataset.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "data/idx.h"
#include "graph/alloc.h"
#include "graph/epoch_order.h"
#include "graph/error.h"

ge2_status ge2_dataset_new(int64_t n, int64_t features, int n_classes, ge2_dataset **out)
{
    if (!out || n <= 0 || features <= 0 || n_classes <= 0)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_dataset_new: n=%lld features=%lld n_classes=%d must be > 0",
                         (long long)n, (long long)features, n_classes);
    *out = NULL;
    if (n > INT64_MAX / features || (uint64_t)(n * features) > SIZE_MAX / sizeof(float))
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_dataset_new: %lld x %lld values do not fit", (long long)n,
                         (long long)features);
    ge2_dataset *ds = ge2_calloc(1, sizeof *ds);
    if (!ds)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_dataset_new: out of memory");
    ds->n = n;
    ds->features = features;
    ds->n_classes = n_classes;
    ds->images = ge2_calloc((size_t)(n * features), sizeof(float));
    ds->labels = ge2_calloc((size_t)n, sizeof(int32_t));
    if (!ds->images || !ds->labels) {
        ge2_dataset_free(ds);
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_dataset_new: cannot allocate %lld examples", (long long)n);
    }
    *out = ds;
    return GE2_OK;
}

void ge2_dataset_free(ge2_dataset *ds)
{
    if (!ds)
        return;
    ge2_free(ds->images);
    ge2_free(ds->labels);
    ge2_free(ds->pixels);
    ge2_free(ds);
}

static ge2_status dataset_fill(const char *images_path, const char *labels_path, int n_classes,
                               const ge2_idx *images, const ge2_idx *labels, ge2_dataset **out)
{
    if (images->ndim != 2 && images->ndim != 3)
        return ge2_error(GE2_ERR_FORMAT, "%s: images must have 2 or 3 dims ([n, features] or [n, rows, cols]), got %d",
                         images_path, images->ndim);
    if (labels->ndim != 1)
        return ge2_error(GE2_ERR_FORMAT, "%s: labels must have 1 dim, got %d", labels_path, labels->ndim);
    if (images->dim[0] != labels->dim[0])
        return ge2_error(GE2_ERR_FORMAT, "%s has %lld images but %s has %lld labels", images_path,
                         (long long)images->dim[0], labels_path, (long long)labels->dim[0]);
    if (images->dim[0] == 0)
        return ge2_error(GE2_ERR_FORMAT, "%s: no images", images_path);
    int64_t n = images->dim[0], features = images->numel / n;
    for (int64_t i = 0; i < n; i++)
        if (labels->data[i] >= n_classes)
            return ge2_error(GE2_ERR_FORMAT, "%s: label %d of example %lld is outside [0, %d)", labels_path,
                             labels->data[i], (long long)i, n_classes);
    ge2_dataset *ds;
    GE2_TRY(ge2_dataset_new(n, features, n_classes, &ds));
    ds->pixels = ge2_malloc((size_t)(n * features));
    if (!ds->pixels) {
        ge2_dataset_free(ds);
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "%s: %lld images' bytes", images_path, (long long)n);
    }
    memcpy(ds->pixels, images->data, (size_t)(n * features));
    for (int64_t i = 0; i < n * features; i++)
        ds->images[i] = (float)images->data[i] / GE2_PIXEL_DIVISOR;
    for (int64_t i = 0; i < n; i++)
        ds->labels[i] = labels->data[i];
    if (images->ndim == 3) {
        ds->rows = images->dim[1];
        ds->cols = images->dim[2];
    }
    snprintf(ds->source, sizeof ds->source, "%s", images_path);
    *out = ds;
    return GE2_OK;
}

ge2_status ge2_dataset_load_idx(const char *images_path, const char *labels_path, int n_classes,
                                ge2_dataset **out)
{
    if (!images_path || !labels_path || !out || n_classes <= 0)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_dataset_load_idx: paths, out and n_classes > 0 are required");
    *out = NULL;
    ge2_idx images, labels;
    GE2_TRY(ge2_idx_load(images_path, &images));
    ge2_status st = ge2_idx_load(labels_path, &labels);
    if (st == GE2_OK) {
        st = dataset_fill(images_path, labels_path, n_classes, &images, &labels, out);
        ge2_idx_release(&labels);
    }
    ge2_idx_release(&images);
    return st;
}

/* "<dir>/<base>.gz" if present, else "<dir>/<base>". */
static ge2_status dataset_find(const char *dir, const char *base, char *path, size_t size)
{
    struct stat st;
    const char *suffix[2] = {".gz", ""};
    for (int i = 0; i < 2; i++) {
        int len = snprintf(path, size, "%s/%s%s", dir, base, suffix[i]);
        if (len < 0 || (size_t)len >= size)
            return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: data directory path too long", dir);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
            return GE2_OK;
    }
    return ge2_error(GE2_ERR_IO, "%s: no %s or %s.gz in the data directory", dir, base, base);
}

ge2_status ge2_dataset_load_fashion_mnist(const char *dir, ge2_split split, ge2_dataset **out)
{
    if (!dir || !out || split < 0 || split >= GE2_SPLIT_COUNT)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_dataset_load_fashion_mnist: dir, out and a split are required");
    *out = NULL;
    struct stat st;
    if (stat(dir, &st) != 0)
        return ge2_error(GE2_ERR_IO, "%s: data directory: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return ge2_error(GE2_ERR_IO, "%s: data directory: not a directory", dir);
    const char *prefix = split == GE2_SPLIT_TRAIN ? "train" : "t10k";
    char base[64], images[4096], labels[4096];
    snprintf(base, sizeof base, "%s-images-idx3-ubyte", prefix);
    GE2_TRY(dataset_find(dir, base, images, sizeof images));
    snprintf(base, sizeof base, "%s-labels-idx1-ubyte", prefix);
    GE2_TRY(dataset_find(dir, base, labels, sizeof labels));
    GE2_TRY(ge2_dataset_load_idx(images, labels, 10, out));
    ge2_status fits = ge2_dataset_expect(*out, "Fashion-MNIST", 28 * 28, 28, 28);
    if (fits != GE2_OK) {
        ge2_dataset_free(*out);
        *out = NULL;
    }
    return fits;
}

/* "28x28 images (784 values each)" or "300 values each" */
static void shape_words(int64_t features, int64_t rows, int64_t cols, char *buf, size_t size)
{
    if (rows > 0)
        snprintf(buf, size, "%lldx%lld images (%lld values each)", (long long)rows, (long long)cols,
                 (long long)features);
    else
        snprintf(buf, size, "%lld values each", (long long)features);
}

ge2_status ge2_dataset_expect(const ge2_dataset *ds, const char *model, int64_t features, int64_t rows, int64_t cols)
{
    if (ds->features == features && (rows <= 0 || ds->rows <= 0 || (ds->rows == rows && ds->cols == cols)))
        return GE2_OK;
    char have[64], want[64];
    shape_words(ds->features, ds->rows, ds->cols, have, sizeof have);
    shape_words(features, rows, cols, want, sizeof want);
    return ge2_error(GE2_ERR_FORMAT, "%s: %s; %s takes %s", ds->source[0] ? ds->source : "the data set", have, model,
                     want);
}

/* ---------------------------------------------------------------- batcher */

struct ge2_batcher {
    const ge2_dataset *ds;
    ge2_batcher_options opt;
    int64_t epoch, next; /* next batch index in the epoch */
    int64_t n_local;     /* examples in this rank's shard */
    ge2_epoch_order order; /* the epoch's (graph/epoch_order.h) */
    float *images;       /* [batch, features] gathered batch (shuffle mode) */
    int32_t *labels;     /* [batch] */
};

static void batcher_build_order(ge2_batcher *b)
{
    b->order = ge2_epoch_order_of(b->opt.seed, (uint64_t)b->epoch, (uint64_t)b->ds->n);
}

static int batcher_world(const ge2_batcher_options *o) { return o->world > 1 ? o->world : 1; }

/* A rank's examples per epoch: the epoch padded to a multiple of the ranks
 * (or cut, with drop_last), divided among them */
static int64_t shard_size(int64_t n, const ge2_batcher_options *o)
{
    const int world = batcher_world(o);
    return o->drop_last ? n / world : (n + world - 1) / world;
}

ge2_status ge2_batcher_new(const ge2_dataset *ds, const ge2_batcher_options *options, ge2_batcher **out)
{
    if (!ds || !options || !out)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_batcher_new: data set, options and out are required");
    *out = NULL;
    const int world = batcher_world(options);
    if (world > 64 || options->rank < 0 || (world > 1 && options->rank >= world) || world > ds->n)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_batcher_new: rank %d of world %d (1 to 64 ranks, at most the "
                         "data set's %lld examples)",
                         options->rank, options->world, (long long)ds->n);
    const int64_t n_local = shard_size(ds->n, options);
    if (options->batch_size <= 0 || options->batch_size > n_local)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_batcher_new: batch_size %lld must be in [1, %lld]",
                         (long long)options->batch_size, (long long)n_local);
    ge2_batcher *b = ge2_calloc(1, sizeof *b);
    if (!b)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_batcher_new: out of memory");
    b->ds = ds;
    b->opt = *options;
    b->n_local = n_local;
    b->images = ge2_malloc((size_t)(options->batch_size * ds->features) * sizeof(float));
    b->labels = ge2_malloc((size_t)options->batch_size * sizeof(int32_t));
    if (!b->images || !b->labels) {
        ge2_batcher_free(b);
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_batcher_new: out of memory");
    }
    batcher_build_order(b);
    *out = b;
    return GE2_OK;
}

void ge2_batcher_free(ge2_batcher *b)
{
    if (!b)
        return;
    ge2_free(b->images);
    ge2_free(b->labels);
    ge2_free(b);
}

int64_t ge2_batcher_shard_size(const ge2_batcher *b) { return b->n_local; }

static int64_t batches_of(int64_t n_local, const ge2_batcher_options *o)
{
    int64_t bs = o->batch_size;
    return o->drop_last ? n_local / bs : (n_local + bs - 1) / bs;
}

int64_t ge2_batcher_batches_per_epoch(const ge2_batcher *b) { return batches_of(b->n_local, &b->opt); }

int64_t ge2_batcher_epoch_batches(int64_t n, const ge2_batcher_options *options)
{
    return options->batch_size > 0 ? batches_of(shard_size(n, options), options) : 0;
}

ge2_status ge2_batcher_seek(ge2_batcher *b, int64_t epoch, int64_t batch_in_epoch)
{
    if (!b || epoch < 0 || batch_in_epoch < 0 || batch_in_epoch > ge2_batcher_batches_per_epoch(b))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_batcher_seek: position (epoch %lld, batch %lld) out of range",
                         (long long)epoch, (long long)batch_in_epoch);
    if (epoch != b->epoch) {
        b->epoch = epoch;
        batcher_build_order(b);
    }
    b->next = batch_in_epoch;
    return GE2_OK;
}

int64_t ge2_batcher_next_size(const ge2_batcher *b)
{
    if (b->next >= ge2_batcher_batches_per_epoch(b))
        return 0;
    int64_t start = b->next * b->opt.batch_size, n = b->n_local;
    return n - start < b->opt.batch_size ? n - start : b->opt.batch_size;
}

/* Takes the next batch's place in the epoch (out's size, epoch, index; its
 * first position in the order at *start); false once the epoch is exhausted. */
static bool batcher_take(ge2_batcher *b, ge2_batch *out, int64_t *start)
{
    out->size = ge2_batcher_next_size(b);
    if (out->size == 0)
        return false;
    *start = b->next * b->opt.batch_size;
    out->epoch = b->epoch;
    out->index = b->next++;
    return true;
}

/* The examples at this rank's positions [start, start + size) into images and labels. */
static void batcher_gather(const ge2_batcher *b, int64_t start, int64_t size, float *images, int32_t *labels)
{
    const ge2_dataset *ds = b->ds;
    size_t row = (size_t)ds->features * sizeof(float);
    if (!b->opt.shuffle && b->opt.world <= 1) {
        memcpy(images, ds->images + start * ds->features, (size_t)size * row);
        memcpy(labels, ds->labels + start, (size_t)size * sizeof(int32_t));
        return;
    }
    for (int64_t i = 0; i < size; i++) {
        const int64_t e = ge2_batcher_example(b, start + i);
        memcpy(images + i * ds->features, ds->images + e * ds->features, row);
        labels[i] = ds->labels[e];
    }
}

bool ge2_batcher_next(ge2_batcher *b, ge2_batch *out)
{
    int64_t start;
    if (!batcher_take(b, out, &start))
        return false;
    if (!b->opt.shuffle && b->opt.world <= 1) {
        out->images = b->ds->images + start * b->ds->features;
        out->labels = b->ds->labels + start;
        return true;
    }
    batcher_gather(b, start, out->size, b->images, b->labels);
    out->images = b->images;
    out->labels = b->labels;
    return true;
}

bool ge2_batcher_next_into(ge2_batcher *b, float *images, int32_t *labels, ge2_batch *out)
{
    int64_t start;
    if (!batcher_take(b, out, &start))
        return false;
    batcher_gather(b, start, out->size, images, labels);
    out->images = images;
    out->labels = labels;
    return true;
}

void ge2_batcher_position(const ge2_batcher *b, int64_t *epoch, int64_t *batch_in_epoch)
{
    *epoch = b->epoch;
    *batch_in_epoch = b->next;
}

int64_t ge2_batcher_example(const ge2_batcher *b, int64_t i)
{
    if (i < 0 || i >= b->n_local)
        return -1;
    const int world = batcher_world(&b->opt);
    return (int64_t)ge2_epoch_shard_at(&b->order, b->opt.shuffle, world > 1 ? b->opt.rank : 0, world, (uint64_t)i);
}
