// ptq — post-training quantization calibration (header-only, C++17).
// SPDX-License-Identifier: Apache-2.0
//
// Library version. This header is the single source of truth: the top-level CMakeLists.txt
// reads the three PTQ_VERSION_* macros below and refuses to configure if they disagree with
// project(VERSION ...).
#ifndef PTQ_VERSION_HPP
#define PTQ_VERSION_HPP

#define PTQ_VERSION_MAJOR 0
#define PTQ_VERSION_MINOR 1
#define PTQ_VERSION_PATCH 0

/// Single integer for preprocessor comparisons: major * 10000 + minor * 100 + patch.
#define PTQ_VERSION (PTQ_VERSION_MAJOR * 10000 + PTQ_VERSION_MINOR * 100 + PTQ_VERSION_PATCH)

#define PTQ_VERSION_STRING "0.1.0"

namespace ptq {

/// The library version as a value, for code that prefers C++ over macros.
struct version_info {
  int major;
  int minor;
  int patch;
  const char* string;
};

/// The version of the headers this translation unit was compiled against.
inline constexpr version_info version{PTQ_VERSION_MAJOR, PTQ_VERSION_MINOR, PTQ_VERSION_PATCH,
                                      PTQ_VERSION_STRING};

}  // namespace ptq

#endif  // PTQ_VERSION_HPP
