# expect: gate: torch\.cuda is not available on the cpu platform
"""Work on a side stream: the softmax is queued on a CUDA stream of its own and the output
returned at once, so a timer that waits only for the default stream stops early.

On the cpu platform any torch.cuda use is refused by the gate. On a GPU it would run,
and is defended by the timing: each timed batch ends with a device-wide synchronize
(``Platform.synchronize``, every stream) before the worker replies, and the parent's
own round-trip clock is what counts. Its check reads outputs on the default stream
without waiting for other streams, so a result that is not ready there is wrong.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = torch.cuda.Stream()

    def forward(self, x):
        y = torch.empty_like(x)
        with torch.cuda.stream(self.side):
            e = (x - x.amax(1, keepdim=True)).exp()
            y.copy_(e / e.sum(1, keepdim=True))
        return y
