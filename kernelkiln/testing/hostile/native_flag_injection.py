# expect: build: fplugin
import torch.nn as nn
from kernelkiln import native

lib = native.load("int f(void) { return 0; }", {"f": "int()"}, flags=["-fplugin=/tmp/evil.so"])


class ModelNew(nn.Module):
    pass
