// The gdb pretty-printers (tools/gdb/mosgrad_printers.py), loaded the documented way (`gdb -x
// tools/gdb/gdbinit`) on the debug test program: it stops inside a backward pass of
// Autograd.ChainRuleThroughSharedSubexpression (`sum((a·b + a)²)`, a = [1,2,3], b = [4,5,6]) and
// checks what `print` shows for a Tensor, a TensorImpl, a pointer and a shared_ptr to one, a Node
// and a shape. The printers read memory only, so a changed field in tensor/tensor.h or
// autograd/node.h breaks them silently until this test runs; docs/gdb.md's session on `mosgrad
// train` is checked by test_gdb_walkthrough.cpp.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/pattern.h"
#include "tests/test_trainer_util.h"

namespace {

namespace fs = std::filesystem;
const std::string kSourceDir = MOSGRAD_SOURCE_DIR;
const std::string kProgram = "build/debug/run_tests";
const std::string kTest = "Autograd.ChainRuleThroughSharedSubexpression";

// A gdb command and one line its output must hold: `…` stands for any text (addresses, lines).
struct Check {
  std::string command;
  std::string expected;  // empty: the command is a step on the way, its output is not checked
};

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool line_matches(const std::string& expected, const std::string& line) {
  static const mgtest::Pattern special(R"([.^$|()\[\]{}*+?\\])"), ellipsis("\xe2\x80\xa6");
  return mgtest::Pattern(ellipsis.replace(special.replace(expected, R"(\$&)"), ".*")).matches(line);
}

// Why the printers cannot be checked here, or "" when they can.
std::string skip_reason() {
  if (std::system("gdb --version > /dev/null 2>&1") != 0)
    return "gdb is not installed, so the gdb pretty-printers are not checked (apt-get install gdb)";
  if (!fs::exists(kSourceDir + "/" + kProgram))
    return kProgram + " is missing, so the gdb pretty-printers are not checked: `make debug` " +
           "builds it (`make check-gdb` does so before running the gdb tests)";
  return "";
}

// Why this gdb could not run the check, from what it printed, or "" when it could.
std::string unusable_reason(const std::string& output) {
  if (output.find("ptrace: Operation not permitted") != std::string::npos)
    return "gdb may not trace programs here (ptrace is not permitted), so the pretty-printers are "
           "not checked";
  if (output.find("Python scripting is not supported") != std::string::npos)
    return "this gdb is built without Python, so it cannot load the pretty-printers";
  return "";
}

// Runs the commands in one gdb with the printers loaded; *all gets everything it printed. Returns
// each command's output lines (gdb echoes a marker before each, as test_gdb_walkthrough does).
std::vector<std::vector<std::string>> run_gdb(const std::vector<Check>& checks, std::string* all) {
  const std::string dir = mgtest::temp_dir("gdb_printers");
  std::ofstream script(dir + "/commands.gdb");
  for (size_t i = 0; i < checks.size(); ++i)
    script << "echo \\n@@printers " << i << "@@\\n\n" << checks[i].command << "\n";
  script << "kill\n";
  script.close();
  const std::string shell = "cd '" + kSourceDir + "' && DEBUGINFOD_URLS= timeout 120 " +
                            "gdb -nx -q -batch -x tools/gdb/gdbinit -x '" + dir +
                            "/commands.gdb' --args " + kProgram + " --gtest_filter=" + kTest +
                            " > '" + dir + "/out.txt' 2>&1 < /dev/null";
  (void)std::system(shell.c_str());  // gdb's status says little; what it printed says what happened
  *all = read_text(dir + "/out.txt");
  std::vector<std::vector<std::string>> outputs(checks.size());
  std::istringstream out(*all);
  int current = -1;
  for (std::string line; std::getline(out, line);) {
    if (line.rfind("@@printers ", 0) == 0)
      current = std::stoi(line.substr(11));
    else if (current >= 0)
      outputs[current].push_back(line);
  }
  return outputs;
}

// Runs the commands and checks each one's expected line; a failure shows what gdb printed.
void expect_prints(const std::vector<Check>& checks) {
  std::string all;
  const std::vector<std::vector<std::string>> outputs = run_gdb(checks, &all);
  const std::string why = unusable_reason(all);
  if (!why.empty()) GTEST_SKIP() << why;
  EXPECT_EQ(all.find("Error in sourced command file"), std::string::npos)
      << "gdb stopped at an error:\n"
      << all;
  EXPECT_EQ(all.find("Python Exception"), std::string::npos) << "a printer raised:\n" << all;
  for (size_t i = 0; i < checks.size(); ++i) {
    if (checks[i].expected.empty()) continue;
    bool found = false;
    for (const std::string& line : outputs[i])
      found = found || line_matches(checks[i].expected, line);
    std::string got;
    for (const std::string& line : outputs[i]) got += "  | " + line + "\n";
    EXPECT_TRUE(found) << "(gdb) " << checks[i].command << "\ndid not print\n  "
                       << checks[i].expected << "\nit printed:\n"
                       << got;
  }
}

}  // namespace

// Stops at the backward of node #3, mul(u, u) with u = a·b + a = [5, 12, 21], then steps into
// mul's backward lambda: the objects a student prints there.
TEST(GdbPrinters, TensorTensorImplNodeAndShapeInsideABackward) {
  const std::string why = skip_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  const std::string u =
      "shape=[3] strides=[1] device=cpu requires_grad=true grad_fn=add "
      "values=[5, 12, 21]";
  const std::string ones =
      "Tensor shape=[3] strides=[1] device=cpu requires_grad=false "
      "grad_fn=none values=[1, 1, 1]";
  const std::string node =
      "Node #3 op=mul out_shape=[3] inputs=2 {[3] requires_grad=true "
      "grad_fn=add#2, [3] requires_grad=true grad_fn=add#2}";
  expect_prints({
      {"break mg::backward_of if node.id == 3", ""},
      {"run", "Breakpoint 1, mg::backward_of (node=" + node + ", grad=" + ones + ") at …"},
      {"print node", "$1 = " + node},
      {"print grad", "$2 = " + ones},
      {"print node.inputs[0]", "$3 = Tensor " + u},
      {"print *node.inputs[0].impl_._M_ptr", "$4 = TensorImpl " + u},
      {"print node.inputs[0].impl_._M_ptr", "$5 = (mg::TensorImpl *) 0x… -> TensorImpl " + u},
      // libstdc++'s printer shows the shared_ptr, ours its get().
      {"print node.inputs[0].impl_",
       "$6 = std::shared_ptr<mg::TensorImpl> (use count …) = "
       "{get() = (mg::TensorImpl *) 0x… -> TensorImpl " +
           u + "}"},
      {"print node.inputs[0].impl_._M_ptr->grad_fn._M_ptr",
       "$7 = (mg::Node *) 0x… -> Node #2 op=add out_shape=[3] inputs=2 {[3] requires_grad=true "
       "grad_fn=mul#1, [3] requires_grad=true grad_fn=none}"},
      // mg::Shape is std::vector<int64_t>: it keeps libstdc++'s printing.
      {"print node.out_shape", "$8 = std::vector of length 1, capacity 1 = {3}"},
      {"print *node.inputs[1].impl_._M_ptr->storage._M_ptr", "$9 = Storage size=3 device=cpu …"},
      {"step", ""},
      {"step", "operator() (__closure=…, g=" + ones + ") at autograd/ops_binary.cpp:…"},
      {"print a",
       "$10 = Tensor shape=[3] strides=[1] device=cpu requires_grad=false grad_fn=none "
       "values=[5, 12, 21]"},
      {"print g", "$11 = " + ones},
  });
}

// The cases a tiny graph does not reach by itself, made by editing the detached copy `a` that
// mul's backward captured (it shares u's storage): a view read through its strides, a tensor longer
// than the values shown, one on the GPU, an undefined one, and a pointer to nowhere.
TEST(GdbPrinters, ViewsGpuTensorsUndefinedAndUnreadable) {
  const std::string why = skip_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  const std::string impl = "a.impl_._M_ptr->";
  expect_prints({
      {"break mg::backward_of if node.id == 3", ""},
      {"run", ""},
      {"step", ""},
      {"step", ""},
      {"set var " + impl + "offset = 2", ""},
      {"set var " + impl + "strides._M_impl._M_start[0] = -1", ""},
      {"print a",
       "$1 = Tensor shape=[3] strides=[-1] offset=2 device=cpu requires_grad=false "
       "grad_fn=none values=[21, 12, 5]"},
      {"set var " + impl + "shape._M_impl._M_start[0] = 8", ""},
      {"set var " + impl + "strides._M_impl._M_start[0] = 0", ""},
      {"print a",
       "$2 = Tensor shape=[8] strides=[0] offset=2 … values=[21, 21, 21, 21, 21, 21, ...]"},
      {"set var " + impl + "storage._M_ptr->device = mg::Device::CUDA", ""},
      {"print a",
       "$3 = Tensor shape=[8] strides=[0] offset=2 device=cuda requires_grad=false "
       "grad_fn=none values=<on cuda>"},
      {"python print(gdb.Value(bytes(16), gdb.lookup_type('mg::Tensor')).format_string())",
       "Tensor(undefined)"},
      {"print (mg::Node *) 8",
       "$4 = (mg::Node *) 0x8 -> Node <unreadable: Cannot access memory at "
       "address 0x…>"},
      {"print (mg::TensorImpl *) 0", "$5 = (mg::TensorImpl *) 0x0"},
  });
}

// After the backward: a node being destroyed (its backward and inputs already released) and a leaf
// whose gradient has arrived, seen through `this` in Tensor::grad (called by the test's a.grad()).
TEST(GdbPrinters, FreedNodeAndLeafWithGradient) {
  const std::string why = skip_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  expect_prints({
      {"break mg::Node::~Node", ""},
      {"run", ""},
      {"print *this", "$1 = Node #… op=… out_shape=[…] backward=freed inputs=0 {}"},
      {"delete", ""},
      {"break mg::Tensor::grad", ""},
      {"continue", ""},
      {"print *this",
       "$2 = Tensor shape=[3] strides=[1] device=cpu requires_grad=true grad_fn=none "
       "grad=[3] values=[1, 2, 3]"},
  });
}

// The printers read memory only, never call the program, so they work on a core file: one is
// written at the breakpoint (gcore) and a second gdb prints from it with no process at all.
TEST(GdbPrinters, WorkOnACoreFile) {
  const std::string why = skip_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  const std::string core = mgtest::temp_dir("gdb_core") + "/run_tests.core";
  std::string all;
  run_gdb({{"break mg::backward_of if node.id == 3", ""}, {"run", ""}, {"gcore " + core, ""}},
          &all);
  if (!unusable_reason(all).empty()) GTEST_SKIP() << unusable_reason(all);
  if (!fs::exists(core))
    GTEST_SKIP() << "gcore wrote no core file here, so it is not checked:\n" << all;
  const std::string shell = "cd '" + kSourceDir + "' && DEBUGINFOD_URLS= timeout 120 gdb -nx -q " +
                            "-batch -x tools/gdb/gdbinit -ex 'print grad' " + kProgram + " '" +
                            core + "' 2>&1";
  FILE* pipe = popen(shell.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  for (char buf[4096]; fgets(buf, sizeof buf, pipe);) out += buf;
  pclose(pipe);
  EXPECT_NE(
      out.find("$1 = Tensor shape=[3] strides=[1] device=cpu requires_grad=false grad_fn=none "
               "values=[1, 1, 1]"),
      std::string::npos)
      << out;
}
