// `tfm score`: corpus BLEU and chrF of a translation file against references.
#include <iomanip>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "data/text.h"
#include "eval/metrics.h"
#include "tensor/error.h"

namespace tfm::cli {

void add_score_command(CLI::App& app, int&) {
  auto paths = std::make_shared<std::pair<std::string, std::string>>();
  CLI::App* cmd = app.add_subcommand("score", "Score translations: BLEU (sacreBLEU's default: 13a, cased, exp smoothing) and chrF2");
  cmd->add_option("--hyp", paths->first, "Translations, one a line, plain or .gz ('-': standard input)")->required();
  cmd->add_option("--ref", paths->second, "References, line-aligned")->required()->check(CLI::ExistingFile);
  cmd->callback([paths] {
    std::vector<std::string> hyp = data::read_lines(paths->first), ref = data::read_lines(paths->second);
    TFM_CHECK(hyp.size() == ref.size(), paths->first << " has " << hyp.size() << " lines but " << paths->second << " has " << ref.size());
    // chrF2 on BLEU's 0-100 scale and with its two decimals.
    std::cout << eval::corpus_bleu(hyp, ref).format() << "\nchrF2 = " << std::fixed << std::setprecision(2) << eval::corpus_chrf(hyp, ref) << "\n";
  });
}

}  // namespace tfm::cli
