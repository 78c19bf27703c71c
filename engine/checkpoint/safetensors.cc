// Why: the safetensors writer and validating reader declared in
// safetensors.h; the rules checked follow the format's specification
// (huggingface/safetensors README) and its reference reader.
#include "engine/checkpoint/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <set>
#include <tuple>

#include "engine/common/error.h"
#include "engine/common/json.h"
#include "engine/common/little_endian.h"

namespace mixtrain {

// Tensor bytes are written and read as the host holds them.
static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; big-endian hosts need byte swapping");

namespace {

constexpr DType kAllDTypes[] = {DType::kF32,     DType::kF16, DType::kBF16, DType::kFP8E4M3,
                                DType::kFP8E5M2, DType::kI32, DType::kE8M0};

constexpr std::string_view kMetadataKey = "__metadata__";

[[noreturn]] void throw_invalid(const std::string& message) {
  throw EngineError(ErrorCode::kInvalidArgument, message);
}

// numel * dtype size, or false if a dimension is negative or it overflows.
bool layout_bytes(const TensorLayout& layout, uint64_t* bytes) {
  uint64_t total = dtype_size(layout.dtype);
  for (int64_t dim : layout.shape) {
    if (dim < 0) return false;
    if (__builtin_mul_overflow(total, static_cast<uint64_t>(dim), &total)) return false;
  }
  *bytes = total;
  return true;
}

std::string describe_layout(const TensorLayout& layout) {
  return std::string(safetensors_dtype_name(layout.dtype)) + shape_string(layout.shape);
}

std::string header_json(const std::vector<TensorLayout>& layout,
                        const SafetensorsMetadata& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json& entries = header[kMetadataKey] = Json::object();
    for (const auto& [key, value] : metadata) entries[key] = value;
  }
  uint64_t offset = 0;
  for (const TensorLayout& tensor : layout) {
    uint64_t bytes = 0;
    if (!layout_bytes(tensor, &bytes)) {
      throw_invalid("safetensors: tensor \"" + tensor.name + "\" has an invalid shape " +
                    shape_string(tensor.shape));
    }
    Json shape = Json::array();
    for (int64_t dim : tensor.shape) shape.push_back(Json(dim));
    Json entry = Json::object();
    entry["dtype"] = safetensors_dtype_name(tensor.dtype);
    entry["shape"] = std::move(shape);
    entry["data_offsets"] = {offset, offset + bytes};
    header[tensor.name] = std::move(entry);
    offset += bytes;
  }
  std::string text = dump_json(header);
  // Pad so that 8 + header length is a multiple of 8: the data section
  // (and every tensor whose offset is aligned) then starts aligned.
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  return text;
}

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kFP8E4M3: return "F8_E4M3";
    case DType::kFP8E5M2: return "F8_E5M2";
    case DType::kI32: return "I32";
    case DType::kE8M0:
      return "F8_E8M0";
  }
  return "unknown";
}

HostTensor host_tensor(std::string name, const Tensor& tensor) {
  MIXTRAIN_CHECK_ARG(tensor.defined(), "host_tensor: tensor \"" + name + "\" is undefined");
  MIXTRAIN_CHECK_ARG(tensor.device_type() == DeviceType::kCpu,
                     "host_tensor: tensor \"" + name + "\" " + tensor.describe() +
                         " is in device memory; copy it to the host first");
  return HostTensor{TensorLayout{std::move(name), tensor.dtype(), tensor.shape()}, tensor.data()};
}

SafetensorsWriter::SafetensorsWriter(FileWriter& out, std::vector<TensorLayout> layout,
                                     const SafetensorsMetadata& metadata)
    : out_(out), layout_(std::move(layout)) {
  std::set<std::string_view> names;
  for (const TensorLayout& tensor : layout_) {
    MIXTRAIN_CHECK_ARG(!tensor.name.empty(), "safetensors " + out_.path().string() +
                                                 ": a tensor has an empty name");
    MIXTRAIN_CHECK_ARG(tensor.name != kMetadataKey,
                       "safetensors " + out_.path().string() +
                           ": \"__metadata__\" cannot name a tensor");
    MIXTRAIN_CHECK_ARG(names.insert(tensor.name).second,
                       "safetensors " + out_.path().string() + ": tensor name \"" +
                           tensor.name + "\" appears twice");
  }
  const std::string header = header_json(layout_, metadata);
  std::string length;
  append_le(length, header.size(), 8);
  out_.write(std::as_bytes(std::span(length)));
  out_.write(std::as_bytes(std::span(header)));
}

void SafetensorsWriter::write_next(std::span<const std::byte> bytes) {
  MIXTRAIN_CHECK_ARG(next_ < layout_.size(), "safetensors " + out_.path().string() +
                                                 ": all " + std::to_string(layout_.size()) +
                                                 " tensors were already written");
  const TensorLayout& tensor = layout_[next_];
  uint64_t expected = 0;
  layout_bytes(tensor, &expected);  // validated when the header was built
  MIXTRAIN_CHECK_ARG(bytes.size() == expected,
                     "safetensors " + out_.path().string() + ": tensor \"" + tensor.name +
                         "\" " + describe_layout(tensor) + " needs " + std::to_string(expected) +
                         " bytes, got " + std::to_string(bytes.size()));
  out_.write(bytes);
  ++next_;
}

void SafetensorsWriter::finish() const {
  MIXTRAIN_CHECK_ARG(next_ == layout_.size(), "safetensors " + out_.path().string() +
                                                  ": tensor \"" +
                                                  (next_ < layout_.size() ? layout_[next_].name : "") +
                                                  "\" was never written");
}

WrittenFile write_safetensors(const std::filesystem::path& path,
                              std::span<const HostTensor> tensors,
                              const SafetensorsMetadata& metadata) {
  std::vector<TensorLayout> layout;
  layout.reserve(tensors.size());
  for (const HostTensor& tensor : tensors) layout.push_back(tensor.layout);
  FileWriter out(path);
  SafetensorsWriter writer(out, std::move(layout), metadata);
  for (const HostTensor& tensor : tensors) {
    uint64_t bytes = 0;
    layout_bytes(tensor.layout, &bytes);  // the writer validated every shape
    MIXTRAIN_CHECK_ARG(tensor.data != nullptr || bytes == 0,
                       "safetensors " + path.string() + ": tensor \"" + tensor.layout.name +
                           "\" has no data");
    writer.write_next({static_cast<const std::byte*>(tensor.data), static_cast<size_t>(bytes)});
  }
  writer.finish();
  out.sync_and_close();
  return WrittenFile{out.bytes_written(), out.crc32c()};
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  return SafetensorsFile(MappedFile(path));
}

SafetensorsFile::SafetensorsFile(MappedFile file) : file_(std::move(file)) {
  const std::span<const std::byte> content = file_.bytes();
  if (content.size() < 8) {
    refuse("file is " + std::to_string(content.size()) +
           " bytes, shorter than the 8-byte header length");
  }
  const uint64_t header_length =
      read_le(std::string_view(reinterpret_cast<const char*>(content.data()), 8));
  if (header_length > kSafetensorsMaxHeaderBytes) {
    refuse("header length " + std::to_string(header_length) + " exceeds the limit of " +
           std::to_string(kSafetensorsMaxHeaderBytes) + " bytes");
  }
  if (header_length > content.size() - 8) {
    refuse("header length " + std::to_string(header_length) + " runs past the end of the " +
           std::to_string(content.size()) + "-byte file");
  }
  data_start_ = 8 + header_length;
  parse_header({reinterpret_cast<const char*>(content.data()) + 8, header_length});
}

void SafetensorsFile::refuse(const std::string& problem) const {
  throw_invalid("safetensors " + file_.path().string() + ": " + problem);
}

void SafetensorsFile::parse_header(std::string_view header_text) {
  if (header_text.empty() || header_text.front() != '{') refuse("header does not start with '{'");
  Json header;
  try {
    header = parse_json(header_text);
  } catch (const EngineError& error) {
    refuse(std::string("header is not valid JSON: ") + error.what());
  }
  if (!header.is_object()) refuse("header is not a JSON object");

  const uint64_t data_size = file_.bytes().size() - data_start_;
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      if (!value.is_object()) refuse("\"__metadata__\" is not an object");
      for (const auto& [key, text] : value.items()) {
        if (!text.is_string()) refuse("metadata \"" + key + "\" is not a string");
        metadata_.emplace(key, text.get<std::string>());
      }
      continue;
    }
    const std::string what = "tensor \"" + name + "\"";
    if (!value.is_object()) refuse(what + " is not an object");
    for (const auto& [key, unused] : value.items()) {
      if (key != "dtype" && key != "shape" && key != "data_offsets") {
        refuse(what + " has unknown field \"" + key + "\"");
      }
    }
    if (!value.contains("dtype") || !value.contains("shape") || !value.contains("data_offsets")) {
      refuse(what + " lacks one of \"dtype\", \"shape\", \"data_offsets\"");
    }

    SafetensorsEntry entry;
    entry.layout.name = name;
    const Json& dtype = value["dtype"];
    const Json& shape = value["shape"];
    const Json& offsets = value["data_offsets"];
    if (!dtype.is_string()) refuse(what + ": dtype is not a string");
    const auto known = std::find_if(std::begin(kAllDTypes), std::end(kAllDTypes), [&](DType t) {
      return dtype.get_ref<const std::string&>() == safetensors_dtype_name(t);
    });
    if (known == std::end(kAllDTypes)) {
      refuse(what + ": unsupported dtype \"" + dtype.get<std::string>() +
             "\" (expected F32, F16, BF16, F8_E4M3, F8_E5M2 or I32)");
    }
    entry.layout.dtype = *known;

    if (!shape.is_array()) refuse(what + ": shape is not an array");
    for (const Json& dim : shape) {
      if (!dim.is_number_integer() || dim.get<int64_t>() < 0) {
        refuse(what + ": shape has a dimension that is not a non-negative integer");
      }
      entry.layout.shape.push_back(dim.get<int64_t>());
    }
    uint64_t expected_bytes = 0;
    if (!layout_bytes(entry.layout, &expected_bytes)) refuse(what + ": shape overflows 64 bits");

    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_integer() ||
        !offsets[1].is_number_integer() || offsets[0].get<int64_t>() < 0 ||
        offsets[1].get<int64_t>() < offsets[0].get<int64_t>()) {
      refuse(what + ": data_offsets is not [begin, end] with 0 <= begin <= end");
    }
    entry.begin = static_cast<uint64_t>(offsets[0].get<int64_t>());
    entry.end = static_cast<uint64_t>(offsets[1].get<int64_t>());
    if (entry.end - entry.begin != expected_bytes) {
      refuse(what + ": data_offsets span " + std::to_string(entry.end - entry.begin) +
             " bytes but " + describe_layout(entry.layout) + " needs " +
             std::to_string(expected_bytes));
    }
    if (entry.end > data_size) {
      refuse(what + ": data_offsets [" + std::to_string(entry.begin) + ", " +
             std::to_string(entry.end) + "] run past the " + std::to_string(data_size) +
             "-byte data section (truncated file?)");
    }
    tensors_.push_back(std::move(entry));
  }

  std::sort(tensors_.begin(), tensors_.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return std::tie(a.begin, a.end, a.layout.name) < std::tie(b.begin, b.end, b.layout.name);
  });
  uint64_t covered = 0;
  for (const SafetensorsEntry& entry : tensors_) {
    if (entry.begin < covered) {
      refuse("tensor \"" + entry.layout.name + "\" overlaps the tensor before it (bytes " +
             std::to_string(entry.begin) + " < " + std::to_string(covered) + ")");
    }
    if (entry.begin > covered) {
      refuse("bytes [" + std::to_string(covered) + ", " + std::to_string(entry.begin) +
             ") before tensor \"" + entry.layout.name + "\" belong to no tensor");
    }
    covered = entry.end;
  }
  if (covered != data_size) {
    refuse(std::to_string(data_size - covered) + " bytes after the last tensor belong to no tensor");
  }
  for (size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].layout.name, i);
}

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const std::byte> SafetensorsFile::bytes(const SafetensorsEntry& entry) const {
  return file_.bytes().subspan(data_start_ + entry.begin, entry.end - entry.begin);
}

std::span<const std::byte> SafetensorsFile::bytes(std::string_view name) const {
  const SafetensorsEntry* entry = find(name);
  if (entry == nullptr) refuse("no tensor named \"" + std::string(name) + "\"");
  return bytes(*entry);
}

void SafetensorsFile::read_into(std::string_view name, const Tensor& destination) const {
  const SafetensorsEntry* entry = find(name);
  if (entry == nullptr) refuse("no tensor named \"" + std::string(name) + "\"");
  const std::string what = "tensor \"" + entry->layout.name + "\" " + describe_layout(entry->layout);
  if (!destination.defined() || destination.device_type() != DeviceType::kCpu) {
    refuse(what + " can only be read into a defined host tensor");
  }
  if (destination.dtype() != entry->layout.dtype || destination.shape() != entry->layout.shape) {
    refuse(what + " does not match destination " + destination.describe());
  }
  const std::span<const std::byte> source = bytes(*entry);
  if (!source.empty()) std::memcpy(destination.data(), source.data(), source.size());
}

}  // namespace mixtrain
