// Trains a small character language model on a text file, then continues a prompt with it:
//   train_lm ../shared/data/tinyshakespeare/input.txt runs/example 300 "ROMEO:"
#include <tfm/generator.h>
#include <tfm/training.h>

#include <exception>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: train_lm TEXT OUT_DIR STEPS PROMPT\n";
    return 2;
  }
  try {
    tfm::LanguageModelTask task;
    task.data.text = argv[1];
    task.model = R"({"layers": 2, "d_model": 64, "heads": 2, "max_len": 32})";  // over the task's defaults
    task.sample_tokens = 0;
    tfm::TrainingOptions options = tfm::LanguageModelTask::training_defaults();
    options.out_dir = argv[2];
    options.max_steps = std::stoll(argv[3]);
    options.schedule.warmup = options.max_steps / 10;  // the defaults' 100 suit their 2,000 steps
    const tfm::TrainingResult result = tfm::train(options, task);
    std::cout << "best " << result.score_name << " " << result.best_score << " after " << result.steps << " steps\n";
    tfm::Generator generator(options.out_dir + "/best.safetensors");
    std::cout << argv[4] << generator.generate(argv[4], {.max_new_tokens = 40, .temperature = 0.0f}) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "train_lm: " << e.what() << "\n";
    return 1;
  }
}
