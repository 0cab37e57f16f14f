// SPDX-License-Identifier: Apache-2.0
// Does compute-sanitizer initcheck see the stores of cuBLASLt's kernels? Multiplies two
// initialised matrices into an output that nothing else writes, then copies the output to the
// host and checks it against a host product. Run alone it prints "ok" and the kernel cuBLASLt
// chose; run under `compute-sanitizer --tool initcheck`, any report on the device-to-host copy is
// about memory cuBLASLt wrote, since the program writes the output nowhere else.
//
//   nvcc -std=c++17 -O2 tools/probes/initcheck_cublaslt_probe.cpp -lcublasLt -o probe
//   compute-sanitizer --tool initcheck ./probe [M N K [fp32|tf32|bf16]]
// bf16 gives cuBLASLt bfloat16 operands and output (the products are exact: small integers).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

bool ok(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
  return false;
}

bool ok(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return true;
  std::fprintf(stderr, "%s: cuBLASLt status %d\n", what, static_cast<int>(status));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const int m = argc > 1 ? std::atoi(argv[1]) : 4096;  // rows of the output
  const int n = argc > 2 ? std::atoi(argv[2]) : 256;   // columns of the output
  const int k = argc > 3 ? std::atoi(argv[3]) : 256;
  const char* mode = argc > 4 ? argv[4] : "fp32";
  if (m <= 0 || n <= 0 || k <= 0) return 2;
  const bool bf16 = std::strcmp(mode, "bf16") == 0;
  const cublasComputeType_t compute =
      std::strcmp(mode, "tf32") == 0 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const size_t element = bf16 ? 2 : 4;
  // Row-major A (m x k), B (k x n), D (m x n), given to column-major cuBLASLt as D^T = B^T A^T.
  std::vector<float> a(static_cast<size_t>(m) * k), b(static_cast<size_t>(k) * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(static_cast<int>(i % 5) - 2);
  // The operands in the device's element type (bfloat16 holds these small integers exactly).
  auto to_device_type = [&](const std::vector<float>& values) {
    std::vector<unsigned char> bytes(values.size() * element);
    for (size_t i = 0; i < values.size(); ++i) {
      if (bf16) {
        const __nv_bfloat16 value = __float2bfloat16(values[i]);
        std::memcpy(bytes.data() + i * 2, &value, 2);
      } else {
        std::memcpy(bytes.data() + i * 4, &values[i], 4);
      }
    }
    return bytes;
  };
  const std::vector<unsigned char> a_bytes = to_device_type(a), b_bytes = to_device_type(b);
  void *da = nullptr, *db = nullptr, *dd = nullptr;
  void* workspace = nullptr;
  const size_t workspace_bytes = size_t{32} << 20;
  if (!ok(cudaMalloc(&da, a_bytes.size()), "cudaMalloc A") ||
      !ok(cudaMalloc(&db, b_bytes.size()), "cudaMalloc B") ||
      !ok(cudaMalloc(&dd, static_cast<size_t>(m) * n * element), "cudaMalloc D") ||
      !ok(cudaMalloc(&workspace, workspace_bytes), "cudaMalloc workspace") ||
      !ok(cudaMemcpy(da, a_bytes.data(), a_bytes.size(), cudaMemcpyHostToDevice), "copy A") ||
      !ok(cudaMemcpy(db, b_bytes.data(), b_bytes.size(), cudaMemcpyHostToDevice), "copy B"))
    return 1;

  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t lb = nullptr, la = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  if (!ok(cublasLtCreate(&handle), "create") ||
      !ok(cublasLtMatmulDescCreate(&op, compute, CUDA_R_32F), "desc") ||
      !ok(cublasLtMatrixLayoutCreate(&lb, type, n, k, n), "layout B") ||
      !ok(cublasLtMatrixLayoutCreate(&la, type, k, m, k), "layout A") ||
      !ok(cublasLtMatrixLayoutCreate(&ld, type, n, m, n), "layout D") ||
      !ok(cublasLtMatmulPreferenceCreate(&preference), "preference") ||
      !ok(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                               &workspace_bytes, sizeof(workspace_bytes)),
          "workspace attribute") ||
      !ok(cublasLtMatmulAlgoGetHeuristic(handle, op, lb, la, ld, ld, preference, 1, &heuristic,
                                         &found),
          "heuristic"))
    return 1;
  if (found == 0) {
    std::fprintf(stderr, "no cuBLASLt algorithm\n");
    return 1;
  }
  const float one = 1.0f, zero = 0.0f;
  if (!ok(cublasLtMatmul(handle, op, &one, db, lb, da, la, &zero, dd, ld, dd, ld, &heuristic.algo,
                         workspace, workspace_bytes, nullptr),
          "matmul") ||
      !ok(cudaDeviceSynchronize(), "sync"))
    return 1;
  std::vector<unsigned char> d_bytes(static_cast<size_t>(m) * n * element);
  if (!ok(cudaMemcpy(d_bytes.data(), dd, d_bytes.size(), cudaMemcpyDeviceToHost), "copy D"))
    return 1;
  std::vector<float> d(static_cast<size_t>(m) * n);
  for (size_t i = 0; i < d.size(); ++i) {
    if (bf16) {
      __nv_bfloat16 value;
      std::memcpy(&value, d_bytes.data() + i * 2, 2);
      d[i] = __bfloat162float(value);
    } else {
      std::memcpy(&d[i], d_bytes.data() + i * 4, 4);
    }
  }
  size_t wrong = 0;
  for (int row = 0; row < m; ++row)
    for (int col = 0; col < n; ++col) {
      double expected = 0;
      for (int i = 0; i < k; ++i)
        expected += static_cast<double>(a[static_cast<size_t>(row) * k + i]) *
                    b[static_cast<size_t>(i) * n + col];
      // bfloat16 keeps 8 significant bits of the exact integer sum.
      const double tolerance = bf16 ? std::fabs(expected) / 128 + 1e-3 : 1e-3;
      if (std::fabs(expected - d[static_cast<size_t>(row) * n + col]) > tolerance) ++wrong;
    }
  std::printf("%s: %s %dx%dx%d, %zu of %zu outputs wrong\n", wrong == 0 ? "ok" : "WRONG", mode, m,
              n, k, wrong, d.size());
  cublasLtMatmulPreferenceDestroy(preference);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatmulDescDestroy(op);
  cublasLtDestroy(handle);
  cudaFree(workspace);
  cudaFree(dd);
  cudaFree(db);
  cudaFree(da);
  return wrong == 0 ? 0 : 1;
}
