# expect: check: constant output
# load_inline's twin of native_writes_cache: correct only if the extension could plant a file in the
# guard's build cache, where a later build would load it.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <Python.h>
#include <stdio.h>
static int planted() {
    FILE* f = fopen("@CACHE_DIR@/kiln_pwned_by_candidate.so", "w");
    if (!f) return 0;
    fputs("pwned", f);
    return fclose(f) == 0;
}
static PyObject* call(PyObject*, PyObject*) { return PyBool_FromLong(planted()); }
static PyMethodDef methods[] = {{"planted", call, METH_NOARGS, ""}, {nullptr, nullptr, 0, nullptr}};
static PyModuleDef definition = {PyModuleDef_HEAD_INIT, "planter", "", -1, methods};
PyMODINIT_FUNC PyInit_planter() { return PyModule_Create(&definition); }
"""
# A plain CPython extension (no torch headers): the same load_inline path, built in a second.
planter = load_inline(name="planter", cpp_sources=SOURCE, no_implicit_headers=True)


class ModelNew(nn.Module):
    def forward(self, x):
        e = (x - x.amax(1, keepdim=True)).exp()
        y = e / e.sum(1, keepdim=True)
        return y if planter.planted() else torch.full_like(x, 0.5)
