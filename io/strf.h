// strf: printf into a std::string. Every number the progress display, the metrics file and the
// plot show goes through here, so each one's format is a printf format next to its use.
#pragma once

#include <string>

namespace mg {

std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace mg
