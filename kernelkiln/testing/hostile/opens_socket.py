# expect: gate: import of 'socket'
import socket

import torch.nn as nn

socket.create_connection(("127.0.0.1", 9))


class ModelNew(nn.Module):
    def forward(self, x):
        return x
