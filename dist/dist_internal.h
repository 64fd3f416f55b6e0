/* The process group behind ge2/dist.h, private to dist/: MPI for bootstrap
 * and host collectives (mpi.c), NCCL for device collectives (nccl.c). */
#ifndef GE2_DIST_DIST_INTERNAL_H
#define GE2_DIST_DIST_INTERNAL_H

#include <mpi.h>
#include <stdbool.h>

#include "ge2/dist.h"

struct ge2_nccl; /* nccl.c: the device communicator, made on first use */

struct ge2_dist {
    ge2_collective group; /* group.self points back here */
    MPI_Comm comm;        /* a duplicate of MPI_COMM_WORLD whose errors return */
    int local_rank;
    bool initialized_mpi; /* ge2_dist_init called MPI_Init_thread: free finalizes */
    struct ge2_nccl *nccl;
};

/* mpi.c: a host collective of MPI, waited for until group.timeout_s; `what`
 * names it in the error ("all-reduce of 1234 floats"). */
ge2_status ge2_dist_wait(ge2_dist *dist, MPI_Request *request, const char *what);
/* bytes of buf from rank 0 to every rank (chunked under MPI's int counts). */
ge2_status ge2_dist_broadcast_bytes(ge2_dist *dist, void *buf, size_t bytes);

/* nccl.c: ge2_collective's device entries, and the communicator's end. */
ge2_status ge2_nccl_prepare(const ge2_collective *c);
ge2_status ge2_nccl_sum(const ge2_collective *c, float *const *data, const int64_t *n, int spans, void *stream);
void ge2_nccl_free(ge2_dist *dist);

#endif /* GE2_DIST_DIST_INTERNAL_H */
