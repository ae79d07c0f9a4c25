# expect: gate: import of 'os'
import os

import torch.nn as nn

KEY = os.environ.get("OPENAI_API_KEY")


class ModelNew(nn.Module):
    def forward(self, x):
        return x
