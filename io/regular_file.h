// mosgrad reads and writes only regular files. Anything else at a file's name is refused, naming
// the file and what it is, because none of it can work and some of it never ends: a FIFO (named
// pipe) blocks open(2) until another process opens its other end, which may be never, and a first
// Ctrl-C only asks training to stop cleanly, so it would not end the wait; a character device reads
// as endless or no bytes (/dev/zero is no empty checkpoint); a socket cannot be opened at all.
// Every whole-file read (io/read_file.h), the metrics file a run appends to and the run lock open
// their file here.
#pragma once

#include <sys/types.h>

#include <stdexcept>
#include <string>

namespace mg {

// What a file of mode `mode` (stat's st_mode) is, in words: "a regular file", "a directory",
// "a FIFO (named pipe)", "a character device", "a block device", "a socket", "a symlink".
std::string file_kind(mode_t mode);

// "<what> <path> is a FIFO (named pipe), not a regular file: mosgrad reads only regular files"
// (writing: "... writes only regular files, and never removes or replaces this one: move it away").
std::runtime_error not_a_regular_file(const std::string& what, const std::string& path, mode_t mode,
                                      bool writing);

// Opens `path` read-only, following symlinks, never waiting on a FIFO. Returns a blocking
// descriptor of a regular file, or -1 with errno when open fails (nothing there, no permission: the
// caller says so); throws not_a_regular_file for anything else there. Not through io/file_ops.h,
// which hooks only the calls that change files.
int open_regular_to_read(const std::string& path, const std::string& what);

// As open_regular_to_read, for writing: `flags` and `mode` as for open(2) (O_CREAT makes a regular
// file), through file_ops::open, so the I/O-fault tests can fail it like every open that writes.
int open_regular_to_write(const std::string& path, int flags, mode_t mode, const std::string& what);

// Throws not_a_regular_file's message as std::invalid_argument (as the flags' errors are) when
// something at `path` is neither a regular file nor a symlink (judged by lstat, without opening
// it; a symlink is the caller's to judge). Nothing there is fine. For the checks made before any
// work, so a run is refused before it starts.
void refuse_special_file(const std::string& path, const std::string& what, bool writing);

}  // namespace mg
