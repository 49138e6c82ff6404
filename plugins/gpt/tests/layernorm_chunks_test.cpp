#include "layernorm_chunks.hpp"

#include <gtest/gtest.h>

namespace roofbench::gpt {
namespace {

// Every row in exactly one chunk, chunks whole multiples of a block's warps, never more than the cap.
TEST(GptLayerNormChunks, CoverEveryRowOnceWithinTheCap) {
  for (int N : {1, 7, 8, 9, 255, 256, 257, 2047, 2048, 8192, 65536, 65537, 262144}) {
    const LayerNormChunks chunks = layernorm_chunks(N);
    SCOPED_TRACE(N);
    EXPECT_EQ(chunks.rows % kLayerNormBlockWarps, 0);
    EXPECT_GE(chunks.count, 1);
    EXPECT_LE(chunks.count, kLayerNormMaxChunks);
    EXPECT_GE(chunks.count * chunks.rows, N);       // every row covered
    EXPECT_LT((chunks.count - 1) * chunks.rows, N);  // no chunk empty
  }
}

// The training shapes: batch 64 (8192 rows) gets 256 blocks of 32 rows, batch 512 256 blocks of 256.
TEST(GptLayerNormChunks, TrainingShapes) {
  EXPECT_EQ(layernorm_chunks(8192).rows, 32);
  EXPECT_EQ(layernorm_chunks(8192).count, 256);
  EXPECT_EQ(layernorm_chunks(65536).rows, 256);
  EXPECT_EQ(layernorm_chunks(65536).count, 256);
  EXPECT_EQ(layernorm_chunks(7).rows, 8);
  EXPECT_EQ(layernorm_chunks(7).count, 1);
  EXPECT_EQ(layernorm_chunk_partials(65536, 512), 256u * 3u * 512u);
}

}  // namespace
}  // namespace roofbench::gpt
