// BATCH_NORM and its backward ops. The statistics and the parameter
// gradients are per-channel sums, each made by one block in a fixed order
// (kernels/cuda/block_reduce.h), so replay equals eager bitwise; the input
// gradient is elementwise.
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"
#include "ops/norm/norm.h"

#define GE2_BN_THREADS 256

// ------------------------------------------------------------------- kernels

__device__ __forceinline__ long long ge2_bn_at(const ge2_bn_geom &g, long long c, long long k)
{
    return ((k / g.inner) * g.c + c) * g.inner + k % g.inner; // k-th value of channel c
}

// One block per channel c: x [N, C, inner] -> y, saved [2, C] (mean, rstd);
// in training the batch's statistics, which also move the running ones, else
// the running ones.
__global__ void ge2_batch_norm_kernel(ge2_bn_geom g, bool training, float momentum, float eps, float unbias,
                                      const float *x, const float *w, const float *b, float *run_mean,
                                      float *run_var, long long *batches, float *y, float *saved)
{
    long long c = blockIdx.x;
    float mean, var;
    if (training) {
        float s = 0.0f;
        for (long long k = threadIdx.x; k < g.m; k += blockDim.x)
            s += x[ge2_bn_at(g, c, k)];
        mean = ge2_block_sum(s) / (float)g.m;
        float ss = 0.0f;
        for (long long k = threadIdx.x; k < g.m; k += blockDim.x) {
            float d = x[ge2_bn_at(g, c, k)] - mean;
            ss += d * d;
        }
        var = ge2_block_sum(ss) / (float)g.m;
    } else {
        mean = run_mean[c];
        var = run_var[c];
    }
    float rstd = rsqrtf(var + eps);
    if (y)
        for (long long k = threadIdx.x; k < g.m; k += blockDim.x) {
            long long at = ge2_bn_at(g, c, k);
            y[at] = (x[at] - mean) * rstd * w[c] + b[c];
        }
    if (threadIdx.x != 0)
        return;
    if (saved) {
        saved[c] = mean;
        saved[g.c + c] = rstd;
    }
    if (training) {
        run_mean[c] = (1.0f - momentum) * run_mean[c] + momentum * mean;
        run_var[c] = (1.0f - momentum) * run_var[c] + momentum * var * unbias;
        if (batches && c == 0) // unsigned: a checkpoint's huge count wraps, defined
            *batches = (long long)((unsigned long long)*batches + 1ull);
    }
}

// One block per channel: dweight [C] = Σ dy·x̂, dbias [C] = Σ dy
__global__ void ge2_batch_norm_grad_params_kernel(ge2_bn_geom g, const float *dy, const float *x,
                                                  const float *saved, float *dw, float *db)
{
    long long c = blockIdx.x;
    float mean = saved[c], rstd = saved[g.c + c], sw = 0.0f, sb = 0.0f;
    for (long long k = threadIdx.x; k < g.m; k += blockDim.x) {
        long long at = ge2_bn_at(g, c, k);
        sw += dy[at] * (x[at] - mean) * rstd;
        sb += dy[at];
    }
    sw = ge2_block_sum(sw);
    sb = ge2_block_sum(sb);
    if (threadIdx.x == 0) {
        if (dw)
            dw[c] = sw;
        if (db)
            db[c] = sb;
    }
}

// dx [N, C, inner] = weight · rstd / m · (m · dy - dbias - x̂ · dweight)
__global__ void ge2_batch_norm_grad_input_kernel(ge2_bn_geom g, const float *dy, const float *x, const float *w,
                                                 const float *saved, const float *dw, const float *db, float *dx)
{
    long long total = g.m * g.c;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        long long c = (e / g.inner) % g.c;
        float rstd = saved[g.c + c], xhat = (x[e] - saved[c]) * rstd;
        dx[e] = w[c] * rstd / (float)g.m * ((float)g.m * dy[e] - db[c] - xhat * dw[c]);
    }
}

// ----------------------------------------------------------------- launchers

// Inputs [0, n_float) are f32, the rest (num_batches_tracked) i64.
static ge2_status require_dtypes(const ge2_launch *l, int n_float)
{
    for (int i = 0; i < l->n_in; i++) {
        ge2_dtype want = i < n_float ? GE2_F32 : GE2_I64;
        if (l->in[i].dtype != want)
            return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s: input %d is %s; the CUDA kernel takes %s",
                             ge2_cuda_op_name(l), i, ge2_dtype_name(l->in[i].dtype), ge2_dtype_name(want));
    }
    return GE2_OK;
}

extern "C" ge2_status ge2_cuda_batch_norm_launch(const ge2_launch *l)
{
    GE2_TRY(require_dtypes(l, 5));
    ge2_bn_geom g = ge2_bn_geom_of(l->in[0].shape);
    const ge2_batch_norm_attrs *a = &l->node->attrs.batch_norm;
    ge2_batch_norm_kernel<<<(unsigned)g.c, GE2_BN_THREADS, 0, ge2_cuda_stream(l)>>>(
        g, l->training, (float)a->momentum, (float)a->eps, (float)ge2_bn_unbias(g.m), (const float *)l->in[0].data,
        (const float *)l->in[1].data, (const float *)l->in[2].data, (float *)l->in[3].data, (float *)l->in[4].data,
        l->n_in > 5 ? (long long *)l->in[5].data : NULL, (float *)l->out[0].data,
        l->n_out > 1 ? (float *)l->out[1].data : NULL);
    return ge2_cuda_check_launch(l, "ge2_batch_norm_kernel");
}

extern "C" ge2_status ge2_cuda_batch_norm_grad_params_launch(const ge2_launch *l)
{
    GE2_TRY(require_dtypes(l, 3));
    ge2_bn_geom g = ge2_bn_geom_of(l->in[1].shape);
    ge2_batch_norm_grad_params_kernel<<<(unsigned)g.c, GE2_BN_THREADS, 0, ge2_cuda_stream(l)>>>(
        g, (const float *)l->in[0].data, (const float *)l->in[1].data, (const float *)l->in[2].data,
        (float *)l->out[0].data, (float *)l->out[1].data);
    return ge2_cuda_check_launch(l, "ge2_batch_norm_grad_params_kernel");
}

extern "C" ge2_status ge2_cuda_batch_norm_grad_input_launch(const ge2_launch *l)
{
    GE2_TRY(require_dtypes(l, 6));
    if (!l->out[0].data)
        return GE2_OK;
    ge2_bn_geom g = ge2_bn_geom_of(l->in[1].shape);
    ge2_batch_norm_grad_input_kernel<<<ge2_cuda_blocks(g.m * g.c, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0,
                                       ge2_cuda_stream(l)>>>(
        g, (const float *)l->in[0].data, (const float *)l->in[1].data, (const float *)l->in[2].data,
        (const float *)l->in[3].data, (const float *)l->in[4].data, (const float *)l->in[5].data,
        (float *)l->out[0].data);
    return ge2_cuda_check_launch(l, "ge2_batch_norm_grad_input_kernel");
}
