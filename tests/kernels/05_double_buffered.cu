// 05_double_buffered - test-only: the tiled kernel with register-staged double buffering, the
// proof that trace.cuh records several k-steps in flight (issue 9). Shared memory holds two
// buffers of the A and B tiles. In step t every thread loads its elements of tile t + 1 from
// global memory into registers, computes on buffer t % 2 while those loads are in flight, then
// stores them into buffer (t + 1) % 2: one __syncthreads per step instead of two.
// Two channels of marks, both stamped by warp 0 (their clocks are then comparable):
//   channel 0, copy:    copy_issue (the global loads of step s go out), copy_stored (its
//                       elements are in shared memory); step 0 in the prologue, step t + 1
//                       during step t
//   channel 1, compute: compute_begin, compute_end (the multiply-adds of step t)
// Neither is chained: each stamps its last mark itself.
#include "trace.cuh"

#ifndef TILE
#define TILE 16
#endif
#ifndef PAD
#define PAD 0
#endif

struct __align__(16) MvTiles {
    float As[2][TILE][TILE + PAD];
    float Bs[2][TILE][TILE + PAD];
};


template <bool MV_STAMPED>
__device__ __forceinline__ void double_buffered(const float *A, const float *B, float *C, int M,
                                                int N, int K, MvTiles &sm MV_TRACE_DECL) {
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    const int num_tiles = (K + TILE - 1) / TILE;
    float sum = 0.0f;
    MV_STEPS_BEGIN(num_tiles);
    MV_CHANNEL(0, 0);  // copy
    MV_CHANNEL(1, 0);  // compute
    MV_WARPS_BEGIN(num_tiles);

    // Prologue: tile 0 into buffer 0. Out-of-range elements are stored as 0 (§26).
    MV_STEP_BEGIN(0, 0);
    sm.As[0][ty][tx] = (row < M && tx < K) ? A[row * K + tx] : 0.0f;
    sm.Bs[0][ty][tx] = (ty < K && col < N) ? B[ty * N + col] : 0.0f;
    MV_STEP_MARK(0, 0, 1);
    MV_ARRIVE(0, 0);
    __syncthreads();  // the copy of step 0 is complete
    MV_RELEASED(0, 0);

    for (int t = 0; t < num_tiles; ++t) {
        const int cur = t & 1;
        const bool more = t + 1 < num_tiles;
        if (more) {
            MV_STEP_BEGIN(0, t + 1);
        }
        // Tile t + 1 into registers. Past the last tile the guards fail and nothing is loaded,
        // so the loads need no branch and stay ahead of the multiply-adds.
        const int a_col = (t + 1) * TILE + tx;
        const int b_row = (t + 1) * TILE + ty;
        const float a_next = (row < M && a_col < K) ? A[row * K + a_col] : 0.0f;
        const float b_next = (b_row < K && col < N) ? B[b_row * N + col] : 0.0f;

        MV_STEP_BEGIN(1, t);
#pragma unroll
        for (int k = 0; k < TILE; ++k) {
            sum += sm.As[cur][ty][k] * sm.Bs[cur][k][tx];
        }
        MV_STEP_MARK(1, t, 1);

        if (more) {
            // Buffer cur ^ 1 was last read in step t - 1, which every warp left at the barrier
            // of step t - 1; the barrier below publishes it for step t + 1.
            sm.As[cur ^ 1][ty][tx] = a_next;
            sm.Bs[cur ^ 1][ty][tx] = b_next;
            MV_STEP_MARK(0, t + 1, 1);
            MV_ARRIVE(t + 1, 0);
            __syncthreads();
            MV_RELEASED(t + 1, 0);
        }
    }
    MV_CHANNEL_FLUSH(0);
    MV_CHANNEL_FLUSH(1);

    if (row < M && col < N) {
        C[row * N + col] = sum;
    }
}

extern "C" __global__ void MV_LAUNCH_BOUNDS(TILE * TILE)
    mv_double_buffered(const float *A, const float *B, float *C, int M, int N,
                       int K MV_TRACE_PARAMS) {
    __shared__ MvTiles sm;
    MV_BLOCK_BEGIN();
    MV_RUN(double_buffered, A, B, C, M, N, K, sm);
    MV_BLOCK_END();
}
