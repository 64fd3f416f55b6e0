/* The optimizer module: turns an ge2_optimizer_config into PHASE_OPTIMIZER
 * nodes appended after the backward: GRAD_NORM when clipping, then one
 * OPTIMIZER_UPDATE over the flat pools; or, per-parameter (update_mode), one
 * OPTIMIZER_UPDATE per node producing parameter gradients, which the planner
 * runs right after them. The update math itself is optim/optimizer_math.h's;
 * this module validates the config, chooses the layout and says how much
 * state the program must allocate.
 * The public entry points (ge2_optimizer, ge2_optimizer_defaults,
 * ge2_optimizer_name) are declared in ge2/ge2.h. */
#ifndef GE2_OPTIM_OPTIM_H
#define GE2_OPTIM_OPTIM_H

#include "ge2/ge2.h"

/* State slots of [n] floats the config needs (ge2_flat_pools.state = slots * n):
 * SGD with momentum 1, Adam/AdamW 2, +1 amsgrad, +1 with accumulation_steps > 1. */
int ge2_opt_state_slots(const ge2_optimizer_config *config);

/* torch.optim's argument rules plus ge2's (schedule, clipping, accumulation);
 * the message names the field and its value. */
ge2_status ge2_opt_validate(const ge2_optimizer_config *config);

/* Safetensors names of the state slots in ge2_flat_pools.state order, as
 * torch.optim's state_dict calls them ("momentum_buffer", "exp_avg",
 * "exp_avg_sq", "max_exp_avg_sq"; the accumulation buffer is "grad_accum").
 * Returns the count (== ge2_opt_state_slots). */
int ge2_opt_state_names(const ge2_optimizer_config *config, const char *names[4]);

/* "sgd", "adam", "adamw" -> kind; GE2_ERR_INVALID_ARGUMENT otherwise. */
ge2_status ge2_optimizer_parse(const char *name, ge2_optimizer_kind *out);

#endif /* GE2_OPTIM_OPTIM_H */
