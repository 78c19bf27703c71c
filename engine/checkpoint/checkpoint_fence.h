// Why: after a partition a rank of a superseded attempt may still be
// training and checkpointing into the job's directory while the restarted
// attempt writes there too (measured: the new attempt died on "step 3500
// already exists" while the stale rank went on committing and pruning).
// Each attempt therefore claims the directory with its epoch (the attempt
// number) as a file DIR/epoch-N, never rewritten, so the newest claim only
// ever rises; a writer commits and prunes
// only while no newer epoch has claimed the directory (a step that a
// superseded writer committed is replaced: remove_checkpoint).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace mixtrain {

// The newest epoch that claimed `dir` (the largest N of DIR/epoch-N); 0
// when none did.
int64_t checkpoint_epoch(const std::filesystem::path& dir);

// Claims `dir` (created if missing) for `epoch` >= 1 by creating
// DIR/epoch-N (and fsyncing DIR), then removes the temporary directories
// of earlier epochs (remove_stale_checkpoint_temporaries: superseded
// attempts cannot commit them); claiming again is harmless, and every rank
// of the attempt may claim at once. Throws EngineError(kFailedPrecondition)
// "superseded" when a newer epoch claimed it (before or while claiming),
// kInternal for I/O errors.
void claim_checkpoint_epoch(const std::filesystem::path& dir, int64_t epoch);

// Throws EngineError(kFailedPrecondition) naming `action` and both epochs
// when a newer epoch than `epoch` claimed `dir`; epoch 0 (no fencing, a
// single `mixtrain train` run) never throws.
void check_checkpoint_epoch(const std::filesystem::path& dir, int64_t epoch,
                            const std::string& action);

}  // namespace mixtrain
