// Pointwise operations that the planner chains and fuses into the epilogue of the step before
// them. apply() is the scalar reference every backend is tested against; its formulas follow
// PyTorch's definitions exactly.
#pragma once

#include <cmath>
#include <vector>

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

inline float apply(const ElementwiseOp& op, float x) {
  switch (op.kind) {
    case ElementwiseKind::ReLU:
      return x > 0.0f ? x : 0.0f;
    case ElementwiseKind::LeakyReLU:
      return x >= 0.0f ? x : x * op.parameter;
    case ElementwiseKind::GeluErf:
      return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
    case ElementwiseKind::GeluTanh: {
      const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
      return 0.5f * x * (1.0f + std::tanh(inner));
    }
    case ElementwiseKind::SiLU:
      return x / (1.0f + std::exp(-x));
    case ElementwiseKind::Sigmoid:
      return 1.0f / (1.0f + std::exp(-x));
    case ElementwiseKind::Tanh:
      return std::tanh(x);
    case ElementwiseKind::Scale:
      return x * op.parameter;
  }
  return x;
}

inline float apply(const Epilogue& epilogue, float x) {
  for (const ElementwiseOp& op : epilogue) x = apply(op, x);
  return x;
}

}  // namespace fusednn
