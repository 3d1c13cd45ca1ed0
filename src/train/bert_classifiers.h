#pragma once
// Fine-tuning BERT classifiers as transformers fine-tunes BertForSequenceClassification
// and BertForTokenClassification: the encoder of a pretrained BERT (a tfm checkpoint or
// a Hugging Face directory, of any head), a classifier of as many labels as the training
// data names (the checkpoint's own where it already has exactly these labels), cross-
// entropy on each sentence's label (tfm::SentenceClassifierTask, `tfm bert classifier`:
// on the pooled [CLS], the pooler kept or made) or on each word's first piece
// (tfm::TokenClassifierTask, `tfm bert tagger`: the other pieces and [CLS]/[SEP] ignored).
// Validation reports accuracy (sentences: against the majority baseline the log names)
// or entity F1 (words: seqeval's, by decode::group_entities) and the loss.
#include <ostream>

#include "tfm/training.h"
#include "train/trainer.h"

namespace tfm::training {

tfm::TrainingResult run_sentence_classifier_training(const TrainerOptions& options, const tfm::SentenceClassifierTask& task,
                                                     std::ostream& out);
tfm::TrainingResult run_token_classifier_training(const TrainerOptions& options, const tfm::TokenClassifierTask& task, std::ostream& out);

// AdamW 5e-5 (BERT's paper's fine-tuning range), weight decay 0.01, 100 warm-up steps,
// cosine decay over 3 epochs, runs/classifier (runs/tagger).
tfm::TrainingOptions sentence_classifier_training_defaults();
tfm::TrainingOptions token_classifier_training_defaults();

// Entity F1 as seqeval computes it (its default, conlleval's): the entities of the gold
// and predicted label sequences (decode::group_entities), an entity right where its type
// and words are; 2PR / (P + R) in percent, 0 where there are none. Sums over sentences.
struct EntityCounts {
  int64_t gold = 0, predicted = 0, correct = 0;
  void add(const std::vector<std::string>& gold_labels, const std::vector<std::string>& predicted_labels);
  double f1() const;
};

}  // namespace tfm::training
