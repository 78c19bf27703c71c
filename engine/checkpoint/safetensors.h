// Why: safetensors is how weights leave and enter mixtrain (export, init_from)
// and the container of every checkpoint data file. Layout: 8-byte
// little-endian header length N, N bytes of JSON
//   {"__metadata__": {str: str}, NAME: {"dtype": "F32", "shape": [..],
//    "data_offsets": [begin, end]}, ...}
// then the little-endian tensor bytes, offsets relative to that data
// section, which the tensors cover exactly (no holes, no overlap, no tail).
// The writer streams tensors one at a time from host memory and pads the
// header with spaces so the data starts 8-byte aligned; the reader checks
// every one of these rules and refuses a file with an EngineError naming
// the file and the problem. Readers accept unaligned headers (older
// writers), so tensor bytes are not guaranteed aligned: copy, don't cast.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/backend/tensor.h"
#include "engine/checkpoint/file_io.h"
#include "engine/numerics/dtype.h"

namespace mixtrain {

using SafetensorsMetadata = std::map<std::string, std::string>;

// The header refuses to grow past this (as the reference implementation).
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "I32".
const char* safetensors_dtype_name(DType dtype);

// Name, element type and shape of one stored tensor.
struct TensorLayout {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
};

// One tensor to write: its layout and its bytes in host memory (borrowed,
// shape_numel(shape) * dtype_size(dtype) of them, little-endian).
struct HostTensor {
  TensorLayout layout;
  const void* data = nullptr;
};

// `tensor` (which must live in host-readable memory) as a HostTensor named
// `name`; borrows its storage. Throws EngineError(kInvalidArgument) for a
// device tensor or an undefined one.
HostTensor host_tensor(std::string name, const Tensor& tensor);

// Writes one safetensors file into a FileWriter: the header at
// construction, then each tensor's bytes in layout order, so that only one
// tensor need be in host memory at a time.
class SafetensorsWriter {
 public:
  // Writes the header for `layout` (stored in that order) and `metadata`.
  // Throws EngineError(kInvalidArgument) for an empty, duplicate or
  // "__metadata__" name, or a negative dimension.
  SafetensorsWriter(FileWriter& out, std::vector<TensorLayout> layout,
                    const SafetensorsMetadata& metadata);

  // Appends the bytes of the next tensor in layout order; `bytes` must be
  // exactly its size. Throws EngineError(kInvalidArgument) naming the tensor
  // otherwise, or when every tensor has already been written.
  void write_next(std::span<const std::byte> bytes);

  // Throws EngineError(kInvalidArgument) naming the first tensor not yet
  // written; otherwise the file's content is complete.
  void finish() const;

 private:
  FileWriter& out_;
  std::vector<TensorLayout> layout_;
  size_t next_ = 0;
};

// Size and CRC32C of a file as it was written.
struct WrittenFile {
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
};

// Writes `tensors` (in this order) and `metadata` to the new file `path`
// and fsyncs it. Throws EngineError naming the path and tensor on invalid
// input (as SafetensorsWriter, or a null data pointer) or an I/O error; a
// partial file may then remain for the caller to remove.
WrittenFile write_safetensors(const std::filesystem::path& path,
                              std::span<const HostTensor> tensors,
                              const SafetensorsMetadata& metadata = {});

// Where one tensor lies in the data section.
struct SafetensorsEntry {
  TensorLayout layout;
  uint64_t begin = 0;  // byte offsets relative to the data section
  uint64_t end = 0;
};

// A validated safetensors file, mapped read-only.
class SafetensorsFile {
 public:
  // Maps and validates `path`; see the constructor below.
  static SafetensorsFile open(const std::filesystem::path& path);

  // Validates `file`: header length within the file, header JSON an object
  // starting with '{', metadata strings only, every dtype known, shape
  // dimensions non-negative, data_offsets [begin, end] with end - begin ==
  // numel * dtype size, and the tensors tiling the data section exactly.
  // Throws EngineError(kInvalidArgument) "safetensors PATH: PROBLEM".
  explicit SafetensorsFile(MappedFile file);

  const std::filesystem::path& path() const { return file_.path(); }
  const SafetensorsMetadata& metadata() const { return metadata_; }
  // Every tensor, in data order.
  const std::vector<SafetensorsEntry>& tensors() const { return tensors_; }
  // The tensor named `name`, or nullptr.
  const SafetensorsEntry* find(std::string_view name) const;
  // The bytes of `entry` (one of tensors()).
  std::span<const std::byte> bytes(const SafetensorsEntry& entry) const;
  // The bytes of the tensor named `name`; throws EngineError
  // (kInvalidArgument) naming the file and tensor if there is none.
  std::span<const std::byte> bytes(std::string_view name) const;
  // Copies the tensor named `name` into `destination`, a host tensor of the
  // same dtype and shape; throws EngineError(kInvalidArgument) naming the
  // file, the tensor and both descriptions otherwise.
  void read_into(std::string_view name, const Tensor& destination) const;

 private:
  [[noreturn]] void refuse(const std::string& problem) const;
  void parse_header(std::string_view header_text);

  MappedFile file_;
  SafetensorsMetadata metadata_;
  std::vector<SafetensorsEntry> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  uint64_t data_start_ = 0;
};

}  // namespace mixtrain
