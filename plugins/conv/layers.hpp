// ResNet-50 v1.5 (torchvision) at 224x224: its 23 distinct convolutions and the 53 convolutions of the
// forward pass in network order. Plain data, no CUDA.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "roofbench/kernels/conv_reference.hpp"

namespace roofbench::conv {

struct Layer {
  // <stage>_<R>x<S>[s2]_<channels>: conv2_3x3_64 (64 -> 64), conv3_1x1s2_256to512 (256 -> 512, stride 2).
  // The stage is the one the convolution belongs to in torchvision (conv1 the stem, conv2..conv5 =
  // layer1..layer4), so a stage's first 1x1 and its downsample still read the previous stage's size.
  std::string name;
  std::int64_t in_channels, out_channels, kernel, stride, input_size;
  std::int64_t pad() const { return kernel / 2; }
  kernels::ConvShape shape(std::int64_t batch) const;
};

// In the order of the REFERENCE.md list: the stem, then by input size (56, 28, 14, 7).
const std::vector<Layer>& resnet50_layers();
const Layer& resnet50_layer(const std::string& name);  // throws Error naming the valid values
std::vector<std::string> resnet50_layer_names();

// Index into resnet50_layers() of each of the 53 convolutions, in the order the forward pass runs them
// (a bottleneck block: 1x1, 3x3, 1x1, then its downsample when it has one).
const std::vector<std::size_t>& resnet50_network();

}  // namespace roofbench::conv
