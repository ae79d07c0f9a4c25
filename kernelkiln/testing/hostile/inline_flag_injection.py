# expect: build: fplugin
# load_inline's extra_cflags pass native.load's flag allow-list: no compiler plugin.
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="ext", cpp_sources="int f() { return 0; }", extra_cflags=["-fplugin=/tmp/evil.so"])


class ModelNew(nn.Module):
    pass
