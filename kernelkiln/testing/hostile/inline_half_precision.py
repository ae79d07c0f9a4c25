# expect: check: outside tolerance
# load_inline's twin of half_precision: the extension computes the softmax with every value
# rounded to bfloat16 (its low 16 bits cut) and writes float32, the reference's dtype.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <Python.h>
#include <cmath>
#include <cstdint>
#include <cstring>

static float bf16(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    bits &= 0xffff0000u;
    std::memcpy(&v, &bits, sizeof v);
    return v;
}

static PyObject* softmax_bf16(PyObject*, PyObject* args) {
    unsigned long long in, out;
    long long rows, cols;
    if (!PyArg_ParseTuple(args, "KKLL", &in, &out, &rows, &cols)) return nullptr;
    const float* a = reinterpret_cast<const float*>(in);
    float* y = reinterpret_cast<float*>(out);
    for (long long r = 0; r < rows; ++r) {
        float m = a[r * cols], s = 0.0f;
        for (long long c = 1; c < cols; ++c) m = std::fmax(m, a[r * cols + c]);
        for (long long c = 0; c < cols; ++c) s = bf16(s + bf16(std::exp(bf16(a[r * cols + c] - m))));
        for (long long c = 0; c < cols; ++c) y[r * cols + c] = bf16(bf16(std::exp(bf16(a[r * cols + c] - m))) / s);
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {{"softmax_bf16", softmax_bf16, METH_VARARGS, ""}, {nullptr, nullptr, 0, nullptr}};
static PyModuleDef definition = {PyModuleDef_HEAD_INIT, "low", "", -1, methods};
PyMODINIT_FUNC PyInit_low() { return PyModule_Create(&definition); }
"""
# A plain CPython extension taking data pointers (no torch headers): built in a second.
low = load_inline(name="low", cpp_sources=SOURCE, no_implicit_headers=True, extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        low.softmax_bf16(x.data_ptr(), y.data_ptr(), x.shape[0], x.shape[1])
        return y
