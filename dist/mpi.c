/* Joining the job, and the host collectives, over MPI.
 *
 * Every collective is non-blocking plus a wait with a deadline, so a rank
 * whose peer died or hangs fails with a message instead of waiting forever.
 * Sums go through rank 0 (reduce, then broadcast), so every rank gets the
 * same bits whatever order MPI's reduction takes: the ranks' parameters
 * must stay identical. */
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "graph/clock.h"
#include "dist/dist_internal.h"
#include "graph/alloc.h"
#include "graph/error.h"

#define DEFAULT_TIMEOUT_S 600.0
/* elements per MPI call: its counts are int */
#define CHUNK ((int64_t)1 << 30)

ge2_dist_options ge2_dist_defaults(void)
{
    return (ge2_dist_options){.timeout_s = DEFAULT_TIMEOUT_S};
}

static ge2_status mpi_fail(const ge2_dist *dist, int code, const char *what)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(code, text, &len);
    return ge2_error(GE2_ERR_COLLECTIVE, "ge2_dist: rank %d: %s failed: %s", dist ? dist->group.rank : -1, what, text);
}

ge2_status ge2_dist_wait(ge2_dist *dist, MPI_Request *request, const char *what)
{
    const double deadline = ge2_now_s() + dist->group.timeout_s;
    for (long polls = 0;; polls++) {
        int done = 0;
        int rc = MPI_Test(request, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return mpi_fail(dist, rc, what);
        if (done)
            return GE2_OK;
        /* spin briefly (a step's collective is usually quick), then yield
         * the core, sleeping longer the longer the wait: a CPU job shares
         * the cores with the other ranks, and a rank waiting for a stalled
         * peer must not burn one until its timeout, while a short wait
         * must not oversleep much */
        if (polls > 1000) {
            if (ge2_now_s() > deadline)
                return ge2_error(GE2_ERR_COLLECTIVE,
                                 "ge2_dist: rank %d: %s did not complete in %g s: another rank failed or hangs "
                                 "(--dist-timeout sets the limit)",
                                 dist->group.rank, what, dist->group.timeout_s);
            const long shift = (polls - 1000) / 64 < 8 ? (polls - 1000) / 64 : 8;
            nanosleep(&(struct timespec){0, 50000L << shift}, NULL);
        }
    }
}

ge2_status ge2_dist_broadcast_bytes(ge2_dist *dist, void *buf, size_t bytes)
{
    for (size_t at = 0; at < bytes;) {
        int count = bytes - at > (size_t)CHUNK ? (int)CHUNK : (int)(bytes - at);
        MPI_Request req;
        int rc = MPI_Ibcast((char *)buf + at, count, MPI_BYTE, 0, dist->comm, &req);
        if (rc != MPI_SUCCESS)
            return mpi_fail(dist, rc, "broadcast");
        char what[64];
        snprintf(what, sizeof what, "broadcast of %zu bytes", bytes);
        GE2_TRY(ge2_dist_wait(dist, &req, what));
        at += (size_t)count;
    }
    return GE2_OK;
}

/* Waits for a started MPI call (rc its return), naming `what` on failure. */
static ge2_status finish(ge2_dist *dist, int rc, MPI_Request *req, const char *what)
{
    if (rc != MPI_SUCCESS)
        return mpi_fail(dist, rc, what);
    return ge2_dist_wait(dist, req, what);
}

/* data[0, n) of type summed over the ranks into rank 0 (and, with
 * broadcast, back out to every rank), a chunk of CHUNK at a time: the
 * chunks, hence the order of the sums, are the same for every caller. */
static ge2_status sum_through_root_then(ge2_dist *dist, void *data, int64_t n, MPI_Datatype type, size_t size,
                                        bool broadcast, const char *what)
{
    const bool root = dist->group.rank == 0;
    for (int64_t at = 0; at < n;) {
        int count = n - at > CHUNK ? (int)CHUNK : (int)(n - at);
        char *p = (char *)data + (size_t)at * size;
        MPI_Request req;
        GE2_TRY(finish(dist, MPI_Ireduce(root ? MPI_IN_PLACE : p, root ? p : NULL, count, type, MPI_SUM, 0, dist->comm,
                                         &req),
                       &req, what));
        if (broadcast)
            GE2_TRY(finish(dist, MPI_Ibcast(p, count, type, 0, dist->comm, &req), &req, what));
        at += count;
    }
    return GE2_OK;
}

/* data[0, n) of type summed over the ranks: into rank 0, then back out. */
static ge2_status sum_through_root(ge2_dist *dist, void *data, int64_t n, MPI_Datatype type, size_t size)
{
    char what[64];
    snprintf(what, sizeof what, "all-reduce of %lld values", (long long)n);
    return sum_through_root_then(dist, data, n, type, size, true, what);
}

/* The sum into rank 0, as sum_host makes it, then each other rank's shard
 * from rank 0 to that rank. */
static ge2_status reduce_scatter_host(const ge2_collective *c, float *data, int64_t n)
{
    ge2_dist *dist = c->self;
    char what[64];
    snprintf(what, sizeof what, "reduce-scatter of %lld values", (long long)n);
    GE2_TRY(sum_through_root_then(dist, data, n, MPI_FLOAT, sizeof(float), false, what));
    const int me = c->rank;
    for (int r = 1; r < c->world; r++) {
        if (me != 0 && me != r)
            continue;
        int64_t lo, hi;
        ge2_collective_shard(n, r, c->world, &lo, &hi);
        for (int64_t at = lo; at < hi;) {
            const int count = hi - at > CHUNK ? (int)CHUNK : (int)(hi - at);
            MPI_Request req;
            const int rc = me == 0 ? MPI_Isend(data + at, count, MPI_FLOAT, r, 0, dist->comm, &req)
                                   : MPI_Irecv(data + at, count, MPI_FLOAT, 0, 0, dist->comm, &req);
            GE2_TRY(finish(dist, rc, &req, what));
            at += count;
        }
    }
    return GE2_OK;
}

/* Every rank's shard to every rank in one MPI_Iallgatherv: its counts and
 * displacements are int, so n is below 2^31 (a model of 2 billion
 * parameters; past that the call fails, saying so). */
static ge2_status all_gather_host(const ge2_collective *c, float *data, int64_t n)
{
    ge2_dist *dist = c->self;
    char what[64];
    snprintf(what, sizeof what, "all-gather of %lld values", (long long)n);
    if (n > INT_MAX)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2 dist: %s: MPI's int displacements reach %d", what, INT_MAX);
    int *counts = ge2_malloc(2 * (size_t)c->world * sizeof *counts);
    if (!counts)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2 dist: %s: %d ranks' counts", what, c->world);
    int *displs = counts + c->world;
    for (int r = 0; r < c->world; r++) {
        int64_t lo, hi;
        ge2_collective_shard(n, r, c->world, &lo, &hi);
        counts[r] = (int)(hi - lo);
        displs[r] = (int)lo;
    }
    MPI_Request req;
    const ge2_status st = finish(
        dist, MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts, displs, MPI_FLOAT, dist->comm, &req),
        &req, what);
    ge2_free(counts);
    return st;
}

static ge2_status sum_host(const ge2_collective *c, float *const *data, const int64_t *n, int spans)
{
    ge2_dist *dist = c->self;
    for (int s = 0; s < spans; s++)
        GE2_TRY(sum_through_root(dist, data[s], n[s], MPI_FLOAT, sizeof(float)));
    return GE2_OK;
}

ge2_status ge2_dist_sum(ge2_dist *dist, double *values, int n)
{
    if ((!values && n > 0) || n < 0)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_dist_sum: values must not be NULL, n >= 0 (got %d)", n);
    return dist && dist->group.world > 1 ? sum_through_root(dist, values, n, MPI_DOUBLE, sizeof(double)) : GE2_OK;
}

ge2_status ge2_dist_check_same(ge2_dist *dist, const char *const *names, const char *const *values, int n)
{
    if (!dist || dist->group.world <= 1)
        return GE2_OK;
    if (n < 0 || (n > 0 && (!names || !values)))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_dist_check_same: names and values of %d fields", n);
    enum { VALUE_MAX = 256 };
    /* rank 0's values to every rank, each compared there; then every rank
     * learns the first field any rank differs in, and which rank */
    int first = n;
    char theirs[VALUE_MAX] = "";
    for (int i = 0; i < n; i++) {
        char mine[VALUE_MAX], zero[VALUE_MAX];
        snprintf(mine, sizeof mine, "%s", values[i]);
        memcpy(zero, mine, sizeof zero);
        GE2_TRY(ge2_dist_broadcast_bytes(dist, zero, sizeof zero));
        zero[VALUE_MAX - 1] = '\0';
        if (first == n && strcmp(mine, zero) != 0) {
            first = i;
            memcpy(theirs, zero, sizeof theirs);
        }
    }
    /* the smallest (field, rank) pair any rank found, coded as one int */
    int code = first < n ? first * dist->group.world + dist->group.rank : n * dist->group.world;
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, &code, 1, MPI_INT, MPI_MIN, dist->comm, &req);
    if (rc != MPI_SUCCESS)
        return mpi_fail(dist, rc, "comparing the ranks' settings");
    GE2_TRY(ge2_dist_wait(dist, &req, "comparing the ranks' settings"));
    if (code >= n * dist->group.world)
        return GE2_OK;
    const int field = code / dist->group.world, by = code % dist->group.world;
    if (by == dist->group.rank)
        return ge2_error(GE2_ERR_COLLECTIVE, "ge2_dist: rank %d: %s is '%s' here but '%s' on rank 0: every rank must "
                         "run the same model and plan", by, names[field], values[field], theirs);
    return ge2_error(GE2_ERR_COLLECTIVE, "ge2_dist: rank %d: rank %d's %s differs from rank 0's '%s': every rank "
                     "must run the same model and plan", dist->group.rank, by, names[field],
                     dist->group.rank == 0 ? values[field] : "(see rank 0)");
}

/* This rank's index among the ranks sharing its machine. */
static ge2_status find_local_rank(ge2_dist *dist)
{
    MPI_Comm node;
    int rc = MPI_Comm_split_type(dist->comm, MPI_COMM_TYPE_SHARED, dist->group.rank, MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS)
        return mpi_fail(dist, rc, "MPI_Comm_split_type");
    MPI_Comm_rank(node, &dist->local_rank);
    MPI_Comm_free(&node);
    return GE2_OK;
}

/* Every rank learns whether all made it through init (local: this rank's
 * status): a rank that failed returns its own error, the others an error
 * naming the first failed rank, so no rank goes on to wait in a collective
 * for one that gave up. */
static ge2_status agree(ge2_dist *dist, ge2_status local)
{
    int failed = local == GE2_OK ? dist->group.world : dist->group.rank; /* the lowest failed rank wins */
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MIN, dist->comm, &req);
    if (rc != MPI_SUCCESS)
        return local != GE2_OK ? local : mpi_fail(dist, rc, "joining the job");
    ge2_status st = ge2_dist_wait(dist, &req, "joining the job");
    if (local != GE2_OK)
        return local; /* its own message stays */
    if (st != GE2_OK)
        return st;
    if (failed < dist->group.world)
        return ge2_error(GE2_ERR_COLLECTIVE, "ge2_dist_init: rank %d: rank %d failed to join the job (its error is "
                                             "on its own stderr)",
                         dist->group.rank, failed);
    return GE2_OK;
}

/* One GPU per process: this rank takes GPU local_rank % count. */
static ge2_status choose_gpu(const ge2_dist *dist)
{
    if (!ge2_cuda_available())
        return GE2_OK;
    return ge2_cuda_use_device(dist->local_rank);
}

ge2_status ge2_dist_init(int *argc, char ***argv, const ge2_dist_options *options, ge2_dist **out)
{
    if (!out)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_dist_init: out must not be NULL");
    *out = NULL;
    ge2_dist_options o = options ? *options : ge2_dist_defaults();
    if (!(o.timeout_s >= 0))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_dist_init: timeout_s must be >= 0 (0: %g s), got %g",
                         DEFAULT_TIMEOUT_S, o.timeout_s);
    ge2_dist *dist = ge2_calloc(1, sizeof *dist);
    if (!dist)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_dist_init: process group");
    dist->group.timeout_s = o.timeout_s > 0 ? o.timeout_s : DEFAULT_TIMEOUT_S;
    dist->comm = MPI_COMM_NULL;
    int initialized = 0, rc;
    MPI_Initialized(&initialized);
    if (!initialized) {
        int provided;
        rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS) {
            ge2_free(dist);
            return ge2_error(GE2_ERR_COLLECTIVE, "ge2_dist_init: MPI_Init_thread failed (code %d)", rc);
        }
        dist->initialized_mpi = true;
    }
    ge2_status st = GE2_OK;
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &dist->comm);
    if (rc != MPI_SUCCESS)
        st = mpi_fail(dist, rc, "MPI_Comm_dup");
    if (st == GE2_OK) {
        MPI_Comm_set_errhandler(dist->comm, MPI_ERRORS_RETURN);
        MPI_Comm_rank(dist->comm, &dist->group.rank);
        MPI_Comm_size(dist->comm, &dist->group.world);
        st = find_local_rank(dist);
    }
    if (st == GE2_OK)
        st = choose_gpu(dist);
    if (dist->comm != MPI_COMM_NULL)
        st = agree(dist, st);
    if (st != GE2_OK) {
        ge2_dist_free(dist);
        return st;
    }
    dist->group.self = dist;
    dist->group.sum_host = sum_host;
    dist->group.prepare_device = ge2_nccl_prepare;
    dist->group.sum_device = ge2_nccl_sum;
    dist->group.reduce_scatter_host = reduce_scatter_host;
    dist->group.all_gather_host = all_gather_host;
    *out = dist;
    return GE2_OK;
}

/* dl_iterate_phdr's callback: pins one of Open MPI's plugins (below an
 * "openmpi" folder, or its process manager PMIx's) so that its dlclose at
 * MPI_Finalize leaves it mapped. */
static int pin_plugin(struct dl_phdr_info *info, size_t size, void *unused)
{
    (void)size, (void)unused;
    if (info->dlpi_name && (strstr(info->dlpi_name, "/openmpi/") || strstr(info->dlpi_name, "/pmix"))) {
        void *h = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
        (void)h; /* the extra reference is the point: never closed */
    }
    return 0;
}

/* Open MPI unloads its plugins at MPI_Finalize, and what they allocated and
 * never freed then reaches LeakSanitizer's report with no module to name,
 * so tools/lsan_suppressions.txt could not tell it from ge2's own leaks.
 * Keeping them mapped until the process ends changes nothing else. */
static void keep_mpi_plugins(void) { dl_iterate_phdr(pin_plugin, NULL); }

void ge2_dist_free(ge2_dist *dist)
{
    if (!dist)
        return;
    ge2_nccl_free(dist);
    if (dist->comm != MPI_COMM_NULL)
        MPI_Comm_free(&dist->comm);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (dist->initialized_mpi && !finalized) {
        keep_mpi_plugins();
        MPI_Finalize();
    }
    ge2_free(dist);
}

int ge2_dist_rank(const ge2_dist *dist) { return dist ? dist->group.rank : 0; }
int ge2_dist_world(const ge2_dist *dist) { return dist ? dist->group.world : 1; }
int ge2_dist_local_rank(const ge2_dist *dist) { return dist ? dist->local_rank : 0; }
const ge2_collective *ge2_dist_collective(ge2_dist *dist) { return dist ? &dist->group : NULL; }

void ge2_dist_abort(ge2_dist *dist, int code)
{
    (void)dist;
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code ? code : 1);
    _Exit(code ? code : 1); /* MPI_Abort does not return; in case it does */
}
