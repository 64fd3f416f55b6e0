/* The process group's halves of the sum for a sharded optimizer
 * (ge2_collective.reduce_scatter_host, all_gather_host; MPI, host memory),
 * under mpirun with any number of ranks (collective.sh: 1 to 4): each
 * rank's shard after the reduce-scatter is, bit for bit, what the
 * all-reduce (sum_host) gives there, and within float rounding of the
 * float64 sum; after the all-gather every rank holds every rank's shard;
 * the shards cover every value once. Exits non-zero on any mismatch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ge2/dist.h"
#include "ge2/extension.h"

static int failures;

#define EXPECT(cond, ...)                                  \
    do {                                                   \
        if (!(cond)) {                                     \
            fprintf(stderr, "collective_test: " __VA_ARGS__); \
            fprintf(stderr, "\n");                         \
            failures++;                                    \
        }                                                  \
    } while (0)

/* Rank r's value i: differs per rank, so the sum's order shows in its bits */
static float value(int rank, int64_t i) { return (float)sin(0.37 * (double)i + 1.3 * rank) * (float)(1 + i % 7); }

static void check_shards(int64_t n, int world)
{
    int64_t covered = 0, end = 0;
    for (int r = 0; r < world; r++) {
        int64_t lo, hi;
        ge2_collective_shard(n, r, world, &lo, &hi);
        EXPECT(lo == end && hi >= lo && hi <= n, "n %lld: rank %d's shard [%lld, %lld) does not follow %lld",
               (long long)n, r, (long long)lo, (long long)hi, (long long)end);
        covered += hi - lo;
        end = hi;
    }
    EXPECT(covered == n && end == n, "n %lld: the shards cover %lld values", (long long)n, (long long)covered);
}

static void check_n(const ge2_collective *c, int64_t n)
{
    float *data = malloc((size_t)(n ? n : 1) * sizeof *data), *all = malloc((size_t)(n ? n : 1) * sizeof *all);
    if (!data || !all) {
        EXPECT(0, "out of memory");
        return;
    }
    for (int64_t i = 0; i < n; i++)
        data[i] = all[i] = value(c->rank, i);
    float *spans[1] = {all};
    EXPECT(c->sum_host(c, spans, &n, 1) == GE2_OK, "sum_host of %lld: %s", (long long)n, ge2_last_error());
    EXPECT(c->reduce_scatter_host(c, data, n) == GE2_OK, "reduce_scatter of %lld: %s", (long long)n,
           ge2_last_error());
    int64_t lo, hi;
    ge2_collective_shard(n, c->rank, c->world, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        double want = 0;
        for (int r = 0; r < c->world; r++)
            want += value(r, i);
        EXPECT(memcmp(&data[i], &all[i], sizeof *data) == 0, "n %lld, rank %d: value %lld is %.9g, the all-reduce "
               "gives %.9g", (long long)n, c->rank, (long long)i, data[i], all[i]);
        EXPECT(fabs(data[i] - want) <= 1e-5 * (1 + fabs(want)), "n %lld: value %lld is %.9g, the float64 sum %.9g",
               (long long)n, (long long)i, data[i], want);
    }
    /* each rank's shard holds its own marks; the rest is garbage to be overwritten */
    for (int64_t i = 0; i < n; i++)
        data[i] = i >= lo && i < hi ? (float)(1000 * c->rank) + (float)(i % 997) : NAN;
    EXPECT(c->all_gather_host(c, data, n) == GE2_OK, "all_gather of %lld: %s", (long long)n, ge2_last_error());
    for (int r = 0; r < c->world; r++) {
        int64_t rlo, rhi;
        ge2_collective_shard(n, r, c->world, &rlo, &rhi);
        for (int64_t i = rlo; i < rhi; i++)
            EXPECT(data[i] == (float)(1000 * r) + (float)(i % 997), "n %lld, rank %d: value %lld is %g, rank %d's "
                   "is %g", (long long)n, c->rank, (long long)i, data[i], r, (float)(1000 * r) + (float)(i % 997));
    }
    free(data);
    free(all);
}

int main(int argc, char **argv)
{
    ge2_dist *dist;
    const ge2_dist_options options = ge2_dist_defaults();
    if (ge2_dist_init(&argc, &argv, &options, &dist) != GE2_OK) {
        fprintf(stderr, "collective_test: %s\n", ge2_last_error());
        return 1;
    }
    const ge2_collective *c = ge2_dist_collective(dist);
    for (int world = 1; world <= 5; world++)
        for (int64_t n = 0; n < 12; n++)
            check_shards(n, world);
    static const int64_t sizes[] = {0, 1, 3, 7, 1000, 1025, 100003};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        check_n(c, sizes[k]);
    if (c->rank == 0)
        printf("collective_test: %d rank(s): %s\n", c->world, failures ? "FAILED" : "ok");
    ge2_dist_free(dist);
    return failures ? 1 : 0;
}
