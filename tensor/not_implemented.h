// The course kit's stub (docs/course/README.md). The sources mark the bodies a student writes
// with one comment line at each end:
//   // TASK 3.1: d(a-b)/da = 1, d(a-b)/db = -1, each summed back to its input's shape
//   ...the instructor's solution...
//   // END TASK 3.1
// `make student OUT=DIR` copies the repository with each region's body replaced by a call to
// not_implemented, so the student's tree builds, and every test of an unsolved task fails with
// the lab, the task and the hint, instead of crashing or passing by accident.
#pragma once

#include <stdexcept>
#include <string>

namespace mg {

struct NotImplemented : std::logic_error {
  using std::logic_error::logic_error;
};

// Throws NotImplemented("not implemented yet: lab 3, task 3.1 — <hint>").
[[noreturn]] inline void not_implemented(const char* task, const char* hint) {
  throw NotImplemented(std::string("not implemented yet: ") + task + " — " + hint);
}

}  // namespace mg
