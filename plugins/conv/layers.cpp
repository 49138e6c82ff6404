#include "layers.hpp"

#include "roofbench/plugin.hpp"

namespace roofbench::conv {

kernels::ConvShape Layer::shape(std::int64_t batch) const {
  return {.n = batch,
          .c = in_channels,
          .h = input_size,
          .w = input_size,
          .k = out_channels,
          .r = kernel,
          .s = kernel,
          .stride = stride,
          .pad = pad()};
}

namespace {

Layer make_layer(int stage, std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride,
                 std::int64_t size) {
  std::string name = "conv" + std::to_string(stage) + "_" + std::to_string(kernel) + "x" + std::to_string(kernel) +
                     (stride == 2 ? "s2" : "") + "_" +
                     (in == out ? std::to_string(out) : std::to_string(in) + "to" + std::to_string(out));
  return {std::move(name), in, out, kernel, stride, size};
}

}  // namespace

const std::vector<Layer>& resnet50_layers() {
  static const std::vector<Layer> layers = {
      make_layer(1, 3, 64, 7, 2, 224),
      // at 56x56
      make_layer(2, 64, 64, 1, 1, 56), make_layer(2, 64, 64, 3, 1, 56), make_layer(2, 64, 256, 1, 1, 56),
      make_layer(2, 256, 64, 1, 1, 56), make_layer(3, 256, 128, 1, 1, 56), make_layer(3, 128, 128, 3, 2, 56),
      make_layer(3, 256, 512, 1, 2, 56),
      // at 28x28
      make_layer(3, 128, 512, 1, 1, 28), make_layer(3, 512, 128, 1, 1, 28), make_layer(3, 128, 128, 3, 1, 28),
      make_layer(4, 512, 256, 1, 1, 28), make_layer(4, 256, 256, 3, 2, 28), make_layer(4, 512, 1024, 1, 2, 28),
      // at 14x14
      make_layer(4, 256, 1024, 1, 1, 14), make_layer(4, 1024, 256, 1, 1, 14), make_layer(4, 256, 256, 3, 1, 14),
      make_layer(5, 1024, 512, 1, 1, 14), make_layer(5, 512, 512, 3, 2, 14), make_layer(5, 1024, 2048, 1, 2, 14),
      // at 7x7
      make_layer(5, 512, 2048, 1, 1, 7), make_layer(5, 2048, 512, 1, 1, 7), make_layer(5, 512, 512, 3, 1, 7),
  };
  return layers;
}

std::vector<std::string> resnet50_layer_names() {
  std::vector<std::string> names;
  for (const Layer& layer : resnet50_layers()) names.push_back(layer.name);
  return names;
}

const Layer& resnet50_layer(const std::string& name) {
  for (const Layer& layer : resnet50_layers())
    if (layer.name == name) return layer;
  std::string valid;
  for (const Layer& layer : resnet50_layers()) valid += (valid.empty() ? "" : ", ") + layer.name;
  throw Error("conv: no ResNet-50 layer named '" + name + "' (the layers: " + valid + ")");
}

const std::vector<std::size_t>& resnet50_network() {
  static const std::vector<std::size_t> order = [] {
    // Per stage: the first block's 1x1 reduce, 3x3, 1x1 expand and downsample, then the other blocks'
    // reduce (from the expanded width), 3x3 and expand. Indices into resnet50_layers().
    struct Stage {
      std::size_t first_reduce, first_3x3, expand, downsample, reduce, block_3x3;
      int blocks;
    };
    constexpr Stage stages[] = {
        {1, 2, 3, 3, 4, 2, 3},        // conv2: the downsample is a 1x1 64->256 at stride 1, the expand's shape
        {5, 6, 8, 7, 9, 10, 4},       // conv3
        {11, 12, 14, 13, 15, 16, 6},  // conv4
        {17, 18, 20, 19, 21, 22, 3},  // conv5
    };
    std::vector<std::size_t> order{0};
    for (const Stage& s : stages) {
      order.insert(order.end(), {s.first_reduce, s.first_3x3, s.expand, s.downsample});
      for (int block = 1; block < s.blocks; ++block) order.insert(order.end(), {s.reduce, s.block_3x3, s.expand});
    }
    return order;
  }();
  return order;
}

}  // namespace roofbench::conv
