// SPDX-License-Identifier: Apache-2.0
// conv_pool_kernel<5, SmallTile> (5x5 taps at stride 1) in a module of its own: a model
// whose batches stay under the SM count loads this kernel's module and no other conv + pool
// code (a module with all ten variants makes a model's first load in a process much slower).
#include "backends/cuda/conv/conv_pool_kernel.cuh"

namespace fusednn::cuda::conv_tile {

ConvPoolKernel small_tile_conv_pool_kernel_5x5() { return conv_pool_kernel<5, SmallTile>; }

}  // namespace fusednn::cuda::conv_tile
