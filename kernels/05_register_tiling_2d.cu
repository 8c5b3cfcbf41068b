// 05_register_tiling_2d - each thread computes a TM x TN micro-tile of C (lesson 8 §18-19;
// article §4.3, 2-D register tiling).
// A block computes a BM x BN tile of C with BM*BN/(TM*TN) threads, staging BM x BK of A and
// BK x BN of B per k-step. For each k a thread reads a column slice of TM As values and a row
// slice of TN Bs values into registers and multiplies them as an outer product: TM + TN shared
// loads feed TM*TN multiply-adds (1-D tiling needed 1 + TM for TM), so a value read from shared
// memory is reused TN or TM times (§19).
#include "trace.cuh"

#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef BK
#define BK 16
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 4
#endif
#define THREADS (BM * BN / (TM * TN))

static_assert(BM % TM == 0 && BN % TN == 0, "a thread's TM x TN tile must lie inside BM x BN");
static_assert((BM * BK) % THREADS == 0 && (BK * BN) % THREADS == 0,
              "every thread copies the same number of A and B elements");

struct __align__(16) MvTiles {
    float As[BM][BK];
    float Bs[BK][BN];
};

template <bool MV_STAMPED>
__device__ __forceinline__ void register_tiling_2d(const float *A, const float *B, float *C,
                                                   int M, int N, int K,
                                                   MvTiles &sm MV_TRACE_DECL) {
    const int tid = threadIdx.x;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    // BN/TN threads side by side cover a row band of TM rows; a thread's micro-tile starts at
    // (thread_row, thread_col) of the block's tile
    const int thread_col = tid % (BN / TN) * TN;
    const int thread_row = tid / (BN / TN) * TM;
    float acc[TM][TN] = {{0.0f}};  // TM*TN partial sums, all in registers
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

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];  // the fragments: a column slice of As, a row slice of Bs
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                a[i] = sm.As[thread_row + i][k];
                MV_PROBE(MV_SITE_ld_As + k * TM + i, &sm.As[thread_row + i][k]);
                MV_PROBE_VALUE(t, MV_SITE_ld_As + k * TM + i, a[i]);
            }
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                b[j] = sm.Bs[k][thread_col + j];
                MV_PROBE(MV_SITE_ld_Bs + k * TN + j, &sm.Bs[k][thread_col + j]);
                MV_PROBE_VALUE(t, MV_SITE_ld_Bs + k * TN + j, b[j]);
            }
            // the outer product: each a[i] feeds TN multiply-adds, each b[j] feeds TM
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }

        MV_ARRIVE(t, 1);
        __syncthreads();  // barrier 2: nobody overwrites the tiles while others read them
        MV_RELEASED(t, 1);
    }
    MV_MARK_LAST_COMPUTED();

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + thread_row + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int col = col0 + thread_col + j;
            if (row < M && col < N) C[row * N + col] = acc[i][j];
        }
    }
}

extern "C" __global__ void MV_LAUNCH_BOUNDS(THREADS) mv_register_tiling_2d(const float *A,
                                                                         const float *B, float *C,
                                                                         int M, int N,
                                                                         int K MV_TRACE_PARAMS) {
    __shared__ MvTiles sm;
    MV_BLOCK_BEGIN_CALL();
    MV_RUN(register_tiling_2d, A, B, C, M, N, K, sm);
    MV_BLOCK_END_CALL();  // not inline: level 1 then keeps level 0's registers (trace.cuh)
}
