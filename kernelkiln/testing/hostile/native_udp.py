# expect: check: constant output
# Correct only if native code could send a UDP datagram to a server on the guard's loopback.
import torch
import torch.nn as nn
from kernelkiln import native

SOURCE = r"""
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

int sent(void) {
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    if (s < 0) return 0;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(@UDP_PORT@);
    a.sin_addr.s_addr = htonl(0x7f000001);
    int ok = sendto(s, "pwned", 5, 0, (struct sockaddr*)&a, sizeof a) == 5;
    close(s);
    return ok;
}
"""
lib = native.load(SOURCE, {"sent": "int()"})


class ModelNew(nn.Module):
    def forward(self, x):
        e = (x - x.amax(1, keepdim=True)).exp()
        y = e / e.sum(1, keepdim=True)
        return y if lib.sent() else torch.full_like(x, 0.5)
