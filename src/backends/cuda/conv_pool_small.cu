// The small-tile conv + pool kernels (conv_pool_kernel.cuh), in a file of their own: their module
// is all a model loads when its batches stay under the SM count.
#include "backends/cuda/conv_pool_kernel.cuh"

namespace fusednn::cuda::conv_tile {

ConvPoolKernel small_tile_conv_pool_kernel(int kernel_size) {
  if (kernel_size == 5) return conv_pool_kernel<5, SmallTile>;
  if (kernel_size == 3) return conv_pool_kernel<3, SmallTile>;
  return conv_pool_kernel<0, SmallTile>;
}

}  // namespace fusednn::cuda::conv_tile
