/* Deterministic reductions inside a warp, a block, and across the blocks of
 * one launch.
 *
 * Every tree here has a fixed shape (shuffle offsets 16..1, warps in index
 * order, blocks in index order), so a sum comes out bit-identical on every
 * run: replayed steps must reproduce eager ones exactly. No float atomics.
 */
#ifndef GE2_KERNELS_CUDA_BLOCK_REDUCE_H
#define GE2_KERNELS_CUDA_BLOCK_REDUCE_H

#ifndef __CUDACC__
#error "kernels/cuda/block_reduce.h is device code for .cu files"
#endif

#include <cuda_runtime.h>

#include "graph/control.h"

#define GE2_WARP 32

/* This warp's index over the grid: the row (or output) a warp-per-row
 * kernel gives it, rows going to a block's warps in order */
__device__ __forceinline__ long long ge2_grid_warp(void)
{
    return (long long)blockIdx.x * (blockDim.x / GE2_WARP) + threadIdx.x / GE2_WARP;
}

__device__ __forceinline__ float ge2_warp_sum(float v)
{
    for (int off = GE2_WARP / 2; off > 0; off /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

__device__ __forceinline__ float ge2_warp_max(float v)
{
    for (int off = GE2_WARP / 2; off > 0; off /= 2)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

/* The block's reduction by Max (fmaxf) or sum; every thread gets the
 * result. blockDim.x must be a multiple of 32 (at most 1024). Contains
 * __syncthreads: call from all threads. */
template <bool Max> __device__ __forceinline__ float ge2_block_reduce(float v)
{
    __shared__ float warp_results[GE2_WARP];
    int lane = threadIdx.x % GE2_WARP, warp = threadIdx.x / GE2_WARP;
    int n_warps = blockDim.x / GE2_WARP;
    v = Max ? ge2_warp_max(v) : ge2_warp_sum(v);
    __syncthreads(); /* warp_results may still be read by a previous call */
    if (lane == 0)
        warp_results[warp] = v;
    __syncthreads();
    v = lane < n_warps ? warp_results[lane] : Max ? -INFINITY : 0.0f;
    return Max ? ge2_warp_max(v) : ge2_warp_sum(v);
}

__device__ __forceinline__ float ge2_block_sum(float v) { return ge2_block_reduce<false>(v); }
__device__ __forceinline__ float ge2_block_max(float v) { return ge2_block_reduce<true>(v); }

/* A team is the threads that work on one row together: a warp (narrow rows,
 * several rows to a block) or the whole block (rows wider than a warp
 * covers at full speed). rank() is the thread's place in its team, index()
 * the team's place over the grid and count() the grid's teams, so a row
 * loop reads `for (r = team.index(); r < rows; r += team.count())` either way;
 * sync() orders the team's memory accesses (a barrier). */
struct ge2_warp_team {
    __device__ int rank() const { return threadIdx.x % GE2_WARP; }
    __device__ int size() const { return GE2_WARP; }
    __device__ long long index() const { return ge2_grid_warp(); }
    __device__ long long count() const { return (long long)gridDim.x * (blockDim.x / GE2_WARP); }
    __device__ float sum(float v) const { return ge2_warp_sum(v); }
    __device__ float max(float v) const { return ge2_warp_max(v); }
    __device__ void sync() const { __syncwarp(); }
};

struct ge2_block_team {
    __device__ int rank() const { return threadIdx.x; }
    __device__ int size() const { return blockDim.x; }
    __device__ long long index() const { return blockIdx.x; }
    __device__ long long count() const { return gridDim.x; }
    __device__ float sum(float v) const { return ge2_block_sum(v); }
    __device__ float max(float v) const { return ge2_block_max(v); }
    __device__ void sync() const { __syncthreads(); }
};

/* The "last block finishes" ticket: each block publishes its partial, then
 * takes a ticket; the block drawing the last one sees every partial and
 * finishes the reduction in the same launch — no second kernel, no memset
 * node. Call from all threads after thread 0 wrote this block's partial.
 * The last block must reset *counter to 0 (ge2_ticket_reset) so the next
 * launch, or replay, starts from zero. */
__device__ __forceinline__ bool ge2_ticket_is_last(unsigned *counter)
{
    __shared__ bool last;
    __threadfence(); /* this block's partial is visible before its ticket */
    __syncthreads();
    if (threadIdx.x == 0)
        last = atomicAdd(counter, 1u) == gridDim.x - 1;
    __syncthreads();
    if (last)
        __threadfence(); /* acquire: the partials read after this are the ones published before the tickets */
    return last;
}

__device__ __forceinline__ void ge2_ticket_reset(unsigned *counter)
{
    if (threadIdx.x == 0)
        *counter = 0;
}

/* In the last block: the sum of partials[0, n) in a fixed order. volatile so
 * the other blocks' partials are read from memory, not a stale cache line. */
__device__ __forceinline__ float ge2_sum_partials(const volatile float *partials /* [n] */, int n)
{
    float v = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        v += partials[i];
    return ge2_block_sum(v);
}

/* Host side: the grid of a launch that ends in ge2_grid_sum — one block per
 * `items_per_block` work items (at least one), capped at one block per
 * partials slot; kernels grid-stride over what the cap leaves. */
static inline unsigned ge2_grid_sum_blocks(long long work_items, int items_per_block)
{
    long long blocks = (work_items + items_per_block - 1) / items_per_block;
    if (blocks < 1)
        blocks = 1;
    return (unsigned)(blocks < GE2_CONTROL_PARTIALS ? blocks : GE2_CONTROL_PARTIALS);
}

/* Sum of v over every thread of the launch, in one launch, deterministic:
 * each block's sum goes to ctl->partials[blockIdx.x], so the grid must come
 * from ge2_grid_sum_blocks; the last block adds them in block order. Returns
 * true in every thread of the last block, with the sum in *total; that block
 * then writes its result and calls ge2_ticket_reset(&ctl->blocks_done).
 * Call from all threads. */
__device__ __forceinline__ bool ge2_grid_sum(float v, ge2_control *ctl, float *total)
{
    v = ge2_block_sum(v);
    if (threadIdx.x == 0)
        ctl->partials[blockIdx.x] = v;
    if (!ge2_ticket_is_last(&ctl->blocks_done))
        return false;
    *total = ge2_sum_partials(ctl->partials, gridDim.x);
    return true;
}

#endif /* GE2_KERNELS_CUDA_BLOCK_REDUCE_H */
