# expect: check: timed out|crashed|background process
import torch.nn as nn
from kernelkiln import native

lib = native.load("#include <unistd.h>\nvoid bomb(void) { for (;;) fork(); }", {"bomb": "void()"})


class ModelNew(nn.Module):
    def forward(self, x):
        lib.bomb()
        return x
