/* The CPU reference kernels, one per op (table.c puts them in ge2_cpu_kernels).
 *
 * Every kernel reads its shapes from the launch views (a graph key may have
 * specialized them), computes in the dtype of its first input (f32, or f64
 * for gradient checks), and skips any output whose data is NULL. */
#ifndef GE2_KERNELS_CPU_CPU_KERNELS_H
#define GE2_KERNELS_CPU_CPU_KERNELS_H

#include "kernels/kernel.h"

ge2_status ge2_cpu_linear(const ge2_launch *l);
ge2_status ge2_cpu_matmul(const ge2_launch *l);
ge2_status ge2_cpu_linear_grad_input(const ge2_launch *l);
ge2_status ge2_cpu_linear_grad_weight(const ge2_launch *l);
ge2_status ge2_cpu_binary(const ge2_launch *l); /* ADD, SUB, MUL */
ge2_status ge2_cpu_scale(const ge2_launch *l);
ge2_status ge2_cpu_activation(const ge2_launch *l);
ge2_status ge2_cpu_activation_backward(const ge2_launch *l);
ge2_status ge2_cpu_softmax(const ge2_launch *l); /* SOFTMAX, LOG_SOFTMAX */
ge2_status ge2_cpu_softmax_backward(const ge2_launch *l); /* SOFTMAX_BACKWARD, LOG_SOFTMAX_BACKWARD */
ge2_status ge2_cpu_reduce(const ge2_launch *l); /* SUM, MEAN */
ge2_status ge2_cpu_expand(const ge2_launch *l);
ge2_status ge2_cpu_reduce_to(const ge2_launch *l);
ge2_status ge2_cpu_reshape(const ge2_launch *l);
ge2_status ge2_cpu_transpose(const ge2_launch *l);
ge2_status ge2_cpu_concat(const ge2_launch *l);
ge2_status ge2_cpu_slice(const ge2_launch *l);
ge2_status ge2_cpu_slice_backward(const ge2_launch *l);
ge2_status ge2_cpu_cross_entropy(const ge2_launch *l);
ge2_status ge2_cpu_mse_loss(const ge2_launch *l);
ge2_status ge2_cpu_accuracy(const ge2_launch *l);

/* The optimizer over the flat pools (kernels/cpu/optimizer.c, optim engineer). */
ge2_status ge2_cpu_grad_norm(const ge2_launch *l);
ge2_status ge2_cpu_optimizer_update(const ge2_launch *l);

#endif /* GE2_KERNELS_CPU_CPU_KERNELS_H */
