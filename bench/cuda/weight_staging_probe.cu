// SPDX-License-Identifier: Apache-2.0
// How fast one block can stage a small network's weights (the seed MLP's 86 KB) from L2 into its
// shared memory, by each way the kernels could ask for them, and what a kernel costs the stream
// beyond its own run. The batch-1 MLP kernel (fused_mlp_block.cu) took ~7 us on an H100 with warm
// caches while its arithmetic is ~2 K cycles, so the staging is the suspect.
//
// Each form runs 200 times as one CUDA graph (so the host's ~3.5 us per launch does not pace
// them). Every launch records, on thread 0: %globaltimer at entry and exit, and the clock cycles
// from entry until every thread has seen the bytes land. Prints a JSON line per form: medians of
// the cycles, of the entry-to-exit time and of the exit-to-next-entry gap (what the stream adds).
//   nvcc -O2 -arch=sm_90 weight_staging_probe.cu -o weight_staging_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

constexpr int kThreads = 512;
constexpr int kBytes = 86528;  // the seed MLP's W^T images, padded: 21632 floats
constexpr int kLaunches = 200;

enum Form { kNothing, kCpAsync16, kLoadStore, kBulkOneThread, kBulkSixWarps, kBulkWhole, kForms };
const char* kNames[] = {"nothing (entry to barrier)",
                        "cp.async 16 B per thread",
                        "ld.global.v4 then st.shared",
                        "cp.async.bulk, 6 x 14 KB from one thread",
                        "cp.async.bulk, 6 x 14 KB from 6 warps",
                        "cp.async.bulk, one 86 KB copy"};

struct Stamp {
  unsigned long long entry_ns, exit_ns, cycles;
  float sink;
};

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ void bulk(uint32_t destination, const void* source, uint32_t bytes, uint32_t barrier) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(destination),
      "l"(source), "r"(bytes), "r"(barrier)
      : "memory");
}

__device__ void wait_phase_zero(uint32_t barrier) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(barrier)
        : "memory");
  } while (done == 0);
}

template <int kForm>
__global__ void __launch_bounds__(kThreads) stage(const float4* source, Stamp* stamps, int launch) {
  extern __shared__ float4 shared[];
  __shared__ alignas(8) unsigned long long barrier;
  const unsigned long long entry_ns = global_ns();
  const long long entry = clock64();
  const int tid = threadIdx.x;
  constexpr int kQuads = kBytes / 16;
  const uint32_t bar = static_cast<uint32_t>(__cvta_generic_to_shared(&barrier));
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(shared));
  if constexpr (kForm == kCpAsync16) {
    for (int q = tid; q < kQuads; q += kThreads) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(base + 16 * q), "l"(source + q)
                   : "memory");
    }
    asm volatile("cp.async.commit_group;\ncp.async.wait_all;" ::: "memory");
  } else if constexpr (kForm == kLoadStore) {
    constexpr int kPer = (kQuads + kThreads - 1) / kThreads;
    float4 held[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int q = tid + i * kThreads;
      if (q < kQuads) held[i] = __ldg(source + q);
    }
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int q = tid + i * kThreads;
      if (q < kQuads) shared[q] = held[i];
    }
  } else if constexpr (kForm >= kBulkOneThread) {
    constexpr int kChunks = kForm == kBulkWhole ? 1 : 6;
    constexpr int kChunk = (kBytes / kChunks + 15) / 16 * 16;
    if (tid == 0) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (tid == 0) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(kBytes)
                   : "memory");
    }
    const bool issues = kForm == kBulkSixWarps ? (tid % 32 == 0 && tid / 32 < kChunks) : tid == 0;
    if (issues) {
      const int first = kForm == kBulkSixWarps ? tid / 32 : 0;
      const int last = kForm == kBulkSixWarps ? first + 1 : kChunks;
      for (int c = first; c < last; ++c) {
        const int offset = c * kChunk;
        const int bytes = min(kChunk, kBytes - offset);
        bulk(base + offset, reinterpret_cast<const char*>(source) + offset, bytes, bar);
      }
    }
    wait_phase_zero(bar);
  }
  __syncthreads();
  const long long done = clock64();
  // Use the staged bytes, so that nothing above is dead code.
  const float value = reinterpret_cast<const float*>(shared)[(tid * 37) % (kBytes / 4)];
  if (tid == 0) {
    stamps[launch].cycles = static_cast<unsigned long long>(done - entry);
    stamps[launch].entry_ns = entry_ns;
    stamps[launch].sink = value;
    stamps[launch].exit_ns = global_ns();
  }
}

template <typename T>
T median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <int kForm>
void measure(const float4* source, Stamp* stamps, cudaStream_t stream) {
  cudaFuncSetAttribute(stage<kForm>, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
  cudaGraph_t graph;
  cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  for (int i = 0; i < kLaunches; ++i) {
    stage<kForm><<<1, kThreads, kBytes, stream>>>(source, stamps, i);
  }
  cudaStreamEndCapture(stream, &graph);
  cudaGraphExec_t exec;
  cudaGraphInstantiate(&exec, graph, 0);
  std::vector<Stamp> host(kLaunches);
  std::vector<double> cycles, inside_ns, gap_ns;
  for (int repeat = 0; repeat < 5; ++repeat) {
    cudaGraphLaunch(exec, stream);
    cudaStreamSynchronize(stream);
    cudaMemcpy(host.data(), stamps, sizeof(Stamp) * kLaunches, cudaMemcpyDeviceToHost);
    if (repeat == 0) continue;  // warm-up: caches, instruction cache, the graph's first upload
    for (int i = 0; i < kLaunches; ++i) {
      cycles.push_back(static_cast<double>(host[i].cycles));
      inside_ns.push_back(static_cast<double>(host[i].exit_ns - host[i].entry_ns));
      if (i > 0) gap_ns.push_back(static_cast<double>(host[i].entry_ns - host[i - 1].exit_ns));
    }
  }
  std::printf(
      "{\"form\": \"%s\", \"stage_cycles\": %.0f, \"entry_to_exit_ns\": %.0f, "
      "\"exit_to_next_entry_ns\": %.0f, \"status\": \"%s\"}\n",
      kNames[kForm], median(cycles), median(inside_ns), median(gap_ns),
      cudaGetErrorString(cudaGetLastError()));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

}  // namespace

int main() {
  float4* source = nullptr;
  Stamp* stamps = nullptr;
  cudaMalloc(&source, kBytes);
  cudaMemset(source, 0, kBytes);
  cudaMalloc(&stamps, sizeof(Stamp) * kLaunches);
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  measure<kNothing>(source, stamps, stream);
  measure<kCpAsync16>(source, stamps, stream);
  measure<kLoadStore>(source, stamps, stream);
  measure<kBulkOneThread>(source, stamps, stream);
  measure<kBulkSixWarps>(source, stamps, stream);
  measure<kBulkWhole>(source, stamps, stream);
  return 0;
}
