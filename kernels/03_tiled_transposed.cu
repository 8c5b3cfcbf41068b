// 03_tiled_transposed - the tiled kernel with A's tile stored transposed, As[k][m]
// (lesson 8 §27-28; article §6.2). Threads of a warp differ in threadIdx.x, so the store
// As[threadIdx.x][threadIdx.y] strides by TILE + PAD words: at TILE=32, PAD=0 all 32 lanes hit
// one bank (a 32-way conflict); PAD=1 spreads them over 32 banks. The inner loop then reads
// As[k][threadIdx.y], a broadcast within each row of threads.
#include "trace.cuh"

#ifndef TILE
#define TILE 16
#endif
#ifndef PAD
#define PAD 0
#endif

struct __align__(16) MvTiles {
    float As[TILE][TILE + PAD];  // As[k][m]: transposed
    float Bs[TILE][TILE + PAD];
};

// The kernel body; at level 2, sampled blocks run the copy with MV_STAMPED = true (trace.cuh).
template <bool MV_STAMPED>
__device__ __forceinline__ void tiled_transposed(const float *A, const float *B, float *C, int M,
                                                int N, int K, MvTiles &sm MV_TRACE_DECL) {
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float sum = 0.0f;
    int num_tiles = (K + TILE - 1) / TILE;
    MV_PHASES_BEGIN(num_tiles);
    MV_WARPS_BEGIN(num_tiles);

    for (int t = 0; t < num_tiles; ++t) {
        MV_MARK_ISSUED(t);
        MV_PROBE_BEGIN(t, &sm);
        int a_col = t * TILE + threadIdx.x;
        int b_row = t * TILE + threadIdx.y;
        // The global read stays coalesced (consecutive a_col); only the shared store is strided.
        sm.As[threadIdx.x][threadIdx.y] = (row < M && a_col < K) ? A[row * K + a_col] : 0.0f;
        MV_PROBE(MV_SITE_st_As, &sm.As[threadIdx.x][threadIdx.y]);
        sm.Bs[threadIdx.y][threadIdx.x] = (b_row < K && col < N) ? B[b_row * N + col] : 0.0f;
        MV_PROBE(MV_SITE_st_Bs, &sm.Bs[threadIdx.y][threadIdx.x]);

        MV_ARRIVE(t, 0);
        __syncthreads();
        MV_RELEASED(t, 0);
        MV_MARK_LOADED(t);

#pragma unroll
        for (int k = 0; k < TILE; ++k) {
            MV_PROBE(MV_SITE_ld_As + k, &sm.As[k][threadIdx.y]);
            MV_PROBE(MV_SITE_ld_Bs + k, &sm.Bs[k][threadIdx.x]);
            const float a = sm.As[k][threadIdx.y], b = sm.Bs[k][threadIdx.x];
            MV_PROBE_VALUE(t, MV_SITE_ld_As + k, a);
            MV_PROBE_VALUE(t, MV_SITE_ld_Bs + k, b);
            sum += a * b;
        }

        MV_ARRIVE(t, 1);
        __syncthreads();
        MV_RELEASED(t, 1);
    }
    MV_MARK_LAST_COMPUTED();

    if (row < M && col < N) {
        C[row * N + col] = sum;
    }
}

extern "C" __global__ void MV_LAUNCH_BOUNDS(TILE * TILE) mv_tiled_transposed(const float *A, const float *B,
                                                                             float *C, int M, int N,
                                                                             int K MV_TRACE_PARAMS) {
    __shared__ MvTiles sm;
    MV_BLOCK_BEGIN();
    MV_RUN(tiled_transposed, A, B, C, M, N, K, sm);
    MV_BLOCK_END();
}
