// SPDX-License-Identifier: Apache-2.0
// Device side of element_type.hpp: exact widening to float and narrowing with round to nearest
// even (as convert_dtype.cu and common/half_float.hpp round), a few consecutive elements as one
// memory access, and the branch from a run's ElementType to its C++ type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "backends/cuda/device/element_type.hpp"

namespace fusednn::cuda {

template <typename T>
__device__ __forceinline__ float widen_element(T value) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(value);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(value);
  } else {
    return value;
  }
}

template <typename T>
__device__ __forceinline__ T narrow_element(float value) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(value);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(value);
  } else {
    return value;
  }
}

// kCount consecutive elements as one access of kCount * sizeof(T) bytes (the address must be
// aligned to that).
template <typename T, int kCount>
struct alignas(kCount * sizeof(T)) ElementPack {
  T values[kCount];
};

// destination[0..1] = a, b narrowed: one store.
template <typename T>
__device__ __forceinline__ void store_pair_narrowed(T* destination, float a, float b) {
  ElementPack<T, 2> pack;
  pack.values[0] = narrow_element<T>(a);
  pack.values[1] = narrow_element<T>(b);
  *reinterpret_cast<ElementPack<T, 2>*>(destination) = pack;
}

// Calls body(T{}) with T the C++ type of `type`: kernels take the caller's element type as a run
// parameter and branch on it once per tile, rather than instantiating every kernel three times.
template <typename Body>
__device__ __forceinline__ void with_element_type(int32_t type, Body&& body) {
  if (type == static_cast<int32_t>(ElementType::Float16)) {
    body(__half{});
  } else if (type == static_cast<int32_t>(ElementType::Bfloat16)) {
    body(__nv_bfloat16{});
  } else {
    body(float{});
  }
}

// Element `index` of a buffer of `type` (an ElementType's value), widened to float: for kernels
// whose reads of the model input are few enough that a branch per element costs nothing.
__device__ __forceinline__ float load_widened(const void* data, int32_t type, int64_t index) {
  if (type == static_cast<int32_t>(ElementType::Float16)) {
    return __half2float(static_cast<const __half*>(data)[index]);
  }
  if (type == static_cast<int32_t>(ElementType::Bfloat16)) {
    return __bfloat162float(static_cast<const __nv_bfloat16*>(data)[index]);
  }
  return static_cast<const float*>(data)[index];
}

// Element `index` of a buffer of `type` = value, narrowed to nearest even.
__device__ __forceinline__ void store_narrowed(void* data, int32_t type, int64_t index,
                                               float value) {
  if (type == static_cast<int32_t>(ElementType::Float16)) {
    static_cast<__half*>(data)[index] = __float2half_rn(value);
  } else if (type == static_cast<int32_t>(ElementType::Bfloat16)) {
    static_cast<__nv_bfloat16*>(data)[index] = __float2bfloat16_rn(value);
  } else {
    static_cast<float*>(data)[index] = value;
  }
}

}  // namespace fusednn::cuda
