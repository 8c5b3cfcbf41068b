// tma.cuh - Hopper's tensor memory accelerator and shared-memory barriers (sm_90, §24-25).
// One thread asks the copy engine for a 2-D box of a matrix (cp.async.bulk.tensor): the engine
// reads it from global memory, writes it into shared memory in the layout its tensor map names
// (here the 128-byte swizzle) and, when the last byte has landed, counts the bytes on an
// mbarrier. No lane computes an address and no register holds the data. Elements outside the
// matrix arrive as zeros, so a box at an edge needs no bounds check.
// An mbarrier is a 64-bit word of shared memory with an expected arrival count and a phase
// bit: the phase completes when all arrivals (and, with expect_tx, all bytes) are in; waiters
// spin on the parity of the phase they need.
#pragma once

// A CUtensorMap as the driver encodes it (cuTensorMapEncodeTiled): 128 opaque bytes, passed to
// the kernel by value (__grid_constant__) so the copy engine reads it from parameter space.
struct __align__(64) MvTensorMap {
    unsigned long long opaque[16];
};

__device__ __forceinline__ unsigned mv_smem_addr(const void *p) {
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void mbar_init(unsigned long long *bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(mv_smem_addr(bar)), "r"(count)
                 : "memory");
}

// Makes initialised barriers visible to the copy engine (the async proxy).
__device__ __forceinline__ void mbar_fence_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival that also announces `bytes` the copy engine will deliver to this phase.
__device__ __forceinline__ void mbar_expect_bytes(unsigned long long *bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                     mv_smem_addr(bar)),
                 "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned long long *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(mv_smem_addr(bar)) : "memory");
}

// Returns once the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(unsigned long long *bar, unsigned parity) {
    const unsigned addr = mv_smem_addr(bar);
    unsigned done = 0;
    while (!done) {
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(addr), "r"(parity)
            : "memory");
    }
}

// The box of `map` whose first element is (row, col) of the row-major matrix (col: the inner,
// contiguous coordinate) into shared memory at `to`, completing on `bar`.
__device__ __forceinline__ void tma_load_2d(void *to, const MvTensorMap *map,
                                            unsigned long long *bar, int row, int col) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(mv_smem_addr(to)),
        "l"(map), "r"(mv_smem_addr(bar)), "r"(col), "r"(row)
        : "memory");
}
