// A Rotation (plugin.hpp) over a CUDA case's own buffers: the case names each buffer one run reads (and,
// where it should rotate too, each output it writes) with the member pointer the run takes it from; under
// --cold the host asks for copies of them all and, before each run, which set the pointers show.
//
//   InputCopies copies_;
//   setup:  a_ = alloc...; copies_.add(a_, bytes_a, BufferRole::input); copies_.add(c_, bytes_c, BufferRole::output);
//   Rotation* rotation() override { return &copies_; }
//
// Inputs are copied on the device from set 0 (the buffers setup() filled), so every set holds the same
// values and the case's gate, which reads the pointers as they are, holds on each; outputs are fresh
// buffers of the output role. A buffer added with its pointer still null is refused.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <iterator>
#include <vector>

#include "roofbench/cuda.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::case_support {

class InputCopies final : public Rotation {
 public:
  template <typename T>
  void add(T*& pointer, std::size_t bytes, BufferRole role) {
    if (pointer == nullptr) throw Error("InputCopies::add: the buffer is not allocated yet");
    buffers_.push_back({{const_cast<void*>(static_cast<const void*>(pointer))}, bytes, role,
                        [&pointer](void* set) { pointer = static_cast<T*>(set); }});
  }

  std::size_t bytes() const override {
    std::size_t total = 0;
    for (const Buffer& b : buffers_) total += b.bytes;
    return total;
  }

  void make_copies(Context& ctx, int copies) override {
    const cudaStream_t stream = cuda::stream(ctx);
    for (Buffer& b : buffers_) {
      b.sets.resize(1);
      for (int i = 1; i < copies; ++i) {
        void* set = ctx.alloc(b.bytes, b.role);
        if (b.role == BufferRole::input)
          ROOFBENCH_CUDA(cudaMemcpyAsync(set, b.sets.front(), b.bytes, cudaMemcpyDeviceToDevice, stream));
        b.sets.push_back(set);
      }
    }
    ctx.synchronize();
  }

  void use(int copy) override {
    for (Buffer& b : buffers_) b.point(b.sets.at(static_cast<std::size_t>(copy)));
  }

  // How many sets each buffer has (1 until make_copies).
  int copies() const { return buffers_.empty() ? 0 : static_cast<int>(buffers_.front().sets.size()); }

  // The set after the one `pointer` points at, of the buffer it belongs to, wrapping round: what the run after
  // use(i) reads under use(i + 1). nullptr where that buffer has one set (no copies made) or pointer is no set.
  const void* after(const void* pointer) const {
    for (const Buffer& b : buffers_) {
      const auto at = std::find(b.sets.begin(), b.sets.end(), pointer);
      if (at == b.sets.end()) continue;
      if (b.sets.size() < 2) return nullptr;
      return std::next(at) == b.sets.end() ? b.sets.front() : *std::next(at);
    }
    return nullptr;
  }

 private:
  struct Buffer {
    std::vector<void*> sets;  // set 0 first: the buffer setup() made
    std::size_t bytes;
    BufferRole role;
    std::function<void(void*)> point;  // sets the case's pointer
  };
  std::vector<Buffer> buffers_;
};

}  // namespace roofbench::case_support
