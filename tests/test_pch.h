// Precompiled once per build tree and included first in every test file (Makefile: TEST_PCH):
// GoogleTest's header and the standard headers the tests use are most of what a test file costs
// to compile. Only headers that never change with the project belong here, so editing mosgrad
// never rebuilds the precompiled header.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
