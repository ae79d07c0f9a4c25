# expect: check: constant output
# Correct only if native code could kill the process that forked it.
import torch
import torch.nn as nn
from kernelkiln import native

SOURCE = r"""
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

int killed_parent(void) {
    pid_t parent = getppid();
    if (parent <= 0) return 0;  /* out of sight: the worker is the first process of its own PID namespace */
    return kill(parent, SIGKILL) == 0;
}
"""
lib = native.load(SOURCE, {"killed_parent": "int()"})


class ModelNew(nn.Module):
    def forward(self, x):
        e = (x - x.amax(1, keepdim=True)).exp()
        y = e / e.sum(1, keepdim=True)
        return y if lib.killed_parent() else torch.full_like(x, 0.5)
