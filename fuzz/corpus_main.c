/* Replays the fuzz corpus through LLVMFuzzerTestOneInput without libFuzzer,
 * so every input the fuzzer ever found interesting stays a regression test
 * (run it under --config=asan for the memory checks). Arguments: directories. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    int files = 0;
    for (int a = 1; a < argc; a++) {
        DIR *dir = opendir(argv[a]);
        if (!dir) {
            fprintf(stderr, "cannot open %s\n", argv[a]);
            return 1;
        }
        for (struct dirent *e; (e = readdir(dir));) {
            if (e->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[a], e->d_name);
            FILE *f = fopen(path, "rb");
            if (!f)
                continue;
            static uint8_t buf[1 << 20];
            size_t n = fread(buf, 1, sizeof buf, f);
            fclose(f);
            LLVMFuzzerTestOneInput(buf, n);
            files++;
        }
        closedir(dir);
    }
    if (files == 0) {
        fprintf(stderr, "no corpus files\n");
        return 1;
    }
    printf("%d passed, 0 failed\n", files);
    return 0;
}
