// SPDX-License-Identifier: Apache-2.0
// Throughput of the CPU epilogue (apply_epilogue) per activation and instruction set, in place on
// 4704 floats (LeNet-5's first convolution output, 6 x 28 x 28, L1-resident) and on 1 MiB, and of
// glibc's scalar tanhf on the same data for comparison (what the Tanh epilogue called before
// common/float_math.hpp). Counter: elements/s.
//
// Napkin math (one Zen 3 core at 2.45 GHz): both tanh formulas are evaluated and selected, about
// 60 vector instructions (25 multiplies, 20 adds, a division, selects and integer exponent work)
// per vector of values. Two multiply and two add pipes bound that near 13 cycles a vector; the
// loop takes about 26 with AVX2 (8 values: 3.3 cycles a value) and about 31 with SSE2 (4 values:
// 7.7 cycles a value; no blend, no three-operand forms, so more instructions).
//
// Measured on the development machine (2-core AMD EPYC Zen 3 VM shared with other builds; median
// of 5; values per second, 4704 / 262144 values, the input copy included):
//   Tanh      avx2 752 M / 705 M   baseline 321 M / 310 M   glibc tanhf 61 M / 54 M
//   Sigmoid   avx2 1029 M / 964 M  baseline 429 M / 413 M
//   SiLU      avx2 963 M / 918 M   baseline 421 M / 403 M
//   GeluTanh  avx2 558 M / 537 M   baseline 260 M / 249 M
//   GeluErf   avx2 545 M / 523 M   baseline 232 M / 215 M
//   ReLU      6.3 G / 4-5 G (the baseline loop on both)
//
//   build/bench/cpu/fusednn_cpu_kernel_bench --benchmark_filter=epilogue
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/epilogue.hpp"
#include "backends/cpu/gemm.hpp"

namespace fusednn::cpu {
namespace {

std::vector<float> activations(size_t count) {
  std::mt19937_64 engine(7);
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  std::vector<float> values(count);
  for (float& v : values) v = uniform(engine);
  return values;
}

// Args: isa, kind, count. Each iteration restores the input first (a copy, counted in the time:
// about a tenth of a nanosecond a value) so that the values stay in the activations' range.
void epilogue(benchmark::State& state) {
  const auto isa = static_cast<GemmIsa>(state.range(0));
  if (!force_gemm_isa(isa)) {
    state.SkipWithError("instruction set not supported by this CPU");
    return;
  }
  const auto kind = static_cast<ElementwiseKind>(state.range(1));
  const Epilogue ops = {{kind, 0.1f}};
  const std::vector<float> input = activations(static_cast<size_t>(state.range(2)));
  std::vector<float> data = input;
  static const char* const names[] = {"ReLU", "LeakyReLU", "GeluErf", "GeluTanh",
                                      "SiLU", "Sigmoid",   "Tanh",    "Scale"};
  state.SetLabel(std::string(gemm_isa_name(isa)) + " " + names[state.range(1)]);
  for (auto _ : state) {
    data = input;
    apply_epilogue(ops, data.data(), state.range(2));
    benchmark::ClobberMemory();
  }
  state.counters["elements/s"] = benchmark::Counter(static_cast<double>(state.range(2)),
                                                    benchmark::Counter::kIsIterationInvariantRate);
}

void epilogue_arguments(benchmark::internal::Benchmark* b) {
  b->ArgNames({"isa", "kind", "count"});
  using K = ElementwiseKind;
  for (int64_t isa : {1, 0}) {
    for (K kind : {K::Tanh, K::Sigmoid, K::SiLU, K::GeluTanh, K::GeluErf, K::ReLU}) {
      for (int64_t count : {4704, 262144}) b->Args({isa, static_cast<int64_t>(kind), count});
    }
  }
}

BENCHMARK(epilogue)->Apply(epilogue_arguments)->Unit(benchmark::kMicrosecond);

// Args: count. glibc's tanhf one value at a time.
void epilogue_libm_tanhf(benchmark::State& state) {
  const std::vector<float> input = activations(static_cast<size_t>(state.range(0)));
  std::vector<float> data = input;
  for (auto _ : state) {
    data = input;
    for (float& v : data) v = std::tanh(v);
    benchmark::ClobberMemory();
  }
  state.counters["elements/s"] = benchmark::Counter(static_cast<double>(state.range(0)),
                                                    benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(epilogue_libm_tanhf)->Arg(4704)->Arg(262144)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace fusednn::cpu
