/* Registered kernel candidates, their timing against an op's own CUDA
 * kernel, and the file that remembers the winners (see candidates.h). */
#include "kernels/cuda/candidates.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/alloc.h"
#include "graph/error.h"

/* ---------------------------------------------------------------- registry */

static const ge2_kernel_candidate *registered[GE2_OP_MAX][GE2_OP_MAX_CANDIDATES];
static int n_registered[GE2_OP_MAX];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

ge2_status ge2_kernel_candidate_register(ge2_op op, const ge2_kernel_candidate *c)
{
    const ge2_op_def *def = ge2_op_def_of(op);
    if (!def)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_kernel_candidate_register: op %d is not registered", (int)op);
    if (def->flags & GE2_OPF_OPTIMIZER)
        return ge2_error(GE2_ERR_UNSUPPORTED,
                         "ge2_kernel_candidate_register: ge2_%s works on the parameter pools; its kernels cannot be "
                         "timed on scratch copies, so it takes no candidates",
                         def->name);
    if (!c || !c->name || !c->name[0] || !c->cuda.launch)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT,
                         "ge2_kernel_candidate_register: ge2_%s: a candidate needs a name and a CUDA launch", def->name);
    if (strlen(c->name) >= 48 || strpbrk(c->name, "\t\n "))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT,
                         "ge2_kernel_candidate_register: ge2_%s: candidate name '%.48s' must be under 48 characters, "
                         "without blanks",
                         def->name, c->name);
    pthread_mutex_lock(&lock);
    ge2_status st = GE2_OK;
    for (int i = 0; i < n_registered[op] && st == GE2_OK; i++)
        if (strcmp(registered[op][i]->name, c->name) == 0)
            st = ge2_error(GE2_ERR_INVALID_ARGUMENT,
                           "ge2_kernel_candidate_register: ge2_%s has a candidate named '%s' already", def->name,
                           c->name);
    if (st == GE2_OK && n_registered[op] == GE2_OP_MAX_CANDIDATES)
        st = ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_kernel_candidate_register: ge2_%s has %d candidates, the most",
                       def->name, GE2_OP_MAX_CANDIDATES);
    if (st == GE2_OK) {
        registered[op][n_registered[op]] = c;
        __atomic_store_n(&n_registered[op], n_registered[op] + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lock);
    return st;
}

const ge2_kernel_candidate *const *ge2_kernel_candidates_of(ge2_op op, int *n)
{
    *n = op >= 0 && op < GE2_OP_MAX ? __atomic_load_n(&n_registered[op], __ATOMIC_ACQUIRE) : 0;
    return *n ? registered[op] : NULL;
}

/* ------------------------------------------------------ remembered choices */

#define KEY_MAX 384
#define NAME_MAX_ 48
#define CHOICES_MAX 1024

typedef struct choice {
    char key[KEY_MAX];
    char winner[NAME_MAX_]; /* a candidate's name, or "-" for the op's own kernel */
} choice;

static choice choices[CHOICES_MAX];
static int n_choices;
static bool loaded;
static char loaded_path[4200]; /* the file choices[] came from ("" for none) */

bool ge2_kernel_candidate_cache_path(const char *gemm_cache, char *buf, size_t size)
{
    if (!gemm_cache || !gemm_cache[0])
        return false;
    const char *slash = strrchr(gemm_cache, '/');
    int n = slash ? snprintf(buf, size, "%.*s/candidates.txt", (int)(slash - gemm_cache), gemm_cache)
                  : snprintf(buf, size, "candidates.txt");
    return n > 0 && (size_t)n < size;
}

/* Lines "key<TAB>winner"; the file is untrusted: a line too long, without
 * its tab or with an empty field is skipped. Lock held. */
static void load_locked(const char *path)
{
    /* another program's file is another set of choices */
    if (loaded && strcmp(loaded_path, path ? path : "") == 0)
        return;
    loaded = true;
    n_choices = 0;
    snprintf(loaded_path, sizeof loaded_path, "%s", path ? path : "");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f)
        return;
    char line[KEY_MAX + NAME_MAX_ + 8];
    while (n_choices < CHOICES_MAX && fgets(line, sizeof line, f)) {
        char *nl = strchr(line, '\n'), *tab = strchr(line, '\t');
        if (!nl) { /* too long: skip the rest of it */
            int c;
            while ((c = fgetc(f)) != EOF && c != '\n')
                ;
            continue;
        }
        *nl = '\0';
        if (!tab || tab == line || !tab[1] || (size_t)(tab - line) >= KEY_MAX || strlen(tab + 1) >= NAME_MAX_)
            continue;
        *tab = '\0';
        /* lengths checked above */
        memcpy(choices[n_choices].key, line, (size_t)(tab - line) + 1);
        memcpy(choices[n_choices].winner, tab + 1, strlen(tab + 1) + 1);
        n_choices++;
    }
    fclose(f);
}

/* The remembered winner for key into winner[NAME_MAX_]; false when none. */
static bool lookup(const char *path, const char *key, char *winner)
{
    pthread_mutex_lock(&lock);
    load_locked(path);
    bool found = false;
    for (int i = n_choices - 1; i >= 0 && !found; i--)
        if (strcmp(choices[i].key, key) == 0) {
            memcpy(winner, choices[i].winner, NAME_MAX_);
            found = true;
        }
    pthread_mutex_unlock(&lock);
    return found;
}

/* Remembers the winner and rewrites the file (a temporary renamed over it);
 * a file that cannot be written only loses the memory across runs. */
static void store(const char *path, const char *key, const char *winner)
{
    pthread_mutex_lock(&lock);
    load_locked(path);
    if (n_choices < CHOICES_MAX) {
        snprintf(choices[n_choices].key, KEY_MAX, "%s", key);
        snprintf(choices[n_choices].winner, NAME_MAX_, "%s", winner);
        n_choices++;
    }
    char tmp[4200];
    if (path && snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid()) < (int)sizeof tmp) {
        FILE *f = fopen(tmp, "w");
        for (int i = 0; f && i < n_choices; i++)
            fprintf(f, "%s\t%s\n", choices[i].key, choices[i].winner);
        if (f && fclose(f) == 0)
            rename(tmp, path);
        else
            remove(tmp);
    }
    pthread_mutex_unlock(&lock);
}

void ge2_kernel_candidates_reset(void)
{
    pthread_mutex_lock(&lock);
    n_choices = 0;
    loaded = false;
    pthread_mutex_unlock(&lock);
}

/* ------------------------------------------------------------------ timing */

static size_t view_bytes(const ge2_view *v) { return (size_t)ge2_shape_numel(v->shape) * ge2_dtype_size(v->dtype); }

/* The GPU's name and SM count: a choice holds for one kind of device. */
static const char *device_name(void)
{
    static __thread char name[160];
    int dev = 0;
    struct cudaDeviceProp prop;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        cudaGetLastError();
        return "unknown-gpu";
    }
    snprintf(name, sizeof name, "%.120s/%dsm", prop.name, prop.multiProcessorCount);
    for (char *p = name; *p; p++)
        if (*p == ' ' || *p == '\t')
            *p = '_';
    return name;
}

/* FNV-1a of the node's attrs: an op's other attributes, another problem. */
static unsigned long long attrs_hash(const ge2_node *node)
{
    const unsigned char *b = ge2_node_attrs(node);
    unsigned long long h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < sizeof(ge2_attrs); i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* The GPU, the op, its attrs, the precision, every view's dtype and shape, and the
 * candidates' names: a new candidate, or one gone, makes a new key. */
static bool problem_key(const ge2_launch *l, const ge2_kernel_candidate *const *c, int n, char *buf, size_t size)
{
    size_t used = 0;
    int w = snprintf(buf, size, "%s %s attrs:%016llx%s", device_name(), ge2_op_name(l->node->op),
                     attrs_hash(l->node), l->bf16_operands ? " bf16" : l->f16_operands ? " fp16" : l->tf32 ? " tf32" : "");
    for (int i = 0; i < l->n_in + l->n_out && w >= 0 && (used += (size_t)w) < size; i++) {
        const ge2_view *v = i < l->n_in ? &l->in[i] : &l->out[i - l->n_in];
        char s[96];
        w = snprintf(buf + used, size - used, "%s%s%s", i == l->n_in ? " ->" : "", i ? " " : " ",
                     ge2_dtype_name(v->dtype));
        if (w < 0 || (used += (size_t)w) >= size)
            break;
        w = snprintf(buf + used, size - used, "%s", ge2_shape_str(v->shape, s, sizeof s));
    }
    for (int i = 0; i < n && w >= 0 && (used += (size_t)w) < size; i++)
        w = snprintf(buf + used, size - used, "%s%s", i ? "," : " |", c[i]->name);
    return w >= 0 && used + (size_t)w < size;
}

/* The candidate cache file for l's settings, into path; NULL when none */
static const char *cache_file(const ge2_launch *l, char *path, size_t size)
{
    return l->settings && ge2_kernel_candidate_cache_path(l->settings->kernel_cache, path, size) ? path : NULL;
}

/* l's problem key with " |what" in place of the candidates' names */
static bool choice_key(const ge2_launch *l, const char *what, char *key, size_t size)
{
    const size_t used = problem_key(l, NULL, 0, key, size) ? strlen(key) : size;
    return used < size && snprintf(key + used, size - used, " |%s", what) < (int)(size - used);
}

bool ge2_kernel_choice_recall(const ge2_launch *l, const char *what, char *winner, size_t winner_size)
{
    char key[KEY_MAX], path[4200], got[NAME_MAX_];
    if (winner_size < NAME_MAX_ || !choice_key(l, what, key, sizeof key) ||
        !lookup(cache_file(l, path, sizeof path), key, got))
        return false;
    memcpy(winner, got, NAME_MAX_);
    return true;
}

void ge2_kernel_choice_remember(const ge2_launch *l, const char *what, const char *winner)
{
    char key[KEY_MAX], path[4200];
    if (choice_key(l, what, key, sizeof key))
        store(cache_file(l, path, sizeof path), key, winner);
}

/* Microseconds per launch of k on t (scratch views), or a negative number
 * with why filled when it does not prepare or run. */
static double time_kernel(const ge2_cuda_kernel *k, ge2_launch *t, char *why, size_t why_size)
{
    enum { WARM = 2, TIMED = 10 };
    t->backend_data = NULL;
    if (k->prepare && k->prepare(t) != GE2_OK) {
        snprintf(why, why_size, "prepare: %s", ge2_last_error());
        return -1;
    }
    cudaStream_t s = (cudaStream_t)t->stream;
    cudaEvent_t a = NULL, b = NULL;
    float ms = -1;
    bool ok = cudaEventCreate(&a) == cudaSuccess && cudaEventCreate(&b) == cudaSuccess;
    for (int i = 0; ok && i < WARM; i++)
        ok = k->launch(t) == GE2_OK;
    ok = ok && cudaEventRecord(a, s) == cudaSuccess;
    for (int i = 0; ok && i < TIMED; i++)
        ok = k->launch(t) == GE2_OK;
    ok = ok && cudaEventRecord(b, s) == cudaSuccess && cudaEventSynchronize(b) == cudaSuccess &&
         cudaEventElapsedTime(&ms, a, b) == cudaSuccess;
    if (!ok) {
        snprintf(why, why_size, "run: %s", ge2_last_error()[0] ? ge2_last_error() : cudaGetErrorString(cudaGetLastError()));
        cudaStreamSynchronize(s);
        cudaGetLastError();
    }
    if (a)
        cudaEventDestroy(a);
    if (b)
        cudaEventDestroy(b);
    if (k->release)
        k->release(t);
    t->backend_data = NULL;
    return ok ? 1e3 * (double)ms / TIMED : -1;
}

/* t = l with every view on a scratch buffer of its own, inputs zeroed:
 * before the first step the real buffers hold nothing meaningful, and a
 * kernel that reads indices (labels, token ids) must not be handed garbage;
 * the tensors' buffers are never touched (the launch's ge2_launch.scratch
 * is, which holds nothing between launches). False when memory lacks. */
bool ge2_scratch_launch_new(const ge2_launch *l, ge2_launch *t, void **bufs)
{
    *t = *l;
    t->backend_data = NULL;
    for (int i = 0; i < l->n_in + l->n_out; i++) {
        const ge2_view *v = i < l->n_in ? &l->in[i] : &l->out[i - l->n_in];
        ge2_view *tv = i < l->n_in ? &t->in[i] : &t->out[i - l->n_in];
        bufs[i] = NULL;
        if (!v->data)
            continue;
        const size_t bytes = view_bytes(v);
        if (cudaMalloc(&bufs[i], bytes ? bytes : 1) != cudaSuccess) {
            cudaGetLastError();
            return false;
        }
        if (cudaMemsetAsync(bufs[i], 0, bytes ? bytes : 1, (cudaStream_t)l->stream) != cudaSuccess)
            return false;
        tv->data = bufs[i];
    }
    return cudaStreamSynchronize((cudaStream_t)l->stream) == cudaSuccess;
}

void ge2_scratch_launch_free(void **bufs)
{
    for (int i = 0; i < GE2_MAX_INPUTS + GE2_MAX_OUTPUTS; i++)
        if (bufs[i]) {
            cudaFree(bufs[i]);
            bufs[i] = NULL;
        }
    cudaGetLastError();
}

ge2_status ge2_kernel_switch_to(ge2_launch *l, const ge2_kernel_candidate *c)
{
    const ge2_cuda_kernel *own = l->kernel;
    if (own->release)
        own->release(l);
    l->backend_data = NULL;
    l->kernel = &c->cuda;
    if (!c->cuda.prepare || c->cuda.prepare(l) == GE2_OK)
        return GE2_OK;
    snprintf(l->kernel_choice, sizeof l->kernel_choice, "own kernel; candidate %s did not prepare: %.60s", c->name,
             ge2_last_error());
    ge2_clear_error();
    l->backend_data = NULL;
    l->kernel = own;
    return own->prepare ? own->prepare(l) : GE2_OK;
}

ge2_status ge2_kernel_choose(ge2_launch *l)
{
    const ge2_cuda_kernel *own = &ge2_op_def_of(l->node->op)->cuda;
    l->kernel = own;
    l->kernel_choice[0] = '\0';
    l->backend_data = NULL;
    if (own->prepare)
        GE2_TRY(own->prepare(l));
    int n_all;
    const ge2_kernel_candidate *const *all = ge2_kernel_candidates_of(l->node->op, &n_all);
    const ge2_kernel_candidate *apply[GE2_OP_MAX_CANDIDATES];
    int n = 0;
    char why[160] = "";
    for (int i = 0; i < n_all; i++)
        if (!all[i]->applies || all[i]->applies(l, why, sizeof why))
            apply[n++] = all[i];
    if (n == 0) {
        if (n_all)
            snprintf(l->kernel_choice, sizeof l->kernel_choice, "own kernel; no candidate applies (%s)", why);
        return GE2_OK;
    }
    const bool autotune = !l->settings || l->settings->autotune;
    if (!autotune || (l->settings && !l->settings->kernel_candidates)) {
        snprintf(l->kernel_choice, sizeof l->kernel_choice, "own kernel; %d candidate%s not timed (%s off)", n,
                 n == 1 ? "" : "s", autotune ? "kernel_candidates" : "autotune");
        return GE2_OK;
    }
    char key[KEY_MAX], path[4200];
    const char *file = cache_file(l, path, sizeof path);
    const bool keyed = problem_key(l, apply, n, key, sizeof key);
    char winner[NAME_MAX_];
    const char *cached = keyed && lookup(file, key, winner) ? winner : NULL;
    for (int i = 0; cached && i < n; i++)
        if (strcmp(apply[i]->name, cached) == 0) {
            snprintf(l->kernel_choice, sizeof l->kernel_choice, "candidate %s (cached, of %d)", cached, n + 1);
            return ge2_kernel_switch_to(l, apply[i]);
        }
    if (cached && strcmp(cached, "-") == 0) {
        snprintf(l->kernel_choice, sizeof l->kernel_choice, "own kernel (cached, of %d)", n + 1);
        return GE2_OK;
    }

    ge2_launch t;
    void *bufs[GE2_MAX_INPUTS + GE2_MAX_OUTPUTS] = {0};
    double best_us = -1, own_us = -1;
    int best = -1, failed = 0; /* best -1: own */
    if (ge2_scratch_launch_new(l, &t, bufs)) {
        char own_why[160];
        own_us = time_kernel(own, &t, own_why, sizeof own_why);
        best_us = own_us;
        for (int i = 0; i < n; i++) {
            char cwhy[120];
            double us = time_kernel(&apply[i]->cuda, &t, cwhy, sizeof cwhy);
            if (us < 0 && !failed++)
                snprintf(why, sizeof why, "%s: %s", apply[i]->name, cwhy); /* the first failure's reason */
            if (us >= 0 && (best_us < 0 || us < best_us)) {
                best_us = us;
                best = i;
            }
        }
    } else {
        snprintf(why, sizeof why, "no device memory to time on");
    }
    ge2_scratch_launch_free(bufs);
    ge2_clear_error();
    if (best < 0 && own_us < 0) {
        snprintf(l->kernel_choice, sizeof l->kernel_choice, "own kernel; candidates not timed (%s)", why);
        return GE2_OK;
    }
    if (best < 0) {
        snprintf(l->kernel_choice, sizeof l->kernel_choice, "own kernel (tuned %.1f us, of %d)%s%.60s", own_us, n + 1,
                 failed ? "; failed: " : "", failed ? why : "");
        if (keyed && own_us >= 0)
            store(file, key, "-");
        return GE2_OK;
    }
    snprintf(l->kernel_choice, sizeof l->kernel_choice, "candidate %s (tuned %.1f us vs own %.1f, of %d)",
             apply[best]->name, best_us, own_us, n + 1);
    if (keyed)
        store(file, key, apply[best]->name);
    return ge2_kernel_switch_to(l, apply[best]);
}
