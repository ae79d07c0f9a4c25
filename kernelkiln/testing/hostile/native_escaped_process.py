# expect: check: background process
# A correct candidate that leaves a process behind in a session of its own.
import torch.nn as nn
from kernelkiln import native

SOURCE = r"""
#include <unistd.h>

void leave_child(void) {
    if (fork() == 0) {
        setsid();
        for (;;) pause();
    }
}
"""
lib = native.load(SOURCE, {"leave_child": "void()"})
lib.leave_child()


class ModelNew(nn.Module):
    def forward(self, x):
        e = (x - x.amax(1, keepdim=True)).exp()
        return e / e.sum(1, keepdim=True)
