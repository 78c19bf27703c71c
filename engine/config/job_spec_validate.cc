// Why: every impossible job spec value is rejected before any work starts
// (DESIGN.md §4), with the key named so a user can find it; the checks that
// need the filesystem are separate so specs can be validated anywhere
// (e.g. by the coordinator, which does not see the workers' files).
#include <charconv>
#include <cmath>
#include <fstream>
#include <system_error>

#include "engine/config/job_spec.h"

namespace mixtrain::config {
namespace {

constexpr std::string_view kBuiltinPrefix = "builtin:";
constexpr size_t kMaxNameLength = 100;
constexpr int64_t kMaxVocab = 65536;  // token ids are stored as uint16
// Ceilings of every size: far beyond any job this engine can run, and low
// enough that no size derived from them overflows int64 (the largest model
// they allow, 1024 layers of dim 65536, has 5.3e13 parameters: 8.4e14
// bytes for every copy of the weights) and no loop over them hangs.
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxHeads = 1024;
constexpr int64_t kMaxDim = 65536;
constexpr int64_t kMaxSeqLen = 131072;
constexpr int64_t kMaxBatch = 65536;             // train.micro_batch, train.grad_accum
constexpr int64_t kMaxEvalBatches = 1 << 20;
constexpr int64_t kMaxCount = 1'000'000'000;     // steps, intervals
constexpr int64_t kMaxBucketMb = 65536;
constexpr int64_t kMaxWorkers = 1024;
constexpr int64_t kMaxAmaxHistory = 1 << 16;  // precision.fp8.amax_history
constexpr int64_t kMaxFp8Margin = 64;         // 2^-64 already scales any amax below max
constexpr int64_t kMaxKeep = 10000;
constexpr int64_t kMaxRestarts = 1000;
constexpr int64_t kMaxPriority = 1000;

std::string format_number(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

std::string format_number(int64_t value) { return std::to_string(value); }

// Collects errors with the phrasing shared by all checks.
class Checker {
 public:
  void fail(std::string key_path, std::string message) {
    errors_.push_back({std::move(key_path), std::move(message)});
  }

  void at_least(const char* key_path, int64_t value, int64_t minimum) {
    if (value < minimum)
      fail(key_path,
           "must be at least " + format_number(minimum) + ", got " + format_number(value));
  }

  // Within [minimum, maximum]: every size has a ceiling, so an absurd one
  // is refused here rather than failing (or hanging) on a worker.
  void in_range(const char* key_path, int64_t value, int64_t minimum, int64_t maximum) {
    at_least(key_path, value, minimum);
    if (value > maximum)
      fail(key_path,
           "must be at most " + format_number(maximum) + ", got " + format_number(value));
  }

  // Finite and >= minimum (or > minimum when `exclusive`).
  void number_at_least(const char* key_path, double value, double minimum, bool exclusive) {
    const bool ok = std::isfinite(value) && (exclusive ? value > minimum : value >= minimum);
    if (!ok)
      fail(key_path, std::string(exclusive ? "must be a finite number greater than "
                                           : "must be a finite number of at least ") +
                         format_number(minimum) + ", got " + format_number(value));
  }

  // Within [low, high) or (low, high) when `low_exclusive`.
  void number_in_range(const char* key_path, double value, double low, double high,
                       bool low_exclusive) {
    const bool ok = (low_exclusive ? value > low : value >= low) && value < high;
    if (!ok)
      fail(key_path, std::string("must be in ") + (low_exclusive ? "(" : "[") + format_number(low) +
                         ", " + format_number(high) + "), got " + format_number(value));
  }

  std::vector<SpecError> take() { return std::move(errors_); }

 private:
  std::vector<SpecError> errors_;
};

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

void check_name(const std::string& name, Checker& check) {
  if (name.empty()) {
    check.fail("name", "is required: a short job name such as \"shakespeare-char\"");
    return;
  }
  bool ok = name.size() <= kMaxNameLength && name.front() != '.';
  for (char c : name) ok = ok && is_name_char(c);
  if (!ok)
    check.fail("name",
               "must be at most 100 letters, digits, '.', '_' or '-', not starting with "
               "'.' (it names the checkpoint directory), got \"" +
                   name + "\"");
}

void check_model(const ModelSpec& model, Checker& check) {
  check.in_range("model.layers", model.layers, 1, kMaxLayers);
  check.in_range("model.heads", model.heads, 1, kMaxHeads);
  check.in_range("model.dim", model.dim, 1, kMaxDim);
  if (model.heads >= 1 && model.dim >= 1 && model.dim % model.heads != 0)
    check.fail("model.heads", "must divide model.dim (" + format_number(model.dim) + "), got " +
                                  format_number(model.heads));
  check.in_range("model.seq_len", model.seq_len, 1, kMaxSeqLen);
  check.at_least("model.vocab", model.vocab, 1);
  if (model.vocab > kMaxVocab)
    check.fail("model.vocab", "must be at most " + format_number(kMaxVocab) +
                                  " (token ids are stored as uint16), got " +
                                  format_number(model.vocab));
  if (model.init_from && model.init_from->empty())
    check.fail("model.init_from", "must be a file path when given, got an empty string");
}

void check_data_source(const char* key_path, const std::string& source, Checker& check) {
  if (source.starts_with(kBuiltinPrefix) && source != kBuiltinDemoData)
    check.fail(key_path, "unknown builtin dataset \"" + source + "\" (the only one is " +
                             std::string(kBuiltinDemoData) + ")");
}

void check_data(const DataSpec& data, const ModelSpec& model, Checker& check) {
  if (data.train.empty())
    check.fail("data.train", "is required: a text or token file path, or builtin:demo");
  else
    check_data_source("data.train", data.train, check);
  if (data.val) {
    if (data.val->empty())
      check.fail("data.val", "must be a file path when given, got an empty string");
    else
      check_data_source("data.val", *data.val, check);
  }
  if (data.val && data.val_fraction)
    check.fail("data.val_fraction", "give either data.val or data.val_fraction, not both");
  if (data.val_fraction) check.number_in_range("data.val_fraction", *data.val_fraction, 0, 1, true);
  if (data.format == DataFormat::kText && model.vocab < 256)
    check.fail("model.vocab",
               "must be at least 256 for data.format text (one token per byte), "
               "got " +
                   format_number(model.vocab));
}

void check_train(const TrainSpec& train, Checker& check) {
  check.in_range("train.steps", train.steps, 1, kMaxCount);
  check.in_range("train.micro_batch", train.micro_batch, 1, kMaxBatch);
  check.in_range("train.grad_accum", train.grad_accum, 1, kMaxBatch);
  check.number_at_least("train.min_lr", train.min_lr, 0, false);
  if (!std::isfinite(train.lr) || !(train.lr >= train.min_lr))
    check.fail("train.lr", "must be a finite number of at least train.min_lr (" +
                               format_number(train.min_lr) + "), got " + format_number(train.lr));
  if (train.warmup_steps < 0 || (train.steps >= 1 && train.warmup_steps >= train.steps))
    check.fail("train.warmup_steps", "must be at least 0 and less than train.steps (" +
                                         format_number(train.steps) + "), got " +
                                         format_number(train.warmup_steps));
  check.number_at_least("train.weight_decay", train.weight_decay, 0, false);
  for (double beta : train.betas) check.number_in_range("train.betas", beta, 0, 1, false);
  check.number_at_least("train.grad_clip", train.grad_clip, 0, false);
  check.at_least("train.seed", train.seed, 0);
  check.in_range("train.eval_batches", train.eval_batches, 0, kMaxEvalBatches);
  if (train.eval_batches > 0 && train.eval_every < 1)
    check.fail("train.eval_every", "must be at least 1 when train.eval_batches is above 0, got " +
                                       format_number(train.eval_every));
  if (train.eval_every > kMaxCount)
    check.fail("train.eval_every",
               "must be at most " + format_number(kMaxCount) + ", got " +
                   format_number(train.eval_every));
}

void check_precision(const PrecisionSpec& precision, Checker& check) {
  if (precision.compute == DType::kFP8E5M2)
    check.fail("precision.compute",
               "write compute: fp8 and choose the formats with precision.fp8.format "
               "(hybrid: E4M3 forward, E5M2 gradients; e4m3), got fp8_e5m2");
  else if (!is_float_compute(precision.compute) && !is_fp8_compute(precision))
    check.fail("precision.compute", std::string("must be fp32, fp16, bf16 or fp8, got ") +
                                        dtype_name(precision.compute));
  if (precision.fp8 && !is_fp8_compute(precision))
    check.fail("precision.fp8",
               "sets how fp8 compute scales; it needs precision.compute: fp8, "
               "got " +
                   compute_dtype_name(precision.compute));
  if (precision.fp8) {
    check.in_range("precision.fp8.amax_history", precision.fp8->amax_history, 1, kMaxAmaxHistory);
    check.in_range("precision.fp8.margin", precision.fp8->margin, 0, kMaxFp8Margin);
  }
  check.in_range("precision.stats_every", precision.stats_every, 0, kMaxCount);
  check.number_at_least("precision.min_scale", precision.min_scale, 0, true);
  if (!std::isfinite(precision.init_scale) || !(precision.init_scale >= precision.min_scale))
    check.fail("precision.init_scale", "must be a finite number of at least precision.min_scale (" +
                                           format_number(precision.min_scale) + "), got " +
                                           format_number(precision.init_scale));
  if (precision.max_scale) {
    if (effective_loss_scale(precision) != LossScaleMode::kDynamic)
      check.fail("precision.max_scale",
                 "caps the dynamic loss scale's growth; it needs loss_scale: dynamic");
    else if (!std::isfinite(*precision.max_scale) ||
             !(*precision.max_scale >= precision.init_scale))
      check.fail("precision.max_scale",
                 "must be a finite number of at least precision.init_scale (" +
                     format_number(precision.init_scale) + "), got " +
                     format_number(*precision.max_scale));
  }
  check.number_at_least("precision.growth_factor", precision.growth_factor, 1, true);
  check.number_in_range("precision.backoff_factor", precision.backoff_factor, 0, 1, true);
  check.in_range("precision.growth_interval", precision.growth_interval, 1, kMaxCount);
  check.in_range("precision.hysteresis", precision.hysteresis, 1, kMaxCount);
  if (precision.tf32 && precision.compute != DType::kF32)
    check.fail("precision.tf32", std::string("applies to fp32 compute only, got compute ") +
                                     dtype_name(precision.compute));
}

// A rule between two keys holds when either is `auto`: the planner chooses
// only configurations that keep every rule, and with the keys written so
// far one always exists.
void check_zero(const ZeroSpec& zero, const AutoKeys& auto_keys, Checker& check) {
  const bool stage_written = !auto_keys.zero_stage;
  if (stage_written && (zero.stage < 0 || zero.stage > 3))
    check.fail("zero.stage", "must be 0, 1, 2, 3 or auto, got " + format_number(zero.stage));
  if (zero.offload_optimizer == OffloadTarget::kCpu && stage_written && zero.stage < 1)
    check.fail("zero.offload_optimizer",
               "cpu offload needs zero.stage 1, 2 or 3 (the optimizer state must be partitioned), "
               "got stage " +
                   format_number(zero.stage));
  if (zero.offload_params == OffloadTarget::kCpu) {
    if (stage_written && zero.stage != 3)
      check.fail("zero.offload_params", "cpu offload of parameters needs zero.stage 3, got stage " +
                                            format_number(zero.stage));
    if (zero.offload_optimizer != OffloadTarget::kCpu && !auto_keys.offload_optimizer)
      check.fail("zero.offload_params",
                 "cpu offload of parameters needs zero.offload_optimizer cpu as well");
  }
  check.in_range("zero.bucket_mb", zero.bucket_mb, 1, kMaxBucketMb);
}

void check_file(const char* key_path, const std::string& path,
                const std::filesystem::path& base_dir, std::vector<SpecError>& errors) {
  const std::filesystem::path resolved =
      base_dir.empty() ? std::filesystem::path(path) : base_dir / path;
  std::error_code error;
  if (!std::filesystem::exists(resolved, error)) {
    errors.push_back({key_path, "file not found: " + resolved.string()});
    return;
  }
  if (!std::filesystem::is_regular_file(resolved, error)) {
    errors.push_back({key_path, "not a regular file: " + resolved.string()});
    return;
  }
  if (!std::ifstream(resolved).is_open())
    errors.push_back({key_path, "file not readable: " + resolved.string()});
}

// The checkpoint directory, or its nearest existing ancestor, must be a
// directory; otherwise the first checkpoint would fail after the training.
void check_checkpoint_dir(const std::filesystem::path& dir, std::vector<SpecError>& errors) {
  std::error_code error;
  std::filesystem::path existing = dir;
  while (!existing.empty() && !std::filesystem::exists(existing, error)) {
    if (existing == existing.parent_path()) return;
    existing = existing.parent_path();
  }
  if (existing.empty() || std::filesystem::is_directory(existing, error)) return;
  errors.push_back({"checkpoint.dir", existing == dir
                                          ? "not a directory: " + dir.string()
                                          : "cannot create " + dir.string() + ": " +
                                                existing.string() + " is not a directory"});
}

}  // namespace

std::vector<SpecError> validate(const JobSpec& spec) {
  Checker check;
  check_name(spec.name, check);
  check_model(spec.model, check);
  check_data(spec.data, spec.model, check);
  check_train(spec.train, check);
  check_precision(spec.precision, check);
  check_zero(spec.zero, spec.auto_keys, check);
  check.in_range("resources.workers", spec.resources.workers, 1, kMaxWorkers);
  check.in_range("scheduling.priority", spec.scheduling.priority, 0, kMaxPriority);
  check.in_range("checkpoint.every", spec.checkpoint.every, 1, kMaxCount);
  check.in_range("checkpoint.keep", spec.checkpoint.keep, 1, kMaxKeep);
  if (spec.checkpoint.dir && spec.checkpoint.dir->empty())
    check.fail("checkpoint.dir", "must be a directory path when given, got an empty string");
  check.in_range("retries.max_restarts", spec.retries.max_restarts, 0, kMaxRestarts);
  return check.take();
}

std::vector<SpecError> check_files(const JobSpec& spec, const std::filesystem::path& base_dir) {
  std::vector<SpecError> errors;
  if (!spec.data.train.empty() && !spec.data.train.starts_with(kBuiltinPrefix))
    check_file("data.train", spec.data.train, base_dir, errors);
  if (spec.data.val && !spec.data.val->empty() && !spec.data.val->starts_with(kBuiltinPrefix))
    check_file("data.val", *spec.data.val, base_dir, errors);
  if (spec.model.init_from && !spec.model.init_from->empty())
    check_file("model.init_from", *spec.model.init_from, base_dir, errors);
  const std::filesystem::path checkpoint_dir = effective_checkpoint_dir(spec);
  check_checkpoint_dir(base_dir.empty() ? checkpoint_dir : base_dir / checkpoint_dir, errors);
  return errors;
}

}  // namespace mixtrain::config
