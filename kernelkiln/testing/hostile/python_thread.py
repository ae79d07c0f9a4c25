# expect: gate: import of 'threading'
import threading

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        threading.Thread(target=lambda: None).start()
        return x
