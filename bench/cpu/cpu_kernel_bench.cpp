// SPDX-License-Identifier: Apache-2.0
// Throughput of the CPU Linear and Conv2d kernels, single-threaded, per instruction set of the
// matrix-multiply core. Counters: FLOP/s counts a multiply-add as 2 flops.
//
// Napkin math for the development machine (one AMD EPYC Zen 3 core, AVX2): two 256-bit FMA pipes
// give 2 x 8 lanes x 2 flops = 32 flop/cycle; peak_fma below measures what that is at the clock
// the core actually runs. Without AVX (SSE2, the x86-64 baseline) a multiply and an add are
// separate 4-lane instructions: 2 mulps + 2 addps per cycle at best = 16 flop/cycle.
//
// Linear 768 -> 3072 at batch 1024 is 4.8 GFLOP per call over 9 MiB of weights, 3 MiB of input
// and 12 MiB of output: compute-bound, the number to compare with the peak. At batch 1 it is 4.7
// MFLOP over the 9 MiB weight: memory-bound (L3), so expect a few tens of GFLOP/s at most. LeNet
// conv1 has a depth of only 25 (1 x 5 x 5) for 784 pixels x 6 channels, so per-tile overhead weighs
// more.
//
// Measured on the development machine (2-core AMD EPYC Zen 3 VM shared with other builds; best of
// 5, CPU time; peak_fma 101.7 GFLOP/s): Linear 768 -> 3072 batch 1024 85 GFLOP/s with AVX2+FMA
// (84 % of peak), 29.5 baseline SSE2; batch 1 24 (dot products, bound by reading W from L3).
// LeNet conv1 43 / 34 GFLOP/s at batch 1 / 1024, conv2 50 / 48.
//
//   cmake -DFUSEDNN_BUILD_BENCH=ON ... && build/bench/cpu/fusednn_cpu_kernel_bench
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "backends/cpu/conv2d.hpp"
#include "backends/cpu/gemm.hpp"
#include "backends/cpu/linear.hpp"

namespace fusednn::cpu {
namespace {

std::vector<float> random_vector(size_t count, uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = uniform(engine);
  return values;
}

bool select_isa(benchmark::State& state, int64_t isa_arg) {
  const auto isa = static_cast<GemmIsa>(isa_arg);
  if (!force_gemm_isa(isa)) {
    state.SkipWithError("instruction set not supported by this CPU");
    return false;
  }
  state.SetLabel(gemm_isa_name(isa));
  return true;
}

void set_flops(benchmark::State& state, double flops_per_call) {
  state.counters["FLOP/s"] =
      benchmark::Counter(flops_per_call, benchmark::Counter::kIsIterationInvariantRate);
}

// Args: isa, rows, in_features, out_features.
void linear(benchmark::State& state) {
  if (!select_isa(state, state.range(0))) return;
  const int64_t rows = state.range(1), in = state.range(2), out = state.range(3);
  const std::vector<float> x = random_vector(static_cast<size_t>(rows * in), 1);
  const std::vector<float> w = random_vector(static_cast<size_t>(out * in), 2);
  const std::vector<float> bias = random_vector(static_cast<size_t>(out), 3);
  std::vector<float> y(static_cast<size_t>(rows * out));
  const Epilogue epilogue = {{ElementwiseKind::ReLU}};
  for (auto _ : state) {
    linear_forward(x.data(), w.data(), bias.data(), y.data(), rows, in, out, epilogue);
    benchmark::ClobberMemory();
  }
  set_flops(state, 2.0 * double(rows) * double(in) * double(out));
}

void linear_arguments(benchmark::internal::Benchmark* b) {
  b->ArgNames({"isa", "rows", "in", "out"});
  const int64_t shapes[][2] = {{100, 128}, {128, 64}, {64, 10}, {768, 3072}};
  for (int64_t isa : {1, 0}) {
    for (const auto& shape : shapes) {
      for (int64_t rows : {1, 1024}) b->Args({isa, rows, shape[0], shape[1]});
    }
  }
}
BENCHMARK(linear)->Apply(linear_arguments)->Unit(benchmark::kMicrosecond);

// Few-row calls around the switch from dot products to the packed multiply.
void linear_few_rows_arguments(benchmark::internal::Benchmark* b) {
  b->ArgNames({"isa", "rows", "in", "out"});
  for (int64_t rows : {1, 2, 3, 4, 6, 8, 12}) {
    b->Args({1, rows, 768, 3072});
    b->Args({1, rows, 100, 128});
  }
}
BENCHMARK(linear)
    ->Name("linear_few_rows")
    ->Apply(linear_few_rows_arguments)
    ->Unit(benchmark::kMicrosecond);

// Args: isa, batch, which (0: LeNet-5 conv1 1x28x28 -> 6 5x5 padding 2; 1: conv2 6x14x14 -> 16
// 5x5).
void conv2d(benchmark::State& state) {
  if (!select_isa(state, state.range(0))) return;
  const int64_t batch = state.range(1);
  const Conv2dGeometry g = state.range(2) == 0
                               ? Conv2dGeometry{1, 28, 28, 6, 28, 28, 5, 5, 1, 1, 2, 2, 1, 1, 1}
                               : Conv2dGeometry{6, 14, 14, 16, 10, 10, 5, 5, 1, 1, 0, 0, 1, 1, 1};
  const int64_t depth = g.in_channels / g.groups * g.kernel_height * g.kernel_width;
  const int64_t pixels = g.out_height * g.out_width;
  const std::vector<float> x =
      random_vector(static_cast<size_t>(batch * g.in_channels * g.in_height * g.in_width), 1);
  const std::vector<float> w = random_vector(static_cast<size_t>(g.out_channels * depth), 2);
  const std::vector<float> bias = random_vector(static_cast<size_t>(g.out_channels), 3);
  std::vector<float> y(static_cast<size_t>(batch * g.out_channels * pixels));
  std::vector<float> scratch(conv2d_scratch_floats(g));
  const Epilogue epilogue = {{ElementwiseKind::ReLU}};
  for (auto _ : state) {
    conv2d_forward(x.data(), w.data(), bias.data(), y.data(), batch, g, epilogue, scratch.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, 2.0 * double(batch) * double(g.out_channels) * double(pixels) * double(depth));
}

void conv2d_arguments(benchmark::internal::Benchmark* b) {
  b->ArgNames({"isa", "batch", "lenet_conv"});
  for (int64_t isa : {1, 0}) {
    for (int64_t which : {0, 1}) {
      for (int64_t batch : {1, 1024}) b->Args({isa, batch, which});
    }
  }
}
BENCHMARK(conv2d)->Apply(conv2d_arguments)->Unit(benchmark::kMicrosecond);

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
typedef float Float8 __attribute__((vector_size(32)));

// 12 independent FMA chains (FMA latency 4 cycles x 2 pipes needs at least 8 in flight), 10
// chain steps per loop trip: the core's fp32 FMA peak at its current clock.
__attribute__((target("avx2,fma"), noinline)) void fma_chains(Float8* acc, int64_t trips) {
  Float8 a[12];
  for (int i = 0; i < 12; ++i) a[i] = acc[i];
  const Float8 m = acc[12], c = acc[13];
  for (int64_t t = 0; t < trips; ++t) {
    for (int s = 0; s < 10; ++s) {
      for (int i = 0; i < 12; ++i) a[i] = a[i] * m + c;
    }
  }
  for (int i = 0; i < 12; ++i) acc[i] = a[i];
}

void peak_fma(benchmark::State& state) {
  if (!force_gemm_isa(GemmIsa::Avx2Fma)) {
    state.SkipWithError("AVX2 + FMA not supported by this CPU");
    return;
  }
  Float8 acc[14] = {};
  for (int i = 0; i < 8; ++i) {
    acc[12][i] = 0.999f;
    acc[13][i] = 0.001f;
  }
  const int64_t trips = 10000;
  for (auto _ : state) {
    fma_chains(acc, trips);
    benchmark::DoNotOptimize(acc);
  }
  set_flops(state, double(trips) * 10 * 12 * 8 * 2);
}
BENCHMARK(peak_fma)->Unit(benchmark::kMicrosecond);
#endif

}  // namespace
}  // namespace fusednn::cpu

BENCHMARK_MAIN();
