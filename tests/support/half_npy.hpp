// The bytes of a 1-D float16 .npy file (ptq writes only float32), for the tests that read one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ptq_test {

/// A version-1.0 '<f2' .npy file of `h` (binary16 bits), its header padded to 128 bytes.
inline std::string half_npy_bytes(const std::vector<std::uint16_t>& h) {
  std::string dict =
      "{'descr': '<f2', 'fortran_order': False, 'shape': (" + std::to_string(h.size()) + ",), }";
  dict.append(128 - 10 - dict.size() - 1, ' ');
  dict += '\n';
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(dict.size());
  bytes += '\0';
  bytes += dict;
  bytes.append(reinterpret_cast<const char*>(h.data()), 2 * h.size());
  return bytes;
}

}  // namespace ptq_test
