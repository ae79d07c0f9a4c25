# expect: build: .
# load_inline's twin of native_include_home: the compiler sees no home directory.
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="ext", cpp_sources='#include "@HOME_SECRET@"\nint f() { return 0; }', no_implicit_headers=True)


class ModelNew(nn.Module):
    pass
