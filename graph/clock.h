/* The monotonic clock in seconds: deadlines and progress figures. */
#ifndef GE2_GRAPH_CLOCK_H
#define GE2_GRAPH_CLOCK_H

#include <time.h>

static inline double ge2_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif /* GE2_GRAPH_CLOCK_H */
