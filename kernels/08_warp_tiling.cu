// 08_warp_tiling - block tile -> warp tile -> thread micro-tile (lesson 8 §19; article §4.3).
// Kernel 06's float4 loads and transposed As, with one more level between the block and the
// thread: each warp owns a WM x WN warp tile of the block's BM x BN tile and walks it in
// WMITER x WNITER sub-tiles of WSUBM x WSUBN; in each, a lane computes a TM x TN micro-tile.
// The 32 lanes of a warp then read few, neighbouring values of As and Bs per k (a warp's reads
// stay inside its warp tile), and each value a lane loads feeds WNITER*TN or WMITER*TM FMAs.
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
#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 64
#endif
#ifndef WNITER
#define WNITER 2
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 4
#endif
#ifndef PAD
#define PAD 4
#endif
#define THREADS ((BM / WM) * (BN / WN) * 32)
#define WMITER ((WM * WN) / (32 * TM * TN * WNITER))
#define WSUBM (WM / WMITER)
#define WSUBN (WN / WNITER)

static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must tile the block tile");
static_assert(WMITER >= 1 && (WM * WN) % (32 * TM * TN * WNITER) == 0,
              "a warp's 32 lanes x TM x TN x WNITER must divide its WM x WN tile");
static_assert(WSUBN % TN == 0 && (WSUBN / TN) * (WSUBM / TM) == 32,
              "one sub-tile is 32 micro-tiles, one per lane");
static_assert(BK % 4 == 0 && BN % 4 == 0 && TM % 4 == 0 && TN % 4 == 0 && PAD % 4 == 0,
              "float4 accesses need multiples of 4 (and 16-byte aligned rows of As)");
static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0,
              "every thread copies the same number of float4s of A and of B");

struct __align__(16) MvTiles {
    float As[BK][BM + PAD];  // transposed: As[k][m] holds A[row0 + m][t*BK + k]
    float Bs[BK][BN];
};

template <bool ALIGNED, bool FULL, bool MV_STAMPED>
__device__ __forceinline__ void warp_tiling_body(const float *A, const float *B, float *C, int M,
                                                 int N, int K, MvTiles &sm MV_TRACE_DECL) {
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    // the warp's tile inside the block's, and the lane's micro-tile inside each sub-tile
    const int warp_row = warp / (BN / WN) * WM, warp_col = warp % (BN / WN) * WN;
    const int lane_row = lane / (WSUBN / TN) * TM, lane_col = lane % (WSUBN / TN) * TN;
    float acc[WMITER * TM][WNITER * TN] = {{0.0f}};
    const int num_tiles = (K + BK - 1) / BK;
    MV_PHASES_BEGIN(num_tiles);
    MV_WARPS_BEGIN(num_tiles);

    for (int t = 0; t < num_tiles; ++t) {
        MV_MARK_ISSUED(t);
        MV_PROBE_BEGIN(t, &sm);
#pragma unroll
        for (int i = 0; i < BM * BK / 4 / THREADS; ++i) {
            const int f = tid + i * THREADS, r = f / (BK / 4), c = f % (BK / 4) * 4;
            const float4 v = load4<ALIGNED, FULL>(A, row0 + r, t * BK + c, M, K);
            sm.As[c + 0][r] = v.x;
            MV_PROBE(MV_SITE_st_As + 4 * i + 0, &sm.As[c + 0][r]);
            sm.As[c + 1][r] = v.y;
            MV_PROBE(MV_SITE_st_As + 4 * i + 1, &sm.As[c + 1][r]);
            sm.As[c + 2][r] = v.z;
            MV_PROBE(MV_SITE_st_As + 4 * i + 2, &sm.As[c + 2][r]);
            sm.As[c + 3][r] = v.w;
            MV_PROBE(MV_SITE_st_As + 4 * i + 3, &sm.As[c + 3][r]);
        }
#pragma unroll
        for (int i = 0; i < BK * BN / 4 / THREADS; ++i) {
            const int f = tid + i * THREADS, r = f / (BN / 4), c = f % (BN / 4) * 4;
            *reinterpret_cast<float4 *>(&sm.Bs[r][c]) = load4<ALIGNED, FULL>(B, t * BK + r, col0 + c, K, N);
            MV_PROBE(MV_SITE_st_Bs + i, &sm.Bs[r][c]);
        }
        MV_ARRIVE(t, 0);
        __syncthreads();  // barrier 1: the tiles are complete
        MV_RELEASED(t, 0);
        MV_MARK_LOADED(t);

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[WMITER * TM], b[WNITER * TN];
#pragma unroll
            for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
                for (int q = 0; q < TM / 4; ++q) {
                    const int slot = (k * WMITER + wm) * (TM / 4) + q;
                    const float *at = &sm.As[k][warp_row + wm * WSUBM + lane_row + 4 * q];
                    const float4 v = *reinterpret_cast<const float4 *>(at);
                    MV_PROBE(MV_SITE_ld_As + slot, at);
                    MV_PROBE_VALUE(t, MV_SITE_ld_As + slot, v.x);
                    float *to = &a[wm * TM + 4 * q];
                    to[0] = v.x, to[1] = v.y, to[2] = v.z, to[3] = v.w;
                }
#pragma unroll
            for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
                for (int q = 0; q < TN / 4; ++q) {
                    const int slot = (k * WNITER + wn) * (TN / 4) + q;
                    const float *at = &sm.Bs[k][warp_col + wn * WSUBN + lane_col + 4 * q];
                    const float4 v = *reinterpret_cast<const float4 *>(at);
                    MV_PROBE(MV_SITE_ld_Bs + slot, at);
                    MV_PROBE_VALUE(t, MV_SITE_ld_Bs + slot, v.x);
                    float *to = &b[wn * TN + 4 * q];
                    to[0] = v.x, to[1] = v.y, to[2] = v.z, to[3] = v.w;
                }
#pragma unroll
            for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
                for (int j = 0; j < WNITER * TN; ++j) acc[i][j] += a[i] * b[j];
        }

        MV_ARRIVE(t, 1);
        __syncthreads();  // barrier 2: nobody overwrites the tiles while others read them
        MV_RELEASED(t, 1);
    }
    MV_MARK_LAST_COMPUTED();

#pragma unroll
    for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int row = row0 + warp_row + wm * WSUBM + lane_row + i;
            if (row >= M) continue;
#pragma unroll
            for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
                for (int q = 0; q < TN / 4; ++q) {
                    const int col = col0 + warp_col + wn * WSUBN + lane_col + 4 * q;
                    const float *v = &acc[wm * TM + i][wn * TN + 4 * q];
                    if (ALIGNED && col + 3 < N) {
                        *reinterpret_cast<float4 *>(&C[row * N + col]) =
                            make_float4(v[0], v[1], v[2], v[3]);
                    } else {
#pragma unroll
                        for (int j = 0; j < 4; ++j)
                            if (col + j < N) C[row * N + col + j] = v[j];
                    }
                }
        }
}

// ALIGNED: K and N are multiples of 4 (rows of A, B and C start 16-byte aligned); FULL: M, N
// and K are whole tiles, so no load tests bounds (sm_90, WNI2 P4: 2,203 instructions a k-step
// instead of 2,243). The kernel picks the copy once, as kernel 06 does.
template <bool MV_STAMPED>
__device__ __forceinline__ void warp_tiling(const float *A, const float *B, float *C, int M,
                                            int N, int K, MvTiles &sm MV_TRACE_DECL) {
    MV_BY_SHAPE(warp_tiling_body, 4, A, B, C, M, N, K, sm)
}

extern "C" __global__ void MV_LAUNCH_BOUNDS(THREADS) mv_warp_tiling(const float *A, const float *B,
                                                                  float *C, int M, int N,
                                                                  int K MV_TRACE_PARAMS) {
    __shared__ MvTiles sm;
    MV_BLOCK_BEGIN();
    MV_RUN(warp_tiling, A, B, C, M, N, K, sm);
    MV_BLOCK_END_CALL();  // not inline: level 1 then keeps level 0's registers (trace.cuh)
}
