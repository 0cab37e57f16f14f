// SPDX-License-Identifier: Apache-2.0
// Runs fusednn's cuBLASLt Linear on a GPU the way linear_cublaslt.cpp does (the same descriptors,
// in the storage of the header this program is compiled against, the same attributes and the same
// layout identity) through the cuBLASLt and CUDA runtime libraries named on the command line, and
// compares y = act(x W^T + b) with a double-precision reference on the host. Compiled against
// CUDA 11.8's headers and given cuBLAS 12's libcublasLt.so.12, it checks on a GPU what
// tools/check_cublaslt_cuda12.sh can only check without one: that a CUDA 11.8 build's 184-byte
// matmul descriptor drives cuBLAS 12's heuristic and matmul correctly.
// Usage: cublaslt_gpu_check LIBCUBLASLT LIBCUDART
//   exit status 0: every case within tolerance, 1: a case is not, 2: no GPU or library
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

struct Runtime {
  decltype(&cudaMalloc) malloc_device;
  decltype(&cudaFree) free_device;
  decltype(&cudaMemcpy) copy;
  decltype(&cudaDeviceSynchronize) synchronize;
  decltype(&cudaGetErrorString) error_string;
};

struct Lt {
  decltype(&cublasLtGetVersion) version;
  decltype(&cublasLtCreate) create;
  decltype(&cublasLtDestroy) destroy;
  decltype(&cublasLtMatmul) matmul;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic;
  decltype(&cublasLtMatmulDescInit_internal) desc_init;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set;
  decltype(&cublasLtMatrixLayoutInit_internal) layout_init;
};

template <typename Function>
bool find(void* library, const char* name, Function* target) {
  *target = reinterpret_cast<Function>(dlsym(library, name));
  if (*target == nullptr) std::fprintf(stderr, "no %s in the library\n", name);
  return *target != nullptr;
}

// Deterministic values in [-1, 1).
struct Values {
  uint64_t state = 0x9E3779B97F4A7C15ull;
  float next() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<int64_t>(state >> 40) - (1 << 23)) / (1 << 23);
  }
};

double gelu_tanh(double x) {
  const double kSqrt2OverPi = 0.7978845608028654;
  return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
}

bool cuda_ok(const Runtime& rt, cudaError_t error, const char* what) {
  if (error == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, rt.error_string(error));
  return false;
}

// One Linear in -> out over `rows` rows with the given epilogue; returns 0, 1 (wrong) or 2.
int run_case(const Lt& lt, const Runtime& rt, cublasLtHandle_t handle, int in, int out, int rows,
             bool gelu) {
  Values values;
  std::vector<float> w(static_cast<size_t>(in) * out), x(static_cast<size_t>(rows) * in), b(out);
  for (float& v : w) v = values.next() * 0.05f;
  for (float& v : x) v = values.next();
  for (float& v : b) v = values.next();
  const size_t workspace_bytes = size_t{4} << 20;
  float *dw = nullptr, *dx = nullptr, *db = nullptr, *dy = nullptr;
  void* workspace = nullptr;
  if (!cuda_ok(rt, rt.malloc_device(reinterpret_cast<void**>(&dw), w.size() * 4), "cudaMalloc") ||
      !cuda_ok(rt, rt.malloc_device(reinterpret_cast<void**>(&dx), x.size() * 4), "cudaMalloc") ||
      !cuda_ok(rt, rt.malloc_device(reinterpret_cast<void**>(&db), b.size() * 4), "cudaMalloc") ||
      !cuda_ok(rt, rt.malloc_device(reinterpret_cast<void**>(&dy), size_t(rows) * out * 4),
               "cudaMalloc") ||
      !cuda_ok(rt, rt.malloc_device(&workspace, workspace_bytes), "cudaMalloc")) {
    return 2;
  }
  rt.copy(dw, w.data(), w.size() * 4, cudaMemcpyHostToDevice);
  rt.copy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice);
  rt.copy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice);

  // As linear_cublaslt.cpp: D (out x rows, ld out) = op(A) B + bias, op(A) = A^T,
  // A = W read as (in x out, ld in), B = x read as (in x rows, ld in).
  cublasLtMatmulDescOpaque_t matmul{};
  cublasLtMatrixLayoutOpaque_t a{}, bl{}, d{};
  const int32_t transpose_a = CUBLAS_OP_T, transpose_b = CUBLAS_OP_N;
  const uint32_t epilogue = gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  const void* bias = db;
  cublasStatus_t status = lt.desc_init(&matmul, sizeof matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (!status) status = lt.desc_set(&matmul, CUBLASLT_MATMUL_DESC_TRANSA, &transpose_a, 4);
  if (!status) status = lt.desc_set(&matmul, CUBLASLT_MATMUL_DESC_TRANSB, &transpose_b, 4);
  if (!status) status = lt.desc_set(&matmul, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, 4);
  if (!status) status = lt.desc_set(&matmul, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, 8);
  if (!status) status = lt.layout_init(&a, sizeof a, CUDA_R_32F, in, out, in);
  if (!status) status = lt.layout_init(&bl, sizeof bl, CUDA_R_32F, in, rows, in);
  if (!status) status = lt.layout_init(&d, sizeof d, CUDA_R_32F, out, rows, out);
  cublasLtMatmulPreference_t preference = nullptr;
  if (!status) status = lt.preference_create(&preference);
  const uint64_t max_workspace = workspace_bytes;
  if (!status) {
    status = lt.preference_set(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace,
                               sizeof max_workspace);
  }
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  if (!status) {
    status = lt.heuristic(handle, &matmul, &a, &bl, &d, &d, preference, 1, &result, &returned);
  }
  if (preference != nullptr) lt.preference_destroy(preference);
  if (status || returned < 1) {
    std::printf("FAIL %d -> %d, %d rows: cuBLASLt status %d, %d algorithms\n", in, out, rows,
                static_cast<int>(status), returned);
    return 1;
  }
  const float alpha = 1.0f, beta = 0.0f;
  status = lt.matmul(handle, &matmul, &alpha, dw, &a, dx, &bl, &beta, dy, &d, dy, &d, &result.algo,
                     workspace, workspace_bytes, nullptr);
  std::vector<float> y(static_cast<size_t>(rows) * out);
  if (status || !cuda_ok(rt, rt.synchronize(), "cudaDeviceSynchronize") ||
      !cuda_ok(rt, rt.copy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost), "cudaMemcpy")) {
    std::printf("FAIL %d -> %d, %d rows: cublasLtMatmul status %d\n", in, out, rows,
                static_cast<int>(status));
    return 1;
  }
  rt.free_device(dw);
  rt.free_device(dx);
  rt.free_device(db);
  rt.free_device(dy);
  rt.free_device(workspace);

  // Within 1e-5 of the sum of the magnitudes that make each output (fp32 accumulation over in).
  double worst = 0.0;
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < out; ++o) {
      double sum = b[o], magnitude = std::fabs(b[o]);
      for (int i = 0; i < in; ++i) {
        const double product = double(x[size_t(r) * in + i]) * w[size_t(o) * in + i];
        sum += product;
        magnitude += std::fabs(product);
      }
      const double expected = gelu ? gelu_tanh(sum) : sum;
      const double error = std::fabs(y[size_t(r) * out + o] - expected) / (magnitude + 1e-30);
      if (error > worst) worst = error;
    }
  }
  const bool ok = worst <= 1e-5;
  std::printf("%s %d -> %d, %d rows, %s epilogue: worst error %.2e of the magnitudes\n",
              ok ? "ok" : "FAIL", in, out, rows, gelu ? "GELU_BIAS" : "BIAS", worst);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s LIBCUBLASLT LIBCUDART\n", argv[0]);
    return 2;
  }
  void* lt_library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  void* rt_library = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (lt_library == nullptr || rt_library == nullptr) {
    std::fprintf(stderr, "cannot load: %s\n", dlerror());
    return 2;
  }
  Lt lt{};
  Runtime rt{};
  if (!find(lt_library, "cublasLtGetVersion", &lt.version) ||
      !find(lt_library, "cublasLtCreate", &lt.create) ||
      !find(lt_library, "cublasLtDestroy", &lt.destroy) ||
      !find(lt_library, "cublasLtMatmul", &lt.matmul) ||
      !find(lt_library, "cublasLtMatmulAlgoGetHeuristic", &lt.heuristic) ||
      !find(lt_library, "cublasLtMatmulDescInit_internal", &lt.desc_init) ||
      !find(lt_library, "cublasLtMatmulDescSetAttribute", &lt.desc_set) ||
      !find(lt_library, "cublasLtMatmulPreferenceCreate", &lt.preference_create) ||
      !find(lt_library, "cublasLtMatmulPreferenceDestroy", &lt.preference_destroy) ||
      !find(lt_library, "cublasLtMatmulPreferenceSetAttribute", &lt.preference_set) ||
      !find(lt_library, "cublasLtMatrixLayoutInit_internal", &lt.layout_init) ||
      !find(rt_library, "cudaMalloc", &rt.malloc_device) ||
      !find(rt_library, "cudaFree", &rt.free_device) || !find(rt_library, "cudaMemcpy", &rt.copy) ||
      !find(rt_library, "cudaDeviceSynchronize", &rt.synchronize) ||
      !find(rt_library, "cudaGetErrorString", &rt.error_string)) {
    return 2;
  }
  std::printf("%s: cuBLASLt %zu, descriptors in the storage of the cuBLAS %d.%d header\n", argv[1],
              lt.version(), CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR);
  if (!cuda_ok(rt, rt.free_device(nullptr), "cudaFree(nullptr), making the device current")) {
    return 2;
  }
  cublasLtHandle_t handle = nullptr;
  if (lt.create(&handle) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublasLtCreate failed\n");
    return 2;
  }
  int worst = 0;
  for (int rows : {1, 37, 256}) {
    for (bool gelu : {false, true}) {
      const int status = run_case(lt, rt, handle, 768, 3072, rows, gelu);
      if (status > worst) worst = status;
    }
  }
  lt.destroy(handle);
  std::printf("%s\n", worst == 0 ? "GPU check passed" : "GPU check FAILED");
  return worst;
}
