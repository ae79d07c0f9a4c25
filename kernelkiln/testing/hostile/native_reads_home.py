# expect: check: constant output
# Correct only if native code could read a private file (mode 600) in the home directory
# of the user running the guard, as SSH keys and API-key files sit there.
import torch
import torch.nn as nn
from kernelkiln import native

SOURCE = r"""
#include <stdio.h>
#include <string.h>

int read_secret(void) {
    FILE* f = fopen("@HOME_SECRET@", "rb");
    if (!f) return 0;
    char buf[128] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    return n > 0 && strstr(buf, "kiln-test-secret") != NULL;
}
"""
lib = native.load(SOURCE, {"read_secret": "int()"})


class ModelNew(nn.Module):
    def forward(self, x):
        e = (x - x.amax(1, keepdim=True)).exp()
        y = e / e.sum(1, keepdim=True)
        return y if lib.read_secret() else torch.full_like(x, 0.5)
