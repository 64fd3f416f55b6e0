/* The CUDA backend on a machine without a usable GPU (CI): opening it is a
 * user-visible error, GE2_ERR_NO_DEVICE with one clear message, never an
 * abort. With a GPU the same call must succeed. Not tagged "gpu": it runs
 * everywhere, and asks the device question the same way either side.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "capture/backend.h"
#include "capture/options.h"
#include "tests/gpu_probe.h"
#include "tests/support/check_main.h"

static bool have_gpu;

START_TEST(test_open_without_device_is_no_device)
{
    ge2_program_options o;
    ck_assert_int_eq(ge2_options_resolve(NULL, &o), GE2_OK);
    ge2_backend_ctx *ctx = (ge2_backend_ctx *)&o; /* must be overwritten */
    ge2_status st = ge2_backend_cuda.open(&o, &ctx);
    if (have_gpu) {
        ck_assert_msg(st == GE2_OK, "open with a GPU: %s", ge2_last_error());
        ge2_backend_cuda.close(ctx);
        return;
    }
    ck_assert_int_eq(st, GE2_ERR_NO_DEVICE);
    ck_assert_ptr_null(ctx);
    ck_assert_msg(strstr(ge2_last_error(), "no CUDA device") != NULL, "message: %s", ge2_last_error());
    ck_assert_int_eq(ge2_backend_cuda.capture_count(NULL), 0);
}
END_TEST

int main(void)
{
    char why[256];
    have_gpu = ge2_test_gpu_probe(why, sizeof why); /* in a child: no CUDA here */
    Suite *s = suite_create("capture_nodevice");
    TCase *tc = tcase_create("nodevice");
    tcase_add_test(tc, test_open_without_device_is_no_device);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
