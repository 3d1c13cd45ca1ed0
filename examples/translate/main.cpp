// Translates the sentences given as arguments with a tfm translation checkpoint:
//   translate runs/multi30k/best.safetensors "Ein Hund rennt durch den Schnee."
#include <tfm/translator.h>

#include <exception>
#include <iostream>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: translate CHECKPOINT SENTENCE...\n";
    return 2;
  }
  try {
    tfm::Translator translator(argv[1]);
    for (const tfm::Translation& t : translator.translate({argv + 2, argv + argc})) std::cout << t.hypotheses[0] << "\n";
  } catch (const std::exception& e) {
    std::cerr << "translate: " << e.what() << "\n";
    return 1;
  }
}
