# expect: gate: import of 'os'
import os
import signal

import torch.nn as nn

os.kill(os.getppid(), signal.SIGKILL)


class ModelNew(nn.Module):
    pass
