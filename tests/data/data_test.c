/* IDX reading, data-set loading and the batcher.
 *
 * Every file is written by the test itself, byte by byte, so the expected
 * values and the expected failure are known independently of the reader. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "data/dataset.h"
#include "data/idx.h"
#include "graph/epoch_order.h"
#include "tests/data/testutil.h"

#define tmp_path tu_path

/* Writes an IDX file: header for type/dims, then `data_bytes` bytes of data
 * (value i -> (i * 7 + 3) mod 256), so sizes can disagree with the header. */
static const char *write_idx(const char *name, const uint8_t magic[4], const uint32_t *dims, int ndim,
                             size_t data_bytes, bool gz)
{
    const char *path = tmp_path(name);
    uint8_t header[4 + 4 * 8];
    memcpy(header, magic, 4);
    for (int i = 0; i < ndim; i++) {
        header[4 + 4 * i] = (uint8_t)(dims[i] >> 24);
        header[5 + 4 * i] = (uint8_t)(dims[i] >> 16);
        header[6 + 4 * i] = (uint8_t)(dims[i] >> 8);
        header[7 + 4 * i] = (uint8_t)dims[i];
    }
    uint8_t *data = malloc(data_bytes + 1);
    for (size_t i = 0; i < data_bytes; i++)
        data[i] = (uint8_t)((i * 7 + 3) % 256);
    if (gz) {
        gzFile f = gzopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(gzwrite(f, header, 4 + 4 * ndim), 4 + 4 * ndim);
        if (data_bytes)
            ck_assert_int_eq(gzwrite(f, data, (unsigned)data_bytes), (int)data_bytes);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        fwrite(header, 1, 4 + 4 * ndim, f);
        fwrite(data, 1, data_bytes, f);
        fclose(f);
    }
    free(data);
    return path;
}

static const uint8_t MAGIC_U8_1[4] = {0, 0, 8, 1};
static const uint8_t MAGIC_U8_3[4] = {0, 0, 8, 3};

static void check_load_ok(bool gz)
{
    uint32_t dims[3] = {5, 3, 4};
    const char *path = write_idx(gz ? "img.gz" : "img", MAGIC_U8_3, dims, 3, 60, gz);
    ge2_idx idx;
    ck_assert_int_eq(ge2_idx_load(path, &idx), GE2_OK);
    ck_assert_int_eq(idx.ndim, 3);
    ck_assert_int_eq(idx.dim[0], 5);
    ck_assert_int_eq(idx.dim[1], 3);
    ck_assert_int_eq(idx.dim[2], 4);
    ck_assert_int_eq(idx.numel, 60);
    for (int i = 0; i < 60; i++)
        ck_assert_int_eq(idx.data[i], (i * 7 + 3) % 256);
    ge2_idx_release(&idx);
}

START_TEST(idx_plain) { check_load_ok(false); }
END_TEST

START_TEST(idx_gz) { check_load_ok(true); }
END_TEST

/* Loads a file expected to fail and checks the message names it and says why. */
static void expect_error(const char *path, ge2_status status, const char *needle)
{
    ge2_idx idx;
    ck_assert_int_eq(ge2_idx_load(path, &idx), status);
    ck_assert_ptr_null(idx.data);
    const char *msg = ge2_last_error();
    ck_assert_msg(strstr(msg, needle) != NULL, "message \"%s\" lacks \"%s\"", msg, needle);
    ck_assert_msg(strstr(msg, path) != NULL, "message \"%s\" does not name %s", msg, path);
}

START_TEST(idx_bad_magic)
{
    const uint8_t magic[4] = {0x1f, 0, 8, 1};
    uint32_t dims[1] = {4};
    expect_error(write_idx("bad", magic, dims, 1, 4, false), GE2_ERR_FORMAT, "bad magic");
}
END_TEST

START_TEST(idx_bad_type)
{
    const uint8_t magic[4] = {0, 0, 0x0d, 1}; /* f32 */
    uint32_t dims[1] = {4};
    expect_error(write_idx("f32", magic, dims, 1, 16, true), GE2_ERR_FORMAT, "only u8");
}
END_TEST

START_TEST(idx_bad_ndim)
{
    const uint8_t magic[4] = {0, 0, 8, 5};
    uint32_t dims[5] = {1, 1, 1, 1, 1};
    expect_error(write_idx("five", magic, dims, 5, 1, false), GE2_ERR_FORMAT, "5 dims");
    const uint8_t magic0[4] = {0, 0, 8, 0};
    expect_error(write_idx("zero", magic0, dims, 0, 1, false), GE2_ERR_FORMAT, "0 dims");
}
END_TEST

START_TEST(idx_truncated)
{
    uint32_t dims[3] = {100, 28, 28};
    expect_error(write_idx("t.gz", MAGIC_U8_3, dims, 3, 1200, true), GE2_ERR_FORMAT,
                 "truncated: header says 78400 bytes of pixels, file has 1200");
    expect_error(write_idx("t", MAGIC_U8_3, dims, 3, 1200, false), GE2_ERR_FORMAT,
                 "truncated: header says 78400 bytes of pixels, file has 1200");
    /* the header itself cut short */
    expect_error(write_idx("h", MAGIC_U8_3, dims, 1, 0, false), GE2_ERR_FORMAT, "truncated: header of 3 dims");
}
END_TEST

START_TEST(idx_huge_claim_small_file)
{
    uint32_t dims[3] = {0xffffffffu, 0xffffffffu, 16};
    expect_error(write_idx("huge", MAGIC_U8_3, dims, 3, 10, true), GE2_ERR_FORMAT, "overflow");
    uint32_t dims2[2] = {0x7fffffffu, 2};
    const uint8_t magic[4] = {0, 0, 8, 2};
    /* 4 GB announced, 10 bytes present: reported as truncated, not an allocation of 4 GB */
    expect_error(write_idx("big", magic, dims2, 2, 10, false), GE2_ERR_FORMAT, "file has 10");
}
END_TEST

START_TEST(idx_trailing)
{
    uint32_t dims[1] = {10};
    expect_error(write_idx("tr", MAGIC_U8_1, dims, 1, 11, false), GE2_ERR_FORMAT, "trailing bytes");
    expect_error(write_idx("tr.gz", MAGIC_U8_1, dims, 1, 11, true), GE2_ERR_FORMAT, "trailing bytes");
}
END_TEST

START_TEST(idx_zero_dim)
{
    uint32_t dims[3] = {4, 0, 28};
    expect_error(write_idx("z", MAGIC_U8_3, dims, 3, 0, false), GE2_ERR_FORMAT, "dim 1 is 0");
}
END_TEST

START_TEST(idx_missing)
{
    expect_error(tmp_path("does-not-exist"), GE2_ERR_IO, "cannot open");
}
END_TEST

START_TEST(idx_corrupt_gzip)
{
    uint32_t dims[1] = {1000};
    const char *path = write_idx("c.gz", MAGIC_U8_1, dims, 1, 1000, true);
    FILE *f = fopen(path, "r+b");
    fseek(f, 20, SEEK_SET);
    uint8_t junk[16];
    memset(junk, 0xa5, sizeof junk);
    fwrite(junk, 1, sizeof junk, f);
    fclose(f);
    ge2_idx idx;
    ck_assert_int_ne(ge2_idx_load(path, &idx), GE2_OK);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), path));
}
END_TEST

/* ------------------------------------------------------------- data sets */

START_TEST(dataset_load)
{
    uint32_t idims[3] = {6, 2, 2};
    const char *images = write_idx("train-images-idx3-ubyte.gz", MAGIC_U8_3, idims, 3, 24, true);
    /* write_idx's values (i*7+3) % 256 = 3, 10, ... exceed 10 classes: labels by hand */
    const char *lpath = tmp_path("train-labels-idx1-ubyte");
    const uint8_t lab[4 + 4 + 6] = {0, 0, 8, 1, 0, 0, 0, 6, 9, 0, 3, 3, 1, 7};
    tu_write(lpath, lab, sizeof lab);
    ge2_dataset *ds;
    ck_assert_int_eq(ge2_dataset_load_idx(images, lpath, 10, &ds), GE2_OK);
    ck_assert_int_eq(ds->n, 6);
    ck_assert_int_eq(ds->features, 4);
    for (int i = 0; i < 24; i++)
        ck_assert_float_eq_tol(ds->images[i], ((i * 7 + 3) % 256) / 255.0, 1e-7);
    ck_assert_int_eq(ds->labels[0], 9);
    ck_assert_int_eq(ds->labels[5], 7);
    ge2_dataset_free(ds);

    /* the directory form finds the .gz images and the plain labels, and
     * refuses images that are not Fashion-MNIST's 28x28, naming the file:
     * the trainers' feeds hold 784 values an example (a 200x200 set
     * overflowed them) */
    ds = (ge2_dataset *)1;
    ck_assert_int_eq(ge2_dataset_load_fashion_mnist(tu_tmpdir(), GE2_SPLIT_TRAIN, &ds), GE2_ERR_FORMAT);
    ck_assert_ptr_null(ds);
    ck_assert_msg(strstr(ge2_last_error(), images) && strstr(ge2_last_error(), "2x2 images") &&
                      strstr(ge2_last_error(), "28x28"),
                  "%s", ge2_last_error());
    uint32_t fdims[3] = {6, 28, 28};
    write_idx("train-images-idx3-ubyte.gz", MAGIC_U8_3, fdims, 3, 6 * 784, true);
    ck_assert_int_eq(ge2_dataset_load_fashion_mnist(tu_tmpdir(), GE2_SPLIT_TRAIN, &ds), GE2_OK);
    ck_assert_int_eq(ds->n, 6);
    ck_assert_int_eq(ds->features, 784);
    ck_assert_int_eq(ds->rows, 28);
    ck_assert_int_eq(ge2_dataset_expect(ds, "a model", 784, 28, 28), GE2_OK);
    ck_assert_int_eq(ge2_dataset_expect(ds, "the 29-column model", 812, 28, 29), GE2_ERR_FORMAT);
    ck_assert_msg(strstr(ge2_last_error(), "28x28 images (784 values each); the 29-column model takes 28x29 images"),
                  "%s", ge2_last_error());
    ge2_dataset_free(ds);
    ck_assert_int_eq(ge2_dataset_load_fashion_mnist(tu_tmpdir(), GE2_SPLIT_TEST, &ds), GE2_ERR_IO);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "t10k-images-idx3-ubyte"));
    ck_assert_int_eq(ge2_dataset_load_fashion_mnist(tmp_path("nodir"), GE2_SPLIT_TRAIN, &ds), GE2_ERR_IO);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "nodir"));
}
END_TEST

START_TEST(dataset_count_mismatch)
{
    uint32_t idims[3] = {6, 2, 2};
    const char *images = write_idx("im", MAGIC_U8_3, idims, 3, 24, false);
    const char *labels = tmp_path("lb");
    const uint8_t lab[4 + 4 + 5] = {0, 0, 8, 1, 0, 0, 0, 5, 1, 2, 3, 4, 5};
    tu_write(labels, lab, sizeof lab);
    ge2_dataset *ds = (ge2_dataset *)1;
    ck_assert_int_eq(ge2_dataset_load_idx(images, labels, 10, &ds), GE2_ERR_FORMAT);
    ck_assert_ptr_null(ds);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "has 6 images but"));
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "has 5 labels"));
}
END_TEST

START_TEST(dataset_label_range)
{
    uint32_t idims[2] = {2, 3};
    const char *images = write_idx("im2", (const uint8_t[4]){0, 0, 8, 2}, idims, 2, 6, false);
    const char *labels = tmp_path("lb2");
    const uint8_t lab[10] = {0, 0, 8, 1, 0, 0, 0, 2, 1, 10};
    tu_write(labels, lab, sizeof lab);
    ge2_dataset *ds;
    ck_assert_int_eq(ge2_dataset_load_idx(images, labels, 10, &ds), GE2_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "label 10 of example 1"));
}
END_TEST

/* --------------------------------------------------------------- batcher */

static ge2_dataset *counting_dataset(int64_t n)
{
    ge2_dataset *ds;
    ck_assert_int_eq(ge2_dataset_new(n, 2, 10, &ds), GE2_OK);
    for (int64_t i = 0; i < n; i++) {
        ds->images[2 * i] = (float)i;
        ds->images[2 * i + 1] = (float)-i;
        ds->labels[i] = (int32_t)(i % 10);
    }
    return ds;
}

/* Collects the example ids of one epoch, checking each batch's contents. */
static int64_t collect_epoch(ge2_batcher *b, const ge2_dataset *ds, int64_t *ids, int64_t *n_batches)
{
    ge2_batch batch;
    int64_t count = 0;
    *n_batches = 0;
    while (ge2_batcher_next(b, &batch)) {
        ck_assert_int_eq(batch.index, *n_batches);
        for (int64_t i = 0; i < batch.size; i++) {
            int64_t id = (int64_t)batch.images[2 * i];
            ck_assert_float_eq(batch.images[2 * i + 1], (float)-id);
            ck_assert_int_eq(batch.labels[i], ds->labels[id]);
            ids[count++] = id;
        }
        (*n_batches)++;
    }
    return count;
}

START_TEST(batcher_permutation_and_determinism)
{
    const int64_t n = 103;
    ge2_dataset *ds = counting_dataset(n);
    ge2_batcher_options opt = {.batch_size = 10, .shuffle = true, .seed = 42, .drop_last = false};
    ge2_batcher *a, *b;
    ck_assert_int_eq(ge2_batcher_new(ds, &opt, &a), GE2_OK);
    ck_assert_int_eq(ge2_batcher_new(ds, &opt, &b), GE2_OK);
    ck_assert_int_eq(ge2_batcher_batches_per_epoch(a), 11);
    int64_t ids[3][103], again[103], nb;
    for (int e = 0; e < 3; e++) {
        ck_assert_int_eq(ge2_batcher_seek(a, e, 0), GE2_OK);
        ck_assert_int_eq(collect_epoch(a, ds, ids[e], &nb), n);
        ck_assert_int_eq(nb, 11);
        bool seen[103] = {false};
        for (int64_t i = 0; i < n; i++) {
            ck_assert(ids[e][i] >= 0 && ids[e][i] < n);
            ck_assert_msg(!seen[ids[e][i]], "epoch %d repeats example %lld", e, (long long)ids[e][i]);
            seen[ids[e][i]] = true;
        }
    }
    ck_assert_msg(memcmp(ids[0], ids[1], sizeof ids[0]) != 0, "epochs 0 and 1 have the same order");
    int64_t in_place = 0;
    for (int64_t i = 0; i < n; i++)
        in_place += ids[0][i] == i;
    ck_assert_msg(in_place < n / 4, "shuffle left %lld of %lld in place", (long long)in_place, (long long)n);
    /* a second batcher jumping straight to epoch 2 sees the same order */
    ck_assert_int_eq(ge2_batcher_seek(b, 2, 0), GE2_OK);
    collect_epoch(b, ds, again, &nb);
    ck_assert_mem_eq(again, ids[2], sizeof again);
    /* resuming mid-epoch: batch 4 of epoch 1 onwards */
    ck_assert_int_eq(ge2_batcher_seek(b, 1, 4), GE2_OK);
    ge2_batch batch;
    ck_assert(ge2_batcher_next(b, &batch));
    ck_assert_int_eq(batch.index, 4);
    ck_assert_int_eq(batch.epoch, 1);
    ck_assert_int_eq((int64_t)batch.images[0], ids[1][40]);
    /* another seed, another order */
    ge2_batcher *c;
    opt.seed = 43;
    ck_assert_int_eq(ge2_batcher_new(ds, &opt, &c), GE2_OK);
    collect_epoch(c, ds, again, &nb);
    ck_assert_msg(memcmp(again, ids[0], sizeof again) != 0, "seeds 42 and 43 give the same order");
    ge2_batcher_free(a);
    ge2_batcher_free(b);
    ge2_batcher_free(c);
    ge2_dataset_free(ds);
}
END_TEST

/* The documented definition (graph/epoch_order.h) written out afresh: the
 * Feistel network applied to the whole domain [0, 4^h) at once, then each
 * position followed along that permutation until it lands below n. */
static void reference_order(uint64_t seed, uint64_t epoch, uint64_t n, uint64_t *out)
{
    int h = 1;
    while ((1ull << (2 * h)) < n)
        h++;
    const uint64_t domain = 1ull << (2 * h), mask = (1ull << h) - 1;
    ge2_philox4 counter = {{(uint32_t)epoch, (uint32_t)(epoch >> 32), 0x6f726472u, 0u}};
    const ge2_philox4 keys = ge2_philox4x32_10(counter, (uint32_t)seed, (uint32_t)(seed >> 32));
    uint64_t *perm = malloc(domain * sizeof *perm);
    ck_assert_ptr_nonnull(perm);
    for (uint64_t x = 0; x < domain; x++) {
        uint64_t half[2] = {x >> h, x & mask};
        for (int r = 0; r < 4; r++) {
            const uint64_t mixed = half[0] ^ (ge2_mix64(half[1] ^ keys.v[r]) & mask);
            half[0] = half[1];
            half[1] = mixed;
        }
        perm[x] = half[0] << h | half[1];
    }
    for (uint64_t p = 0; p < n; p++) {
        uint64_t x = perm[p];
        while (x >= n)
            x = perm[x];
        out[p] = x;
    }
    free(perm);
}

/* The epoch order is its definition's, a permutation for every n, another
 * one per epoch and per seed, and spread: over many epochs every example
 * stands first about equally often. */
START_TEST(epoch_order_follows_its_definition)
{
    static const uint64_t sizes[] = {1, 2, 3, 4, 5, 17, 64, 1000, 4097, 60000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const uint64_t n = sizes[k];
        uint64_t *want = malloc(n * sizeof *want);
        bool *seen = calloc(n, sizeof *seen);
        ck_assert(want && seen);
        for (uint64_t epoch = 0; epoch < 3; epoch++) {
            reference_order(42, epoch, n, want);
            const ge2_epoch_order o = ge2_epoch_order_of(42, epoch, n);
            memset(seen, 0, n * sizeof *seen);
            for (uint64_t p = 0; p < n; p++) {
                const uint64_t e = ge2_epoch_order_at(&o, p);
                ck_assert_msg(e == want[p], "n %llu epoch %llu: position %llu holds %llu, the definition says %llu",
                              (unsigned long long)n, (unsigned long long)epoch, (unsigned long long)p,
                              (unsigned long long)e, (unsigned long long)want[p]);
                ck_assert_msg(!seen[e], "n %llu: example %llu twice", (unsigned long long)n, (unsigned long long)e);
                seen[e] = true;
            }
        }
        free(want);
        free(seen);
    }
    /* another epoch or seed, another order */
    const ge2_epoch_order a = ge2_epoch_order_of(42, 0, 1000), b = ge2_epoch_order_of(42, 1, 1000),
                          c = ge2_epoch_order_of(43, 0, 1000);
    int same_epoch = 0, same_seed = 0;
    for (uint64_t p = 0; p < 1000; p++) {
        same_epoch += ge2_epoch_order_at(&a, p) == ge2_epoch_order_at(&b, p);
        same_seed += ge2_epoch_order_at(&a, p) == ge2_epoch_order_at(&c, p);
    }
    ck_assert_int_lt(same_epoch, 20);
    ck_assert_int_lt(same_seed, 20);
    /* 10 examples, 20000 epochs: each first 2000 times, chi-square over 9
     * degrees of freedom below 27.9 (p = 0.001) */
    int first[10] = {0};
    for (uint64_t epoch = 0; epoch < 20000; epoch++) {
        const ge2_epoch_order o = ge2_epoch_order_of(7, epoch, 10);
        first[ge2_epoch_order_at(&o, 0)]++;
    }
    double chi2 = 0;
    for (int e = 0; e < 10; e++)
        chi2 += (first[e] - 2000.0) * (first[e] - 2000.0) / 2000.0;
    ck_assert_msg(chi2 < 27.9, "the first example is not uniform: chi-square %.1f", chi2);
    /* past 2^32 examples the halves are 17 bits and more: still in range */
    const uint64_t big = (1ull << 40) + 3;
    const ge2_epoch_order o = ge2_epoch_order_of(1, 2, big);
    for (uint64_t p = big - 5; p < big; p++)
        ck_assert_uint_lt(ge2_epoch_order_at(&o, p), big);
}
END_TEST

START_TEST(batcher_no_shuffle_and_last_batch)
{
    ge2_dataset *ds = counting_dataset(25);
    ge2_batcher_options opt = {.batch_size = 10, .shuffle = false, .seed = 1, .drop_last = false};
    ge2_batcher *b;
    ck_assert_int_eq(ge2_batcher_new(ds, &opt, &b), GE2_OK);
    int64_t ids[25], nb;
    ck_assert_int_eq(collect_epoch(b, ds, ids, &nb), 25);
    ck_assert_int_eq(nb, 3);
    for (int i = 0; i < 25; i++)
        ck_assert_int_eq(ids[i], i);
    ge2_batcher_free(b);

    opt.drop_last = true;
    ck_assert_int_eq(ge2_batcher_new(ds, &opt, &b), GE2_OK);
    ck_assert_int_eq(collect_epoch(b, ds, ids, &nb), 20);
    ck_assert_int_eq(nb, 2);
    ge2_batcher_free(b);

    opt.batch_size = 26;
    ck_assert_int_eq(ge2_batcher_new(ds, &opt, &b), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "batch_size 26"));
    ge2_dataset_free(ds);
}
END_TEST

/* next_into writes the very batch next returns into the caller's buffers,
 * shuffled or not, the partial last batch included; next_size says each
 * batch's size beforehand and 0 at the end of the epoch. */
START_TEST(batcher_next_into_matches_next)
{
    ge2_dataset *ds = counting_dataset(25);
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        ge2_batcher_options opt = {.batch_size = 10, .shuffle = shuffle, .seed = 7, .drop_last = false};
        ge2_batcher *a, *b;
        ck_assert_int_eq(ge2_batcher_new(ds, &opt, &a), GE2_OK);
        ck_assert_int_eq(ge2_batcher_new(ds, &opt, &b), GE2_OK);
        for (int64_t epoch = 0; epoch < 2; epoch++) {
            ck_assert_int_eq(ge2_batcher_seek(a, epoch, 0), GE2_OK);
            ck_assert_int_eq(ge2_batcher_seek(b, epoch, 0), GE2_OK);
            int64_t sizes[3] = {10, 10, 5};
            for (int k = 0; k < 3; k++) {
                float images[10 * 2 + 1];
                int32_t labels[10 + 1];
                images[sizes[k] * 2] = 99.0f; /* nothing written past the batch */
                labels[sizes[k]] = 99;
                ge2_batch want, got;
                ck_assert_int_eq(ge2_batcher_next_size(b), sizes[k]);
                ck_assert(ge2_batcher_next(a, &want));
                ck_assert(ge2_batcher_next_into(b, images, labels, &got));
                ck_assert_int_eq(got.size, want.size);
                ck_assert_int_eq(got.index, want.index);
                ck_assert_int_eq(got.epoch, epoch);
                ck_assert_ptr_eq(got.images, images);
                ck_assert_ptr_eq(got.labels, labels);
                ck_assert_mem_eq(images, want.images, (size_t)want.size * 2 * sizeof(float));
                ck_assert_mem_eq(labels, want.labels, (size_t)want.size * sizeof(int32_t));
                ck_assert_float_eq(images[sizes[k] * 2], 99.0f);
                ck_assert_int_eq(labels[sizes[k]], 99);
            }
            ck_assert_int_eq(ge2_batcher_next_size(b), 0);
            ge2_batch none;
            float img[2];
            int32_t lab[1];
            ck_assert(!ge2_batcher_next_into(b, img, lab, &none));
        }
        ge2_batcher_free(a);
        ge2_batcher_free(b);
    }
    ge2_dataset_free(ds);
}
END_TEST

/* Data-parallel shards (PyTorch's DistributedSampler): for 2 and 3 ranks,
 * shuffled or not, with and without drop_last, each rank's example k is
 * position rank + k·world of the one-process order padded cyclically, the
 * shards are disjoint but for the padding and together cover every example,
 * and every rank sees the same number of batches. */
START_TEST(batcher_shards_are_disjoint_and_cover)
{
    const int64_t n = 103;
    ge2_dataset *ds = counting_dataset(n);
    for (int shuffle = 0; shuffle < 2; shuffle++)
        for (int drop = 0; drop < 2; drop++)
            for (int world = 2; world <= 3; world++) {
                ge2_batcher_options one = {4, shuffle, 77, drop, 0, 0};
                ge2_batcher *full;
                ck_assert_int_eq(ge2_batcher_new(ds, &one, &full), GE2_OK);
                ck_assert_int_eq(ge2_batcher_seek(full, 2, 0), GE2_OK);
                int seen[103] = {0};
                const int64_t shard = drop ? n / world : (n + world - 1) / world;
                int64_t batches = -1;
                for (int rank = 0; rank < world; rank++) {
                    ge2_batcher_options o = {4, shuffle, 77, drop, rank, world};
                    ge2_batcher *b;
                    ck_assert_int_eq(ge2_batcher_new(ds, &o, &b), GE2_OK);
                    ck_assert_int_eq(ge2_batcher_seek(b, 2, 0), GE2_OK);
                    ck_assert_int_eq(ge2_batcher_shard_size(b), shard);
                    if (batches < 0)
                        batches = ge2_batcher_batches_per_epoch(b);
                    ck_assert_int_eq(ge2_batcher_batches_per_epoch(b), batches);
                    /* whole batches of 4, or with the last one partial */
                    ck_assert_int_eq(batches, drop ? shard / 4 : (shard + 3) / 4);
                    ck_assert_int_eq(ge2_batcher_epoch_batches(n, &o), batches); /* before any batcher */
                    for (int64_t k = 0; k < shard; k++) {
                        const int64_t e = ge2_batcher_example(b, k);
                        ck_assert_int_eq(e, ge2_batcher_example(full, (rank + k * world) % n));
                        seen[e]++;
                    }
                    /* the batches carry those examples, in that order (labels count the examples) */
                    ge2_batch batch;
                    int64_t at = 0;
                    while (ge2_batcher_next(b, &batch))
                        for (int64_t i = 0; i < batch.size; i++, at++)
                            ck_assert_int_eq(batch.labels[i], ds->labels[ge2_batcher_example(b, at)]);
                    ck_assert_int_eq(at, drop ? shard / 4 * 4 : shard);
                    ge2_batcher_free(b);
                }
                int64_t covered = 0, twice = 0;
                for (int64_t e = 0; e < n; e++) {
                    covered += seen[e] > 0;
                    twice += seen[e] > 1;
                }
                ck_assert_int_eq(covered, drop ? shard * world : n);
                ck_assert_int_eq(twice, drop ? 0 : shard * world - n); /* only the padding repeats */
                ge2_batcher_free(full);
            }
    ge2_batcher_options bad = {4, true, 1, false, 3, 3};
    ge2_batcher *b = NULL;
    ck_assert_int_eq(ge2_batcher_new(ds, &bad, &b), GE2_ERR_INVALID_ARGUMENT);
    ge2_dataset_free(ds);
}
END_TEST

static Suite *data_suite(void)
{
    Suite *s = suite_create("data");
    TCase *idx = tcase_create("idx");
    tcase_add_checked_fixture(idx, tu_tmpdir_setup, tu_tmpdir_teardown);
    tcase_add_test(idx, idx_plain);
    tcase_add_test(idx, idx_gz);
    tcase_add_test(idx, idx_bad_magic);
    tcase_add_test(idx, idx_bad_type);
    tcase_add_test(idx, idx_bad_ndim);
    tcase_add_test(idx, idx_truncated);
    tcase_add_test(idx, idx_huge_claim_small_file);
    tcase_add_test(idx, idx_trailing);
    tcase_add_test(idx, idx_zero_dim);
    tcase_add_test(idx, idx_missing);
    tcase_add_test(idx, idx_corrupt_gzip);
    tcase_add_test(idx, dataset_load);
    tcase_add_test(idx, dataset_count_mismatch);
    tcase_add_test(idx, dataset_label_range);
    suite_add_tcase(s, idx);
    TCase *batcher = tcase_create("batcher");
    tcase_add_test(batcher, epoch_order_follows_its_definition);
    tcase_add_test(batcher, batcher_permutation_and_determinism);
    tcase_add_test(batcher, batcher_no_shuffle_and_last_batch);
    tcase_add_test(batcher, batcher_next_into_matches_next);
    tcase_add_test(batcher, batcher_shards_are_disjoint_and_cover);
    suite_add_tcase(s, batcher);
    return s;
}

int main(void)
{
    return ge2_check_run(data_suite());
}
