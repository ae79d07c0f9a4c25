# expect: gate: import of 'os'
import os

import torch.nn as nn

while True:
    os.fork()


class ModelNew(nn.Module):
    pass
