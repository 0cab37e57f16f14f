# CUDA toolchain for the CUDA backend; included by the top-level CMakeLists.txt when
# FUSEDNN_WITH_CUDA is ON.
#
# Architectures: machine code for every GPU generation nvcc 13 still targets (Turing sm_75
# through Blackwell sm_120) plus PTX of the newest, which the driver compiles for GPUs newer
# than this list. Override with -DCMAKE_CUDA_ARCHITECTURES=... or the CUDAARCHS environment
# variable (the dev preset builds a short list to keep CI fast).
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
  set(CMAKE_CUDA_ARCHITECTURES
    "75-real;80-real;86-real;87-real;89-real;90-real;100-real;120-real;120-virtual"
    CACHE STRING "CUDA architectures the kernels are built for")
endif()

enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)

set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_EXTENSIONS OFF)
set(CMAKE_CUDA_VISIBILITY_PRESET hidden)
message(STATUS "fusednn: CUDA backend ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
  "architectures ${CMAKE_CUDA_ARCHITECTURES})")
