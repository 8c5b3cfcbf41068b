// 01_naive - one thread per element of C (lesson 8 §2-5; article §2).
// Each thread walks a row of A and a column of B straight from global memory, so neighbouring
// threads re-read the same A and B elements: 2mnk global loads in all. The thread block is
// TILE x TILE, and the 2-D grid covers C.
#include "trace.cuh"

#ifndef TILE
#define TILE 16
#endif
#ifndef B_COL_MAJOR
#define B_COL_MAJOR 0
#endif

extern "C" __global__ void MV_LAUNCH_BOUNDS(TILE * TILE) mv_naive(const float *A, const float *B, float *C, int M, int N,
                                    int K MV_TRACE_PARAMS) {
    MV_BLOCK_BEGIN();
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;

    if (row < M && col < N) {
        float sum = 0.0f;  // the running sum lives in a register (§14)
        for (int k = 0; k < K; ++k) {
#if B_COL_MAJOR
            // B column-major (§28): element (k, col) at col * K + k, so the lanes of a warp,
            // consecutive in col, read addresses K floats apart: one sector each
            sum += A[row * K + k] * B[col * K + k];
#else
            sum += A[row * K + k] * B[k * N + col];  // lanes read consecutive floats of a row
#endif
        }
        C[row * N + col] = sum;
    }
    MV_BLOCK_END_CALL();
}
