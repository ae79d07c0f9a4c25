# expect: gate: import of 'ctypes'
import ctypes

import torch.nn as nn

ctypes.CDLL(None).abort()


class ModelNew(nn.Module):
    pass
