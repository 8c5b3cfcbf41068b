// The body a kernel runs for the problem's shape, picked once per block so that no test of the
// shape sits inside the k loop (a per-load test there made ptxas keep both paths). The body is a
// template <bool ALIGNED, bool FULL, bool MV_STAMPED>:
//   FULL     M, N and K are multiples of BM, BN and BK: every copy lies inside, no bounds test;
//   ALIGNED  K and N are multiples of VEC elements: every row of A, B and C starts 16-byte
//            aligned, so a row's VEC elements move as one 16-byte access.
// Whole tiles are aligned (BK and BN are multiples of VEC). Used inside a function templated on
// MV_STAMPED (trace.cuh's MV_RUN), where MV_TRACE_FORWARD passes the trace on.
#pragma once

#define MV_BY_SHAPE(body, VEC, A, B, C, M, N, K, sm)                                  \
    if ((M) % BM == 0 && (N) % BN == 0 && (K) % BK == 0)                              \
        body<true, true, MV_STAMPED>(A, B, C, M, N, K, sm MV_TRACE_FORWARD);          \
    else if ((K) % (VEC) == 0 && (N) % (VEC) == 0)                                    \
        body<true, false, MV_STAMPED>(A, B, C, M, N, K, sm MV_TRACE_FORWARD);         \
    else                                                                              \
        body<false, false, MV_STAMPED>(A, B, C, M, N, K, sm MV_TRACE_FORWARD);
