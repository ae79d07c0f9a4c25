# expect: gate: collections\.abc\.sys\.modules is not allowed
import collections.abc

import torch.nn as nn

# collections.abc imported sys for itself: through it, os and the environment
KEY = collections.abc.sys.modules["os"].environ.get("OPENAI_API_KEY")


class ModelNew(nn.Module):
    def forward(self, x):
        return x
