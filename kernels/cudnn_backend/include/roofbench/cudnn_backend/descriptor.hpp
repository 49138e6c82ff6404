// Ownership of cuDNN backend-API descriptors (cudnn_graph.h) for the plugins that build operation graphs
// themselves: a descriptor created on construction and destroyed with its owner, attribute setters that
// check every status, and a set that keeps a graph's tensors and operations alive as long as any plan
// made from it.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "roofbench/cudnn_check.hpp"

namespace roofbench::cudnn_backend {

class Descriptor {
 public:
  explicit Descriptor(cudnnBackendDescriptorType_t type) { ROOFBENCH_CUDNN(cudnnBackendCreateDescriptor(type, &d_)); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (d_) (void)cudnnBackendDestroyDescriptor(d_);
  }
  cudnnBackendDescriptor_t get() const { return d_; }
  template <typename T>
  Descriptor& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T& value) {
    ROOFBENCH_CUDNN(cudnnBackendSetAttribute(d_, name, type, 1, &value));
    return *this;
  }
  template <typename T>
  Descriptor& set_array(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, std::span<const T> values) {
    ROOFBENCH_CUDNN(cudnnBackendSetAttribute(d_, name, type, std::int64_t(values.size()), values.data()));
    return *this;
  }
  template <typename T>
  Descriptor& set_array(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const std::vector<T>& values) {
    return set_array(name, type, std::span<const T>(values));
  }
  // `what` names the descriptor in the message: every finalize goes through here. A NOT_SUPPORTED status
  // is an Error here; callers that treat a refusal as NotApplicable catch it or call try_finalize.
  void finalize(const char* what) {
    const cudnnStatus_t status = try_finalize();
    if (status != CUDNN_STATUS_SUCCESS)
      throw_cudnn_error(status, std::string("cudnnBackendFinalize (") + what + ")", __FILE__, __LINE__,
                        CudnnUnsupported::is_error);
  }
  cudnnStatus_t try_finalize() { return cudnnBackendFinalize(d_); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// What every tensor of these graphs is given: its type, dimensions and strides, unique id, whether it is
// virtual (an intermediate the graph keeps out of memory) and whether it is a by-value scalar; alignment 16
// bytes.
struct TensorAttributes {
  std::int64_t uid = 0;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  std::vector<std::int64_t> dims, strides;
  bool is_virtual = false;
  bool by_value = false;
};

// The descriptors one operation graph refers to (tensors, operations, the graph itself), owned together.
class DescriptorSet {
 public:
  Descriptor& make(cudnnBackendDescriptorType_t type) {
    owned_.push_back(std::make_unique<Descriptor>(type));
    return *owned_.back();
  }
  // A tensor descriptor with these attributes, not finalized: each caller finalizes it with its own reading
  // of a refusal (an error, or a case that does not apply).
  Descriptor& make_tensor(const TensorAttributes& a) {
    constexpr std::int64_t kAlignment = 16;
    Descriptor& t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, a.type)
        .set_array(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, a.dims)
        .set_array(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, a.strides)
        .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, a.uid)
        .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, kAlignment)
        .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, a.is_virtual);
    if (a.by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, true);
    return t;
  }

 private:
  std::vector<std::unique_ptr<Descriptor>> owned_;
};

// A finalized variant pack: the data pointers of the graph's non-virtual tensors by unique id, and the
// workspace. It depends on the pointers only, so one pack serves every plan of a graph.
std::unique_ptr<Descriptor> variant_pack(std::span<const std::int64_t> uids, std::span<void* const> pointers,
                                         void* workspace);

}  // namespace roofbench::cudnn_backend
