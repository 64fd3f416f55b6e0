// The GEMM registry's device side: times the heuristic's candidates of one
// prepared GEMM on its own buffers (contents as of prepare, see
// gemm_registry.h) and puts the fastest first.
//
// Timing small GEMMs honestly: a lone cublasLtMatmul costs the host a few
// microseconds to enqueue, as much as the kernel itself runs, and a captured
// step never pays that host time. So each sample is queued behind a spin
// kernel that keeps the GPU busy while the host enqueues the whole batch;
// the events around the batch then measure GPU time only.
#include "kernels/cuda/check.h"
#include "kernels/cuda/gemm_registry.h"

#include "graph/alloc.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

// Timed samples per candidate (the median is kept) and GEMMs per sample.
#define SAMPLES 5
#define BATCH 8
// How long the spin kernel holds the GPU while a sample is enqueued.
#define SPIN_NS 100000
// The heuristic's first is kept unless another candidate beats it by more
// than this fraction: closer than that is timing noise, and keeping the
// heuristic's choice then keeps runs reproducible.
#define NOISE 0.03

// ------------------------------------------------------------------ kernels

__global__ void ge2_registry_spin_kernel(unsigned long long ns)
{
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}

// ---------------------------------------------------------------- launchers

static const char *node_op(const ge2_launch *launch)
{
    return ge2_cuda_op_name(launch);
}

// The GPU's name and SM count for the key, asked of the driver once per
// device per process: prepare builds a key for every GEMM node of every key.
#define DEVICE_INFOS 64
typedef struct device_info {
    bool known;
    char name[sizeof cudaDeviceProp::name];
    int sm_count;
} device_info;
static device_info device_infos[DEVICE_INFOS];
static pthread_mutex_t device_infos_lock = PTHREAD_MUTEX_INITIALIZER;

static bool current_device_info(device_info *out)
{
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    bool cacheable = device >= 0 && device < DEVICE_INFOS;
    pthread_mutex_lock(&device_infos_lock);
    bool known = cacheable && device_infos[device].known;
    if (known)
        *out = device_infos[device];
    pthread_mutex_unlock(&device_infos_lock);
    if (known)
        return true;
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    out->known = true;
    memcpy(out->name, prop.name, sizeof out->name);
    out->name[sizeof out->name - 1] = '\0';
    out->sm_count = prop.multiProcessorCount;
    if (cacheable) {
        pthread_mutex_lock(&device_infos_lock);
        device_infos[device] = *out;
        pthread_mutex_unlock(&device_infos_lock);
    }
    return true;
}

static int64_t layout_attr(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr, int64_t fallback)
{
    size_t written = 0;
    uint64_t u = 0;
    int32_t i = 0;
    if (attr == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT)
        return cublasLtMatrixLayoutGetAttribute(l, attr, &i, sizeof i, &written) == CUBLAS_STATUS_SUCCESS
                   ? i
                   : fallback;
    return cublasLtMatrixLayoutGetAttribute(l, attr, &u, sizeof u, &written) == CUBLAS_STATUS_SUCCESS
               ? (int64_t)u
               : fallback;
}

// The problem's key text. False when cuBLASLt or CUDA cannot describe it
// (then it is simply not tuned).
static bool problem_key(const ge2_launch *launch, const ge2_gemm_problem *pb, const char *families, char *buf,
                        size_t size)
{
    size_t written = 0;
    int32_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
    if (cublasLtMatmulDescGetAttribute(pb->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta, &written) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescGetAttribute(pb->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb, &written) !=
            CUBLAS_STATUS_SUCCESS)
        return false;
    device_info gpu;
    if (!current_device_info(&gpu))
        return false;
    ge2_gemm_key k;
    memset(&k, 0, sizeof k);
    k.op = node_op(launch);
    k.epilogue = pb->epilogue;
    k.trans_a = ta != CUBLAS_OP_N;
    k.trans_b = tb != CUBLAS_OP_N;
    k.m = layout_attr(pb->ld, CUBLASLT_MATRIX_LAYOUT_ROWS, -1);
    k.n = layout_attr(pb->ld, CUBLASLT_MATRIX_LAYOUT_COLS, -1);
    k.k = layout_attr(pb->la, k.trans_a ? CUBLASLT_MATRIX_LAYOUT_ROWS : CUBLASLT_MATRIX_LAYOUT_COLS, -1);
    k.batch = layout_attr(pb->ld, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 1);
    k.dtype = ge2_dtype_name(launch->out[0].dtype);
    k.tf32 = launch->tf32;
    k.bf16 = ge2_launch_half_gemm(launch);
    k.f16 = launch->f16_operands;
    k.align_a = pb->align_a;
    k.align_b = pb->align_b;
    k.align_d = pb->align_d;
    k.workspace_bytes = pb->workspace ? pb->workspace_bytes : 0;
    k.gpu = gpu.name;
    k.sm_count = gpu.sm_count;
    k.lt_version = (int)cublasLtGetVersion();
    k.kernels = families;
    if (k.m < 0 || k.n < 0 || k.k < 0)
        return false;
    if (ge2_gemm_key_format(&k, buf, size) != GE2_OK) {
        ge2_clear_error();
        return false;
    }
    return true;
}

// One timing candidate: a cuBLASLt algorithm or a tiled configuration.
typedef struct candidate {
    bool tiled;
    ge2_tiled_config config;
    cublasLtMatmulHeuristicResult_t lt;
} candidate;

// Runs c once; false if it refuses this problem (then it simply loses).
static bool run_once(const ge2_gemm_problem *pb, const ge2_tiled_gemm *tg, const candidate *c)
{
    if (c->tiled) {
        if (ge2_tiled_gemm_run(tg, c->config, pb->stream, "gemm registry") == GE2_OK)
            return true;
        ge2_clear_error();
        return false;
    }
    const float one = 1.0f, zero = 0.0f;
    return cublasLtMatmul(pb->lt, pb->desc, &one, pb->a, pb->la, pb->b, pb->lb, &zero, pb->d, pb->ld, pb->d, pb->ld,
                          &c->lt.algo, pb->workspace, pb->workspace ? pb->workspace_bytes : 0,
                          pb->stream) == CUBLAS_STATUS_SUCCESS;
}

// Where a launch's outputs are kept while candidates overwrite them.
typedef struct saved_outputs {
    void *copy; // device
    size_t offset[GE2_MAX_OUTPUTS], bytes[GE2_MAX_OUTPUTS];
} saved_outputs;

static ge2_status outputs_copy(const ge2_launch *launch, saved_outputs *s, bool restore)
{
    for (int i = 0; i < launch->n_out; i++) {
        if (!s->bytes[i])
            continue;
        char *copy = (char *)s->copy + s->offset[i];
        void *dst = restore ? launch->out[i].data : (void *)copy;
        const void *src = restore ? (const void *)copy : launch->out[i].data;
        cudaError_t e = cudaMemcpyAsync(dst, src, s->bytes[i], cudaMemcpyDeviceToDevice, ge2_cuda_stream(launch));
        if (e != cudaSuccess)
            return ge2_error(GE2_ERR_CUDA, "ge2_%s (node %d): %s output %d for autotuning failed: %s",
                             node_op(launch), launch->node->id, restore ? "restoring" : "saving", i,
                             cudaGetErrorString(e));
    }
    return GE2_OK;
}

static ge2_status outputs_save(const ge2_launch *launch, saved_outputs *s)
{
    memset(s, 0, sizeof *s);
    size_t total = 0;
    for (int i = 0; i < launch->n_out; i++) {
        const ge2_view *v = &launch->out[i];
        if (!v->data)
            continue;
        s->offset[i] = total;
        s->bytes[i] = (size_t)ge2_shape_numel(v->shape) * ge2_dtype_size(v->dtype);
        total += (s->bytes[i] + 255) / 256 * 256;
    }
    if (total == 0)
        return GE2_OK;
    cudaError_t e = cudaMalloc(&s->copy, total);
    if (e != cudaSuccess) {
        cudaGetLastError();
        s->copy = NULL;
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_%s (node %d): no device memory (%zu bytes) to autotune in",
                         node_op(launch), launch->node->id, total);
    }
    return outputs_copy(launch, s, false);
}

static ge2_status outputs_restore(const ge2_launch *launch, saved_outputs *s)
{
    ge2_status st = s->copy ? outputs_copy(launch, s, true) : GE2_OK;
    // The copies are done before the buffer goes: cudaFree waits for the device.
    cudaError_t e = cudaStreamSynchronize(ge2_cuda_stream(launch));
    if (s->copy)
        cudaFree(s->copy);
    s->copy = NULL;
    if (st == GE2_OK && e != cudaSuccess)
        st = ge2_error(GE2_ERR_CUDA, "ge2_%s (node %d): autotuning failed: %s", node_op(launch), launch->node->id,
                       cudaGetErrorString(e));
    return st;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Median microseconds per GEMM of one candidate, or INFINITY if it refuses
// to run here (the heuristic's list can hold configurations that fail at
// run time, a cluster may not fit; those simply lose).
static ge2_status time_candidate(const ge2_launch *launch, const ge2_gemm_problem *pb, const ge2_tiled_gemm *tg,
                                 const candidate *c, cudaEvent_t *ev, double *us)
{
    *us = INFINITY;
    if (!run_once(pb, tg, c)) // also the warm-up
        return GE2_OK;
    for (int s = 0; s < SAMPLES; s++) {
        ge2_registry_spin_kernel<<<1, 1, 0, pb->stream>>>(SPIN_NS);
        GE2_CUDA_CHECK(launch, "ge2_registry_spin_kernel");
        GE2_TRY(ge2_cuda_check_call(launch, cudaEventRecord(ev[2 * s], pb->stream), "cudaEventRecord"));
        for (int b = 0; b < BATCH; b++)
            if (!run_once(pb, tg, c))
                return GE2_OK;
        GE2_TRY(ge2_cuda_check_call(launch, cudaEventRecord(ev[2 * s + 1], pb->stream), "cudaEventRecord"));
    }
    double sample[SAMPLES];
    for (int s = 0; s < SAMPLES; s++) {
        float ms = 0;
        cudaError_t e = cudaEventSynchronize(ev[2 * s + 1]);
        if (e == cudaSuccess)
            e = cudaEventElapsedTime(&ms, ev[2 * s], ev[2 * s + 1]);
        if (e != cudaSuccess)
            return ge2_error(GE2_ERR_CUDA, "ge2_%s (node %d): timing a GEMM candidate failed: %s", node_op(launch),
                             launch->node->id, cudaGetErrorString(e));
        sample[s] = 1000.0 * ms / BATCH;
    }
    qsort(sample, SAMPLES, sizeof sample[0], compare_double);
    *us = sample[SAMPLES / 2];
    return GE2_OK;
}

// Times every candidate into us[0..n); outputs are saved and restored around it.
static ge2_status time_all(const ge2_launch *launch, const ge2_gemm_problem *pb, const ge2_tiled_gemm *tg,
                           const candidate *cands, int n, double *us)
{
    cudaEvent_t ev[2 * SAMPLES] = {};
    saved_outputs saved;
    ge2_status st = outputs_save(launch, &saved);
    for (int i = 0; i < 2 * SAMPLES && st == GE2_OK; i++)
        if (cudaEventCreate(&ev[i]) != cudaSuccess) {
            ev[i] = NULL;
            st = ge2_error(GE2_ERR_CUDA, "ge2_%s (node %d): cudaEventCreate failed", node_op(launch),
                           launch->node->id);
        }
    for (int i = 0; i < n && st == GE2_OK; i++)
        st = time_candidate(launch, pb, tg, &cands[i], ev, &us[i]);
    ge2_status restored = outputs_restore(launch, &saved);
    for (int i = 0; i < 2 * SAMPLES; i++)
        if (ev[i])
            cudaEventDestroy(ev[i]);
    return st != GE2_OK ? st : restored;
}

// Whether two algorithms are the same configuration: their bytes first; if
// those differ (bits cuBLASLt does not promise to keep from one process to
// the next), every configuration attribute that selects a kernel.
static bool same_algo(const cublasLtMatmulAlgo_t *a, const uint8_t *stored)
{
    if (memcmp(a, stored, GE2_GEMM_ALGO_BYTES) == 0)
        return true;
    cublasLtMatmulAlgo_t b;
    memcpy(&b, stored, sizeof b);
    static const cublasLtMatmulAlgoConfigAttributes_t attrs[] = {
        CUBLASLT_ALGO_CONFIG_ID,           CUBLASLT_ALGO_CONFIG_TILE_ID,          CUBLASLT_ALGO_CONFIG_STAGES_ID,
        CUBLASLT_ALGO_CONFIG_SPLITK_NUM,   CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING,
        CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID,
    };
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        // The size must match the attribute's exactly: ask for it first.
        size_t size = 0, written = 0;
        uint64_t va = 0, vb = 0;
        if (cublasLtMatmulAlgoConfigGetAttribute(a, attrs[i], NULL, 0, &size) != CUBLAS_STATUS_SUCCESS ||
            size == 0 || size > sizeof va ||
            cublasLtMatmulAlgoConfigGetAttribute(a, attrs[i], &va, size, &written) != CUBLAS_STATUS_SUCCESS ||
            cublasLtMatmulAlgoConfigGetAttribute(&b, attrs[i], &vb, size, &written) != CUBLAS_STATUS_SUCCESS ||
            va != vb)
            return false;
    }
    return true;
}

// Most candidates one problem is timed over: the heuristic's and their split-K neighbours.
#define MAX_CANDIDATES 64

static bool algo_u32(const cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoConfigAttributes_t attr, uint32_t *v)
{
    size_t written = 0;
    *v = 0;
    return cublasLtMatmulAlgoConfigGetAttribute(algo, attr, v, sizeof *v, &written) == CUBLAS_STATUS_SUCCESS;
}

// The heuristic ranks whole configurations, and for the small, deep GEMMs of
// an MLP step its split-K count is a guess between too few CTAs and an extra
// reduction. So each candidate's neighbours (split-K 1, half, double) join
// the candidates where cuBLASLt accepts them for this problem and workspace.
// The heuristic's own come first, in its order.
static int expand_candidates(const ge2_gemm_problem *pb, const cublasLtMatmulHeuristicResult_t *cands, int n,
                             cublasLtMatmulHeuristicResult_t *out)
{
    int m = 0;
    for (int i = 0; i < n && m < MAX_CANDIDATES; i++)
        out[m++] = cands[i];
    for (int i = 0; i < n; i++) {
        uint32_t split = 1, scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
        if (!algo_u32(&cands[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split) ||
            !algo_u32(&cands[i].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme) || split < 1)
            continue;
        const uint32_t splits[] = {1, split / 2, 2 * split};
        for (size_t j = 0; j < sizeof splits / sizeof splits[0] && m < MAX_CANDIDATES; j++) {
            uint32_t s = splits[j];
            if (s < 1 || s == split || s > 64)
                continue;
            uint32_t r = s == 1 ? CUBLASLT_REDUCTION_SCHEME_NONE
                                : scheme != CUBLASLT_REDUCTION_SCHEME_NONE ? scheme : CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
            cublasLtMatmulHeuristicResult_t v = cands[i];
            if (cublasLtMatmulAlgoConfigSetAttribute(&v.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &s, sizeof s) !=
                    CUBLAS_STATUS_SUCCESS ||
                cublasLtMatmulAlgoConfigSetAttribute(&v.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &r, sizeof r) !=
                    CUBLAS_STATUS_SUCCESS ||
                cublasLtMatmulAlgoCheck(pb->lt, pb->desc, pb->la, pb->lb, pb->ld, pb->ld, &v.algo, &v) !=
                    CUBLAS_STATUS_SUCCESS ||
                v.workspaceSize > (pb->workspace ? pb->workspace_bytes : 0))
                continue;
            bool seen = false;
            for (int k = 0; k < m && !seen; k++)
                seen = memcmp(&out[k].algo, &v.algo, sizeof v.algo) == 0;
            if (!seen)
                out[m++] = v;
        }
    }
    return m;
}

// autotune_log: every candidate's time on stderr, for whoever tunes the tuner.
static void log_timings(const char *key, const candidate *all, const double *us, int n)
{
    for (int i = 0; i < n; i++) {
        char what[64];
        if (all[i].tiled) {
            ge2_tiled_config_str(all[i].config, what, sizeof what);
        } else {
            int32_t id = -1, split = 1;
            size_t written = 0;
            cublasLtMatmulAlgoConfigGetAttribute(&all[i].lt.algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &written);
            cublasLtMatmulAlgoConfigGetAttribute(&all[i].lt.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split,
                                                 sizeof split, &written);
            snprintf(what, sizeof what, "cublasLt algo %d splitK %d", (int)id, (int)split);
        }
        fprintf(stderr, "ge2 autotune: %s: %-32s %8.2f us%s\n", key, what, us[i], i == 0 ? " (first)" : "");
    }
}

// The families this problem's candidates come from, for the key.
static const char *families_name(int n_lt, int n_tiled)
{
    return n_lt > 0 && n_tiled > 0 ? "lt+tiled" : n_tiled > 0 ? "tiled" : "lt";
}

static int sm_count_now(void)
{
    device_info gpu;
    return current_device_info(&gpu) ? gpu.sm_count : 1;
}

// Makes all[i] the launch's kernel and says so in *sel.
static void take(const candidate *c, cublasLtMatmulHeuristicResult_t *cands, ge2_gemm_selection *sel)
{
    sel->tiled = c->tiled;
    sel->config = c->config;
    if (!c->tiled)
        cands[0] = c->lt; // only the first is ever run
}

ge2_status ge2_gemm_select(const ge2_launch *launch, const ge2_gemm_problem *pb,
                           cublasLtMatmulHeuristicResult_t *cands, int n, const ge2_tiled_gemm *tiled,
                           ge2_gemm_selection *sel)
{
    static_assert(sizeof cands[0].algo == GE2_GEMM_ALGO_BYTES, "cublasLtMatmulAlgo_t changed size");
    memset(sel, 0, sizeof *sel);
    sel->source = GE2_GEMM_HEURISTIC;
    static const ge2_kernel_settings defaults = GE2_KERNEL_SETTINGS_DEFAULTS;
    const ge2_kernel_settings *settings = launch->settings ? launch->settings : &defaults;
    const ge2_gemm_kernels families = settings->gemm_kernels;
    const bool autotune = settings->autotune;
    // Candidates in order of preference without timing: the heuristic's, its
    // split-K neighbours (tuning only), then the tiled configurations (the
    // work model's favourite first). A family switched off offers none,
    // unless the other has none either.
    candidate *all = (candidate *)ge2_calloc(MAX_CANDIDATES + GE2_TILED_MAX_CANDIDATES, sizeof *all);
    if (!all)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_%s (node %d): out of host memory choosing a GEMM kernel",
                         node_op(launch), launch->node->id);
    int n_lt = 0, n_tiled = 0;
    // ge2's tiled GEMM sums fp32 operands: it does not round them as precision BF16 or FP16 asks
    const bool tiled_ok = tiled && pb->d && !ge2_launch_half_gemm(launch) && ge2_tiled_supports(tiled, NULL, 0);
    if (n > 0 && (families != GE2_GEMM_KERNELS_TILED || !tiled_ok)) {
        cublasLtMatmulHeuristicResult_t lt[MAX_CANDIDATES];
        n_lt = autotune ? expand_candidates(pb, cands, n, lt) : 1;
        for (int i = 0; i < n_lt; i++)
            all[i].lt = autotune ? lt[i] : cands[0];
    }
    if (tiled_ok && (families != GE2_GEMM_KERNELS_CUBLASLT || n_lt == 0)) {
        ge2_tiled_config cfg[GE2_TILED_MAX_CANDIDATES];
        n_tiled = ge2_tiled_candidates(tiled, sm_count_now(), cfg, autotune ? GE2_TILED_MAX_CANDIDATES : 1);
        for (int i = 0; i < n_tiled; i++) {
            all[n_lt + i].tiled = true;
            all[n_lt + i].config = cfg[i];
        }
    }
    const int n_all = n_lt + n_tiled;
    sel->n_candidates = n_all;
    ge2_status st = GE2_OK;
    char key[GE2_GEMM_KEY_MAX];
    ge2_gemm_choice choice;
    double us[MAX_CANDIDATES + GE2_TILED_MAX_CANDIDATES];
    int best = 0;
    if (n_all == 0) {
        st = ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s (node %d): no GEMM kernel takes this problem", node_op(launch),
                       launch->node->id);
        goto done;
    }
    // No D: this key does not need the GEMM's output, the launch skips it.
    if (n_all < 2 || !pb->d || !autotune || !problem_key(launch, pb, families_name(n_lt, n_tiled), key, sizeof key)) {
        take(&all[0], cands, sel);
        ge2_gemm_registry_count(GE2_GEMM_HEURISTIC, 0);
        goto done;
    }
    // A choice made among a different number of candidates (a new kernel or
    // tile since, or a cuBLASLt that offers other algorithms) is tuned again.
    if (ge2_gemm_registry_lookup(settings->kernel_cache, key, &choice) && choice.n_candidates == n_all) {
        for (int i = 0; i < n_all; i++) {
            bool same = all[i].tiled ? choice.tiled && choice.config.tile == all[i].config.tile &&
                                           choice.config.splits == all[i].config.splits
                                     : !choice.tiled && same_algo(&all[i].lt.algo, choice.algo);
            if (!same)
                continue;
            take(&all[i], cands, sel);
            sel->source = GE2_GEMM_CACHED;
            sel->us = choice.us;
            sel->n_candidates = choice.n_candidates;
            ge2_gemm_registry_count(GE2_GEMM_CACHED, 0);
            goto done;
        }
        // The remembered kernel is not offered any more: tune again.
    }
    st = time_all(launch, pb, tiled, all, n_all, us);
    if (st == GE2_ERR_OUT_OF_MEMORY) { // no room to save the outputs: untuned, not failed
        ge2_clear_error();
        st = GE2_OK;
        take(&all[0], cands, sel);
        ge2_gemm_registry_count(GE2_GEMM_HEURISTIC, 0);
        goto done;
    }
    if (st != GE2_OK)
        goto done;
    if (settings->autotune_log)
        log_timings(key, all, us, n_all);
    for (int i = 1; i < n_all; i++)
        if (us[i] < us[best])
            best = i;
    if (best != 0 && us[best] > (1.0 - NOISE) * us[0])
        best = 0;
    take(&all[best], cands, sel);
    if (!isfinite(us[best])) {
        ge2_gemm_registry_count(GE2_GEMM_HEURISTIC, n_all);
        goto done;
    }
    memset(&choice, 0, sizeof choice);
    choice.tiled = all[best].tiled;
    choice.config = all[best].config;
    if (!choice.tiled)
        memcpy(choice.algo, &all[best].lt.algo, GE2_GEMM_ALGO_BYTES);
    choice.us = us[best];
    choice.n_candidates = n_all;
    sel->source = GE2_GEMM_TUNED;
    sel->us = us[best];
    ge2_gemm_registry_count(GE2_GEMM_TUNED, n_all);
    st = ge2_gemm_registry_store(settings->kernel_cache, key, &choice);
done:
    ge2_free(all);
    return st;
}
