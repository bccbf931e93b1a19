// Built by the consumer projects in tests/cmake/: a user's program that only includes ptq.
#include <ptq/version.hpp>

#if __has_include(<ptq/ptq.hpp>)
#include <ptq/ptq.hpp>
#endif

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
  return 0;
}
