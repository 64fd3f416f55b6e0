/* gemm_floor: how fast can NVIDIA's own fp32 GEMMs run an MLP step's GEMMs?
 *
 * For every GEMM of a ReLU MLP's training step except the classifier head
 * (which ge2 runs in its head kernels), in the cuBLASLt layouts ge2 uses
 * (kernels/cuda/gemm_lt.cu), each timed alone on this GPU:
 *   sgemm       cublasSgemm, no epilogue
 *   heuristic   cuBLASLt, the best of the heuristic's first 32 algorithms
 *               (ge2's autotuner times these and their split-K variants)
 *   search      cuBLASLt, an exhaustive search: every algorithm id x tile x
 *               stage count unsplit, then the best 12 of those and the
 *               heuristic's x split-K (1-32) x reduction scheme x CTA
 *               swizzle x custom option (its best includes the heuristic's)
 * each with the epilogue ge2 asks for (forward RELU_AUX_BIAS, input gradient
 * DRELU, weight gradient BGRADB) and with none (DEFAULT): the epilogue-free
 * search sum is a floor for any step built on these libraries. fp32
 * compute (CUBLAS_COMPUTE_32F: no TF32), 32 MiB workspace as ge2's.
 *
 * Why it exists: issue 7's medium target (784-1024-1024-10, batch 256, <= 100
 * us a step) against what these GEMMs take (bench/RESULTS.md, 2026-11-21).
 *
 *   gemm_floor [--dims 784,1024,1024,10] [--batch 256]
 * Prints one line per GEMM and epilogue, then the sums (us). Needs a GPU.
 */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LAYERS 8
#define WORKSPACE_BYTES ((size_t)32 << 20)
#define HEURISTIC_ALGOS 32
#define MAX_ALGO_IDS 256
#define MAX_TILES 128
#define MAX_STAGES 128
#define MAX_CONFIGS 8192
#define REFINED 12        /* unsplit configurations refined by split-K etc. */
#define LAUNCHES 10       /* per timing sample */
#define SAMPLES 5
#define NOT_RUN 1e30

typedef struct {
    char name[32];
    cublasOperation_t trans_a, trans_b;
    int m, n, k;                 /* column-major, as cuBLASLt sees it */
    cublasLtEpilogue_t epilogue; /* what ge2 asks for */
} gemm_case;

typedef struct {
    double us;
    int id, tile, stages, split, scheme, swizzle, custom;
} config;

typedef struct {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
} lt_problem;

/* one device for the whole run */
static cublasLtHandle_t lt;
static cublasHandle_t blas;
static cudaStream_t stream;
static cudaEvent_t start, stop;
static void *workspace, *aux;
static float *buf_a, *buf_b, *buf_d, *bias, *bias_grad;

static void die(const char *what, int code, int line)
{
    fprintf(stderr, "gemm_floor: %s failed (%d) at line %d\n", what, code, line);
    exit(1);
}
#define CUDA_OK(x)                                                                                                   \
    do {                                                                                                             \
        cudaError_t e_ = (x);                                                                                        \
        if (e_ != cudaSuccess)                                                                                       \
            die(#x, (int)e_, __LINE__);                                                                              \
    } while (0)
#define BLAS_OK(x)                                                                                                   \
    do {                                                                                                             \
        cublasStatus_t s_ = (x);                                                                                     \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                                             \
            die(#x, (int)s_, __LINE__);                                                                              \
    } while (0)

static const char *epilogue_name(cublasLtEpilogue_t e)
{
    switch (e) {
    case CUBLASLT_EPILOGUE_RELU_AUX_BIAS: return "RELU_AUX_BIAS";
    case CUBLASLT_EPILOGUE_DRELU: return "DRELU";
    case CUBLASLT_EPILOGUE_BGRADB: return "BGRADB";
    case CUBLASLT_EPILOGUE_DEFAULT: return "DEFAULT";
    default: return "?";
    }
}

static int compare_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int compare_config(const void *x, const void *y)
{
    return compare_double(&((const config *)x)->us, &((const config *)y)->us);
}

/* ------------------------------------------------------------- problems */

static lt_problem problem_make(const gemm_case *c, cublasLtEpilogue_t epilogue)
{
    lt_problem p;
    BLAS_OK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    BLAS_OK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &c->trans_a, sizeof c->trans_a));
    BLAS_OK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &c->trans_b, sizeof c->trans_b));
    BLAS_OK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    if (epilogue == CUBLASLT_EPILOGUE_RELU_AUX_BIAS)
        BLAS_OK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    if (epilogue == CUBLASLT_EPILOGUE_BGRADB)
        BLAS_OK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_grad,
                                               sizeof bias_grad));
    if (epilogue == CUBLASLT_EPILOGUE_RELU_AUX_BIAS || epilogue == CUBLASLT_EPILOGUE_DRELU) {
        int64_t bits = (c->m + 127) / 128 * 128; /* ge2's relu mask rows: bits padded to 128 */
        BLAS_OK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
        BLAS_OK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &bits, sizeof bits));
    }
    const int a_rows = c->trans_a == CUBLAS_OP_N ? c->m : c->k, a_cols = c->trans_a == CUBLAS_OP_N ? c->k : c->m;
    const int b_rows = c->trans_b == CUBLAS_OP_N ? c->k : c->n, b_cols = c->trans_b == CUBLAS_OP_N ? c->n : c->k;
    BLAS_OK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_32F, (uint64_t)a_rows, (uint64_t)a_cols, a_rows));
    BLAS_OK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_32F, (uint64_t)b_rows, (uint64_t)b_cols, b_rows));
    BLAS_OK(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, (uint64_t)c->m, (uint64_t)c->n, c->m));
    return p;
}

static void problem_free(lt_problem *p)
{
    cublasLtMatrixLayoutDestroy(p->a);
    cublasLtMatrixLayoutDestroy(p->b);
    cublasLtMatrixLayoutDestroy(p->d);
    cublasLtMatmulDescDestroy(p->desc);
}

/* -------------------------------------------------------------- timing */

typedef bool (*runner)(const void *arg);

typedef struct {
    const lt_problem *p;
    const cublasLtMatmulAlgo_t *algo;
} lt_run;

static bool run_lt(const void *arg)
{
    const lt_run *r = arg;
    const float one = 1.0f, zero = 0.0f;
    return cublasLtMatmul(lt, r->p->desc, &one, buf_a, r->p->a, buf_b, r->p->b, &zero, buf_d, r->p->d, buf_d,
                          r->p->d, r->algo, workspace, WORKSPACE_BYTES, stream) == CUBLAS_STATUS_SUCCESS;
}

static bool run_sgemm(const void *arg)
{
    const gemm_case *c = arg;
    const float one = 1.0f, zero = 0.0f;
    const int lda = c->trans_a == CUBLAS_OP_N ? c->m : c->k, ldb = c->trans_b == CUBLAS_OP_N ? c->k : c->n;
    return cublasSgemm(blas, c->trans_a, c->trans_b, c->m, c->n, c->k, &one, buf_a, lda, buf_b, ldb, &zero, buf_d,
                       c->m) == CUBLAS_STATUS_SUCCESS;
}

/* Median us a launch over SAMPLES batches of LAUNCHES, after two warm-ups;
 * NOT_RUN when a launch is refused or fails. */
static double time_us(runner run, const void *arg)
{
    if (!run(arg) || !run(arg)) {
        cudaGetLastError();
        return NOT_RUN;
    }
    double sample[SAMPLES];
    for (int s = 0; s < SAMPLES; s++) {
        CUDA_OK(cudaEventRecord(start, stream));
        for (int i = 0; i < LAUNCHES; i++)
            run(arg);
        CUDA_OK(cudaEventRecord(stop, stream));
        float ms = 0.0f;
        if (cudaEventSynchronize(stop) != cudaSuccess || cudaEventElapsedTime(&ms, start, stop) != cudaSuccess) {
            cudaGetLastError();
            return NOT_RUN;
        }
        sample[s] = 1000.0 * ms / LAUNCHES;
    }
    qsort(sample, SAMPLES, sizeof sample[0], compare_double);
    return sample[SAMPLES / 2];
}

static double time_algo(const lt_problem *p, const cublasLtMatmulAlgo_t *algo)
{
    const lt_run r = {p, algo};
    return time_us(run_lt, &r);
}

/* ---------------------------------------------------------- the search */

static uint32_t config_of(const cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoConfigAttributes_t attr)
{
    uint32_t v = 0;
    size_t written = 0;
    cublasLtMatmulAlgoConfigGetAttribute(algo, attr, &v, sizeof v, &written);
    return v;
}

static config config_read(const cublasLtMatmulAlgo_t *algo, double us)
{
    return (config){us,
                    (int)config_of(algo, CUBLASLT_ALGO_CONFIG_ID),
                    (int)config_of(algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                    (int)config_of(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                    (int)config_of(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                    (int)config_of(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
                    (int)config_of(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                    (int)config_of(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION)};
}

static bool algo_init(int id, cublasLtMatmulAlgo_t *algo)
{
    return cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                                  id, algo) == CUBLAS_STATUS_SUCCESS;
}

/* The algorithm for c, or false when cuBLASLt refuses it for this problem. */
static bool algo_build(const lt_problem *p, const config *c, cublasLtMatmulAlgo_t *algo)
{
    if (!algo_init(c->id, algo))
        return false;
    const uint32_t tile = (uint32_t)c->tile, stages = (uint32_t)c->stages, scheme = (uint32_t)c->scheme;
    const uint32_t swizzle = (uint32_t)c->swizzle, custom = (uint32_t)c->custom;
    const int32_t split = c->split;
    cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile);
    cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages);
    cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split, sizeof split);
    cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof scheme);
    cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle, sizeof swizzle);
    cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom, sizeof custom);
    cublasLtMatmulHeuristicResult_t check;
    return cublasLtMatmulAlgoCheck(lt, p->desc, p->a, p->b, p->d, p->d, algo, &check) == CUBLAS_STATUS_SUCCESS &&
           check.workspaceSize <= WORKSPACE_BYTES;
}

typedef struct {
    config list[MAX_CONFIGS];
    int n, checked;
} config_set;

static void try_config(const lt_problem *p, const config *c, config_set *out)
{
    cublasLtMatmulAlgo_t algo;
    out->checked++;
    if (out->n >= MAX_CONFIGS || !algo_build(p, c, &algo))
        return;
    config timed = *c;
    timed.us = time_algo(p, &algo);
    if (timed.us < NOT_RUN)
        out->list[out->n++] = timed;
}

static int cap_list(const cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoCapAttributes_t attr, uint32_t *v, int max)
{
    size_t written = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(algo, attr, v, sizeof(uint32_t) * (size_t)max, &written) !=
            CUBLAS_STATUS_SUCCESS ||
        written == 0) {
        v[0] = 0; /* undefined: cuBLASLt picks */
        return 1;
    }
    return (int)(written / sizeof(uint32_t));
}

static uint32_t cap_value(const cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoCapAttributes_t attr)
{
    uint32_t v = 0;
    size_t written = 0;
    cublasLtMatmulAlgoCapGetAttribute(algo, attr, &v, sizeof v, &written);
    return v;
}

/* Stage 1: every algorithm x tile x stage count, unsplit. */
static void search_unsplit(const lt_problem *p, config_set *out)
{
    int ids[MAX_ALGO_IDS], n_ids = 0;
    BLAS_OK(cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                                     CUDA_R_32F, MAX_ALGO_IDS, ids, &n_ids));
    for (int i = 0; i < n_ids; i++) {
        cublasLtMatmulAlgo_t algo;
        if (!algo_init(ids[i], &algo))
            continue;
        static uint32_t tiles[MAX_TILES], stages[MAX_STAGES];
        const int n_tiles = cap_list(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, tiles, MAX_TILES);
        const int n_stages = cap_list(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS, stages, MAX_STAGES);
        for (int t = 0; t < n_tiles; t++)
            for (int s = 0; s < n_stages; s++) {
                const config c = {0, ids[i], (int)tiles[t], (int)stages[s], 1, 0, 0, 0};
                try_config(p, &c, out);
            }
    }
}

/* Stage 2: each base configuration x split-K x reduction scheme x swizzle x
 * custom option. */
static void search_refine(const lt_problem *p, const config *base, int n_base, config_set *out)
{
    static const int splits[] = {1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32};
    for (int j = 0; j < n_base; j++) {
        cublasLtMatmulAlgo_t algo;
        if (!algo_init(base[j].id, &algo))
            continue;
        const bool can_split = cap_value(&algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT) != 0;
        const uint32_t schemes = cap_value(&algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK);
        const int swizzles = cap_value(&algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT) ? 2 : 1;
        uint32_t customs = cap_value(&algo, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX);
        customs = customs > 7 ? 8 : customs + 1;
        for (size_t si = 0; si < sizeof splits / sizeof splits[0]; si++) {
            if (splits[si] > 1 && !can_split)
                break;
            /* scheme 0 (none) unsplit; each scheme the algorithm has when split */
            for (uint32_t scheme = 0; scheme <= CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE; scheme = scheme ? scheme * 2 : 1) {
                if ((splits[si] == 1) != (scheme == 0) || (scheme && !(schemes & scheme)))
                    continue;
                for (int z = 0; z < swizzles; z++)
                    for (uint32_t cu = 0; cu < customs; cu++) {
                        if (splits[si] == 1 && z == 0 && cu == 0)
                            continue; /* stage 1 timed it */
                        config c = base[j];
                        c.split = splits[si];
                        c.scheme = (int)scheme;
                        c.swizzle = z;
                        c.custom = (int)cu;
                        try_config(p, &c, out);
                    }
            }
        }
    }
}

typedef struct {
    double heuristic_first, heuristic_best, search_best;
    config heuristic_config, search_config;
    int checked, timed;
} lt_result;

static lt_result measure_lt(const gemm_case *c, cublasLtEpilogue_t epilogue)
{
    lt_result r;
    memset(&r, 0, sizeof r);
    r.heuristic_first = r.heuristic_best = r.search_best = NOT_RUN;
    lt_problem p = problem_make(c, epilogue);

    cublasLtMatmulPreference_t pref;
    BLAS_OK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = WORKSPACE_BYTES;
    BLAS_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t h[HEURISTIC_ALGOS];
    int n_h = 0;
    if (cublasLtMatmulAlgoGetHeuristic(lt, p.desc, p.a, p.b, p.d, p.d, pref, HEURISTIC_ALGOS, h, &n_h) !=
        CUBLAS_STATUS_SUCCESS)
        n_h = 0;
    cublasLtMatmulPreferenceDestroy(pref);
    for (int i = 0; i < n_h; i++) {
        const double us = time_algo(&p, &h[i].algo);
        if (i == 0)
            r.heuristic_first = us;
        if (us < r.heuristic_best) {
            r.heuristic_best = us;
            r.heuristic_config = config_read(&h[i].algo, us);
        }
    }

    static config_set unsplit, refined;
    unsplit.n = unsplit.checked = refined.n = refined.checked = 0;
    search_unsplit(&p, &unsplit);
    qsort(unsplit.list, (size_t)unsplit.n, sizeof unsplit.list[0], compare_config);
    // refined: the fastest unsplit configurations and, unsplit, each of the
    // heuristic's (its best may be a tile that only wins split)
    config base[REFINED + HEURISTIC_ALGOS];
    int n_base = 0;
    for (int i = 0; i < unsplit.n && i < REFINED; i++)
        base[n_base++] = unsplit.list[i];
    for (int i = 0; i < n_h; i++) {
        config c = config_read(&h[i].algo, 0.0);
        c.split = 1;
        c.scheme = c.swizzle = c.custom = 0;
        base[n_base++] = c;
    }
    search_refine(&p, base, n_base, &refined);
    r.checked = unsplit.checked + refined.checked;
    r.timed = unsplit.n + refined.n;
    // the search's best includes what the heuristic offered
    r.search_best = r.heuristic_best;
    r.search_config = r.heuristic_config;
    for (int i = 0; i < unsplit.n + refined.n; i++) {
        const config *c = i < unsplit.n ? &unsplit.list[i] : &refined.list[i - unsplit.n];
        if (c->us < r.search_best) {
            r.search_best = c->us;
            r.search_config = *c;
        }
    }
    problem_free(&p);
    return r;
}

/* ------------------------------------------------------------ the step */

/* The step's GEMMs for dims[0..n_dims) and batch, in ge2's cuBLASLt layouts
 * (column-major; a row-major [r, c] buffer is column-major [c, r]):
 *   forward l     TN  m out, n batch, k in     RELU_AUX_BIAS
 *   dx of l > 0   NN  m in,  n batch, k out    DRELU (the layer below's relu)
 *   dW of l       NT  m in,  n out,   k batch  BGRADB
 * The last layer (the classifier head) is left out. */
static int step_cases(const int *dims, int n_dims, int batch, gemm_case *out)
{
    int n = 0;
    for (int l = 0; l + 2 < n_dims; l++) {
        const int in = dims[l], o = dims[l + 1];
        gemm_case f = {"", CUBLAS_OP_T, CUBLAS_OP_N, o, batch, in, CUBLASLT_EPILOGUE_RELU_AUX_BIAS};
        snprintf(f.name, sizeof f.name, "fc%d", l + 1);
        out[n++] = f;
        if (l > 0) {
            gemm_case d = {"", CUBLAS_OP_N, CUBLAS_OP_N, in, batch, o, CUBLASLT_EPILOGUE_DRELU};
            snprintf(d.name, sizeof d.name, "dx%d", l + 1);
            out[n++] = d;
        }
        gemm_case w = {"", CUBLAS_OP_N, CUBLAS_OP_T, in, o, batch, CUBLASLT_EPILOGUE_BGRADB};
        snprintf(w.name, sizeof w.name, "dW%d", l + 1);
        out[n++] = w;
    }
    return n;
}

static bool parse_dims(const char *s, int *dims, int *n)
{
    *n = 0;
    while (*s && *n < MAX_LAYERS + 1) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 65536)
            return false;
        dims[(*n)++] = (int)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return false;
    }
    return *s == '\0' && *n >= 3;
}

static void print_config(const config *c)
{
    printf("algo %d tile %d stages %d split %d scheme %d swizzle %d custom %d", c->id, c->tile, c->stages, c->split,
           c->scheme, c->swizzle, c->custom);
}

int main(int argc, char **argv)
{
    int dims[MAX_LAYERS + 1] = {784, 1024, 1024, 10}, n_dims = 4, batch = 256;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dims") && i + 1 < argc) {
            if (!parse_dims(argv[++i], dims, &n_dims)) {
                fprintf(stderr, "gemm_floor: --dims wants 3 to %d sizes like 784,1024,1024,10\n", MAX_LAYERS + 1);
                return 2;
            }
        } else if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
            batch = atoi(argv[++i]);
            if (batch < 1 || batch > 65536) {
                fprintf(stderr, "gemm_floor: --batch wants 1 to 65536\n");
                return 2;
            }
        } else {
            fprintf(stderr, "usage: gemm_floor [--dims 784,1024,1024,10] [--batch 256]\n");
            return 2;
        }
    }
    struct cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    printf("gemm_floor: %s, %d SMs, fp32 (no TF32), batch %d, dims", prop.name, prop.multiProcessorCount, batch);
    for (int i = 0; i < n_dims; i++)
        printf("%c%d", i ? ',' : ' ', dims[i]);
    printf("\n");

    int widest = batch;
    for (int i = 0; i < n_dims; i++)
        widest = dims[i] > widest ? dims[i] : widest;
    const size_t matrix = (size_t)widest * (size_t)widest * sizeof(float);
    BLAS_OK(cublasLtCreate(&lt));
    BLAS_OK(cublasCreate(&blas));
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    BLAS_OK(cublasSetStream(blas, stream));
    CUDA_OK(cudaEventCreate(&start));
    CUDA_OK(cudaEventCreate(&stop));
    CUDA_OK(cudaMalloc(&workspace, WORKSPACE_BYTES));
    CUDA_OK(cudaMalloc((void **)&buf_a, matrix));
    CUDA_OK(cudaMalloc((void **)&buf_b, matrix));
    CUDA_OK(cudaMalloc((void **)&buf_d, matrix));
    CUDA_OK(cudaMalloc((void **)&bias, (size_t)widest * sizeof(float)));
    CUDA_OK(cudaMalloc((void **)&bias_grad, (size_t)widest * sizeof(float)));
    CUDA_OK(cudaMalloc(&aux, matrix / 32 + 4096)); /* one bit an element, rows padded */
    /* timing does not depend on the values; these are finite and not denormal */
    CUDA_OK(cudaMemset(buf_a, 0x3c, matrix));
    CUDA_OK(cudaMemset(buf_b, 0x3c, matrix));
    CUDA_OK(cudaMemset(bias, 0, (size_t)widest * sizeof(float)));
    CUDA_OK(cudaMemset(aux, 0x55, matrix / 32 + 4096));

    gemm_case cases[3 * MAX_LAYERS];
    const int n_cases = step_cases(dims, n_dims, batch, cases);
    double sum_sgemm = 0, sum[2][2] = {{0}}; /* [fused, DEFAULT][heuristic, search] */
    for (int i = 0; i < n_cases; i++) {
        const gemm_case *c = &cases[i];
        const double sgemm = time_us(run_sgemm, c);
        sum_sgemm += sgemm;
        printf("%-4s m%d n%d k%d  sgemm %.2f\n", c->name, c->m, c->n, c->k, sgemm);
        const cublasLtEpilogue_t epilogues[2] = {c->epilogue, CUBLASLT_EPILOGUE_DEFAULT};
        for (int e = 0; e < 2; e++) {
            const lt_result r = measure_lt(c, epilogues[e]);
            sum[e][0] += r.heuristic_best;
            sum[e][1] += r.search_best;
            printf("%-4s %-13s heuristic first %.2f best %.2f (", c->name, epilogue_name(epilogues[e]),
                   r.heuristic_first, r.heuristic_best);
            print_config(&r.heuristic_config);
            printf(")  search %.2f (", r.search_best);
            print_config(&r.search_config);
            printf("; %d configurations, %d ran)\n", r.checked, r.timed);
            fflush(stdout);
        }
    }
    printf("sum of %d GEMMs (us): sgemm %.1f | ge2's epilogues: heuristic %.1f, search %.1f | "
           "DEFAULT: heuristic %.1f, search %.1f\n",
           n_cases, sum_sgemm, sum[0][0], sum[0][1], sum[1][0], sum[1][1]);
    return 0;
}
