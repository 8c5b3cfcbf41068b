// float4.cuh - 16-byte global loads for the kernels that move four floats per instruction.
#pragma once

// Four consecutive elements of row r of a rows x cols matrix from column c (a multiple of 4):
// one 16-byte load where rows are 16-byte aligned (ALIGNED: cols a multiple of 4, so the four
// lie all inside or all outside), element by element otherwise; 0 outside the matrix (§26).
// The kernel picks ALIGNED once for the whole run: a test per load inside the k loop made
// ptxas keep both paths there. FULL: the matrix is whole tiles (the kernel checked), so the
// four lie inside and no bounds test is left in the k loop.
template <bool ALIGNED, bool FULL = false>
__device__ __forceinline__ float4 load4(const float *X, int r, int c, int rows, int cols) {
    if (FULL) return *reinterpret_cast<const float4 *>(&X[r * cols + c]);
    if (ALIGNED)
        return r < rows && c < cols ? *reinterpret_cast<const float4 *>(&X[r * cols + c])
                                    : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const bool in = r < rows;
    return make_float4(in && c < cols ? X[r * cols + c] : 0.0f,
                       in && c + 1 < cols ? X[r * cols + c + 1] : 0.0f,
                       in && c + 2 < cols ? X[r * cols + c + 2] : 0.0f,
                       in && c + 3 < cols ? X[r * cols + c + 3] : 0.0f);
}
