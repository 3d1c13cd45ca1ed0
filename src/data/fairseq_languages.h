#pragma once
// The language codes of fairseq's multilingual translation models, in the order their
// vocabularies hold them: M2M100's (language_codes "m2m100", as "en"; its tokens
// "__en__"), the WMT21 models' ("wmt21"), NLLB's ("eng_Latn", its own tokens), mBART-50's
// ("en_XX", its own tokens).
#include <string>
#include <vector>

namespace tfm::data {

const std::vector<std::string>& m2m100_languages();
const std::vector<std::string>& wmt21_languages();
const std::vector<std::string>& nllb_languages();
const std::vector<std::string>& mbart50_languages();

}  // namespace tfm::data
