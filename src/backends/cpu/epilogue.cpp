// SPDX-License-Identifier: Apache-2.0

#include "backends/cpu/epilogue.hpp"

#include "backends/cpu/gemm.hpp"
#include "common/always_inline.hpp"

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#define FUSEDNN_CPU_X86_DISPATCH 1
#endif

namespace fusednn::cpu {
namespace {

// The loop body is the formula apply() dispatches to for this kind, the same code; every formula
// is branch-free float arithmetic (float_math's functions included), so the loop vectorises.
template <ElementwiseKind kKind>
FUSEDNN_ALWAYS_INLINE void apply_to_range(float parameter, float* data, int64_t count) {
  for (int64_t i = 0; i < count; ++i) data[i] = apply_kind<kKind>(data[i], parameter);
}

FUSEDNN_ALWAYS_INLINE void apply_op(const ElementwiseOp& op, float* data, int64_t count) {
  switch (op.kind) {
    case ElementwiseKind::ReLU:
      apply_to_range<ElementwiseKind::ReLU>(op.parameter, data, count);
      break;
    case ElementwiseKind::LeakyReLU:
      apply_to_range<ElementwiseKind::LeakyReLU>(op.parameter, data, count);
      break;
    case ElementwiseKind::GeluErf:
      apply_to_range<ElementwiseKind::GeluErf>(op.parameter, data, count);
      break;
    case ElementwiseKind::GeluTanh:
      apply_to_range<ElementwiseKind::GeluTanh>(op.parameter, data, count);
      break;
    case ElementwiseKind::SiLU:
      apply_to_range<ElementwiseKind::SiLU>(op.parameter, data, count);
      break;
    case ElementwiseKind::Sigmoid:
      apply_to_range<ElementwiseKind::Sigmoid>(op.parameter, data, count);
      break;
    case ElementwiseKind::Tanh:
      apply_to_range<ElementwiseKind::Tanh>(op.parameter, data, count);
      break;
    case ElementwiseKind::Scale:
      apply_to_range<ElementwiseKind::Scale>(op.parameter, data, count);
      break;
    default:
      // A kind this switch does not know yet still runs, through apply() itself.
      for (int64_t i = 0; i < count; ++i) data[i] = apply(op, data[i]);
      break;
  }
}

#if defined(FUSEDNN_CPU_X86_DISPATCH)
// The ops built on common/float_math.hpp: tens of operations a value, where eight lanes instead of
// four pay (about twice as fast for Tanh and GeluErf). ReLU, LeakyReLU and Scale stay on the
// baseline loop, which is as fast (they are a load and a store a value) and saves the dispatch.
bool computes_transcendental(ElementwiseKind kind) {
  switch (kind) {
    case ElementwiseKind::GeluErf:
    case ElementwiseKind::GeluTanh:
    case ElementwiseKind::SiLU:
    case ElementwiseKind::Sigmoid:
    case ElementwiseKind::Tanh: return true;
    default: return false;
  }
}

// The same loops eight lanes wide. AVX2 without FMA: the compiler contracts a * b + c into one
// fused multiply-add wherever the target has it (GCC does so even in ISO C++ mode), and the fused
// result would differ from apply()'s, which rounds the product and the sum separately.
__attribute__((target("avx2"))) void apply_op_avx2(const ElementwiseOp& op, float* data,
                                                   int64_t count) {
  apply_op(op, data, count);
}
#endif

}  // namespace

void apply_epilogue(const Epilogue& epilogue, float* data, int64_t count) {
  if (count <= 0) return;
  for (const ElementwiseOp& op : epilogue) {
#if defined(FUSEDNN_CPU_X86_DISPATCH)
    // The instruction set the matrix-multiply core uses (forced by tests and benchmarks, else the
    // best this CPU has); Avx2Fma implies AVX2.
    if (computes_transcendental(op.kind) && gemm_isa() == GemmIsa::Avx2Fma) {
      apply_op_avx2(op, data, count);
      continue;
    }
#endif
    apply_op(op, data, count);
  }
}

}  // namespace fusednn::cpu
