// 02_tiled - the lesson's tiled kernel (lesson 8 §6-17, boundaries §26, padding §27;
// article §3-4). Each block stages a TILE x TILE tile of A and of B in shared memory, then every
// thread reuses them TILE times: 2mnk/TILE global loads instead of 2mnk. PAD extra columns per
// row let the lesson show what padding does to banks and to vectorised (LDS.128) loads.
// DROP_SYNC = 1 or 2 leaves out barrier 1 or 2 on purpose: the race of §11-12, on real hardware.
#include "trace.cuh"

#ifndef TILE
#define TILE 16
#endif
#ifndef PAD
#define PAD 0
#endif
#ifndef DROP_SYNC
#define DROP_SYNC 0
#endif

// One struct fixes where Bs sits relative to As, so the access model knows every address.
struct __align__(16) MvTiles {
    float As[TILE][TILE + PAD];
    float Bs[TILE][TILE + PAD];
};

// The seed's kernel; at level 2, sampled blocks run the copy with MV_STAMPED = true (trace.cuh).
template <bool MV_STAMPED>
__device__ __forceinline__ void tiled(const float *A, const float *B, float *C, int M,
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
        // Out-of-range elements are stored as 0 so the inner loop needs no guard (§26).
        sm.As[threadIdx.y][threadIdx.x] = (row < M && a_col < K) ? A[row * K + a_col] : 0.0f;
        MV_PROBE(MV_SITE_st_As, &sm.As[threadIdx.y][threadIdx.x]);
        sm.Bs[threadIdx.y][threadIdx.x] = (b_row < K && col < N) ? B[b_row * N + col] : 0.0f;
        MV_PROBE(MV_SITE_st_Bs, &sm.Bs[threadIdx.y][threadIdx.x]);

        MV_ARRIVE(t, 0);
        if (DROP_SYNC != 1) __syncthreads();  // barrier 1: the whole tile is loaded before anyone reads it (§11)
        MV_RELEASED(t, 0);
        MV_MARK_LOADED(t);

#pragma unroll
        for (int k = 0; k < TILE; ++k) {
            MV_PROBE(MV_SITE_ld_As + k, &sm.As[threadIdx.y][k]);
            MV_PROBE(MV_SITE_ld_Bs + k, &sm.Bs[k][threadIdx.x]);
            const float a = sm.As[threadIdx.y][k], b = sm.Bs[k][threadIdx.x];
            MV_PROBE_VALUE(t, MV_SITE_ld_As + k, a);
            MV_PROBE_VALUE(t, MV_SITE_ld_Bs + k, b);
            sum += a * b;
        }

        MV_ARRIVE(t, 1);
        if (DROP_SYNC != 2) __syncthreads();  // barrier 2: nobody overwrites a tile another warp still reads (§12)
        MV_RELEASED(t, 1);
    }
    MV_MARK_LAST_COMPUTED();

    if (row < M && col < N) {
        C[row * N + col] = sum;
    }
}

extern "C" __global__ void MV_LAUNCH_BOUNDS(TILE * TILE) mv_tiled(const float *A, const float *B,
                                                                  float *C, int M, int N,
                                                                  int K MV_TRACE_PARAMS) {
    __shared__ MvTiles sm;
    MV_BLOCK_BEGIN();
    MV_RUN(tiled, A, B, C, M, N, K, sm);
    MV_BLOCK_END();
}
