// Why: see local_command.h.
#include "client/local_command.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "client/coordinator_client.h"
#include "client/job_follower.h"
#include "jobspec/job_spec_yaml.h"
#include "client/job_view.h"
#include "client/local_cluster.h"
#include "client/submit_command.h"
#include "launch/summary_file.h"

namespace mixtrain::cli {
namespace {

constexpr const char* kWho = "mixtrain local";

int g_signal_pipe = -1;

// Async-signal-safe: wakes the SignalWatcher thread.
void on_stop_signal(int) {
  const char byte = 1;
  [[maybe_unused]] const ssize_t written = write(g_signal_pipe, &byte, 1);
}

// Turns SIGINT and SIGTERM into stopping the cluster (from a thread, since
// stopping waits for the children) for as long as it lives.
class SignalWatcher {
 public:
  SignalWatcher() {
    if (pipe(fds_) != 0) return;
    g_signal_pipe = fds_[1];
    struct sigaction action = {};
    action.sa_handler = on_stop_signal;
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
    thread_ = std::thread([this] {
      char byte = 0;
      while (read(fds_[0], &byte, 1) == 1 && byte == 1) {
        interrupted_ = true;
        if (LocalCluster* cluster = cluster_.load()) cluster->stop();
      }
    });
  }

  ~SignalWatcher() {
    if (!thread_.joinable()) return;
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    const char byte = 0;
    [[maybe_unused]] const ssize_t written = write(fds_[1], &byte, 1);
    thread_.join();
    close(fds_[0]);
    close(fds_[1]);
  }

  // The cluster a signal stops from now on.
  void watch(LocalCluster* cluster) {
    cluster_ = cluster;
    if (interrupted_ && cluster != nullptr) cluster->stop();
  }
  bool interrupted() const { return interrupted_; }

 private:
  int fds_[2] = {-1, -1};
  struct sigaction old_int_ = {};
  struct sigaction old_term_ = {};
  std::atomic<LocalCluster*> cluster_{nullptr};
  std::atomic<bool> interrupted_{false};
  std::thread thread_;
};

// The job's checkpoint directory under the coordinator's checkpoint root:
// ROOT/<id> or ROOT/<name>, else the only directory there; empty if none.
std::filesystem::path find_checkpoint_dir(const std::filesystem::path& root, const v1::Job& job) {
  for (const std::string& leaf : {job.id(), job.name()}) {
    if (std::filesystem::is_directory(root / leaf)) return root / leaf;
  }
  std::vector<std::filesystem::path> dirs;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(root, error)) {
    if (entry.is_directory()) dirs.push_back(entry.path());
  }
  return dirs.size() == 1 ? dirs.front() : std::filesystem::path();
}

// Copies the job's checkpoints to ./checkpoints/<name> (where `mixtrain
// train` leaves them) and says so; false after printing why.
bool keep_checkpoints(const LocalCluster& cluster, const v1::Job& job, std::ostream& info,
                      std::ostream& err) {
  const std::filesystem::path source = find_checkpoint_dir(cluster.checkpoint_root(), job);
  if (source.empty()) {
    err << kWho << ": the job left no checkpoint under " << cluster.checkpoint_root().string()
        << "\n";
    return false;
  }
  const std::filesystem::path target = std::filesystem::path("checkpoints") / job.name();
  std::error_code error;
  std::filesystem::create_directories(target, error);
  std::filesystem::copy(
      source, target,
      std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing,
      error);
  if (error) {
    err << kWho << ": cannot copy the checkpoints " << source.string() << " to " << target.string()
        << ": " << error.message() << "\n";
    return false;
  }
  info << "checkpoints: " << target.string() << " (try: mixtrain sample " << target.string()
       << ")\n";
  return true;
}

}  // namespace

int run_local_command(const LocalCommandArgs& args, OutputFormat format, bool terminal,
                      std::ostream& out, std::ostream& err) {
  std::ostream& info = format == OutputFormat::kJson ? err : out;
  const std::filesystem::path spec_path = std::filesystem::absolute(args.spec_path);
  jobspec::JobSpecOptions spec_options;
  spec_options.check_files = true;
  spec_options.base_dir = spec_path.parent_path();
  const jobspec::JobSpecResult loaded = jobspec::load_job_spec_file(args.spec_path, spec_options);
  if (!loaded.ok()) {
    for (const jobspec::JobSpecError& error : loaded.errors) err << error.to_string() << "\n";
    return kExitUsage;
  }
  const int needed = static_cast<int>(loaded.spec->resources.workers);
  const int workers = args.workers.value_or(needed);
  if (workers < needed) {
    err << kWho << ": " << args.spec_path << " asks for " << needed
        << " workers (resources.workers), --workers starts " << workers << "\n";
    return kExitUsage;
  }
  if (args.summary_json && !launch::summary_path_usable(*args.summary_json, kWho, err))
    return kExitUsage;

  SignalWatcher signals;
  LocalClusterOptions cluster_options;
  cluster_options.workers = workers;
  cluster_options.data_root = spec_path.parent_path();
  cluster_options.http_listen = args.http;
  if (args.keep_state) cluster_options.state_dir = *args.keep_state;
  std::unique_ptr<LocalCluster> cluster = LocalCluster::start(cluster_options, err);
  if (cluster == nullptr) return kExitJobFailed;
  signals.watch(cluster.get());
  info << "local cluster: coordinator " << cluster->address() << " (http port "
       << cluster->http_port() << "), " << workers << " worker(s), state in "
       << cluster->state_dir().string() << "\n";

  ServiceOptions service;
  service.coordinator = cluster->address();
  service.token = cluster->token();
  service.format = format;
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::connect(service);
  std::string id;
  int code = kExitJobFailed;
  if (signals.interrupted()) {
    err << kWho << ": interrupted while starting the local cluster\n";
  } else if (client.ok()) {
    code = submit_job_file(*client, spec_path, {}, id, err);
  }
  FollowResult followed;
  if (code == kExitOk) {
    info << "submitted " << id << "\n";
    FollowOptions follow;
    follow.format = format;
    follow.terminal = terminal;
    follow.stop_reason = [&]() -> std::string {
      if (signals.interrupted()) return "interrupted: stopped the local cluster";
      return cluster->exited_process();
    };
    followed = follow_job(*client, id, follow, out, err);
    code = followed.exit_code;
  }
  signals.watch(nullptr);
  cluster->stop();

  const nlohmann::ordered_json summary =
      followed.job ? parse_summary(followed.job->summary_json()) : nullptr;
  if (args.summary_json && !summary.is_null() &&
      !launch::write_summary_file(*args.summary_json, summary.dump(2), kWho, err)) {
    code = kExitJobFailed;
  }
  if (code == kExitOk && !keep_checkpoints(*cluster, *followed.job, info, err)) {
    code = kExitJobFailed;
  }
  const bool keep = args.keep_state || (code != kExitOk && !signals.interrupted());
  if (keep) {
    err << kWho << ": kept " << cluster->state_dir().string()
        << " (coordinator.log, worker-N.log, mixtrain.db, checkpoints/)\n";
  } else {
    std::error_code error;
    std::filesystem::remove_all(cluster->state_dir(), error);
  }
  return code;
}

}  // namespace mixtrain::cli
