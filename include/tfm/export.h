#pragma once
// TFM_API marks what libtfm.so exports: the classes and functions of include/tfm. The
// library is compiled with hidden visibility, so nothing else of tfm's (nor the
// standard library's templates it instantiates) is part of its ABI.
#define TFM_API __attribute__((visibility("default")))
