/* checkpoints_close A B [rtol atol]: whether every F32 tensor of checkpoint A
 * (parameters and optimizer state) equals B's within atol + rtol |b|, and
 * both have the same tensors and metadata "step". Prints the largest
 * difference; exit 0 when close, 1 when not, 2 on a bad file. For the
 * data-parallel trainer test: N ranks' checkpoint against one process's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/safetensors.h"

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 5) {
        fprintf(stderr, "usage: checkpoints_close A B [rtol atol]\n");
        return 2;
    }
    double rtol = argc == 5 ? atof(argv[3]) : 1e-4, atol = argc == 5 ? atof(argv[4]) : 1e-5;
    ge2_st_file a, b;
    if (ge2_st_read(argv[1], (uint64_t)1 << 32, &a) != GE2_OK || ge2_st_read(argv[2], (uint64_t)1 << 32, &b) != GE2_OK) {
        fprintf(stderr, "checkpoints_close: %s\n", ge2_last_error());
        return 2;
    }
    int bad = 0;
    const char *sa = ge2_st_meta(&a, "step"), *sb = ge2_st_meta(&b, "step");
    if (!sa || !sb || strcmp(sa, sb)) {
        printf("step: %s vs %s\n", sa ? sa : "(none)", sb ? sb : "(none)");
        bad++;
    }
    if (a.n_entries != b.n_entries) {
        printf("%d tensors vs %d\n", a.n_entries, b.n_entries);
        bad++;
    }
    double worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < a.n_entries; i++) {
        const ge2_st_entry *ea = &a.entries[i], *eb = ge2_st_find(&b, ea->name);
        if (!eb || strcmp(ea->dtype, eb->dtype) || ea->end - ea->begin != eb->end - eb->begin) {
            printf("%s: missing or different in %s\n", ea->name, argv[2]);
            bad++;
            continue;
        }
        if (strcmp(ea->dtype, "F32"))
            continue;
        size_t n = (ea->end - ea->begin) / sizeof(float);
        const float *x = (const float *)(a.data + ea->begin), *y = (const float *)(b.data + eb->begin);
        for (size_t k = 0; k < n; k++) {
            float xv, yv;
            memcpy(&xv, x + k, sizeof xv); /* the data section need not be aligned */
            memcpy(&yv, y + k, sizeof yv);
            double d = fabs((double)xv - (double)yv);
            if (d > worst) {
                worst = d;
                worst_name = ea->name;
            }
            if (!(d <= atol + rtol * fabs((double)yv))) {
                if (bad < 10)
                    printf("%s[%zu]: %.9g vs %.9g\n", ea->name, k, xv, yv);
                bad++;
            }
        }
    }
    printf("largest |difference| %.3g (%s); %d element(s) out of tolerance\n", worst, worst_name, bad);
    ge2_st_release(&a);
    ge2_st_release(&b);
    return bad ? 1 : 0;
}
