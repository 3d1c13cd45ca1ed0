#pragma once
// Fine-tuning a BERT sentence classifier (tfm::SentenceClassifierTask, `tfm bert
// classifier`), as transformers' BertForSequenceClassification is fine-tuned: the
// encoder of a pretrained BERT (a tfm checkpoint or a Hugging Face directory, of any
// head), its pooler where it has one, a classifier on the pooled [CLS] of as many labels
// as the training data names (the checkpoint's own classifier where it already has
// exactly these labels), cross-entropy on each sentence's label. Validation reports the
// accuracy and loss on held-out sentences, and the log names the majority baseline.
#include <ostream>

#include "tfm/training.h"
#include "train/trainer.h"

namespace tfm::training {

tfm::TrainingResult run_sentence_classifier_training(const TrainerOptions& options, const tfm::SentenceClassifierTask& task,
                                                     std::ostream& out);

// AdamW 5e-5 (BERT's paper's fine-tuning range), weight decay 0.01, 100 warm-up steps,
// cosine decay over 3 epochs, runs/classifier.
tfm::TrainingOptions sentence_classifier_training_defaults();

}  // namespace tfm::training
