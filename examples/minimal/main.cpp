// Minimal embedding of ptq: link the ptq::ptq target and include what you use.
#include <ptq/version.hpp>

#if __has_include(<ptq/config.hpp>)
#include <ptq/config.hpp>
#endif

#include <cstdio>

int main() {
  std::printf("ptq %s\n", PTQ_VERSION_STRING);
  return 0;
}
