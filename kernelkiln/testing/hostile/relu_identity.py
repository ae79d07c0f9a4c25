# expect: check: correct on the task's input distribution only
# task: tiny_relu
"""ReLU as the identity: exact on torch.rand's non-negative inputs, wrong wherever an input is negative.

Caught by the robustness trials, which redraw the inputs from a wider distribution.
"""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clone()
