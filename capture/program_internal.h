/* The compiled program, private to capture/ (program*.c, the backends): the
 * modules beside capture/ use capture/program_state.h, the tests and
 * benchmarks capture/program_inspect.h.
 *
 * A program owns the persistent state every graph key shares (parameter,
 * gradient and optimizer-state pools, constants, the control block) and a
 * cache of graph keys, each with its plan, resolved launches and IO buffers.
 *
 * Memory, per key:
 *   - activation arena: by default every key points into ONE backing
 *     allocation sized to the largest key (keys never run concurrently).
 *     When a bigger key arrives the backing is reallocated and every other
 *     key's launches are re-resolved; their backend state (on CUDA the
 *     captured graph) is released and prepared again, so they re-capture on
 *     their next step. compile option separate_arenas gives each key its own.
 *   - IO buffer (plan pool GE2_POOL_INPUTS): the key's static feed buffers
 *     first, then its outputs (loss, metrics), so a later step of another key
 *     that reuses the shared arena cannot clobber what read_output returns.
 *   - GE2_STAGING_BUFFERS slots of host memory (pinned on CUDA), used in
 *     turn, one per step: the slot's staging, which the step uploads to the
 *     feed region first (or reads at its device staging, below), and its
 *     result area, into which the step copies its
 *     loss and metric last (both copies part of the step: inside its CUDA
 *     Graph). The caller may write a batch straight into the next slot's
 *     staging (ge2_program_feed_buffers). On CUDA each slot also has a
 *     device staging: the slot's staging is copied there by the copy engine
 *     as the step is enqueued, beside the step still running, and the
 *     slot's own launches (ge2_exec.slot_launches) read the feeds there
 *     (ge2_step_io).
 *
 * Metrics: each slot has a fence, recorded after the slot's step. Before a
 * slot is used again the host waits on it (it must anyway, to refill the
 * staging); the slot's results are then final and are added to the mode's
 * sums. ge2_program_take_metrics adds those of slots whose fence is done
 * without waiting. So every step is counted once, with no read-back call
 * per step.
 */
#ifndef GE2_CAPTURE_PROGRAM_INTERNAL_H
#define GE2_CAPTURE_PROGRAM_INTERNAL_H

#include "capture/backend.h"
#include "capture/options.h"
#include "capture/program_state.h"
#include "graph/control.h"
#include "graph/ir.h"
#include "planner/plan.h"

/* ge2_set_lr's pinned upload sources, used in turn: the host may set the LR
 * again before the device has copied the previous value. */
#define GE2_LR_RING 4

/* One graph key: everything a step of it needs, made on its first step. */
typedef struct ge2_program_key {
    ge2_key key;
    ge2_plan *plan;
    ge2_exec exec;        /* exec.plan == plan; exec.arena, launches and io resolved */
    void *inputs;         /* device: [plan->input_bytes] feeds, then outputs */
    void *arena_own;      /* separate_arenas: this key's own arena, else NULL */
    /* host (pinned): [staging_bytes] each, the feeds' bytes at their input
     * offsets; used in turn, each guarded by its slot's fence */
    void *staging[GE2_STAGING_BUFFERS];
    /* device: [staging_bytes] each, where a feeds_ahead backend copies the
     * slot's staging ahead of its step (ge2_step_io); NULL elsewhere */
    void *device_staging[GE2_STAGING_BUFFERS];
    /* host (pinned): [GE2_STAGING_BUFFERS][ge2_program_slot_results]
     * each result's raw value (f32 or f64 bits) as each slot's latest step
     * copied it back, then the control block's count of out-of-range
     * labels and ids (int64 bits) */
    double *results;
    ge2_copy *result_copies; /* [GE2_STAGING_BUFFERS][ge2_program_slot_results]: the slots' io.results */
    void *fence[GE2_STAGING_BUFFERS]; /* NULL when the backend has no fences */
    /* the slot's latest step may still run: wait on its fence before
     * writing its staging, and add its results to the sums once it is done
     * (false from then on, so a step after ge2_program_feed_buffers does not
     * wait again and no step is counted twice) */
    bool in_flight[GE2_STAGING_BUFFERS];
    /* the mode's step number (program->steps_issued) of the slot's latest step */
    int64_t step_number[GE2_STAGING_BUFFERS];
    int next_staging; /* the slot the key's next step uses */
    /* ge2_program_feed_buffers gave out next_staging's slots for the next
     * step: only then may a step's feed data be a slot (used in place) */
    bool handed_out;
    size_t staging_bytes; /* bytes of the feed region at the start of `inputs` */
    int64_t batch;        /* dim 0 of the first feed: examples per step */
    /* false after a failed exec_prepare (e.g. while the shared arena grew):
     * prepared again on the key's next use */
    bool prepared;
    /* a step has run since exec_prepare: were the key's steps to replay a
     * graph, it would be captured now (ge2_exec.captured) */
    bool ran_since_prepare;
    bool dumped_kernels; /* options.dump has shown its kernels */
    /* Device loops of this key (program_loop.c), made by its first: the
     * loop's counters, sums and results (device), and their host mirror
     * (pinned), each [ge2_program_loop_block_bytes] */
    void *loop_block, *loop_host;
} ge2_program_key;

struct ge2_program {
    ge2_context *ctx; /* not owned; outlives the program */
    ge2_device device;
    /* the graph the program runs: the user's (`source`), or under precision
     * BF16 the program's own copy of it with the storage pass's casts
     * (ge2_bf16_storage_pass): the same tensor ids, tensors appended */
    ge2_graph *graph;
    ge2_graph *source;      /* the user's graph, not owned; outlives the program */
    ge2_graph *own_graph;   /* owned; NULL when graph is source */
    int n_nodes, n_tensors; /* the source as compiled: it must not grow after */
    unsigned changes;       /* nor change otherwise (source->changes) */
    /* per fusion row: the fused nodes its rewrite made in this graph (0 for
     * group patterns) */
    int rewritten[8 * sizeof(ge2_fusion_set)];
    ge2_program_options options;
    const ge2_backend *backend;
    ge2_backend_ctx *bctx;

    ge2_layout *layout;
    /* Persistent, shared by every key (device memory on CUDA). */
    ge2_flat_pools pools; /* params [n], grads [n] (NULL with per-parameter updates), state [slots * n] */
    void *constants;      /* [layout->constant_bytes] */
    void *buffers;        /* [layout->buffer_bytes] persistent buffers */
    ge2_control *control; /* device pointer on CUDA, host on CPU */
    ge2_control *control_host; /* host mirror (pinned), source of control uploads */
    float *lr_ring;            /* host (pinned): [GE2_LR_RING] sources of ge2_set_lr's uploads */
    void *lr_fence[GE2_LR_RING]; /* each recorded after its slot's upload; NULL without fences */
    int lr_next;
    int optimizer_node;        /* node id of the (first) OPTIMIZER_UPDATE, -1 without optimizer */

    /* Outputs each step copies back for the metrics: loss, first other marked
     * output; -1 if none (without a loss no step is counted). */
    int loss_id, metric_id;
    /* What every step copies back: the loss first (when there is one), then
     * each other marked output of one element, in tensor-id order; metric_id
     * is the first of those. [n_results] tensor ids. */
    int *result_ids;
    int n_results;
    /* The control block's bad_index.count as far as a finished step has
     * shown it: a step that shows more fails (graph/control.h). */
    int64_t bad_index_seen;

    ge2_key feed_key;      /* the graph's feeds at built shapes: each step's key starts from it */
    ge2_program_key **keys; /* [n_keys], each its own block: an exec's address never moves */
    int n_keys, cap_keys;
    int last_key[GE2_MODE_COUNT]; /* key index of the most recent step of each mode, -1 */
    void *arena;                  /* shared backing (unless separate_arenas) */
    size_t arena_bytes;

    /* per mode: the data set ge2_program_set_dataset gave (capture/program_run.c) */
    struct ge2_kept_dataset *dataset[GE2_MODE_COUNT];
    /* per mode: counts the data sets given (and, for training, the
     * learning-rate tables), so a key's device loop made for another one
     * is made again (ge2_backend.exec_loop's generation) */
    uint64_t dataset_generation[GE2_MODE_COUNT];
    /* per mode: why (some of) its runs' steps take a launch each on a
     * backend that has device loops ("": none has; ge2_program_run_per_step),
     * and whether that holds for every key until the data set is given
     * again (data parallel, too large, the loop failed) or only for the
     * keys whose steps run eagerly */
    char per_step_why[GE2_MODE_COUNT][256];
    bool loops_off[GE2_MODE_COUNT];
    /* ge2_program_set_lr_table's: each train step's base LR as ge2_set_lr
     * stores it, on the host and (on CUDA) the device; NULL: none */
    float *lr_table, *lr_table_device;
    int64_t lr_entries, lr_steps_each;

    ge2_metrics metrics[GE2_MODE_COUNT]; /* per mode: steps done and added, not yet taken */
    int64_t steps_issued[GE2_MODE_COUNT]; /* per mode: steps enqueued so far */
    /* per mode, [n_results] each: every result's sum over those steps, and
     * over the steps the last ge2_program_take_metrics took */
    double *result_sums[GE2_MODE_COUNT], *taken_sums[GE2_MODE_COUNT];
};

/* "train" or "eval", for messages */
static inline const char *ge2_program_mode_name(ge2_mode mode) { return mode == GE2_MODE_EVAL ? "eval" : "train"; }

/* What each step copies back per slot: the n_results results, then the
 * control block's count of out-of-range labels and ids. */
static inline int ge2_program_slot_results(const ge2_program *program) { return program->n_results + 1; }

/* --- for the other capture/ files (the backends) ---------------------- */

/* Fails (GE2_ERR_OUT_OF_MEMORY, with both figures) when bytes exceed what
 * the backend can still allocate; fn is the caller for the message, what
 * names the bytes ("the activations of a batch of 64"). */
ge2_status ge2_program_check_memory(ge2_program *program, const char *fn, double bytes, const char *what);
/* A pinned buffer an asynchronous copy reads (or writes) is refilled (or
 * read) only after ge2_program_source_wait on the fence recorded
 * (ge2_program_source_record) after that copy, or once
 * ge2_program_source_done says the fence is done; a backend without fences
 * waits for the whole device instead (free on the CPU, whose copies and
 * steps are done when they return). */
ge2_status ge2_program_source_wait(ge2_program *program, void *fence);
ge2_status ge2_program_source_record(ge2_program *program, void *fence);
ge2_status ge2_program_source_done(ge2_program *program, void *fence, bool *done);

/* --- between the program*.c files ------------------------------------- */

/* Index of the key's cache entry, planning, allocating and preparing it on
 * first sight. */
ge2_status ge2_program_key_get(ge2_program *program, const ge2_key *key, int *index);
/* GE2_ERR_STATE if nodes or tensors were added to the graph after ge2_compile. */
ge2_status ge2_program_check_graph(const ge2_program *program, const char *fn);
/* The key of these feeds (shapes only; data may be NULL), planned and
 * prepared on first sight, and its index; fn names the caller. */
ge2_status ge2_program_key_of(ge2_program *program, ge2_mode mode, const ge2_feed *feeds, int n_feeds, const char *fn,
                              ge2_program_key **pk, int *index);
/* Waits for every step enqueued and adds the results of those not yet
 * added to their mode's sums, in step order (program_step.c). */
ge2_status ge2_program_finish_steps(ge2_program *program);
/* Fails as a finished step that saw the device's count of out-of-range
 * labels and ids reach `count` does (program_step.c). */
ge2_status ge2_program_bad_index_found(ge2_program *program, int64_t count);
/* Mode's runs go a step a launch until its data set is given again, for
 * `why` (program_loop.c). */
void ge2_program_loops_off(ge2_program *program, ge2_mode mode, const char *why);
/* Runs `steps` (>= 1) full-batch steps of key pk (index `index`) in one
 * device launch (ge2_backend.exec_loop), from the run's position (epoch,
 * batch_in_epoch): loop holds the data set's part (fields with their
 * rows, batch, batches, the order's constants), and feed_ids[f] is field
 * f's tensor. Afterwards the program is as after those steps one at a
 * time: sums, step numbers, the key's last slot; *counted of them moved
 * the run's position (all, unless one read an out-of-range label or id:
 * then those before it, and the error). *counted 0 without an error: the
 * loop could not be made (the mode's loops are off, with the reason),
 * nothing ran, and the caller runs the steps one at a time
 * (program_loop.c). */
ge2_status ge2_program_loop(ge2_program *program, ge2_program_key *pk, int index, ge2_step_loop *loop,
                            const int *feed_ids, int64_t steps, int64_t epoch, int64_t batch_in_epoch,
                            int64_t *counted);
/* Frees the learning-rate table (program_run.c); nothing without one. */
void ge2_program_lr_table_free(ge2_program *program);
/* Frees mode's kept data set (program_run.c); nothing without one. */
void ge2_program_dataset_free(ge2_program *program, ge2_mode mode);
/* Frees one key and what ge2_program_key_get made for it (not the shared arena). */
void ge2_program_key_release(ge2_program *program, ge2_program_key *pk);
/* Bytes of a key's feed region: its staging slots' size. */
size_t ge2_program_feed_region_bytes(const ge2_plan *plan);
/* Whether the backend stages feeds on the device ahead of each step, so
 * every key has GE2_STAGING_BUFFERS device stagings (ge2_step_io). */
bool ge2_program_feeds_ahead(const ge2_program *program);
/* Where a tensor lives for this key (device address on CUDA); NULL without memory. */
void *ge2_program_tensor_data(const ge2_program *program, const ge2_program_key *pk, int tensor_id);

/* "<dump_dot>-<what>.dot" when the compile option asks for DOT dumps: the
 * plan's key with its fused groups, or the graph when plan is NULL. */
ge2_status ge2_program_dump_dot(const ge2_program *program, const char *what, const ge2_plan *plan);

/* One line per launch of the key: node, op, shapes and the backend's
 * description of its kernel (the kernel report and the dump's). */
void ge2_program_print_kernels(const ge2_program *program, const ge2_program_key *key, FILE *out);

#endif /* GE2_CAPTURE_PROGRAM_INTERNAL_H */
