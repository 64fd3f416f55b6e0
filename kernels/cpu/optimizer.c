/* STUB until optim+data+checkpoint+trainer lands: they replace this file with
 * the real one-loop optimizer over the flat pools. */
#include "graph/error.h"
#include "kernels/cpu/cpu_kernels.h"

ge2_status ge2_cpu_grad_norm(const ge2_launch *l)
{
    (void)l;
    return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_grad_norm: the CPU optimizer kernels are not in yet");
}

ge2_status ge2_cpu_optimizer_update(const ge2_launch *l)
{
    (void)l;
    return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_optimizer_update: the CPU optimizer kernels are not in yet");
}
