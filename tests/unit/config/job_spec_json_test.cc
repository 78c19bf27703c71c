// Why: the coordinator hands every task the spec it validated, as JSON;
// a field that did not survive the trip would train another job than the
// one submitted, and a document the task half-understood must be refused,
// not defaulted.
#include "engine/config/job_spec_json.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/common/error.h"
#include "engine/config/job_spec_fields.h"

namespace mixtrain::config {
namespace {

// Every field away from its default (optionals set), so that a field the
// JSON dropped or mixed up with another shows.
JobSpec unusual_spec() {
  JobSpec spec;
  spec.name = "unusual \"name\" ü";
  spec.model = {ModelArch::kGpt, 3, 4, 64, 32, 300, "init.safetensors"};
  spec.data = {"train.bin", "val.bin", 0.25, DataFormat::kTokens};
  spec.train = {7, 3, 5, 1.5e-3, 1e-5, 9, 0.01, {0.8, 0.99}, 0.5, 4242, 11, 6};
  spec.precision = {
      DType::kF16,
      LossScaleMode::kStatic,
      1024.0,
      3.0,
      0.25,
      77,
      2,
      0.125,
      131072.0,
      OnMinScale::kContinue,
      true,
      25,
      Fp8Spec{Fp8FormatChoice::kE4M3, Fp8Scaling::kMxfp8, 16, AmaxCompute::kMostRecent, 3, false}};
  spec.zero = {3, OffloadTarget::kCpu, OffloadTarget::kCpu, 8, ReduceDtype::kFp32};
  spec.resources = {4, BackendChoice::kCuda};
  spec.scheduling = {7, false};
  spec.checkpoint = {13, 2, "/ckpt"};
  spec.retries = {9};
  return spec;
}

TEST(JobSpecJson, EveryFieldRoundTripsExactly) {
  const JobSpec spec = unusual_spec();
  EXPECT_EQ(job_spec_from_json(parse_json(dump_json(job_spec_to_json(spec)))), spec);
  EXPECT_EQ(job_spec_from_json(job_spec_to_json(JobSpec{})), JobSpec{});  // optionals unset
}

// A key left to the planner travels as "auto" and comes back as such.
TEST(JobSpecJson, AutoKeysRoundTripAsAuto) {
  JobSpec spec = unusual_spec();
  spec.zero.stage = 0;
  spec.auto_keys = {true, false, false, true};
  const Json json = job_spec_to_json(spec);
  EXPECT_EQ(json["zero"]["stage"], "auto");
  EXPECT_EQ(json["train"]["activation_checkpointing"], "auto");
  EXPECT_EQ(json["zero"]["offload_optimizer"], "cpu");
  spec.train.activation_checkpointing = ActivationCheckpointing::kNone;  // what "auto" reads as
  EXPECT_EQ(job_spec_from_json(parse_json(dump_json(json))), spec);
}

TEST(JobSpecJson, SpellsKeysAndValuesAsTheYamlDoes) {
  const Json json = job_spec_to_json(unusual_spec());
  EXPECT_EQ(json["precision"]["compute"], "fp16");
  EXPECT_EQ(json["precision"]["loss_scale"], "static");
  EXPECT_EQ(json["zero"]["offload_params"], "cpu");
  EXPECT_EQ(json["train"]["betas"], Json::array({0.8, 0.99}));
  EXPECT_TRUE(job_spec_to_json(JobSpec{})["data"]["val"].is_null());
  EXPECT_EQ(json["precision"]["fp8"]["scaling"], "mxfp8");
  EXPECT_EQ(json["precision"]["fp8"]["amax_compute"], "most_recent");
  for_each_section_field([&](std::string_view section, std::string_view key, auto, auto) {
    EXPECT_TRUE(json[std::string(section)].contains(std::string(key))) << section << "." << key;
  });
}

// The message job_spec_from_json refuses `json` with.
std::string refusal(const Json& json) {
  try {
    job_spec_from_json(json);
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "accepted";
}

TEST(JobSpecJson, RefusesMissingUnknownAndMistypedKeysNamingThem) {
  const Json good = job_spec_to_json(unusual_spec());
  Json json = good;
  json["train"].erase("steps");
  EXPECT_NE(refusal(json).find("missing \"train.steps\""), std::string::npos) << refusal(json);
  json = good;
  json["train"]["warmup_step"] = 3;
  EXPECT_NE(refusal(json).find("unknown key \"train.warmup_step\""), std::string::npos);
  json = good;
  json["precison"] = Json::object();
  EXPECT_NE(refusal(json).find("unknown key \"precison\""), std::string::npos);
  json = good;
  json["precision"]["fp8"]["histroy"] = 4;
  EXPECT_NE(refusal(json).find("unknown key \"precision.fp8.histroy\""), std::string::npos)
      << refusal(json);
  json = good;
  json["precision"]["fp8"].erase("margin");
  EXPECT_NE(refusal(json).find("\"precision.fp8.margin\""), std::string::npos) << refusal(json);
  json = good;
  json["train"]["steps"] = 2.5;
  EXPECT_NE(refusal(json).find("\"train.steps\" must be an integer"), std::string::npos);
  json = good;
  json["zero"]["offload_optimizer"] = "gpu";
  EXPECT_NE(refusal(json).find("\"zero.offload_optimizer\" must be one of none, cpu"),
            std::string::npos)
      << refusal(json);
  json = good;
  json["precision"]["compute"] = "int8";
  EXPECT_NE(refusal(json).find("\"precision.compute\""), std::string::npos);
  json = good;
  json["train"]["betas"] = Json::array({0.9});
  EXPECT_NE(refusal(json).find("\"train.betas\" must be a list of two numbers"), std::string::npos);
  json = good;
  json["precision"]["tf32"] = 1;
  EXPECT_NE(refusal(json).find("\"precision.tf32\" must be true or false"), std::string::npos);
  json = good;
  json["model"] = "big";
  EXPECT_NE(refusal(json).find("\"model\" must be an object"), std::string::npos) << refusal(json);
  EXPECT_NE(refusal(Json::array()).find("must be an object"), std::string::npos);
}

}  // namespace
}  // namespace mixtrain::config
