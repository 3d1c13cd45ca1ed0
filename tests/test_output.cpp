// Where tfm's output goes: files written through symlinks and FIFOs without replacing
// them, directories refused, no temporary file left behind on any failure, and
// write errors (standard output included) reported with exit status 1.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <thread>

#include "io/output_file.h"
#include "support/fixture.h"
#include "support/process.h"

namespace tfm {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::read_file;
using testing::TempDir;
using testing::write_file;

void write_through(const std::string& path, const std::string& bytes) { io::write_file_atomic(path, bytes); }

TEST(OutputFile, ReplacesARegularFileAndLeavesNoTemporaryFile) {
  TempDir dir;
  write_file(dir.path("a.txt"), "old");
  write_through(dir.path("a.txt"), "new");
  EXPECT_EQ(read_file(dir.path("a.txt")), "new");
  write_through(dir.path("b.txt"), "fresh");
  EXPECT_EQ(read_file(dir.path("b.txt")), "fresh");
  EXPECT_FALSE(fs::exists(dir.path("a.txt.tmp")));
  EXPECT_FALSE(fs::exists(dir.path("b.txt.tmp")));
}

TEST(OutputFile, WritesThroughSymlinksAndKeepsThem) {
  TempDir dir;
  fs::create_directories(dir.path("elsewhere"));
  write_file(dir.path("elsewhere/real.txt"), "precious");
  fs::create_symlink("elsewhere/real.txt", dir.path("hop.txt"));  // relative to the link's directory
  fs::create_symlink("hop.txt", dir.path("link.txt"));            // a chain of two links
  write_through(dir.path("link.txt"), "new");
  EXPECT_TRUE(fs::is_symlink(dir.path("link.txt")));
  EXPECT_TRUE(fs::is_symlink(dir.path("hop.txt")));
  EXPECT_EQ(read_file(dir.path("elsewhere/real.txt")), "new");
  EXPECT_FALSE(fs::exists(dir.path("elsewhere/real.txt.tmp")));

  fs::create_symlink("not-yet.txt", dir.path("dangling.txt"));  // `echo > dangling` creates the target too
  write_through(dir.path("dangling.txt"), "created");
  EXPECT_TRUE(fs::is_symlink(dir.path("dangling.txt")));
  EXPECT_EQ(read_file(dir.path("not-yet.txt")), "created");
}

TEST(OutputFile, WritesAFifoDirectly) {
  TempDir dir;
  const std::string fifo = dir.path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = read_file(fifo); });
  write_through(fifo, "through the pipe");
  reader.join();
  EXPECT_EQ(got, "through the pipe");
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_FALSE(fs::exists(fifo + ".tmp"));
}

TEST(OutputFile, RefusesADirectoryAndNamesTheFileAndTheReason) {
  TempDir dir;
  fs::create_directories(dir.path("d"));
  EXPECT_EQ(error_of([&] { write_through(dir.path("d"), "x"); }), "cannot write " + dir.path("d") + ": it is a directory");
  EXPECT_FALSE(fs::exists(dir.path("d.tmp")));
  // No previous file: the message does not claim one is untouched.
  EXPECT_EQ(error_of([&] { write_through(dir.path("missing/x.txt"), "x"); }),
            "cannot write " + dir.path("missing/x.txt") + ": open failed (No such file or directory)");
}

TEST(OutputFile, AbandonedBeforeCommitLeavesThePreviousFileAndNoTemporaryFile) {
  TempDir dir;
  write_file(dir.path("a.txt"), "KEEP");
  {
    io::OutputFile out(dir.path("a.txt"));
    out.write("half of it");
    EXPECT_TRUE(fs::exists(dir.path("a.txt.tmp")));
  }
  EXPECT_EQ(read_file(dir.path("a.txt")), "KEEP");
  EXPECT_FALSE(fs::exists(dir.path("a.txt.tmp")));
}

TEST(OutputFile, CreatesDirectoriesOrSaysWhyNot) {
  TempDir dir;
  io::create_directories(dir.path("a/b/c"));
  EXPECT_TRUE(fs::is_directory(dir.path("a/b/c")));
  write_file(dir.path("file"), "x");
  EXPECT_EQ(error_of([&] { io::create_directories(dir.path("file")); }),
            "cannot use " + dir.path("file") + " as a directory: a file of that name exists");
  EXPECT_EQ(error_of([&] { io::create_directories(dir.path("file/sub")); }).rfind("cannot create the directory " + dir.path("file/sub") + " (", 0),
            0u);
}

// The first bytes of every PNG file: an earlier picture, which a drawing may replace.
const std::string kPngSignature = "\x89PNG\r\n\x1a\n";

// A metrics file for `tfm plot`, the cheapest command that writes a file.
std::string metrics(const TempDir& dir) {
  write_file(dir.path("metrics.jsonl"), "{\"step\":1,\"train_loss\":2.5}\n{\"step\":2,\"train_loss\":2.0,\"valid_loss\":2.2}\n");
  return dir.path("metrics.jsonl");
}

TEST(OutputCli, PlotWritesThroughASymlinkAndAFifo) {
  TempDir dir;
  write_file(dir.path("real.png"), kPngSignature + "old");
  fs::create_symlink("real.png", dir.path("link.png"));
  testing::CliResult r = testing::run_tfm("plot " + metrics(dir) + " --out " + dir.path("link.png"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::is_symlink(dir.path("link.png")));
  EXPECT_GT(read_file(dir.path("real.png")).size(), 100u);

  const std::string fifo = dir.path("fifo.png");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  testing::CliResult f = testing::run_command("cat " + fifo + " > " + dir.path("got.png") + " & " + TFM_BINARY + " plot " + metrics(dir) +
                                              " --out " + fifo + "; wait");
  ASSERT_EQ(f.code, 0) << f.output;
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(read_file(dir.path("got.png")).substr(1, 3), "PNG");
}

TEST(OutputCli, ADirectoryOrAFileTooLargeIsAClearErrorAndLeavesNoTemporaryFile) {
  TempDir dir;
  fs::create_directories(dir.path("d"));
  testing::CliResult d = testing::run_tfm("plot " + metrics(dir) + " --out " + dir.path("d"));
  EXPECT_EQ(d.code, 1);
  EXPECT_EQ(d.output, "tfm: error: cannot write " + dir.path("d") + ": it is a directory\n");
  EXPECT_FALSE(fs::exists(dir.path("d.tmp")));

  // No `trap '' XFSZ`: tfm itself must turn the file-size limit into an error, not die of SIGXFSZ.
  write_file(dir.path("p.png"), kPngSignature + "KEEP");
  testing::CliResult big = testing::run_command("bash -c 'ulimit -f 1; exec " + std::string(TFM_BINARY) + " plot " + metrics(dir) +
                                                " --out " + dir.path("p.png") + "'");
  EXPECT_EQ(big.code, 1) << big.output;
  EXPECT_NE(big.output.find("tfm: error: cannot write " + dir.path("p.png") +
                            ": write failed (File too large); the previous file is untouched"),
            std::string::npos)
      << big.output;
  EXPECT_EQ(read_file(dir.path("p.png")), kPngSignature + "KEEP");
  EXPECT_FALSE(fs::exists(dir.path("p.png.tmp")));
}

// A drawing replaces an earlier picture, never another kind of file: `tfm plot m.jsonl
// -o m.jsonl` once replaced the metrics with their plot, `tfm attention -o` a checkpoint.
// Refused before any work; an empty file and a new one take the picture.
TEST(OutputCli, ADrawingNeverReplacesAnotherKindOfFile) {
  TempDir dir;
  const std::string m = metrics(dir), kept = read_file(m);
  testing::CliResult r = testing::run_tfm("plot " + m + " -o " + m);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find(m + ": exists and is not a PNG picture; tfm replaces only an earlier picture (give another --output)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(read_file(m), kept);
  write_file(dir.path("empty.png"), "");
  for (const char* name : {"empty.png", "new.png", "new.png"}) {  // (new.png twice: the second time over the first picture)
    testing::CliResult ok = testing::run_tfm("plot " + m + " -o " + dir.path(name));
    EXPECT_EQ(ok.code, 0) << ok.output;
    EXPECT_EQ(read_file(dir.path(name)).substr(0, 8), kPngSignature);
  }
}

// tfm vocab never replaces a vocabulary that checkpoints may have been trained with,
// unless told to (--force).
TEST(OutputCli, AVocabularyIsReplacedOnlyWithForce) {
  TempDir dir;
  write_file(dir.path("text.txt"), "a b c d e f g h\ni j k l m n o p\n");
  write_file(dir.path("v.model"), "KEEP");
  const std::string vocab = "vocab --text " + dir.path("text.txt") + " --size 24 --out " + dir.path("v");
  testing::CliResult r = testing::run_tfm(vocab);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_EQ(r.output, "tfm: error: " + dir.path("v.model") + ": exists (checkpoints trained with it refuse another vocabulary); --force "
                      "replaces it, or give another --out\n");
  EXPECT_EQ(read_file(dir.path("v.model")), "KEEP");
  testing::CliResult forced = testing::run_tfm(vocab + " --force");
  EXPECT_EQ(forced.code, 0) << forced.output;
  EXPECT_NE(read_file(dir.path("v.model")), "KEEP");
}

// stdout to /dev/full (safe: the shell opens it, tfm only writes): the lost output is an error.
TEST(OutputCli, AFailedWriteToStandardOutputIsAnError) {
  TempDir dir;
  write_file(dir.path("hyp.txt"), "a cat sits\n");
  for (const std::string args : {"score --hyp " + dir.path("hyp.txt") + " --ref " + dir.path("hyp.txt"),
                                 "info " + testing::fixture_path("model_post_relu.safetensors"), std::string("--help"), std::string("--version"),
                                 std::string("translate --help")}) {
    testing::CliResult r = testing::run_command("{ " + std::string(TFM_BINARY) + " " + args + " > /dev/full; }");
    EXPECT_EQ(r.code, 1) << args;
    EXPECT_EQ(r.output, "tfm: error: writing stdout: No space left on device\n") << args;
  }
  // A failure long before the end (a training run's first line), whose errno the run's
  // file work has overwritten since, is told without a stale reason ("No such file").
  testing::CliResult train = testing::run_command("{ " + std::string(TFM_BINARY) + " train --steps 2 --out " + dir.path("run") + " > /dev/full; } 2>&1 | tail -1");
  EXPECT_EQ(train.output, "tfm: error: writing stdout: a write failed (a full disk, a closed pipe or a file-size limit)\n");
}

TEST(OutputCli, TrainOutThatIsAFileIsAClearError) {
  TempDir dir;
  write_file(dir.path("tiny.json"), "{}");
  testing::CliResult r = testing::run_tfm("train --steps 1 --out " + dir.path("tiny.json"));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.output, "tfm: error: cannot use " + dir.path("tiny.json") + " as a directory: a file of that name exists\n");
}

}  // namespace
}  // namespace tfm
