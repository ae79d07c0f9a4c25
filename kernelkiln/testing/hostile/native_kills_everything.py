# expect: check: constant output
# Correct only if native code could signal some process other than itself: kill(-1) reaches
# every process its user may signal, the guard's own included, unless it is walled in.
import torch
import torch.nn as nn
from kernelkiln import native

SOURCE = r"""
#include <signal.h>

int killed_any(void) { return kill(-1, SIGKILL) == 0; }
"""
lib = native.load(SOURCE, {"killed_any": "int()"})


class ModelNew(nn.Module):
    def forward(self, x):
        e = (x - x.amax(1, keepdim=True)).exp()
        y = e / e.sum(1, keepdim=True)
        return y if lib.killed_any() else torch.full_like(x, 0.5)
