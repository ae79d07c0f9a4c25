# expect: check: constant output
# Correct only if native code could plant a file in the guard's build cache, where a later
# build of another candidate (or the user's own) would load it.
import torch
import torch.nn as nn
from kernelkiln import native

SOURCE = r"""
#include <stdio.h>

int planted(void) {
    FILE* f = fopen("@CACHE_DIR@/kiln_pwned_by_candidate.so", "w");
    if (!f) return 0;
    fputs("pwned", f);
    return fclose(f) == 0;
}
"""
lib = native.load(SOURCE, {"planted": "int()"})


class ModelNew(nn.Module):
    def forward(self, x):
        e = (x - x.amax(1, keepdim=True)).exp()
        y = e / e.sum(1, keepdim=True)
        return y if lib.planted() else torch.full_like(x, 0.5)
