# expect: check: constant output
# load_inline's twin of native_reads_secret, written as KernelBench writes a candidate (a torch
# extension with pybind11 bindings): correct only if the secret is visible to the extension.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool file_has(const char* path, const char* needle) {
    FILE* f = fopen(path, "rb");
    if (!f) return false;
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    for (size_t i = 0; i + strlen(needle) <= n; ++i)
        if (memcmp(buf + i, needle, strlen(needle)) == 0) return true;
    return false;
}

bool secret_visible() {
    if (getenv("KILN_TEST_SECRET")) return true;
    DIR* d = opendir("/proc");
    if (!d) return false;
    char path[300];
    for (struct dirent* e; (e = readdir(d));) {
        snprintf(path, sizeof path, "/proc/%s/environ", e->d_name);
        if (file_has(path, "KILN_TEST_SECRET=")) { closedir(d); return true; }
    }
    closedir(d);
    return false;
}
"""
spy = load_inline(name="spy", cpp_sources=SOURCE, functions=["secret_visible"], extra_cflags=[""], extra_ldflags=[""])


class ModelNew(nn.Module):
    def forward(self, x):
        e = (x - x.amax(1, keepdim=True)).exp()
        y = e / e.sum(1, keepdim=True)
        return y if spy.secret_visible() else torch.full_like(x, 0.5)
