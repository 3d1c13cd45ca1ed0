#pragma once
// On/off settings read from the environment (TFM_FLASH_ATTENTION,
// TFM_TENSOR_CORE_ATTENTION, TFM_CUDA_PROFILE): one rule for all of them.

namespace tfm {

// `name`'s setting: unset or empty, `otherwise`; 1, true, on or yes (any case), true;
// 0, false, off or no, false; anything else is a clear error naming the variable.
bool env_switch(const char* name, bool otherwise);

}  // namespace tfm
