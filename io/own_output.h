// An output the user names (export's and import's --out FILE, graph's --out, the fixed files in
// rank's and bottleneck-demo's --out DIR) may already be there. mosgrad replaces only a file it
// wrote there before, of the kind the command writes; anything else (a user's notes, a run's
// checkpoint, a directory, a symlink) is refused before any work, so an output flag never loses a
// file mosgrad did not write.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace mg {

// Returns when nothing is at `path`, or when a regular file is there that `ours(path)` recognises
// (an exception from `ours` counts as "not ours"). Otherwise throws std::invalid_argument
// "<command>: <flag> <path> is there and is not <kind>; ..." (kind: "a safetensors file written
// by mosgrad export", ...).
void require_own_output(const std::string& command, const std::string& flag,
                        const std::string& path, const std::string& kind,
                        const std::function<bool(const std::string& path)>& ours);

// The folder `dir` (or, while it does not exist yet, the nearest folder above it, where mosgrad
// will make it) lets this process create files there: a probe file (probe_file below) is
// created (through io/file_ops.h, so a test can refuse it) and removed. Checked before any work, so
// that a run's steps or an evaluation are not lost to a permission error at their first save.
// Throws std::invalid_argument "<flag> <given>: cannot create files in <folder> (<reason>); ..."
// (`given`: the flag's value when `dir` is the folder of a file it names; default `dir`), or, when
// the path leads through a symlink to nothing, "<flag> <given>: <link> is a symlink to <target>,
// which does not exist; ...".
void require_writable_dir(const std::string& flag, const std::string& dir,
                          const std::string& given = "");

// The probe require_writable_dir makes in `folder`: "<folder>/.mosgrad-probe.tmp.<pid>.<n>", named
// as a save's temporary is, so that one a killed process left is a dead temporary
// (io/atomic_file.h): a run folder holding nothing else still counts as empty.
std::string probe_file(const std::string& folder, long long pid, uint64_t n);

// require_writable_dir for the folder an output file goes in ("." for a bare name), the error
// naming the file as given; that folder must exist (a file's folder is not made for it).
void require_writable_folder_of(const std::string& flag, const std::string& file);

// For text outputs: the file's first line is `first_line` (a CSV's header, a DOT graph's opening).
bool first_line_is(const std::string& path, const std::string& first_line);

}  // namespace mg
