// A TU that includes the umbrella header and uses a little of it.
#include <ptq/ptq.hpp>

#include <cstdio>

int main() {
  std::printf("ptq %s, kernels %s\n", PTQ_VERSION_STRING,
              ptq::kernels::default_kernels().arch_name);
  return 0;
}
