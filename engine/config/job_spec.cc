// Why: the defaults of the job spec that depend on other keys (loss scaling
// on compute, val fraction on val, checkpoint dir on name) are decided here
// once, so every consumer of a JobSpec agrees on them; so is which keys may
// be left `auto`.
#include "engine/config/job_spec.h"

#include "engine/config/job_spec_fields.h"

namespace mixtrain::config {

LossScaleMode effective_loss_scale(const PrecisionSpec& precision) {
  if (precision.loss_scale) return *precision.loss_scale;
  return precision.compute == DType::kF16 ? LossScaleMode::kDynamic : LossScaleMode::kNone;
}

double effective_val_fraction(const DataSpec& data) {
  if (data.val) return 0.0;
  return data.val_fraction.value_or(0.1);
}

std::string effective_checkpoint_dir(const JobSpec& spec) {
  if (spec.checkpoint.dir) return *spec.checkpoint.dir;
  return "./checkpoints/" + spec.name;
}

bool AutoKeys::*auto_key(std::string_view section, std::string_view key) {
  bool AutoKeys::*found = nullptr;
  for_each_auto_key([&](std::string_view s, std::string_view k, bool AutoKeys::*flag) {
    if (s == section && k == key) found = flag;
  });
  return found;
}

std::string auto_key_names(const AutoKeys& auto_keys) {
  std::string out;
  for_each_auto_key([&](std::string_view section, std::string_view key, bool AutoKeys::*flag) {
    if (auto_keys.*flag)
      out += (out.empty() ? "" : ", ") + std::string(section) + "." + std::string(key);
  });
  return out;
}

std::string fp8_field_choices() {
  std::string out;
  for_each_fp8_field([&](std::string_view key, auto) {
    if (!out.empty()) out += ", ";
    out += key;
  });
  return out;
}

std::string compute_dtype_name(DType compute) {
  return compute == DType::kFP8E4M3 ? "fp8" : dtype_name(compute);
}

std::optional<DType> parse_compute_dtype(std::string_view name) {
  if (name == "fp8") return DType::kFP8E4M3;
  if (name == "int32") return std::nullopt;
  try {
    return parse_dtype(name);
  } catch (const EngineError&) {
    return std::nullopt;
  }
}

}  // namespace mixtrain::config
