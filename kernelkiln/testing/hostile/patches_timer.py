# expect: gate: import of 'time'
import time

import torch.nn as nn

time.perf_counter = lambda: 0.0


class ModelNew(nn.Module):
    def forward(self, x):
        return x
