#include <algorithm>
#include <cstdint>

#include "roofbench/cuda.hpp"
#include "roofbench/kernels/cuda_elementwise.hpp"

namespace roofbench::kernels {
namespace {

constexpr int kThreads = 256;
constexpr std::size_t kVectorBytes = 16;
// Independent 16-byte loads per thread per iteration: enough bytes in flight per SM to cover HBM latency.
constexpr int kPacksPerThread = 4;
// Grid-stride loops cover any n, so the grid only needs to fill the GPU many times over.
constexpr std::size_t kMaxBlocks = std::size_t{1} << 20;

__device__ __forceinline__ float add_values(float x, float y) { return x + y; }
__device__ __forceinline__ __nv_bfloat16 add_values(__nv_bfloat16 x, __nv_bfloat16 y) { return __hadd(x, y); }

template <typename T>
struct alignas(kVectorBytes) Pack {
  static constexpr int kLanes = kVectorBytes / sizeof(T);
  T lanes[kLanes];
};

template <typename T>
__global__ void add_scalar_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, std::size_t n) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    c[i] = add_values(a[i], b[i]);
}

// The vectorised kernel's operations: c = a + b, and c = a (a copy, which reads no b).
struct AddOp {
  static constexpr int kInputs = 2;
  template <typename T>
  __device__ __forceinline__ T operator()(T x, T y) const {
    return add_values(x, y);
  }
};
struct CopyOp {
  static constexpr int kInputs = 1;
  template <typename T>
  __device__ __forceinline__ T operator()(T x, T) const {
    return x;
  }
};

template <typename T, typename Op>
__device__ __forceinline__ Pack<T> apply(Op op, const Pack<T>& x, const Pack<T>& y) {
  Pack<T> z;
#pragma unroll
  for (int lane = 0; lane < Pack<T>::kLanes; ++lane) z.lanes[lane] = op(x.lanes[lane], y.lanes[lane]);
  return z;
}

// Elements [head, head + packs * lanes) are 16-byte aligned in every array and go through packs; the
// `head` elements before them and the remainder after them are done one by one. b is read only when
// the operation takes two inputs.
template <typename T, typename Op>
__global__ void vec16_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, std::size_t n,
                             std::size_t head, std::size_t packs) {
  using P = Pack<T>;
  constexpr bool kReadsB = Op::kInputs == 2;
  const Op op;
  const P* a_packs = reinterpret_cast<const P*>(a + head);
  const P* b_packs = kReadsB ? reinterpret_cast<const P*>(b + head) : nullptr;
  P* c_packs = reinterpret_cast<P*>(c + head);
  const std::size_t thread = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;

  // A thread's packs in one iteration are `stride` apart so that each load instruction of a warp still
  // covers 512 contiguous bytes. All loads are issued before any arithmetic so they are in flight together.
  std::size_t p = thread;
  for (; p + (kPacksPerThread - 1) * stride < packs; p += kPacksPerThread * stride) {
    P x[kPacksPerThread], y[kPacksPerThread]{};
#pragma unroll
    for (int u = 0; u < kPacksPerThread; ++u) {
      x[u] = a_packs[p + u * stride];
      if constexpr (kReadsB) y[u] = b_packs[p + u * stride];
    }
#pragma unroll
    for (int u = 0; u < kPacksPerThread; ++u) c_packs[p + u * stride] = apply(op, x[u], y[u]);
  }
  for (; p < packs; p += stride) {
    const P x = a_packs[p];
    P y{};
    if constexpr (kReadsB) y = b_packs[p];
    c_packs[p] = apply(op, x, y);
  }

  const std::size_t body_end = head + packs * P::kLanes;
  const std::size_t edge_elements = head + (n - body_end);
  for (std::size_t e = thread; e < edge_elements; e += stride) {
    const std::size_t i = e < head ? e : body_end + (e - head);
    c[i] = op(a[i], kReadsB ? b[i] : T{});
  }
}

unsigned blocks_for(std::size_t work_items, std::size_t items_per_block) {
  const std::size_t blocks = (work_items + items_per_block - 1) / items_per_block;
  return static_cast<unsigned>(std::clamp<std::size_t>(blocks, 1, kMaxBlocks));
}

std::size_t misalignment(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % kVectorBytes; }

// Packs need every array to reach 16-byte alignment at the same element; when their offsets differ no
// common head exists and every element goes through the scalar edge loop. b is null for a copy.
template <typename T, typename Op>
void launch_vec16(const T* a, const T* b, T* c, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  constexpr std::size_t lanes = Pack<T>::kLanes;
  const std::size_t offset = misalignment(c);
  const bool b_agrees = Op::kInputs == 1 || misalignment(b) == offset;
  const bool can_pack = misalignment(a) == offset && b_agrees && offset % sizeof(T) == 0;
  const std::size_t head = can_pack ? std::min(n, (kVectorBytes - offset) % kVectorBytes / sizeof(T)) : n;
  const std::size_t packs = (n - head) / lanes;
  const std::size_t edge_elements = n - packs * lanes;
  const unsigned blocks = std::max(blocks_for(packs, kThreads * kPacksPerThread), blocks_for(edge_elements, kThreads));
  vec16_kernel<T, Op><<<blocks, kThreads, 0, stream>>>(a, b, c, n, head, packs);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace

template <typename T>
void launch_add_scalar(const T* a, const T* b, T* c, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  add_scalar_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, stream>>>(a, b, c, n);
  ROOFBENCH_CUDA_LAUNCH();
}

template <typename T>
void launch_add_vec16(const T* a, const T* b, T* c, std::size_t n, cudaStream_t stream) {
  launch_vec16<T, AddOp>(a, b, c, n, stream);
}

template <typename T>
void launch_copy_vec16(const T* a, T* c, std::size_t n, cudaStream_t stream) {
  launch_vec16<T, CopyOp>(a, nullptr, c, n, stream);
}

template void launch_add_scalar<float>(const float*, const float*, float*, std::size_t, cudaStream_t);
template void launch_add_scalar<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*, std::size_t,
                                               cudaStream_t);
template void launch_add_vec16<float>(const float*, const float*, float*, std::size_t, cudaStream_t);
template void launch_add_vec16<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*, std::size_t,
                                              cudaStream_t);
template void launch_copy_vec16<float>(const float*, float*, std::size_t, cudaStream_t);
template void launch_copy_vec16<__nv_bfloat16>(const __nv_bfloat16*, __nv_bfloat16*, std::size_t, cudaStream_t);

}  // namespace roofbench::kernels
