// The checkpoint directory of `chutney train --checkpoint-dir`: which files belong to which run,
// what may be overwritten or removed (only this run's own checkpoints, never the newest), and
// the epoch-end writer that snapshots the variables and writes them off the training thread.
#pragma once

#include <chutney/checkpoint.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "cli.h"

namespace ctn_cli {

// A new run's id: 16 hex digits from the system's random source. A resumed run keeps the id of
// the checkpoint it resumes, so the files of one training run (however often resumed) share it.
std::string new_run_id();

// The "run_id" metadata of the checkpoint at `path`; "" when the file is not a readable
// checkpoint or has no id (written before ids existed, or by another program).
std::string checkpoint_run_id(const std::string &path);

// DIR/<model>-epochNNN.safetensors
std::string epoch_checkpoint_path(const std::string &dir, const std::string &model, int64_t epoch);

// Creates `dir` if needed (one level, like mkdir) and checks that it is a writable directory:
// a Failure naming the directory otherwise. Called before training starts.
void prepare_checkpoint_dir(const std::string &dir);

// Throws a Failure if this run (id `run_id`) would replace a file at `path` that is not one of
// its own checkpoints: another run's, or anything that is not a checkpoint of `chutney train`.
void ensure_replaceable(const std::string &path, const std::string &run_id);

// `flag`'s output file `path` (--json, --plot) can be written: an existing file that is not a
// directory and is writable, or a new name in an existing writable directory. Else a Failure
// naming the flag and the path. Checked before training so a run does not fail at its end.
void check_output_file(const std::string &flag, const std::string &path);

// Files DIR/.NAME.tmp-PID-N of checkpoint writers that no longer run are removed (and said).
void remove_stale_temporaries(const std::string &dir);

// --keep-last: of this run's epoch checkpoints in `dir` (run id `run_id`), keeps the newest
// `keep` epochs, the best epoch (`best_epoch`, 0 if unknown) and `just_written`; removes the
// others, printing each removed file. Files of other runs and unidentified files are never
// touched. keep 0 keeps everything.
void apply_retention(const std::string &dir, const std::string &model, int64_t keep, int64_t best_epoch,
                     const std::string &run_id, const std::string &just_written);

// The epoch-end checkpoint: the variables are copied at once (start), the file is written on a
// thread of its own, and finish() waits for it and reports (a Failure if the write failed). So
// rank 0 of a data-parallel job does not keep the other ranks waiting in the next collective
// while it writes, and a single-process run can call finish() at once.
class CheckpointWriter {
 public:
  CheckpointWriter() = default;
  CheckpointWriter(const CheckpointWriter &) = delete;
  CheckpointWriter &operator=(const CheckpointWriter &) = delete;
  ~CheckpointWriter();

  void start(ctn_plan *plan, const std::vector<std::string> &names, const std::vector<ctn_node> &nodes,
             const std::string &path, const std::string &metadata_json);
  // Waits for the write started last (if any); returns its path ("" if none was pending).
  std::string finish();

 private:
  std::thread thread_;
  std::string path_, error_;
  bool pending_ = false;
};

}  // namespace ctn_cli
