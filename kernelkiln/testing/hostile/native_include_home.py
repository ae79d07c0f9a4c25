# expect: build: .
# The compiler sees no home directory: a private file of the user cannot be pulled in.
import torch.nn as nn
from kernelkiln import native

lib = native.load('#include "@HOME_SECRET@"\nint f(void) { return 0; }', {"f": "int()"})


class ModelNew(nn.Module):
    pass
