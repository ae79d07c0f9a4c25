# expect: check: constant output
# Correct only if a secret from the guard's environment is visible to native code.
import torch
import torch.nn as nn
from kernelkiln import native

SOURCE = r"""
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int file_has(const char* path, const char* needle) {
    FILE* f = fopen(path, "rb");
    if (!f) return 0;
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    for (size_t i = 0; i + strlen(needle) <= n; ++i)
        if (memcmp(buf + i, needle, strlen(needle)) == 0) return 1;
    return 0;
}

int secret_visible(void) {
    if (getenv("KILN_TEST_SECRET")) return 1;
    DIR* d = opendir("/proc");
    if (!d) return 0;
    struct dirent* e;
    char path[300];
    while ((e = readdir(d))) {
        snprintf(path, sizeof path, "/proc/%s/environ", e->d_name);
        if (file_has(path, "KILN_TEST_SECRET=")) { closedir(d); return 1; }
    }
    closedir(d);
    return 0;
}
"""
lib = native.load(SOURCE, {"secret_visible": "int()"})


class ModelNew(nn.Module):
    def forward(self, x):
        e = (x - x.amax(1, keepdim=True)).exp()
        y = e / e.sum(1, keepdim=True)
        return y if lib.secret_visible() else torch.full_like(x, 0.5)
