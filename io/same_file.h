// Whether two paths name the same file, decided by the file, not by how the paths are spelled:
// "x.ckpt", "./x.ckpt", "runs/../x.ckpt", a hard link and a symlink to it are all the same file.
// Commands that read one file and write another (export, import, plot) check this before any work,
// so that an output can never replace the input it is made from.
#pragma once

#include <string>

namespace mg {

// True when a and b are one file: the same device and inode once symlinks are followed; when one
// of them does not exist yet, when they resolve to the same absolute path.
bool same_file(const std::string& a, const std::string& b);

// Throws std::invalid_argument "<command>: <flag> <output> is <what> (<input>); choose another
// file" when same_file(output, input).
void require_other_file(const std::string& command, const std::string& flag,
                        const std::string& output, const std::string& input,
                        const std::string& what);

}  // namespace mg
