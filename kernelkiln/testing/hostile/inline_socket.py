# expect: check: constant output
# load_inline's twin of native_socket: correct only if the extension could reach a server on the
# guard's loopback.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <Python.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
static int reached() {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return 0;
    struct sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_port = htons(@PORT@);
    a.sin_addr.s_addr = htonl(0x7f000001);
    int ok = connect(s, (struct sockaddr*)&a, sizeof a) == 0;
    close(s);
    return ok;
}
static PyObject* call(PyObject*, PyObject*) { return PyBool_FromLong(reached()); }
static PyMethodDef methods[] = {{"reached", call, METH_NOARGS, ""}, {nullptr, nullptr, 0, nullptr}};
static PyModuleDef definition = {PyModuleDef_HEAD_INIT, "caller", "", -1, methods};
PyMODINIT_FUNC PyInit_caller() { return PyModule_Create(&definition); }
"""
# A plain CPython extension (no torch headers): the same load_inline path, built in a second.
caller = load_inline(name="caller", cpp_sources=SOURCE, no_implicit_headers=True)


class ModelNew(nn.Module):
    def forward(self, x):
        e = (x - x.amax(1, keepdim=True)).exp()
        y = e / e.sum(1, keepdim=True)
        return y if caller.reached() else torch.full_like(x, 0.5)
