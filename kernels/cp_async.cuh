// cp_async.cuh - asynchronous copies from global to shared memory (sm_80 and later, §24-25).
// A cp.async goes out like a load but writes shared memory itself, without passing through
// registers, so a thread can issue the copy of a later k-step and compute on the current one
// while it travels. Copies are grouped (commit_group); wait_group<N> returns once at most N of
// the thread's groups are still in flight.
#pragma once

// 4 bytes, cached in L1 (.ca: the only caching 4-byte copies allow). Outside the matrix
// (in == false) nothing is read and the 4 bytes are zero-filled: src-size 0. The source
// address must still be valid, so the caller passes one inside the matrix then.
__device__ __forceinline__ void cp_async4(float *dst, const float *src, bool in) {
    const unsigned int to = (unsigned int)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(to), "l"(src),
                 "r"(in ? 4 : 0)
                 : "memory");
}

// 16 bytes, bypassing L1 (.cg): both addresses 16-byte aligned, of any element type.
__device__ __forceinline__ void cp_async16(void *dst, const void *src, bool in) {
    const unsigned int to = (unsigned int)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(src),
                 "r"(in ? 16 : 0)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}
