// 04_register_tiling_1d - each thread computes TM outputs of one column of C (lesson 8 §18;
// article §4.3, register caching).
// A block computes a BM x BN tile of C with BM*BN/TM threads, staging BM x BK of A and BK x BN
// of B per k-step. A thread reads each Bs value it needs into a register once and reuses it for
// TM multiply-adds against TM As values, so it needs 1 + TM shared loads per TM FMAs instead
// of 2 per FMA (§18: one value read from shared memory feeds several accumulators).
#include "trace.cuh"

#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 8
#endif
#define THREADS (BM * BN / TM)

static_assert(BM % TM == 0, "a thread's TM rows must lie inside the block's BM rows");
static_assert((BM * BK) % THREADS == 0 && (BK * BN) % THREADS == 0,
              "every thread copies the same number of A and B elements");

struct __align__(16) MvTiles {
    float As[BM][BK];
    float Bs[BK][BN];
};

template <bool MV_STAMPED>
__device__ __forceinline__ void register_tiling_1d(const float *A, const float *B, float *C,
                                                   int M, int N, int K,
                                                   MvTiles &sm MV_TRACE_DECL) {
    const int tid = threadIdx.x;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int thread_col = tid % BN;       // a warp spans 32 consecutive columns of one row band
    const int thread_row = tid / BN * TM;  // the first of this thread's TM rows in the tile
    float acc[TM] = {0.0f};  // TM partial sums, all in registers
    const int num_tiles = (K + BK - 1) / BK;
    MV_PHASES_BEGIN(num_tiles);
    MV_WARPS_BEGIN(num_tiles);

    for (int t = 0; t < num_tiles; ++t) {
        MV_MARK_ISSUED(t);
        MV_PROBE_BEGIN(t, &sm);
        // Consecutive threads copy consecutive elements of a row: coalesced global loads.
#pragma unroll
        for (int i = 0; i < BM * BK / THREADS; ++i) {
            const int e = tid + i * THREADS, r = e / BK, c = e % BK;
            const int gr = row0 + r, gc = t * BK + c;
            sm.As[r][c] = (gr < M && gc < K) ? A[gr * K + gc] : 0.0f;  // out of range: 0 (§26)
            MV_PROBE(MV_SITE_st_As + i, &sm.As[r][c]);
        }
#pragma unroll
        for (int i = 0; i < BK * BN / THREADS; ++i) {
            const int e = tid + i * THREADS, r = e / BN, c = e % BN;
            const int gr = t * BK + r, gc = col0 + c;
            sm.Bs[r][c] = (gr < K && gc < N) ? B[gr * N + gc] : 0.0f;
            MV_PROBE(MV_SITE_st_Bs + i, &sm.Bs[r][c]);
        }
        MV_ARRIVE(t, 0);
        __syncthreads();  // barrier 1: the tiles are complete
        MV_RELEASED(t, 0);
        MV_MARK_LOADED(t);

        // The step's BK values of Bs, one shared load each, stay in registers while the
        // thread runs down its TM rows: each value feeds TM multiply-adds. Row by row, a row's
        // BK values of As are the only others live, so 16 rows of sums fit beside them (k
        // outermost, ptxas held 16 rows of As and re-read words it had no registers for).
        float b[BK];
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            b[k] = sm.Bs[k][thread_col];
            MV_PROBE(MV_SITE_ld_Bs + k, &sm.Bs[k][thread_col]);
            MV_PROBE_VALUE(t, MV_SITE_ld_Bs + k, b[k]);
        }
#pragma unroll
        for (int r = 0; r < TM; ++r) {
#pragma unroll
            for (int k = 0; k < BK; ++k) {
                MV_PROBE(MV_SITE_ld_As + k * TM + r, &sm.As[thread_row + r][k]);
                const float a = sm.As[thread_row + r][k];
                MV_PROBE_VALUE(t, MV_SITE_ld_As + k * TM + r, a);
                acc[r] += a * b[k];
            }
        }

        MV_ARRIVE(t, 1);
        __syncthreads();  // barrier 2: nobody overwrites the tiles while others read them
        MV_RELEASED(t, 1);
    }
    MV_MARK_LAST_COMPUTED();

    const int col = col0 + thread_col;
#pragma unroll
    for (int r = 0; r < TM; ++r) {
        const int row = row0 + thread_row + r;
        if (row < M && col < N) C[row * N + col] = acc[r];
    }
}

extern "C" __global__ void MV_LAUNCH_BOUNDS(THREADS) mv_register_tiling_1d(const float *A,
                                                                         const float *B, float *C,
                                                                         int M, int N,
                                                                         int K MV_TRACE_PARAMS) {
    __shared__ MvTiles sm;
    MV_BLOCK_BEGIN_CALL();
    MV_RUN(register_tiling_1d, A, B, C, M, N, K, sm);
    MV_BLOCK_END_CALL();  // not inline: level 1 then keeps level 0's registers (trace.cuh)
}
