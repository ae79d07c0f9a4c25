"""STREAM: an elementwise output no loop of the function reads again, written past the cache.

A store to a line that is not in the cache reads it first (write-allocate). With ``STREAM=1``
each thread computes its block of TILE elements into a buffer on its stack (in L1) and copies
it out with non-temporal stores, which write whole lines without reading them (GCC 12 ignores
OpenMP's ``nontemporal`` clause, hence the explicit copy; off x86 the copy is a plain one).
Judged side by side against ``STREAM=0`` on this 2-core AMD EPYC (kb-cpu's 4 MB outputs, two
or three runs each): ReLU 1.18-1.45x, LeakyReLU 1.46x, HardTanh 1.02-1.33x, Softsign
1.04-1.15x, BatchNorm 1.02-1.21x; but sigmoid 0.90-0.96x and GELU 0.92-0.97x (their exp and
erf make the extra pass through L1 cost more than it saves) and ReLU on a 40 MB output
0.90-0.94x. So the seed starts at 1 where no streamed loop calls exp, erf, tanh, log or pow
and every streamed output fits in the last-level cache, else at 0; the search (and what
memory learned on siblings) can choose either.
"""

from __future__ import annotations

STREAM_HEADER = r"""#ifndef STREAM
#define STREAM 0
#endif
#if STREAM
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <stdint.h>
/* n floats from this thread's block src to dst with non-temporal stores: dst's lines are not read first */
static inline void kiln_stream(float* restrict dst, const float* restrict src, int64_t n) {
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i < n && ((uintptr_t)(dst + i) & 63); ++i) dst[i] = src[i];
    for (; i + 16 <= n; i += 16) _mm512_stream_ps(dst + i, _mm512_loadu_ps(src + i));
#elif defined(__AVX__)
    for (; i < n && ((uintptr_t)(dst + i) & 31); ++i) dst[i] = src[i];
    for (; i + 8 <= n; i += 8) _mm256_stream_ps(dst + i, _mm256_loadu_ps(src + i));
#elif defined(__SSE__)
    for (; i < n && ((uintptr_t)(dst + i) & 15); ++i) dst[i] = src[i];
    for (; i + 4 <= n; i += 4) _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
#endif
    for (; i < n; ++i) dst[i] = src[i];
}
/* Non-temporal stores are weakly ordered. Each thread's reach the end of a parallel loop through locked
   instructions, which no store passes; one fence at the function's end orders the calling thread's own. */
static inline void kiln_stream_fence(void) {
#if defined(__SSE__)
    _mm_sfence();
#endif
}
#endif
"""
