// SPDX-License-Identifier: Apache-2.0
// The WarpRegisters kernels for TensorCoreMath::Bf16, every width class (see
// fused_mlp_tensor_core_registers_kernel.cuh for why each precision has a file).
#include "backends/cuda/mlp/fused_mlp_tensor_core_registers_kernel.cuh"

namespace fusednn::cuda::warp_registers {

template KernelFunction kernel_for_width<TensorCoreMath::Bf16>(int, bool);

}  // namespace fusednn::cuda::warp_registers
