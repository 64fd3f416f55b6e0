/* The batch norm's test cases and float64 references (ops/norm/test.c), by
 * op and with the relu of the bn_relu fusion's ops, which
 * fusion/bn_relu/test.c registers them for, and the layer norm's input
 * gradient's, with the addend of add_into's op (fusion/add_into/test.c).
 * Test code only. */
#ifndef GE2_OPS_NORM_TEST_CASES_H
#define GE2_OPS_NORM_TEST_CASES_H

#include <stdbool.h>

#include "ops/norm/norm.h"
#include "tests/support/op_cases.h"

/* x, weight, bias, running_mean, running_var[, num_batches_tracked] -> a
 * node of op (BATCH_NORM's inputs and attrs) */
ge2_status ge2_batch_norm_case(ge2_case_ctx *c, ge2_op op);
/* dy, x, saved[, relu'd y] -> a node of op (BATCH_NORM_GRAD_PARAMS' inputs) */
ge2_status ge2_batch_norm_grad_params_case(ge2_case_ctx *c, ge2_op op, bool relu_y);
/* dy, x, weight, saved, dweight, dbias[, relu'd y] -> a node of op */
ge2_status ge2_batch_norm_grad_input_case(ge2_case_ctx *c, ge2_op op, bool relu_y);

/* The references: train-mode batch norm (max(0, ·) with relu), and its
 * backward ops with dy taken where input relu_y is positive (-1: none). */
void ge2_batch_norm_ref(const ge2_node *node, const ref_tensor *in, ref_tensor *out, bool relu);
void ge2_batch_norm_grad_params_ref(const ref_tensor *in, ref_tensor *out, int relu_y);
void ge2_batch_norm_grad_input_ref(const ref_tensor *in, ref_tensor *out, int relu_y);

/* dy, x, weight, saved[, plus] -> a node of op (LAYER_NORM_GRAD_INPUT's
 * inputs, and with plus its addend), and the reference: dx (+ plus) */
ge2_status ge2_layer_norm_grad_input_case(ge2_case_ctx *c, ge2_op op, bool plus);
void ge2_layer_norm_grad_input_ref(const ge2_node *node, const ref_tensor *in, ref_tensor *out);

#endif /* GE2_OPS_NORM_TEST_CASES_H */
