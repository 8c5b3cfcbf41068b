// 06_vectorized - kernel 05's micro-tiles, fed with 16-byte accesses (article §4.3; lesson 8
// §19: "vectorised loads").
// Global loads of A and B are float4 (one LDG.128 moves four elements). A is stored
// transposed, As[k][m], so that the k loop reads a thread's TM values of A as float4 (LDS.128)
// just like its TN values of B. The transposed stores put the lanes of a warp into a few
// columns of As, all in the same banks; PAD columns or an XOR swizzle of As's columns spread
// them over the 32 banks again.
#include "float4.cuh"
#include "trace.cuh"
#include "shape.cuh"

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 16
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 8
#endif
#ifndef PAD
#define PAD 4
#endif
#ifndef SWIZZLE
#define SWIZZLE 0
#endif
#ifndef SPLIT
#define SPLIT 0
#endif
#ifndef QUADS
#define QUADS 0
#endif
#define THREADS (BM * BN / (TM * TN))

static_assert(BM % TM == 0 && BN % TN == 0, "a thread's TM x TN tile must lie inside BM x BN");
static_assert(BK % 4 == 0 && BN % 4 == 0 && TM % 4 == 0 && TN % 4 == 0 && PAD % 4 == 0,
              "float4 accesses need multiples of 4 (and 16-byte aligned rows of As)");
static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0,
              "every thread copies the same number of float4s of A and of B");
static_assert(!(PAD && SWIZZLE), "padding or a swizzle, not both");
static_assert(!SPLIT || TN >= 8, "a split needs two float4 groups of columns");
static_assert(!QUADS || ((BN / TN) % 2 == 0 && (BM / TM) % 2 == 0),
              "2 x 2 quads need an even number of micro-tiles across and down");
static_assert(TM % 8 == 0, "a thread's rows of As start on a multiple of 8, below the swizzle");

#if SWIZZLE
// The lanes of one transposed store write 128/BK consecutive columns m of As in each of the
// BK/4 rows groups k/4; XOR-ing m with (k/4) * 128/BK moves each group to its own banks. The
// mask leaves m's low three bits alone, so a float4 of As stays whole and aligned.
#define AS_COL(k, m) ((m) ^ ((((k) / 4) % (BK / 4)) * (128 / BK)))
#else
#define AS_COL(k, m) (m)
#endif

struct __align__(16) MvTiles {
    float As[BK][BM + PAD];  // transposed: As[k][m] holds A[row0 + m][t*BK + k]
    float Bs[BK][BN];
};

// ALIGNED: K and N are multiples of 4, so every row of A, B and C starts 16-byte aligned. FULL:
// M, N and K are multiples of BM, BN and BK, so no load needs a bounds test (sm_90, P4 split
// quads: 1,121 instructions a k-step instead of 1,139). The kernel picks the copy once; inside
// the k loop a per-load test made ptxas keep both paths.
template <bool ALIGNED, bool FULL, bool MV_STAMPED>
__device__ __forceinline__ void vectorized_body(const float *A, const float *B, float *C, int M,
                                                int N, int K, MvTiles &sm MV_TRACE_DECL) {
    const int tid = threadIdx.x;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    // The thread's micro-tile in the (BM/TM) x (BN/TN) grid of them: row by row, or (QUADS)
    // lanes 4j .. 4j+3 on 2 x 2 neighbours, so that each four lanes read at most two distinct
    // float4s of As and of Bs. Its TN columns as TN/4 float4s: side by side, or (SPLIT) GROUP
    // apart, so that a warp's LDS.128 of one group read consecutive 16-byte words.
    constexpr int ACROSS = BN / TN, GROUP = SPLIT ? BN / (TN / 4) : 4;
    const int place_row = QUADS ? tid / (2 * ACROSS) * 2 + (tid >> 1 & 1) : tid / ACROSS;
    const int place_col = QUADS ? tid % (2 * ACROSS) / 4 * 2 + (tid & 1) : tid % ACROSS;
    const int thread_col = place_col * (SPLIT ? 4 : TN);
    const int thread_row = place_row * TM;
    float acc[TM][TN] = {{0.0f}};
    const int num_tiles = (K + BK - 1) / BK;
    MV_PHASES_BEGIN(num_tiles);
    MV_WARPS_BEGIN(num_tiles);

    for (int t = 0; t < num_tiles; ++t) {
        MV_MARK_ISSUED(t);
        MV_PROBE_BEGIN(t, &sm);
        // float4 f of the A tile: row f / (BK/4), columns 4 * (f % (BK/4)) .. + 3
#pragma unroll
        for (int i = 0; i < BM * BK / 4 / THREADS; ++i) {
            const int f = tid + i * THREADS, r = f / (BK / 4), c = f % (BK / 4) * 4;
            const float4 v = load4<ALIGNED, FULL>(A, row0 + r, t * BK + c, M, K);
            sm.As[c + 0][AS_COL(c + 0, r)] = v.x;
            MV_PROBE(MV_SITE_st_As + 4 * i + 0, &sm.As[c + 0][AS_COL(c + 0, r)]);
            sm.As[c + 1][AS_COL(c + 1, r)] = v.y;
            MV_PROBE(MV_SITE_st_As + 4 * i + 1, &sm.As[c + 1][AS_COL(c + 1, r)]);
            sm.As[c + 2][AS_COL(c + 2, r)] = v.z;
            MV_PROBE(MV_SITE_st_As + 4 * i + 2, &sm.As[c + 2][AS_COL(c + 2, r)]);
            sm.As[c + 3][AS_COL(c + 3, r)] = v.w;
            MV_PROBE(MV_SITE_st_As + 4 * i + 3, &sm.As[c + 3][AS_COL(c + 3, r)]);
        }
#pragma unroll
        for (int i = 0; i < BK * BN / 4 / THREADS; ++i) {
            const int f = tid + i * THREADS, r = f / (BN / 4), c = f % (BN / 4) * 4;
            *reinterpret_cast<float4 *>(&sm.Bs[r][c]) =
                load4<ALIGNED, FULL>(B, t * BK + r, col0 + c, K, N);
            MV_PROBE(MV_SITE_st_Bs + i, &sm.Bs[r][c]);
        }
        MV_ARRIVE(t, 0);
        __syncthreads();  // barrier 1: the tiles are complete
        MV_RELEASED(t, 0);
        MV_MARK_LOADED(t);

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int q = 0; q < TM / 4; ++q) {
                // = AS_COL(k, thread_row + 4q): the mask leaves the low three bits alone
                const float *at = &sm.As[k][AS_COL(k, thread_row) + 4 * q];
                const float4 v = *reinterpret_cast<const float4 *>(at);
                MV_PROBE(MV_SITE_ld_As + k * (TM / 4) + q, at);
                MV_PROBE_VALUE(t, MV_SITE_ld_As + k * (TM / 4) + q, v.x);
                a[4 * q] = v.x, a[4 * q + 1] = v.y, a[4 * q + 2] = v.z, a[4 * q + 3] = v.w;
            }
#pragma unroll
            for (int q = 0; q < TN / 4; ++q) {
                const float *at = &sm.Bs[k][thread_col + GROUP * q];
                const float4 v = *reinterpret_cast<const float4 *>(at);
                MV_PROBE(MV_SITE_ld_Bs + k * (TN / 4) + q, at);
                MV_PROBE_VALUE(t, MV_SITE_ld_Bs + k * (TN / 4) + q, v.x);
                b[4 * q] = v.x, b[4 * q + 1] = v.y, b[4 * q + 2] = v.z, b[4 * q + 3] = v.w;
            }
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

    // C in float4s where its rows are aligned and the four lie inside, else one by one
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + thread_row + i;
#pragma unroll
        for (int q = 0; q < TN / 4; ++q) {
            const int col = col0 + thread_col + GROUP * q;
            const float *v = &acc[i][4 * q];
            if (row >= M) continue;
            if (ALIGNED && col + 3 < N) {
                *reinterpret_cast<float4 *>(&C[row * N + col]) = make_float4(v[0], v[1], v[2], v[3]);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (col + j < N) C[row * N + col + j] = v[j];
            }
        }
    }
}

template <bool MV_STAMPED>
__device__ __forceinline__ void vectorized(const float *A, const float *B, float *C, int M,
                                           int N, int K, MvTiles &sm MV_TRACE_DECL) {
    MV_BY_SHAPE(vectorized_body, 4, A, B, C, M, N, K, sm)
}

extern "C" __global__ void MV_LAUNCH_BOUNDS(THREADS) mv_vectorized(const float *A, const float *B,
                                                                 float *C, int M, int N,
                                                                 int K MV_TRACE_PARAMS) {
    __shared__ MvTiles sm;
    MV_BLOCK_BEGIN_CALL();
    MV_RUN(vectorized, A, B, C, M, N, K, sm);
    MV_BLOCK_END_CALL();  // not inline: level 1 then keeps level 0's registers (trace.cuh)
}
