# expect: check: background process
# load_inline's twin of native_escaped_process: a correct candidate whose extension forks a child
# into a session of its own, left behind.
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <Python.h>
#include <unistd.h>
static int leave_child() {
    if (fork() == 0) {
        setsid();
        for (;;) pause();
    }
    return 1;
}
static PyObject* call(PyObject*, PyObject*) { return PyBool_FromLong(leave_child()); }
static PyMethodDef methods[] = {{"leave_child", call, METH_NOARGS, ""}, {nullptr, nullptr, 0, nullptr}};
static PyModuleDef definition = {PyModuleDef_HEAD_INIT, "forker", "", -1, methods};
PyMODINIT_FUNC PyInit_forker() { return PyModule_Create(&definition); }
"""
# A plain CPython extension (no torch headers): the same load_inline path, built in a second.
forker = load_inline(name="forker", cpp_sources=SOURCE, no_implicit_headers=True)
forker.leave_child()


class ModelNew(nn.Module):
    def forward(self, x):
        e = (x - x.amax(1, keepdim=True)).exp()
        return e / e.sum(1, keepdim=True)
