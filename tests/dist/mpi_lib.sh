# How ge2's tests start MPI jobs on one machine (sourced): $mpirun is the
# command up to -np. CI runs as root, which Open MPI refuses unless told;
# its session files go to the test's own temporary directory; the ranks
# talk through shared memory, without probing the network; more ranks than
# cores is fine (--oversubscribe) and none is pinned to a core.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export TMPDIR="${TEST_TMPDIR:-${TMPDIR:-/tmp}}"
mpirun=(mpirun --oversubscribe --bind-to none --mca btl self,vader -np)
