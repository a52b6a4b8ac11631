// A lock on a run directory, so two trainings never write into one --save: the second is refused
// (after at most half a second, the time a process that only asks who holds it may take) with the
// other's process id, start time and command line, instead of the two
// overwriting each other's checkpoints (and the loser blaming a full disk).
//
// How: flock(2) on "<dir>/mosgrad.lock", which the holder fills with a line describing itself.
// The kernel releases a flock when its process ends, however it ends (kill -9 included), so a
// crashed run never leaves a stale lock behind; the file itself stays, and the next run reuses it.
// The file is opened without following symlinks, so a link planted at its name is an error, and
// a file there that holds anything but such a line is the user's, and is refused, not written.
// A folder copied with `cp -al` shares its lock file with the original: the first run to take it
// (in either folder) gives its folder a lock file of its own; a refusal while the other folder's
// run holds the shared one says so.
#pragma once

#include <stdexcept>
#include <string>

namespace mg {

class RunLock {
 public:
  // Takes the lock on `dir` (which must exist) for this process, recording `command` (one line,
  // e.g. "mosgrad train --save runs/x"). Throws std::runtime_error when another process holds it
  // (still, half a second later: one asking holder() holds it for an instant),
  // naming that process and saying to choose another `flag` (the option that named `dir`), or
  // when the lock file cannot be opened or is not a regular file (a FIFO, a device: refused at
  // once, never waited on).
  RunLock(const std::string& dir, const std::string& command, const std::string& flag = "--save");
  ~RunLock();  // releases the lock
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  static std::string file_in(const std::string& dir);  // "<dir>/mosgrad.lock"

  // Throws the constructor's "in use by ..." error when another process holds `dir`'s lock, and
  // takes nothing: for the checks before any work (a --resume into a folder whose first run has
  // not saved yet is told the folder is busy, not that it holds no checkpoint).
  static void refuse_if_held(const std::string& dir, const std::string& flag = "--save");
  // Who holds `dir`'s lock when another process does (the line it wrote), else "" (also when
  // what is at the lock's name is not a regular file, without waiting on a FIFO there).
  static std::string holder(const std::string& dir);
  // The error for a lock `who` holds.
  static std::runtime_error in_use(const std::string& dir, const std::string& who,
                                   const std::string& flag = "--save");

 private:
  int fd_ = -1;
};

}  // namespace mg
