// An on/off switch read from the environment with the loader's words (loader._env_flag), so that
// JITKERNELS_CPU_AVX512=false means what JITKERNELS_CUDA=false means.
#pragma once
#include <cctype>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace jk {

// 1/true/yes/on and 0/false/no/off in any case; unset, empty or "auto" gives `default_value`.
// Any other value is an error naming the variable (rather than being read as one or the other). No torch
// header: .cu files include this (std::invalid_argument reaches Python as ValueError).
inline bool env_flag(const char* name, bool default_value) {
  const char* raw = std::getenv(name);
  std::string value;
  for (const char* c = raw; c != nullptr && *c != '\0'; ++c) {
    if (!std::isspace(static_cast<unsigned char>(*c))) value += static_cast<char>(std::tolower(static_cast<unsigned char>(*c)));
  }
  if (value.empty() || value == "auto") return default_value;
  if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
  if (value == "0" || value == "false" || value == "no" || value == "off") return false;
  throw std::invalid_argument(std::string(name) + " must be 0 or 1, got '" + raw + "'");
}

}  // namespace jk
