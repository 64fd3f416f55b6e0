/* libFuzzer target: the trainers' dataset path on arbitrary bytes. An
 * input is [u16 n, little endian][n bytes: the images IDX file][the rest:
 * the labels IDX file]; both go into in-memory files that a folder of
 * Fashion-MNIST's file names links to. What loads is checked against the
 * trainers' 784 values an example, then every batch is gathered into feeds
 * of exactly the model's size, as the trainers do: an image shape the
 * check lets through would write past them (ASan). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "data/dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { FEATURES = 784, BATCH = 8 };

static char dir[64];
static int fds[2] = {-1, -1};

/* Once: the memfds, and the folder whose train files link to them. */
static void open_files(void)
{
    static const char *const names[2] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"};
    snprintf(dir, sizeof dir, "/tmp/ge2_dataset_fuzz_XXXXXX");
    if (!mkdtemp(dir))
        abort();
    for (int i = 0; i < 2; i++) {
        char target[64], link[160];
        if ((fds[i] = memfd_create(names[i], 0)) < 0)
            abort();
        snprintf(target, sizeof target, "/proc/%d/fd/%d", (int)getpid(), fds[i]);
        snprintf(link, sizeof link, "%s/%s", dir, names[i]);
        if (symlink(target, link) != 0)
            abort();
    }
}

static void put(int fd, const uint8_t *data, size_t size)
{
    if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fds[0] < 0)
        open_files();
    if (size < 2)
        return 0;
    size_t n = (size_t)data[0] | (size_t)data[1] << 8;
    if (n > size - 2)
        n = size - 2;
    put(fds[0], data + 2, n);
    put(fds[1], data + 2 + n, size - 2 - n);
    ge2_dataset *ds;
    if (ge2_dataset_load_fashion_mnist(dir, GE2_SPLIT_TRAIN, &ds) != GE2_OK)
        return 0;
    if (ge2_dataset_expect(ds, "the fuzzed model", FEATURES, 28, 28) != GE2_OK)
        abort(); /* the loader promised Fashion-MNIST's shape */
    ge2_batcher_options bo = {.batch_size = BATCH, .shuffle = true, .seed = 1};
    ge2_batcher *b;
    if (ge2_batcher_new(ds, &bo, &b) == GE2_OK) {
        float *images = malloc(sizeof(float) * BATCH * FEATURES);
        int32_t *labels = malloc(sizeof(int32_t) * BATCH);
        ge2_batch batch;
        while (images && labels && ge2_batcher_next_into(b, images, labels, &batch))
            for (int64_t i = 0; i < batch.size; i++)
                if (labels[i] < 0 || labels[i] >= ds->n_classes)
                    abort();
        free(images);
        free(labels);
        ge2_batcher_free(b);
    }
    ge2_dataset_free(ds);
    return 0;
}
