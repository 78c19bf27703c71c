// Why: implementation of `mixtrain plan` (plan_command.h).
#include "client/plan_command.h"

#include <cstdio>

#include "client/text_table.h"
#include "engine/common/byte_size.h"
#include "engine/common/error.h"
#include "engine/common/machine_memory.h"
#include "engine/config/job_spec_fields.h"
#include "engine/plan/plan_alternatives.h"
#include "engine/train/train_summary.h"
#include "jobspec/job_spec_yaml.h"

namespace mixtrain::cli {
namespace {

using plan::MemoryPlan;
using plan::PlanAlternative;

// The plan's figures in the summary's memory_bytes form.
MemoryReport as_report(const MemoryPlan& plan) {
  MemoryReport report;
  for (int p = 0; p < kNumMemoryPools; ++p) {
    const auto pool = static_cast<MemoryPool>(p);
    for (int c = 0; c < kNumMemoryCategories; ++c)
      report.peak[p][c] = static_cast<size_t>(plan.at(pool, static_cast<MemoryCategory>(c)));
    report.peak_total[p] = static_cast<size_t>(plan.peak(pool));
  }
  return report;
}

// The plan's figures beside memory_bytes: per-step costs, the runtime's
// device bytes.
Json figures_json(const MemoryPlan& plan) {
  Json out = Json::object();
  out["comm_elements_per_step"] = plan.comm_elements_per_step;
  out["recompute_flops_per_step"] = plan.recompute_flops_per_step;
  out["host_traffic_bytes_per_step"] = plan.host_traffic_bytes_per_step;
  out["device_runtime_bytes"] = plan.device_runtime;
  return out;
}

void print_table(const config::JobSpec& spec, const plan::PlanTarget& target,
                 const MemoryPlan& plan, std::optional<plan::MemoryBudget> budget,
                 const std::string& budget_from, const std::vector<PlanAlternative>& alternatives,
                 std::ostream& out) {
  out << "plan for " << spec.name << ": " << target.world_size << " worker(s), "
      << (target.cuda ? "cuda" : "cpu") << " backend, "
      << config::compute_dtype_name(spec.precision.compute) << ", "
      << plan::describe(plan::choice_of(spec)) << "\n\n";
  TextTable table({"per rank", "device", "host"});
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    const auto category = static_cast<MemoryCategory>(c);
    table.add_row({memory_category_name(category),
                   format_bytes(static_cast<double>(plan.at(MemoryPool::kDevice, category))),
                   format_bytes(static_cast<double>(plan.at(MemoryPool::kHost, category)))});
  }
  if (target.cuda) {
    table.add_row({"cuda runtime, nccl", format_bytes(static_cast<double>(plan.device_runtime)),
                   format_bytes(0)});
  }
  table.add_row({"peak", format_bytes(static_cast<double>(plan.device_need())),
                 format_bytes(static_cast<double>(plan.peak(MemoryPool::kHost)))});
  table.print(out);
  out << "\nper step: " << format_count(static_cast<double>(plan.comm_elements_per_step))
      << " elements sent, " << format_count(static_cast<double>(plan.recompute_flops_per_step))
      << " FLOP recomputed, " << format_bytes(static_cast<double>(plan.host_traffic_bytes_per_step))
      << " between device and host\n";
  if (!budget) {
    out << "\ngive --memory-per-worker to see whether it fits and what else would\n";
    return;
  }
  const int64_t needed = budget->needed(plan);
  out << "\nmemory per worker: " << format_bytes(static_cast<double>(budget->device)) << " ("
      << budget_from << "): "
      << (budget->fits(plan)
              ? "fits"
              : "does not fit, " + format_bytes(static_cast<double>(needed - budget->device)) +
                    " short")
      << "\n\nchoices that fit, cheapest first (communication, recompute, host traffic):\n";
  if (alternatives.empty()) {
    out << "  none: no ZeRO stage, offload or checkpointing fits; add workers or memory\n";
    return;
  }
  TextTable choices(
      {"choice", "device peak", "host peak", "sent/step", "recompute/step", "host traffic/step"});
  for (const PlanAlternative& a : alternatives) {
    choices.add_row({plan::describe(a.choice),
                     format_bytes(static_cast<double>(a.plan.device_need())),
                     format_bytes(static_cast<double>(a.plan.peak(MemoryPool::kHost))),
                     format_count(static_cast<double>(a.plan.comm_elements_per_step)),
                     format_count(static_cast<double>(a.plan.recompute_flops_per_step)) + " FLOP",
                     format_bytes(static_cast<double>(a.plan.host_traffic_bytes_per_step))});
  }
  choices.print(out);
}

}  // namespace

int run_plan_command(const PlanCommandArgs& args, OutputFormat format, std::ostream& out,
                     std::ostream& err) {
  jobspec::JobSpecOptions options;
  options.overrides = args.overrides;
  if (args.workers)
    options.overrides.push_back("resources.workers=" + std::to_string(*args.workers));
  const jobspec::JobSpecResult loaded = jobspec::load_job_spec_file(args.spec_path, options);
  if (!loaded.ok()) {
    for (const jobspec::JobSpecError& error : loaded.errors) err << error.to_string() << "\n";
    return 2;
  }
  config::JobSpec spec = *loaded.spec;
  std::optional<int64_t> budget;
  std::string budget_from = "--memory-per-worker";
  if (args.memory_per_worker) {
    budget = parse_byte_size(*args.memory_per_worker);
    if (!budget || *budget == 0) {
      err << "mixtrain plan: --memory-per-worker '" << *args.memory_per_worker
          << "' is not a memory size (e.g. 80GiB, 512MiB, 1.5T)\n";
      return 2;
    }
  }
  plan::PlanTarget target = plan::cpu_target(spec.resources.workers);
  target.cuda = spec.resources.backend == config::BackendChoice::kCuda;
  if (!budget && !target.cuda) {
    budget = default_memory_limit(machine_memory_bytes());
    budget_from = "what a worker here registers: this machine's less its reserve";
  }
  // On the CPU backend both pools are the worker's RAM.
  const plan::MemoryBudget limit{.device = budget.value_or(0), .shared = !target.cuda};
  const config::AutoKeys auto_keys = spec.auto_keys;
  try {
    if (auto_keys.any()) {
      const std::string keys = config::auto_key_names(auto_keys);
      if (!budget) {
        err << "mixtrain plan: " << keys
            << " is auto, chosen for the memory of the workers: give --memory-per-worker\n";
        return 2;
      }
      const std::optional<PlanAlternative> chosen = plan::choose_configuration(spec, target, limit);
      if (!chosen) {
        err << "mixtrain plan: no choice of " << keys << " (auto) fits "
            << format_bytes(static_cast<double>(*budget)) << " per worker\n";
        return 2;
      }
      spec = plan::with_choice(spec, chosen->choice);
      if (format != OutputFormat::kJson)
        out << "auto chose " << plan::describe_auto(chosen->choice, auto_keys) << "\n";
    }
    const MemoryPlan plan = plan::plan_memory(spec, target);
    const std::vector<PlanAlternative> alternatives =
        budget ? plan::fitting_alternatives(spec, target, limit) : std::vector<PlanAlternative>{};
    if (format == OutputFormat::kJson) {
      Json j = Json::object();
      j["name"] = spec.name;
      j["workers"] = target.world_size;
      j["backend"] = target.cuda ? "cuda" : "cpu";
      j["choice"] = plan::choice_json(plan::choice_of(spec));
      Json chosen_keys = Json::array();
      config::for_each_auto_key([&](std::string_view section, std::string_view key, auto flag) {
        if (auto_keys.*flag) chosen_keys.push_back(std::string(section) + "." + std::string(key));
      });
      j["auto"] = std::move(chosen_keys);
      j["memory_bytes"] = memory_bytes_json(as_report(plan));
      j.update(figures_json(plan));
      j["memory_per_worker"] = budget ? Json(*budget) : Json(nullptr);
      j["fits"] = budget ? Json(limit.fits(plan)) : Json(nullptr);
      Json list = Json::array();
      for (const PlanAlternative& a : alternatives) {
        Json entry = plan::choice_json(a.choice);
        entry["memory_bytes"] = memory_bytes_json(as_report(a.plan));
        entry.update(figures_json(a.plan));
        list.push_back(std::move(entry));
      }
      j["alternatives"] = std::move(list);
      out << dump_json(j, 2) << "\n";
      return 0;
    }
    print_table(spec, target, plan, budget ? std::optional(limit) : std::nullopt, budget_from,
                alternatives, out);
    return 0;
  } catch (const EngineError& e) {
    err << "mixtrain plan: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace mixtrain::cli
