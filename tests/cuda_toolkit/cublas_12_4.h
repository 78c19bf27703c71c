// Why: README claims CUDA 12.4 as the oldest toolkit mixtrain builds
// with, and machines with PyTorch often carry 12.4-12.6 (issue 31: the
// MXFP8 enums of 12.8 once broke that build). Only CUDA 13 headers exist
// here, so this file, force-included before anything else, makes them
// read as cuBLAS 12.4: the version macros say 12.4 and every cuBLASLt name
// newer than 12.4 that mixtrain uses is poisoned, so an unguarded use fails
// to compile. Add a name here when the engine starts using a newer one.
#pragma once

#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda.h>

#undef CUBLAS_VER_MAJOR
#undef CUBLAS_VER_MINOR
#undef CUBLAS_VER_PATCH
#undef CUBLAS_VERSION
#define CUBLAS_VER_MAJOR 12
#define CUBLAS_VER_MINOR 4
#define CUBLAS_VER_PATCH 5
#define CUBLAS_VERSION (CUBLAS_VER_MAJOR * 10000 + CUBLAS_VER_MINOR * 100 + CUBLAS_VER_PATCH)
#undef CUDA_VERSION
#define CUDA_VERSION 12040

// cuBLAS 12.8: block-scaled (MX) fp8 GEMMs.
#define CUBLASLT_MATMUL_DESC_A_SCALE_MODE mixtrain_not_in_cublas_12_4
#define CUBLASLT_MATMUL_DESC_B_SCALE_MODE mixtrain_not_in_cublas_12_4
#define CUBLASLT_MATMUL_DESC_C_SCALE_MODE mixtrain_not_in_cublas_12_4
#define CUBLASLT_MATMUL_DESC_D_SCALE_MODE mixtrain_not_in_cublas_12_4
#define CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0 mixtrain_not_in_cublas_12_4
#define CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3 mixtrain_not_in_cublas_12_4
#define CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F mixtrain_not_in_cublas_12_4
