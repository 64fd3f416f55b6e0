/* ge2_program_kernel_report on the CPU backend (CI, no GPU): one line per
 * scheduled node with its op, shapes and "cpu <op>", only after a step of
 * the mode has chosen its kernels. The CUDA report (cuBLASLt algorithms) is
 * checked by gemm_autotune_test. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ge2/ge2.h"
#include "tests/gpu/capture_mlp.h"
#include "tests/support/check_main.h"

/* The report of mode as text (caller frees); asserts it succeeded. */
static char *report(mlp *m, ge2_mode mode)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    ge2_status st = ge2_program_kernel_report(m->program, mode, f);
    fclose(f);
    ck_assert_msg(st == GE2_OK, "%s", ge2_last_error());
    return text;
}

static int count_lines(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

START_TEST(test_cpu_report)
{
    mlp m;
    mlp_open(&m, GE2_DEVICE_CPU, 8, 1, 1e-3, false);
    ck_assert_int_eq(ge2_program_kernel_report(m.program, GE2_MODE_TRAIN, stdout), GE2_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "no train step"));
    ck_assert_int_eq(ge2_program_kernel_report(NULL, GE2_MODE_TRAIN, stdout), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(ge2_program_kernel_report(m.program, (ge2_mode)7, stdout), GE2_ERR_INVALID_ARGUMENT);
    mlp_step(&m, 1, 0, 8, true);
    char *text = report(&m, GE2_MODE_TRAIN);
    int launches = ge2_program_launch_count(m.program, GE2_MODE_TRAIN);
    char header[128];
    snprintf(header, sizeof header, "ge2 kernels: train key, batch 8, cpu backend, %d launches per step\n", launches);
    ck_assert_msg(strncmp(text, header, strlen(header)) == 0, "report starts:\n%.200s", text);
    ck_assert_int_eq(count_lines(text, "\nnode "), launches);
    /* The first layer, written out by hand: x [8,784], W [256,784], b [256] -> y [8,256] and its relu mask. */
    ck_assert_msg(strstr(text, " linear               [8,784] [256,784] [256] -> [8,256] u8[8,32]: cpu linear\n"),
                  "no first-layer line in:\n%s", text);
    ck_assert_msg(strstr(text, ": cpu optimizer_update\n"), "no optimizer line in:\n%s", text);
    /* the small MLP's gradients are small: AUTO keeps the flat update */
    ck_assert_msg(strstr(text, "\noptimizer: flat (1 update over the pools)\n"), "no update mode in:\n%s", text);
    ck_assert_int_eq(ge2_program_kernel_report(m.program, GE2_MODE_EVAL, stdout), GE2_ERR_STATE);
    free(text);
    mlp_close(&m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kernel_report");
    TCase *tc = tcase_create("cpu");
    tcase_add_test(tc, test_cpu_report);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
