/* The example programs' shared command-line pieces (cli.h). */
#include "examples/cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ge2/extension.h" /* ge2_error */

bool cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

bool cli_parse_f64(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v) || !(v >= lo && v <= hi))
        return false;
    *out = v;
    return true;
}

ge2_status cli_context_new(ge2_device device, ge2_context **ctx)
{
    ge2_status st = ge2_context_new(device, ctx);
    if (st == GE2_ERR_NO_DEVICE)
        return ge2_error(st, "no CUDA device is usable here; --device cpu (or auto, the default) "
                         "trains on the CPU");
    return st;
}

const char *cli_rank_prefix(void)
{
    static char prefix[32];
    const char *rank = getenv("OMPI_COMM_WORLD_RANK"), *size = getenv("OMPI_COMM_WORLD_SIZE");
    int64_t r, n;
    if (!rank || !size || !cli_parse_i64(rank, 0, INT32_MAX, &r) || !cli_parse_i64(size, 2, INT32_MAX, &n))
        return "";
    snprintf(prefix, sizeof prefix, "rank %lld: ", (long long)r);
    return prefix;
}

ge2_status cli_check_loss(double loss_sum, int64_t first_step, int64_t steps)
{
    if (steps <= 0 || isfinite(loss_sum))
        return GE2_OK;
    const long long a = (long long)first_step, b = a + (long long)steps - 1;
    char which[64];
    snprintf(which, sizeof which, a == b ? "step %lld" : "steps %lld-%lld", a, b);
    return ge2_error(GE2_ERR_STATE,
                     "%s: the training loss is %s; stopping without saving (a lower --lr, gradient clipping or "
                     "--precision fp32 may help)",
                     which, isnan(loss_sum) ? "NaN" : "infinite");
}

struct cli_log {
    FILE *f;
    bool csv;
    const char *path, *rate_name;
};

cli_log_row cli_log_row_of(int64_t step, const char *kind)
{
    return (cli_log_row){step, kind, NAN, NAN, NAN, NAN};
}

ge2_status cli_log_open(const char *path, const char *rate_name, cli_log **out)
{
    *out = NULL;
    cli_log *log = calloc(1, sizeof *log);
    if (!log)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "--log-file: out of memory");
    const size_t n = strlen(path);
    log->csv = n >= 4 && strcmp(path + n - 4, ".csv") == 0;
    log->path = path;
    log->rate_name = rate_name;
    if (!(log->f = fopen(path, "w"))) {
        free(log);
        return ge2_error(GE2_ERR_IO, "--log-file %s: cannot write: %s", path, strerror(errno));
    }
    if (log->csv)
        fprintf(log->f, "step,kind,loss,accuracy,lr,%s\n", rate_name);
    *out = log;
    return fflush(log->f) == 0 ? GE2_OK : ge2_error(GE2_ERR_IO, "--log-file %s: %s", path, strerror(errno));
}

/* One value: CSV "," and the number (seven digits) or ",", JSON ",
 * \"name\": number" or nothing. */
static void put(const cli_log *log, const char *name, double v)
{
    if (log->csv)
        fprintf(log->f, isnan(v) ? "," : ",%.7g", v);
    else if (!isnan(v))
        fprintf(log->f, isfinite(v) ? ", \"%s\": %.7g" : ", \"%s\": \"%g\"", name, v);
}

ge2_status cli_log_write(cli_log *log, const cli_log_row *row)
{
    if (!log)
        return GE2_OK;
    if (log->csv)
        fprintf(log->f, "%lld,%s", (long long)row->step, row->kind);
    else
        fprintf(log->f, "{\"step\": %lld, \"kind\": \"%s\"", (long long)row->step, row->kind);
    put(log, "loss", row->loss);
    put(log, "accuracy", row->accuracy);
    put(log, "lr", row->lr);
    put(log, log->rate_name, row->rate);
    fputs(log->csv ? "\n" : "}\n", log->f);
    if (fflush(log->f) != 0 || ferror(log->f))
        return ge2_error(GE2_ERR_IO, "--log-file %s: cannot write: %s", log->path, strerror(errno));
    return GE2_OK;
}

void cli_log_close(cli_log *log)
{
    if (!log)
        return;
    fclose(log->f);
    free(log);
}
