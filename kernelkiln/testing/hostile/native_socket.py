# expect: check: constant output
# Correct only if native code could reach a server on the guard's loopback.
import torch
import torch.nn as nn
from kernelkiln import native

SOURCE = r"""
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

int reached(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return 0;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(@PORT@);
    a.sin_addr.s_addr = htonl(0x7f000001);
    int ok = connect(s, (struct sockaddr*)&a, sizeof a) == 0;
    close(s);
    return ok;
}
"""
lib = native.load(SOURCE, {"reached": "int()"})


class ModelNew(nn.Module):
    def forward(self, x):
        e = (x - x.amax(1, keepdim=True)).exp()
        y = e / e.sum(1, keepdim=True)
        return y if lib.reached() else torch.full_like(x, 0.5)
