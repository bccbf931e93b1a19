// Built by the consumer projects in tests/cmake/: a user's program that only includes ptq and
// links ptq::ptq. It must run the best kernel set of the CPU (PTQ_EXPECTED_KERNELS, read from
// the CPU's flags by tests/cmake/CMakeLists.txt) without any flag of its own.
#include <ptq/ptq.hpp>
#include <ptq/version.hpp>

#include <cstdio>
#include <cstring>

int main() {
  std::printf("ptq %s (%d)\n", PTQ_VERSION_STRING, PTQ_VERSION);
  if (PTQ_VERSION != PTQ_VERSION_MAJOR * 10000 + PTQ_VERSION_MINOR * 100 + PTQ_VERSION_PATCH) {
    std::fprintf(stderr, "PTQ_VERSION does not match its parts\n");
    return 1;
  }
  if (std::strcmp(PTQ_VERSION_STRING, PTQ_EXPECTED_VERSION) != 0) {
    std::fprintf(stderr, "expected ptq %s\n", PTQ_EXPECTED_VERSION);
    return 1;
  }
  const char* ran = ptq::kernels::default_kernels().arch_name;
  std::printf("kernels: %s\n", ran);
  if (PTQ_EXPECTED_KERNELS[0] != '\0' && std::strcmp(ran, PTQ_EXPECTED_KERNELS) != 0) {
    std::fprintf(stderr, "ran the %s kernels, expected %s on this CPU\n", ran,
                 PTQ_EXPECTED_KERNELS);
    return 1;
  }
  // And they compute: the min/max of a small batch.
  const float x[8] = {-1.0f, -0.5f, 0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 2.0f};
  const ptq::kernels::minmax_result mm = ptq::kernels::default_kernels().minmax(x, 8);
  if (mm.min != -1.0f || mm.max != 2.0f) {
    std::fprintf(stderr, "minmax gave [%g, %g], expected [-1, 2]\n", static_cast<double>(mm.min),
                 static_cast<double>(mm.max));
    return 1;
  }
  return 0;
}
