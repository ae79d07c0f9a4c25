# expect: build: extra_include_paths
# load_inline's options that name files are refused: extra_include_paths would put the home
# directory on the compiler's search path.
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="ext", cpp_sources="int f() { return 0; }", extra_include_paths=["@HOME_DIR@"])


class ModelNew(nn.Module):
    pass
