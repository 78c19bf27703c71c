# Decides whether the CUDA backend is built (MIXTRAIN_CUDA = AUTO|ON|OFF)
# and enables the CUDA language for sm_80 and sm_90 (and sm_100, sm_120
# with CUDA 12.8 or newer). Sets
# MIXTRAIN_WITH_CUDA. The toolkit is looked for at /usr/local/cuda when
# nvcc is not on PATH.
include(CheckLanguage)
set(MIXTRAIN_WITH_CUDA OFF)
if(NOT MIXTRAIN_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  # Not given: Ampere and Hopper, and where the toolkit knows them (12.8+)
  # Blackwell's sm_100 and sm_120, so a B200 or RTX PRO runs its own code
  # instead of JIT-compiling PTX at start. The last one also carries PTX
  # for later GPUs.
  set(_mixtrain_default_archs OFF)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(_mixtrain_default_archs ON)
    set(CMAKE_CUDA_ARCHITECTURES 80-real 90)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    if(_mixtrain_default_archs AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.8)
      set(CMAKE_CUDA_ARCHITECTURES 80-real 90-real 100-real 120)
    endif()
    # CUDA sources inherit CXX_STANDARD 20, but CMake 3.25 does not know
    # nvcc's C++20 flag (nvcc 12+ has it); newer CMake sets its own.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    find_package(CUDAToolkit REQUIRED)
    set(MIXTRAIN_WITH_CUDA ON)
    message(STATUS "mixtrain: CUDA backend ON (${CMAKE_CUDA_COMPILER}, sm ${CMAKE_CUDA_ARCHITECTURES})")
  elseif(MIXTRAIN_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MIXTRAIN_CUDA=ON but no CUDA compiler was found")
  else()
    message(STATUS "mixtrain: no nvcc, CUDA backend OFF")
  endif()
endif()
