// Session 37 probe: the time at which the library's first (highest-priority) static initializer runs,
// so dlopen's time splits into mapping + relocation and the initializers (registrations).
#include <time.h>
extern "C" __attribute__((visibility("default"))) double jk_probe_first_init = 0;
__attribute__((constructor(101))) static void jk_probe_stamp() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  jk_probe_first_init = now.tv_sec + now.tv_nsec * 1e-9;
}
