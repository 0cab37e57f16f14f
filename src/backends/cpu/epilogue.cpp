#include "backends/cpu/epilogue.hpp"

namespace fusednn::cpu {
namespace {

// With the kind a compile-time constant, apply()'s switch folds away and the loop body is the
// op's own formula, the same expression apply() evaluates.
template <ElementwiseKind kKind>
void apply_kind(float parameter, float* data, int64_t count) {
  const ElementwiseOp op{kKind, parameter};
  for (int64_t i = 0; i < count; ++i) data[i] = apply(op, data[i]);
}

}  // namespace

void apply_epilogue(const Epilogue& epilogue, float* data, int64_t count) {
  for (const ElementwiseOp& op : epilogue) {
    switch (op.kind) {
      case ElementwiseKind::ReLU:
        apply_kind<ElementwiseKind::ReLU>(op.parameter, data, count);
        break;
      case ElementwiseKind::LeakyReLU:
        apply_kind<ElementwiseKind::LeakyReLU>(op.parameter, data, count);
        break;
      case ElementwiseKind::GeluErf:
        apply_kind<ElementwiseKind::GeluErf>(op.parameter, data, count);
        break;
      case ElementwiseKind::GeluTanh:
        apply_kind<ElementwiseKind::GeluTanh>(op.parameter, data, count);
        break;
      case ElementwiseKind::SiLU:
        apply_kind<ElementwiseKind::SiLU>(op.parameter, data, count);
        break;
      case ElementwiseKind::Sigmoid:
        apply_kind<ElementwiseKind::Sigmoid>(op.parameter, data, count);
        break;
      case ElementwiseKind::Tanh:
        apply_kind<ElementwiseKind::Tanh>(op.parameter, data, count);
        break;
      case ElementwiseKind::Scale:
        apply_kind<ElementwiseKind::Scale>(op.parameter, data, count);
        break;
      default:
        // A kind this switch does not know yet still runs, through apply() itself.
        for (int64_t i = 0; i < count; ++i) data[i] = apply(op, data[i]);
        break;
    }
  }
}

}  // namespace fusednn::cpu
