// SPDX-License-Identifier: Apache-2.0
// The element types of the caller's model input and output that a kernel reads or writes itself
// (the device path's 16-bit I/O): float32, or float16 and bfloat16 widened as they are read and
// narrowed, to nearest even, as they are written. A run passes the model input and output to the
// kernels as typed pointers; every other buffer is float32.
#pragma once

#include <cstdint>

namespace fusednn::cuda {

enum class ElementType : int32_t { Float32 = 0, Float16 = 1, Bfloat16 = 2 };  // fdnn_dtype's values

constexpr int element_bytes(ElementType type) { return type == ElementType::Float32 ? 4 : 2; }

// A buffer a kernel reads: the model input in the caller's type, or a float32 value.
struct TypedInput {
  const void* data = nullptr;
  ElementType type = ElementType::Float32;
  TypedInput() = default;
  TypedInput(const float* values) : data(values) {}  // NOLINT: float32 buffers convert freely
  TypedInput(const void* values, ElementType element) : data(values), type(element) {}
};

// A buffer a kernel writes: the model output in the caller's type, or a float32 value.
struct TypedOutput {
  void* data = nullptr;
  ElementType type = ElementType::Float32;
  TypedOutput() = default;
  TypedOutput(float* values) : data(values) {}  // NOLINT: float32 buffers convert freely
  TypedOutput(void* values, ElementType element) : data(values), type(element) {}
};

}  // namespace fusednn::cuda
