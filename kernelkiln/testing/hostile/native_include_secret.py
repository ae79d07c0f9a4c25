# expect: build: .
# The compiler runs as an unprivileged user: a private file cannot be pulled in.
import torch.nn as nn
from kernelkiln import native

lib = native.load('#include "@SECRET_FILE@"\nint f(void) { return 0; }', {"f": "int()"})


class ModelNew(nn.Module):
    pass
