/* Device probe in a child process: see gpu_probe.h for why. */
#include "tests/gpu_probe.h"

#include "kernels/cuda/smoke.h"

#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

struct probe_result {
    int count;
    char msg[200];
};

static bool read_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n) {
        ssize_t got = read(fd, p, n);
        if (got <= 0)
            return false;
        p += got;
        n -= (size_t)got;
    }
    return true;
}

bool ge2_test_gpu_probe(char *why, size_t why_size)
{
    int fds[2];
    struct probe_result r;
    memset(&r, 0, sizeof r);
    if (pipe(fds) != 0) {
        snprintf(why, why_size, "pipe failed");
        return false;
    }
    fflush(NULL); /* the child must not replay buffered parent output */
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        snprintf(why, why_size, "fork failed");
        return false;
    }
    if (pid == 0) {
        close(fds[0]);
        if (ge2_cuda_smoke_device_count(&r.count, r.msg, sizeof r.msg) != 0)
            r.count = -1;
        ssize_t w = write(fds[1], &r, sizeof r);
        _exit(w == (ssize_t)sizeof r ? 0 : 1);
    }
    close(fds[1]);
    bool got = read_all(fds[0], &r, sizeof r);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!got) {
        if (WIFSIGNALED(status))
            snprintf(why, why_size, "device probe died of signal %d", WTERMSIG(status));
        else
            snprintf(why, why_size, "device probe exited without an answer");
        return false;
    }
    r.msg[sizeof r.msg - 1] = '\0';
    if (r.count < 0) {
        snprintf(why, why_size, "%s", r.msg);
        return false;
    }
    if (r.count == 0) {
        snprintf(why, why_size, "the CUDA runtime reports 0 devices");
        return false;
    }
    snprintf(why, why_size, "%d device(s)", r.count);
    return true;
}

bool ge2_test_require_gpu(const char *suite)
{
    char why[256];
    if (ge2_test_gpu_probe(why, sizeof why))
        return true;
    printf("%s: no CUDA device (%s); skipping\n", suite, why);
    fflush(stdout);
    return false;
}
