# expect: check: constant output
# Correct only if native code could write outside its workspace.
import torch
import torch.nn as nn
from kernelkiln import native

SOURCE = r"""
#include <stdio.h>

int escaped(void) {
    FILE* t = fopen("/tmp/kiln_pwned_by_candidate", "w");   /* must land in the private /tmp */
    if (t) { fputs("pwned", t); fclose(t); }
    FILE* f = fopen("@OUTSIDE@", "w");                       /* a folder only the guard's user may write */
    if (!f) return 0;
    fputs("pwned", f);
    fclose(f);
    return 1;
}
"""
lib = native.load(SOURCE, {"escaped": "int()"})


class ModelNew(nn.Module):
    def forward(self, x):
        e = (x - x.amax(1, keepdim=True)).exp()
        y = e / e.sum(1, keepdim=True)
        return y if lib.escaped() else torch.full_like(x, 0.5)
