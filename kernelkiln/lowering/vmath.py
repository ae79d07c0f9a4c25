"""VMATH: float exp, expm1, tanh and erf as branch-free polynomials written into the kernel.

GCC vectorizes a loop calling ``expf`` through glibc's vector math library (libmvec), one
call per vector; these inline functions vectorize with whatever loop holds them, in the
loop's own vector width, and cost less per element (on this AMD EPYC with AVX-512,
16-wide: exp 0.27 against 0.32 ns, tanh 0.43 against 0.45, erf 0.29 against 0.69, GELU 0.35
against 1.48; erf by Abramowitz and Stegun 7.1.26, which it replaced, took 0.51 and GELU 0.58).
log and log1p stay the library's, which was faster than a Cephes polynomial.
``VMATH=0`` calls the C library for all of them.

Accuracy (float, against double, dense sweeps, without -ffast-math; tests/lowering/test_vmath.py
checks these bounds): exp and expm1 relative error at most 2e-7 (exp underflows to 0 below
-86.6, where it is under 2.5e-38); tanh at most 3e-7 relative; erf at most 5e-7 absolute and,
on [-1, 1], 3e-7 relative (a rational approximation; Abramowitz and Stegun's 7.1.26, which torch's
vectorized CPU erf uses, has 6e-7 absolute error and loses relative accuracy near 0). Under
-ffast-math (a FLAGS option) the compiler may reassociate them: expm1 and tanh near 0 then
keep an absolute error under 1e-7 but lose their relative accuracy, as the library calls
compiled the same way may.
"""

from __future__ import annotations

# the calls pointwise.render writes for float math that VMATH replaces
VMATH_FUNCTIONS = {"exp": "kiln_expf", "expm1": "kiln_expm1f", "tanh": "kiln_tanhf", "erf": "kiln_erff"}


VMATH_HEADER = r"""#ifndef VMATH
#define VMATH 1
#endif
#if VMATH
typedef union { float f; int32_t i; } kiln_pun;
static inline float kiln_bitsf(int32_t i) { kiln_pun u; u.i = i; return u.f; }
/* exp(x) = 2^n (1 + q) with n = floor(x / ln2 + 1/2) (roundeven does not vectorize in GCC 12),
   r = x - n ln2 (in two parts), q = r + r^2 P(r) (Cephes expf);
   x is clamped to [-86.6, 88.7] and 2^n built in the exponent bits as 2^(n-1) * 2, so n = 128 stays finite. */
typedef struct { float q, s; } kiln_exp_parts;
static inline kiln_exp_parts kiln_exp_split(float x) {
    float c = x < -86.6f ? -86.6f : (x > 88.72283935546875f ? 88.72283935546875f : x);
    float n = floorf(c * 1.44269504088896341f + 0.5f);
    float r = c - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    kiln_exp_parts e = {p * r * r + r, kiln_bitsf(((int32_t)n + 126) << 23) * 2.0f};
    return e;
}
static inline float kiln_expf(float x) {
    kiln_exp_parts e = kiln_exp_split(x);
    float y = e.q * e.s + e.s;
    return x < -86.6f ? 0.0f : (x > 88.72283935546875f ? INFINITY : y);
}
/* expm1(x) = 2^n q + (2^n - 1): exact cancellation for small x; -1 below -17 (expm1 rounds to -1 there). */
static inline float kiln_expm1f(float x) {
    kiln_exp_parts e = kiln_exp_split(x);
    float y = e.q * e.s + (e.s - 1.0f);
    return x < -17.0f ? -1.0f : (x > 88.72283935546875f ? INFINITY : y);
}
/* tanh(x) = expm1(2x) / (expm1(2x) + 2), odd; +-1 beyond |x| = 9 (tanh rounds to +-1 there). */
static inline float kiln_tanhf(float x) {
    float a = fabsf(x);
    float t = kiln_expm1f(-2.0f * a);
    float y = -t / (t + 2.0f);
    y = a > 9.0f ? 1.0f : y;
    return copysignf(y, x);
}
/* erf as x P(x^2) / Q(x^2) with x clamped to [-4, 4], where float erf is +-1 (the rational approximation
   Eigen's and XLA's float erf use): one division, no exp, and relative accuracy near 0. */
static inline float kiln_erff(float x) {
    float c = x < -4.0f ? -4.0f : (x > 4.0f ? 4.0f : x); /* not fminf/fmaxf: a NaN stays NaN, and no call */
    float z = c * c;
    float p = -2.72614225801306e-10f;
    p = p * z + 2.77068142495902e-08f;
    p = p * z - 2.10102402082508e-06f;
    p = p * z - 5.69250639462346e-05f;
    p = p * z - 7.34990630326855e-04f;
    p = p * z - 2.95459980854025e-03f;
    p = p * z - 1.60960333262415e-02f;
    float q = -1.45660718464996e-05f;
    q = q * z - 2.13374055278905e-04f;
    q = q * z - 1.68282697438203e-03f;
    q = q * z - 7.37332916720468e-03f;
    q = q * z - 1.42647390514189e-02f;
    return c * p / q;
}
#else
#define kiln_expf expf
#define kiln_expm1f expm1f
#define kiln_tanhf tanhf
#define kiln_erff erff
#endif
"""
