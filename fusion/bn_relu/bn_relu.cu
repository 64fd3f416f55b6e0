// The bn_relu fusion's ops on CUDA: the batch norm's launchers (ops/norm)
// with the relu; the backward ops' relu'd y is their last input.
#include "fusion/bn_relu/bn_relu.h"

extern "C" ge2_status ge2_cuda_batch_norm_relu_launch(const ge2_launch *l)
{
    return ge2_cuda_batch_norm_launch_with(l, true);
}

extern "C" ge2_status ge2_cuda_batch_norm_relu_grad_params_launch(const ge2_launch *l)
{
    return ge2_cuda_batch_norm_grad_params_launch_with(l, (const float *)l->in[3].data);
}

extern "C" ge2_status ge2_cuda_batch_norm_relu_grad_input_launch(const ge2_launch *l)
{
    return ge2_cuda_batch_norm_grad_input_launch_with(l, (const float *)l->in[6].data);
}
