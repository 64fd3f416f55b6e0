/* Device collectives over NCCL, loaded with dlopen on first use (as cuDNN
 * is): a CPU-only run never needs libnccl.so.2, and where it is missing the
 * error names it.
 *
 * The communicator is made once per process group, by the first all-reduce
 * launch that is prepared (the first train key's exec_prepare, at the same
 * point on every rank, before its warm-up and capture): rank 0 makes the
 * unique id, MPI broadcasts it, ncclCommInitRank joins the ranks on each
 * one's current GPU (ge2_dist_init chose it). NCCL's caveats for CUDA Graph
 * capture are what ge2's backend already does: one GPU per process, a
 * warm-up step run eagerly before capture, every rank capturing the same
 * collectives in the same order (the same program), and capture in
 * thread-local mode.
 *
 * Errors NCCL finds while a replay runs (a peer gone) are asynchronous: a
 * watchdog thread polls ncclCommGetAsyncError and, on one, prints it with
 * the rank, aborts the communicator and ends the process; mpirun then ends
 * the job, so no rank waits on a dead peer. The same thread bounds the
 * host calls that wait for every peer (struct ge2_nccl). (Not MPI_Abort:
 * MPI is initialized for calls from the main thread only.) */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>

#include "graph/clock.h"
#include "dist/dist_internal.h"
#include "graph/alloc.h"
#include "graph/error.h"
#include "kernels/dynlib.h"

#define NCCL_LIBRARY "libnccl.so.2"
#define WATCHDOG_PERIOD_NS 100000000L /* 0.1 s */

static struct {
    pthread_once_t once;
    void *lib;
    char error[256];
    ncclResult_t (*get_unique_id)(ncclUniqueId *);
    ncclResult_t (*comm_init_rank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*comm_destroy)(ncclComm_t);
    ncclResult_t (*comm_abort)(ncclComm_t);
    ncclResult_t (*comm_get_async_error)(ncclComm_t, ncclResult_t *);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*group_start)(void);
    ncclResult_t (*group_end)(void);
    const char *(*get_error_string)(ncclResult_t);
} nccl = {.once = PTHREAD_ONCE_INIT};

static void load(void)
{
    const ge2_dynlib_symbol syms[] = {
        {(void **)&nccl.get_unique_id, "ncclGetUniqueId"},
        {(void **)&nccl.comm_init_rank, "ncclCommInitRank"},
        {(void **)&nccl.comm_destroy, "ncclCommDestroy"},
        {(void **)&nccl.comm_abort, "ncclCommAbort"},
        {(void **)&nccl.comm_get_async_error, "ncclCommGetAsyncError"},
        {(void **)&nccl.all_reduce, "ncclAllReduce"},
        {(void **)&nccl.group_start, "ncclGroupStart"},
        {(void **)&nccl.group_end, "ncclGroupEnd"},
        {(void **)&nccl.get_error_string, "ncclGetErrorString"},
    };
    nccl.lib = ge2_dynlib_open(NCCL_LIBRARY, "NCCL", syms, sizeof syms / sizeof syms[0], nccl.error,
                               sizeof nccl.error);
}

/* The device communicator of one process group, and its watchdog. The
 * watchdog starts before the communicator: NCCL calls that wait on the
 * host for every peer (ncclCommInitRank; a group's first collectives,
 * which set up the connections) set a deadline around them, and the
 * watchdog ends the process when one passes, as it does on an
 * asynchronous error once the communicator exists. */
struct ge2_nccl {
    ncclComm_t comm;
    pthread_t watchdog;
    bool watching;
    atomic_bool stop, ready;  /* ready: comm may be polled */
    _Atomic double deadline;  /* > 0: the call named by waiting_for must return before it */
    const char *_Atomic waiting_for;
};

static ge2_status nccl_fail(const ge2_dist *dist, ncclResult_t r, const char *what)
{
    return ge2_error(GE2_ERR_COLLECTIVE, "ge2_dist: rank %d: %s: %s", dist->group.rank, what,
                     nccl.get_error_string(r));
}

static void *watch(void *arg)
{
    ge2_dist *dist = arg;
    struct ge2_nccl *n = dist->nccl;
    while (!atomic_load(&n->stop)) {
        double deadline = atomic_load(&n->deadline);
        if (deadline > 0 && ge2_now_s() > deadline) {
            fprintf(stderr, "ge2_dist: rank %d: %s did not return in %g s: a peer failed or hangs; ending the job\n",
                    dist->group.rank, atomic_load(&n->waiting_for), dist->group.timeout_s);
            fflush(stderr);
            _exit(1);
        }
        ncclResult_t async = ncclSuccess;
        if (atomic_load(&n->ready) && nccl.comm_get_async_error(n->comm, &async) == ncclSuccess &&
            async != ncclSuccess && async != ncclInProgress) {
            fprintf(stderr, "ge2_dist: rank %d: NCCL failed while the step ran: %s; ending the job\n",
                    dist->group.rank, nccl.get_error_string(async));
            fflush(stderr);
            nccl.comm_abort(n->comm);
            _exit(1);
        }
        nanosleep(&(struct timespec){0, WATCHDOG_PERIOD_NS}, NULL);
    }
    return NULL;
}

/* Around a host call that waits for the peers: the watchdog's deadline. */
static void expect_return(struct ge2_nccl *n, const ge2_dist *dist, const char *call)
{
    atomic_store(&n->waiting_for, call);
    atomic_store(&n->deadline, ge2_now_s() + dist->group.timeout_s);
}

static void returned(struct ge2_nccl *n)
{
    atomic_store(&n->deadline, 0.0);
}

ge2_status ge2_nccl_prepare(const ge2_collective *c)
{
    ge2_dist *dist = c->self;
    if (dist->nccl)
        return GE2_OK;
    pthread_once(&nccl.once, load);
    if (!nccl.lib)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_dist: rank %d: %s (data parallel on CUDA needs NCCL 2)",
                         c->rank, nccl.error);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclResult_t r = c->rank == 0 ? nccl.get_unique_id(&id) : ncclSuccess;
    if (r != ncclSuccess)
        return nccl_fail(dist, r, "ncclGetUniqueId");
    GE2_TRY(ge2_dist_broadcast_bytes(dist, &id, sizeof id));
    struct ge2_nccl *n = ge2_calloc(1, sizeof *n);
    if (!n)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_dist: NCCL communicator");
    dist->nccl = n;
    n->watching = pthread_create(&n->watchdog, NULL, watch, dist) == 0;
    expect_return(n, dist, "ncclCommInitRank");
    r = nccl.comm_init_rank(&n->comm, c->world, id, c->rank);
    returned(n);
    if (r != ncclSuccess) {
        ge2_nccl_free(dist); /* no communicator to destroy: comm stays unready */
        return nccl_fail(dist, r, "ncclCommInitRank");
    }
    atomic_store(&n->ready, true);
    return GE2_OK;
}

ge2_status ge2_nccl_sum(const ge2_collective *c, float *const *data, const int64_t *n, int spans, void *stream)
{
    ge2_dist *dist = c->self;
    struct ge2_nccl *comm = dist->nccl;
    if (!comm || !atomic_load(&comm->ready))
        return ge2_error(GE2_ERR_STATE, "ge2_dist: rank %d: the NCCL communicator was not prepared", c->rank);
    expect_return(comm, dist, "ncclGroupEnd (the all-reduce's enqueue)");
    ncclResult_t r = nccl.group_start();
    for (int s = 0; r == ncclSuccess && s < spans; s++)
        r = nccl.all_reduce(data[s], data[s], (size_t)n[s], ncclFloat32, ncclSum, comm->comm, (cudaStream_t)stream);
    ncclResult_t end = nccl.group_end();
    returned(comm);
    if (r == ncclSuccess)
        r = end;
    return r == ncclSuccess ? GE2_OK : nccl_fail(dist, r, "ncclAllReduce");
}

void ge2_nccl_free(ge2_dist *dist)
{
    struct ge2_nccl *n = dist->nccl;
    if (!n)
        return;
    atomic_store(&n->stop, true);
    if (n->watching)
        pthread_join(n->watchdog, NULL);
    if (atomic_load(&n->ready))
        nccl.comm_destroy(n->comm);
    ge2_free(n);
    dist->nccl = NULL;
}
