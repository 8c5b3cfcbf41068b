// wgmma.cuh - Hopper's warpgroup MMA (sm_90a, lesson 8 §20-23). Four consecutive warps (a
// warpgroup, starting at a warp index divisible by 4) issue one wgmma.mma_async together: it
// reads A (64 x 16) and B (16 x N) straight from shared memory through 64-bit matrix descriptors
// and adds their product to a 64 x N fp32 accumulator spread over the warpgroup's registers.
// Warp w of the warpgroup holds rows 16w .. 16w + 15; lane 4g + u holds, for each n8 column
// group j, the elements (g, 8j + 2u), (g, 8j + 2u + 1), (g + 8, 8j + 2u), (g + 8, 8j + 2u + 1)
// in d[4j .. 4j + 3] (the m16n8k16 accumulator layout, repeated along N).
// The instruction is asynchronous: wgmma_fence before the first (the accumulators are read),
// commit to close a group, wait<N> until at most N groups are in flight.
#pragma once

#ifndef MV_WGMMA_TYPE
#define MV_WGMMA_TYPE "bf16"
#endif

// A K-major tile whose rows are 128 bytes (64 fp16/bf16 elements), written by TMA with its
// 128-byte swizzle (16-byte chunk c of row r at chunk c ^ r % 8): the descriptor holds the
// start address, the byte distance between groups of 8 rows (1024: stride byte offset), and
// the swizzle mode (1 << 62: 128 bytes). The leading byte offset is unused for a swizzled
// K-major operand (encoded as 1). The k-th 16-deep slice of the row starts 32k bytes in: the
// hardware applies the swizzle to the addresses it forms, so a slice is just a later start.
__device__ __forceinline__ unsigned long long wgmma_desc(const void *tile) {
    const unsigned long long addr = (unsigned)__cvta_generic_to_shared(tile);
    return ((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((1024ull >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
}
// Keeps the compiler from moving accumulator reads or writes across a fence or wait: the
// wgmma writes them behind its back.
template <int R>
__device__ __forceinline__ void wgmma_hold(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d (64 x N, fp32) += A (64 x 16) B (16 x N) from the descriptors; scale_d = 0 overwrites d
// (the first slice). imm-scale-a/b 1, both operands K-major (no transpose). The accumulators are
// the asm's first N / 2 operands, the descriptors and scale_d the three after them.
#define MV_ACC4(i) "+f"(d[i]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3])
#define MV_ACC16(i) MV_ACC4(i), MV_ACC4((i) + 4), MV_ACC4((i) + 8), MV_ACC4((i) + 12)
#define MV_ACC64(i) MV_ACC16(i), MV_ACC16((i) + 16), MV_ACC16((i) + 32), MV_ACC16((i) + 48)
#define MV_REGS_0_63 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define MV_REGS_64_127 \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define MV_WGMMA(n, regs, desc_a, desc_b, scale_d, ...)                                     \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " scale_d ", 0;\n"                           \
                 "wgmma.mma_async.sync.aligned.m64n" #n "k16.f32." MV_WGMMA_TYPE              \
                 "." MV_WGMMA_TYPE " {" regs "}, " desc_a ", " desc_b ", p, 1, 1, 0, 0;\n}\n" \
                 : __VA_ARGS__                                                               \
                 : "l"(a), "l"(b), "r"(scale))

__device__ __forceinline__ void wgmma_n128(float (&d)[64], unsigned long long a,
                                          unsigned long long b, int scale) {
    MV_WGMMA(128, MV_REGS_0_63, "%64", "%65", "%66", MV_ACC64(0));
}

__device__ __forceinline__ void wgmma_n256(float (&d)[128], unsigned long long a,
                                          unsigned long long b, int scale) {
    MV_WGMMA(256, MV_REGS_0_63 ", " MV_REGS_64_127, "%128", "%129", "%130", MV_ACC64(0),
             MV_ACC64(64));
}
