// The Trainer's run directory: claiming it (another run's files are refused, or removed
// with --force), metrics.jsonl (appended, trimmed to the saved steps on resume) and
// curves.png.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/checkpoint.h"
#include "io/output_file.h"
#include "io/safetensors.h"
#include "tensor/error.h"
#include "train/curves.h"
#include "train/trainer.h"

namespace tfm::training {

using nlohmann::json;

namespace {

// The files a training run writes into its directory (the lock file aside).
std::vector<std::string> run_files(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool step_n = name.starts_with("step-") && name.ends_with(".safetensors");
    if (step_n || name == "last.safetensors" || name == "best.safetensors" || name == "metrics.jsonl" || name == "curves.png")
      names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Whether two files hold the same bytes.
bool same_bytes(const std::filesystem::path& a, const std::filesystem::path& b) {
  std::error_code ec;
  if (std::filesystem::file_size(a, ec) != std::filesystem::file_size(b, ec) || ec) return false;
  std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
  std::vector<char> ba(1 << 20), bb(1 << 20);
  while (fa && fb) {
    fa.read(ba.data(), static_cast<std::streamsize>(ba.size()));
    fb.read(bb.data(), static_cast<std::streamsize>(bb.size()));
    if (fa.gcount() != fb.gcount() || !std::equal(ba.begin(), ba.begin() + fa.gcount(), bb.begin())) return false;
  }
  return fa.eof() && fb.eof();
}

}  // namespace

// Another run's files would mix with this one's: its metrics appended to, its best
// model replaced by a worse one. --force removes them, but only once the run has got
// past its own checks (clear_previous_run, from run()): a mistyped flag must not cost
// the previous model. A run that saved no checkpoint (killed before its first) left
// nothing to resume or lose: its metrics are replaced without --force.
void Trainer::claim_out_dir() {
  previous_run_ = run_files(o_.out_dir);
  if (previous_run_.empty()) return;
  for (const std::string& name : previous_run_) {  // (a LoRA run's adapters name their base by its path)
    std::error_code ec;
    TFM_CHECK(o_.init_from.empty() || !std::filesystem::equivalent(std::filesystem::path(o_.out_dir) / name, o_.init_from, ec),
              "--init-from " << o_.init_from << " is one of the files of the run in " << o_.out_dir
                             << ", which this run would replace; fine-tune it into another --out");
  }
  const std::string last = (std::filesystem::path(o_.out_dir) / "last.safetensors").string();
  TFM_CHECK(o_.force || !previous_run_saved_model(), o_.out_dir << " already holds a training run (" << previous_run_names() << "); "
                                 << (std::filesystem::exists(last) ? "continue it with --resume " + last + ", or " : "")
                                 << "start a new one there with --force (which deletes those files) or in another --out");
}

// A resumed run goes on in a directory that holds its own run (the checkpoint is one of
// its files, or a copy of its last.safetensors) or none: the run of another checkpoint
// there would lose its last state and get this run's metrics (without --force, which
// removes them as for a fresh run).
void Trainer::claim_out_dir_to_resume() {
  namespace fs = std::filesystem;
  previous_run_ = run_files(o_.out_dir);
  std::error_code ec;
  const fs::path home = fs::path(o_.resume).parent_path().empty() ? fs::path(".") : fs::path(o_.resume).parent_path();
  const fs::path last = fs::path(o_.out_dir) / "last.safetensors";
  const bool own = fs::equivalent(home, o_.out_dir, ec) || (fs::exists(last) && same_bytes(last, o_.resume));
  if (previous_run_.empty() || own) return previous_run_.clear();
  TFM_CHECK(o_.force || !previous_run_saved_model(), o_.out_dir << " holds another training run (" << previous_run_names() << ") than the one "
                                 << o_.resume << " continues; continue it in its own directory (--out " << home.string()
                                 << ", the default) or in an empty one, or replace that run with --force (which deletes those files)");
}

// A resume from an earlier save (step-20.safetensors of a run that went on to step 60)
// into the same directory would overwrite the later last.safetensors, best.safetensors
// and metrics: refused, unless --force says so.
void Trainer::refuse_rewind() const {
  namespace fs = std::filesystem;
  const fs::path last = fs::path(o_.out_dir) / "last.safetensors";
  std::error_code ec;
  if (o_.force || !fs::exists(last) || fs::equivalent(last, o_.resume, ec)) return;
  int64_t later = -1;
  try {
    const io::SafeTensors header = io::read_safetensors(last.string(), [](const std::string&) { return true; });  // (the metadata alone)
    const io::Checkpoint info = io::checkpoint_info(header, last.string());
    if (!info.train_state.empty()) later = json::parse(info.train_state).at("step").get<int64_t>();
  } catch (const std::exception&) {
    return;  // (not a run's checkpoint: nothing of a later step to lose)
  }
  TFM_CHECK(later <= state_.step, o_.resume << " is step " << state_.step << " of a run that went on to step " << later << " (" << last.string()
                                            << "); resuming from it there would overwrite the later saves and metrics: resume from "
                                            << last.string() << ", resume into another --out, or rewind with --force");
}

bool Trainer::previous_run_saved_model() const {
  return std::any_of(previous_run_.begin(), previous_run_.end(), [](const std::string& n) { return n.ends_with(".safetensors"); });
}

std::string Trainer::previous_run_names() const {
  std::string names;
  for (const std::string& name : previous_run_) names += (names.empty() ? "" : ", ") + name;
  return names;
}

void Trainer::clear_previous_run() {
  if (previous_run_.empty()) return;
  const std::filesystem::path dir(o_.out_dir);
  for (const std::string& name : previous_run_) {
    std::error_code ec;
    std::filesystem::remove(dir / name, ec);
    TFM_CHECK(!ec, "cannot remove " << (dir / name).string() << " (" << ec.message() << ")");
  }
  out_ << (previous_run_saved_model() ? "--force: removed the previous run's " : "removed the files of a run that saved no checkpoint: ")
       << previous_run_names() << " from " << o_.out_dir << "\n";
  previous_run_.clear();
}

// A run killed after logging steps it never saved logs them again once resumed:
// those lines (and one cut short by the kill) are dropped before anything is appended.
void Trainer::trim_metrics() const {
  const std::string path = (std::filesystem::path(o_.out_dir) / "metrics.jsonl").string();
  std::ifstream in(path);
  std::string kept;
  bool dropped = false;
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    const bool keep = j.is_object() && j.contains("step") && j["step"].is_number_integer() && j["step"].get<int64_t>() <= state_.step;
    if (keep) kept += line + "\n";
    dropped |= !keep;
  }
  if (dropped) io::write_file_atomic(path, kept);
}

void Trainer::log_metrics(const std::string& json_line) const {
  if (!root()) return;
  std::ofstream f(std::filesystem::path(o_.out_dir) / "metrics.jsonl", std::ios::app);
  f << json_line << "\n";
}

// A plot that cannot be drawn (no font on a bare machine, a full disk) costs the run its
// picture, not its training: one warning, then the run goes on.
void Trainer::draw_curves() {
  const std::filesystem::path dir(o_.out_dir);
  try {
    plot_training_curves((dir / "metrics.jsonl").string(), (dir / "curves.png").string());
  } catch (const Error& e) {
    if (!curves_failed_) out_ << "warning: " << (dir / "curves.png").string() << " not drawn (" << e.what() << "); training goes on" << std::endl;
    curves_failed_ = true;
  }
}

}  // namespace tfm::training
