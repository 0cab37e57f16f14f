// SPDX-License-Identifier: Apache-2.0
// Describes fusednn's cuBLASLt products the way linear_cublaslt.cpp does, with the descriptor
// storage and the values of the header this program is compiled against, through the cuBLASLt
// library named on the command line (dlopen, as cublaslt_library.cpp loads it), and checks what
// the library does with that storage: every call must succeed and no byte past the storage the
// header declares may be written. None of these calls needs a GPU, so the library of another
// CUDA major (libcublasLt.so.12 under CUDA 11.8's cublasLt.h) is checked on any machine that runs
// its code (natively, or under qemu-aarch64).
// Usage: cublaslt_descriptor_probe LIBRARY   exit status 0: as required, 1: not, 2: no library
#include <cublasLt.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {

constexpr size_t kGuardBytes = 1024;  // room after the storage, where nothing may be written

// Storage for one descriptor and a guard after it, filled with a pattern before each use.
struct Guarded {
  unsigned char bytes[4096];
};

// The index of the last byte of `a` and `b` (the same calls on two fill patterns) that changed,
// or -1: a byte the library wrote differs from its pattern in at least one of the two.
long last_written(const Guarded& a, const Guarded& b, size_t extent) {
  long last = -1;
  for (size_t i = 0; i < extent; ++i) {
    if (a.bytes[i] != 0xA5 || b.bytes[i] != 0x5A) last = static_cast<long>(i);
  }
  return last;
}

struct Library {
  size_t (*version)();
  decltype(&cublasLtMatmulDescInit_internal) matmul_desc_init;
  decltype(&cublasLtMatmulDescSetAttribute) matmul_desc_set;
  decltype(&cublasLtMatrixLayoutInit_internal) layout_init;
};

// fusednn's descriptor for one product: init, then the attributes linear_cublaslt.cpp sets.
// Returns the first failing status, or CUBLAS_STATUS_SUCCESS.
cublasStatus_t describe(const Library& lt, void* storage, size_t size, cublasComputeType_t compute,
                        bool fp32_bias_type) {
  auto* desc = static_cast<cublasLtMatmulDesc_t>(storage);
  cublasStatus_t status = lt.matmul_desc_init(desc, size, compute, CUDA_R_32F);
  const int32_t transpose_a = CUBLAS_OP_T;
  const int32_t transpose_b = CUBLAS_OP_N;
  const uint32_t epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;
  const void* bias = reinterpret_cast<const void*>(uintptr_t{0x10000});
  const int32_t bias_type = CUDA_R_32F;
  if (status == CUBLAS_STATUS_SUCCESS) {
    status =
        lt.matmul_desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose_a, sizeof transpose_a);
  }
  if (status == CUBLAS_STATUS_SUCCESS) {
    status =
        lt.matmul_desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSB, &transpose_b, sizeof transpose_b);
  }
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = lt.matmul_desc_set(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
  }
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = lt.matmul_desc_set(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
  }
  if (status == CUBLAS_STATUS_SUCCESS && fp32_bias_type) {
    status =
        lt.matmul_desc_set(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type);
  }
  return status;
}

// Runs `call` on storage filled with two patterns; false (and says why) when it fails or writes
// past `size` bytes.
template <typename Call>
bool check(const char* what, size_t size, Call call) {
  static Guarded a, b;
  std::memset(a.bytes, 0xA5, sizeof a.bytes);
  std::memset(b.bytes, 0x5A, sizeof b.bytes);
  const cublasStatus_t status_a = call(a.bytes);
  const cublasStatus_t status_b = call(b.bytes);
  const long last = last_written(a, b, size + kGuardBytes);
  const bool ok = status_a == CUBLAS_STATUS_SUCCESS && status_b == CUBLAS_STATUS_SUCCESS &&
                  last < static_cast<long>(size);
  std::printf("%s %s: %zu bytes of storage, status %d, last byte written %ld\n", ok ? "ok" : "FAIL",
              what, size, static_cast<int>(status_a), last);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s LIBRARY\n", argv[0]);
    return 2;
  }
  void* handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "cannot load %s: %s\n", argv[1], dlerror());
    return 2;
  }
  Library lt{};
  lt.version = reinterpret_cast<size_t (*)()>(dlsym(handle, "cublasLtGetVersion"));
  lt.matmul_desc_init = reinterpret_cast<decltype(lt.matmul_desc_init)>(
      dlsym(handle, "cublasLtMatmulDescInit_internal"));
  lt.matmul_desc_set = reinterpret_cast<decltype(lt.matmul_desc_set)>(
      dlsym(handle, "cublasLtMatmulDescSetAttribute"));
  lt.layout_init = reinterpret_cast<decltype(lt.layout_init)>(
      dlsym(handle, "cublasLtMatrixLayoutInit_internal"));
  if (!lt.version || !lt.matmul_desc_init || !lt.matmul_desc_set || !lt.layout_init) {
    std::fprintf(stderr, "%s lacks a cuBLASLt entry point\n", argv[1]);
    return 2;
  }
  std::printf("%s: cublasLtGetVersion %zu; header cuBLAS %d.%d (%s)\n", argv[1], lt.version(),
              CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR,
              "descriptor storage and values as fusednn compiled against it has them");
  const size_t matmul_size = sizeof(cublasLtMatmulDescOpaque_t);
  const size_t layout_size = sizeof(cublasLtMatrixLayoutOpaque_t);
  bool ok = true;
  const cublasComputeType_t computes[] = {CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32,
                                          CUBLAS_COMPUTE_32F_FAST_16F,
                                          CUBLAS_COMPUTE_32F_FAST_16BF};
  for (cublasComputeType_t compute : computes) {
    for (bool fp32_bias_type : {false, true}) {
      char what[160];
      std::snprintf(what, sizeof what, "matmul descriptor, compute type %d, GELU_BIAS%s",
                    static_cast<int>(compute), fp32_bias_type ? ", fp32 bias type" : "");
      ok = check(what, matmul_size,
                 [&](void* storage) {
                   return describe(lt, storage, matmul_size, compute, fp32_bias_type);
                 }) &&
           ok;
    }
  }
  const cudaDataType_t types[] = {CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF};
  for (cudaDataType_t type : types) {
    char what[80];
    std::snprintf(what, sizeof what, "matrix layout, data type %d", static_cast<int>(type));
    ok = check(what, layout_size,
               [&](void* storage) {
                 return lt.layout_init(static_cast<cublasLtMatrixLayout_t>(storage), layout_size,
                                       type, 768, 3072, 768);
               }) &&
         ok;
  }
  // The library reads the storage size it is given: in a quarter of the header's storage it
  // either refuses (any status) or writes within that quarter; only the writes are checked.
  const size_t quarter = matmul_size / 4;
  ok = check("matmul descriptor in a quarter of the storage (refusal also accepted)", quarter,
             [&](void* storage) {
               const cublasStatus_t status =
                   describe(lt, storage, quarter, CUBLAS_COMPUTE_32F, false);
               std::printf("  (status %d)\n", static_cast<int>(status));
               return CUBLAS_STATUS_SUCCESS;
             }) &&
       ok;
  std::printf("%s\n", ok ? "descriptor probe passed" : "descriptor probe FAILED");
  return ok ? 0 : 1;
}
