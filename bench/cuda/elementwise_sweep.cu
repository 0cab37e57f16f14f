// SPDX-License-Identifier: Apache-2.0
// Which form of a memory-bound elementwise pass gets closest to the device-to-device copy:
// ReLU + Scale over 2^26 floats (the benchmark case; 537 MB moved) in several kernel shapes,
// timed with events (median of 20 after warm-up) against cudaMemcpyAsync and a plain float4 copy
// kernel. Every variant's output is checked against the host formula.
//
//   nvcc -O3 -arch=sm_90 bench/cuda/elementwise_sweep.cu -o /tmp/elementwise_sweep
//   /tmp/elementwise_sweep        # prints one JSON object per variant
//
// Variants (why each might matter):
//   strided_switch   the library's loop today: grid-stride, one float4 per step, the epilogue
//                    interpreted per element (a switch per op per float)
//   strided_vector   the same, the switch taken once per op per float4
//   fixed_ops        the ops known at compile time (the cost of interpreting them at all)
//   one_per_thread   no loop: one float4 per thread, a grid as large as the data
//   two_per_thread   two independent float4 loads in flight per thread, no loop
//   streaming        one_per_thread with evict-first loads and stores (__ldcs / __stcs)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int kReLU = 0, kScale = 7;
struct Ops {
  int count;
  int kind[4];
  float parameter[4];
};

void check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(error));
    std::exit(1);
  }
}

__device__ __forceinline__ float apply_one(int kind, float parameter, float x) {
  switch (kind) {
    case kReLU: return x > 0.0f ? x : 0.0f;
    case kScale: return x * parameter;
  }
  return x;
}

__device__ __forceinline__ float4 per_element(const Ops& ops, float4 v) {
  for (int i = 0; i < ops.count; ++i) {
    v.x = apply_one(ops.kind[i], ops.parameter[i], v.x);
    v.y = apply_one(ops.kind[i], ops.parameter[i], v.y);
    v.z = apply_one(ops.kind[i], ops.parameter[i], v.z);
    v.w = apply_one(ops.kind[i], ops.parameter[i], v.w);
  }
  return v;
}

__device__ __forceinline__ float4 per_vector(const Ops& ops, float4 v) {
  for (int i = 0; i < ops.count; ++i) {
    const float p = ops.parameter[i];
    switch (ops.kind[i]) {
      case kReLU:
        v.x = fmaxf(v.x, 0.0f), v.y = fmaxf(v.y, 0.0f), v.z = fmaxf(v.z, 0.0f),
        v.w = fmaxf(v.w, 0.0f);
        break;
      case kScale: v.x *= p, v.y *= p, v.z *= p, v.w *= p; break;
    }
  }
  return v;
}

__device__ __forceinline__ float4 fixed(float4 v, float p) {
  v.x = fmaxf(v.x, 0.0f) * p, v.y = fmaxf(v.y, 0.0f) * p;
  v.z = fmaxf(v.z, 0.0f) * p, v.w = fmaxf(v.w, 0.0f) * p;
  return v;
}

__global__ void strided_switch(const float4* x, float4* y, long long n4, Ops ops) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += stride) {
    y[i] = per_element(ops, x[i]);
  }
}
__global__ void strided_vector(const float4* x, float4* y, long long n4, Ops ops) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += stride) {
    y[i] = per_vector(ops, x[i]);
  }
}
__global__ void fixed_ops(const float4* x, float4* y, long long n4, Ops ops) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += stride) {
    y[i] = fixed(x[i], ops.parameter[1]);
  }
}
__global__ void one_per_thread(const float4* x, float4* y, long long n4, Ops ops) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n4) y[i] = per_vector(ops, x[i]);
}
__global__ void two_per_thread(const float4* x, float4* y, long long n4, Ops ops) {
  const long long i = (blockIdx.x * (long long)blockDim.x) * 2 + threadIdx.x;
  const long long j = i + blockDim.x;
  float4 a, b;
  if (i < n4) a = x[i];
  if (j < n4) b = x[j];
  if (i < n4) y[i] = per_vector(ops, a);
  if (j < n4) y[j] = per_vector(ops, b);
}
__global__ void streaming(const float4* x, float4* y, long long n4, Ops ops) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n4) __stcs(y + i, per_vector(ops, __ldcs(x + i)));
}
__global__ void copy_kernel(const float4* x, float4* y, long long n4, Ops) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n4) y[i] = x[i];
}

}  // namespace

int main() {
  const long long n = 1LL << 26, n4 = n / 4;
  const size_t bytes = n * sizeof(float);
  std::vector<float> host(n);
  for (long long i = 0; i < n; ++i) host[i] = std::sin(0.001f * i) * 3.0f;
  float *x = nullptr, *y = nullptr;
  check(cudaMalloc(&x, bytes), "cudaMalloc");
  check(cudaMalloc(&y, bytes), "cudaMalloc");
  check(cudaMemcpy(x, host.data(), bytes, cudaMemcpyHostToDevice), "upload");
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attribute");
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  const Ops ops{2, {kReLU, kScale}, {0.0f, 0.5f}};

  auto time = [&](auto&& launch) {
    for (int i = 0; i < 3; ++i) launch();
    std::vector<float> ms;
    for (int i = 0; i < 20; ++i) {
      cudaEventRecord(start);
      launch();
      cudaEventRecord(stop);
      check(cudaEventSynchronize(stop), "run");
      float t = 0;
      cudaEventElapsedTime(&t, start, stop);
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2] * 1000.0;  // us
  };
  auto verify = [&](bool relu_scale) {
    std::vector<float> got(n);
    check(cudaMemcpy(got.data(), y, bytes, cudaMemcpyDeviceToHost), "download");
    for (long long i = 0; i < n; i += 997) {
      const float want = relu_scale ? std::max(host[i], 0.0f) * 0.5f : host[i];
      if (got[i] != want) return false;
    }
    return true;
  };
  auto report = [&](const char* name, int threads, long long blocks, double us, bool ok) {
    std::printf(
        "{\"variant\": \"%s\", \"threads\": %d, \"blocks\": %lld, \"us\": %.1f, "
        "\"TB_per_s\": %.2f, \"correct\": %s}\n",
        name, threads, blocks, us, 2.0 * bytes / us / 1e6, ok ? "true" : "false");
  };

  const double memcpy_us = time([&] { cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice); });
  report("cudaMemcpyAsync", 0, 0, memcpy_us, verify(false));
  for (int threads : {256, 512, 1024}) {
    const long long full = (n4 + threads - 1) / threads;
    const double copy_us =
        time([&] { copy_kernel<<<full, threads>>>((float4*)x, (float4*)y, n4, ops); });
    report("copy_kernel", threads, full, copy_us, verify(false));
    for (int per_sm : {4, 8, 16}) {
      const long long blocks = std::min<long long>(full, (long long)sms * per_sm * 256 / threads);
      const double a =
          time([&] { strided_switch<<<blocks, threads>>>((float4*)x, (float4*)y, n4, ops); });
      report("strided_switch", threads, blocks, a, verify(true));
      const double b =
          time([&] { strided_vector<<<blocks, threads>>>((float4*)x, (float4*)y, n4, ops); });
      report("strided_vector", threads, blocks, b, verify(true));
      const double c =
          time([&] { fixed_ops<<<blocks, threads>>>((float4*)x, (float4*)y, n4, ops); });
      report("fixed_ops", threads, blocks, c, verify(true));
    }
    const double d =
        time([&] { one_per_thread<<<full, threads>>>((float4*)x, (float4*)y, n4, ops); });
    report("one_per_thread", threads, full, d, verify(true));
    const long long half = (n4 + 2 * threads - 1) / (2 * threads);
    const double e =
        time([&] { two_per_thread<<<half, threads>>>((float4*)x, (float4*)y, n4, ops); });
    report("two_per_thread", threads, half, e, verify(true));
    const double f = time([&] { streaming<<<full, threads>>>((float4*)x, (float4*)y, n4, ops); });
    report("streaming", threads, full, f, verify(true));
  }
  cudaFree(x);
  cudaFree(y);
  return 0;
}
