/* cuDNN's backend API through dlopen (cudnn.h says why). */
#include "kernels/cuda/cudnn.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <cudnn_graph.h>

#include "graph/error.h"
#include "kernels/dynlib.h"

/* The handle attributes of operation graphs and plans are deprecated in
 * later 9.x releases, which still take them; earlier 9.x releases need them. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define CUDNN_LIBRARY "libcudnn.so.9"

static struct {
    pthread_once_t once;
    ge2_status status;
    char error[256];
    char version[32];
    void *lib;
    cudnnHandle_t handle;
    size_t (*get_version)(void);
    const char *(*get_error_string)(cudnnStatus_t);
    cudnnStatus_t (*create)(cudnnHandle_t *);
    cudnnStatus_t (*set_stream)(cudnnHandle_t, cudaStream_t);
    cudnnStatus_t (*create_descriptor)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t *);
    cudnnStatus_t (*destroy_descriptor)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*finalize)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*set_attribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                   cudnnBackendAttributeType_t, int64_t, const void *);
    cudnnStatus_t (*get_attribute)(cudnnBackendDescriptor_t const, cudnnBackendAttributeName_t,
                                   cudnnBackendAttributeType_t, int64_t, int64_t *, void *);
    cudnnStatus_t (*execute)(cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t);
} cudnn = {.once = PTHREAD_ONCE_INIT};

static void load(void)
{
    cudnn.status = GE2_ERR_UNSUPPORTED;
    const ge2_dynlib_symbol syms[] = {
        {(void **)&cudnn.get_version, "cudnnGetVersion"},
        {(void **)&cudnn.get_error_string, "cudnnGetErrorString"},
        {(void **)&cudnn.create, "cudnnCreate"},
        {(void **)&cudnn.set_stream, "cudnnSetStream"},
        {(void **)&cudnn.create_descriptor, "cudnnBackendCreateDescriptor"},
        {(void **)&cudnn.destroy_descriptor, "cudnnBackendDestroyDescriptor"},
        {(void **)&cudnn.finalize, "cudnnBackendFinalize"},
        {(void **)&cudnn.set_attribute, "cudnnBackendSetAttribute"},
        {(void **)&cudnn.get_attribute, "cudnnBackendGetAttribute"},
        {(void **)&cudnn.execute, "cudnnBackendExecute"},
    };
    cudnn.lib = ge2_dynlib_open(CUDNN_LIBRARY, "cuDNN", syms, sizeof syms / sizeof syms[0], cudnn.error,
                                sizeof cudnn.error);
    if (!cudnn.lib)
        return;
    size_t v = cudnn.get_version();
    snprintf(cudnn.version, sizeof cudnn.version, "cuDNN %zu.%zu.%zu", v / 10000, v / 100 % 100, v % 100);
    if (v < 90000) {
        snprintf(cudnn.error, sizeof cudnn.error, "%s is %s; ge2 needs cuDNN 9", CUDNN_LIBRARY, cudnn.version);
        return;
    }
    cudnnStatus_t st = cudnn.create(&cudnn.handle);
    if (st != CUDNN_STATUS_SUCCESS) {
        snprintf(cudnn.error, sizeof cudnn.error, "cudnnCreate: %s", cudnn.get_error_string(st));
        return;
    }
    cudnn.status = GE2_OK;
}

ge2_status ge2_cudnn_available(void)
{
    pthread_once(&cudnn.once, load);
    return cudnn.status == GE2_OK ? GE2_OK : ge2_error(cudnn.status, "%s", cudnn.error);
}

const char *ge2_cudnn_version(void) { return cudnn.version; }

static ge2_status check(cudnnStatus_t st, const char *what)
{
    if (st == CUDNN_STATUS_SUCCESS)
        return GE2_OK;
    return ge2_error(GE2_ERR_CUDA, "cuDNN %s: %s", what, cudnn.get_error_string(st));
}

ge2_status ge2_cudnn_new(int type, ge2_cudnn_desc *out)
{
    GE2_TRY(ge2_cudnn_available());
    *out = NULL;
    return check(cudnn.create_descriptor((cudnnBackendDescriptorType_t)type, (cudnnBackendDescriptor_t *)out),
                 "cudnnBackendCreateDescriptor");
}

ge2_status ge2_cudnn_set(ge2_cudnn_desc desc, int name, int type, int64_t count, const void *values)
{
    return check(cudnn.set_attribute(desc, (cudnnBackendAttributeName_t)name, (cudnnBackendAttributeType_t)type,
                                     count, values),
                 "cudnnBackendSetAttribute");
}

ge2_status ge2_cudnn_finalize(ge2_cudnn_desc desc) { return check(cudnn.finalize(desc), "cudnnBackendFinalize"); }

void ge2_cudnn_free(ge2_cudnn_desc desc)
{
    if (desc)
        cudnn.destroy_descriptor(desc);
}

/* set(...) calls on d until one fails; then d is freed */
#define SET(d, name, type, count, values)                                                                         \
    do {                                                                                                          \
        ge2_status st_ = ge2_cudnn_set((d), (name), (type), (count), (values));                                   \
        if (st_ != GE2_OK) {                                                                                      \
            ge2_cudnn_free(d);                                                                                    \
            return st_;                                                                                           \
        }                                                                                                         \
    } while (0)

static ge2_status finalize_or_free(ge2_cudnn_desc d, ge2_cudnn_desc *out)
{
    ge2_status st = ge2_cudnn_finalize(d);
    if (st != GE2_OK) {
        ge2_cudnn_free(d);
        return st;
    }
    *out = d;
    return GE2_OK;
}

ge2_status ge2_cudnn_tensor_of(const ge2_cudnn_tensor_spec *spec, ge2_cudnn_desc *out)
{
    int64_t strides[8];
    const int ndim = spec->ndim;
    if (ndim < 1 || ndim > 8)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_cudnn_tensor_of: %d dims", ndim);
    strides[ndim - 1] = 1;
    for (int i = ndim - 2; i >= 0; i--)
        strides[i] = strides[i + 1] * spec->dims[i + 1];
    if (spec->strides)
        memcpy(strides, spec->strides, sizeof(int64_t) * (size_t)ndim);
    const cudnnDataType_t type = (cudnnDataType_t)spec->data_type;
    const int64_t alignment = spec->alignment ? spec->alignment : 16;
    const bool is_virtual = spec->is_virtual, by_value = spec->by_value;
    ge2_cudnn_desc d;
    GE2_TRY(ge2_cudnn_new(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &d));
    SET(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    SET(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, ndim, spec->dims);
    SET(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, ndim, strides);
    SET(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &spec->uid);
    SET(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
    if (is_virtual)
        SET(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
    if (by_value)
        SET(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
    return finalize_or_free(d, out);
}

ge2_status ge2_cudnn_conv_desc(const int64_t stride[2], const int64_t padding[2], const int64_t dilation[2],
                               ge2_cudnn_desc *out)
{
    int64_t dims = 2;
    cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    ge2_cudnn_desc d;
    GE2_TRY(ge2_cudnn_new(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &d));
    SET(d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
    SET(d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32);
    SET(d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
    SET(d, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride);
    SET(d, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, padding);
    SET(d, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, padding);
    SET(d, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation);
    return finalize_or_free(d, out);
}

/* The engine config's numerical notes, as a bit set; its global index. */
static ge2_status engine_of(ge2_cudnn_desc cfg, unsigned *notes, int64_t *index)
{
    ge2_cudnn_desc engine;
    GE2_TRY(ge2_cudnn_new(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine));
    int64_t n = 0;
    cudnnBackendNumericalNote_t list[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    ge2_status st = check(cudnn.get_attribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                              &n, &engine),
                          "engine of a config");
    if (st == GE2_OK)
        st = check(cudnn.get_attribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                       CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, list),
                   "engine numerical notes");
    *notes = 0;
    for (int64_t i = 0; st == GE2_OK && i < n; i++)
        *notes |= 1u << list[i];
    if (st == GE2_OK)
        st = check(cudnn.get_attribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, index),
                   "engine index");
    ge2_cudnn_free(engine);
    return st;
}

static void notes_string(unsigned notes, char *buf, size_t size)
{
    static const char *const names[CUDNN_NUMERICAL_NOTE_TYPE_COUNT] = {
        "tensor core", "down-converted inputs", "reduced-precision reduction", "FFT", "nondeterministic",
        "winograd", "winograd 4x4", "winograd 6x6", "winograd 13x13", "strict NaN propagation"};
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT && used < size; i++)
        if (notes & (1u << i))
            used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? ", " : "", names[i]);
}

/* The fingerprint of a configuration's knob choices (FNV-1a over each
 * knob's type and value, in cuDNN's order); never 0, so 0 can mean "any". */
static uint64_t knobs_of(ge2_cudnn_desc cfg)
{
    enum { MAX_KNOBS = 32 };
    ge2_cudnn_desc knobs[MAX_KNOBS] = {0};
    uint64_t h = 0xcbf29ce484222325ull;
    int64_t n = 0;
    int made = 0;
    while (made < MAX_KNOBS && ge2_cudnn_new(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &knobs[made]) == GE2_OK)
        made++;
    if (made == MAX_KNOBS && cudnn.get_attribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                                 MAX_KNOBS, &n, knobs) == CUDNN_STATUS_SUCCESS) {
        for (int64_t i = 0; i < n && i < MAX_KNOBS; i++) {
            cudnnBackendKnobType_t type = 0;
            int64_t value = 0, got = 0;
            if (cudnn.get_attribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &got, &type) !=
                    CUDNN_STATUS_SUCCESS ||
                cudnn.get_attribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &got, &value) !=
                    CUDNN_STATUS_SUCCESS)
                continue;
            const int64_t pair[2] = {(int64_t)type, value};
            const unsigned char *b = (const unsigned char *)pair;
            for (size_t k = 0; k < sizeof pair; k++)
                h = (h ^ b[k]) * 0x100000001b3ull;
        }
    }
    for (int i = 0; i < made; i++)
        ge2_cudnn_free(knobs[i]);
    return h ? h : 1;
}

static ge2_cudnn_timer test_timer;
static void *test_timer_user;

void ge2_cudnn_set_timer(ge2_cudnn_timer timer, void *user)
{
    test_timer = timer;
    test_timer_user = user;
}

/* Median-free best of a few runs of plan on the timing buffers, in µs;
 * negative when a run fails (the plan is then left out). */
static float time_plan(const ge2_cudnn_plan *plan, const ge2_cudnn_timing *t, void *workspace)
{
    enum { WARMUP = 1, RUNS = 5 };
    cudaEvent_t start = NULL, stop = NULL;
    float best = -1.0f;
    if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess)
        goto done;
    for (int i = 0; i < WARMUP + RUNS; i++) {
        float ms = 0.0f;
        if (cudaEventRecord(start, (cudaStream_t)t->stream) != cudaSuccess ||
            ge2_cudnn_execute(plan, t->stream, t->n, t->uids, t->ptrs, workspace) != GE2_OK ||
            cudaEventRecord(stop, (cudaStream_t)t->stream) != cudaSuccess || cudaEventSynchronize(stop) != cudaSuccess ||
            cudaEventElapsedTime(&ms, start, stop) != cudaSuccess) {
            best = -1.0f;
            break;
        }
        if (i >= WARMUP && (best < 0 || ms * 1e3f < best))
            best = ms * 1e3f;
    }
done:
    cudaGetLastError();
    if (start)
        cudaEventDestroy(start);
    if (stop)
        cudaEventDestroy(stop);
    return best;
}

/* The fastest of the n finalized candidates (freeing the rest), or the
 * first one when they cannot be timed. */
static void choose(ge2_cudnn_plan *cands, int n, const ge2_cudnn_timing *t, ge2_cudnn_plan *out)
{
    int best = 0;
    size_t ws = 0;
    for (int i = 0; i < n; i++)
        ws = cands[i].workspace_bytes > ws ? cands[i].workspace_bytes : ws;
    void *workspace = NULL;
    if (t && n > 1 && (ws == 0 || cudaMalloc(&workspace, ws) == cudaSuccess)) {
        best = -1;
        for (int i = 0; i < n; i++) {
            cands[i].us = time_plan(&cands[i], t, workspace);
            if (test_timer && cands[i].us >= 0)
                cands[i].us = test_timer(test_timer_user, cands, n, i, cands[i].us);
            if (cands[i].us >= 0 && (best < 0 || cands[i].us < cands[best].us))
                best = i;
        }
        if (best < 0)
            best = 0;
        else
            cands[best].timed = n;
    }
    cudaGetLastError();
    if (workspace)
        cudaFree(workspace);
    for (int i = 0; i < n; i++)
        if (i != best)
            ge2_cudnn_plan_free(&cands[i]);
    *out = cands[best];
}

/* The numerical notes an engine must not have under numerics */
static unsigned refused_notes(ge2_cudnn_numerics numerics)
{
    const unsigned sums = 1u << CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC |
                          1u << CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS |
                          1u << CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION | 1u << CUDNN_NUMERICAL_NOTE_FFT;
    switch (numerics) {
    case GE2_CUDNN_FP32: return sums | 1u << CUDNN_NUMERICAL_NOTE_TENSOR_CORE;
    case GE2_CUDNN_FP32_SUMS:
        return sums | 1u << CUDNN_NUMERICAL_NOTE_WINOGRAD | 1u << CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4 |
               1u << CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6 | 1u << CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13;
    default: return 1u << CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
    }
}

ge2_status ge2_cudnn_plan_new(const ge2_cudnn_desc *ops, int n_ops, ge2_cudnn_numerics numerics,
                              const ge2_cudnn_timing *timing, const ge2_cudnn_choice *prefer, ge2_cudnn_plan *out,
                              char *why, size_t why_size)
{
    memset(out, 0, sizeof *out);
    snprintf(why, why_size, "no engine");
    ge2_cudnn_desc graph = NULL, heur = NULL;
    GE2_TRY(ge2_cudnn_new(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph));
    SET(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &cudnn.handle);
    SET(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n_ops, ops);
    GE2_TRY(finalize_or_free(graph, &graph));
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    ge2_status st = ge2_cudnn_new(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur);
    if (st == GE2_OK)
        st = ge2_cudnn_set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
    if (st == GE2_OK)
        st = ge2_cudnn_set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (st == GE2_OK)
        st = ge2_cudnn_finalize(heur);
    enum { MAX_CONFIGS = 64 };
    ge2_cudnn_desc cfgs[MAX_CONFIGS] = {0};
    int64_t count = 0;
    if (st == GE2_OK)
        st = check(cudnn.get_attribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                       NULL),
                   "heuristics results");
    count = count > MAX_CONFIGS ? MAX_CONFIGS : count;
    for (int64_t i = 0; st == GE2_OK && i < count; i++)
        st = ge2_cudnn_new(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[i]);
    if (st == GE2_OK)
        st = check(cudnn.get_attribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                       &count, cfgs),
                   "heuristics results");
    const unsigned refused = refused_notes(numerics);
    ge2_cudnn_plan cands[GE2_CUDNN_TIMED];
    int n = 0, skipped = 0, broken = 0;
    /* pass 0: the preferred configuration alone; pass 1 (when it is not
     * there): the heuristics' order */
    for (int pass = prefer ? 0 : 1; pass < 2 && n == 0; pass++) {
        const int wanted = pass == 0 || !timing ? 1 : GE2_CUDNN_TIMED;
        skipped = broken = 0;
        for (int64_t i = 0; st == GE2_OK && i < count && n < wanted; i++) {
            unsigned notes;
            int64_t index;
            if (engine_of(cfgs[i], &notes, &index) != GE2_OK) {
                broken++;
                continue;
            }
            if ((pass == 0 && index != prefer->engine) || (notes & refused)) {
                skipped++;
                continue;
            }
            const uint64_t knobs = knobs_of(cfgs[i]);
            if (pass == 0 && prefer->knobs && knobs != prefer->knobs) {
                skipped++;
                continue;
            }
            ge2_cudnn_desc plan;
            if (ge2_cudnn_new(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) != GE2_OK)
                break;
            int64_t ws = 0, got = 0;
            if (ge2_cudnn_set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &cudnn.handle) != GE2_OK ||
                ge2_cudnn_set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                              &cfgs[i]) != GE2_OK ||
                ge2_cudnn_finalize(plan) != GE2_OK ||
                cudnn.get_attribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got, &ws) !=
                    CUDNN_STATUS_SUCCESS) {
                if (n == 0)
                    snprintf(why, why_size, "engine %lld did not finalize", (long long)index);
                ge2_cudnn_free(plan);
                continue;
            }
            ge2_cudnn_plan *c = &cands[n++];
            memset(c, 0, sizeof *c);
            c->plan = plan;
            c->workspace_bytes = (size_t)ws;
            c->engine = index;
            c->knobs = knobs;
            notes_string(notes, c->notes, sizeof c->notes);
        }
    }
    if (st == GE2_OK && n == 0 && skipped == count)
        snprintf(why, why_size, "%lld engines, none deterministic with the arithmetic allowed", (long long)count);
    else if (st == GE2_OK && n == 0 && broken > 0)
        snprintf(why, why_size, "%d of %lld engines could not be queried", broken, (long long)count);
    for (int64_t i = 0; i < MAX_CONFIGS; i++)
        ge2_cudnn_free(cfgs[i]);
    ge2_cudnn_free(heur);
    ge2_cudnn_free(graph);
    if (st != GE2_OK) {
        for (int i = 0; i < n; i++)
            ge2_cudnn_plan_free(&cands[i]);
        snprintf(why, why_size, "%s", ge2_last_error());
        return st;
    }
    if (n == 0)
        return ge2_error(GE2_ERR_UNSUPPORTED, "cuDNN: %s", why);
    choose(cands, n, timing, out);
    return GE2_OK;
}

void ge2_cudnn_plan_free(ge2_cudnn_plan *plan)
{
    ge2_cudnn_free(plan->plan);
    plan->plan = NULL;
}

ge2_status ge2_cudnn_execute(const ge2_cudnn_plan *plan, void *stream, int n, const int64_t *uids, void *const *ptrs,
                             void *workspace)
{
    ge2_cudnn_desc pack;
    GE2_TRY(ge2_cudnn_new(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack));
    SET(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
    SET(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
    SET(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    ge2_status st = ge2_cudnn_finalize(pack);
    /* one handle for the process: its stream and the execution go together */
    static pthread_mutex_t stream_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&stream_lock);
    if (st == GE2_OK)
        st = check(cudnn.set_stream(cudnn.handle, (cudaStream_t)stream), "cudnnSetStream");
    if (st == GE2_OK)
        st = check(cudnn.execute(cudnn.handle, plan->plan, pack), "cudnnBackendExecute");
    pthread_mutex_unlock(&stream_lock);
    ge2_cudnn_free(pack);
    return st;
}
