# expect: check: keeps computing while idle
# A correct candidate with a thread that keeps burning CPU (it would slow the reference).
import torch.nn as nn
from kernelkiln import native

SOURCE = r"""
#include <pthread.h>

static volatile unsigned long sink;
static void* spin(void* arg) { (void)arg; for (;;) sink++; return 0; }

void start(void) {
    pthread_t t;
    pthread_create(&t, 0, spin, 0);
    pthread_detach(t);
}
"""
lib = native.load(SOURCE, {"start": "void()"})
lib.start()


class ModelNew(nn.Module):
    def forward(self, x):
        e = (x - x.amax(1, keepdim=True)).exp()
        return e / e.sum(1, keepdim=True)
