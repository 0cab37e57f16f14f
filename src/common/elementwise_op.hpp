// SPDX-License-Identifier: Apache-2.0
// Pointwise operations that the planner chains and fuses into the epilogue of the step before
// them. apply() is the scalar reference every backend is tested against; its formulas follow
// PyTorch's definitions exactly. The transcendental functions are float_math's, which vectorise:
// the CPU kernels run this same code over whole ranges and give its bits.
#pragma once

#include <vector>

#include "common/always_inline.hpp"
#include "common/float_math.hpp"

namespace fusednn {

enum class ElementwiseKind {
  ReLU,
  LeakyReLU,  // parameter: negative_slope
  GeluErf,    // 0.5 x (1 + erf(x / sqrt 2)), PyTorch GELU(approximate="none")
  GeluTanh,   // PyTorch GELU(approximate="tanh")
  SiLU,
  Sigmoid,
  Tanh,
  Scale,  // parameter: alpha
};

struct ElementwiseOp {
  ElementwiseKind kind;
  float parameter = 0.0f;
};

// Applied in order after the producing step's main computation (bias included).
using Epilogue = std::vector<ElementwiseOp>;

// One kind's formula, the kind known at compile time: apply() dispatches to these, and the CPU
// kernels call them in loops (each is branch-free arithmetic, so such a loop vectorises).
template <ElementwiseKind kKind>
FUSEDNN_ALWAYS_INLINE float apply_kind(float x, float parameter) {
  using K = ElementwiseKind;
  if constexpr (kKind == K::ReLU) {
    // NaN fails the comparison and passes through, as torch.relu keeps it.
    return float_math::select(x <= 0.0f, 0.0f, x);
  } else if constexpr (kKind == K::LeakyReLU) {
    return float_math::select(x >= 0.0f, x, x * parameter);
  } else if constexpr (kKind == K::GeluErf) {
    return 0.5f * x * (1.0f + float_math::erf(x * 0.70710678118654752f));
  } else if constexpr (kKind == K::GeluTanh) {
    const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + float_math::tanh(inner));
  } else if constexpr (kKind == K::SiLU) {
    return float_math::silu(x);  // x * sigmoid(x)
  } else if constexpr (kKind == K::Sigmoid) {
    return float_math::sigmoid(x);
  } else if constexpr (kKind == K::Tanh) {
    return float_math::tanh(x);
  } else {
    static_assert(kKind == K::Scale, "apply_kind: a kind without a formula");
    return x * parameter;
  }
}

inline float apply(const ElementwiseOp& op, float x) {
  using K = ElementwiseKind;
  switch (op.kind) {
    case K::ReLU: return apply_kind<K::ReLU>(x, op.parameter);
    case K::LeakyReLU: return apply_kind<K::LeakyReLU>(x, op.parameter);
    case K::GeluErf: return apply_kind<K::GeluErf>(x, op.parameter);
    case K::GeluTanh: return apply_kind<K::GeluTanh>(x, op.parameter);
    case K::SiLU: return apply_kind<K::SiLU>(x, op.parameter);
    case K::Sigmoid: return apply_kind<K::Sigmoid>(x, op.parameter);
    case K::Tanh: return apply_kind<K::Tanh>(x, op.parameter);
    case K::Scale: return apply_kind<K::Scale>(x, op.parameter);
  }
  return x;
}

inline float apply(const Epilogue& epilogue, float x) {
  for (const ElementwiseOp& op : epilogue) x = apply(op, x);
  return x;
}

}  // namespace fusednn
